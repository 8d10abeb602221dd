//! `shape --serve`: toxiproxy's HTTP API, route by route, held to what the
//! real toxiproxy answers. Every test here runs against shape, or against
//! the real toxiproxy-server when `SHAPE_TOXIPROXY` names its binary (the
//! tests of shape's extras are then skipped, saying so).

use crate::harness::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A toxiproxy server on a free port, killed when dropped.
pub struct Toxiproxy {
    child: Child,
    /// Where its API listens: `127.0.0.1:8474`.
    pub api: String,
    agent: ureq::Agent,
    /// What it said on standard error, for shape.
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    real: bool,
}

impl Toxiproxy {
    /// shape --serve with `args`, or the real server if `SHAPE_TOXIPROXY`
    /// names it.
    pub fn start(args: &[&str]) -> Toxiproxy {
        match std::env::var("SHAPE_TOXIPROXY") {
            Ok(binary) if !binary.is_empty() => Toxiproxy::real(&binary),
            _ => Toxiproxy::shape(args),
        }
    }

    fn shape(args: &[&str]) -> Toxiproxy {
        let mut command = shape(["--serve", "127.0.0.1:0"]);
        command.args(args);
        Toxiproxy::from(command)
    }

    /// shape started by `command`, which runs `shape --serve 127.0.0.1:0`.
    pub fn from(mut command: Command) -> Toxiproxy {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (api, stderr) = where_it_says(&mut child, "shape: serving the toxiproxy API on ");
        Toxiproxy {
            child,
            api,
            agent: agent(),
            stderr,
            real: false,
        }
    }

    fn real(binary: &str) -> Toxiproxy {
        let child = Command::new(binary)
            .args(["-host", "127.0.0.1", "-port", "0", "-proxy-metrics"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = Toxiproxy {
            child,
            api: String::new(),
            agent: agent(),
            stderr: Default::default(),
            real: true,
        };
        // It says only the address it was given (port 0): where it
        // listens is read from its socket, its only one at start.
        let mut listening = Vec::new();
        wait_until("toxiproxy to listen", || {
            listening = listening_ports(server.pid());
            !listening.is_empty()
        });
        server.api = format!("127.0.0.1:{}", listening[0]);
        server
    }

    /// True for shape, whose extras the real toxiproxy has not.
    pub fn is_shape(&self) -> bool {
        if self.real {
            skipped("a shape extra, not run against the real toxiproxy");
        }
        !self.real
    }

    /// `method path` with `body`: the status and the JSON answered (null
    /// for none).
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let (status, text) = self.call_raw(method, path, body.map(|b| b.to_string()));
        let value = match text.trim() {
            "" => Value::Null,
            text => serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text}")),
        };
        (status, value)
    }

    /// `method path` with `body` as text: the status and the text answered.
    pub fn call_raw(&self, method: &str, path: &str, body: Option<String>) -> (u16, String) {
        let url = format!("http://{}{path}", self.api);
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .body(body.unwrap_or_default())
            .unwrap();
        let mut response = self
            .agent
            .run(request)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        (status, text)
    }

    /// Creates proxy `name` to `upstream` on a free port of 127.0.0.1, with
    /// `more` fields; returns where it listens.
    pub fn proxy(&self, name: &str, upstream: &str, more: Value) -> String {
        let mut body = json!({"name": name, "upstream": upstream, "listen": "127.0.0.1:0"});
        body.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        let (status, made) = self.call("POST", "/proxies", Some(body));
        assert_eq!(status, 201, "{made}");
        made["listen"].as_str().unwrap().to_string()
    }

    /// Where proxy `name` listens, as the API says.
    pub fn listen_of(&self, name: &str) -> String {
        let (status, proxy) = self.call("GET", &format!("/proxies/{name}"), None);
        assert_eq!(status, 200, "{proxy}");
        proxy["listen"].as_str().unwrap().to_string()
    }

    /// Adds toxic `toxic` to proxy `name`.
    pub fn toxic(&self, name: &str, toxic: Value) -> Value {
        let (status, made) = self.call("POST", &format!("/proxies/{name}/toxics"), Some(toxic));
        assert_eq!(status, 200, "{made}");
        made
    }

    /// What shape said on standard error.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits up to ten seconds for shape to say `text` on standard error.
    pub fn wait_for_stderr(&self, text: &str) {
        wait_until_said(&self.stderr, text);
    }

    /// Its resident memory, in KiB.
    pub fn rss_kib(&self) -> u64 {
        memory_kib(self.child.id(), "VmRSS")
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (shape only).
    pub fn signal(&self, signal: rustix::process::Signal) {
        send_signal(self.child.id(), signal);
    }

    /// Waits up to `most` for it to exit.
    pub fn exit_within(&mut self, most: Duration) -> Option<std::process::ExitStatus> {
        exit_within(&mut self.child, most)
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP client that answers every status as it comes, and never waits
/// more than 30 s.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// An echo server: every connection echoed on a thread of its own.
pub fn echo_server() -> String {
    crate::proxy::server(crate::proxy::echo)
}

/// One round trip of `message` through `listen`, to an echo server.
pub fn round_trip(listen: &str, message: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(listen).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(message).unwrap();
    let mut back = vec![0; message.len()];
    stream.read_exact(&mut back).unwrap();
    back
}

#[test]
fn every_route_answers_with_toxiproxy_s_status_and_body() {
    let server = Toxiproxy::start(&[]);
    let upstream = echo_server();
    // Byte for byte as toxiproxy 2.12.0 answers: clients read what the
    // server supports from it.
    let (status, version) = server.call_raw("GET", "/version", None);
    assert_eq!(status, 200);
    assert_eq!(version, "{\"version\": \"2.12.0\"}\n");

    let listen = server.proxy("echo", &upstream, json!({}));
    assert!(
        listen.starts_with("127.0.0.1:") && !listen.ends_with(":0"),
        "{listen}"
    );
    let (status, all) = server.call("GET", "/proxies", None);
    assert_eq!(status, 200);
    let proxy = &all["echo"];
    assert_eq!(
        (
            &proxy["name"],
            &proxy["listen"],
            &proxy["upstream"],
            &proxy["enabled"],
            &proxy["toxics"]
        ),
        (
            &json!("echo"),
            &json!(listen),
            &json!(upstream),
            &json!(true),
            &json!([])
        )
    );
    let again = json!({"name": "echo", "upstream": upstream, "listen": "127.0.0.1:0"});
    assert_eq!(
        server.call("POST", "/proxies", Some(again)),
        (409, json!({"error": "proxy already exists", "status": 409}))
    );
    assert_eq!(
        server.call("POST", "/proxies", Some(json!({"upstream": upstream}))),
        (
            400,
            json!({"error": "missing required field: name", "status": 400})
        )
    );
    assert_eq!(
        server.call("POST", "/proxies", Some(json!({"name": "x"}))),
        (
            400,
            json!({"error": "missing required field: upstream", "status": 400})
        )
    );
    let (status, bad) = server.call_raw("POST", "/proxies", Some("{not json".into()));
    assert_eq!(status, 400);
    assert!(bad.contains("bad request body"), "{bad}");
    assert_eq!(server.call("GET", "/proxies/echo", None).0, 200);
    assert_eq!(
        server.call("GET", "/proxies/nope", None),
        (404, json!({"error": "proxy not found", "status": 404}))
    );

    // Toxics: defaults, names, merging, and their errors.
    let latency = server.toxic(
        "echo",
        json!({"type": "latency", "attributes": {"latency": 10}}),
    );
    assert_eq!(
        latency,
        json!({"attributes": {"latency": 10, "jitter": 0}, "name": "latency_downstream",
               "type": "latency", "stream": "downstream", "toxicity": 1})
    );
    assert_eq!(
        server.call(
            "POST",
            "/proxies/echo/toxics",
            Some(json!({"type": "latency", "name": "latency_downstream", "stream": "upstream"}))
        ),
        (409, json!({"error": "toxic already exists", "status": 409}))
    );
    assert_eq!(
        server.call(
            "POST",
            "/proxies/echo/toxics",
            Some(json!({"type": "bogus"}))
        ),
        (400, json!({"error": "invalid toxic type", "status": 400}))
    );
    assert_eq!(
        server.call(
            "POST",
            "/proxies/echo/toxics",
            Some(json!({"type": "noop", "stream": "sideways"}))
        ),
        (
            400,
            json!({"error": "stream was invalid, can be either upstream or downstream", "status": 400})
        )
    );
    assert_eq!(
        server
            .call(
                "POST",
                "/proxies/nope/toxics",
                Some(json!({"type": "noop"}))
            )
            .0,
        404
    );
    let (status, list) = server.call("GET", "/proxies/echo/toxics", None);
    assert_eq!((status, list.as_array().map(Vec::len)), (200, Some(1)));
    let path = "/proxies/echo/toxics/latency_downstream";
    assert_eq!(server.call("GET", path, None), (200, latency));
    let (status, changed) = server.call("PATCH", path, Some(json!({"attributes": {"jitter": 3}})));
    assert_eq!(status, 200);
    assert_eq!(
        changed["attributes"],
        json!({"latency": 10, "jitter": 3}),
        "merged"
    );
    let (status, changed) = server.call("POST", path, Some(json!({"toxicity": 0.5})));
    assert_eq!((status, &changed["toxicity"]), (200, &json!(0.5)));
    assert_eq!(
        changed["attributes"],
        json!({"latency": 10, "jitter": 3}),
        "kept"
    );
    let (status, changed) = server.call("PATCH", path, Some(json!({"toxicity": 1.5})));
    assert_eq!(
        (status, &changed["toxicity"]),
        (200, &json!(1.5)),
        "any number, as given"
    );
    assert_eq!(
        server.call("GET", "/proxies/echo/toxics/nope", None),
        (404, json!({"error": "toxic not found", "status": 404}))
    );
    assert_eq!(server.call("DELETE", path, None), (204, Value::Null));
    assert_eq!(server.call("DELETE", path, None).0, 404);
    let shouted = server.toxic("echo", json!({"type": "noop", "stream": "UPSTREAM"}));
    assert_eq!(
        (&shouted["name"], &shouted["stream"]),
        (&json!("noop_UPSTREAM"), &json!("UPSTREAM")),
        "a stream in any case, kept as given"
    );
    assert_eq!(
        server
            .call("DELETE", "/proxies/echo/toxics/noop_UPSTREAM", None)
            .0,
        204
    );
    assert_eq!(
        server.call_raw("PUT", "/proxies", None),
        (405, String::new())
    );
    assert_eq!(server.call_raw("GET", "/proxies/", None).0, 404);
    let (status, text) = server.call_raw("POST", "/proxies", Some("null".into()));
    assert_eq!(
        (status, serde_json::from_str::<Value>(&text).unwrap()),
        (
            400,
            json!({"error": "missing required field: name", "status": 400})
        ),
        "null is a proxy with nothing given"
    );

    // Proxies change, stop and go.
    let (status, changed) = server.call("PATCH", "/proxies/echo", Some(json!({"enabled": false})));
    assert_eq!((status, &changed["enabled"]), (200, &json!(false)));
    assert!(
        TcpStream::connect(&listen).is_err(),
        "a disabled proxy refuses"
    );
    let (status, changed) = server.call("POST", "/proxies/echo", Some(json!({"enabled": true})));
    assert_eq!(
        (status, &changed["listen"]),
        (200, &json!(listen)),
        "the same address again"
    );
    assert_eq!(round_trip(&listen, b"hello"), b"hello");
    assert_eq!(
        server.call("DELETE", "/proxies/echo", None),
        (204, Value::Null)
    );
    assert!(
        TcpStream::connect(&listen).is_err(),
        "a deleted proxy refuses"
    );
    assert_eq!(server.call("DELETE", "/proxies/echo", None).0, 404);
    assert_eq!(
        server.call_raw("GET", "/nowhere", None),
        (404, "404 page not found\n".to_string())
    );
}

#[test]
fn a_listen_address_in_use_is_a_500_and_no_proxy() {
    let server = Toxiproxy::start(&[]);
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let (status, answer) = server.call(
        "POST",
        "/proxies",
        Some(json!({"name": "p", "upstream": "127.0.0.1:1", "listen": address})),
    );
    assert_eq!((status, &answer["status"]), (500, &json!(500)), "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("in use"),
        "{answer}"
    );
    assert_eq!(server.call("GET", "/proxies/p", None).0, 404);
}

#[test]
fn disabling_a_proxy_closes_its_open_connections_and_enabling_listens_again() {
    let server = Toxiproxy::start(&[]);
    let listen = server.proxy("door", &echo_server(), json!({}));
    let mut open = TcpStream::connect(&listen).unwrap();
    open.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    open.write_all(b"x").unwrap();
    open.read_exact(&mut [0; 1]).unwrap();
    let (status, _) = server.call("POST", "/proxies/door", Some(json!({"enabled": false})));
    assert_eq!(status, 200);
    let mut rest = Vec::new();
    let closed = open.read_to_end(&mut rest);
    assert!(
        matches!(closed, Ok(0))
            || closed.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the open connection is closed"
    );
    assert!(TcpStream::connect(&listen).is_err(), "and nothing listens");
    server.call("POST", "/proxies/door", Some(json!({"enabled": true})));
    assert_eq!(round_trip(&listen, b"again"), b"again");
}

#[test]
fn an_upstream_whose_name_does_not_resolve_yet_is_served_once_it_does() {
    if !mount_namespaces() {
        return;
    }
    // shape in a mount namespace whose /etc/hosts is a file of the test's,
    // which names the upstream only later (written in place: the bind
    // mount shows the same file).
    let scratch = Scratch::new("serve-resolve");
    let hosts = scratch.file("hosts", b"127.0.0.1 localhost\n");
    let command = shape_with_hosts(&hosts, &["--serve", "127.0.0.1:0"]);
    let server = Toxiproxy::from(command);
    let port = echo_server().rsplit(':').next().unwrap().to_string();
    let upstream = format!("later.shape-test:{port}");
    let listen = server.proxy("later", &upstream, json!({}));
    let mut refused = TcpStream::connect(&listen).unwrap();
    refused
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut nothing = Vec::new();
    let _ = refused.read_to_end(&mut nothing);
    assert!(nothing.is_empty(), "no upstream, nothing comes");
    server.wait_for_stderr("does not resolve");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&hosts)
        .unwrap()
        .write_all(b"127.0.0.1 later.shape-test\n")
        .unwrap();
    let resolved = comes_within(Duration::from_secs(10), || {
        let mut stream = TcpStream::connect(&listen).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = stream.write_all(b"resolved");
        let mut back = [0; 8];
        stream.read_exact(&mut back).is_ok() && &back == b"resolved"
    });
    assert!(resolved, "never resolved: {}", server.stderr());
}

#[test]
fn a_change_of_upstream_restarts_the_proxy_on_its_address() {
    let server = Toxiproxy::start(&[]);
    let first = echo_server();
    let second = crate::proxy::server(|mut stream| {
        let _ = stream.write_all(b"second");
    });
    let listen = server.proxy("p", &first, json!({}));
    assert_eq!(round_trip(&listen, b"first"), b"first");
    let (status, changed) = server.call("PATCH", "/proxies/p", Some(json!({"upstream": second})));
    assert_eq!((status, &changed["upstream"]), (200, &json!(second)));
    assert_eq!(changed["listen"], json!(listen));
    let mut stream = TcpStream::connect(&listen).unwrap();
    let mut said = String::new();
    stream.read_to_string(&mut said).unwrap();
    assert_eq!(said, "second");
}

#[test]
fn populate_keeps_what_is_unchanged_with_its_toxics_and_replaces_the_rest() {
    let server = Toxiproxy::start(&[]);
    let upstream = echo_server();
    let kept = server.proxy("kept", &upstream, json!({}));
    server.toxic(
        "kept",
        json!({"type": "latency", "attributes": {"latency": 5}}),
    );
    let replaced = server.proxy("replaced", &upstream, json!({}));
    server.toxic(
        "replaced",
        json!({"type": "latency", "attributes": {"latency": 5}}),
    );
    let body = json!([
        {"name": "kept", "upstream": upstream, "listen": kept},
        {"name": "replaced", "upstream": "127.0.0.1:1", "listen": replaced},
        {"name": "new", "upstream": upstream, "listen": "127.0.0.1:0", "enabled": false},
    ]);
    let (status, answer) = server.call("POST", "/populate", Some(body));
    assert_eq!(status, 201, "{answer}");
    let proxies = answer["proxies"].as_array().unwrap();
    assert_eq!(proxies.len(), 3, "{answer}");
    assert_eq!(
        proxies[0]["toxics"].as_array().unwrap().len(),
        1,
        "kept with its toxic"
    );
    assert_eq!(proxies[1]["toxics"], json!([]), "replaced, toxics and all");
    assert_eq!(proxies[1]["upstream"], json!("127.0.0.1:1"));
    assert_eq!(proxies[2]["enabled"], json!(false));
    assert_eq!(round_trip(&kept, b"still"), b"still");

    let missing = json!([{"name": "a", "upstream": upstream}, {"name": "b"}]);
    let (status, answer) = server.call("POST", "/populate", Some(missing));
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["error"],
        json!("missing required field: upstream at proxy 2")
    );
    assert_eq!(
        server.call("GET", "/proxies/a", None).0,
        404,
        "nothing made"
    );
}

#[test]
fn reset_enables_every_proxy_and_removes_every_toxic() {
    let server = Toxiproxy::start(&[]);
    let upstream = echo_server();
    let on = server.proxy("on", &upstream, json!({}));
    server.toxic(
        "on",
        json!({"type": "timeout", "attributes": {"timeout": 0}}),
    );
    let off = server.proxy("off", &upstream, json!({}));
    server.call("PATCH", "/proxies/off", Some(json!({"enabled": false})));
    assert_eq!(server.call("POST", "/reset", None), (204, Value::Null));
    let (_, all) = server.call("GET", "/proxies", None);
    assert_eq!(all["on"]["toxics"], json!([]));
    assert_eq!(all["off"]["enabled"], json!(true));
    assert_eq!(round_trip(&on, b"on"), b"on");
    assert_eq!(round_trip(&off, b"off"), b"off");
}

#[test]
fn metrics_count_what_each_proxy_received_and_sent_with_toxiproxy_s_names() {
    let server = Toxiproxy::start(&[]);
    let upstream = echo_server();
    let listen = server.proxy("counted", &upstream, json!({}));
    assert_eq!(round_trip(&listen, &[7; 1000]), vec![7; 1000]);
    let labels = format!("listener=\"{listen}\",proxy=\"counted\",upstream=\"{upstream}\"");
    let mut text = String::new();
    let counted = comes_within(Duration::from_secs(10), || {
        let (status, now) = server.call_raw("GET", "/metrics", None);
        assert_eq!(status, 200);
        text = now;
        [
            "toxiproxy_proxy_received_bytes_total{direction=\"upstream\",",
            "toxiproxy_proxy_received_bytes_total{direction=\"downstream\",",
            "toxiproxy_proxy_sent_bytes_total{direction=\"upstream\",",
            "toxiproxy_proxy_sent_bytes_total{direction=\"downstream\",",
        ]
        .iter()
        .all(|counter| text.contains(&format!("{counter}{labels}}} 1000")))
    });
    assert!(counted, "{text}");
}

#[test]
fn a_proxy_created_with_its_toxics_has_them_before_its_first_connection() {
    let server = Toxiproxy::start(&[]);
    if !server.is_shape() {
        return;
    }
    let upstream = echo_server();
    let listen = server.proxy(
        "born",
        &upstream,
        json!({"toxics": [{"type": "latency", "stream": "upstream", "attributes": {"latency": 300}}]}),
    );
    let (_, proxy) = server.call("GET", "/proxies/born", None);
    assert_eq!(proxy["toxics"][0]["name"], json!("latency_upstream"));
    let start = Instant::now();
    assert_eq!(round_trip(&listen, b"x"), b"x");
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
    let (status, _) = server.call(
        "POST",
        "/proxies",
        Some(json!({"name": "bad", "upstream": upstream, "toxics": [{"type": "bogus"}]})),
    );
    assert_eq!(status, 400);
    assert_eq!(server.call("GET", "/proxies/bad", None).0, 404);
}

#[test]
fn a_config_file_makes_its_proxies_at_start_and_a_bad_one_is_refused() {
    let scratch = Scratch::new("serve-config");
    let upstream = echo_server();
    let config = scratch.file(
        "toxiproxy.json",
        json!([{"name": "configured", "listen": "127.0.0.1:0", "upstream": upstream}])
            .to_string()
            .as_bytes(),
    );
    let server = Toxiproxy::shape(&["--config", config.to_str().unwrap()]);
    let listen = server.listen_of("configured");
    assert!(
        listen.starts_with("127.0.0.1:") && !listen.ends_with(":0"),
        "{listen}"
    );
    assert_eq!(round_trip(&listen, b"configured"), b"configured");
    drop(server);

    let bad = scratch.file("bad.json", b"{\"not\": \"a list\"}");
    let run = run(
        shape(["--serve", "127.0.0.1:0", "--config", bad.to_str().unwrap()]),
        Stdio::null(),
    );
    assert_eq!(run.code(), 2, "{}", run.stderr);
    assert_says(&run.stderr, "--config");
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[test]
fn the_server_refuses_flags_it_has_no_use_for_and_an_address_in_use() {
    assert_refused(
        shape(["--serve", "127.0.0.1:0", "--rate", "1MiB"]),
        "--rate",
    );
    assert_refused(shape(["--config", "x.json"]), "--serve");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let run = run(shape(["--serve", &address]), Stdio::null());
    assert_eq!(run.code(), 1, "{}", run.stderr);
    assert_says(&run.stderr, &format!("--serve {address}"));
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[test]
fn sigterm_and_sigint_close_every_listener_and_connection_and_exit_0() {
    for signal in [rustix::process::Signal::TERM, rustix::process::Signal::INT] {
        let mut server = Toxiproxy::shape(&[]);
        let upstream = echo_server();
        let listen = server.proxy("p", &upstream, json!({}));
        let mut open = TcpStream::connect(&listen).unwrap();
        open.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        assert_eq!(round_trip(&listen, b"x"), b"x");
        server.signal(signal);
        let status = server
            .exit_within(Duration::from_secs(10))
            .expect("it ended");
        assert_eq!(status.code(), Some(0), "{signal:?}: {}", server.stderr());
        let mut rest = Vec::new();
        assert!(
            matches!(open.read_to_end(&mut rest), Ok(0)),
            "the open connection is closed"
        );
        assert!(TcpStream::connect(&listen).is_err(), "nothing listens");
    }
}

#[test]
fn every_loop_accepts_from_a_proxys_socket_and_its_toxics_reach_every_client() {
    const QUARTER_MIB: usize = 1 << 18;
    let server = Toxiproxy::from(shape(["--serve", "127.0.0.1:0", "--loops", "2"]));
    let listen = server.proxy("spread", &echo_server(), json!({}));
    // Sixteen clients at once, each echoing a quarter of a MiB.
    let block = random_bytes(QUARTER_MIB, 48);
    let clients: Vec<TcpStream> = std::thread::scope(|scope| {
        let echoing: Vec<_> = (0..16)
            .map(|_| {
                scope.spawn(|| {
                    let mut client = TcpStream::connect(&listen).unwrap();
                    client
                        .set_read_timeout(Some(Duration::from_secs(30)))
                        .unwrap();
                    let mut writer = client.try_clone().unwrap();
                    let sent = block.clone();
                    let sender = std::thread::spawn(move || writer.write_all(&sent).unwrap());
                    let mut back = vec![0; QUARTER_MIB];
                    client.read_exact(&mut back).unwrap();
                    sender.join().unwrap();
                    assert!(back == block, "the echo differs");
                    client
                })
            })
            .collect();
        echoing.into_iter().map(|e| e.join().unwrap()).collect()
    });
    assert_eq!(threads_cpu_seconds(server.pid(), "proxies-").len(), 2);
    // Both loops accept from the proxy's socket, and all it took are
    // served. (Which loop takes how many is the machine's to say: a loop
    // not scheduled while the clients come takes none.)
    let port: u16 = listen.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(polls_listening_on(server.pid(), port), 2);
    let held = accepted_by_each_poll(server.pid(), port);
    assert_eq!(held.iter().sum::<usize>(), 16, "{held:?}");
    // A toxic added now reaches the open connections of both loops.
    server.toxic(
        "spread",
        json!({"type": "latency", "stream": "downstream", "attributes": {"latency": 300}}),
    );
    std::thread::scope(|scope| {
        for mut client in clients {
            scope.spawn(move || {
                let started = Instant::now();
                client.write_all(b"ping").unwrap();
                let mut back = [0; 4];
                client.read_exact(&mut back).unwrap();
                let took = started.elapsed();
                assert!(took >= Duration::from_millis(290), "an echo took {took:?}");
            });
        }
    });
}
