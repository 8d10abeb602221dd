//! `shape --serve`: every toxic on real connections, with the figures that
//! toxiproxy's own tests assert, run against shape or, with
//! `SHAPE_TOXIPROXY`, the real toxiproxy. Timings here are real time on a
//! busy machine: a toxic never acts early, and may act late by a margin
//! no machine misses; the exact figures are held on the fake clock by the
//! unit tests of `serve::shaping`.

use crate::serve::{Toxiproxy, echo_server, round_trip};
use serde_json::json;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// How late a toxic may act on a busy machine.
const LATE: Duration = Duration::from_millis(400);

/// A server whose accepted connections come out of the receiver.
pub fn accepting() -> (String, Receiver<TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (accepted, connections) = channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if accepted.send(stream).is_err() {
                break;
            }
        }
    });
    (address, connections)
}

/// A connection through `listen` and the server's end of it.
pub fn connected(listen: &str, connections: &Receiver<TcpStream>) -> (TcpStream, TcpStream) {
    let client = TcpStream::connect(listen).unwrap();
    let server = connections.recv_timeout(Duration::from_secs(10)).unwrap();
    for stream in [&client, &server] {
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
    }
    (client, server)
}

/// Asserts that `elapsed` is at least `expected`, less `early` (what the
/// real toxiproxy may run early by), and at most [`LATE`] more.
fn assert_took(what: &str, elapsed: Duration, expected: Duration, early: Duration) {
    assert!(
        elapsed + early >= expected && elapsed <= expected + LATE,
        "{what}: took {elapsed:?}, expected {expected:?}"
    );
}

#[test]
fn latency_holds_each_stream_by_its_own_latency() {
    let server = Toxiproxy::start(&[]);
    let listen = server.proxy("slow", &echo_server(), json!({}));
    server.toxic(
        "slow",
        json!({"type": "latency", "stream": "upstream", "attributes": {"latency": 150}}),
    );
    server.toxic(
        "slow",
        json!({"type": "latency", "stream": "downstream", "attributes": {"latency": 100, "jitter": 20}}),
    );
    let start = Instant::now();
    assert_eq!(round_trip(&listen, b"ping"), b"ping");
    // toxiproxy's test: up + down, give or take the jitters and 20 ms.
    assert_took(
        "a round trip",
        start.elapsed(),
        Duration::from_millis(250),
        Duration::from_millis(20),
    );
}

#[test]
fn bandwidth_passes_480_kb_at_1000_kb_s_in_480_ms() {
    let server = Toxiproxy::start(&[]);
    let (upstream, connections) = accepting();
    let listen = server.proxy("narrow", &upstream, json!({}));
    let (mut client, mut to) = connected(&listen, &connections);
    server.toxic(
        "narrow",
        json!({"type": "bandwidth", "stream": "upstream", "attributes": {"rate": 1000}}),
    );
    let payload = "hello world ".repeat(40_000).into_bytes();
    let writing = {
        let payload = payload.clone();
        std::thread::spawn(move || client.write_all(&payload))
    };
    let start = Instant::now();
    let mut received = vec![0; payload.len()];
    to.read_exact(&mut received).unwrap();
    let elapsed = start.elapsed();
    writing.join().unwrap().unwrap();
    assert!(received == payload, "the bytes as sent");
    // toxiproxy's test: 480 ms, give or take 10 ms.
    assert_took(
        "480 KB at 1000 KB/s",
        elapsed,
        Duration::from_millis(480),
        Duration::from_millis(10),
    );
}

#[test]
fn slow_close_holds_the_end_after_the_data() {
    let server = Toxiproxy::start(&[]);
    let (upstream, connections) = accepting();
    let listen = server.proxy("lingering", &upstream, json!({}));
    server.toxic(
        "lingering",
        json!({"type": "slow_close", "attributes": {"delay": 300}}),
    );
    let (mut client, mut from) = connected(&listen, &connections);
    from.write_all(b"bye").unwrap();
    let closed = Instant::now();
    drop(from);
    let mut got = [0; 3];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"bye");
    assert!(
        closed.elapsed() < Duration::from_millis(300),
        "the data comes at once"
    );
    assert_eq!(client.read(&mut [0; 1]).unwrap(), 0);
    assert_took(
        "the end",
        closed.elapsed(),
        Duration::from_millis(300),
        Duration::ZERO,
    );
}

#[test]
fn timeout_0_holds_the_data_and_its_removal_closes_the_connection() {
    let server = Toxiproxy::start(&[]);
    let (upstream, connections) = accepting();
    let listen = server.proxy("hung", &upstream, json!({}));
    let (mut client, mut to) = connected(&listen, &connections);
    client.write_all(b"foobar").unwrap();
    let mut got = [0; 6];
    to.read_exact(&mut got).unwrap();
    server.toxic(
        "hung",
        json!({"type": "timeout", "name": "to_delete", "stream": "upstream", "attributes": {"timeout": 0}}),
    );
    client.write_all(b"held").unwrap();
    to.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let held = to.read(&mut got);
    assert!(
        matches!(&held, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "nothing passes: {held:?}"
    );
    let (status, _) = server.call("DELETE", "/proxies/hung/toxics/to_delete", None);
    assert_eq!(status, 204);
    // toxiproxy's test: both ends read an end within a second.
    for end in [&mut client, &mut to] {
        end.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        assert_eq!(end.read(&mut got).unwrap(), 0, "an end, not data");
    }
}

#[test]
fn timeout_above_0_closes_the_connection_after_it() {
    let server = Toxiproxy::start(&[]);
    let (upstream, connections) = accepting();
    let listen = server.proxy("timing", &upstream, json!({}));
    let (mut client, mut from) = connected(&listen, &connections);
    let added = Instant::now();
    server.toxic(
        "timing",
        json!({"type": "timeout", "attributes": {"timeout": 300}}),
    );
    from.write_all(b"never").unwrap();
    let mut got = [0; 8];
    assert_eq!(client.read(&mut got).unwrap(), 0, "an end, and no data");
    assert_took(
        "the close",
        added.elapsed(),
        Duration::from_millis(300),
        Duration::ZERO,
    );
}

#[test]
fn reset_peer_resets_at_once_or_after_its_timeout() {
    let server = Toxiproxy::start(&[]);
    let upstream = echo_server();
    for timeout in [0, 300] {
        let name = format!("reset{timeout}");
        let listen = server.proxy(&name, &upstream, json!({}));
        server.toxic(
            &name,
            json!({"type": "reset_peer", "attributes": {"timeout": timeout}}),
        );
        let start = Instant::now();
        let mut client = TcpStream::connect(&listen).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let _ = client.write_all(b"hello");
        let read = client.read(&mut [0; 100]);
        assert!(
            matches!(&read, Err(e) if e.kind() == ErrorKind::ConnectionReset),
            "timeout {timeout}: ECONNRESET, not {read:?}"
        );
        assert_took(
            &format!("a reset after {timeout} ms"),
            start.elapsed(),
            Duration::from_millis(timeout),
            Duration::ZERO,
        );
        assert_eq!(client.read(&mut [0; 1]).unwrap(), 0, "then the end");
    }
}

#[test]
fn slicer_cuts_the_stream_into_slices_of_about_the_size_asked() {
    let server = Toxiproxy::start(&[]);
    let (upstream, connections) = accepting();
    let listen = server.proxy("sliced", &upstream, json!({}));
    server.toxic(
        "sliced",
        json!({"type": "slicer", "attributes": {"average_size": 1024, "size_variation": 512, "delay": 3000}}),
    );
    let (mut client, mut from) = connected(&listen, &connections);
    let payload = "hello world ".repeat(4000).into_bytes();
    from.write_all(&payload).unwrap();
    drop(from);
    let mut reads = Vec::new();
    let mut received = Vec::new();
    let mut buffer = [0; 64 * 1024];
    loop {
        let n = client.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        reads.push(n);
        received.extend_from_slice(&buffer[..n]);
    }
    assert!(received == payload, "the bytes as sent");
    // toxiproxy's test: about one read per average size, from half as
    // many to one and a half times as many.
    let expected = payload.len() / 1024;
    assert!(
        (expected / 2..=expected * 3 / 2).contains(&reads.len()),
        "{} reads, expected about {expected}",
        reads.len()
    );
    reads.sort_unstable();
    let median = reads[reads.len() / 2];
    assert!((512..=1536).contains(&median), "median read {median}");
}

#[test]
fn limit_data_passes_that_many_bytes_then_closes() {
    let server = Toxiproxy::start(&[]);
    let listen = server.proxy("limited", &echo_server(), json!({}));
    server.toxic(
        "limited",
        json!({"type": "limit_data", "attributes": {"bytes": 100}}),
    );
    let mut client = TcpStream::connect(&listen).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _ = client.write_all(&[9; 300]);
    let mut received = Vec::new();
    let _ = client.read_to_end(&mut received);
    assert_eq!(received, vec![9; 100]);
}

#[test]
fn noop_and_a_toxicity_of_0_change_nothing() {
    let server = Toxiproxy::start(&[]);
    let listen = server.proxy("clean", &echo_server(), json!({}));
    server.toxic("clean", json!({"type": "noop"}));
    server.toxic(
        "clean",
        json!({"type": "latency", "toxicity": 0, "attributes": {"latency": 2000}}),
    );
    let start = Instant::now();
    assert_eq!(round_trip(&listen, b"clean"), b"clean");
    assert!(
        start.elapsed() < Duration::from_millis(1000),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn adding_changing_and_removing_a_toxic_reach_open_connections() {
    let server = Toxiproxy::start(&[]);
    let listen = server.proxy("live", &echo_server(), json!({}));
    let mut client = TcpStream::connect(&listen).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut trip = || {
        let start = Instant::now();
        client.write_all(b"x").unwrap();
        let mut back = [0; 1];
        client.read_exact(&mut back).unwrap();
        start.elapsed()
    };
    assert!(trip() < Duration::from_millis(200));
    server.toxic(
        "live",
        json!({"type": "latency", "attributes": {"latency": 200}}),
    );
    assert_took(
        "with latency",
        trip(),
        Duration::from_millis(200),
        Duration::from_millis(10),
    );
    let path = "/proxies/live/toxics/latency_downstream";
    let (status, _) = server.call("PATCH", path, Some(json!({"attributes": {"latency": 400}})));
    assert_eq!(status, 200);
    assert_took(
        "latency changed",
        trip(),
        Duration::from_millis(400),
        Duration::from_millis(10),
    );
    assert_eq!(server.call("DELETE", path, None).0, 204);
    assert!(trip() < Duration::from_millis(200), "the latency is gone");
}
