//! iperf3's UDP test through a link: what iperf3 itself reports of loss
//! and jitter against what the link was set to do, and against what the
//! link says it did.

use crate::harness::*;
use serde_json::Value;
use std::process::{Command, Stdio};

/// What one iperf3 UDP run reported: the client's and the server's JSON,
/// and the link's own line (SIGUSR1) of what befell the datagrams.
struct Report {
    client: Value,
    server: Value,
    link: String,
}

impl Report {
    /// The receiver's figure `name` for the whole run (lost_packets,
    /// packets, lost_percent, jitter_ms), as the client reports it.
    fn sum(&self, name: &str) -> f64 {
        self.client["end"]["sum"][name].as_f64().unwrap()
    }

    /// The mean of the jitter the server reported interval by interval:
    /// each is a running average over about 16 datagrams, so one alone
    /// strays by a seventh or so.
    fn mean_jitter_ms(&self) -> f64 {
        let jitters: Vec<f64> = self.server["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|interval| interval["sum"]["packets"].as_f64() > Some(10.0))
            .map(|interval| interval["sum"]["jitter_ms"].as_f64().unwrap())
            .collect();
        jitters.iter().sum::<f64>() / jitters.len() as f64
    }

    /// How many datagrams up the link said befell in `what` ("lost",
    /// "dropped by the full queue").
    fn link_count(&self, what: &str) -> u64 {
        let up = self.link.split("; down: ").next().unwrap();
        up.split(", ")
            .find_map(|part| part.strip_suffix(what)?.trim().parse().ok())
            .unwrap_or(0)
    }
}

/// Runs iperf3's UDP test (`-u -l 1400`, and `client`) through a link
/// with `link`. The test's control connection is TCP: a second shape,
/// a plain proxy on the same port, carries it.
///
/// iperf3 cannot listen on port 0 (`-p 0` is refused), and its client
/// reaches the server's TCP port and UDP port at one number, so two
/// ports here are bound by number: the server's, drawn at random, and
/// the link's UDP side, on the port its TCP side was given. Whenever
/// either is in use, the run starts again on another.
fn iperf3_through(link: &[&str], client: &[&str]) -> Report {
    on_a_port_of_its_own("iperf3", 0, |server_port| {
        iperf3_on(server_port, link, client)
    })
}

/// [`iperf3_through`] with the server on `server_port`, or `None` if a
/// port it needs is in use.
fn iperf3_on(server_port: u16, link: &[&str], client: &[&str]) -> Option<Report> {
    let mut server = Command::new("iperf3")
        .args([
            "-s",
            "-1",
            "-J",
            "-i",
            "0.5",
            "-p",
            &server_port.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server_out = drain(server.stdout.take().unwrap());
    // With -J it says nothing until it ends: that it listens is seen on
    // its socket.
    let mut ended = false;
    wait_until("iperf3's server to listen or end", || {
        ended = server.try_wait().unwrap().is_some();
        ended || listening_ports(server.id()).contains(&server_port)
    });
    let in_use = |server_out: std::thread::JoinHandle<Vec<u8>>| {
        let said = String::from_utf8_lossy(&server_out.join().unwrap()).into_owned();
        assert!(said.contains("Address already in use"), "iperf3 -s: {said}");
    };
    if ended {
        in_use(server_out);
        return None;
    }
    let upstream = format!("127.0.0.1:{server_port}");
    let control = Listening::start(
        shape(["--listen", "127.0.0.1:0", "--connect", &upstream]),
        Stdio::null(),
    );
    let port = control.address.rsplit(':').next().unwrap().to_string();
    let mut command = shape([
        "--listen",
        &format!("udp:127.0.0.1:{port}"),
        "--connect",
        &format!("udp:{upstream}"),
    ]);
    command.args(link);
    let datagrams = match Listening::try_start(command, Stdio::null()) {
        Ok(datagrams) => datagrams,
        Err(said) => {
            let _ = server.kill();
            let _ = server.wait();
            assert!(said.contains("Address already in use"), "{said}");
            return None;
        }
    };
    let client_run = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port, "-u", "-l", "1400", "-J"])
        .args(client)
        .output()
        .unwrap();
    if !client_run.status.success() {
        // The server binds its UDP port only as the test begins.
        let _ = server.kill();
        let _ = server.wait();
        eprintln!("iperf3 -c: {}", String::from_utf8_lossy(&client_run.stdout));
        in_use(server_out);
        return None;
    }
    // With -1, the server ends after one test.
    let _ = server.wait();
    Some(Report {
        client: serde_json::from_slice(&client_run.stdout).unwrap(),
        server: serde_json::from_slice(&server_out.join().unwrap()).unwrap(),
        link: super::what_befell(&datagrams),
    })
}

#[test]
fn at_twice_the_rate_iperf3_sees_half_dropped_and_the_link_counts_each() {
    if !installed("iperf3") {
        return;
    }
    let report = iperf3_through(&["--rate", "5Mbit"], &["-b", "10M", "-t", "3"]);
    let lost = report.sum("lost_percent");
    eprintln!("iperf3: {lost:.2}% lost; the link: {}", report.link);
    // Half, less what the burst and the queue (a tenth of a second each
    // at the rate) let through: 47%.
    assert!((35.0..60.0).contains(&lost), "{lost}% lost");
    let (seen, counted) = (
        report.sum("lost_packets"),
        report.link_count("dropped by the full queue") as f64,
    );
    assert!(
        (seen - counted).abs() <= 0.02 * report.sum("packets"),
        "iperf3 saw {seen} lost, the link counted {counted}: {}",
        report.link
    );
}

#[test]
fn iperf3_sees_the_loss_that_was_set() {
    if !installed("iperf3") {
        return;
    }
    let report = iperf3_through(
        &["--drop", "up:5%", "--seed", "3"],
        &["-b", "2M", "-t", "3"],
    );
    let lost = report.sum("lost_percent");
    eprintln!("iperf3: {lost:.2}% lost; the link: {}", report.link);
    // 5% of about 540 datagrams: ±2 points is three standard deviations.
    assert!((3.0..7.0).contains(&lost), "{lost}% lost");
    let (seen, counted) = (report.sum("lost_packets"), report.link_count("lost") as f64);
    assert!(
        (seen - counted).abs() <= 1.0,
        "iperf3 saw {seen} lost, the link lost {counted}: {}",
        report.link
    );
}

#[test]
fn iperf3_sees_the_jitter_that_was_set() {
    if !installed("iperf3") {
        return;
    }
    // Delays spread evenly over ±3 ms, datagrams 11 ms apart (never
    // reordered): the mean difference of two in a row, which iperf3
    // reports (RFC 3550's jitter), is 2/3 of 3 ms.
    let report = iperf3_through(
        &["--delay", "20ms", "--jitter", "3ms", "--seed", "1"],
        &["-b", "1M", "-t", "5"],
    );
    let jitter = report.mean_jitter_ms();
    eprintln!("iperf3: jitter {jitter:.3} ms (2 ms set)");
    // Loose above: a busy machine's late wake-ups add jitter of their own.
    assert!((1.5..3.5).contains(&jitter), "{jitter:.3} ms");
    let unjittered = iperf3_through(&["--delay", "20ms"], &["-b", "1M", "-t", "2"]);
    let jitter = unjittered.mean_jitter_ms();
    eprintln!("iperf3: jitter {jitter:.3} ms without --jitter");
    assert!(jitter < 1.0, "{jitter:.3} ms without --jitter");
}
