//! A QUIC download (aioquic, from PyPI) through a link with a delay, loss
//! and a rate: it completes intact, no sooner than the rate and the delay
//! allow.

use crate::harness::*;
use std::process::{Child, Command, Stdio};

/// aioquic's server of tests/clients/quic_download.py, killed when
/// dropped.
struct Server {
    child: Child,
    port: String,
    _certificate: Scratch,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> std::path::PathBuf {
    ours("target/clients/venv/bin/python")
}

/// True if the venv has aioquic; if not, the test is skipped, except
/// under CI.
fn aioquic_installed() -> bool {
    if !set_up(&python()) {
        return false;
    }
    let has = Command::new(python())
        .args(["-c", "import aioquic"])
        .status()
        .is_ok_and(|status| status.success());
    available(
        has,
        "aioquic is missing: run tests/clients/setup",
        ".ci/run installs it with tests/clients/setup",
    )
}

fn serve() -> Server {
    let certificate = Scratch::new("quic");
    let mut child = Command::new(python())
        .arg(ours("tests/clients/quic_download.py"))
        .arg("serve")
        .arg(certificate.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let first = first_line(&mut child);
    let port = first
        .trim()
        .strip_prefix("listening on ")
        .map(str::to_string);
    let server = Server {
        child,
        port: port.clone().unwrap_or_default(),
        _certificate: certificate,
    };
    assert!(port.is_some(), "the QUIC server said {first:?}");
    server
}

#[test]
fn a_quic_download_completes_intact_through_delay_loss_and_a_rate() {
    if !aioquic_installed() {
        return;
    }
    let server = serve();
    let link = super::link_to(
        &format!("udp:127.0.0.1:{}", server.port),
        &[
            "--delay", "50ms", "--drop", "1%", "--rate", "20Mbit", "--seed", "7",
        ],
    );
    let port = link.address.rsplit(':').next().unwrap();
    const BYTES: u64 = 1 << 20;
    let fetched = Command::new(python())
        .arg(ours("tests/clients/quic_download.py"))
        .args(["fetch", port, &BYTES.to_string()])
        .output()
        .unwrap();
    let said: serde_json::Value = serde_json::from_slice(&fetched.stdout).unwrap_or_else(|_| {
        panic!(
            "the QUIC client said {:?} {:?}",
            String::from_utf8_lossy(&fetched.stdout),
            String::from_utf8_lossy(&fetched.stderr)
        )
    });
    eprintln!("QUIC download: {said}");
    assert_eq!(said["bytes"], BYTES, "{said}");
    assert_eq!(said["intact"], true, "{said}");
    // No sooner than the bytes at the rate, plus the handshake's round
    // trip and the request's (100 ms each); loss costs Reno far more.
    let seconds = said["seconds"].as_f64().unwrap();
    let least = BYTES as f64 * 8.0 / 20e6 + 0.2;
    assert!((least..90.0).contains(&seconds), "{seconds:.2}s");
    // Datagrams were lost, each way, and QUIC made up for them.
    let line = super::what_befell(&link);
    assert_eq!(line.matches(" lost").count(), 2, "{line}");
}
