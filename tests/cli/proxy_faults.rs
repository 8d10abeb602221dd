//! Faults in proxy mode, seen by real clients: Python's http.client and
//! curl through the proxy in front of `python3 -m http.server`, and plain
//! sockets where bytes are counted one by one. Every check is of what the
//! client sees.

use crate::harness::*;
use crate::proxy::{Proxy, connect, echo, server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `python3 -m http.server` serving `dir` on a port it chose, killed when
/// dropped.
struct HttpServer {
    child: Child,
    address: String,
}

impl HttpServer {
    fn start(dir: &Path) -> HttpServer {
        let mut child = Command::new("python3")
            .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1"])
            .arg("--directory")
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let first = first_line(&mut child);
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let port = first
            .split_whitespace()
            .skip_while(|word| *word != "port")
            .nth(1)
            .unwrap_or_else(|| panic!("http.server said {first:?}"));
        HttpServer {
            child,
            address: format!("127.0.0.1:{port}"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A web server in front of a file of `len` random bytes, or `None` if
/// python3 or curl is missing outside CI.
fn website(name: &str, len: usize) -> Option<(Scratch, HttpServer, Vec<u8>)> {
    if !installed("python3") || !installed("curl") {
        return None;
    }
    let dir = Scratch::new(name);
    let body = random_bytes(len, len as u64);
    dir.file("file", &body);
    let http = HttpServer::start(dir.path());
    Some((dir, http, body))
}

/// Runs a Python http.client script with `args`, and gives its output.
fn python(script: &str, args: &[&str]) -> Output {
    Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap()
}

/// GETs /file through the proxy and prints the size of every read of the
/// body, each read taking what one read of the socket gave.
const READS: &str = r#"
import http.client, sys
connection = http.client.HTTPConnection(sys.argv[1], timeout=30)
connection.request("GET", "/file")
response = connection.getresponse()
sizes = []
while True:
    piece = response.read1(65536)
    if not piece:
        break
    sizes.append(len(piece))
print(" ".join(map(str, sizes)))
"#;

/// GETs /file through the proxy and prints how it ended.
const ENDING: &str = r#"
import http.client, sys
connection = http.client.HTTPConnection(sys.argv[1], timeout=30)
try:
    connection.request("GET", "/file")
    response = connection.getresponse()
    response.read()
    print("complete")
except ConnectionResetError:
    print("ECONNRESET")
except Exception as e:
    print(type(e).__name__)
"#;

#[test]
fn an_http_client_reads_the_reply_in_slices_of_the_size_asked() {
    let Some((_dir, http, body)) = website("slices", 700) else {
        return;
    };
    let proxy = Proxy::start(
        &http.address,
        &["--slice", "down:7", "--slice-pause", "20ms"],
    );
    let reads = python(READS, &[&proxy.address]);
    assert!(reads.status.success(), "{reads:?}");
    let sizes: Vec<usize> = String::from_utf8(reads.stdout)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), body.len(), "{sizes:?}");
    // The headers end within a slice, and the body may end within one:
    // every read between them is whole slices, and nearly all are one (a
    // reader the machine held up late finds two waiting).
    assert!(sizes.len() > 90, "{sizes:?}");
    let between = &sizes[1..sizes.len() - 1];
    assert!(between.iter().all(|&n| n % 7 == 0), "{sizes:?}");
    let one = between.iter().filter(|&&n| n == 7).count();
    assert!(one * 10 >= between.len() * 9, "{sizes:?}");
}

#[test]
fn a_stall_holds_curl_until_its_timeout_and_a_reset_is_econnreset() {
    let Some((_dir, http, _body)) = website("stall", 100_000) else {
        return;
    };
    let stalling = Proxy::start(&http.address, &["--stall-after", "down:1KiB"]);
    let began = Instant::now();
    let curl = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{size_header} %{size_download}",
        ])
        .args(["--max-time", "2"])
        .arg(format!("http://{}/file", stalling.address))
        .output()
        .unwrap();
    assert_eq!(curl.status.code(), Some(28), "curl timed out: {curl:?}");
    assert!(began.elapsed() >= Duration::from_millis(1900));
    let said = String::from_utf8(curl.stdout).unwrap();
    let got: usize = said
        .split_whitespace()
        .map(|n| n.parse::<usize>().unwrap())
        .sum();
    assert_eq!(got, 1024, "headers and body before the stall: {said}");

    let resetting = Proxy::start(&http.address, &["--reset-after", "down:100"]);
    let ending = python(ENDING, &[&resetting.address]);
    assert_eq!(String::from_utf8_lossy(&ending.stdout).trim(), "ECONNRESET");
    resetting.wait_for_stderr("reset, as --reset-after asked");
}

#[test]
fn a_cut_off_gives_curl_exactly_that_many_bytes_then_the_end() {
    let Some((dir, http, body)) = website("cut", 100_000) else {
        return;
    };
    let proxy = Proxy::start(
        &http.address,
        &["--cut-after", "down:2000", "--slow-close", "300ms"],
    );
    let began = Instant::now();
    let headers = dir.path().join("headers");
    let out = dir.path().join("out");
    let curl = Command::new("curl")
        .args(["-s", "--max-time", "20", "-D"])
        .arg(&headers)
        .arg("-o")
        .arg(&out)
        .arg(format!("http://{}/file", proxy.address))
        .output()
        .unwrap();
    // 18: the transfer ended before the length the headers gave.
    assert_eq!(curl.status.code(), Some(18), "{curl:?}");
    assert!(began.elapsed() >= Duration::from_millis(290));
    let headers = std::fs::read(headers).unwrap();
    let out = std::fs::read(out).unwrap();
    assert_eq!(headers.len() + out.len(), 2000);
    assert!(
        out == body[..out.len()],
        "what came is the start of the file"
    );
}

/// Sends `PAYLOAD` bytes of a fixed pattern, then closes.
const PAYLOAD: usize = 200_000;

fn payload(mut stream: TcpStream) {
    let _ = stream.write_all(&pattern());
}

fn pattern() -> Vec<u8> {
    (0..PAYLOAD).map(|i| (i * 7 % 251) as u8).collect()
}

/// What one connection through the proxy at `address` reads.
fn fetch(address: &str) -> Vec<u8> {
    let mut stream = connect(address);
    let mut got = Vec::new();
    stream.read_to_end(&mut got).unwrap();
    got
}

#[test]
fn the_bytes_a_proxy_says_it_corrupted_are_the_bytes_that_differ() {
    let upstream = server(payload);
    let proxy = Proxy::start(&upstream, &["--corrupt", "down:0.5%", "--seed", "9"]);
    let got = fetch(&proxy.address);
    assert_eq!(got.len(), PAYLOAD);
    let differ = got.iter().zip(pattern()).filter(|(a, b)| **a != *b).count();
    let each_one_bit = got
        .iter()
        .zip(pattern())
        .all(|(a, b)| (a ^ b).count_ones() <= 1);
    assert!(each_one_bit);
    assert!((500..1500).contains(&differ), "{differ}");
    proxy.wait_for_stderr(&format!("down: corrupted {differ} bytes"));
}

#[test]
fn a_seed_replays_what_a_proxy_drops_and_flips_and_which_connections() {
    let upstream = server(payload);
    let faults_on = |seed: &str, loops: &str| {
        let proxy = Proxy::start(
            &upstream,
            &[
                "--rate",
                "20MiB",
                "--drop",
                "down:10%",
                "--corrupt",
                "down:0.1%",
                "--affect",
                "50%",
                "--seed",
                seed,
                "--loops",
                loops,
            ],
        );
        (0..12).map(|_| fetch(&proxy.address)).collect::<Vec<_>>()
    };
    let faults = |seed: &str| faults_on(seed, "1");
    let first = faults("1");
    assert_eq!(faults("1"), first, "the same seed, the same bytes");
    assert_ne!(faults("2"), first, "another seed, others");
    // Clients that come one after another draw in turn, whichever of
    // several loops takes each.
    assert_eq!(faults_on("1", "3"), first, "the same seed over three loops");
    let clean = first.iter().filter(|got| **got == pattern()).count();
    assert!((1..12).contains(&clean), "{clean} of 12 untouched");
    assert!(
        first.iter().any(|got| got.len() < PAYLOAD),
        "blocks of a chunk at 20 MiB/s (at most 64 KiB in a proxy) were lost"
    );
}

#[test]
fn faults_and_delay_change_mid_connection_by_remote() {
    let runtime = Runtime::new("proxy-remote");
    let upstream = server(echo);
    let proxy = Proxy::start_with(runtime.shape([]), &upstream, &[]);
    runtime.wait_registered(proxy.child.id());
    let mut stream = connect(&proxy.address);
    let data = random_bytes(1000, 3);
    let round_trip = |stream: &mut TcpStream| {
        let began = Instant::now();
        stream.write_all(&data).unwrap();
        let mut back = vec![0; data.len()];
        stream.read_exact(&mut back).unwrap();
        (back, began.elapsed())
    };
    let remote = |args: &[&str]| {
        let mut command = runtime.shape([]);
        command
            .args(args)
            .arg("--remote")
            .arg(proxy.child.id().to_string());
        let run = run(command, Stdio::null());
        assert_eq!(run.code(), 0, "{}", run.stderr);
    };
    assert_eq!(round_trip(&mut stream).0, data, "clean at first");
    remote(&["--corrupt", "down:1"]);
    let (back, _) = round_trip(&mut stream);
    assert!(
        back.iter().zip(&data).all(|(a, b)| a != b),
        "every byte flipped"
    );
    remote(&["--corrupt", "off", "--delay", "300ms"]);
    let (back, took) = round_trip(&mut stream);
    assert_eq!(back, data, "clean again");
    assert!(took >= Duration::from_millis(590), "{took:?}");
    remote(&["--delay", "0"]);
    let (back, took) = round_trip(&mut stream);
    assert_eq!(back, data);
    assert!(took < Duration::from_millis(590), "{took:?}");
}

#[test]
fn directions_and_unknown_values_are_refused_where_they_mean_nothing() {
    assert_refused(shape(["--slice", "down:7"]), "--slice");
    assert_refused(shape(["--drop", "sideways:1%"]), "--drop");
    assert_refused(shape(["--affect", "50%"]), "--affect");
}
