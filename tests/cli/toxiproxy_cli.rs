//! shape under toxiproxy-server's name: toxiproxy-server's command line,
//! as scripts and images start it.

use crate::harness::*;
use crate::serve::{Toxiproxy, echo_server, round_trip};
use serde_json::json;
use std::process::{Command, Stdio};

/// A link named `name` to shape, in `dir`.
fn linked(dir: &Scratch, name: &str) -> std::path::PathBuf {
    let link = dir.path().join(name);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_shape"), &link).unwrap();
    link
}

#[test]
fn toxiproxy_server_s_command_line_serves_its_config_on_its_port() {
    let dir = Scratch::new("toxiproxy-link");
    let link = linked(&dir, "toxiproxy-server");
    let upstream = echo_server();
    let config = dir.file(
        "toxiproxy.json",
        json!([{"name": "echo", "listen": "127.0.0.1:0", "upstream": upstream}])
            .to_string()
            .as_bytes(),
    );
    let mut command = Command::new(&link);
    command
        .args(["-host", "127.0.0.1", "-port", "0", "-config"])
        .arg(&config);
    // Where it serves, as it says: on -host, and on a port the system
    // chose for -port 0, not on toxiproxy's default 8474.
    let server = Toxiproxy::from(command);
    let port = server.api.strip_prefix("127.0.0.1:").unwrap_or_default();
    assert!(
        !["", "0", "8474"].contains(&port),
        "serving on {}",
        server.api
    );
    let (status, version) = server.call_raw("GET", "/version", None);
    assert_eq!(
        (status, version.as_str()),
        (200, "{\"version\": \"2.12.0\"}\n")
    );
    let listen = server.listen_of("echo");
    assert_eq!(
        round_trip(&listen, b"through the config"),
        b"through the config"
    );
    // Without -proxy-metrics, /metrics is not there, as in toxiproxy.
    assert_eq!(server.call_raw("GET", "/metrics", None).0, 404);
}

#[test]
fn toxiproxy_s_flags_in_go_s_spellings_and_its_usage_for_a_bad_one() {
    let dir = Scratch::new("toxiproxy-flags");
    let link = linked(&dir, "toxiproxy");
    let mut command = Command::new(&link);
    command.args(["--host=127.0.0.1", "--port=0", "-proxy-metrics"]);
    let server = Toxiproxy::from(command);
    let (status, metrics) = server.call_raw("GET", "/metrics", None);
    assert_eq!(status, 200, "{metrics}");
    drop(server);

    // A config that cannot be read is said, and served without, as
    // toxiproxy-server does.
    let mut command = Command::new(&link);
    command.args([
        "-host",
        "127.0.0.1",
        "-port",
        "0",
        "-config",
        "/nonexistent.json",
    ]);
    let server = Toxiproxy::from(command);
    server.wait_for_stderr(
        "shape: -config /nonexistent.json: No such file or directory; serving without it",
    );
    assert_eq!(server.call("GET", "/proxies", None).1, json!({}));
    drop(server);

    let refused = Command::new(&link)
        .arg("-bogus")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.starts_with("flag provided but not defined: -bogus\nUsage of "),
        "{said}"
    );
    assert!(said.contains("  -port string\n"), "{said}");
    let version = Command::new(&link).arg("-version").output().unwrap();
    assert_eq!(version.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&version.stdout).starts_with("toxiproxy-server version 2.12.0"),
        "{version:?}"
    );
    let help = Command::new(&link).arg("-help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stderr).starts_with("Usage of "));
}
