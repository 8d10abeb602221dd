//! The event loop: one thread, one poll, every route and connection.
//!
//! A route is a listener, where it forwards to, and the [`Rules`] that
//! shape its connections. Proxy mode opens one before the loop runs;
//! `--serve` opens, closes and retunes routes while it runs, through
//! [`Command`]s sent with the loop's waker, each answered once done so
//! that the API can say so.

use super::alarm::Alarm;
use super::connection::{BUFFER, Connection, End, Failure, Seeds, Start};
use super::resolver::{Found, Resolver};
use super::rules::{Luck, Rules};
use super::stream::{Listener, Stream};
use crate::bucket::Bucket;
use crate::faults::ResetStruck;
use crate::message::one_line;
use crate::net::{ACCEPT_PAUSE, out_of_resources};
use crate::net::{Address, Listening};
use crate::progress::Printer;
use mio::net::{TcpStream, UnixStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use shape_bucket::{Clock, Damaged, MonotonicClock};
use slab::Slab;
use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel};
use std::time::Duration;

const ALARM: Token = Token(usize::MAX);
const CHANGED: Token = Token(usize::MAX - 1);
/// Route `r`'s listener is token `LISTENERS + r`; connection `c`'s sides
/// are tokens `2c` and `2c + 1`, below it.
const LISTENERS: usize = usize::MAX / 2;

/// The most clients that wait at once for their upstream's name to be
/// looked up; the rest wait in the listen backlog.
const MOST_AWAITING: usize = 1024;

/// Where a route's connections go, for a TCP route.
pub enum Upstream {
    /// These addresses, found once (in turn until one answers); none for
    /// a Unix socket.
    Fixed(Arc<[SocketAddr]>),
    /// The route's name, looked up anew for every client, off the loop,
    /// as toxiproxy dials it: a server that moved is found.
    PerClient,
}

/// A change of routes, sent to a running loop; each says when it is done.
pub enum Command {
    /// Listen on `listening` (bound by the sender, who can then say why
    /// it could not be) and forward to `connect`, at `upstream`; answers
    /// the route's key.
    Open {
        listening: Listening,
        connect: Address,
        upstream: Upstream,
        rules: Box<dyn Rules + Send>,
        opened: SyncSender<io::Result<usize>>,
    },
    /// Stop listening and close every connection of the route.
    Close {
        route: usize,
        closed: SyncSender<()>,
    },
    /// Shape the route's connections, open ones too, by `rules` from now on.
    Retune {
        route: usize,
        rules: Box<dyn Rules + Send>,
        retuned: SyncSender<()>,
    },
    /// Say how many connections are open, over every route.
    Count { counted: SyncSender<usize> },
    /// Close everything and end the loop.
    Stop,
}

/// A listener, where it forwards to, and what shapes its connections.
struct Route<'a> {
    listener: Listener,
    /// Where it listens, for messages.
    listen: String,
    connect: Address,
    upstream: Upstream,
    rules: Box<dyn Rules + 'a>,
    /// Told apart from a route that had its key before: a name looked up
    /// for a client of a closed route is not used for another's.
    serial: u64,
}

/// How long a client waits for a descriptor for its server before it is
/// closed: long enough for a passing shortage, short enough that a chain
/// that holds every descriptor (a proxy whose upstream is itself) unwinds
/// as each end is closed, as toxiproxy's does.
const MOST_PARKED: Duration = Duration::from_secs(1);

/// A client waiting for a descriptor for its server: its route, who it
/// is, and since when it waits.
struct Parked {
    route: usize,
    client: Stream,
    peer: String,
    since: u64,
}

/// A client that waits for its upstream's name to be looked up.
struct Awaiting {
    route: usize,
    serial: u64,
    client: Stream,
    peer: String,
}

/// The proxy's whole state, driven by one thread.
pub(super) struct Server<'a> {
    poll: Poll,
    events: Events,
    routes: Slab<Route<'a>>,
    connections: Slab<Connection>,
    /// Buckets watched for damage: a damaged one ends the loop.
    watched: Vec<Arc<Bucket>>,
    /// Connections to step in this round, kept to reuse its memory.
    ready: Vec<usize>,
    /// Connections whose rules changed, to step in this round whether
    /// they wait for anything or not.
    retuned: Vec<usize>,
    alarm: Option<Alarm>,
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
    /// Where each direction's seeds come from.
    seeds: fastrand::Rng,
    /// Which connections the faults affect.
    choices: fastrand::Rng,
    /// What every direction reads into: it keeps only what it read.
    scratch: Vec<u8>,
    /// Where to say what failed; `None` when quiet.
    report: Option<Printer>,
    clock: MonotonicClock,
}

impl<'a> Server<'a> {
    /// A loop without routes, its random choices drawn from `seed`.
    pub(super) fn new(report: Option<Printer>, seed: u64) -> io::Result<Server<'a>> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), CHANGED)?);
        let alarm = Alarm::new().ok();
        if let Some(alarm) = &alarm {
            let fd = alarm.fd.as_raw_fd();
            poll.registry()
                .register(&mut SourceFd(&fd), ALARM, Interest::READABLE)?;
        }
        Ok(Server {
            poll,
            events: Events::with_capacity(1024),
            routes: Slab::new(),
            connections: Slab::new(),
            watched: Vec::new(),
            ready: Vec::new(),
            retuned: Vec::new(),
            alarm,
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
            seeds: fastrand::Rng::with_seed(seed),
            choices: fastrand::Rng::with_seed(seed).fork(),
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
        watch_for_changes(bucket.clone(), self.wake_on_change())?;
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
            listener,
            listen: listen.clone(),
            connect,
            upstream,
            rules,
            serial: self.serials,
        });
        Ok((key, listen))
    }

    /// Stops listening on route `key` and closes its connections.
    fn close(&mut self, key: usize) {
        let Some(mut route) = self.routes.try_remove(key) else {
            return;
        };
        let _ = self.poll.registry().deregister(route.listener.source());
        if self
            .parked
            .as_ref()
            .is_some_and(|parked| parked.route == key)
        {
            self.parked = None;
        }
        self.awaiting.retain(|_, waiting| waiting.route != key);
        let gone: Vec<usize> = self
            .connections
            .iter()
            .filter(|(_, c)| c.route == key)
            .map(|(k, _)| k)
            .collect();
        for connection in gone {
            self.forget(connection);
        }
    }

    /// Shapes route `key`'s connections by `rules` from now on.
    fn retune(&mut self, key: usize, rules: Box<dyn Rules + 'a>) {
        let Some(route) = self.routes.get_mut(key) else {
            return;
        };
        route.rules = rules;
        let unstalled_closes = route.rules.closes_when_unstalled();
        let now = self.clock.now();
        let mut failed = Vec::new();
        for (k, connection) in self.connections.iter_mut() {
            if connection.route != key {
                continue;
            }
            let plan = route.rules.plan(&mut connection.luck);
            match plan.and_then(|plan| connection.take(plan, now, unstalled_closes)) {
                Ok(()) => self.retuned.push(k),
                Err(err) => failed.push((k, err)),
            }
        }
        for (k, err) in failed {
            let peer = &self.connections[k].peer;
            self.say(&format!("shape: {peer}: {}", one_line(&err)));
            self.connections[k].reset_on_close();
            self.forget(k);
        }
    }

    /// Carries out the commands sent; returns false on [`Command::Stop`].
    fn obey(&mut self) -> bool {
        let Some(commands) = self.commands.take() else {
            return true;
        };
        let mut going = true;
        while let Ok(command) = commands.try_recv() {
            match command {
                Command::Open {
                    listening,
                    connect,
                    upstream,
                    rules,
                    opened,
                } => {
                    let opened_as = self.open(listening, connect, upstream, rules);
                    let _ = opened.send(opened_as.map(|(key, _)| key));
                }
                Command::Close { route, closed } => {
                    self.close(route);
                    let _ = closed.send(());
                }
                Command::Retune {
                    route,
                    rules,
                    retuned,
                } => {
                    self.retune(route, rules);
                    let _ = retuned.send(());
                }
                Command::Count { counted } => {
                    let _ = counted.send(self.connections.len());
                }
                Command::Stop => going = false,
            }
        }
        self.commands = Some(commands);
        going
    }

    /// The seeds of the next random choices: drawn in turn from the seed,
    /// so that the same connections see the same jitter and faults again.
    fn seeds(&mut self) -> Seeds {
        Seeds {
            jitter: self.seeds.u64(..),
            faults: self.seeds.u64(..),
        }
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
            let sleep = self.sleep();
            match self.poll.poll(&mut self.events, sleep) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let mut ready = std::mem::take(&mut self.ready);
            let mut accept = Vec::new();
            let mut woken = false;
            for event in &self.events {
                match event.token() {
                    ALARM => {
                        if let Some(alarm) = &mut self.alarm {
                            alarm.silence();
                        }
                    }
                    CHANGED => woken = true,
                    Token(n) if n >= LISTENERS => accept.push(n - LISTENERS),
                    token => ready.push(token.0 / 2),
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
            if self.accept_resumes.is_some_and(|t| t <= now) {
                accept = self.routes.iter().map(|(key, _)| key).collect();
            }
            if !accept.is_empty() {
                self.accept_all(&accept, &mut ready);
            }
            let due = match self.changed.swap(false, Ordering::SeqCst) {
                true => u64::MAX,
                false => now,
            };
            ready.extend(
                self.connections
                    .iter()
                    .filter(|(_, c)| c.wake_at.is_some_and(|t| t <= due))
                    .map(|(key, _)| key),
            );
            ready.sort_unstable();
            ready.dedup();
            for key in ready.drain(..) {
                self.step(key);
            }
            self.ready = ready;
            if self.watched.iter().any(|bucket| bucket.damaged()) {
                return Err(io::Error::other(Damaged));
            }
        }
    }

    /// How long poll may sleep: until the earliest deadline of a
    /// connection or of the rest from accepting, or until an event if
    /// nothing is due. A deadline finer than poll's milliseconds is left
    /// to the alarm, which is an event.
    fn sleep(&mut self) -> Option<Duration> {
        let now = self.clock.now();
        let earliest = self
            .connections
            .iter()
            .filter_map(|(_, c)| c.wake_at)
            .chain(self.accept_resumes)
            .min()?;
        match earliest {
            t if t <= now => Some(Duration::ZERO),
            t if self.alarm.as_mut().is_some_and(|alarm| alarm.ring_at(t)) => None,
            t => Some(Duration::from_nanos(t - now)),
        }
    }

    /// Admits the client that waits for resources, then every client
    /// waiting to be accepted on `routes`, unless accepting rests.
    fn accept_all(&mut self, routes: &[usize], ready: &mut Vec<usize>) {
        if self.accept_resumes.is_some_and(|t| t > self.clock.now()) {
            return;
        }
        self.accept_resumes = None;
        if let Some(parked) = self.parked.take() {
            let Parked {
                route,
                client,
                peer,
                since,
            } = parked;
            ready.extend(self.admit(route, client, peer, Some(since)));
        }
        for &route in routes {
            while self.accept_resumes.is_none() {
                let Some(Route {
                    listener,
                    listen,
                    upstream,
                    ..
                }) = self.routes.get_mut(route)
                else {
                    break;
                };
                if matches!(upstream, Upstream::PerClient) && self.awaiting.len() >= MOST_AWAITING {
                    break;
                }
                match listener.accept(listen) {
                    Ok((client, peer)) => ready.extend(self.admit(route, client, peer, None)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // The client gave up before it was accepted.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                    // Out of descriptors, memory or buffers, or worse:
                    // trying again at once would fail the same way and spin.
                    Err(err) => {
                        let what = format!("accept on {listen}");
                        self.wait_for_resources(&what, &err);
                        if out_of_resources(&err) {
                            self.shed(route);
                        }
                    }
                }
            }
        }
        if self.accept_resumes.is_none() && self.parked.is_none() {
            // Everything waiting got in: a later shortage is news again.
            self.shortage_since = None;
        }
    }

    /// Once a shortage of descriptors has lasted [`MOST_PARKED`] while a
    /// route leads back to the loop, closes the next client waiting on
    /// `route`, accepted with the spare descriptor: the chain of a proxy
    /// whose upstream is itself ends in the backlog, holds every
    /// descriptor, and nothing else would free one. Clients that wait
    /// for ordinary connections to end are left to wait.
    fn shed(&mut self, route: usize) {
        let lasted = self.stuck_in_a_loop(self.shortage_since);
        let Some(Route {
            listener, listen, ..
        }) = self.routes.get_mut(route)
        else {
            return;
        };
        if !lasted || self.spare.take().is_none() {
            return;
        }
        if let Ok((client, peer)) = listener.accept(listen) {
            let err = io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
            self.refuse(route, &client, &peer, &err);
        }
        self.spare = std::fs::File::open("/dev/null").ok();
    }

    /// True if a route leads back to the loop and resources are short
    /// since `since`, [`MOST_PARKED`] or longer ago.
    fn stuck_in_a_loop(&self, since: Option<u64>) -> bool {
        let now = self.clock.now();
        self.loops > 0
            && since.is_some_and(|since| now.saturating_sub(since) >= MOST_PARKED.as_nanos() as u64)
    }

    /// Stops accepting for [`ACCEPT_PAUSE`] after `what` failed with `err`,
    /// and says so once per shortage.
    fn wait_for_resources(&mut self, what: &str, err: &io::Error) {
        let now = self.clock.now();
        if self.shortage_since.is_none() {
            self.say(&format!(
                "shape: {what}: {}; new connections wait, tried again every {ACCEPT_PAUSE:?}",
                one_line(err)
            ));
            self.shortage_since = Some(now);
        }
        self.accept_resumes = Some(now + ACCEPT_PAUSE.as_nanos() as u64);
    }

    /// Connects a client of route `key` to its server and starts serving
    /// it, or, if the route's name is looked up per client, hands the
    /// name to the resolver and keeps the client until it answers; on
    /// failure closes the client and says why. `waited_since` is when it
    /// began to wait for a descriptor, if it did. Returns its key, if it
    /// is served now.
    fn admit(
        &mut self,
        key: usize,
        client: Stream,
        peer: String,
        waited_since: Option<u64>,
    ) -> Option<usize> {
        let route = self.routes.get(key)?;
        let upstream = match &route.upstream {
            Upstream::Fixed(upstream) => upstream.clone(),
            Upstream::PerClient => {
                let (connect, serial) = (route.connect.clone(), route.serial);
                if self.resolver.is_none() {
                    let waker = self.waker.clone();
                    match Resolver::start(self.found.0.clone(), move || {
                        let _ = waker.wake();
                    }) {
                        Ok(resolver) => self.resolver = Some(resolver),
                        Err(err) => {
                            self.refuse(key, &client, &peer, &err);
                            return None;
                        }
                    }
                }
                let ticket = self.awaiting.insert(Awaiting {
                    route: key,
                    serial,
                    client,
                    peer,
                });
                if let Some(resolver) = &self.resolver {
                    resolver.ask(ticket, connect);
                }
                return None;
            }
        };
        self.connect_client(key, client, peer, upstream, waited_since)
    }

    /// Serves the clients whose names the resolver has looked up: each is
    /// connected, or closed if its name did not resolve or its route has
    /// closed. Returns true if it had been full, so that accepting,
    /// which stopped, goes on.
    fn take_found(&mut self, ready: &mut Vec<usize>) -> bool {
        let was_full = self.awaiting.len() >= MOST_AWAITING;
        let mut took = false;
        while let Ok((ticket, found)) = self.found.1.try_recv() {
            let Some(waiting) = self.awaiting.try_remove(ticket) else {
                continue;
            };
            took = true;
            let Awaiting {
                route,
                serial,
                client,
                peer,
            } = waiting;
            if self.routes.get(route).is_none_or(|r| r.serial != serial) {
                continue;
            }
            match found {
                Ok(upstream) => {
                    ready.extend(self.connect_client(route, client, peer, upstream.into(), None))
                }
                Err(err) => {
                    let why = format!("its name does not resolve ({})", one_line(&err));
                    self.refuse(route, &client, &peer, &io::Error::new(err.kind(), why));
                }
            }
        }
        was_full && took
    }

    /// Closes `client` of route `key`, whose server cannot be reached for
    /// `err`: in good order if the route's rules say so, else by a reset;
    /// and says why.
    fn refuse(&self, key: usize, client: &Stream, peer: &str, err: &io::Error) {
        let Some(route) = self.routes.get(key) else {
            return;
        };
        if !route.rules.closes_when_unreachable() {
            client.reset_on_close();
        }
        self.say(&format!(
            "shape: {peer}: connect to {}: {}",
            route.connect,
            one_line(err)
        ));
    }

    /// Connects a client of route `key` to the first of the `upstream`
    /// addresses that lets a connection begin, and starts serving it; on
    /// failure closes the client and says why. Out of descriptors, the
    /// client waits for one (since `waited_since`, if it waited already)
    /// up to [`MOST_PARKED`]. Returns its key.
    fn connect_client(
        &mut self,
        key: usize,
        client: Stream,
        peer: String,
        upstream: Arc<[SocketAddr]>,
        waited_since: Option<u64>,
    ) -> Option<usize> {
        let route = self.routes.get(key)?;
        let (server, upstream_at) = match connect_upstream(&route.connect, &upstream, 0) {
            Ok(server) => server,
            Err(err) if out_of_resources(&err) => {
                // Only time (connections ending) mends this: the client
                // waits, and those behind it wait in the backlog; but not
                // for ever, since it may be what holds the rest up.
                let since = waited_since.unwrap_or(self.clock.now());
                let what = format!("connect to {}", route.connect);
                self.wait_for_resources(&what, &err);
                if self.stuck_in_a_loop(Some(since)) {
                    self.refuse(key, &client, &peer, &err);
                    return None;
                }
                self.parked = Some(Parked {
                    route: key,
                    client,
                    peer,
                    since,
                });
                return None;
            }
            Err(err) => {
                self.refuse(key, &client, &peer, &err);
                return None;
            }
        };
        let affected = self.choices.f64() < route.rules.affect();
        let seeds = [self.seeds(), self.seeds()];
        let mut luck = Luck::new(seeds[0].faults ^ seeds[1].jitter);
        let route = &self.routes[key];
        let started = route.rules.plan(&mut luck).and_then(|plan| {
            Connection::new(Start {
                client,
                server,
                plan,
                rules: &*route.rules,
                luck,
                seeds,
                affected,
                route: key,
                upstream,
                upstream_at,
                peer: peer.clone(),
                now: self.clock.now(),
            })
        });
        let mut connection = match started {
            Ok(connection) => connection,
            Err(err) => {
                self.say(&format!("shape: {peer}: {}", one_line(&err)));
                return None;
            }
        };
        connection.own_end = connection.server.local_tcp();
        connection.looped = connection
            .client
            .peer_tcp()
            .is_some_and(|peer| self.own_ends.contains(&peer));
        let entry = self.connections.vacant_entry();
        let connection_key = entry.key();
        let registry = self.poll.registry();
        let both = Interest::READABLE | Interest::WRITABLE;
        let registered = registry
            .register(connection.client.source(), Token(connection_key * 2), both)
            .and_then(|()| {
                registry
                    .register(
                        connection.server.source(),
                        Token(connection_key * 2 + 1),
                        both,
                    )
                    .inspect_err(|_| {
                        let _ = registry.deregister(connection.client.source());
                    })
            });
        if let Err(err) = registered {
            connection.reset_on_close();
            self.say(&format!(
                "shape: {}: cannot be watched: {}",
                connection.peer,
                one_line(&err)
            ));
            return None;
        }
        self.own_ends.extend(connection.own_end);
        self.loops += usize::from(connection.looped);
        entry.insert(connection);
        Some(connection_key)
    }

    /// Steps connection `key`, and closes it if it is done or failed (a
    /// failure resets both sides and is said).
    fn step(&mut self, key: usize) {
        let Some(connection) = self.connections.get_mut(key) else {
            return;
        };
        let finished = match connection.step(&mut self.scratch, self.clock.now()) {
            Ok(()) => connection.done(),
            Err(failure) => self.fail(key, failure),
        };
        if finished {
            if let Some(tally) = self.connections[key].tally() {
                self.say(&format!("shape: {}: {tally}", self.connections[key].peer));
            }
            self.forget(key);
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
        let connection = &self.connections[key];
        let route = self.routes.get(connection.route);
        let unreachable = failure.end == End::Server && !connection.server_touched();
        match route.is_some_and(|route| unreachable && route.rules.closes_when_unreachable()) {
            true => connection.server.reset_on_close(),
            false => connection.reset_on_close(),
        }
        let end = match (failure.end, route) {
            (End::Client, _) => "client".to_string(),
            (End::Server, Some(route)) => format!("server {}", route.connect),
            (End::Server, None) => "server".to_string(),
        };
        let line = match ResetStruck::is(&failure.err) {
            true => format!("shape: {}: reset, as --reset-after asked", connection.peer),
            false => format!(
                "shape: {}: {end}: {}",
                connection.peer,
                one_line(&failure.err)
            ),
        };
        self.say(&line);
        true
    }

    /// Connects connection `key` to the next address of its route's
    /// upstream, if no byte has passed to or from its server yet (a name
    /// such as localhost may name ::1 first, where nothing listens).
    /// Returns whether it did.
    fn try_next_address(&mut self, key: usize) -> bool {
        let connection = &mut self.connections[key];
        let Some(route) = self.routes.get(connection.route) else {
            return false;
        };
        if connection.server_touched() || !matches!(route.connect, Address::Tcp { .. }) {
            return false;
        }
        let next = connect_upstream(
            &route.connect,
            &connection.upstream,
            connection.upstream_at + 1,
        );
        let Ok((server, at)) = next else {
            return false;
        };
        let registry = self.poll.registry();
        let _ = registry.deregister(connection.server.source());
        if let Some(end) = connection.own_end.take() {
            self.own_ends.remove(&end);
        }
        connection.server = server;
        connection.own_end = connection.server.local_tcp();
        self.own_ends.extend(connection.own_end);
        connection.upstream_at = at;
        let both = Interest::READABLE | Interest::WRITABLE;
        registry
            .register(connection.server.source(), Token(key * 2 + 1), both)
            .is_ok()
    }

    /// Closes connection `key`'s sockets and forgets it.
    fn forget(&mut self, key: usize) {
        let mut connection = self.connections.remove(key);
        if let Some(end) = connection.own_end {
            self.own_ends.remove(&end);
        }
        self.loops -= usize::from(connection.looped);
        let _ = self.poll.registry().deregister(connection.client.source());
        let _ = self.poll.registry().deregister(connection.server.source());
    }
}

/// A new connection to `connect`: for TCP, to the first of its addresses
/// `upstream` from `from` on that the system lets a connection begin to,
/// with that address's place. Completes in the background; an address
/// that then refuses is left for the next by [`Server::try_next_address`].
fn connect_upstream(
    connect: &Address,
    upstream: &[SocketAddr],
    from: usize,
) -> io::Result<(Stream, usize)> {
    if let Address::Unix(path) = connect {
        return UnixStream::connect(path).map(|s| (Stream::Unix(s), 0));
    }
    let mut failed = io::Error::other("its name does not resolve (yet)");
    for (at, address) in upstream.iter().enumerate().skip(from) {
        match TcpStream::connect(*address) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok((Stream::Tcp(stream), at));
            }
            Err(err) if out_of_resources(&err) => return Err(err),
            Err(err) => failed = err,
        }
    }
    Err(failed)
}

/// Wakes the loop with `wake` whenever `bucket`'s settings change, on a
/// thread asleep on its generation (a futex, reached from any process).
fn watch_for_changes(bucket: Arc<Bucket>, wake: impl Fn() + Send + 'static) -> io::Result<()> {
    std::thread::Builder::new()
        .name("settings-watch".into())
        .spawn(move || {
            let mut seen = bucket.generation();
            loop {
                bucket.sleep_until_changed(seen);
                let now = bucket.generation();
                if now != seen {
                    seen = now;
                    wake();
                }
            }
        })?;
    Ok(())
}
