//! The event loop: one thread, one poll, every connection.

use super::Shaping;
use super::alarm::Alarm;
use super::connection::{BUFFER, Connection, Direction, End, Seeds, Setup, buckets};
use super::stream::{Listener, Stream};
use crate::bucket::Bucket;
use crate::chunk::chunk_size;
use crate::faults::{ResetStruck, Way, drop_block};
use crate::message::one_line;
use crate::net::Address;
use mio::net::{TcpStream, UnixStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use shape_bucket::{Clock, Damaged, MonotonicClock};
use slab::Slab;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long accepting rests after the system refused to accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
const LISTENER: Token = Token(usize::MAX);
const ALARM: Token = Token(usize::MAX - 1);
const CHANGED: Token = Token(usize::MAX - 2);

/// The proxy's whole state, driven by one thread.
pub(super) struct Server<'a> {
    poll: Poll,
    events: Events,
    listener: Listener,
    /// Where it listens, for messages.
    listen: String,
    connect: &'a Address,
    /// The buckets every connection shares, up and down: watched for
    /// changes from elsewhere, and for damage.
    shared: [Arc<Bucket>; 2],
    /// The connect address, resolved once, if it is a TCP one.
    upstream: Option<SocketAddr>,
    shaping: &'a Shaping,
    connections: Slab<Connection>,
    /// Connections to step in this round, kept to reuse its memory.
    ready: Vec<usize>,
    alarm: Option<Alarm>,
    /// Set when the settings change: every waiting connection is stepped.
    changed: Arc<AtomicBool>,
    /// While accepting rests for want of resources: until when.
    accept_resumes: Option<u64>,
    /// A client accepted when no descriptor was left for its server: it
    /// waits for one, first in line.
    parked: Option<(Stream, String)>,
    /// Whether the current shortage of resources has been said.
    shortage_said: bool,
    /// Where each direction's seeds come from.
    seeds: fastrand::Rng,
    /// Which connections the faults affect.
    choices: fastrand::Rng,
    /// What every direction reads into: it keeps only what it read.
    scratch: Vec<u8>,
    clock: MonotonicClock,
}

impl<'a> Server<'a> {
    pub(super) fn new(
        mut listener: Listener,
        listen: String,
        connect: &'a Address,
        shaping: &'a Shaping,
    ) -> io::Result<Server<'a>> {
        let poll = Poll::new()?;
        poll.registry()
            .register(listener.source(), LISTENER, Interest::READABLE)?;
        let upstream = match connect {
            Address::Tcp { .. } => Some(connect.resolve_one()?),
            Address::Unix(_) => None,
        };
        // A change of settings may move every deadline: poll is woken,
        // and every waiting connection is stepped again. Whoever changes
        // the settings here says so once all buckets (each connection's
        // own too) have changed; a change from elsewhere (another process
        // on a share, a fleet's leases) is seen by a thread asleep on the
        // shared buckets' generation. Nothing polls.
        let changed = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(mio::Waker::new(poll.registry(), CHANGED)?);
        let wake = {
            let (changed, waker) = (changed.clone(), waker.clone());
            move || {
                changed.store(true, Ordering::SeqCst);
                let _ = waker.wake();
            }
        };
        shaping.settings.on_change(Box::new(wake.clone()));
        let (up, down) = (
            shaping.settings.shared(Way::Up),
            shaping.settings.shared(Way::Down),
        );
        watch_for_changes(up.clone(), wake.clone())?;
        if !Arc::ptr_eq(&up, &down) {
            watch_for_changes(down.clone(), wake)?;
        }
        let alarm = Alarm::new().ok();
        if let Some(alarm) = &alarm {
            let fd = alarm.fd.as_raw_fd();
            poll.registry()
                .register(&mut SourceFd(&fd), ALARM, Interest::READABLE)?;
        }
        Ok(Server {
            poll,
            events: Events::with_capacity(1024),
            listener,
            listen,
            connect,
            shared: [up, down],
            upstream,
            shaping,
            connections: Slab::new(),
            ready: Vec::new(),
            alarm,
            changed,
            accept_resumes: None,
            parked: None,
            shortage_said: false,
            seeds: fastrand::Rng::with_seed(shaping.seed),
            choices: fastrand::Rng::with_seed(shaping.seed).fork(),
            scratch: vec![0; BUFFER],
            clock: MonotonicClock,
        })
    }

    /// The seed of the next random choices: drawn in turn from `--seed`,
    /// so that the same connections see the same jitter and faults again.
    fn seed(&mut self) -> u64 {
        self.seeds.u64(..)
    }

    /// Says where the proxy listens, and the seed its faults draw from.
    pub(super) fn say_where(&self) {
        self.say(&format!("shape: listening on {}", self.listen));
        if self.shaping.say_seed {
            self.say(&format!("shape: seed {}", self.shaping.seed));
        }
    }

    /// Says `line` on standard error, unless quiet.
    fn say(&self, line: &str) {
        if let Some(report) = &self.shaping.report {
            report.line(line);
        }
    }

    pub(super) fn run(&mut self) -> io::Result<()> {
        loop {
            let sleep = self.sleep();
            match self.poll.poll(&mut self.events, sleep) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let mut ready = std::mem::take(&mut self.ready);
            let mut accept = false;
            for event in &self.events {
                match event.token() {
                    ALARM => {
                        if let Some(alarm) = &mut self.alarm {
                            alarm.silence();
                        }
                    }
                    LISTENER => accept = true,
                    CHANGED => {}
                    token => ready.push(token.0 / 2),
                }
            }
            let now = self.clock.now();
            if accept || self.accept_resumes.is_some_and(|t| t <= now) {
                self.accept_all(&mut ready);
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
            if self.shared.iter().any(|bucket| bucket.damaged()) {
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
    /// waiting to be accepted, unless accepting rests.
    fn accept_all(&mut self, ready: &mut Vec<usize>) {
        if self.accept_resumes.is_some_and(|t| t > self.clock.now()) {
            return;
        }
        self.accept_resumes = None;
        if let Some((client, peer)) = self.parked.take() {
            ready.extend(self.admit(client, peer));
        }
        while self.accept_resumes.is_none() {
            match self.listener.accept(&self.listen) {
                Ok((client, peer)) => ready.extend(self.admit(client, peer)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The client gave up before it was accepted.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                // Out of descriptors, memory or buffers, or worse: trying
                // again at once would fail the same way and spin.
                Err(err) => self.wait_for_resources(&format!("accept on {}", self.listen), &err),
            }
        }
        if self.accept_resumes.is_none() && self.parked.is_none() {
            // Everything waiting got in: a later shortage is news again.
            self.shortage_said = false;
        }
    }

    /// Stops accepting for [`ACCEPT_PAUSE`] after `what` failed with `err`,
    /// and says so once per shortage.
    fn wait_for_resources(&mut self, what: &str, err: &io::Error) {
        if !self.shortage_said {
            self.say(&format!(
                "shape: {what}: {}; new connections wait, tried again every {ACCEPT_PAUSE:?}",
                one_line(err)
            ));
            self.shortage_said = true;
        }
        self.accept_resumes = Some(self.clock.now() + ACCEPT_PAUSE.as_nanos() as u64);
    }

    /// Connects a new client to the server and starts serving it; on
    /// failure resets the client and says why. Returns its key.
    fn admit(&mut self, client: Stream, peer: String) -> Option<usize> {
        let server = match self.connect_upstream() {
            Ok(server) => server,
            Err(err) if out_of_resources(&err) => {
                // Only time (connections ending) mends this: the client
                // waits, and those behind it wait in the backlog.
                self.parked = Some((client, peer));
                self.wait_for_resources(&format!("connect to {}", self.connect), &err);
                return None;
            }
            Err(err) => {
                client.reset_on_close();
                self.say(&format!(
                    "shape: {peer}: connect to {}: {}",
                    self.connect,
                    one_line(&err)
                ));
                return None;
            }
        };
        let buckets = match buckets(self.shaping) {
            Ok(buckets) => buckets,
            Err(err) => {
                client.reset_on_close();
                server.reset_on_close();
                self.say(&format!("shape: {peer}: {}", one_line(&err)));
                return None;
            }
        };
        let affected = self.choices.f64() < self.shaping.affect;
        let now = self.clock.now();
        let start = |seeds, bucket: &Bucket| {
            let (limit, burst) = bucket.limit_and_burst();
            Setup {
                link: &self.shaping.link,
                conditions: &self.shaping.conditions,
                seeds,
                affected,
                // What --drop loses at once, from the rate of the moment
                // the connection began.
                block: drop_block(chunk_size(limit, burst)),
                now,
            }
        };
        let mut seeds = || Seeds {
            jitter: self.seed(),
            faults: self.seed(),
        };
        let (up_seeds, down_seeds) = (seeds(), seeds());
        let up = Direction::new(Way::Up, &start(up_seeds, &buckets.0));
        let down = Direction::new(Way::Down, &start(down_seeds, &buckets.1));
        let entry = self.connections.vacant_entry();
        let key = entry.key();
        let mut connection = Connection {
            client,
            server,
            up,
            down,
            buckets,
            wake_at: None,
            peer,
        };
        let registry = self.poll.registry();
        let both = Interest::READABLE | Interest::WRITABLE;
        let registered = registry
            .register(connection.client.source(), Token(key * 2), both)
            .and_then(|()| {
                registry
                    .register(connection.server.source(), Token(key * 2 + 1), both)
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
        entry.insert(connection);
        Some(key)
    }

    /// A new connection to the server; completes in the background.
    fn connect_upstream(&self) -> io::Result<Stream> {
        match (self.connect, self.upstream) {
            (_, Some(address)) => TcpStream::connect(address).map(|s| {
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
            (Address::Unix(path), None) => UnixStream::connect(path).map(Stream::Unix),
            (Address::Tcp { .. }, None) => Err(io::Error::other("the address was not resolved")),
        }
    }

    /// Steps connection `key`, and closes it if it is done or failed (a
    /// failure resets both sides and is said).
    fn step(&mut self, key: usize) {
        let Some(connection) = self.connections.get_mut(key) else {
            return;
        };
        let finished = match connection.step(
            &self.shaping.conditions,
            [&self.shaping.passed_up, &self.shaping.passed_down],
            &mut self.scratch,
        ) {
            Ok(()) => connection.done(),
            Err(failure) => {
                connection.reset_on_close();
                let end = match failure.end {
                    End::Client => "client".to_string(),
                    End::Server => format!("server {}", self.connect),
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
        };
        if finished {
            let mut connection = self.connections.remove(key);
            if let Some(tally) = connection.tally() {
                self.say(&format!("shape: {}: {tally}", connection.peer));
            }
            let _ = self.poll.registry().deregister(connection.client.source());
            let _ = self.poll.registry().deregister(connection.server.source());
        }
    }
}

/// True if `err` says the process or the system ran out of descriptors,
/// memory or buffers, which only time (connections ending) can mend.
fn out_of_resources(err: &io::Error) -> bool {
    use rustix::io::Errno;
    err.raw_os_error().is_some_and(|code| {
        [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM]
            .iter()
            .any(|errno| errno.raw_os_error() == code)
    })
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
