//! The datagram proxy (`--listen udp:ADDR --connect udp:ADDR`) between a
//! client and an echoing upstream, both on loopback.

mod dns;
mod hostile;
mod iperf;
mod quic;
#[cfg(feature = "serve")]
mod serve;

use crate::harness::*;
use std::net::UdpSocket;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// An upstream that echoes every datagram back to whoever sent it.
pub fn echo() -> String {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let address = format!("udp:{}", socket.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut buffer = [0u8; 65_536];
        while let Ok((n, from)) = socket.recv_from(&mut buffer) {
            let _ = socket.send_to(&buffer[..n], from);
        }
    });
    address
}

fn link(args: &[&str]) -> Listening {
    link_to(&echo(), args)
}

/// A link from any free loopback port to `upstream` (`udp:HOST:PORT`),
/// impaired as `args` say.
fn link_to(upstream: &str, args: &[&str]) -> Listening {
    let mut command = shape(["--listen", "udp:127.0.0.1:0", "--connect", upstream]);
    command.args(args);
    Listening::start(command, Stdio::null())
}

/// What `link` says befell its datagrams each way, asked with SIGUSR1:
/// `... up: 20 datagrams passed (40 bytes), 3 lost; down: ...`.
fn what_befell(link: &Listening) -> String {
    let pid = rustix::process::Pid::from_raw(link.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::USR1).unwrap();
    let said = link.wait_for_stderr("datagrams passed");
    said.lines()
        .rev()
        .find(|line| line.contains("up: "))
        .unwrap()
        .to_string()
}

pub fn client() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    socket
}

/// Sends `count` numbered datagrams through `link`, then collects the
/// numbers that come back until none comes for a while.
fn numbers_back(link: &Listening, count: u16) -> Vec<u16> {
    let socket = client();
    let to = link.address.strip_prefix("udp:").unwrap();
    // Read as they come, on a thread of its own: replies left waiting
    // until every number is sent would fill the socket's buffer (a
    // datagram of 2 bytes takes hundreds of it), and the kernel would
    // drop the last of them, not the link.
    let receiving = socket.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut back = Vec::new();
        let mut buffer = [0u8; 16];
        while let Ok(n) = receiving.recv(&mut buffer) {
            assert_eq!(n, 2);
            back.push(u16::from_be_bytes([buffer[0], buffer[1]]));
        }
        back
    });
    for i in 0..count {
        socket.send_to(&i.to_be_bytes(), to).unwrap();
        // Not so fast that loopback's own buffers drop any: the pace is
        // the subject.
        sleep_for(Duration::from_micros(200));
    }
    let mut back = reader.join().unwrap();
    back.sort_unstable();
    back
}

#[test]
fn each_client_gets_its_own_replies_after_the_delay_each_way() {
    let link = link(&["--delay", "50ms"]);
    let to = link.address.strip_prefix("udp:").unwrap().to_string();
    let clients: Vec<UdpSocket> = (0..3).map(|_| client()).collect();
    for (i, socket) in clients.iter().enumerate() {
        let start = Instant::now();
        socket.send_to(&[i as u8; 1000], &to).unwrap();
        let mut buffer = [0u8; 2000];
        let n = socket.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..n], &[i as u8; 1000][..], "client {i}");
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(100), "{took:?}");
    }
}

#[test]
fn each_way_of_a_udp_link_has_its_own_delay() {
    // 300 ms up and none down: a round trip of 300 ms, not 600 or none.
    let link = link(&["--delay-up", "300ms", "--delay-down", "0ms"]);
    let to = link.address.strip_prefix("udp:").unwrap().to_string();
    let socket = client();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut took: Vec<Duration> = (0..3u8)
        .map(|i| {
            let start = Instant::now();
            socket.send_to(&[i; 100], &to).unwrap();
            let mut buffer = [0u8; 200];
            let n = socket.recv(&mut buffer).unwrap();
            assert_eq!(&buffer[..n], &[i; 100][..]);
            start.elapsed()
        })
        .collect();
    took.sort();
    assert!(took[0] >= Duration::from_millis(300), "{took:?}");
    assert!(took[0] < Duration::from_millis(600), "{took:?}");
}

#[test]
fn a_seed_drops_the_same_datagrams_every_run() {
    let first = numbers_back(&link(&["--drop", "20%", "--seed", "11"]), 500);
    let again = numbers_back(&link(&["--drop", "20%", "--seed", "11"]), 500);
    assert_eq!(first, again);
    // Dropped each way: 64% come back, give or take.
    assert!((250..390).contains(&first.len()), "{} of 500", first.len());
    let other = numbers_back(&link(&["--drop", "20%", "--seed", "12"]), 500);
    assert_ne!(first, other);
}

#[test]
fn a_rate_paces_whole_datagrams() {
    // 20 datagrams of 1,000 bytes at 10,000 B/s: two seconds, each whole.
    let link = link(&["--rate", "10000", "--burst", "1000"]);
    let socket = client();
    let to = link.address.strip_prefix("udp:").unwrap();
    let start = Instant::now();
    for i in 0..20u8 {
        socket.send_to(&[i; 1000], to).unwrap();
    }
    let mut buffer = [0u8; 2000];
    for i in 0..20u8 {
        let n = socket.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..n], &[i; 1000][..], "datagram {i}");
    }
    let took = start.elapsed().as_secs_f64();
    assert!((1.8..12.0).contains(&took), "{took:.2}s");
}

#[test]
fn packets_pace_datagrams_whatever_their_size_and_the_queue_counts_them() {
    // 10 datagrams a second, a burst of one and a queue of five: of 20
    // sent at once, big and small alike, the one paid at once, the one
    // being paid for and the five queued pass; the rest are dropped.
    let link = link(&["--rate", "10/s", "--packets", "--max-buffer", "5"]);
    let socket = client();
    let to = link.address.strip_prefix("udp:").unwrap();
    let start = Instant::now();
    for i in 0..20u8 {
        let size = if i % 2 == 0 { 10 } else { 20_000 };
        socket.send_to(&vec![i; size], to).unwrap();
    }
    let mut buffer = vec![0u8; 65_536];
    let mut back = Vec::new();
    while let Ok(n) = socket.recv(&mut buffer) {
        back.push((buffer[0], n));
    }
    let last = start.elapsed().as_secs_f64() - 1.5;
    let sizes = |i: u8| if i % 2 == 0 { 10 } else { 20_000 };
    // Seven, or a little more if sending the twenty took the machine a
    // tenth of a second; the first ones in order, whatever their size.
    assert!((7..=9).contains(&back.len()), "{back:?}");
    let first = (0..back.len() as u8).map(|i| (i, sizes(i)));
    assert_eq!(back, first.collect::<Vec<_>>());
    // Seven at ten a second, the first at once: 0.6 s, loosely.
    assert!((0.5..8.0).contains(&last), "{last:.2}s");
    assert_refused(
        shape([
            "--listen",
            "udp:127.0.0.1:0",
            "--connect",
            "udp:127.0.0.1:9",
            "--packets",
            "--max-buffer",
            "64KiB",
        ]),
        "--max-buffer",
    );
}

/// How many of 20 datagrams of 1,000 bytes, sent at once by each of two
/// clients, come back through a link of 10,000 B/s with a queue of five,
/// and how many the link says passed up and were dropped by the queue.
fn back_from_two_clients(args: &[&str]) -> ([usize; 2], [u64; 2]) {
    let mut all = vec!["--rate", "10000", "--burst", "1000", "--max-buffer", "5000"];
    all.extend(args);
    let link = link(&all);
    let to = link.address.strip_prefix("udp:").unwrap();
    let clients = [client(), client()];
    for i in 0..20u8 {
        for socket in &clients {
            socket.send_to(&[i; 1000], to).unwrap();
        }
    }
    let back = clients.map(|socket| {
        let mut buffer = [0u8; 2000];
        std::iter::from_fn(|| socket.recv(&mut buffer).ok()).count()
    });
    let said = what_befell(&link);
    let up = said
        .split("up: ")
        .nth(1)
        .unwrap()
        .split("; down: ")
        .next()
        .unwrap();
    let count = |what: &str| -> u64 {
        up.split(", ")
            .find_map(|part| {
                part.split(" (")
                    .next()?
                    .strip_suffix(what)?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    (
        back,
        [
            count("datagrams passed"),
            count("dropped by the full queue"),
        ],
    )
}

#[test]
fn per_connection_gives_each_flow_its_own_rate_and_queue() {
    // Shared: the burst, the one being paid for and the five queued pass,
    // for both clients together; each its own: as many each.
    // (Seven, give or take what a slow send lets the bucket refill.)
    let (shared, _) = back_from_two_clients(&[]);
    assert!((6..=10).contains(&(shared[0] + shared[1])), "{shared:?}");
    let (own, [passed, dropped]) = back_from_two_clients(&["--per-connection"]);
    for back in own {
        assert!((6..=10).contains(&back), "{own:?}");
    }
    // What the flows' own links did is said, whole: each of the 40 sent
    // up either passed or was dropped by its flow's queue.
    assert_eq!(passed + dropped, 40, "{passed} passed, {dropped} dropped");
    assert!(passed >= own[0] as u64 + own[1] as u64, "{passed} passed");
}

#[test]
fn udp_addresses_go_together_and_stream_faults_are_refused() {
    assert_refused(
        shape(["--listen", "udp:127.0.0.1:0", "--connect", "127.0.0.1:9"]),
        "udp:",
    );
    assert_refused(
        shape([
            "--listen",
            "udp:127.0.0.1:0",
            "--connect",
            "udp:127.0.0.1:9",
            "--slice",
            "10",
        ]),
        "--slice",
    );
    // A TCP proxy and a copy have no datagrams to duplicate (--exec has).
    assert_refused(
        shape([
            "--listen",
            "127.0.0.1:0",
            "--connect",
            "127.0.0.1:9",
            "--duplicate",
            "1%",
        ]),
        "--duplicate",
    );
    assert_refused(shape(["--mtu", "1200"]), "--mtu");
}

#[test]
fn sigusr1_says_what_befell_the_datagrams_each_way() {
    let link = link(&["--drop", "up:50%", "--seed", "5", "--duplicate", "10%"]);
    let back = numbers_back(&link, 200);
    assert!(!back.is_empty());
    let line = what_befell(&link);
    assert!(line.contains(" lost"), "{line}");
    assert!(line.contains(" duplicated"), "{line}");
    assert!(line.contains("down: "), "{line}");
}

#[test]
fn remote_changes_reach_a_running_link_and_a_stream_s_faults_are_refused() {
    let runtime = Runtime::new("udp-remote");
    let upstream = echo();
    let command = runtime.shape([
        "--listen",
        "udp:127.0.0.1:0",
        "--connect",
        &upstream,
        "--delay",
        "10ms",
    ]);
    let link = Listening::start(command, Stdio::null());
    let pid = link.child.id();
    runtime.wait_registered(pid);
    let to = link.address.strip_prefix("udp:").unwrap().to_string();
    let socket = client();
    let round_trip = |socket: &UdpSocket| {
        let start = Instant::now();
        socket.send_to(b"ping", &to).unwrap();
        let mut buffer = [0u8; 16];
        socket.recv(&mut buffer).unwrap();
        start.elapsed()
    };
    assert!(round_trip(&socket) < Duration::from_millis(1000));
    let answer = runtime.remote(pid, ["--delay", "300ms"]);
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    // 300 ms each way now.
    let took = round_trip(&socket);
    assert!(took >= Duration::from_millis(600), "{took:?}");
    // A fault that ends or slices a stream means nothing here, and is
    // refused.
    for (flag, value) in [("--cut-after", "1KiB"), ("--slice", "7")] {
        let refused = runtime.remote(pid, [flag, value]);
        assert_ne!(refused.code(), 0, "{}", refused.stderr);
        assert!(refused.stderr.contains(flag), "{}", refused.stderr);
    }
    // A datagram's faults change live: every reply twice, then datagrams
    // over 100 bytes dropped on the way up.
    let answer = runtime.remote(pid, ["--delay", "10ms", "--duplicate", "down:100%"]);
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    socket.send_to(b"ping", &to).unwrap();
    let mut buffer = [0u8; 256];
    for copy in 0..2 {
        let n = socket
            .recv(&mut buffer)
            .unwrap_or_else(|e| panic!("copy {copy}: {e}"));
        assert_eq!(&buffer[..n], b"ping");
    }
    let answer = runtime.remote(pid, ["--duplicate", "off", "--mtu", "up:100"]);
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    socket.send_to(&[7; 200], &to).unwrap();
    socket.send_to(b"small", &to).unwrap();
    let n = socket.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..n], b"small", "the large one passed the MTU");
}

#[test]
fn a_stream_refuses_a_datagram_s_faults_at_start_and_live() {
    let runtime = Runtime::new("udp-stream");
    let command = runtime.shape(["--listen", "127.0.0.1:0", "--connect", "127.0.0.1:9"]);
    let proxy = Listening::start(command, Stdio::null());
    let pid = proxy.child.id();
    runtime.wait_registered(pid);
    let refused = runtime.remote(pid, ["--duplicate", "1%"]);
    assert_ne!(refused.code(), 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--duplicate applies to a UDP link"),
        "{}",
        refused.stderr
    );
    assert_refused(shape(["--reorder", "5%", "--delay", "1ms"]), "--reorder");
}

#[test]
fn a_server_that_refuses_is_said_once_not_for_every_datagram() {
    let (_refusing, port) = refusing_udp_port();
    let upstream = format!("udp:127.0.0.1:{port}");
    let mut command = shape(["--listen", "udp:127.0.0.1:0", "--connect", &upstream]);
    command.args(["--delay", "1ms"]);
    let link = Listening::start(command, Stdio::null());
    let socket = client();
    let to = link.address.strip_prefix("udp:").unwrap();
    for _ in 0..20 {
        socket.send_to(b"anyone?", to).unwrap();
        // Spread out, so that the refusals come one by one.
        sleep_for(Duration::from_millis(20));
    }
    link.wait_for_stderr("refused a datagram");
    // More refusals came after it: none is said again, each is counted.
    // The last datagram's refusal comes within the link's 1 ms delay; the
    // wait for any straggler is the subject.
    sleep_for(Duration::from_millis(200));
    let said = link.stderr();
    assert_eq!(said.matches("refused").count(), 1, "{said}");
    let line = what_befell(&link);
    let up = line.split("; down: ").next().unwrap();
    let refused: u64 = up
        .split(", ")
        .find_map(|part| part.strip_suffix(" refused by the server (port unreachable)"))
        .and_then(|n| n.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!((10..=20).contains(&refused), "{line}");
}
