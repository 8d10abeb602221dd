//! `--exec`: real programs (curl, wget, a static Go client, Python, Node,
//! a shell that forks, a UDP sender) talking to servers on loopback, with
//! their traffic shaped; exit statuses, signals, files left alone, and
//! the live controls. Timing is loose: a shaped transfer can never be
//! faster than its tokens allow (the lower bound is exact, less the
//! burst), and on a busy machine may be slower.

use crate::harness::{
    Runtime, Scratch, installed, random_bytes, said_by, send_signal, shape, skipped, wait_until,
    wait_until_said,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// 512 KiB/s, the rate most tests here shape at.
const RATE: f64 = 512.0 * 1024.0;

/// A web server on loopback: GET gives `body`; PUT and POST keep theirs.
pub struct Web {
    address: String,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Web {
    pub fn start(body: Vec<u8>) -> Web {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let received = Arc::new(Mutex::new(Vec::new()));
        let (body, kept) = (Arc::new(body), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (body, kept) = (body.clone(), kept.clone());
                std::thread::spawn(move || serve_one(stream, &body, &kept));
            }
        });
        Web { address, received }
    }

    pub fn url(&self) -> String {
        format!("http://{}/blob", self.address)
    }
}

/// Answers one request on `stream`.
fn serve_one(stream: TcpStream, body: &[u8], kept: &Mutex<Vec<Vec<u8>>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut request = String::new();
    if reader.read_line(&mut request).unwrap_or(0) == 0 {
        return;
    }
    let mut length = 0usize;
    let mut expect_continue = false;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("expect: 100-continue") {
            expect_continue = true;
        }
        if line == "\r\n" {
            break;
        }
    }
    if request.starts_with("GET") {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = writer.write_all(head.as_bytes());
        let _ = writer.write_all(body);
        return;
    }
    if expect_continue {
        let _ = writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let mut got = vec![0; length];
    if reader.read_exact(&mut got).is_ok() {
        kept.lock().unwrap().push(got);
    }
    let _ = writer.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

/// Runs `command` to its end, and how long it took.
pub fn timed(mut command: Command) -> (Output, Duration) {
    let start = Instant::now();
    let output = command.stdin(Stdio::null()).output().unwrap();
    (output, start.elapsed())
}

/// Checks that `bytes` took `took` at [`RATE`]: no less than the tokens
/// allow (less the default burst of 100 ms, and a little for the clock),
/// and not many times more.
pub fn at_the_rate(what: &str, bytes: usize, took: Duration) {
    let least = (bytes as f64 / RATE - 0.1) * 0.97;
    let most = bytes as f64 / RATE * 2.0 + 5.0;
    let took = took.as_secs_f64();
    assert!(
        took >= least && took <= most,
        "{what}: {bytes} bytes took {took:.2}s; at {RATE} B/s that is {least:.2}s to {most:.2}s"
    );
}

/// `shape --rate 512KiB --exec ARGS`.
fn shaped(args: &[&str]) -> Command {
    let mut command = shape(["--rate", "512KiB", "--exec"]);
    command.args(args);
    command
}

#[test]
fn curl_and_wget_download_and_upload_at_the_rate_with_every_byte_intact() {
    if !installed("curl") || !installed("wget") {
        return;
    }
    let body = random_bytes(1_000_000, 35);
    let web = Web::start(body.clone());
    let scratch = Scratch::new("exec-curl");
    let got = scratch.path().join("got");
    let got = got.to_str().unwrap();

    let (output, took) = timed(shaped(&["curl", "-sS", "-o", got, &web.url()]));
    assert!(output.status.success(), "{output:?}");
    assert!(
        std::fs::read(got).unwrap() == body,
        "curl's download changed"
    );
    at_the_rate("curl's download", body.len(), took);

    let (output, took) = timed(shaped(&["wget", "-q", "-O", got, &web.url()]));
    assert!(output.status.success(), "{output:?}");
    assert!(
        std::fs::read(got).unwrap() == body,
        "wget's download changed"
    );
    at_the_rate("wget's download", body.len(), took);

    let sent = scratch.file("sent", &body);
    let url = web.url();
    let (output, took) = timed(shaped(&["curl", "-sS", "-T", sent.to_str().unwrap(), &url]));
    assert!(output.status.success(), "{output:?}");
    assert!(
        web.received.lock().unwrap().first() == Some(&body),
        "curl's upload changed"
    );
    at_the_rate("curl's upload", body.len(), took);
}

#[test]
fn a_static_go_client_that_calls_the_kernel_itself_is_shaped() {
    if !installed("go") || !installed("file") {
        return;
    }
    let scratch = Scratch::new("exec-go");
    let source = scratch.file(
        "main.go",
        br#"package main

import (
	"io"
	"net/http"
	"os"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		os.Exit(1)
	}
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		os.Exit(1)
	}
}
"#,
    );
    let binary = static_go(&scratch, &source, "getter");
    let kind = Command::new("file").arg(&binary).output().unwrap();
    assert!(
        String::from_utf8_lossy(&kind.stdout).contains("statically linked"),
        "{kind:?}"
    );
    let body = random_bytes(1_000_000, 36);
    let web = Web::start(body.clone());
    let (output, took) = timed(shaped(&[binary.to_str().unwrap(), &web.url()]));
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout == body, "the Go client's download changed");
    at_the_rate("a static Go client", body.len(), took);
}

/// `source` built with Go, without cgo (so, static), as `name` in
/// `scratch`.
pub fn static_go(scratch: &Scratch, source: &std::path::Path, name: &str) -> std::path::PathBuf {
    let binary = scratch.path().join(name);
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(source)
        .env("CGO_ENABLED", "0")
        .env("GO111MODULE", "off")
        .env("GOCACHE", scratch.path().join("cache"))
        .env("GOPATH", scratch.path().join("gopath"))
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    binary
}

#[test]
fn python_requests_downloads_and_socket_sendfile_uploads_at_the_rate() {
    let python = "target/clients/venv/bin/python";
    let has_requests = Command::new(python)
        .args(["-c", "import requests"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_requests {
        assert!(
            std::env::var_os("CI").is_none(),
            "no requests in target/clients/venv: tests/clients/setup installs it"
        );
        skipped("requests is not installed (run tests/clients/setup)");
        return;
    }
    let body = random_bytes(1_000_000, 37);
    let web = Web::start(body.clone());
    let fetch = "import requests, sys; sys.stdout.buffer.write(requests.get(sys.argv[1]).content)";
    let (output, took) = timed(shaped(&[python, "-c", fetch, &web.url()]));
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout == body, "requests' download changed");
    at_the_rate("requests", body.len(), took);

    // socket.sendfile uses sendfile(2) on the socket.
    let scratch = Scratch::new("exec-sendfile");
    let sent = scratch.file("sent", &body);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let receiver = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).unwrap();
        got
    });
    let upload = "import socket, sys, os\n\
                  s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                  f = open(sys.argv[2], 'rb')\n\
                  n = s.sendfile(f)\n\
                  assert f.tell() == os.path.getsize(sys.argv[2]), f.tell()\n\
                  s.close()";
    let port = address.port().to_string();
    let (output, took) = timed(shaped(&[
        "python3",
        "-c",
        upload,
        &port,
        sent.to_str().unwrap(),
    ]));
    assert!(output.status.success(), "{output:?}");
    assert!(
        receiver.join().unwrap() == body,
        "sendfile's upload changed"
    );
    at_the_rate("socket.sendfile", body.len(), took);
}

#[test]
fn node_with_non_blocking_sockets_and_epoll_is_shaped() {
    if !installed("node") {
        return;
    }
    let body = random_bytes(1_000_000, 38);
    let web = Web::start(body.clone());
    let script = "const http = require('http'); const chunks = [];\n\
                  http.get(process.argv[1], r => { r.on('data', d => chunks.push(d));\n\
                  r.on('end', () => process.stdout.write(Buffer.concat(chunks))); });";
    let (output, took) = timed(shaped(&["node", "-e", script, &web.url()]));
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout == body, "node's download changed");
    at_the_rate("node", body.len(), took);
}

#[test]
fn a_script_that_forks_twenty_curls_four_at_a_time_shares_one_limit() {
    if !installed("curl") {
        return;
    }
    let body = random_bytes(100_000, 39);
    let web = Web::start(body.clone());
    let scratch = Scratch::new("exec-forks");
    // xargs puts the number wherever `{}` stands: a letter would also be
    // replaced inside the scratch directory's random name.
    let script = format!(
        "seq 1 20 | xargs -P 4 -I {{}} curl -sS -o '{}/page.{{}}' '{}'",
        scratch.path().display(),
        web.url()
    );
    let (output, took) = timed(shaped(&["sh", "-c", &script]));
    assert!(output.status.success(), "{output:?}");
    for n in 1..=20 {
        let page = std::fs::read(scratch.path().join(format!("page.{n}"))).unwrap();
        assert!(page == body, "page {n} changed");
    }
    at_the_rate("20 curls", 20 * body.len(), took);
}

#[test]
fn udp_datagrams_are_paid_for_whole_and_never_split() {
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let port = receiver.local_addr().unwrap().port().to_string();
    // 40 datagrams of 1,000 bytes at 10,000 B/s: about 4 s, less the
    // burst of 100 ms.
    let send = "import socket, sys\n\
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                for i in range(40):\n    s.sendto(bytes([i]) * 1000, ('127.0.0.1', int(sys.argv[1])))";
    let mut command = shape([
        "--rate", "10000", "--stats", "--exec", "python3", "-c", send, &port,
    ]);
    let start = Instant::now();
    let output = command.stdin(Stdio::null()).output().unwrap();
    let took = start.elapsed().as_secs_f64();
    assert!(output.status.success(), "{output:?}");
    let mut buffer = [0u8; 2000];
    for i in 0..40u8 {
        let n = receiver.recv(&mut buffer).unwrap();
        assert_eq!(n, 1000, "datagram {i} was split");
        assert!(buffer[..n].iter().all(|&b| b == i), "datagram {i} changed");
    }
    assert!(
        (3.7..15.0).contains(&took),
        "40,000 bytes at 10,000 B/s took {took:.2}s"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("sent 40000 bytes"), "{stderr}");
}

#[test]
fn the_status_is_the_commands_and_a_command_that_cannot_run_says_why() {
    let status = |args: &[&str]| {
        let mut command = shape(["--exec"]);
        command.args(args);
        let output = command.stdin(Stdio::null()).output().unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert_eq!(status(&["sh", "-c", "exit 7"]).0, Some(7));
    assert_eq!(status(&["sh", "-c", "kill -TERM $$"]).0, Some(143));
    let (code, said) = status(&["no-such-command-anywhere"]);
    assert_eq!(code, Some(127));
    assert_eq!(said, "shape: no-such-command-anywhere: command not found\n");
    let (code, said) = status(&["/etc/passwd"]);
    assert_eq!(code, Some(126));
    assert!(said.contains("/etc/passwd: Permission denied"), "{said}");
    // Flags after --exec are the command's own.
    assert_eq!(status(&["sh", "-c", "exit 3", "--rate", "x"]).0, Some(3));
}

#[test]
fn exec_with_inputs_or_a_listener_is_a_usage_error() {
    for args in [
        vec!["somefile", "--exec", "true"],
        vec!["--listen", "127.0.0.1:0", "--exec", "true"],
        vec!["--lines", "--exec", "true"],
    ] {
        let output = shape(args.clone()).stdin(Stdio::null()).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn sigterm_sent_to_shape_reaches_the_command_which_ends_it() {
    let mut child = shape(["--exec", "sleep", "30"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the command to start", || command_of(child.id()).is_some());
    send_signal(child.id(), rustix::process::Signal::TERM);
    let start = Instant::now();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// The command shape `shape` runs, once it runs: the one child of
/// shape's reaper, shape's one child (both run shape's own binary).
pub fn command_of(shape: u32) -> Option<u32> {
    let children = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|pid| pid.parse::<u32>().ok())
            .collect::<Vec<_>>()
    };
    let reaper = *children(shape).first()?;
    let command = *children(reaper).first()?;
    // Until its exec, the command's child runs shape's binary too.
    let exe = std::fs::read_link(format!("/proc/{command}/exe")).ok()?;
    let own = std::fs::read_link(format!("/proc/{shape}/exe")).ok()?;
    (exe != own).then_some(command)
}

#[test]
fn a_daemonised_grandchild_does_not_keep_shape_and_is_told_its_network_is_gone() {
    let scratch = Scratch::new("exec-outlived");
    let pid_file = scratch.path().join("pid");
    let script = format!(
        "sleep 30 >/dev/null 2>&1 & echo $! >'{}'",
        pid_file.display()
    );
    let start = Instant::now();
    let output = shape(["--exec", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("processes it started still run; their network calls now fail"),
        "{stderr}"
    );
    // Left running, as a shell leaves it: shape ended as it should.
    let left = pids_in(&pid_file)[0];
    assert!(!gone(left));
    send_signal(left, rustix::process::Signal::KILL);
}

/// The pids the test's own script wrote to `file`, one a line (none yet
/// if it is not there).
fn pids_in(file: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .collect()
}

/// Whether process `pid` is gone (reaped; a zombie is not yet gone).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn shape_killed_by_sigkill_leaves_no_process_of_the_command_behind() {
    let scratch = Scratch::new("exec-sigkill");
    let pids = scratch.path().join("pids");
    // A child in the background, one that left its parent (to init, as
    // a daemon does), one in a session of its own, and the command.
    let script = format!(
        "sleep 1000 & echo $! >>'{pids}'; \
         (sleep 1001 & echo $! >>'{pids}'); \
         setsid sh -c 'echo $$ >>\"$0\"; exec sleep 1002' '{pids}' & \
         echo $$ >>'{pids}'; echo started; wait",
        pids = pids.display()
    );
    let mut child = shape(["--rate", "1MiB", "--exec", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "started");
    wait_until("every process to say its pid", || pids_in(&pids).len() == 4);
    let started = pids_in(&pids);
    assert!(started.iter().all(|pid| !gone(*pid)), "{started:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until("every process of the command to end", || {
        started.iter().all(|pid| gone(*pid))
    });
}

#[test]
fn files_and_pipes_are_never_shaped() {
    let scratch = Scratch::new("exec-files");
    let out = scratch.path().join("out");
    // At 1 KB/s, 20 MiB would take six hours if shaped.
    let script = format!(
        "dd if=/dev/zero of='{}' bs=1M count=20 status=none && cat '{}' | wc -c",
        out.display(),
        out.display()
    );
    let start = Instant::now();
    let output = shape(["--rate", "1KB", "--exec", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "20971520");
    assert!(start.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_running_exec_is_changed_by_remote_and_reports_on_sigusr1() {
    if !installed("curl") {
        return;
    }
    let runtime = Runtime::new("exec-remote");
    let body = random_bytes(2_000_000, 40);
    let web = Web::start(body.clone());
    let scratch = Scratch::new("exec-remote-out");
    let got = scratch.path().join("got");
    // 2 MB at 100 KB/s would take 20 s; at 10 MiB/s it takes no time.
    let mut command = runtime.shape(["--rate", "100KB", "--exec", "curl", "-sS", "-o"]);
    command.arg(&got).arg(web.url());
    let mut child = command
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    runtime.wait_registered(pid);
    let said = said_by(&mut child);
    // The change comes while the transfer runs.
    wait_until("curl to receive", || {
        std::fs::metadata(&got).is_ok_and(|file| file.len() > 0)
    });
    send_signal(pid, rustix::process::Signal::USR1);
    wait_until_said(&said, "down");
    let remote = runtime.remote(pid, ["--rate", "10MiB"]);
    assert!(remote.status.success(), "{}", remote.stderr);
    let start = Instant::now();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?} after the change",
        start.elapsed()
    );
    assert!(std::fs::read(&got).unwrap() == body);
}

#[test]
fn two_execs_on_one_share_hold_its_total() {
    if !installed("curl") {
        return;
    }
    let runtime = Runtime::new("exec-share");
    two_downloads_on_one_share("two on one share", || {
        runtime.shape(["--share", "backups", "--rate", "512KiB", "--exec"])
    });
}

/// Two curls, each under `shape --exec` made by `shaped` (on a share at
/// 512 KiB/s), download 1 MB at once: together at the share's rate, each
/// intact.
pub fn two_downloads_on_one_share(what: &str, shaped: impl Fn() -> Command) {
    let body = random_bytes(1_000_000, 41);
    let web = Web::start(body.clone());
    let scratch = Scratch::new("exec-share-out");
    let start = Instant::now();
    let children: Vec<_> = (0..2)
        .map(|n| {
            let mut command = shaped();
            command
                .args(["curl", "-sS", "-o"])
                .arg(scratch.path().join(format!("got.{n}")))
                .arg(web.url());
            command.stdin(Stdio::null()).spawn().unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    at_the_rate(what, 2 * body.len(), start.elapsed());
    for n in 0..2 {
        assert!(std::fs::read(scratch.path().join(format!("got.{n}"))).unwrap() == body);
    }
}

/// sshd as inetd runs it (`sshd -i`, one for each connection) behind a
/// listener the test bound on port 0, which sshd cannot do itself (it
/// refuses `Port 0`); with a host key and a user key made for the test.
/// Ended, and each sshd it ran, when dropped.
struct Sshd {
    port: u16,
    key: std::path::PathBuf,
    /// The sshd of each connection so far.
    sessions: Arc<Mutex<Vec<std::process::Child>>>,
    done: Arc<std::sync::atomic::AtomicBool>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl Sshd {
    /// Starts one in `scratch`, or says why it cannot here.
    fn start(scratch: &Scratch) -> Result<Sshd, String> {
        let keygen = |name: &str| {
            let made = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(scratch.path().join(name))
                .output()
                .map_err(|err| err.to_string())?;
            made.status
                .success()
                .then_some(())
                .ok_or_else(|| format!("ssh-keygen failed: {made:?}"))
        };
        keygen("host")?;
        keygen("user")?;
        let path = |name: &str| scratch.path().join(name).display().to_string();
        let config = format!(
            "HostKey {}\nAuthorizedKeysFile {}\n\
             StrictModes no\nUsePAM no\nPidFile none\nPermitRootLogin prohibit-password\n",
            path("host"),
            path("user.pub"),
        );
        let config = scratch.file("sshd_config", config.as_bytes());
        // sshd run as root wants its privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        // Whether it can run here, by its own test of its configuration
        // and keys: a session that cannot start shows only as a failed
        // connection.
        let checked = Command::new("/usr/sbin/sshd")
            .arg("-t")
            .arg("-f")
            .arg(&config)
            .output()
            .map_err(|err| format!("/usr/sbin/sshd: {err}"))?;
        if !checked.status.success() {
            return Err(format!(
                "sshd -t: {}",
                String::from_utf8_lossy(&checked.stderr).trim()
            ));
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let sessions = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let acceptor = {
            let (sessions, done) = (sessions.clone(), done.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if done.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else {
                        continue;
                    };
                    let Ok(input) = stream.try_clone() else {
                        continue;
                    };
                    // The connection is the session's standard input and
                    // output, and no longer open here once it has it.
                    let session = Command::new("/usr/sbin/sshd")
                        .args(["-i", "-e", "-f"])
                        .arg(&config)
                        .stdin(std::os::fd::OwnedFd::from(input))
                        .stdout(std::os::fd::OwnedFd::from(stream))
                        .stderr(Stdio::null())
                        .spawn();
                    if let Ok(session) = session {
                        sessions.lock().unwrap().push(session);
                    }
                }
            })
        };
        Ok(Sshd {
            port,
            key: scratch.path().join("user"),
            sessions,
            done,
            acceptor: Some(acceptor),
        })
    }

    /// The ssh command that reaches it, for rsync's -e.
    fn ssh(&self) -> String {
        format!(
            "ssh -p {} -i {} -o BatchMode=yes -o StrictHostKeyChecking=no \
             -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            self.port,
            self.key.display()
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        // Woken from its accept by one more connection, the acceptor sees
        // that it is done.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        for session in self.sessions.lock().unwrap().iter_mut() {
            let _ = session.kill();
            let _ = session.wait();
        }
    }
}

#[test]
fn rsync_over_ssh_to_a_local_sshd_is_shaped_both_ways() {
    if !installed("rsync") || !installed("ssh") {
        return;
    }
    let scratch = Scratch::new("exec-ssh");
    let sshd = match Sshd::start(&scratch) {
        Ok(sshd) => sshd,
        Err(why) => {
            assert!(std::env::var_os("CI").is_none(), "{why}");
            skipped(&why);
            return;
        }
    };
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let body = random_bytes(1_000_000, 42);
    let source = scratch.file("source", &body);
    let there = format!(
        "{}@127.0.0.1:{}",
        user.trim(),
        scratch.path().join("there").display()
    );
    let (output, took) = timed(shaped(&[
        "rsync",
        "-a",
        "-e",
        &sshd.ssh(),
        source.to_str().unwrap(),
        &there,
    ]));
    assert!(output.status.success(), "{output:?}");
    assert!(std::fs::read(scratch.path().join("there")).unwrap() == body);
    at_the_rate("rsync's upload", body.len(), took);

    let back = scratch.path().join("back");
    let (output, took) = timed(shaped(&[
        "rsync",
        "-a",
        "-e",
        &sshd.ssh(),
        &there,
        back.to_str().unwrap(),
    ]));
    assert!(output.status.success(), "{output:?}");
    assert!(std::fs::read(&back).unwrap() == body);
    at_the_rate("rsync's download", body.len(), took);
}

#[test]
fn splice_out_of_a_socket_and_sendmsg_are_paid_for() {
    // 200,000 bytes at 100,000 B/s, spliced from a socket into a pipe.
    let body = random_bytes(200_000, 44);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let sender = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.write_all(&body).unwrap();
    });
    let splice = "import os, socket, sys\n\
                  s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                  r, w = os.pipe()\n\
                  got = 0\n\
                  while True:\n\
                  \x20   n = os.splice(s.fileno(), w, 65536)\n\
                  \x20   if n == 0: break\n\
                  \x20   got += len(os.read(r, n))\n\
                  print(got)";
    let mut command = shape([
        "--rate", "100000", "--burst", "10000", "--exec", "python3", "-c", splice, &port,
    ]);
    let (output, took) = timed(command);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "200000");
    assert!(
        took.as_secs_f64() > 1.7,
        "200,000 spliced bytes took {took:?}"
    );
    sender.join().unwrap();

    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = receiver.local_addr().unwrap().port().to_string();
    // 20 datagrams of 1,000 bytes by sendmsg (sendmmsg's reading is
    // tested beside the code: Python has no call for it).
    let send = "import socket, sys\n\
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                s.connect(('127.0.0.1', int(sys.argv[1])))\n\
                for i in range(20): s.sendmsg([b'x' * 1000])";
    command = shape([
        "--rate", "10000", "--burst", "1000", "--exec", "python3", "-c", send, &port,
    ]);
    let (output, took) = timed(command);
    assert!(output.status.success(), "{output:?}");
    assert!(took.as_secs_f64() > 1.7, "20,000 bytes took {took:?}");
}

#[test]
fn a_server_under_exec_is_shaped_and_sockets_stay_shaped_when_duplicated() {
    // A server under --exec accepts a connection and reads 300,000 bytes
    // through a duplicate of the socket (os.dup, then os.read).
    let serve = "import os, socket, sys\n\
                 l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n\
                 print(l.getsockname()[1], flush=True)\n\
                 c, _ = l.accept()\n\
                 d = os.dup(c.fileno())\n\
                 n = 0\n\
                 while True:\n\
                 \x20   b = os.read(d, 65536)\n\
                 \x20   if not b: break\n\
                 \x20   n += len(b)\n\
                 print(n, flush=True)";
    let mut child = shape([
        "--rate", "100000", "--burst", "10000", "--exec", "python3", "-c", serve,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port: u16 = lines.next().unwrap().unwrap().trim().parse().unwrap();
    let start = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(&random_bytes(300_000, 45)).unwrap();
    drop(stream);
    assert_eq!(lines.next().unwrap().unwrap().trim(), "300000");
    let took = start.elapsed().as_secs_f64();
    assert!(child.wait().unwrap().success());
    assert!(
        (2.6..20.0).contains(&took),
        "300,000 bytes at 100,000 B/s took {took:.2}s"
    );
}

#[test]
fn a_socket_moved_to_standard_input_is_said_to_be_unshaped_there() {
    // By dup2, and by the older way, closing 0 and dup'ing onto it.
    for moving in [
        "os.dup2(s.fileno(), 0)",
        "os.close(0); assert os.dup(s.fileno()) == 0",
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port().to_string();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let _ = stream.write_all(b"hello\n");
        });
        let moved = format!(
            "import os, socket, sys\n\
             s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
             {moving}\n\
             print(os.read(0, 100).decode().strip())"
        );
        let output = shape(["--exec", "python3", "-c", &moved, &port])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(output.status.success(), "{moving}: {output:?}");
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "hello");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(
                "moved a socket to descriptor 0: its reads and writes there are not shaped"
            ),
            "{moving}: {stderr}"
        );
    }
}

/// Runs `shape ARGS` with `calls` (system calls' numbers) refused with
/// EPERM by a seccomp filter of the test's own, put on shape before it
/// starts (as a container's profile would), through Python's ctypes.
pub fn shape_without(calls: &[i64], args: &[&str]) -> Output {
    let mut command = refusing(calls, args);
    command.stdin(Stdio::null()).output().unwrap()
}

/// [`shape_without`], started, its standard output piped.
fn shape_without_spawned(calls: &[i64], args: &[&str]) -> std::process::Child {
    let mut command = refusing(calls, args);
    let piped = command.stdin(Stdio::null()).stdout(Stdio::piped());
    piped.spawn().unwrap()
}

/// The command of [`shape_without`].
fn refusing(calls: &[i64], args: &[&str]) -> Command {
    let refuse = "import ctypes, os, struct, sys\n\
                  libc = ctypes.CDLL(None, use_errno=True)\n\
                  calls = [int(c) for c in sys.argv[1].split(',')]\n\
                  ld, jeq, ret = 0x20, 0x15, 0x06\n\
                  program = struct.pack('HBBI', ld, 0, 0, 0)\n\
                  for call in calls:\n\
                  \x20   program += struct.pack('HBBI', jeq, 0, 1, call)\n\
                  \x20   program += struct.pack('HBBI', ret, 0, 0, 0x00050000 | 1)\n\
                  program += struct.pack('HBBI', ret, 0, 0, 0x7fff0000)\n\
                  buffer = ctypes.create_string_buffer(program)\n\
                  fprog = struct.pack('HxxxxxxQ', 2 + 2 * len(calls), ctypes.addressof(buffer))\n\
                  fbuffer = ctypes.create_string_buffer(fprog)\n\
                  assert libc.prctl(38, 1, 0, 0, 0) == 0\n\
                  assert libc.syscall(int(sys.argv[2]), 1, 0, fbuffer) == 0, ctypes.get_errno()\n\
                  os.execv(sys.argv[3], sys.argv[3:])";
    let calls: Vec<String> = calls.iter().map(i64::to_string).collect();
    let seccomp = libc::SYS_seccomp.to_string();
    let mut command = Command::new("python3");
    command
        .args([
            "-c",
            refuse,
            &calls.join(","),
            &seccomp,
            env!("CARGO_BIN_EXE_shape"),
        ])
        .args(args);
    command
}

/// The calls Docker's default seccomp profile allows only with
/// CAP_SYS_PTRACE that `--exec` could use.
pub const PTRACE_CALLS: [i64; 3] = [
    libc::SYS_pidfd_getfd,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
];

#[test]
fn where_the_kernel_refuses_seccomp_shape_says_so_and_runs_nothing() {
    let scratch = Scratch::new("exec-refused");
    let ran = scratch.path().join("ran");
    let touch = format!("touch '{}'", ran.display());
    let output = shape_without(&[libc::SYS_seccomp], &["--exec", "sh", "-c", &touch]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--exec needs seccomp user notification"),
        "{stderr}"
    );
    assert!(
        stderr.contains("seccomp(SECCOMP_SET_MODE_FILTER) failed: Operation not permitted"),
        "{stderr}"
    );
    assert!(!stderr.contains("os error"), "reasons in words: {stderr}");
    assert!(!ran.exists(), "the command ran unshaped");
}

#[test]
fn without_pidfd_getfd_and_process_vm_calls_a_command_is_shaped_all_the_same() {
    // As under Docker's default profile: a download by a client, and an
    // upload to a server of the command's own, each at the rate, every
    // byte intact; said once.
    let body = random_bytes(1_000_000, 46);
    let web = Web::start(body.clone());
    let fetch = "import sys, urllib.request\n\
                 sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1]).read())";
    let start = Instant::now();
    let output = shape_without(
        &PTRACE_CALLS,
        &[
            "--rate",
            "512KiB",
            "--exec",
            "python3",
            "-c",
            fetch,
            &web.url(),
        ],
    );
    let took = start.elapsed();
    assert!(output.status.success(), "{output:?}");
    assert!(output.stdout == body, "the download changed");
    at_the_rate("a download without pidfd_getfd", body.len(), took);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("refuses pidfd_getfd").count(), 1, "{stderr}");

    // A server that closes its listener and listens on the same port
    // again, and is sent 300,000 bytes each time: a copy kept by shape
    // would hold the port (its bind would fail), and a connection's copy
    // would keep it from ending.
    let serve = "import socket, sys\n\
                 port = 0\n\
                 for round in range(2):\n\
                 \x20   l = socket.socket(); l.bind(('127.0.0.1', port)); l.listen()\n\
                 \x20   port = l.getsockname()[1]\n\
                 \x20   print(port, flush=True)\n\
                 \x20   c, _ = l.accept(); l.close()\n\
                 \x20   n = 0\n\
                 \x20   while True:\n\
                 \x20       b = c.recv(65536)\n\
                 \x20       if not b: break\n\
                 \x20       n += len(b)\n\
                 \x20   c.close()\n\
                 \x20   print(n, flush=True)";
    let mut child = shape_without_spawned(
        &PTRACE_CALLS,
        &["--rate", "1MiB", "--exec", "python3", "-c", serve],
    );
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ports = Vec::new();
    for round in 0..2 {
        let port: u16 = lines.next().unwrap().unwrap().trim().parse().unwrap();
        ports.push(port);
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .write_all(&random_bytes(300_000, 47 + round))
            .unwrap();
        drop(stream);
        assert_eq!(lines.next().unwrap().unwrap().trim(), "300000");
    }
    assert_eq!(ports[0], ports[1]);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_signal_the_command_handles_ends_a_call_shape_holds() {
    // A server that accepts and never sends: the command's recv is held
    // by shape until its SIGUSR1 handler must run.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    // Held open until the test ends and drops its end of the channel.
    let (_hold, until_done) = std::sync::mpsc::channel::<()>();
    let _keep = std::thread::spawn(move || {
        let held: Vec<_> = silent.incoming().take(1).collect();
        let _ = until_done.recv();
        drop(held);
    });
    let wait = "import signal, socket, sys\n\
                class Woken(Exception): pass\n\
                def woken(*_): raise Woken()\n\
                signal.signal(signal.SIGUSR1, woken)\n\
                s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                try:\n\
                \x20   print('waiting', flush=True)\n\
                \x20   s.recv(100)\n\
                except Woken:\n\
                \x20   print('woken', flush=True)";
    let mut child = shape(["--rate", "1MiB", "--exec", "python3", "-c", wait, &port])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "waiting");
    let python = command_of(child.id()).unwrap();
    // Its recv held by shape: /proc says which call a blocked thread is in.
    let recvfrom = if cfg!(target_arch = "aarch64") {
        "207"
    } else {
        "45"
    };
    let call = format!("/proc/{python}/syscall");
    wait_until("the recv to be held", || {
        std::fs::read_to_string(&call)
            .is_ok_and(|now| now.split_whitespace().next() == Some(recvfrom))
    });
    let start = Instant::now();
    send_signal(python, rustix::process::Signal::USR1);
    assert_eq!(lines.next().unwrap().unwrap(), "woken");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(child.wait().unwrap().success());
}

#[test]
fn shape_told_to_end_by_sigterm_ends_what_the_command_left_too() {
    let scratch = Scratch::new("exec-sigterm-all");
    let pids = scratch.path().join("pids");
    // sh passes SIGTERM to no child: its sleep would outlive it.
    let script = format!(
        "sleep 1000 & echo $! >>'{pids}'; echo started; sleep 1001",
        pids = pids.display()
    );
    let mut child = shape(["--exec", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "started");
    let left = pids_in(&pids)[0];
    send_signal(child.id(), rustix::process::Signal::TERM);
    assert_eq!(child.wait().unwrap().code(), Some(143));
    wait_until("the background sleep to end", || gone(left));
}
