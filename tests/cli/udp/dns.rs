//! dig against a local dnsmasq through a lossy link: the retries bring
//! the answers, and a seed gives the same retries every run.

use crate::harness::*;
use std::process::{Child, Command, Stdio};

/// A dnsmasq on loopback that answers 192.0.2.7 for every name under
/// example.test, and nothing else; stopped when dropped.
struct Dnsmasq {
    child: Child,
    port: u16,
}

impl Dnsmasq {
    /// Starts one on a port of its own: dnsmasq cannot listen on port 0
    /// (`--port=0` turns DNS off), so it is started on a port drawn at
    /// random, and on another while it says the one it was given is in
    /// use.
    fn start() -> Dnsmasq {
        on_a_port_of_its_own("dnsmasq", 0, Dnsmasq::start_on)
    }

    /// Starts one on `port` and waits until it says it has started (it
    /// listens by then), or `None` if it says the port is in use.
    fn start_on(port: u16) -> Option<Dnsmasq> {
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        let child = Command::new("dnsmasq")
            .args([
                "--no-daemon",
                "--bind-interfaces",
                "--listen-address=127.0.0.1",
                "--no-resolv",
                "--no-hosts",
                "--conf-file=/dev/null",
                "--pid-file=",
                "--address=/example.test/192.0.2.7",
                // What it logs, on standard error.
                "--log-facility=-",
            ])
            .arg(format!("--port={port}"))
            .arg(format!("--user={user}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Stopped when dropped, should the wait fail.
        let mut server = Dnsmasq { child, port };
        let log = server.child.stderr.take().unwrap();
        match started_saying(log, ": started, version ") {
            Ok(()) => Some(server),
            Err(said) => {
                assert!(said.contains("Address already in use"), "dnsmasq: {said}");
                None
            }
        }
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What dig made of its queries: how many were answered, and how many
/// tries timed out on the way.
#[derive(Debug, PartialEq)]
struct Digging {
    answered: usize,
    timed_out: usize,
}

/// Asks the server on `port` for `name`, trying up to `tries` times a
/// second apart.
fn dig(port: u16, name: &str, tries: u32) -> Digging {
    let run = Command::new("dig")
        .arg("@127.0.0.1")
        .args(["-p", &port.to_string(), name])
        .arg(format!("+tries={tries}"))
        .arg("+timeout=1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stdout);
    Digging {
        answered: said.matches("192.0.2.7").count().min(1),
        timed_out: said.matches("timed out").count(),
    }
}

/// Five names asked through a link that drops 30% each way, seeded.
fn five_names_through_a_lossy_link(server: &Dnsmasq, seed: &str) -> Digging {
    let link = super::link_to(
        &format!("udp:127.0.0.1:{}", server.port),
        &["--drop", "30%", "--seed", seed],
    );
    let port: u16 = link.address.rsplit(':').next().unwrap().parse().unwrap();
    let mut total = Digging {
        answered: 0,
        timed_out: 0,
    };
    for name in ["a", "b", "c", "d", "e"] {
        let digging = dig(port, &format!("{name}.example.test"), 10);
        total.answered += digging.answered;
        total.timed_out += digging.timed_out;
    }
    total
}

#[test]
fn dig_gets_its_answers_through_loss_with_the_same_retries_every_run() {
    if !installed("dig") || !installed("dnsmasq") {
        return;
    }
    let server = Dnsmasq::start();
    let first = five_names_through_a_lossy_link(&server, "1");
    eprintln!("seed 1: {first:?}");
    assert_eq!(first.answered, 5, "{first:?}");
    // About one try in two is lost one way or the other.
    assert!(first.timed_out > 0, "{first:?}");
    let again = five_names_through_a_lossy_link(&server, "1");
    assert_eq!(again, first);
}
