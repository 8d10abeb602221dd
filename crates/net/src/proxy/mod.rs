//! Proxy mode (`--listen` with `--connect`): every connection accepted on
//! the listen address is forwarded to the connect address, both directions
//! shaped, on one thread driven by mio per core (`--loops`), each loop
//! accepting from the one listening socket.
//!
//! Each direction reads a chunk, reserves its tokens without blocking, and
//! once they are covered puts the chunk in its delay line (see
//! [`shape_impair::slowlink`]), which passes it on when due: at once without
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
//! whoever holds the [`LiveSettings`], which wakes poll, and every waiting
//! connection is stepped again: its deadline may have moved.
//!
//! An upstream name with several addresses (`localhost`: often ::1,
//! then 127.0.0.1) is tried address by address, as long as no byte has
//! passed to or from the server. A failure that concerns one connection
//! (every address refuses, a side resets, poll will not take it) resets
//! that connection only and is said in one line naming its peer. When the system will not accept more
//! connections (out of descriptors), new ones wait in the backlog and
//! accepting is tried again after a pause, said once: the loop never spins.

mod connection;
mod direction_faults;
pub mod handoff;
#[cfg_attr(not(feature = "http"), path = "left_out_http_gate.rs")]
pub mod http_gate;
mod relay;
mod resolver;
pub mod rules;
mod server;
mod stream;

use crate::resources::raise_file_limit;
use crate::{Address, Listening};
use http_gate::HttpRules;
pub use relay::{RelayFailed, RelayLoop};
use rules::{ConnectionShaping, Pay, RuleDraws, Rules, Terms, WayPlan};
use server::EventLoop;
pub use server::{Command, ProxyLoops, Upstream};
use shape_impair::conditions::Conditions;
use shape_impair::faults::Way;
use shape_impair::slowlink::SlowLink;
use shape_leaves::bucket::Bucket;
use shape_leaves::lock::lock;
use shape_leaves::say::Printer;
use shape_leaves::throughput::Throughput;
use std::io;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};

/// What the proxy needs of whoever holds its settings and changes them
/// while it runs: the buckets of the two directions that all connections
/// share, buckets of a connection's own, and a word after each change.
pub trait LiveSettings: Send + Sync {
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
    pub settings: Arc<dyn LiveSettings>,
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
    /// How many event loops serve the clients, each on a thread of its
    /// own, all accepting from one listening socket (at least one).
    pub loops: usize,
    /// The HTTP rule every connection is put to, if any.
    pub http: Option<HttpRules>,
}

/// The flags are the rules of proxy mode's one route: every connection
/// pays from the two shared buckets (or from buckets of its own that
/// follow them) and is held to the one set of conditions.
impl Rules for &Shaping {
    fn plan(&self, _: &mut RuleDraws) -> io::Result<ConnectionShaping> {
        let way = |way| -> io::Result<WayPlan> {
            let bucket = match self.per_connection {
                true => self.settings.own(way)?,
                false => self.settings.shared(way),
            };
            Ok(WayPlan {
                pay: Pay::Bucket(bucket),
                terms: Terms::Shared(self.conditions.clone()),
            })
        };
        Ok(ConnectionShaping {
            ways: [way(Way::Up)?, way(Way::Down)?],
            close_after: None,
        })
    }

    fn link(&self) -> SlowLink {
        self.link
    }

    fn affect(&self) -> f64 {
        self.affect
    }

    fn passed(&self) -> [Arc<Throughput>; 2] {
        [self.passed_up.clone(), self.passed_down.clone()]
    }

    fn http(&self) -> Option<HttpRules> {
        self.http.clone()
    }
}

/// Serves connections on `listen`, forwarding each to `connect`, until the
/// process is ended. Fails only if the proxy cannot start; after that, a
/// failure ends one connection, never the proxy.
///
/// With several loops, each accepts from the one listening socket (a
/// descriptor of it each) and serves the clients it took on a thread of
/// its own. They share the buckets, the conditions and the counts; a
/// connection's own bucket is still its own. A loop that fails stops the
/// others, and the failure is returned.
pub fn forward(listen: &Address, connect: &Address, shaping: &Shaping) -> io::Result<()> {
    // Looked up once, at start, so that a name that does not resolve is
    // said before anything is accepted.
    let upstream = match connect {
        Address::Tcp { .. } => Upstream::Fixed(connect.resolve_all()?.into()),
        Address::Unix(_) => Upstream::Fixed(Arc::new([])),
        Address::Udp { .. } => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a udp: upstream needs a udp: listener",
            ));
        }
    };
    let listeners = listen.listen_shared(shaping.loops.max(1))?;
    let at = listeners[0].local();
    let stops = Mutex::default();
    let proxy_loops = Arc::new(ProxyLoops::new(shaping.seed, listeners.len()));
    std::thread::scope(|scope| {
        let (made, ready) = std::sync::mpsc::channel();
        let mut threads = Vec::new();
        let mut failure = None;
        for (index, listening) in listeners.into_iter().enumerate() {
            let (start, started) = std::sync::mpsc::channel();
            let made = made.clone();
            let (upstream, proxy_loops, stops) = (upstream.clone(), proxy_loops.clone(), &stops);
            let spawned = std::thread::Builder::new()
                .name(format!("shape-loop-{index}"))
                .spawn_scoped(scope, move || {
                    let route = LoopRoute {
                        listening,
                        connect,
                        upstream,
                    };
                    serve_on_a_loop(shaping, route, proxy_loops, stops, made, started)
                });
            match spawned {
                Ok(thread) => threads.push((thread, start)),
                Err(err) => {
                    failure.get_or_insert(err);
                    break;
                }
            }
        }
        // Each thread says once whether its loop was made; all start once
        // every one was, or none does.
        for _ in &threads {
            if let Ok(Err(err)) = ready.recv() {
                failure.get_or_insert(err);
            }
        }
        if failure.is_none() {
            say(shaping, &format!("shape: listening on {at}"));
            say_seed(shaping);
        }
        let mut outcome = failure.map_or(Ok(()), Err);
        for (_, start) in &threads {
            let _ = start.send(outcome.is_ok());
        }
        for (thread, _) in threads {
            let ran = thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("an event loop panicked")));
            if outcome.is_ok() {
                outcome = ran;
            }
        }
        outcome
    })
}

/// What one of proxy mode's loops serves: its listener, and where clients
/// are forwarded.
struct LoopRoute<'a> {
    listening: Listening,
    connect: &'a Address,
    upstream: Upstream,
}

/// The loops' ways to stop each other: a command sender and a waker each.
type Stops = Mutex<Vec<(Sender<Command>, Arc<mio::Waker>)>>;

/// One of proxy mode's loops, on its own thread: made, said to be made
/// (or why not) through `made`, then run once `started` says all were
/// made, until it fails or another loop's failure stops it. A loop that
/// fails stops the others.
fn serve_on_a_loop(
    shaping: &Shaping,
    route: LoopRoute,
    proxy_loops: Arc<ProxyLoops>,
    stops: &Stops,
    made: Sender<io::Result<()>>,
    started: Receiver<bool>,
) -> io::Result<()> {
    let built = (|| {
        let mut event_loop = shaped_loop(shaping)?;
        event_loop.join(proxy_loops);
        let rules = Box::new(shaping);
        event_loop.open(
            route.listening,
            route.connect.clone(),
            route.upstream,
            rules,
        )?;
        let (stop, stopped) = std::sync::mpsc::channel();
        event_loop.take_commands(stopped);
        lock(stops).push((stop, event_loop.waker()));
        Ok(event_loop)
    })();
    let mut event_loop = match built {
        Ok(event_loop) => event_loop,
        Err(err) => {
            let _ = made.send(Err(err));
            return Ok(());
        }
    };
    let _ = made.send(Ok(()));
    if !started.recv().unwrap_or(false) {
        return Ok(());
    }
    let ran = event_loop.run();
    // Only a failure ends a loop: the others follow it.
    for (stop, waker) in lock(stops).iter() {
        if stop.send(Command::Stop).is_ok() {
            let _ = waker.wake();
        }
    }
    ran
}

/// A loop with no routes yet, woken by every change of `shaping`'s
/// settings. A change of settings may move every deadline: poll is woken,
/// and every waiting connection is stepped again. Whoever changes the
/// settings here says so once all buckets (each connection's own too)
/// have changed; a change from elsewhere (another process on a share, a
/// fleet's leases) is seen by a thread asleep on the shared buckets'
/// generation. Nothing polls.
fn shaped_loop<'a>(shaping: &Shaping) -> io::Result<EventLoop<'a>> {
    raise_file_limit();
    let mut event_loop = EventLoop::new(shaping.report.clone(), shaping.seed)?;
    shaping
        .settings
        .on_change(Box::new(event_loop.wake_on_change()));
    for way in Way::BOTH {
        event_loop.watch(shaping.settings.shared(way))?;
    }
    Ok(event_loop)
}

/// Says the seed where faults or jitter draw from it.
fn say_seed(shaping: &Shaping) {
    if shaping.say_seed {
        say(shaping, &format!("shape: seed {}", shaping.seed));
    }
}

/// Says `line` on standard error, unless quiet.
fn say(shaping: &Shaping, line: &str) {
    if let Some(report) = &shaping.report {
        report.line(line);
    }
}

/// How a loop run by commands is reached from other threads.
pub struct Reach {
    /// What every command must be sent with.
    pub waker: Arc<mio::Waker>,
    /// What steps every waiting connection again, for a bucket whose
    /// settings were changed from outside the loop (a trace followed).
    pub changed: Arc<dyn Fn() + Send + Sync>,
}

/// An event loop with no routes yet, one of `proxy_loops`, run on the
/// calling thread until a [`Command::Stop`] comes through `commands`;
/// `ready` gets its reach first.
pub fn run_by_commands(
    report: Option<Printer>,
    proxy_loops: Arc<ProxyLoops>,
    commands: Receiver<Command>,
    ready: Sender<Reach>,
) -> io::Result<()> {
    raise_file_limit();
    let mut event_loop = EventLoop::new(report, 0)?;
    event_loop.join(proxy_loops);
    event_loop.take_commands(commands);
    let _ = ready.send(Reach {
        waker: event_loop.waker(),
        changed: Arc::new(event_loop.wake_on_change()),
    });
    event_loop.run()
}
