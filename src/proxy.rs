//! Proxy mode (`--listen` with `--connect`): every connection accepted on
//! the listen address is forwarded to the connect address, both directions
//! shaped, all on one thread driven by mio.
//!
//! Each direction reads a chunk, reserves its tokens without blocking, and
//! once they are covered puts the chunk in its delay line (see
//! [`crate::link`]), which passes it on when due: at once without
//! `--delay`. The line's capacity bounds what a direction holds; when it is
//! full the direction stops reading. The thread sleeps in poll until the
//! earliest deadline (tokens or a release time) or an event, so a
//! connection that waits costs no CPU and never holds up the others;
//! reservations queue in one bucket, so none starves. Half-closes pass
//! through (an end of input becomes a shutdown of the other side's writing
//! once all held bytes are out), and a reset or error on one side resets
//! the other.
//!
//! Live changes (`--remote`, `--rate-file`, `--schedule`) go through the
//! [`Adjuster`], which wakes poll, and every waiting connection is stepped
//! again: its deadline may have moved.
//!
//! A failure that concerns one connection (its upstream refuses, a side
//! resets, poll will not take it) resets that connection only and is said
//! in one line naming its peer. When the system will not accept more
//! connections (out of descriptors), new ones wait in the backlog and
//! accepting is tried again after a pause, said once: the loop never spins.

use crate::bucket::Reservation;
use crate::clock::{Clock, MonotonicClock};
use crate::copy::chunk_size;
use crate::link::{Line, SlowLink};
use crate::live::Adjuster;
use crate::message::one_line;
use crate::net::{Address, Listening};
use crate::progress::Printer;
use crate::share::Bucket;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};
use slab::Slab;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The largest chunk a direction reads at once.
const BUFFER: usize = 64 * 1024;
/// How long poll sleeps at most when nothing is due.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// How long accepting rests after the system refused to accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
const LISTENER: Token = Token(usize::MAX);
const ALARM: Token = Token(usize::MAX - 1);
const CHANGED: Token = Token(usize::MAX - 2);

/// How the proxy shapes every connection.
pub struct Shaping {
    /// Holds the buckets of the two directions (client to server, server
    /// to client) that all connections share, or that each connection's
    /// own copy with `per_connection`; changes them while running.
    pub adjuster: Arc<Adjuster>,
    /// Each connection gets buckets of its own instead of sharing two.
    pub per_connection: bool,
    /// Delay, jitter and buffer size, for each direction of each
    /// connection.
    pub link: SlowLink,
    /// Bytes passed on, both directions together.
    pub forwarded: Arc<AtomicU64>,
    /// Where to say where the proxy listens and what failed; `None` with
    /// `--quiet`.
    pub report: Option<Printer>,
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Write),
            Stream::Unix(s) => s.shutdown(Shutdown::Write),
        }
    }

    /// Makes the close that follows a reset rather than an orderly end.
    fn reset_on_close(&self) {
        let fd = match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        };
        let _ = rustix::net::sockopt::set_socket_linger(fd, Some(Duration::ZERO));
    }
}

impl Listener {
    /// A non-blocking listener for poll, from one bound by [`Address::listen`].
    fn from_listening(listening: Listening) -> io::Result<Listener> {
        match listening {
            Listening::Tcp(listener) => {
                listener.set_nonblocking(true)?;
                Ok(Listener::Tcp(TcpListener::from_std(listener)))
            }
            Listening::Unix(listener, _) => {
                listener.set_nonblocking(true)?;
                Ok(Listener::Unix(UnixListener::from_std(listener)))
            }
        }
    }

    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Listener::Tcp(l) => l,
            Listener::Unix(l) => l,
        }
    }

    /// Accepts a client, and describes it for messages.
    fn accept(&mut self, listen: &str) -> io::Result<(Stream, String)> {
        match self {
            Listener::Tcp(l) => l.accept().map(|(s, peer)| {
                let _ = s.set_nodelay(true);
                (Stream::Tcp(s), format!("connection from {peer}"))
            }),
            // Unix clients are rarely bound to a name: say where they came.
            Listener::Unix(l) => l
                .accept()
                .map(|(s, _)| (Stream::Unix(s), format!("connection on {listen}"))),
        }
    }
}

/// Which end of a connection something happened at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Client,
    Server,
}

/// What ended a connection: the end that failed, and how.
#[derive(Debug)]
struct Failure {
    end: End,
    err: io::Error,
}

/// One direction of a connection: bytes read from one side wait for their
/// tokens, then in the delay line for their release time, then go out to
/// the other side.
struct Direction {
    /// The end read from and the end written to.
    ends: (End, End),
    line: Line,
    /// A chunk read whose tokens are reserved but not yet covered.
    unpaid: Option<(Vec<u8>, Reservation)>,
    /// A due chunk being written, and how much of it is out.
    sending: Option<(Vec<u8>, usize)>,
    ended: bool,
    shut: bool,
}

impl Direction {
    fn new(link: &SlowLink, from: End, to: End) -> Direction {
        Direction {
            ends: (from, to),
            line: link.line(),
            unpaid: None,
            sending: None,
            ended: false,
            shut: false,
        }
    }

    fn done(&self) -> bool {
        self.shut
    }

    /// Moves bytes from `from` to `to` until nothing more can move now:
    /// each side would block, or tokens, release times or buffer room are
    /// short. Returns when to step again if no event comes first: when
    /// tokens will be covered or a chunk is due.
    fn step(
        &mut self,
        from: &mut Stream,
        to: &mut Stream,
        bucket: &Bucket,
        link: &SlowLink,
        forwarded: &AtomicU64,
    ) -> Result<Option<u64>, Failure> {
        let (from_end, to_end) = self.ends;
        let at = |end| move |err| Failure { end, err };
        // The deadline comes from the same look at the bucket that found
        // the tokens short: asked again later, the tokens might be covered
        // by then, and nothing would come back for the chunk.
        let tokens = loop {
            let sent = self
                .send_due(to, bucket.clock().now(), forwarded)
                .map_err(at(to_end))?;
            let (paid, tokens) = self.settle(bucket);
            let read = self.read(from, bucket, link).map_err(at(from_end))?;
            if !(sent || paid || read) {
                break tokens;
            }
        };
        if self.ended && self.unpaid.is_none() && self.sending.is_none() && self.line.is_empty() {
            if !self.shut {
                to.shutdown_write().map_err(at(to_end))?;
                self.shut = true;
            }
            return Ok(None);
        }
        // While a write is blocked, the next release waits for writability.
        let release = self
            .sending
            .is_none()
            .then(|| self.line.next_release())
            .flatten();
        Ok(earliest(tokens, release))
    }

    /// Writes what is due at `now` until the output would block. Returns
    /// whether anything went out.
    fn send_due(&mut self, to: &mut Stream, now: u64, forwarded: &AtomicU64) -> io::Result<bool> {
        let mut progress = false;
        loop {
            if self.sending.is_none() {
                self.sending = self.line.pop_due(now).map(|chunk| (chunk, 0));
            }
            let Some((chunk, out)) = &mut self.sending else {
                return Ok(progress);
            };
            match to.write(&chunk[*out..]) {
                Ok(n) => {
                    *out += n;
                    forwarded.fetch_add(n as u64, Ordering::Relaxed);
                    progress = true;
                    if *out == chunk.len() {
                        let (chunk, _) = self.sending.take().expect("just written from");
                        self.line.done_with(chunk);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(progress),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Puts the chunk read into the line once its tokens are covered.
    /// Returns whether it went in, and else when its tokens will be
    /// covered, if a chunk waits.
    fn settle(&mut self, bucket: &Bucket) -> (bool, Option<u64>) {
        let Some((_, paid)) = &self.unpaid else {
            return (false, None);
        };
        if let Some(deadline) = bucket.deadline(paid) {
            return (false, Some(deadline));
        }
        let (chunk, _) = self.unpaid.take().expect("checked above");
        self.line.push(chunk, bucket.clock().now());
        (true, None)
    }

    /// Reads a chunk, if none waits for tokens and the buffer has room, and
    /// reserves its tokens. Returns whether anything was read.
    fn read(&mut self, from: &mut Stream, bucket: &Bucket, link: &SlowLink) -> io::Result<bool> {
        if self.unpaid.is_some() || self.ended {
            return Ok(false);
        }
        let (limit, burst) = bucket.limit_and_burst();
        let room = link.capacity(limit, burst).saturating_sub(self.line.held());
        let want = chunk_size(limit, burst)
            .min(link.max_chunk())
            .min(BUFFER)
            .min(usize::try_from(room).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(false);
        }
        let mut chunk = self.line.buffer(want);
        loop {
            match from.read(&mut chunk) {
                Ok(0) => {
                    self.line.recycle(chunk);
                    self.ended = true;
                    return Ok(true);
                }
                Ok(n) => {
                    chunk.truncate(n);
                    let paid = bucket.reserve(n as u64);
                    self.unpaid = Some((chunk, paid));
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.line.recycle(chunk);
                    return match e.kind() {
                        io::ErrorKind::WouldBlock => Ok(false),
                        _ => Err(e),
                    };
                }
            }
        }
    }
}

/// The earlier of two moments, either of which may be missing.
fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A client, its server, both directions and their buckets.
struct Connection {
    client: Stream,
    server: Stream,
    up: Direction,
    down: Direction,
    buckets: (Arc<Bucket>, Arc<Bucket>),
    wake_at: Option<u64>,
    /// Who it is, for messages: `connection from 127.0.0.1:41234`.
    peer: String,
}

impl Connection {
    /// Steps both directions.
    fn step(&mut self, link: &SlowLink, forwarded: &AtomicU64) -> Result<(), Failure> {
        let up = self.up.step(
            &mut self.client,
            &mut self.server,
            &self.buckets.0,
            link,
            forwarded,
        )?;
        let down = self.down.step(
            &mut self.server,
            &mut self.client,
            &self.buckets.1,
            link,
            forwarded,
        )?;
        self.wake_at = earliest(up, down);
        Ok(())
    }

    fn done(&self) -> bool {
        self.up.done() && self.down.done()
    }

    /// Makes closing both sides a reset.
    fn reset_on_close(&self) {
        self.client.reset_on_close();
        self.server.reset_on_close();
    }
}

/// The buckets for one connection: the shared pair, or a fresh pair with
/// the settings now in force.
fn buckets(shaping: &Shaping) -> io::Result<(Arc<Bucket>, Arc<Bucket>)> {
    let [up, down] = shaping.adjuster.buckets() else {
        return Err(io::Error::other("a proxy needs a bucket per direction"));
    };
    if !shaping.per_connection {
        return Ok((up.clone(), down.clone()));
    }
    let own = |direction| {
        shaping
            .adjuster
            .follower(direction)
            .map_err(io::Error::other)
    };
    Ok((own(0)?, own(1)?))
}

/// Serves connections on `listen`, forwarding each to `connect`, until the
/// process is ended. Fails only if the proxy cannot start; after that, a
/// failure ends one connection, never the proxy.
pub fn serve(listen: &Address, connect: &Address, shaping: &Shaping) -> io::Result<()> {
    raise_file_limit();
    let listening = listen.listen()?;
    let listen = listening.local();
    let mut server = Server::new(
        Listener::from_listening(listening)?,
        listen,
        connect,
        shaping,
    )?;
    server.say(&format!("shape: listening on {}", server.listen));
    server.run()
}

/// The proxy's whole state, driven by one thread.
struct Server<'a> {
    poll: Poll,
    events: Events,
    listener: Listener,
    /// Where it listens, for messages.
    listen: String,
    connect: &'a Address,
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
    clock: MonotonicClock,
}

impl<'a> Server<'a> {
    fn new(
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
        // A change of settings may move every deadline: the adjuster wakes
        // poll, and every waiting connection is stepped again.
        let changed = Arc::new(AtomicBool::new(false));
        let waker = mio::Waker::new(poll.registry(), CHANGED)?;
        shaping.adjuster.on_change({
            let changed = changed.clone();
            Box::new(move || {
                changed.store(true, Ordering::SeqCst);
                let _ = waker.wake();
            })
        });
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
            upstream,
            shaping,
            connections: Slab::new(),
            ready: Vec::new(),
            alarm,
            changed,
            accept_resumes: None,
            parked: None,
            shortage_said: false,
            clock: MonotonicClock,
        })
    }

    /// Says `line` on standard error, unless quiet.
    fn say(&self, line: &str) {
        if let Some(report) = &self.shaping.report {
            report.line(line);
        }
    }

    fn run(&mut self) -> io::Result<()> {
        loop {
            let sleep = self.sleep();
            match self.poll.poll(&mut self.events, Some(sleep)) {
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
        }
    }

    /// How long poll may sleep: until the earliest deadline of a
    /// connection or of the rest from accepting, at most [`MAX_SLEEP`].
    fn sleep(&mut self) -> Duration {
        let now = self.clock.now();
        let earliest = self
            .connections
            .iter()
            .filter_map(|(_, c)| c.wake_at)
            .chain(self.accept_resumes)
            .min();
        match earliest {
            Some(t) if t <= now => Duration::ZERO,
            Some(t) if self.alarm.as_mut().is_some_and(|alarm| alarm.ring_at(t)) => MAX_SLEEP,
            Some(t) => Duration::from_nanos(t - now).min(MAX_SLEEP),
            None => MAX_SLEEP,
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
        let entry = self.connections.vacant_entry();
        let key = entry.key();
        let mut connection = Connection {
            client,
            server,
            up: Direction::new(&self.shaping.link, End::Client, End::Server),
            down: Direction::new(&self.shaping.link, End::Server, End::Client),
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
        let finished = match connection.step(&self.shaping.link, &self.shaping.forwarded) {
            Ok(()) => connection.done(),
            Err(failure) => {
                connection.reset_on_close();
                let end = match failure.end {
                    End::Client => "client".to_string(),
                    End::Server => format!("server {}", self.connect),
                };
                let line = format!(
                    "shape: {}: {end}: {}",
                    connection.peer,
                    one_line(&failure.err)
                );
                self.say(&line);
                true
            }
        };
        if finished {
            let mut connection = self.connections.remove(key);
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

/// A timer that wakes poll at a moment on the monotonic clock, to the
/// microsecond: poll's own timeout counts whole milliseconds, which would
/// make every release time and token deadline up to a millisecond late.
struct Alarm {
    fd: OwnedFd,
    /// The moment it is set for, if armed.
    armed: Option<u64>,
}

impl Alarm {
    fn new() -> io::Result<Alarm> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )?;
        Ok(Alarm { fd, armed: None })
    }

    /// Rings at `moment` (a value of [`MonotonicClock`]) instead of when
    /// it was set for. Returns false if it could not be set.
    fn ring_at(&mut self, moment: u64) -> bool {
        if self.armed == Some(moment) {
            return true;
        }
        let at = Timespec {
            tv_sec: (moment / 1_000_000_000) as i64,
            tv_nsec: (moment % 1_000_000_000) as _,
        };
        let once = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: at,
        };
        let set = timerfd_settime(&self.fd, TimerfdTimerFlags::ABSTIME, &once).is_ok();
        self.armed = set.then_some(moment);
        set
    }

    /// Takes note that it rang, so that it can ring again.
    fn silence(&mut self) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut count);
        self.armed = None;
    }
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
