//! Slow-link emulation: --delay, --jitter and --max-buffer, through a pipe
//! and through the proxy. Times are loose real-time checks: never early,
//! and late only by what a busy machine could explain.

use crate::harness::*;
use crate::proxy::{MIB, Proxy, connect, echo, round_trip, server};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[test]
fn a_delayed_pipe_holds_each_byte_for_the_delay() {
    let mut child = shape(["--delay", "300ms", "--quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // Once the first bytes are through, shape is surely up and running.
    stdin.write_all(b"warm").unwrap();
    stdout.read_exact(&mut [0; 4]).unwrap();
    let sent = Instant::now();
    stdin.write_all(b"ping").unwrap();
    let mut got = [0; 4];
    stdout.read_exact(&mut got).unwrap();
    let held = sent.elapsed();
    drop(stdin);
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(&got, b"ping");
    assert!(rest.is_empty());
    assert!(
        (Duration::from_millis(300)..Duration::from_secs(3)).contains(&held),
        "held for {held:?}"
    );
}

#[test]
fn jitter_keeps_the_byte_order() {
    // 2 KiB chunks every millisecond, each delayed 5 to 55 ms at random:
    // most draws would overtake the chunk before.
    let data = random_bytes(MIB, 60);
    let run = run_with_input(
        shape(["--rate", "2MiB", "--delay", "30ms", "--jitter", "25ms"]),
        data.clone(),
        4096,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(run.stdout == data, "{} bytes came out", run.stdout.len());
}

#[test]
fn a_full_buffer_stops_shape_reading() {
    let mut child = shape(["--delay", "500ms", "--max-buffer", "256KiB", "--quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let taken = Arc::new(AtomicUsize::new(0));
    let data = random_bytes(2 * MIB, 61);
    let feeder = {
        let (taken, data) = (taken.clone(), data.clone());
        std::thread::spawn(move || {
            for piece in data.chunks(4096) {
                stdin.write_all(piece).unwrap();
                taken.fetch_add(piece.len(), Ordering::SeqCst);
            }
        })
    };
    // Nothing is due before 500 ms, so by 250 ms shape holds what it took:
    // the buffer and one chunk, and the pipe into it holds 64 KiB more.
    // When is the subject.
    sleep_for(Duration::from_millis(250));
    let accepted = taken.load(Ordering::SeqCst);
    let output = drain(child.stdout.take().unwrap());
    feeder.join().unwrap();
    assert!(child.wait().unwrap().success());
    assert!(output.join().unwrap() == data, "every byte, in order");
    assert!(
        accepted <= (256 + 128 + 64 + 4) * 1024,
        "{accepted} bytes were taken in while nothing could leave"
    );
    assert!(accepted >= 256 * 1024, "only {accepted} bytes taken in");
}

/// The round trips of three small exchanges through a proxy started with
/// `args` in front of an echo server, shortest first.
pub fn proxy_round_trips(args: &[&str]) -> Vec<Duration> {
    let upstream = server(echo);
    let proxy = Proxy::start(&upstream, args);
    let mut stream = connect(&proxy.address);
    let mut times: Vec<Duration> = (0..3u8)
        .map(|i| {
            let started = Instant::now();
            stream.write_all(&[i; 5]).unwrap();
            let mut back = [0; 5];
            stream.read_exact(&mut back).unwrap();
            assert_eq!(back, [i; 5]);
            started.elapsed()
        })
        .collect();
    times.sort();
    times
}

#[test]
fn a_round_trip_through_a_delayed_proxy_takes_twice_the_delay() {
    let round_trips = proxy_round_trips(&["--delay", "100ms"]);
    assert!(
        round_trips[0] >= Duration::from_millis(200),
        "a round trip took {:?}, less than both delays",
        round_trips[0]
    );
    assert!(
        round_trips[1] < Duration::from_millis(400),
        "round trips took {round_trips:?}"
    );
}

/// When the server last got a byte, for the one-way test below.
static SERVER_GOT: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);

/// Notes when each byte comes, and sends it back at once.
fn noting_echo(mut stream: TcpStream) {
    let mut byte = [0];
    while stream.read_exact(&mut byte).is_ok() {
        *SERVER_GOT.lock().unwrap() = Some(Instant::now());
        if stream.write_all(&byte).is_err() {
            break;
        }
    }
}

#[test]
fn each_direction_of_the_proxy_has_its_own_delay() {
    let upstream = server(noting_echo);
    let proxy = Proxy::start(&upstream, &["--delay-up", "200ms", "--delay-down", "50ms"]);
    let mut stream = connect(&proxy.address);
    let mut ways: Vec<(Duration, Duration)> = (0..3)
        .map(|i| {
            let sent = Instant::now();
            stream.write_all(&[i]).unwrap();
            let mut back = [0];
            stream.read_exact(&mut back).unwrap();
            let came = Instant::now();
            assert_eq!(back, [i]);
            let got = SERVER_GOT.lock().unwrap().take().unwrap();
            (got - sent, came - got)
        })
        .collect();
    ways.sort();
    for (up, down) in &ways {
        assert!(*up >= Duration::from_millis(200), "up took {up:?}");
        assert!(*down >= Duration::from_millis(50), "down took {down:?}");
    }
    // Never the other way's delay: the fastest of three, loosely.
    let (up, down) = ways[0];
    assert!(up < Duration::from_millis(400), "up took {up:?}");
    assert!(down < Duration::from_millis(200), "down took {down:?}");
}

#[test]
fn delays_of_each_direction_are_refused_where_there_are_no_two() {
    assert_refused(shape(["--delay-up", "1s"]), "--delay-up");
    #[cfg(feature = "serve")]
    assert_refused(
        shape(["--serve", "127.0.0.1:0", "--delay-up", "1s"]),
        "--delay-up",
    );
    #[cfg(feature = "serve")]
    assert_refused(
        shape(["--serve", "127.0.0.1:0", "--delay", "1s"]),
        "--delay",
    );
}

#[test]
fn jitter_through_the_proxy_keeps_the_byte_order() {
    let upstream = server(echo);
    let proxy = Proxy::start(
        &upstream,
        &["--rate", "4MiB", "--delay", "20ms", "--jitter", "15ms"],
    );
    let data = random_bytes(MIB, 62);
    assert!(round_trip(&proxy.address, data.clone()) == data);
}

/// Reads everything and drops it.
fn sink(mut stream: TcpStream) {
    let mut buffer = vec![0; 1 << 16];
    while matches!(stream.read(&mut buffer), Ok(n) if n > 0) {}
}

#[test]
fn max_buffer_bounds_what_the_proxy_holds() {
    let upstream = server(sink);
    let proxy = Proxy::start(&upstream, &["--delay", "200ms", "--max-buffer", "2MiB"]);
    let peak_kib = || memory_kib(proxy.child.id(), "VmHWM");
    let mut stream = connect(&proxy.address);
    // What the proxy takes before any data: its code, its libraries, once
    // the connection settled (a while: the subject is its peak after).
    sleep_for(Duration::from_millis(100));
    let before = peak_kib();
    // Unbounded, shape would take all 24 MiB in at once and hold it for the
    // delay; bounded, it holds 2 MiB and takes the rest as it leaves.
    let data = vec![9u8; 24 * MIB];
    stream.write_all(&data).unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    let mut end = Vec::new();
    stream.read_to_end(&mut end).unwrap();
    // The 2 MiB held, and the buffers it passes through.
    let grew = peak_kib() - before;
    assert!(
        grew < 8 * 1024,
        "the proxy's peak memory grew by {grew} KiB, from {before} KiB"
    );
}

#[test]
fn a_fast_delayed_stream_waits_in_pipes_not_in_the_proxys_memory() {
    // Unlimited and delayed, the proxy holds what a quarter of a second
    // brings each way: tens of MiB. Its bytes, which no fault touches,
    // wait in pipes of its own, spliced in and out; the proxy's own
    // memory barely grows, and every byte comes back in order.
    let upstream = server(echo);
    let proxy = Proxy::start(&upstream, &["--delay", "250ms"]);
    let peak_kib = || memory_kib(proxy.child.id(), "VmHWM");
    let stream = connect(&proxy.address);
    assert_eq!(round_trip(&proxy.address, b"settled".to_vec()), b"settled");
    let before = peak_kib();
    let data = random_bytes(48 * MIB, 17);
    let mut writer = stream.try_clone().unwrap();
    let sent = data.clone();
    let feeder = std::thread::spawn(move || {
        writer.write_all(&sent).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    (&stream).read_to_end(&mut back).unwrap();
    feeder.join().unwrap();
    assert!(
        back == data,
        "{} of {} bytes came back intact",
        back.len(),
        data.len()
    );
    let grew = peak_kib() - before;
    assert!(
        grew < 16 * 1024,
        "the proxy's peak memory grew by {grew} KiB, from {before} KiB"
    );
}
