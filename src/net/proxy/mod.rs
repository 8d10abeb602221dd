//! Proxy mode (`--listen` with `--connect`): every connection accepted on
//! the listen address is forwarded to the connect address, both directions
//! shaped, all on one thread driven by mio.
//!
//! Each direction reads a chunk, reserves its tokens without blocking, and
//! once they are covered puts the chunk in its delay line (see
//! [`crate::slowlink`]), which passes it on when due: at once without
//! `--delay`. The line's capacity bounds what a direction holds; when it is
//! full the direction stops reading. The thread sleeps in poll until the
//! earliest deadline (tokens or a release time) or an event, so a
//! connection that waits costs no CPU and never holds up the others;
//! reservations queue in one bucket, so none starves. Half-closes pass
//! through (an end of input becomes a shutdown of the other side's writing
//! once all held bytes are out), and a reset or error on one side resets
//! the other.
//!
//! Live changes (`--remote`, `--rate-file`, `--schedule`) come through
//! whoever holds the [`Settings`], which wakes poll, and every waiting
//! connection is stepped again: its deadline may have moved.
//!
//! A failure that concerns one connection (its upstream refuses, a side
//! resets, poll will not take it) resets that connection only and is said
//! in one line naming its peer. When the system will not accept more
//! connections (out of descriptors), new ones wait in the backlog and
//! accepting is tried again after a pause, said once: the loop never spins.

mod alarm;
mod connection;
mod server;
mod stream;
mod trouble;

use crate::bucket::Bucket;
use crate::conditions::Conditions;
use crate::faults::Way;
use crate::net::Address;
use crate::progress::Printer;
use crate::slowlink::SlowLink;
use crate::throughput::Throughput;
use server::Server;
use std::io;
use std::sync::Arc;

/// What the proxy needs of whoever holds its settings and changes them
/// while it runs: the buckets of the two directions that all connections
/// share, buckets of a connection's own, and a word after each change.
pub trait Settings: Send + Sync {
    /// The bucket every connection shares for `way`.
    fn shared(&self, way: Way) -> Arc<Bucket>;
    /// A bucket of a connection's own for `way`, with the settings now in
    /// force, which later changes reach too.
    fn own(&self, way: Way) -> io::Result<Arc<Bucket>>;
    /// Calls `notify` after every change from now on.
    fn on_change(&self, notify: Box<dyn Fn() + Send>);
}

/// How the proxy shapes every connection.
pub struct Shaping {
    /// The buckets of the two directions (client to server, server to
    /// client), and who changes them while running.
    pub settings: Arc<dyn Settings>,
    /// Each connection gets buckets of its own instead of sharing two.
    pub per_connection: bool,
    /// The buffer size for each direction of each connection (the delay
    /// and jitter there are as they were at start).
    pub link: SlowLink,
    /// Delay, jitter and the faults of each direction, as now: changes
    /// reach every connection, the open ones too.
    pub conditions: Arc<Conditions>,
    /// The fraction of connections the faults are done to (`--affect`).
    pub affect: f64,
    /// Bytes passed on, both directions together.
    pub passed_up: Arc<Throughput>,
    pub passed_down: Arc<Throughput>,
    /// Where to say where the proxy listens and what failed; `None` with
    /// `--quiet`.
    pub report: Option<Printer>,
    /// The seed of every random choice (jitter, faults, which connections
    /// they affect).
    pub seed: u64,
    /// Whether to say the seed where the proxy listens, as faults or
    /// jitter draw from it.
    pub say_seed: bool,
}

/// Serves connections on `listen`, forwarding each to `connect`, until the
/// process is ended. Fails only if the proxy cannot start; after that, a
/// failure ends one connection, never the proxy.
pub fn serve(listen: &Address, connect: &Address, shaping: &Shaping) -> io::Result<()> {
    raise_file_limit();
    let listening = listen.listen()?;
    let listen = listening.local();
    let listener = stream::Listener::from_listening(listening)?;
    let mut server = Server::new(listener, listen, connect, shaping)?;
    server.say_where();
    server.run()
}

/// Raises the soft limit on open files to the hard one: each connection
/// takes two descriptors, and the usual soft limit of 1024 would cap the
/// proxy near 500 connections.
fn raise_file_limit() {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let raised = rustix::process::Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    let _ = rustix::process::setrlimit(rustix::process::Resource::Nofile, raised);
}
