//! Runs the real `shape` binary: feed bytes, collect bytes, status and
//! standard error, with the environment cleared of anything that would
//! change its output.

use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
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

/// `len` bytes that do not repeat in any short period (xorshift).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// A scratch directory removed when dropped.
pub struct Scratch(pub std::path::PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("shape-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Writes `bytes` to a file `name` in the directory, returning its path.
    pub fn file(&self, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
