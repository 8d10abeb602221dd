//! The relay: a runtime of its own, and each connection handed to it
//! carried as two HTTP/2 connections, the client's to shape and shape's
//! to the upstream (through the proxy's loop, which paces and delays it
//! as any connection), each stream of one put to the rules and, unless a
//! rule answers it, carried on the other.

use crate::io::Replayed;
use crate::streams::carry_stream;
use shape_http::rule::LiveRule;
use shape_leaves::say::Printer;
use shape_net::proxy::handoff::{Handed, Handoff};
use std::sync::{Arc, OnceLock};
use tokio::io::{AsyncRead, AsyncWrite};

/// How much either side may send on a stream, and on a connection,
/// before it waits for shape to take it in: enough that a relayed stream
/// keeps up with a fast link (h2's own default is 64 KiB).
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 4 << 20;

/// Carries HTTP/2 connections handed over by a proxy's loops, under the
/// proxy's rules.
pub struct Http2Relay {
    rule: Arc<LiveRule>,
    /// Where a connection that fails says so; `None` when quiet.
    report: Option<Printer>,
}

impl Http2Relay {
    /// A relay under `rule`, saying failures to `report`.
    pub fn new(rule: Arc<LiveRule>, report: Option<Printer>) -> Http2Relay {
        Http2Relay { rule, report }
    }

    /// The runtime every relay of the process shares, a thread per core,
    /// made when the first connection comes: a proxy that never meets
    /// HTTP/2 starts no threads for it.
    fn runtime(&self) -> Result<&'static tokio::runtime::Runtime, String> {
        static RUNTIME: OnceLock<std::io::Result<tokio::runtime::Runtime>> = OnceLock::new();
        let made = RUNTIME.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(std::thread::available_parallelism().map_or(1, |n| n.get()))
                .thread_name("shape-http2")
                .enable_all()
                .build()
        });
        made.as_ref().map_err(|err| err.to_string())
    }

    fn say(&self, peer: &str, why: &str) {
        if let Some(report) = &self.report {
            report.line(&format!("shape: {peer}: HTTP/2: {why}"));
        }
    }
}

impl Handoff for Http2Relay {
    fn take(&self, handed: Handed) {
        let runtime = match self.runtime() {
            Ok(runtime) => runtime,
            Err(why) => return self.say(&handed.peer, &format!("no relay ({why}): closed")),
        };
        let rule = self.rule.clone();
        let report = self.report.clone();
        runtime.spawn(async move {
            let peer = handed.peer.clone();
            if let Err(err) = carry(handed, rule).await {
                if let Some(report) = report {
                    report.line(&format!("shape: {peer}: HTTP/2: {err}"));
                }
            }
        });
    }
}

/// Carries one connection until either side ends it. A stream's own
/// failure ends that stream alone.
async fn carry(handed: Handed, rule: Arc<LiveRule>) -> Result<(), String> {
    let client = Replayed::new(handed.client, handed.from_client).map_err(|e| e.to_string())?;
    let server = tokio::net::UnixStream::from_std(handed.server).map_err(|e| e.to_string())?;
    relay(client, server, rule).await
}

/// Carries the HTTP/2 connection between `client` and `server` under
/// `rule`, until either side ends it.
pub(crate) async fn relay<C, S>(client: C, server: S, rule: Arc<LiveRule>) -> Result<(), String>
where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let said = |err: h2::Error| err.to_string();
    let (upstream, upstream_connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake(server)
        .await
        .map_err(said)?;
    let upstream_ended = tokio::spawn(upstream_connection);
    let mut connection = h2::server::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake(client)
        .await
        .map_err(said)?;
    while let Some(accepted) = connection.accept().await {
        let (request, respond) = accepted.map_err(said)?;
        let upstream = upstream.clone();
        let rule = rule.clone();
        tokio::spawn(async move {
            // A stream that fails is reset by h2; the others go on.
            let _ = carry_stream(request, respond, upstream, &rule).await;
        });
    }
    upstream_ended.abort();
    Ok(())
}
