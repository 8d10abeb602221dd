//! Recorded links (`--trace`, `--trace-up`, `--trace-down`) on traces the
//! tests make: a pipe and a proxy deliver, second by second, what the
//! trace allows; an outage passes nothing and loses nothing; bad traces
//! and misplaced flags are refused. Real time, loosely: the bench holds
//! the tight figures.

use crate::harness::*;
use crate::proxy::{Proxy, connect, echo, server};
use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A trace of `seconds`, each at its rate in bits a second (0 for an
/// outage), its opportunities spread evenly, written in `scratch`.
fn trace_of(scratch: &Scratch, name: &str, seconds: &[u64]) -> std::path::PathBuf {
    let mut text = String::new();
    for (second, &bits) in seconds.iter().enumerate() {
        let per_second = bits / 12_000;
        for n in 0..per_second {
            let at = second as u64 * 1_000 + 1 + n * 1_000 / per_second.max(1);
            text.push_str(&format!("{at}\n"));
        }
    }
    // The period: the whole length, even if it ends in an outage.
    text.push_str(&format!("{}\n", seconds.len() as u64 * 1_000));
    scratch.file(name, text.as_bytes())
}

/// The bytes `child`'s output delivered by each of `marks` after its first
/// byte, reading all of it.
fn delivered_by(mut output: impl Read, marks: &[Duration]) -> (Vec<u64>, u64) {
    let mut buffer = vec![0u8; 64 * 1024];
    let (mut total, mut first, mut counts) = (0u64, None::<Instant>, vec![0u64; marks.len()]);
    loop {
        let n = output.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        let now = Instant::now();
        let started = *first.get_or_insert(now);
        for (mark, count) in marks.iter().zip(counts.iter_mut()) {
            if now.duration_since(started) <= *mark {
                *count = total + n as u64;
            }
        }
        total += n as u64;
    }
    (counts, total)
}

#[test]
fn a_pipe_follows_a_step_trace_second_by_second() {
    let scratch = Scratch::new("trace-step");
    // 1, then 10, then 0.5 Mbit/s.
    let trace = trace_of(&scratch, "step", &[1_000_000, 10_000_000, 500_000]);
    let capacity = [125_000u64, 1_250_000, 62_500];
    let mut child = shape(["-q", "--trace"])
        .arg(&trace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // More than three seconds can carry: the queue stays full.
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&vec![1u8; 2_000_000]);
    });
    let marks = [1, 2, 3].map(Duration::from_secs);
    let output = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || delivered_by(output, &marks));
    // Three seconds of the trace are enough to judge; then it is stopped.
    // Time is the subject.
    sleep_for(Duration::from_millis(3_200));
    let _ = child.kill();
    let _ = child.wait();
    feeder.join().unwrap();
    let (by, _) = reader.join().unwrap();
    let seconds = [by[0], by[1] - by[0], by[2] - by[1]];
    for (second, (&got, &allowed)) in seconds.iter().zip(&capacity).enumerate() {
        // Never more than allowed (but the window's burst), and not far
        // below on a busy machine.
        let most = allowed + allowed / 10 + 15_000;
        let least = allowed * 8 / 10;
        assert!(
            (least..=most).contains(&got),
            "second {second}: {got} bytes, the trace allows {allowed}: {seconds:?}"
        );
    }
}

#[test]
fn an_outage_passes_nothing_then_the_flow_resumes_with_nothing_lost() {
    let scratch = Scratch::new("trace-outage");
    // 12 Mbit/s for a second, two seconds of nothing, then 12 Mbit/s.
    let trace = trace_of(&scratch, "outage", &[12_000_000, 0, 0, 12_000_000]);
    let upstream = server(echo);
    let proxy = Proxy::start(&upstream, &["--trace-down", trace.to_str().unwrap()]);
    let mut stream = connect(&proxy.address);
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut writer = stream.try_clone().unwrap();
    let sent = data.clone();
    let sender = std::thread::spawn(move || {
        writer.write_all(&sent).unwrap();
        writer.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    let (mut during_outage, started) = (0usize, Instant::now());
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        let at = started.elapsed();
        // Well inside the outage, allowing for the proxy's start.
        if (Duration::from_millis(1_300)..Duration::from_millis(2_800)).contains(&at) {
            during_outage += n;
        }
        back.extend_from_slice(&buffer[..n]);
    }
    sender.join().unwrap();
    assert_eq!(during_outage, 0, "bytes came during the outage");
    assert!(back == data, "bytes were lost or changed");
    // 1.5 MB a second when it flows: 3 MB take at least the outage and
    // a second and a half more... less the first second's worth.
    assert!(started.elapsed() >= Duration::from_millis(3_000));
}

#[test]
fn bad_traces_and_misplaced_trace_flags_are_refused() {
    let scratch = Scratch::new("trace-bad");
    let bad = scratch.file("bad", b"1\n2\nsoon\n");
    let refused = run(shape(["--trace", bad.to_str().unwrap()]), Stdio::null());
    assert_eq!(refused.code(), 2, "{}", refused.stderr);
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("--trace"), "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains(&format!("{}:3: 'soon'", bad.display())),
        "{}",
        refused.stderr
    );
    let good = scratch.file("good", b"1\n");
    let good = good.to_str().unwrap();
    assert_refused(shape(["--trace", good, "--rate", "1MiB"]), "--trace");
    assert_refused(shape(["--trace-up", good]), "--trace-up");
    assert_refused(
        shape([
            "--trace",
            good,
            "--listen",
            "127.0.0.1:0",
            "--connect",
            "127.0.0.1:9",
        ]),
        "--trace",
    );
}

#[cfg(feature = "serve")]
/// A trace whose second passes 150,000 bytes in its first 100 ms and
/// nothing in the rest: what passes it in under a second is at most that.
fn bursty_trace(scratch: &Scratch) -> std::path::PathBuf {
    let mut text: String = (1..=100).map(|t| format!("{t}\n")).collect();
    text.push_str("1000\n");
    scratch.file("bursty", text.as_bytes())
}

#[cfg(feature = "serve")]
#[test]
fn a_link_toxic_follows_its_trace_shared_by_the_proxy_s_connections() {
    let scratch = Scratch::new("trace-toxic");
    let trace = bursty_trace(&scratch);
    let server = crate::serve::Toxiproxy::start(&[]);
    let listen = server.proxy("phone", &crate::serve::echo_server(), serde_json::json!({}));
    // cable's rate (5 Mbit/s down) would pass 300 KB in half a second;
    // the trace holds the rate, cable gives the delay.
    let started = Instant::now();
    let toxic =
        serde_json::json!({"type": "link", "attributes": {"profile": "cable", "trace": trace}});
    let made = server.toxic("phone", toxic);
    assert_eq!(
        made["attributes"]["trace"],
        trace.to_str().unwrap(),
        "{made}"
    );
    // Two connections at once, 150 KB each: the trace's first second
    // passes 150 KB in all, so the last bytes wait for its second.
    let clients: Vec<_> = (0..2)
        .map(|n| {
            let listen = listen.clone();
            std::thread::spawn(move || {
                let payload = vec![n as u8; 150_000];
                assert!(crate::serve::round_trip(&listen, &payload) == payload);
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(950), "300 KB took {took:?}");
    assert!(took < Duration::from_secs(10), "300 KB took {took:?}");

    // A bad trace is refused naming the file and line, not what it holds;
    // so are a file that is not there and one that is not a file.
    let bad = scratch.file("bad", b"1\nsecret-word\n");
    for (path, says) in [
        (bad.to_str().unwrap(), format!("{}:2", bad.display())),
        ("/nonexistent/t", "/nonexistent/t: ".into()),
        (scratch.path().to_str().unwrap(), "not a file".into()),
    ] {
        let toxic =
            serde_json::json!({"name": "bad", "type": "link", "attributes": {"trace": path}});
        let (status, said) = server.call("POST", "/proxies/phone/toxics", Some(toxic));
        assert_eq!(status, 400, "{said}");
        let said = said["error"].as_str().unwrap().to_string();
        assert!(said.contains(&says) && said.contains("trace"), "{said}");
        assert!(!said.contains("secret"), "{said}");
    }
    // Given a trace no more, the stream is the known link's again.
    let (status, said) = server.call(
        "PATCH",
        "/proxies/phone/toxics/link_downstream",
        Some(serde_json::json!({"attributes": {"trace": ""}})),
    );
    assert_eq!(status, 200, "{said}");
    let started = Instant::now();
    let payload = vec![7u8; 150_000];
    assert!(crate::serve::round_trip(&listen, &payload) == payload);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[cfg(feature = "serve")]
#[test]
fn a_udp_proxy_s_link_toxic_holds_datagrams_until_its_trace_delivers() {
    let scratch = Scratch::new("trace-udp-toxic");
    // One opportunity a second, at its end.
    let trace = scratch.file("sparse", b"1000\n");
    let server = crate::serve::Toxiproxy::from(shape(["--serve", "127.0.0.1:0"]));
    let upstream = crate::udp::echo();
    let upstream = upstream.strip_prefix("udp:").unwrap();
    let to = server.proxy("dns", upstream, serde_json::json!({"protocol": "udp"}));
    let started = Instant::now();
    let toxic = serde_json::json!({"type": "link", "attributes": {"trace": trace}});
    server.toxic("dns", toxic);
    let socket = crate::udp::client();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    socket.send_to(b"ping", &to).unwrap();
    let mut buffer = [0u8; 16];
    let n = socket.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..n], b"ping");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(950),
        "the answer came in {took:?}"
    );
}
