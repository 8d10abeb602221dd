//! `shape --serve` beyond toxiproxy: a bandwidth shared by a proxy's
//! connections, loss and corruption drawn from `--seed`, deleting under
//! load, and hostile API clients that must neither kill the server nor
//! stall its connections. shape only.

use crate::harness::sleep_for;
use crate::serve::{Toxiproxy, echo_server, round_trip};
use crate::serve_toxics::{accepting, connected};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `connections` clients through `listen` to an echo server, each sending
/// `bytes` in pieces and reading them back, until told to stop (if
/// `forever`); each returns whether all came back intact.
fn flowing(listen: &str, connections: usize, bytes: usize, forever: bool) -> Vec<JoinHandle<bool>> {
    (0..connections)
        .map(|k| {
            let listen = listen.to_string();
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(&listen).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                let piece: Vec<u8> = (0..1024).map(|i| (i + k) as u8).collect();
                let mut back = vec![0; piece.len()];
                let mut left = bytes;
                while left > 0 || forever {
                    if stream.write_all(&piece).is_err() || stream.read_exact(&mut back).is_err() {
                        return forever;
                    }
                    if back != piece {
                        return false;
                    }
                    left = left.saturating_sub(piece.len());
                }
                true
            })
        })
        .collect()
}

#[test]
fn a_shared_bandwidth_holds_all_of_a_proxy_s_connections_to_one_rate() {
    let server = Toxiproxy::start(&[]);
    if !server.is_shape() {
        return;
    }
    let (upstream, connections) = accepting();
    let listen = server.proxy("shared", &upstream, json!({}));
    server.toxic(
        "shared",
        json!({"type": "bandwidth", "stream": "upstream", "attributes": {"rate": 400, "shared": 1}}),
    );
    // Four connections of 200 KB each: 800 KB at 400 KB/s is 2 s; each at
    // its own 400 KB/s it would be 0.5 s.
    let pairs: Vec<(TcpStream, TcpStream)> =
        (0..4).map(|_| connected(&listen, &connections)).collect();
    let start = Instant::now();
    let readers: Vec<JoinHandle<Duration>> = pairs
        .into_iter()
        .map(|(mut client, mut to)| {
            std::thread::spawn(move || {
                let writer = std::thread::spawn(move || client.write_all(&[1; 200_000]));
                let mut got = vec![0; 200_000];
                to.read_exact(&mut got).unwrap();
                writer.join().unwrap().unwrap();
                assert!(got.iter().all(|&b| b == 1));
                start.elapsed()
            })
        })
        .collect();
    let times: Vec<Duration> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let last = times.iter().max().unwrap();
    assert!(
        *last >= Duration::from_millis(1950) && *last <= Duration::from_millis(2600),
        "the last of 800 KB at 400 KB/s shared came at {last:?}"
    );
    let first = times.iter().min().unwrap();
    assert!(
        *first >= Duration::from_millis(1500),
        "each had its share, the first came at {first:?}"
    );
}

/// What `seed`'s server does to 64 KB through a corrupt toxic of
/// probability 0.01 and a loss toxic of 0.05: what arrives.
fn mangled(seed: &str) -> Vec<u8> {
    let server = Toxiproxy::start(&["--seed", seed]);
    let (upstream, connections) = accepting();
    let listen = server.proxy("mangled", &upstream, json!({}));
    server.toxic(
        "mangled",
        json!({"type": "corrupt", "stream": "upstream", "attributes": {"probability": 0.01}}),
    );
    server.toxic(
        "mangled",
        json!({"type": "loss", "stream": "upstream", "attributes": {"probability": 0.05}}),
    );
    let (mut client, mut to) = connected(&listen, &connections);
    client.write_all(&[0; 64 * 1024]).unwrap();
    drop(client);
    let mut arrived = Vec::new();
    to.read_to_end(&mut arrived).unwrap();
    arrived
}

#[test]
fn loss_and_corruption_strike_as_the_seed_says_and_again_with_it() {
    if !Toxiproxy::start(&[]).is_shape() {
        return;
    }
    let first = mangled("7");
    // Loss as TCP meets it: sent again, nothing missing.
    assert_eq!(first.len(), 64 * 1024, "loss deleted bytes");
    let flipped = first.iter().filter(|&&b| b != 0).count();
    assert!((100..2000).contains(&flipped), "{flipped} bytes flipped");
    assert_eq!(mangled("7"), first, "the same seed, the same damage");
    assert_ne!(mangled("8"), first, "another seed, other damage");
}

#[test]
fn deleting_a_toxic_under_load_is_answered_at_once() {
    let server = Toxiproxy::start(&[]);
    if !server.is_shape() {
        return;
    }
    let listen = server.proxy("busy", &echo_server(), json!({}));
    server.toxic(
        "busy",
        json!({"type": "latency", "attributes": {"latency": 50}}),
    );
    server.toxic(
        "busy",
        json!({"type": "bandwidth", "attributes": {"rate": 100}}),
    );
    let clients = flowing(&listen, 100, 64 * 1024, false);
    // Half a second under load before the toxics go: the load's length is
    // the subject.
    sleep_for(Duration::from_millis(500));
    for toxic in ["latency_downstream", "bandwidth_downstream"] {
        let start = Instant::now();
        let (status, _) = server.call("DELETE", &format!("/proxies/busy/toxics/{toxic}"), None);
        assert_eq!(status, 204);
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{toxic}: {:?}",
            start.elapsed()
        );
    }
    for client in clients {
        assert!(client.join().unwrap(), "every byte back");
    }
}

#[test]
fn memory_stays_bounded_when_clients_under_latency_read_nothing() {
    let server = Toxiproxy::start(&[]);
    if !server.is_shape() {
        return;
    }
    // Servers that send as fast as they can, to clients that read
    // nothing, through a latency of a second: each direction holds what
    // comes in during the latency, up to 4 MiB, then stops reading. What
    // it holds waits in its memory, or in pipes of its own where bytes are
    // spliced: the servers count what was taken from them.
    static FLOODED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let flood = crate::proxy::server(|mut stream| {
        let chunk = vec![0; 64 * 1024];
        while stream.write_all(&chunk).is_ok() {
            FLOODED.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let listen = server.proxy("flooded", &flood, json!({}));
    server.toxic(
        "flooded",
        json!({"type": "latency", "attributes": {"latency": 1000}}),
    );
    let before = server.rss_kib();
    let clients: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(&listen).unwrap())
        .collect();
    // Three seconds of flooding: how memory grows over them is the
    // subject.
    sleep_for(Duration::from_secs(3));
    let grown = server.rss_kib().saturating_sub(before);
    let taken = FLOODED.load(std::sync::atomic::Ordering::Relaxed) >> 20;
    // 20 connections at 4 MiB each is 80 MiB; toxiproxy grows by
    // hundreds of MiB a second here.
    assert!(grown < 100 * 1024, "grew by {grown} KiB");
    // Held, 4 MiB a connection, and what the sockets' buffers can hold on
    // either side of the proxy, as the kernel lets them grow: far less
    // than three seconds of a flood.
    let most = |file: &str| -> u64 {
        let limits = std::fs::read_to_string(file).unwrap();
        limits
            .split_whitespace()
            .last()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >> 20
    };
    let buffers = most("/proc/sys/net/ipv4/tcp_rmem") + most("/proc/sys/net/ipv4/tcp_wmem");
    let bound = 20 * (4 + 2 * (buffers + 1));
    assert!(taken > 20, "held something: {taken} MiB taken");
    assert!(
        taken < bound,
        "held without bound: {taken} MiB taken, over {bound}"
    );
    drop(clients);
}

#[test]
fn hostile_api_clients_neither_kill_the_server_nor_stall_its_connections() {
    let server = Toxiproxy::start(&[]);
    if !server.is_shape() {
        return;
    }
    let listen = server.proxy("steady", &echo_server(), json!({}));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A client that sends its request a byte every 50 ms, and one that
    // opens a connection and says nothing.
    let slow = {
        let (api, stop) = (server.api.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(&api).unwrap();
            let request = b"POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{";
            for byte in request.iter().cycle() {
                if stop.load(std::sync::atomic::Ordering::Relaxed)
                    || stream.write_all(&[*byte]).is_err()
                {
                    break;
                }
                // A byte every 50 ms: the slowness is the subject.
                sleep_for(Duration::from_millis(50));
            }
        })
    };
    let _silent = TcpStream::connect(&server.api).unwrap();
    let clients = flowing(&listen, 100, usize::MAX, true);
    for body in [
        "{not json".to_string(),
        "[1, 2".to_string(),
        "\"a string\"".to_string(),
        json!({"name": 5, "upstream": []}).to_string(),
        json!({"name": "x", "upstream": "127.0.0.1:1", "listen": "nowhere"}).to_string(),
        json!({"name": "x", "upstream": "127.0.0.1:1", "listen": "127.0.0.1:99999"}).to_string(),
        "x".repeat(2 << 20),
    ] {
        let (status, _) = server.call_raw("POST", "/proxies", Some(body));
        assert!(matches!(status, 400 | 500), "{status}");
    }
    let (status, _) = server.call_raw("POST", "/proxies/steady/toxics", Some("\u{0}\u{1}".into()));
    assert_eq!(status, 400);
    // Every toxic at the extremes of its whole numbers, on a proxy of its
    // own with a connection open.
    let extreme = server.proxy("extreme", &echo_server(), json!({}));
    let open = TcpStream::connect(&extreme).unwrap();
    for (kind, names) in [
        ("latency", &["latency", "jitter"][..]),
        ("bandwidth", &["rate", "burst", "shared"]),
        ("slow_close", &["delay"]),
        ("timeout", &["timeout"]),
        ("reset_peer", &["timeout"]),
        ("slicer", &["average_size", "size_variation", "delay"]),
        ("limit_data", &["bytes"]),
    ] {
        for number in [i64::MAX, i64::MIN, 0] {
            let attributes: serde_json::Map<String, serde_json::Value> = names
                .iter()
                .map(|name| (name.to_string(), json!(number)))
                .collect();
            let toxic = json!({"type": kind, "name": "extreme", "attributes": attributes});
            assert_eq!(
                server
                    .call("POST", "/proxies/extreme/toxics", Some(toxic))
                    .0,
                200
            );
            assert_eq!(
                server
                    .call("DELETE", "/proxies/extreme/toxics/extreme", None)
                    .0,
                204
            );
        }
    }
    drop(open);
    // 1,000 proxies made and deleted while the connections flow.
    let start = Instant::now();
    let mut slowest = Duration::ZERO;
    for k in 0..1000 {
        let name = format!("churn{k}");
        let call = Instant::now();
        let body = json!({"name": name, "upstream": "127.0.0.1:1", "listen": "127.0.0.1:0"});
        assert_eq!(server.call("POST", "/proxies", Some(body)).0, 201);
        assert_eq!(
            server.call("DELETE", &format!("/proxies/{name}"), None).0,
            204
        );
        slowest = slowest.max(call.elapsed());
    }
    eprintln!(
        "1,000 create/delete cycles in {:?}, slowest {slowest:?}",
        start.elapsed()
    );
    assert!(
        slowest < Duration::from_secs(5),
        "slowest cycle {slowest:?}"
    );
    let trip = Instant::now();
    assert_eq!(round_trip(&listen, b"still here"), b"still here");
    assert!(
        trip.elapsed() < Duration::from_secs(5),
        "a round trip took {:?}",
        trip.elapsed()
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    slow.join().unwrap();
    drop(server);
    for client in clients {
        assert!(
            client.join().unwrap(),
            "every byte that came back was intact"
        );
    }
}

#[test]
fn a_link_toxic_gives_its_stream_a_known_links_rate_and_half_its_round_trip() {
    let server = Toxiproxy::start(&[]);
    let listen = server.proxy("mobile", &echo_server(), json!({}));
    for stream in ["upstream", "downstream"] {
        let toxic = json!({"type": "link", "stream": stream, "attributes": {"profile": "slow-3g"}});
        let made = server.toxic("mobile", toxic);
        assert_eq!(made["attributes"]["profile"], "slow-3g", "{made}");
    }
    // slow-3g: a round trip of 400 ms, 500 kbit/s (62,500 B/s) each way.
    let start = Instant::now();
    assert_eq!(round_trip(&listen, b"ping"), b"ping");
    let took = start.elapsed();
    assert!(
        (Duration::from_millis(400)..Duration::from_millis(1_200)).contains(&took),
        "a round trip took {took:?}"
    );
    let payload = vec![5u8; 100_000];
    let start = Instant::now();
    assert!(round_trip(&listen, &payload) == payload);
    let took = start.elapsed();
    // 100,000 bytes at 62,500 B/s each way, one way after the other
    // overlapping: at least 1.6 s less the bursts, plus the round trip.
    assert!(took >= Duration::from_millis(1_500), "100 KB took {took:?}");

    // A name that is no known link is refused, with what it must be.
    let bad = json!({"name": "bad", "type": "link", "attributes": {"profile": "5g"}});
    let (status, said) = server.call("POST", "/proxies/mobile/toxics", Some(bad));
    assert_eq!(status, 400, "{said}");
    assert!(said.to_string().contains("known link"), "{said}");
}
