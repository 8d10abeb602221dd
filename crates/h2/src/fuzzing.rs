//! The relay as a fuzz target: any bytes after HTTP/2's preface, sent by
//! a client to the relay, in front of h2's own server, which answers
//! every request; the first byte picks the fault done to every other
//! stream. No input may panic the relay or keep it from ending once the
//! client is gone; time stands still but for what waits (a delay, a
//! stall), so each input runs at once.

use crate::relay::relay;
use bytes::Bytes;
use shape_http::exchange::HTTP2_PREFACE;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Relays `data`, a client's frames after the preface.
pub fn relay_frames(data: &[u8]) {
    let Some((&choice, frames)) = data.split_first() else {
        return;
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
    else {
        return;
    };
    let rule = Arc::new(shape_http::fuzzing::rule_of_choice(choice));
    let frames = frames.to_vec();
    runtime.block_on(async move {
        let (mut client, to_relay) = tokio::io::duplex(1 << 16);
        let (from_relay, upstream) = tokio::io::duplex(1 << 16);
        tokio::spawn(answer_all(upstream));
        let relayed = tokio::spawn(relay(to_relay, from_relay, rule));
        let _ = client.write_all(HTTP2_PREFACE).await;
        let _ = client.write_all(&frames).await;
        let _ = client.shutdown().await;
        let mut back = Vec::new();
        let read = client.read_to_end(&mut back);
        let _ = tokio::time::timeout(Duration::from_secs(60), read).await;
        drop(client);
        let ended = tokio::time::timeout(Duration::from_secs(60), relayed).await;
        assert!(ended.is_ok(), "the relay went on after its client left");
    });
}

/// h2's own server, answering every request 200 with a short body.
async fn answer_all(io: tokio::io::DuplexStream) {
    let Ok(mut connection) = h2::server::handshake(io).await else {
        return;
    };
    while let Some(Ok((_, mut respond))) = connection.accept().await {
        if let Ok(mut body) = respond.send_response(http::Response::new(()), false) {
            let _ = body.send_data(Bytes::from_static(b"ok"), true);
        }
    }
}
