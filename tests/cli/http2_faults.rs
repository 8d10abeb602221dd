//! HTTP faults on HTTP/2 streams: grpcio's client, with a retry policy,
//! against grpcio's server (`tests/clients/grpc_calls.py`, generic
//! handlers, no code generation), through a proxy that hands each HTTP/2
//! connection to its relay on the h2 crate.

use crate::harness::*;
use crate::http_faults::{Upstream, said, urllib3};
use std::process::Command;

/// A gRPC server, which says each call it gets; `None` (said) where
/// grpcio is missing.
fn grpc_server() -> Option<(Upstream, std::path::PathBuf)> {
    let python = urllib3()?;
    let has_grpc = Command::new(&python)
        .args(["-c", "import grpc"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !available(
        has_grpc,
        "grpcio is not installed: run tests/clients/setup",
        "tests/clients/setup installs it",
    ) {
        return None;
    }
    let mut command = Command::new(&python);
    command
        .arg(ours("tests/clients/grpc_calls.py"))
        .arg("serve");
    Some((Upstream::run(command, "call "), python))
}

/// What `grpc_calls.py WHAT` says through `proxy`.
fn calls(python: &std::path::Path, what: &str, proxy: &Listening) -> String {
    let output = Command::new(python)
        .arg(ours("tests/clients/grpc_calls.py"))
        .args([what, &proxy.address])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", said(&output));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn grpc_retries_past_the_first_two_unavailable_and_the_server_sees_one_call() {
    let Some((server, python)) = grpc_server() else {
        return;
    };
    let (proxy, _) = server.behind(&[
        "--grpc-status",
        "UNAVAILABLE",
        "--first",
        "2",
        "--path",
        "/shop.Cart/Checkout",
    ]);
    assert_eq!(calls(&python, "call", &proxy), "ok ok");
    assert_eq!(server.requests(), ["/shop.Cart/Checkout"]);
}

#[test]
fn a_grpc_status_is_answered_trailers_only_with_its_message() {
    let Some((server, python)) = grpc_server() else {
        return;
    };
    let (proxy, _) = server.behind(&["--grpc-status", "UNAVAILABLE:down for a test"]);
    assert_eq!(
        calls(&python, "call", &proxy),
        "UNAVAILABLE down for a test"
    );
    assert!(
        server.requests().is_empty(),
        "five attempts, none reached it"
    );
}

#[test]
fn a_reset_on_http2_resets_the_stream_not_the_connection() {
    let Some((server, python)) = grpc_server() else {
        return;
    };
    let (proxy, _) = server.behind(&["--http-reset", "--first", "1"]);
    let said = calls(&python, "call", &proxy);
    assert!(
        said.starts_with("CANCELLED") && said.contains("RST_STREAM"),
        "{said}"
    );
    assert!(server.requests().is_empty());
}

#[test]
fn a_stalled_stream_waits_while_the_others_on_its_connection_go_on() {
    let Some((server, python)) = grpc_server() else {
        return;
    };
    let (proxy, _) = server.behind(&["--http-stall", "--header", "x-chaos: hang"]);
    assert_eq!(calls(&python, "stall", &proxy), "5 DEADLINE_EXCEEDED");
    assert_eq!(server.requests().len(), 5);
}

#[test]
fn sixty_four_mib_each_way_on_one_stream_pass_whole_past_a_rule_that_picks_nothing() {
    let Some((server, python)) = grpc_server() else {
        return;
    };
    let (proxy, _) = server.behind(&["--grpc-status", "14", "--path", "/never"]);
    assert_eq!(calls(&python, "echo", &proxy), "ok");
    assert_eq!(server.requests(), ["/shop.Cart/Echo"]);
}

#[test]
fn a_relayed_connection_keeps_its_link_to_the_server_delayed() {
    let Some((server, python)) = grpc_server() else {
        return;
    };
    let (proxy, _) = server.behind(&[
        "--grpc-status",
        "14",
        "--path",
        "/never",
        "--delay",
        "300ms",
    ]);
    let start = std::time::Instant::now();
    assert_eq!(calls(&python, "call", &proxy), "ok ok");
    // The call's request and answer each cross the link once, after the
    // handshakes' crossings: never less than a round trip.
    assert!(
        start.elapsed() >= std::time::Duration::from_millis(600),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn an_upgrade_to_h2c_is_declined_and_each_request_meets_the_rule() {
    if !installed("curl") {
        return;
    }
    let upstream = Upstream::start();
    let (_proxy, url) = upstream.behind(&["--http-status", "503", "--first", "1"]);
    // curl --http2 on http:// asks for h2c by Upgrade; the exchange stays
    // HTTP/1.1, kept alive, and the rule meets both requests.
    let output = Command::new("curl")
        .args([
            "-s",
            "--http2",
            "-w",
            "%{http_code} %{http_version}\\n",
            "-o",
            "/dev/null",
        ])
        .args([format!("{url}/a"), format!("{url}/b")])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.starts_with("503 1.1\n"), "{said}");
    assert!(said.ends_with("200 1.1\n"), "{said}");
    assert_eq!(upstream.requests(), ["GET /b"]);
}
