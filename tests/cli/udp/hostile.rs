//! A UDP link under hostile input: a flood from ten thousand source
//! ports, larger than the queue, from clients that never answer, into a
//! process with few descriptors.

use super::{client, echo};
use crate::harness::*;
use std::net::UdpSocket;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The most memory a flooded link may hold: what it holds by design is a
/// few MiB (a tenth of a second's queue, the delay line's bound), against
/// the 100 MiB the flood sends.
const MOST_RESIDENT_KIB: u64 = 48 * 1024;

#[test]
fn a_flood_from_ten_thousand_ports_is_dropped_and_counted_in_bounded_memory() {
    // 256 descriptors: room for a couple of hundred flows, not 10,000.
    let Some(mut command) = shape_short_of_descriptors(256) else {
        return;
    };
    command
        .args(["--listen", "udp:127.0.0.1:0", "--connect", &echo()])
        .args(["--rate", "20Mbit", "--delay", "50ms", "--udp-idle", "2s"]);
    let mut link = Listening::start(command, Stdio::null());
    let pid = link.child.id();
    let to = link.address.strip_prefix("udp:").unwrap().to_string();

    // 100,000 datagrams of 1,000 bytes, ten from each of 10,000 ports,
    // as fast as loopback takes them; none is ever answered.
    let flood = {
        let to = to.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            for _ in 0..20 {
                let sockets: Vec<UdpSocket> = (0..500)
                    .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
                    .collect();
                for _ in 0..10 {
                    for socket in &sockets {
                        let _ = socket.send_to(&[7; 1000], &to);
                    }
                }
            }
            start.elapsed()
        })
    };
    let mut most = 0;
    while !flood.is_finished() {
        most = most.max(memory_kib(pid, "VmRSS"));
        // Sampled every 20 ms while the flood lasts: the sampling is the
        // subject.
        sleep_for(Duration::from_millis(20));
    }
    let took = flood.join().unwrap();
    eprintln!("100,000 datagrams from 10,000 ports in {took:?}; at most {most} KiB resident");
    assert!(most < MOST_RESIDENT_KIB, "{most} KiB resident");

    // Said once, however many datagrams it befell.
    link.wait_for_stderr("no socket for a new flow");
    let line = super::what_befell(&link);
    assert!(line.contains("dropped for want of a socket"), "{line}");
    let said = link.stderr();
    assert_eq!(
        said.matches("no socket for a new flow").count(),
        1,
        "{said}"
    );
    // Whether the queue also filled depends on how much of the flood the
    // kernel let through on a busy machine: not asked.

    // The flood's flows are forgotten after --udp-idle, and a new client
    // is served again.
    let socket = client();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buffer = [0u8; 64];
    loop {
        socket.send_to(b"still there?", &to).unwrap();
        if let Ok(n) = socket.recv(&mut buffer) {
            assert_eq!(&buffer[..n], b"still there?");
            break;
        }
        assert!(Instant::now() < deadline, "no answer: {}", link.stderr());
    }
    assert!(
        link.child.try_wait().unwrap().is_none(),
        "{}",
        link.stderr()
    );
}
