//! UDP proxies of `--serve`'s API (`"protocol": "udp"`, shape's own):
//! made, impaired, retuned, disabled and refused as the API says.

use super::{client, echo};
use crate::harness::*;
use crate::serve::Toxiproxy;
use serde_json::json;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// A round trip of one datagram to `to`: how long it took, and how many
/// copies came back within a second of the first (or `None`).
fn round_trip(socket: &UdpSocket, to: &str) -> Option<(Duration, usize)> {
    let start = Instant::now();
    socket.send_to(b"ping", to).unwrap();
    let mut buffer = [0u8; 16];
    socket.recv(&mut buffer).ok()?;
    let took = start.elapsed();
    socket
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut copies = 1;
    while socket.recv(&mut buffer).is_ok() {
        copies += 1;
    }
    socket
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    Some((took, copies))
}

#[test]
fn a_udp_proxy_takes_the_toxics_that_make_sense_for_datagrams() {
    let server = Toxiproxy::from(shape(["--serve", "127.0.0.1:0"]));
    let upstream = echo();
    let upstream = upstream.strip_prefix("udp:").unwrap();
    let to = server.proxy("dns", upstream, json!({"protocol": "udp"}));
    let (_, shown) = server.call("GET", "/proxies/dns", None);
    assert_eq!(shown["protocol"], "udp", "{shown}");
    let socket = client();
    let (took, copies) = round_trip(&socket, &to).expect("an answer");
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert_eq!(copies, 1);

    // Latency each way, and every datagram sent twice on the way back.
    server.toxic(
        "dns",
        json!({"type": "latency", "attributes": {"latency": 100}}),
    );
    server.toxic(
        "dns",
        json!({"type": "latency", "stream": "upstream", "attributes": {"latency": 50}}),
    );
    server.toxic(
        "dns",
        json!({"type": "duplicate", "attributes": {"probability": 1}}),
    );
    let (took, copies) = round_trip(&socket, &to).expect("an answer");
    assert!(took >= Duration::from_millis(150), "{took:?}");
    assert_eq!(copies, 2);

    // Every datagram lost up, then the loss removed: answers again.
    server.toxic(
        "dns",
        json!({"type": "loss", "stream": "upstream", "attributes": {"probability": 1}}),
    );
    assert_eq!(round_trip(&socket, &to), None);
    let (status, _) = server.call("DELETE", "/proxies/dns/toxics/loss_upstream", None);
    assert_eq!(status, 204);
    assert!(round_trip(&socket, &to).is_some());

    // Disabled, nothing answers; enabled again, the same port does.
    let (status, _) = server.call("POST", "/proxies/dns", Some(json!({"enabled": false})));
    assert_eq!(status, 200);
    assert_eq!(round_trip(&socket, &to), None);
    let (status, _) = server.call("POST", "/proxies/dns", Some(json!({"enabled": true})));
    assert_eq!(status, 200);
    assert!(round_trip(&socket, &to).is_some());

    // Toxics of a stream, and half a latency, mean nothing to datagrams.
    for (toxic, says) in [
        (
            json!({"type": "slicer"}),
            "slicer toxics do not apply to udp proxies",
        ),
        (
            json!({"type": "timeout"}),
            "timeout toxics do not apply to udp proxies",
        ),
        (
            json!({"type": "latency", "name": "half", "toxicity": 0.5}),
            "toxicity must be 0 or 1",
        ),
    ] {
        let (status, said) = server.call("POST", "/proxies/dns/toxics", Some(toxic));
        assert_eq!(status, 400, "{said}");
        assert!(said["error"].as_str().unwrap().contains(says), "{said}");
    }
    // Nor do a datagram's toxics to a stream.
    server.proxy("web", "127.0.0.1:9", json!({}));
    let (status, said) = server.call(
        "POST",
        "/proxies/web/toxics",
        Some(json!({"type": "reorder"})),
    );
    assert_eq!(status, 400, "{said}");
    assert!(
        said["error"].as_str().unwrap().contains("tcp proxies"),
        "{said}"
    );
    let (status, said) = server.call("POST", "/proxies/dns", Some(json!({"protocol": "tcp"})));
    assert_eq!(status, 400, "{said}");
}
