//! HTTP faults in a proxy, met by real clients that retry (urllib3, curl,
//! Go's net/http, Node's fetch) in front of a real server (Python's
//! http.server, `tests/clients/http_upstream.py`), which says every
//! request it is sent so that a test counts what reached it.

use crate::harness::*;
use crate::proxy::{Proxy, connect};
use std::io::{BufRead, Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The upstream, killed when dropped.
pub struct Upstream {
    child: Child,
    pub address: String,
    /// Every request it said it was sent, `METHOD PATH`.
    requests: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    /// Python's http.server, which says each request it is sent.
    pub fn start() -> Upstream {
        let mut command = Command::new("python3");
        command.arg(ours("tests/clients/http_upstream.py"));
        Upstream::run(command, "request ")
    }

    /// Runs `command`, a server that says `listening PORT` first and then
    /// a line starting with `said` for each request it is sent.
    pub fn run(mut command: Command, said: &'static str) -> Upstream {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("the upstream runs");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let port = first.strip_prefix("listening ").expect("it says its port");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(request) = line.strip_prefix(said) {
                    kept.lock().unwrap().push(request.to_string());
                }
            }
        });
        Upstream {
            child,
            address: format!("127.0.0.1:{port}"),
            requests,
        }
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// A proxy in front of it with `args`, and its base URL.
    pub fn behind(&self, args: &[&str]) -> (Listening, String) {
        let proxy = Proxy::start(&self.address, args);
        let url = format!("http://{}", proxy.address);
        (proxy, url)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The venv's Python, with urllib3, or `None` (said) where it is missing.
pub fn urllib3() -> Option<std::path::PathBuf> {
    let python = ours("target/clients/venv/bin/python");
    set_up(&python).then_some(python)
}

pub fn said(output: &Output) -> String {
    format!(
        "{:?}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// curl with `args`, its exit status, and what it wrote.
fn curl(args: &[&str]) -> (i32, String) {
    let output = Command::new("curl")
        .args(["-s", "-S"])
        .args(args)
        .output()
        .expect("curl runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn urllib3_retries_past_the_first_two_and_the_upstream_sees_one_request() {
    let Some(python) = urllib3() else { return };
    let upstream = Upstream::start();
    let (_proxy, url) = upstream.behind(&["--http-status", "503", "--first", "2"]);
    let output = Command::new(python)
        .arg(ours("tests/clients/http_urllib3.py"))
        .args(["retry", &format!("{url}/item")])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "200 /item",
        "{}",
        said(&output)
    );
    assert_eq!(upstream.requests(), ["GET /item"]);
}

#[test]
fn curl_retry_recovers_from_two_503s() {
    if !installed("curl") {
        return;
    }
    let upstream = Upstream::start();
    let (_proxy, url) = upstream.behind(&["--http-status", "503:try later", "--first", "2"]);
    // --fail writes no body of an error, which curl retries.
    let retried = ["--fail", "--retry", "2", "--retry-delay", "1"];
    let (status, body) = curl(&[&retried[..], &[&format!("{url}/a")]].concat());
    assert_eq!((status, body.as_str()), (0, "/a"));
    assert_eq!(upstream.requests(), ["GET /a"]);
}

#[test]
fn go_keeps_one_connection_and_every_tenth_request_is_answered_by_shape() {
    if !installed("go") {
        return;
    }
    let scratch = Scratch::new("http-go");
    let go = go_binary(&scratch, "tests/clients/http_keepalive.go", "keepalive");
    let upstream = Upstream::start();
    let (_proxy, url) = upstream.behind(&["--http-status", "503", "--every", "10"]);
    let output = Command::new(go).arg(&url).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "answered 10 passed 90 reused 99",
        "{}",
        said(&output)
    );
    let requests = upstream.requests();
    assert_eq!(requests.len(), 90);
    let picked = |i: usize| (i + 1) % 10 == 0;
    let expected: Vec<String> = (0..100)
        .filter(|&i| !picked(i))
        .map(|i| format!("GET /seq/{i}"))
        .collect();
    assert_eq!(requests, expected, "the upstream saw the others, in order");
}

/// `source` built with Go into `scratch`.
fn go_binary(scratch: &Scratch, source: &str, name: &str) -> std::path::PathBuf {
    let binary = scratch.path().join(name);
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(ours(source))
        .env("GO111MODULE", "off")
        .env("GOCACHE", scratch.path().join("cache"))
        .env("GOPATH", scratch.path().join("gopath"))
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", said(&built));
    binary
}

#[test]
fn node_fetch_gets_shapes_answer_with_its_body_and_header_then_the_upstreams() {
    if !installed("node") {
        return;
    }
    let upstream = Upstream::start();
    let (_proxy, url) = upstream.behind(&[
        "--http-status",
        "429:slow down",
        "--http-header",
        "Retry-After: 1",
        "--first",
        "1",
    ]);
    let output = Command::new("node")
        .arg(ours("tests/clients/http_fetch.js"))
        .args([&format!("{url}/x"), "2"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "429 200 /x retry-after=1",
        "{}",
        said(&output)
    );
    assert_eq!(upstream.requests(), ["GET /x"]);
}

#[test]
fn sixty_four_mib_chunked_each_way_pass_whole_past_a_rule_that_picks_nothing() {
    let Some(python) = urllib3() else { return };
    let upstream = Upstream::start();
    let (_proxy, url) = upstream.behind(&["--http-status", "503", "--path", "/never"]);
    let output = Command::new(python)
        .arg(ours("tests/clients/http_urllib3.py"))
        .args(["sha", &url])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "ok",
        "{}",
        said(&output)
    );
    assert_eq!(upstream.requests().len(), 2);
}

#[test]
fn a_delay_holds_only_the_requests_it_picks() {
    if !installed("curl") {
        return;
    }
    let upstream = Upstream::start();
    let (_proxy, url) =
        upstream.behind(&["--http-delay", "2s", "--method", "POST", "--path", "/pay/*"]);
    let timed = |args: &[&str]| {
        let start = Instant::now();
        let (status, _) = curl(args);
        assert_eq!(status, 0);
        start.elapsed()
    };
    let pay = format!("{url}/pay/1");
    assert!(timed(&["-d", "x", &pay]) >= Duration::from_secs(2));
    // Not picked: no hold, however busy the machine.
    assert!(timed(&[&pay]) < Duration::from_secs(2));
    assert!(timed(&["-d", "x", &format!("{url}/shop")]) < Duration::from_secs(2));
}

#[test]
fn a_stalled_request_is_never_answered_and_others_pass() {
    if !installed("curl") {
        return;
    }
    let upstream = Upstream::start();
    let (_proxy, url) = upstream.behind(&["--http-stall", "--header", "X-Chaos: hang"]);
    let (status, _) = curl(&["-m", "2", "-H", "X-Chaos: hang", &format!("{url}/h")]);
    assert_eq!(status, 28, "curl timed out waiting");
    let (status, body) = curl(&[&format!("{url}/ok")]);
    assert_eq!((status, body.as_str()), (0, "/ok"));
    assert_eq!(upstream.requests(), ["GET /ok"]);
}

#[test]
fn a_reset_comes_in_the_requests_turn_and_the_upstream_never_sees_it() {
    if !installed("curl") {
        return;
    }
    let upstream = Upstream::start();
    let (proxy, url) = upstream.behind(&["--http-reset", "--path", "/flaky"]);
    let (status, _) = curl(&[&format!("{url}/flaky")]);
    assert_eq!(status, 56, "curl saw the connection reset");
    proxy.wait_for_stderr("reset, as --http-reset asked");
    assert_eq!(curl(&[&format!("{url}/fine")]).1, "/fine");
    assert_eq!(upstream.requests(), ["GET /fine"]);
}

#[test]
fn a_cut_answer_ends_after_so_much_of_its_body() {
    if !installed("curl") {
        return;
    }
    let upstream = Upstream::start();
    let (_proxy, url) = upstream.behind(&["--http-cut-after", "1KiB", "--first", "1"]);
    let bytes = format!("{url}/bytes/100000");
    let (status, written) = curl(&["-o", "/dev/null", "-w", "%{size_download}", &bytes]);
    assert_eq!((status, written.as_str()), (18, "1024"), "a partial file");
    let (status, written) = curl(&["-o", "/dev/null", "-w", "%{size_download}", &bytes]);
    assert_eq!((status, written.as_str()), (0, "100000"));
}

#[test]
fn what_is_not_http_passes_untouched_and_is_said_once() {
    let upstream = Upstream::start();
    let (proxy, _) = upstream.behind(&["--http-status", "503"]);
    for _ in 0..2 {
        let mut stream = connect(&proxy.address);
        // A TLS ClientHello's first bytes: the server answers as it will.
        stream
            .write_all(b"\x16\x03\x01\x00\x05hello\r\n\r\n")
            .unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        let _ = stream.read_to_end(&mut back);
        let back = String::from_utf8_lossy(&back);
        assert!(back.contains("Error code: 400"), "the server's own: {back}");
    }
    let said = proxy.wait_for_stderr("not HTTP/1.x: passed untouched");
    assert_eq!(said.matches("passed untouched").count(), 1, "{said}");
}

#[test]
fn http_flags_that_do_not_hold_together_are_refused() {
    for (args, words) in [
        (
            &["--first", "2"][..],
            "--first picks requests for an HTTP fault",
        ),
        (
            &["--http-status", "503", "--http-reset"],
            "--http-status and --http-reset: one HTTP fault at a time",
        ),
        (
            &["--http-status", "700"],
            "invalid value '700' for '--http-status <CODE[:BODY]>'",
        ),
        (
            &["--http-status", "503", "--path", "pay/*"],
            "invalid value 'pay/*' for '--path <GLOB>'",
        ),
        (
            &["--http-status", "503", "--during", "20s..10s"],
            "ends before it begins",
        ),
    ] {
        let mut command = shape(["--listen", "127.0.0.1:0", "--connect", "127.0.0.1:9"]);
        command.args(args);
        let run = run(command, Stdio::null());
        assert_eq!(run.code(), 2, "{args:?}");
        assert!(run.stderr.contains(words), "{args:?}: {}", run.stderr);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
    }
    let run = run(shape(["--http-status", "503"]), Stdio::null());
    assert_eq!(run.code(), 2);
    assert!(
        run.stderr
            .contains("--http-status applies to a TCP proxy's requests")
    );
}

#[test]
fn remote_changes_the_rule_counts_afresh_and_turns_it_off() {
    if !installed("curl") {
        return;
    }
    let runtime = Runtime::new("http-remote");
    let upstream = Upstream::start();
    let proxy = Proxy::start_with(
        runtime.shape([]),
        &upstream.address,
        &["--http-status", "503", "--first", "1"],
    );
    let pid = proxy.child.id();
    runtime.wait_registered(pid);
    let url = format!("http://{}", proxy.address);
    let get = |path: &str| {
        curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("{url}{path}"),
        ])
        .1
    };
    assert_eq!([get("/a"), get("/b")], ["503", "200"]);
    let asked = runtime.remote(pid, []);
    assert!(
        String::from_utf8_lossy(&asked.stdout).contains(
            "http: answer 503 to requests among the first 1: seen 2, matched 2, picked 1"
        ),
        "{asked:?}"
    );
    let changed = runtime.remote(pid, ["--http-status", "429", "--path", "/slow/*"]);
    assert_eq!(changed.code(), 0, "{}", changed.stderr);
    assert_eq!([get("/slow/1"), get("/b")], ["429", "200"]);
    let off = runtime.remote(pid, ["--http-status", "off"]);
    assert!(String::from_utf8_lossy(&off.stdout).contains("http: off"));
    assert_eq!(get("/slow/2"), "200");
    let refused = runtime.remote(pid, ["--http-status", "99"]);
    assert_eq!(refused.code(), 2, "checked before it is sent");
    assert_eq!(
        upstream.requests(),
        ["GET /b", "GET /b", "GET /slow/2"],
        "what shape answered never reached it"
    );
}

#[cfg(feature = "exec")]
#[test]
fn under_exec_a_programs_own_requests_meet_the_rule_and_stats_count_them() {
    let Some(python) = urllib3() else { return };
    let upstream = Upstream::start();
    let url = format!("http://{}/own", upstream.address);
    let mut command = shape(["--http-status", "503", "--first", "2", "--stats", "--exec"]);
    command
        .arg(python)
        .arg(ours("tests/clients/http_urllib3.py"))
        .args(["retry", &url]);
    let run = run(command, Stdio::null());
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "200 /own");
    assert!(
        run.stderr.contains(
            "http: answer 503 to requests among the first 2: seen 3, matched 3, picked 2"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(upstream.requests(), ["GET /own"]);
}

#[cfg(feature = "serve")]
#[test]
fn serve_takes_an_http_toxic_from_toxiproxys_python_client() {
    let Some(python) = urllib3() else { return };
    let upstream = Upstream::start();
    let server = crate::serve::Toxiproxy::start(&[]);
    let port = server.api.rsplit(':').next().unwrap().to_string();
    let output = Command::new(python)
        .arg(ours("tests/clients/http_toxic_python.py"))
        .args([&port, &upstream.address])
        .output()
        .unwrap();
    let said_out = String::from_utf8_lossy(&output.stdout);
    let mut lines = said_out.lines();
    assert_eq!(lines.next(), Some("200 /api/cart"), "{}", said(&output));
    let toxic = lines.next().unwrap_or_default();
    assert!(
        toxic.starts_with("http [('body', 'try later'),") && toxic.contains("('status', 503)"),
        "{toxic}"
    );
    assert_eq!(upstream.requests(), ["GET /api/cart"]);
    let (_, metrics) = server.call_raw("GET", "/metrics", None);
    let picked = r#"shape_http_requests_total{counted="picked",proxy="web",toxic="first_two"} 2"#;
    assert!(metrics.contains(picked), "{metrics}");
    let (_, state) = server.call("GET", "/ui/state", None);
    let counted = &state["proxies"][0]["toxics"][0]["requests"];
    assert_eq!(
        counted,
        &serde_json::json!({"seen": 3, "matched": 3, "picked": 2})
    );
}

#[cfg(feature = "serve")]
#[test]
fn serve_refuses_an_http_toxic_that_does_not_read() {
    let server = crate::serve::Toxiproxy::start(&[]);
    server.proxy("web", "127.0.0.1:1", serde_json::json!({}));
    for (attributes, words) in [
        (serde_json::json!({"status": 700}), "attribute status"),
        (
            serde_json::json!({"status": 503, "path": "api"}),
            "attribute path",
        ),
        (
            serde_json::json!({"status": 503, "reset": 1}),
            "one fault at a time",
        ),
    ] {
        let (status, answer) = server.call(
            "POST",
            "/proxies/web/toxics",
            Some(serde_json::json!({"type": "http", "attributes": attributes})),
        );
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"].as_str().unwrap().contains(words),
            "{answer}"
        );
    }
}

#[test]
fn json_progress_records_carry_the_rules_counts() {
    if !installed("curl") {
        return;
    }
    let upstream = Upstream::start();
    let args = [
        "--http-status",
        "503",
        "--first",
        "1",
        "--progress",
        "json",
        "-i",
        "0.1",
    ];
    let (proxy, url) = upstream.behind(&args);
    for path in ["/a", "/b"] {
        curl(&["-o", "/dev/null", &format!("{url}{path}")]);
    }
    proxy.wait_for_stderr(r#""http":{"seen":2,"matched":2,"picked":1}"#);
}
