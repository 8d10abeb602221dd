//! The event loop: one thread, one poll, every route and connection.
//!
//! A route is a listener, where it forwards to, and the [`Rules`] that
//! shape its connections. Proxy mode opens one before the loop runs;
//! `--serve` opens, closes and retunes routes while it runs, through
//! [`Command`]s sent with the loop's waker, each answered once done so
//! that the API can say so.

mod admission;
mod commands;
mod shortage;
mod woken;

use admission::{Awaiting, Parked};
pub use commands::Command;
use shortage::AdmissionOrder;
use woken::{Stepping, Woken};

use super::connection::{BUFFER, Connection, End, Failure, ResetByRule, Seeds};
use super::resolver::{Found, Resolver};
use super::rules::Rules;
use super::stream::Listener;
use crate::deadlines::Deadlines;
use crate::waiting::Waiting;
use crate::{Address, Listening};
use mio::{Interest, Poll, Token, Waker};
use shape_bucket::{Clock, Damaged, MonotonicClock};
use shape_impair::faults::ResetStruck;
use shape_leaves::bucket::Bucket;
use shape_leaves::lock::lock;
use shape_leaves::message::one_line;
use shape_leaves::say::Printer;
use slab::Slab;
use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// Left to the [`Waiting`], for an alarm where it needs one.
const ALARM: Token = Token(usize::MAX);
const CHANGED: Token = Token(usize::MAX - 1);
/// Route `r`'s listener is token `LISTENERS + r`; connection `c`'s sides
/// are tokens `2c` and `2c + 1`, below it.
const LISTENERS: usize = usize::MAX / 2;

/// Where a route's connections go, for a TCP route.
#[derive(Clone)]
pub enum Upstream {
    /// These addresses, found once (in turn until one answers); none for
    /// a Unix socket.
    Fixed(Arc<[SocketAddr]>),
    /// The route's name, looked up anew for every client, off the loop,
    /// as toxiproxy connects it: a server that moved is found.
    PerClient,
}

/// A listener, where it forwards to, and what shapes its connections.
struct Route<'a> {
    /// None for a route whose connections are handed to it, connected
    /// already ([`Command::Carry`]).
    listener: Option<Listener>,
    /// Where it listens, for messages.
    listen: String,
    connect: Address,
    upstream: Upstream,
    rules: Box<dyn Rules + 'a>,
    /// Told apart from a route that had its key before: a name looked up
    /// for a client of a closed route is not used for another's.
    serial: u64,
}

/// The proxy's whole state, driven by one thread.
pub(super) struct EventLoop<'a> {
    poll: Poll,
    waiting: Waiting,
    /// The tokens of the events of the last wait.
    tokens: Vec<Token>,
    routes: Slab<Route<'a>>,
    connections: Slab<Connection>,
    /// Buckets watched for damage: a damaged one ends the loop.
    watched: Vec<Arc<Bucket>>,
    /// Connections to step in this round, kept to reuse its memory.
    ready: Vec<usize>,
    /// The order of a turn's steps: where the last turn left off.
    woken: Woken,
    /// Connections whose rules changed, and those just handed over
    /// (`Command::Carry`), to step in this round whether they wait for
    /// anything or not.
    retuned: Vec<usize>,
    /// The moment each connection waits for, filed after each step.
    deadlines: Deadlines,
    waker: Arc<Waker>,
    /// Set when settings change: every waiting connection is stepped.
    changed: Arc<AtomicBool>,
    commands: Option<Receiver<Command>>,
    /// While accepting rests for want of resources: until when.
    accept_resumes: Option<u64>,
    /// A client accepted when no descriptor was left for its server: it
    /// waits for one, first in line, for a while.
    parked: Option<Parked>,
    /// Since when resources are short, once it has been said.
    shortage_since: Option<u64>,
    /// A descriptor kept in reserve, given up to accept and close one
    /// client when a shortage lasts while a route leads back to the loop:
    /// the clients in the backlog may be what the rest wait for.
    spare: Option<std::fs::File>,
    /// The own addresses of the loop's server sockets (TCP), to know a
    /// client that is one of them.
    own_ends: HashSet<SocketAddr>,
    /// How many open connections' clients are the loop's own server
    /// sockets: a proxy whose upstream leads back to it, which uses up
    /// descriptors until it is cut.
    loops: usize,
    /// Clients waiting for a name, by the ticket it is looked up with.
    awaiting: Slab<Awaiting>,
    /// Looks names up, once a route needs it.
    resolver: Option<Resolver>,
    /// Where the resolver's answers come, and how it hands them over.
    found: (Sender<Found>, Receiver<Found>),
    /// The serial number of the next route.
    serials: u64,
    /// What this loop shares with the other loops of its proxy.
    proxy_loops: Arc<ProxyLoops>,
    /// Routes whose listener may still have clients waiting, after this
    /// loop took its share at once: it looks again after one round.
    more_to_accept: Vec<usize>,
    /// This loop's place among the proxy's loops.
    place: usize,
    /// Set when another loop gives this loop its turn to admit a client.
    given: Arc<AtomicBool>,
    /// What every direction reads into: it keeps only what it read.
    scratch: Vec<u8>,
    /// Where to say what failed; `None` when quiet.
    report: Option<Printer>,
    clock: MonotonicClock,
}

impl Stepping for EventLoop<'_> {
    fn clock_now(&self) -> u64 {
        self.clock.now()
    }

    fn deadlines_mut(&mut self) -> &mut Deadlines {
        &mut self.deadlines
    }

    fn step_connection(&mut self, key: usize) {
        self.step(key);
    }
}

impl<'a> EventLoop<'a> {
    /// A loop without routes, its random choices drawn from `seed`.
    pub(super) fn new(report: Option<Printer>, seed: u64) -> io::Result<EventLoop<'a>> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), CHANGED)?);
        Ok(EventLoop {
            waiting: Waiting::new(&poll, ALARM),
            poll,
            tokens: Vec::new(),
            routes: Slab::new(),
            connections: Slab::new(),
            watched: Vec::new(),
            ready: Vec::new(),
            woken: Woken::default(),
            retuned: Vec::new(),
            deadlines: Deadlines::default(),
            waker,
            changed: Arc::new(AtomicBool::new(false)),
            commands: None,
            accept_resumes: None,
            parked: None,
            shortage_since: None,
            spare: std::fs::File::open("/dev/null").ok(),
            own_ends: HashSet::new(),
            loops: 0,
            awaiting: Slab::new(),
            resolver: None,
            found: channel(),
            serials: 0,
            proxy_loops: Arc::new(ProxyLoops::new(seed, 1)),
            more_to_accept: Vec::new(),
            place: 0,
            given: Arc::new(AtomicBool::new(false)),
            scratch: vec![0; BUFFER],
            report,
            clock: MonotonicClock,
        })
    }

    /// What wakes the loop to step every waiting connection again: a
    /// change of settings may move every deadline.
    pub(super) fn wake_on_change(&self) -> impl Fn() + Send + Sync + Clone + 'static {
        let (changed, waker) = (self.changed.clone(), self.waker.clone());
        move || {
            changed.store(true, Ordering::SeqCst);
            let _ = waker.wake();
        }
    }

    /// The waker that [`Command`]s are sent with.
    pub(super) fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// Takes commands from `commands` while running.
    pub(super) fn take_commands(&mut self, commands: Receiver<Command>) {
        self.commands = Some(commands);
    }

    /// Watches `bucket`: the loop wakes when its settings change (a thread
    /// asleep on its generation sees a change from another process too),
    /// and ends if it is found damaged.
    pub(super) fn watch(&mut self, bucket: Arc<Bucket>) -> io::Result<()> {
        if self.watched.iter().any(|b| Arc::ptr_eq(b, &bucket)) {
            return Ok(());
        }
        shape_leaves::bucket::watch_for_changes(bucket.clone(), self.wake_on_change())?;
        self.watched.push(bucket);
        Ok(())
    }

    /// Listens on `listening` and forwards to `connect` at `upstream`,
    /// shaped by `rules`; returns the route's key and where it listens.
    pub(super) fn open(
        &mut self,
        listening: Listening,
        connect: Address,
        upstream: Upstream,
        rules: Box<dyn Rules + 'a>,
    ) -> io::Result<(usize, String)> {
        let listen = listening.local();
        let mut listener = Listener::from_listening(listening)?;
        let entry = self.routes.vacant_entry();
        let key = entry.key();
        self.poll.registry().register(
            listener.source(),
            Token(LISTENERS + key),
            Interest::READABLE,
        )?;
        self.serials += 1;
        entry.insert(Route {
            listener: Some(listener),
            listen: listen.clone(),
            connect,
            upstream,
            rules,
            serial: self.serials,
        });
        Ok((key, listen))
    }

    /// A route that listens nowhere: its connections are handed to it
    /// with [`Command::Carry`], shaped by `rules`; `what` names it in
    /// messages. Returns its key.
    pub(super) fn open_unlistened(&mut self, what: &str, rules: Box<dyn Rules + 'a>) -> usize {
        self.serials += 1;
        self.routes.insert(Route {
            listener: None,
            listen: what.into(),
            connect: Address::Tcp {
                host: what.into(),
                port: 0,
            },
            upstream: Upstream::Fixed(Arc::new([])),
            rules,
            serial: self.serials,
        })
    }

    /// A new connection's draws: whether the faults are done to it (to a
    /// share `affect` of them), and each direction's seeds, all drawn in
    /// turn from the seed, so that the same connections see the same
    /// jitter and faults again.
    fn connection_draws(&mut self, affect: f64) -> (bool, [Seeds; 2]) {
        let mut draws = lock(&self.proxy_loops.draws);
        let affected = draws.choices.f64() < affect;
        let mut seeds = || Seeds {
            jitter: draws.seeds.u64(..),
            faults: draws.seeds.u64(..),
        };
        (affected, [seeds(), seeds()])
    }

    /// Makes this loop one of the loops that share `proxy_loops`.
    pub(in crate::proxy) fn join(&mut self, proxy_loops: Arc<ProxyLoops>) {
        self.place = lock(&proxy_loops.admission).join(self.waker.clone(), self.given.clone());
        self.proxy_loops = proxy_loops;
    }

    /// Says `line` on standard error, unless quiet.
    pub(super) fn say(&self, line: &str) {
        if let Some(report) = &self.report {
            report.line(line);
        }
    }

    /// Runs until stopped by a [`Command::Stop`], or a watched bucket is
    /// found damaged.
    pub(super) fn run(&mut self) -> io::Result<()> {
        loop {
            let now = self.clock.now();
            let until = self.wake_at(now);
            self.waiting
                .wait(&mut self.poll, until, now, &mut self.tokens)?;
            let mut ready = std::mem::take(&mut self.ready);
            let mut accept = std::mem::take(&mut self.more_to_accept);
            let mut woken = false;
            for &token in &self.tokens {
                match token {
                    CHANGED => woken = true,
                    Token(n) if n >= LISTENERS => accept.push(n - LISTENERS),
                    token => {
                        let key = token.0 / 2;
                        if let Some(connection) = self.connections.get_mut(key) {
                            match token.0 % 2 {
                                0 => connection.client.stirred(),
                                _ => connection.server.stirred(),
                            }
                        }
                        ready.push(key);
                    }
                }
            }
            if woken && !self.obey() {
                return Ok(());
            }
            if woken && self.take_found(&mut ready) {
                // Room for clients that waited in the backlog.
                accept = self.routes.iter().map(|(key, _)| key).collect();
            }
            ready.append(&mut self.retuned);
            let now = self.clock.now();
            let given = woken && self.given.swap(false, Ordering::SeqCst);
            if given || self.accept_resumes.is_some_and(|t| t <= now) {
                accept = self.routes.iter().map(|(key, _)| key).collect();
            }
            if !accept.is_empty() {
                accept.sort_unstable();
                accept.dedup();
                self.accept_all(&accept, &mut ready);
            }
            match self.changed.swap(false, Ordering::SeqCst) {
                true => self.deadlines.waiting(&mut ready),
                false => self.meet_due(now),
            }
            ready.sort_unstable();
            ready.dedup();
            self.step_woken(&mut ready);
            self.ready = ready;
            if self.watched.iter().any(|bucket| bucket.damaged()) {
                return Err(io::Error::other(Damaged));
            }
        }
    }

    /// Until when the loop may wait for events: not at all (`now`) while
    /// a listener may have clients left to accept, else until the
    /// earliest deadline of a connection (with every other due within a
    /// grain of it) or of the rest from accepting; `None` if nothing is
    /// due.
    fn wake_at(&self, now: u64) -> Option<u64> {
        if !self.more_to_accept.is_empty() {
            return Some(now);
        }
        self.deadlines
            .wake_at()
            .into_iter()
            .chain(self.accept_resumes)
            .min()
    }

    /// Steps every connection whose moment is due by `now`, the earliest
    /// first.
    fn meet_due(&mut self, now: u64) {
        let mut woken = std::mem::take(&mut self.woken);
        woken.meet_due(self, now);
        self.woken = woken;
    }

    /// Steps the connections that events woke, `ready` (sorted), meeting
    /// the moments that fall due meanwhile between them (see [`woken`]).
    fn step_woken(&mut self, ready: &mut Vec<usize>) {
        let mut woken = std::mem::take(&mut self.woken);
        woken.step(self, ready);
        self.woken = woken;
    }

    /// Steps connection `key`, and closes it if it is done or failed (a
    /// failure resets both sides and is said).
    fn step(&mut self, key: usize) {
        let Some(connection) = self.connections.get_mut(key) else {
            return;
        };
        let was_busy = connection.busy();
        let busy = self.proxy_loops.busy.load(Ordering::Relaxed);
        let stepped = connection.step(&mut self.scratch, self.clock.now(), busy);
        self.proxy_loops.busied(was_busy, connection.busy());
        if let Some(why) = connection.first_opaque() {
            let line = format!("shape: {}: {why}", connection.peer);
            self.say(&line);
        }
        let connection = &mut self.connections[key];
        if stepped.is_ok() && connection.handing_over() {
            return self.hand_over(key);
        }
        let finished = match stepped {
            Ok(()) => connection.done(),
            Err(failure) => self.fail(key, failure),
        };
        if finished {
            if let Some(tally) = self.connections[key].tally() {
                self.say(&format!("shape: {}: {tally}", self.connections[key].peer));
            }
            self.forget(key);
        } else if let Some(connection) = self.connections.get(key) {
            self.deadlines.file(key, connection.wake_at);
        }
    }

    /// Takes `failure` of connection `key`: a server that failed before a
    /// byte passed is tried at its next address, if it has one; else both
    /// sides are reset and the failure said. Returns whether the
    /// connection is done.
    fn fail(&mut self, key: usize, failure: Failure) -> bool {
        if failure.end == End::Server && self.try_next_address(key) {
            return false;
        }
        let now = self.clock.now();
        let connection = &mut self.connections[key];
        let route = self.routes.get(connection.route);
        let unreachable = failure.end == End::Server && !connection.server_touched();
        // A drop-in for toxiproxy closes at once, as toxiproxy does.
        let failure = match unreachable && route.is_some_and(|r| !r.rules.closes_when_unreachable())
        {
            true => match connection.hold_until_answered(failure, now) {
                Some(failure) => failure,
                None => return false,
            },
            false => failure,
        };
        let connection = &self.connections[key];
        match route.is_some_and(|route| unreachable && route.rules.closes_when_unreachable()) {
            true => connection.server.reset_on_close(),
            false => connection.reset_on_close(),
        }
        let end = match (failure.end, route) {
            (End::Client, _) => "client".to_string(),
            (End::Server, Some(route)) => format!("server {}", route.connect),
            (End::Server, None) => "server".to_string(),
        };
        let line = if ResetByRule::is(&failure.err) {
            format!("shape: {}: reset, as --http-reset asked", connection.peer)
        } else if ResetStruck::is(&failure.err) {
            format!("shape: {}: reset, as --reset-after asked", connection.peer)
        } else {
            format!(
                "shape: {}: {end}: {}",
                connection.peer,
                one_line(&failure.err)
            )
        };
        self.say(&line);
        true
    }

    /// Hands connection `key`'s client, which spoke HTTP/2, to its
    /// route's relay, and steps on with the relay in its place; or, if
    /// that cannot be, closes it and says so.
    fn hand_over(&mut self, key: usize) {
        let now = self.clock.now();
        let connection = &mut self.connections[key];
        let registry = self.poll.registry();
        let _ = registry.deregister(connection.client.source());
        let both = Interest::READABLE | Interest::WRITABLE;
        let handed = connection.hand_over(now).and_then(|handed| {
            registry.register(connection.client.source(), Token(key * 2), both)?;
            Ok(handed)
        });
        match handed {
            Ok((relay, handed)) => {
                relay.take(handed);
                self.step(key);
            }
            Err(err) => {
                let line = format!(
                    "shape: {}: HTTP/2: {}; closed",
                    connection.peer,
                    one_line(&err)
                );
                self.say(&line);
                self.forget(key);
            }
        }
    }

    /// Closes connection `key`'s sockets and forgets it.
    fn forget(&mut self, key: usize) {
        self.deadlines.file(key, None);
        let mut connection = self.connections.remove(key);
        self.proxy_loops.busied(connection.busy(), 0);
        if let Some(end) = connection.own_end {
            self.own_ends.remove(&end);
        }
        self.loops -= usize::from(connection.looped);
        let _ = self.poll.registry().deregister(connection.client.source());
        let _ = self.poll.registry().deregister(connection.server.source());
    }
}

/// What the loops of one proxy share.
pub struct ProxyLoops {
    /// How many directions of their connections have bytes on their way,
    /// which sizes the chunks: the programs downstream are woken for
    /// every chunk, whichever loop sent it.
    busy: AtomicUsize,
    /// The draws of chance of each connection, in turn, so that a seed
    /// replays them in the order the clients came, whichever loop took
    /// each.
    draws: Mutex<ConnectionDraws>,
    /// Whose turn it is to admit a client while descriptors are short.
    admission: Mutex<AdmissionOrder>,
    /// How many clients a loop accepts from a listener before it lets
    /// the others have a go. Alone, as many as wait. With other loops, one:
    /// every loop is woken by a client, and the first to run would
    /// otherwise take a whole burst of them; taking one at a time, a loop
    /// that is busy serving takes fewer.
    accept_at_once: usize,
}

impl ProxyLoops {
    /// What `loops` loops share, their draws of chance from `seed`.
    pub fn new(seed: u64, loops: usize) -> ProxyLoops {
        ProxyLoops {
            busy: AtomicUsize::new(0),
            accept_at_once: if loops > 1 { 1 } else { usize::MAX },
            draws: Mutex::new(ConnectionDraws {
                seeds: fastrand::Rng::with_seed(seed),
                choices: fastrand::Rng::with_seed(seed).fork(),
            }),
            admission: Mutex::default(),
        }
    }
}

impl ProxyLoops {
    /// Takes note that a connection went from `was` busy directions to
    /// `is`.
    fn busied(&self, was: usize, is: usize) {
        match is.cmp(&was) {
            std::cmp::Ordering::Greater => self.busy.fetch_add(is - was, Ordering::Relaxed),
            std::cmp::Ordering::Less => self.busy.fetch_sub(was - is, Ordering::Relaxed),
            std::cmp::Ordering::Equal => return,
        };
    }
}

/// Where the draws of chance of a proxy's connections come from.
struct ConnectionDraws {
    seeds: fastrand::Rng,
    choices: fastrand::Rng,
}
