//! Runs the real `shape` binary: feed bytes, collect bytes, status and
//! standard error, with the environment cleared of anything that would
//! change its output.

use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a finished run left behind.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// The exit code, failing the test if shape was killed by a signal.
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| panic!("killed: {:?}; stderr: {}", self.status, self.stderr))
    }
}

/// A `shape` command with arguments.
pub fn shape<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = Command::new(env!("CARGO_BIN_EXE_shape"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    command
}

/// Runs `command` with `input` on standard input, written in pieces of
/// `piece` bytes from another thread.
pub fn run_with_input(mut command: Command, input: Vec<u8>, piece: usize) -> Run {
    command.stdin(Stdio::piped());
    let started = Instant::now();
    let mut child = spawn(command);
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for part in input.chunks(piece.max(1)) {
            if stdin.write_all(part).is_err() {
                break;
            }
        }
    });
    let run = collect(child, started);
    feeder.join().unwrap();
    run
}

/// Runs `command` with the given standard input.
pub fn run(mut command: Command, stdin: Stdio) -> Run {
    command.stdin(stdin);
    let started = Instant::now();
    collect(spawn(command), started)
}

/// Runs `command` and checks that it is refused as bad usage: status 2,
/// one line on stderr, naming `flag`.
pub fn assert_refused(command: Command, flag: &str) {
    let run = run(command, Stdio::null());
    assert_eq!(run.code(), 2, "{flag}: {}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{flag}: {}", run.stderr);
    assert!(run.stderr.contains(flag), "{flag}: {}", run.stderr);
}

/// Runs `command` with no input and its standard output sent to
/// `stdout` instead of collected.
pub fn run_into(command: Command, stdout: Stdio) -> Run {
    let started = Instant::now();
    let mut child = spawn_into(command, stdout);
    let stderr = drain(child.stderr.take().unwrap());
    let status = child.wait().unwrap();
    Run {
        status,
        stdout: Vec::new(),
        stderr: String::from_utf8_lossy(&stderr.join().unwrap()).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// Starts `command` with no input, its standard output sent to `stdout`
/// and its standard error piped.
fn spawn_into(mut command: Command, stdout: Stdio) -> Child {
    command
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("shape runs")
}

fn spawn(mut command: Command) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("shape runs")
}

/// Reads standard output and error to their ends and waits.
fn collect(mut child: Child, started: Instant) -> Run {
    let stderr = drain(child.stderr.take().unwrap());
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&stderr.join().unwrap()).into_owned();
    Run {
        status,
        stdout,
        stderr,
        elapsed,
    }
}

pub fn drain(mut from: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        bytes
    })
}

/// `len` random bytes, the same for the same seed.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0; len];
    fastrand::Rng::with_seed(seed).fill(&mut bytes);
    bytes
}

/// A scratch directory, removed when dropped.
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let prefix = format!("shape-test-{name}-");
        Scratch(tempfile::Builder::new().prefix(&prefix).tempdir().unwrap())
    }

    pub fn path(&self) -> &std::path::Path {
        self.0.path()
    }

    /// Writes `bytes` to a file `name` in the directory, returning its path.
    pub fn file(&self, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = self.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

/// Bytes read from a stream on a thread of their own, timestamped as they
/// arrive.
pub struct Arrivals {
    times: std::sync::Arc<std::sync::Mutex<Vec<(Instant, usize)>>>,
    reader: Option<JoinHandle<Vec<u8>>>,
}

impl Arrivals {
    /// Starts reading `from` to its end, keeping the bytes only if `keep`.
    pub fn record(mut from: impl Read + Send + 'static, keep: bool) -> Arrivals {
        let times = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reader = {
            let times = times.clone();
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                let mut buffer = vec![0; 1 << 20];
                while let Ok(n @ 1..) = from.read(&mut buffer) {
                    times.lock().unwrap().push((Instant::now(), n));
                    if keep {
                        kept.extend_from_slice(&buffer[..n]);
                    }
                }
                kept
            })
        };
        Arrivals {
            times,
            reader: Some(reader),
        }
    }

    /// Bytes that arrived in [from, to).
    pub fn bytes_between(&self, from: Instant, to: Instant) -> usize {
        self.times
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| *at >= from && *at < to)
            .map(|(_, n)| n)
            .sum()
    }

    /// Waits for the stream to end; what was kept.
    pub fn finish(mut self) -> Vec<u8> {
        self.reader.take().unwrap().join().unwrap()
    }

    /// Waits for the stream to end; what was kept, and the size of every
    /// read.
    pub fn reader_output(mut self) -> (Vec<u8>, Vec<usize>) {
        let kept = self.reader.take().unwrap().join().unwrap();
        (kept, self.reads())
    }

    /// The size of every read, in order.
    pub fn reads(&self) -> Vec<usize> {
        self.times.lock().unwrap().iter().map(|&(_, n)| n).collect()
    }
}

/// A shape running in the background, its output read and timestamped as
/// it arrives.
pub struct Running {
    pub child: Child,
    pub pid: u32,
    arrivals: Option<Arrivals>,
    /// Its standard error so far, and the thread that reads it.
    said: Arc<Mutex<Vec<u8>>>,
    stderr: Option<JoinHandle<()>>,
}

impl Running {
    /// Writes `data` to the child's piped stdin from a thread of its own,
    /// in writes of `piece` bytes, closing it at the end.
    pub fn feed(&mut self, data: &[u8], piece: usize) -> JoinHandle<()> {
        let mut stdin = self.child.stdin.take().expect("a piped stdin");
        let data = data.to_vec();
        std::thread::spawn(move || {
            for piece in data.chunks(piece) {
                stdin.write_all(piece).unwrap();
            }
        })
    }

    /// Starts `command` with `stdin`, keeping the output only if `keep`.
    pub fn start(mut command: Command, stdin: Stdio, keep: bool) -> Running {
        let mut child = command
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("shape runs");
        let arrivals = Arrivals::record(child.stdout.take().unwrap(), keep);
        let said = Arc::new(Mutex::new(Vec::new()));
        let stderr = {
            let said = said.clone();
            let mut from = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while let Ok(n @ 1..) = from.read(&mut buffer) {
                    said.lock().unwrap().extend_from_slice(&buffer[..n]);
                }
            })
        };
        let pid = child.id();
        Running {
            child,
            pid,
            arrivals: Some(arrivals),
            said,
            stderr: Some(stderr),
        }
    }

    /// Waits up to ten seconds for a line of standard error containing
    /// `text`, and returns all it said by then.
    pub fn wait_for_stderr(&self, text: &str) -> String {
        self.wait_for_stderr_times(text, 1)
    }

    /// Waits up to ten seconds for `times` lines of standard error
    /// containing `text`, and returns all it said by then.
    pub fn wait_for_stderr_times(&self, text: &str, times: usize) -> String {
        wait_for_lines(text, times, || {
            String::from_utf8_lossy(&self.said.lock().unwrap()).into_owned()
        })
    }

    /// All it said on standard error, once it has ended.
    fn all_said(&mut self) -> String {
        self.stderr.take().unwrap().join().unwrap();
        String::from_utf8_lossy(&self.said.lock().unwrap()).into_owned()
    }

    /// Bytes that arrived in [from, to).
    pub fn bytes_between(&self, from: Instant, to: Instant) -> usize {
        self.arrivals
            .as_ref()
            .expect("only taken by finish")
            .bytes_between(from, to)
    }

    /// Waits up to ten seconds for `bytes` to have arrived since `from`.
    pub fn wait_for_bytes(&self, from: Instant, bytes: usize) {
        wait_until(&format!("{bytes} bytes to come"), || {
            self.bytes_between(from, Instant::now()) >= bytes
        });
    }

    /// Bytes per second that arrived from `from` for `length`, waiting for
    /// that window to pass.
    pub fn rate_over(&self, from: Instant, length: Duration) -> f64 {
        sleep_until(from + length);
        self.bytes_between(from, from + length) as f64 / length.as_secs_f64()
    }

    /// Sends `signals` in turn, every 2 ms, until it exits or `most` have
    /// been sent; returns how many were.
    pub fn storm(&mut self, signals: &[rustix::process::Signal], most: usize) -> usize {
        let pid = rustix::process::Pid::from_raw(self.pid as i32).unwrap();
        let mut sent = 0;
        while self.child.try_wait().unwrap().is_none() && sent < most {
            for &signal in signals {
                let _ = rustix::process::kill_process(pid, signal);
                sent += 1;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        sent
    }

    /// Sends `signal` to the running shape.
    pub fn signal(&self, signal: rustix::process::Signal) {
        send_signal(self.pid, signal);
    }

    /// Ends it (SIGTERM unless it already exited) and returns its status,
    /// what it wrote, and its standard error.
    pub fn stop(mut self) -> (ExitStatus, Vec<u8>, String) {
        if self.child.try_wait().unwrap().is_none() {
            self.signal(rustix::process::Signal::TERM);
        }
        self.finish()
    }

    /// Waits for it to exit by itself; what it wrote comes with the size
    /// of every read that took it in.
    pub fn finish_with_reads(mut self) -> (ExitStatus, (Vec<u8>, Vec<usize>), String) {
        let status = self.child.wait().unwrap();
        let arrivals = self.arrivals.take().unwrap();
        let stderr = self.all_said();
        // The reader ends with the stream: the reads are all in.
        let output = arrivals.reader_output();
        (status, output, stderr)
    }

    /// Waits for it to exit by itself.
    pub fn finish(mut self) -> (ExitStatus, Vec<u8>, String) {
        let status = self.child.wait().unwrap();
        let output = self.arrivals.take().unwrap().finish();
        let stderr = self.all_said();
        (status, output, stderr)
    }
}

/// Waits up to ten seconds for `done` to hold, looking again and again: for
/// what the program does that it says nowhere (a file made, a count
/// grown, a server listening). Panics, naming `what`, if it never does.
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    wait_up_to(Duration::from_secs(10), what, done);
}

/// As [`wait_until`], for up to `most`: for what takes its own time (a
/// cluster forming, a failover).
pub fn wait_up_to(most: Duration, what: &str, done: impl FnMut() -> bool) {
    assert!(comes_within(most, done), "waited {most:?} for {what}");
}

/// True once `done` holds, false if it has not within `most`: for a wait
/// whose failure is not the test's (a tool that will not start).
pub fn comes_within(most: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + most;
    // Soon at first; then less often, so that a look that costs (a
    // process started each time) leaves the machine to what it waits for.
    let mut pause = Duration::from_millis(2);
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    true
}

/// Sleeps until `at`, for a test whose subject is time itself: a window
/// a rate is measured over, an idle spell, an outage of a given length.
pub fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

/// Sleeps for `length`, for a test whose subject is time itself (see
/// [`sleep_until`]).
pub fn sleep_for(length: Duration) {
    std::thread::sleep(length);
}

/// Each shape's rate over `length` from `from`, after that window passed.
pub fn rates(shapes: &[Running], from: Instant, length: Duration) -> Vec<f64> {
    sleep_until(from + length);
    shapes
        .iter()
        .map(|s| s.bytes_between(from, from + length) as f64 / length.as_secs_f64())
        .collect()
}

/// A private runtime directory for one test (`XDG_RUNTIME_DIR`), so that
/// tests do not see each other's shapes, control messages or shares.
pub struct Runtime(pub Scratch);

impl Runtime {
    pub fn new(name: &str) -> Runtime {
        use std::os::unix::fs::PermissionsExt;
        let scratch = Scratch::new(name);
        std::fs::set_permissions(&scratch.0, std::fs::Permissions::from_mode(0o700)).unwrap();
        Runtime(scratch)
    }

    /// `shape ARGS` using this runtime directory.
    pub fn shape<const N: usize>(&self, args: [&str; N]) -> Command {
        let mut command = shape(args);
        command.env("XDG_RUNTIME_DIR", self.0.path());
        command
    }

    /// Starts a shape reading /dev/zero, and waits until it has registered
    /// for remote control.
    pub fn start<const N: usize>(&self, args: [&str; N]) -> Running {
        let running = Running::start(
            self.shape(args),
            Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
            false,
        );
        self.wait_registered(running.pid);
        running
    }

    /// Starts `count` shapes reading /dev/zero.
    pub fn start_many(&self, count: usize, args: &[&str]) -> Vec<Running> {
        (0..count)
            .map(|_| {
                let mut command = self.shape(["--progress", "none"]);
                command.args(args);
                Running::start(
                    command,
                    Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
                    false,
                )
            })
            .collect()
    }

    pub fn wait_registered(&self, pid: u32) {
        let marker = self.control_dir().join(format!("{pid}.shape"));
        wait_until(&format!("shape {pid} to register"), || marker.exists());
    }

    /// `shape --remote PID ARGS`.
    pub fn remote<const N: usize>(&self, pid: u32, args: [&str; N]) -> Run {
        let mut command = self.shape(args);
        command.arg("--remote").arg(pid.to_string());
        run(command, Stdio::null())
    }

    pub fn control_dir(&self) -> std::path::PathBuf {
        self.0.path().join("shape")
    }

    pub fn share_file(&self, name: &str) -> std::path::PathBuf {
        self.control_dir().join(format!("{name}.share"))
    }
}

/// A shape listening on an address it chose (`--listen` with port 0),
/// its standard error read on a thread of its own.
pub struct Listening {
    pub child: Child,
    /// Where it listens, as it said: `127.0.0.1:41234` or `unix:PATH`.
    pub address: String,
    stderr: Arc<Mutex<String>>,
}

/// What a shape that has just started says after `prefix` on the first
/// line of its standard error (where it listens or serves), and the rest
/// of what it says, collected by a thread as it comes.
pub fn where_it_says(child: &mut Child, prefix: &str) -> (String, Arc<Mutex<String>>) {
    let (first, rest) = first_said(child);
    let said = first
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("shape did not say {prefix:?}: {first:?}"))
        .to_string();
    (said, rest)
}

/// The first line `child` says on standard error, and the rest of what it
/// says, collected by a thread as it comes.
fn first_said(child: &mut Child) -> (String, Arc<Mutex<String>>) {
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    (first.trim_end().to_string(), collect_lines(lines))
}

/// The first line `child` writes on its standard output (piped), which
/// it no longer owns: a server's saying where it listens.
pub fn first_line(child: &mut Child) -> String {
    use std::io::BufRead;
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().expect("a piped output"))
        .read_line(&mut first)
        .unwrap();
    first
}

/// What `child` says on standard error, collected as it comes on a
/// thread of its own.
pub fn said_by(child: &mut Child) -> Arc<Mutex<String>> {
    collect_lines(std::io::BufReader::new(child.stderr.take().unwrap()))
}

/// The lines of `lines`, collected as they come on a thread of their own.
fn collect_lines(lines: impl std::io::BufRead + Send + 'static) -> Arc<Mutex<String>> {
    let stderr = Arc::new(Mutex::new(String::new()));
    {
        let stderr = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                let mut text = stderr.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
    }
    stderr
}

impl Listening {
    /// Starts `command` (which has `--listen`) with `stdout`, and waits for
    /// it to say where it listens.
    pub fn start(command: Command, stdout: Stdio) -> Listening {
        Listening::try_start(command, stdout)
            .unwrap_or_else(|said| panic!("shape did not say where it listens: {said:?}"))
    }

    /// As [`Listening::start`]; or, if the first line it says is anything
    /// else (that it cannot listen there), that line, the shape ended.
    pub fn try_start(command: Command, stdout: Stdio) -> Result<Listening, String> {
        let mut child = spawn_into(command, stdout);
        let (first, stderr) = first_said(&mut child);
        // Where it listens is an address alone; that it cannot listen
        // there may be said in the same words, then ": " and why.
        match first
            .strip_prefix("shape: listening on ")
            .filter(|address| !address.contains(": "))
        {
            Some(address) => Ok(Listening {
                child,
                address: address.to_string(),
                stderr,
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(first)
            }
        }
    }

    /// Waits for it to exit, and returns its status and what it wrote
    /// (its standard output must be piped).
    pub fn finish(mut self) -> (ExitStatus, Vec<u8>) {
        let mut output = Vec::new();
        let mut stdout = self.child.stdout.take().expect("a piped output");
        stdout.read_to_end(&mut output).unwrap();
        (self.child.wait().unwrap(), output)
    }

    /// What it has said on standard error since it said where it listens.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits up to ten seconds for a line of standard error containing
    /// `text`, and returns all it said by then.
    pub fn wait_for_stderr(&self, text: &str) -> String {
        wait_until_said(&self.stderr, text)
    }
}

/// Waits up to ten seconds for a line of `said` (what a shape has said,
/// collected as it comes) containing `text`, and returns all it said by
/// then.
pub fn wait_until_said(said: &Mutex<String>, text: &str) -> String {
    wait_for_line(text, || said.lock().unwrap().clone())
}

/// Waits up to ten seconds for a line containing `text` in what `said`
/// gives, and returns all of it by then.
fn wait_for_line(text: &str, said: impl Fn() -> String) -> String {
    wait_for_lines(text, 1, said)
}

/// Waits up to ten seconds for `times` lines containing `text` in what
/// `said` gives, and returns all of it by then.
fn wait_for_lines(text: &str, times: usize, said: impl Fn() -> String) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = said();
        if now.lines().filter(|line| line.contains(text)).count() >= times {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "never said {text:?} {times} times: {now}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A shape left running by a test that failed is ended with it.
impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Sends `signal` to process `pid`.
pub fn send_signal(pid: u32, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tests skipped in this run, and why.
static SKIPPED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Notes that the running test is skipped, and why: said now (shown with
/// --nocapture) and again, with every other, in one line at the end of
/// the run, so that a green run never hides what did not run.
pub fn skipped(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    eprintln!("skipped: {why}");
    SKIPPED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(format!("{test} ({why})"));
}

// SAFETY: runs as the test binary exits, after every test: it takes a
// lock no thread holds any more and writes one line to fd 2, nothing of
// std's I/O, which may be gone by then.
#[dtor::dtor(unsafe)]
fn say_what_was_skipped() {
    let skipped = SKIPPED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if skipped.is_empty() {
        return;
    }
    let line = format!(
        "\nSKIPPED {} test(s), which passed without running: {}\n",
        skipped.len(),
        skipped.join("; ")
    );
    let _ = rustix::io::write(rustix::stdio::stderr(), line.as_bytes());
}

/// True if `tool` can be run; if not, a test that needs it is skipped
/// (said on stderr), except under CI, where .ci/run installs every tool and
/// a missing one fails the test.
pub fn installed(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok();
    available(
        found,
        &format!("{tool} is not installed"),
        ".ci/run installs it",
    )
}

/// `shape` run under prlimit with at most `most` descriptors, to be
/// given its arguments; `None` (said) where prlimit is missing.
pub fn shape_short_of_descriptors(most: u32) -> Option<Command> {
    if !installed("prlimit") {
        return None;
    }
    let mut command = Command::new("prlimit");
    command
        .arg(format!("--nofile={most}:{most}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_shape"));
    Some(command)
}

/// `found`, for what a test needs: if it was not, the test is skipped
/// (`why` is said at the end of the run), except under CI, where .ci/run
/// provides everything (`how`) and a missing one fails the test.
pub fn available(found: bool, why: &str, how: &str) -> bool {
    if found {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "{why}; {how}");
    skipped(why);
    false
}

/// The memory of process `pid` that `field` of its status gives (`VmRSS`
/// resident now, `VmHWM` at its peak), in KiB. The process must be
/// running: a test that reads a dead one's memory fails.
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("process {pid} has no {field}: it is not running"))
}

/// True if a test can make a mount namespace of its own (`unshare
/// --map-root-user --mount`); if not, the test is skipped (said), except
/// under CI, which needs it.
pub fn mount_namespaces() -> bool {
    let can = Command::new("unshare")
        .args(["--map-root-user", "--mount", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !can {
        assert!(
            std::env::var_os("CI").is_none(),
            "unshare --map-root-user --mount failed; CI needs it"
        );
        skipped("no mount namespace here (unshare --map-root-user --mount)");
    }
    can
}

/// `shape ARGS` in a mount namespace of its own whose /etc/hosts is the
/// file `hosts` (bound, so that writing to the file in place is seen):
/// names that the test decides. Check [`mount_namespaces`] first.
pub fn shape_with_hosts(hosts: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new("unshare");
    command
        .args(["--map-root-user", "--mount", "sh", "-c"])
        .arg("mount --bind \"$1\" /etc/hosts && shift && exec \"$@\"")
        .arg("sh")
        .arg(hosts)
        .arg(env!("CARGO_BIN_EXE_shape"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    command
}

/// A loopback TCP port that refuses connections for as long as the
/// returned socket lives: bound, so nobody else can take the port, and not
/// listening, so a connection to it is refused.
pub fn refusing_port() -> (std::os::fd::OwnedFd, u16) {
    use rustix::net::{AddressFamily, SocketType, ipproto};
    let socket =
        rustix::net::socket(AddressFamily::INET, SocketType::STREAM, Some(ipproto::TCP)).unwrap();
    let any_port = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    rustix::net::bind(&socket, &any_port).unwrap();
    let bound: std::net::SocketAddr = rustix::net::getsockname(&socket)
        .unwrap()
        .try_into()
        .unwrap();
    (socket, bound.port())
}

/// Fails the test unless `stderr` says `text`, and shows all it said.
#[track_caller]
pub fn assert_says(stderr: &str, text: &str) {
    assert!(
        stderr.contains(text),
        "expected {text:?} on standard error, which said:\n{stderr}"
    );
}

/// A shape on a "machine" of its own (a runtime directory of its own, so
/// that it cannot meet others through a local share), reading /dev/zero.
pub fn machine(runtime: &Runtime, args: &[&str]) -> Running {
    let mut command = runtime.shape(["--progress", "none"]);
    command.args(args);
    Running::start(
        command,
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
        false,
    )
}

/// Waits up to `most` for `child` to end by itself: its status, or `None`
/// once it overran and was killed, for the caller to say what went on.
pub fn exit_within(child: &mut Child, most: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + most;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts a server that cannot listen on port 0 and say which port it got
/// (redis-server, dnsmasq, iperf3): `start` on a port drawn at random,
/// and again on another each time it gives `None`, which it must do only
/// when the server said its port was in use.
///
/// A port number cannot be kept for another program: one seen free a
/// moment ago may be taken before the server binds it, so the server
/// binding it is the only test, and trying again the only way such a
/// server starts without a race. The ports are drawn from below the
/// range the system hands out for port 0 and for connections
/// (`ip_local_port_range`), with `span` more ports free above each (a
/// Redis Cluster node's bus is its port + 10000): no server on port 0
/// and no connection is ever given one of those, so a clash comes only
/// from another program that chose its port too.
pub fn on_a_port_of_its_own<T>(
    what: &str,
    span: u16,
    mut start: impl FnMut(u16) -> Option<T>,
) -> T {
    let handed_out_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let highest = handed_out_from.saturating_sub(span + 1);
    assert!(
        highest > 2048,
        "ports from {handed_out_from} are handed out: none is left below for {what}"
    );
    for _ in 0..20 {
        if let Some(started) = start(fastrand::u16(1024..=highest)) {
            return started;
        }
    }
    panic!("{what}: 20 ports drawn, and each was in use");
}

/// Waits up to ten seconds for a server started by the test to say a line
/// containing `ready` in the log it writes to `log` (the pipe of its
/// standard output or error): `Ok` once it has, the rest of its log read
/// on a thread of its own and dropped, so that the server never waits on
/// a full pipe; or `Err` with all it said, once its log has ended without
/// that line (it has exited).
pub fn started_saying(log: impl Read + Send + 'static, ready: &str) -> Result<(), String> {
    use std::io::BufRead;
    use std::sync::mpsc::RecvTimeoutError;
    let (lines, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut log = std::io::BufReader::new(log);
        let mut line = Vec::new();
        while log.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            // Nobody listens once it is ready: the rest is read and dropped.
            let _ = lines.send(String::from_utf8_lossy(&line).into_owned());
            line.clear();
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut all = String::new();
    loop {
        match said.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains(ready) => return Ok(()),
            Ok(line) => all.push_str(&line),
            Err(RecvTimeoutError::Disconnected) => return Err(all),
            Err(RecvTimeoutError::Timeout) => panic!("never said {ready:?}: {all}"),
        }
    }
}

/// A loopback UDP port that refuses datagrams for as long as the returned
/// socket lives: bound, so nobody else can take the port, and connected
/// to itself, so that a datagram from anywhere else finds no socket to
/// take it and is answered as refused (ICMP port unreachable), as at a
/// port nobody holds.
pub fn refusing_udp_port() -> (std::net::UdpSocket, u16) {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let address = socket.local_addr().unwrap();
    socket.connect(address).unwrap();
    (socket, address.port())
}

/// The repository's `path`.
pub fn ours(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// True if `path` exists; if not, the test is skipped, except under CI.
pub fn set_up(path: &std::path::Path) -> bool {
    available(
        path.exists(),
        &format!("{} is missing: run tests/clients/setup", path.display()),
        ".ci/run installs it with tests/clients/setup",
    )
}

/// The CPU seconds each thread of process `pid` whose name begins with
/// `named` has spent so far, by name. A thread just made has its maker's
/// name until it takes its own, so a name is counted once (the most CPU
/// of those that bear it).
pub fn threads_cpu_seconds(pid: u32, named: &str) -> std::collections::BTreeMap<String, f64> {
    let mut threads = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let Ok(name) = std::fs::read_to_string(task.join("comm")) else {
            continue;
        };
        let ns: Option<f64> = std::fs::read_to_string(task.join("schedstat"))
            .ok()
            .and_then(|stat| stat.split_whitespace().next()?.parse().ok());
        if let Some(ns) = ns
            && name.starts_with(named)
        {
            let cpu: &mut f64 = threads.entry(name.trim_end().to_string()).or_default();
            *cpu = cpu.max(ns / 1e9);
        }
    }
    threads
}

/// How many connections accepted on `port` each epoll instance of
/// process `pid` watches, for each instance that watches any: the
/// sockets it watches (its fdinfo's `tfd` lines) that are connected with
/// `port` as their own address (the process's `net/tcp`).
pub fn accepted_by_each_poll(pid: u32, port: u16) -> Vec<usize> {
    watched_by_each_poll(pid, port, "01")
}

/// How many epoll instances of process `pid` watch the socket listening
/// on `port`.
pub fn polls_listening_on(pid: u32, port: u16) -> usize {
    watched_by_each_poll(pid, port, "0A").len()
}

/// The TCP ports process `pid` listens on, itself (not a child of its):
/// where a server that listens on port 0 and does not say which port it
/// got (toxiproxy-server) listens, and whether one that says nothing as
/// it starts (iperf3 -J) listens yet.
pub fn listening_ports(pid: u32) -> Vec<u16> {
    let sockets = tcp_sockets(pid, "0A");
    let mut ports: Vec<u16> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            sockets.get(&*target.to_string_lossy()).copied()
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The TCP sockets in state `state` (`01` connected, `0A` listening) of
/// process `pid`'s network namespace, its own or not: each one's own port,
/// by its name as a descriptor's link gives it (`socket:[INODE]`).
fn tcp_sockets(pid: u32, state: &str) -> std::collections::HashMap<String, u16> {
    let mut sockets = std::collections::HashMap::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields[1].rsplit(':').next().unwrap();
            if let Ok(port) = u16::from_str_radix(local_port, 16)
                && fields[3] == state
            {
                sockets.insert(format!("socket:[{}]", fields[9]), port);
            }
        }
    }
    sockets
}

/// For each epoll instance of process `pid` that watches any, how many
/// sockets it watches whose own port is `port`, in TCP state `state`
/// (`01` connected, `0A` listening).
fn watched_by_each_poll(pid: u32, port: u16, state: &str) -> Vec<usize> {
    let accepted: std::collections::HashSet<String> = tcp_sockets(pid, state)
        .into_iter()
        .filter(|&(_, own)| own == port)
        .map(|(socket, _)| socket)
        .collect();
    let link = |fd: &str| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok();
    let mut counts = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let fd = fd.unwrap().file_name().into_string().unwrap();
        if link(&fd).is_none_or(|target| target.to_string_lossy() != "anon_inode:[eventpoll]") {
            continue;
        }
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
        let watched = info
            .lines()
            .filter_map(|line| line.strip_prefix("tfd:")?.split_whitespace().next())
            .filter(|tfd| link(tfd).is_some_and(|t| accepted.contains(&*t.to_string_lossy())))
            .count();
        if watched > 0 {
            counts.push(watched);
        }
    }
    counts
}
