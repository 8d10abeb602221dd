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

use crate::bucket::Reservation;
use crate::clock::{Clock, MonotonicClock};
use crate::copy::chunk_size;
use crate::link::{Line, SlowLink};
use crate::live::Adjuster;
use crate::net::Address;
use crate::share::Bucket;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};
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

/// One direction of a connection: bytes read from one side wait for their
/// tokens, then in the delay line for their release time, then go out to
/// the other side.
struct Direction {
    line: Line,
    /// A chunk read whose tokens are reserved but not yet covered.
    unpaid: Option<(Vec<u8>, Reservation)>,
    /// A due chunk being written, and how much of it is out.
    sending: Option<(Vec<u8>, usize)>,
    ended: bool,
    shut: bool,
}

impl Direction {
    fn new(link: &SlowLink) -> Direction {
        Direction {
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
    ) -> io::Result<Option<u64>> {
        // The deadline comes from the same look at the bucket that found
        // the tokens short: asked again later, the tokens might be covered
        // by then, and nothing would come back for the chunk.
        let tokens = loop {
            let sent = self.send_due(to, bucket.clock().now(), forwarded)?;
            let (paid, tokens) = self.settle(bucket);
            let read = self.read(from, bucket, link)?;
            if !(sent || paid || read) {
                break tokens;
            }
        };
        if self.ended && self.unpaid.is_none() && self.sending.is_none() && self.line.is_empty() {
            if !self.shut {
                to.shutdown_write()?;
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
}

impl Connection {
    /// Steps both directions; `Err` means the connection must be reset.
    fn step(&mut self, link: &SlowLink, forwarded: &AtomicU64) -> io::Result<()> {
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
/// process is ended.
pub fn serve(listen: &Address, connect: &Address, shaping: &Shaping) -> io::Result<()> {
    raise_file_limit();
    let mut poll = Poll::new()?;
    let mut listener = match listen {
        Address::Tcp { .. } => Listener::Tcp(TcpListener::from_std(listen.bind_tcp()?)),
        Address::Unix(path) => Listener::Unix(UnixListener::bind(path)?),
    };
    match &mut listener {
        Listener::Tcp(l) => poll.registry().register(l, LISTENER, Interest::READABLE)?,
        Listener::Unix(l) => poll.registry().register(l, LISTENER, Interest::READABLE)?,
    }
    let upstream: Option<SocketAddr> = match connect {
        Address::Tcp { .. } => Some(connect.resolve_one()?),
        Address::Unix(_) => None,
    };
    let mut connections: Vec<Option<Connection>> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let clock = MonotonicClock;
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
    let mut alarm = Alarm::new().ok();
    if let Some(alarm) = &alarm {
        let fd = alarm.fd.as_raw_fd();
        poll.registry()
            .register(&mut SourceFd(&fd), ALARM, Interest::READABLE)?;
    }
    loop {
        let now = clock.now();
        let earliest = connections.iter().flatten().filter_map(|c| c.wake_at).min();
        let sleep = match earliest {
            Some(t) if t <= now => Duration::ZERO,
            Some(t) if alarm.as_mut().is_some_and(|alarm| alarm.ring_at(t)) => MAX_SLEEP,
            Some(t) => Duration::from_nanos(t - now).min(MAX_SLEEP),
            None => MAX_SLEEP,
        };
        match poll.poll(&mut events, Some(sleep)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        let mut ready: Vec<usize> = Vec::new();
        for event in &events {
            if event.token() == ALARM {
                if let Some(alarm) = &mut alarm {
                    alarm.silence();
                }
            } else if event.token() == LISTENER {
                accept_all(
                    &mut listener,
                    connect,
                    upstream,
                    &poll,
                    &mut connections,
                    shaping,
                    &mut ready,
                )?;
            } else if event.token() != CHANGED {
                ready.push(event.token().0 / 2);
            }
        }
        let now = clock.now();
        let due = match changed.swap(false, Ordering::SeqCst) {
            true => u64::MAX,
            false => now,
        };
        ready.extend(
            connections
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    c.as_ref()
                        .is_some_and(|c| c.wake_at.is_some_and(|t| t <= due))
                })
                .map(|(i, _)| i),
        );
        ready.sort_unstable();
        ready.dedup();
        for index in ready {
            let Some(connection) = connections.get_mut(index).and_then(Option::as_mut) else {
                continue;
            };
            let finished = match connection.step(&shaping.link, &shaping.forwarded) {
                Ok(()) => connection.done(),
                Err(_) => {
                    connection.client.reset_on_close();
                    connection.server.reset_on_close();
                    true
                }
            };
            if finished {
                let mut connection = connections[index].take().expect("checked above");
                let _ = poll.registry().deregister(connection.client.source());
                let _ = poll.registry().deregister(connection.server.source());
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn accept_all(
    listener: &mut Listener,
    connect: &Address,
    upstream: Option<SocketAddr>,
    poll: &Poll,
    connections: &mut Vec<Option<Connection>>,
    shaping: &Shaping,
    ready: &mut Vec<usize>,
) -> io::Result<()> {
    loop {
        let accepted = match listener {
            Listener::Tcp(l) => l.accept().map(|(s, _)| {
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
        };
        let client = match accepted {
            Ok(client) => client,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Out of descriptors or the like: drop this one, keep serving.
            Err(_) => return Ok(()),
        };
        let server = match (connect, upstream) {
            (_, Some(address)) => TcpStream::connect(address).map(|s| {
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
            (Address::Unix(path), None) => UnixStream::connect(path).map(Stream::Unix),
            (Address::Tcp { .. }, None) => {
                unreachable!("a TCP upstream is resolved before serving")
            }
        };
        let Ok(server) = server else {
            client.reset_on_close();
            continue;
        };
        let index = connections
            .iter()
            .position(Option::is_none)
            .unwrap_or_else(|| {
                connections.push(None);
                connections.len() - 1
            });
        let mut connection = Connection {
            client,
            server,
            up: Direction::new(&shaping.link),
            down: Direction::new(&shaping.link),
            buckets: buckets(shaping)?,
            wake_at: None,
        };
        let both = Interest::READABLE | Interest::WRITABLE;
        poll.registry()
            .register(connection.client.source(), Token(index * 2), both)?;
        poll.registry()
            .register(connection.server.source(), Token(index * 2 + 1), both)?;
        connections[index] = Some(connection);
        ready.push(index);
    }
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
