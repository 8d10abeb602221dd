//! The supervisor: one mio loop that answers the command's socket calls,
//! paying for each from the bucket of its way. It makes, accepts and
//! copies the command's IP sockets itself, and places them at the base
//! descriptor or above, where the filter hands over their reads and
//! writes. A call on an IP socket is held until the socket is ready and
//! its tokens are covered, then carried out by shape on its own copy of
//! the socket, at most a chunk (2.5 ms of the rate, or a packet) at a
//! time, and answered with the count, as a short read or write. A datagram is paid
//! for whole and never split. A receive is peeked, copied to the caller,
//! and consumed only once the caller is known to still wait for its
//! answer (killed callers are left their bytes), then answered: no byte
//! is lost or read twice, and the caller never finds in the socket what
//! it was already given. Any other call is let through at once. A held
//! call never blocks the loop: a slow socket holds up only its own
//! caller. How each call moves bytes is `moves.rs`; where sockets are
//! placed, `placing.rs`.

mod copies;
mod datagrams;
mod dials;
mod ending;
mod moves;
mod placing;
mod signals;

use super::Relay;
use super::call::{self, Call};
use super::door::Doors;
use super::kernel::{self, Notification, Response};
use super::sockets::{SocketKind, Sockets, buffer_for};
use crate::bucket::Bucket;
use crate::chunk::chunk_size;
use crate::conditions::Conditions;
use crate::faults::Way;
use crate::net::proxy::Carrier;
use crate::throughput::Throughput;
pub use datagrams::MakeLink;
pub use ending::Ended;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use moves::read_exactly;
use placing::{free_descriptor, is_ip_socket, net_namespace};
use rustix::event::{PollFd, PollFlags};
use shape_bucket::{Clock, Reservation};
use signals::SIGNAL_LOOK;
use slab::Slab;
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

const LISTENER: Token = Token(0);
const CHANGED: Token = Token(1);
const CHILD: Token = Token(2);
const FIRST_CALL: usize = 3;

/// The most of an address read from or written to the caller.
const MOST_NAME: usize = 128;

/// The largest datagram (UDP's payload limit, over IPv6 jumbograms aside).
const MOST_DATAGRAM: usize = 65_536;

/// The buckets and counts of the two ways, in the order of [`Way`]: up is
/// what the command sends, down what it receives.
pub struct Ways {
    pub buckets: [Arc<Bucket>; 2],
    pub passed: [Arc<Throughput>; 2],
}

/// A call held until it can be carried out.
struct HeldCall {
    notification: Notification,
    socket: OwnedFd,
    kind: SocketKind,
    call: Call,
    /// The socket's file status says non-blocking, or the call does.
    nonblocking: bool,
    /// The tokens reserved, and how many.
    paid: Option<(Reservation, u64)>,
    /// What a receive found waiting, before it is consumed.
    peeked: Option<Peeked>,
    /// When its tokens are covered, if it waits for them.
    wake_at: Option<u64>,
    /// Another descriptor it moves bytes to (a splice's pipe).
    other: Option<OwnedFd>,
    /// The descriptor poll watches for it, if any.
    watched: Option<RawFd>,
}

impl HeldCall {
    /// `call` of `notification` on `socket`, held, nothing done yet.
    fn new(notification: Notification, socket: OwnedFd, call: Call) -> HeldCall {
        HeldCall {
            notification,
            socket,
            kind: SocketKind::Stream,
            call,
            nonblocking: false,
            paid: None,
            peeked: None,
            wake_at: None,
            other: None,
            watched: None,
        }
    }
}

/// What the supervisor keeps of a link's relay: where it hands TCP
/// connections, and the link's conditions (a connect takes its round
/// trip).
struct Relaying {
    carrier: Carrier,
    conditions: Arc<Conditions>,
}

/// A receive's bytes, seen but not yet consumed.
struct Peeked {
    data: Vec<u8>,
    /// What the receive returned: with MSG_TRUNC, a datagram's length.
    whole: usize,
    name: Vec<u8>,
}

/// Where a held call stands after a step.
enum Progress {
    /// Still waiting: for tokens, or for its socket.
    Wait,
    /// To be answered so.
    Done(Response),
    /// Answered already.
    Answered,
}

/// The loop and its state.
pub struct Supervisor<'a> {
    listener: OwnedFd,
    child: (i32, OwnedFd),
    poll: Poll,
    events: Events,
    ways: &'a Ways,
    sockets: Sockets,
    held: Slab<HeldCall>,
    scratch: Vec<u8>,
    /// When held calls were last looked at for signals, and how.
    looks: signals::Looks,
    /// The least descriptor of the command's IP sockets.
    base: u32,
    /// Says a line (not with -q).
    say: Box<dyn Fn(&str)>,
    /// What was said already, said once.
    said: HashSet<&'static str>,
    /// This process's network namespace.
    own_net: Option<u64>,
    /// Where a link relays the command's TCP connections, if one does.
    relay: Option<Relaying>,
    /// Connects under way through the link.
    dials: Slab<dials::Dial>,
    /// Where shape's own connections to loopback servers come from.
    own_ends: dials::OwnEnds,
    /// Where the command's connects wait for the link, with a relay.
    doors: Option<Doors>,
    /// The links of the command's datagrams, with a relay.
    datagram_links: Option<datagrams::DatagramLinks>,
    /// When the copies of sockets were last looked over (where copies
    /// are kept).
    collected: u64,
}

impl<'a> Supervisor<'a> {
    /// A supervisor for the command `pid` (with `pidfd`), answering the
    /// calls of `listener`, paying from `ways`. Returns it and a waker
    /// to call when the buckets' settings change.
    pub fn new(
        listener: OwnedFd,
        (pid, pidfd): (i32, OwnedFd),
        base: u32,
        ways: &'a Ways,
        relay: Option<Relay>,
        say: Box<dyn Fn(&str)>,
    ) -> io::Result<(Supervisor<'a>, Arc<Waker>)> {
        kernel::wake_on_one_cpu(listener.as_fd());
        let poll = Poll::new()?;
        let registry = poll.registry();
        registry.register(
            &mut SourceFd(&listener.as_raw_fd()),
            LISTENER,
            Interest::READABLE,
        )?;
        registry.register(&mut SourceFd(&pidfd.as_raw_fd()), CHILD, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(registry, CHANGED)?);
        // A share's bucket changes in other processes too (a fleet's with
        // each lease): a thread asleep on each bucket's generation wakes
        // the loop, which times its held calls anew.
        for (at, bucket) in ways.buckets.iter().enumerate() {
            if ways.buckets[..at].iter().any(|b| Arc::ptr_eq(b, bucket)) {
                continue;
            }
            let waker = waker.clone();
            crate::bucket::watch_for_changes(bucket.clone(), move || {
                let _ = waker.wake();
            })?;
        }
        let (relay, datagram_links, doors) = match relay {
            Some(Relay {
                carrier,
                conditions,
                datagrams,
                flow_ends,
            }) => (
                Some(Relaying {
                    carrier,
                    conditions,
                }),
                Some(datagrams::DatagramLinks::new(datagrams, flow_ends)),
                Some(Doors::open()?),
            ),
            None => (None, None, None),
        };
        let inherited = [
            rustix::stdio::stdin(),
            rustix::stdio::stdout(),
            rustix::stdio::stderr(),
        ]
        .into_iter()
        .position(is_ip_socket);
        if let Some(fd) = inherited {
            let shaped = match relay {
                Some(_) => "it is not shaped (a link carries the command's connections)",
                None => "its reads and writes there are not shaped (its sends and receives are)",
            };
            say(&format!(
                "shape: the command's descriptor {fd} is an IP socket it was given: {shaped}"
            ));
        }
        Ok((
            Supervisor {
                listener,
                child: (pid, pidfd),
                poll,
                events: Events::with_capacity(256),
                ways,
                sockets: Sockets::relayed_by(doors.as_ref().map(Doors::all).unwrap_or_default()),
                held: Slab::new(),
                scratch: Vec::new(),
                looks: signals::Looks::default(),
                base,
                say,
                said: HashSet::new(),
                own_net: net_namespace("self"),
                relay,
                datagram_links,
                dials: Slab::new(),
                own_ends: dials::OwnEnds::default(),
                doors,
                collected: 0,
            },
            waker,
        ))
    }

    /// Answers calls until the command ends.
    pub fn run(&mut self) -> io::Result<Ended> {
        loop {
            let timeout = self.timeout();
            match self.poll.poll(&mut self.events, timeout) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            }
            let (mut ready, mut dialled) = (Vec::new(), Vec::new());
            let (mut calls, mut changed, mut child) = (false, false, false);
            for event in &self.events {
                match event.token() {
                    LISTENER => calls = true,
                    CHANGED => changed = true,
                    CHILD => child = true,
                    Token(n) if n >= dials::DIALS => dialled.push(n - dials::DIALS),
                    Token(n) => ready.push(n - FIRST_CALL),
                }
            }
            if calls {
                self.take_calls()?;
            }
            // Deadlines are timed anew on a change, and whenever poll
            // timed out: a bucket changed elsewhere without a word (a
            // share's) is then followed within SIGNAL_LOOK.
            let timed_out = self.events.is_empty();
            for key in dialled {
                self.dial_event(key);
            }
            let now = self.now();
            self.finish_due_dials(now);
            if self.collect_at().is_some_and(|t| t <= now) {
                self.collect(None);
            }
            for (key, held) in &self.held {
                let due = held
                    .wake_at
                    .is_some_and(|t| changed || timed_out || t <= now);
                if due {
                    ready.push(key);
                }
            }
            ready.sort_unstable();
            ready.dedup();
            for key in ready {
                self.step(key);
            }
            self.interrupt_signalled();
            if child && let Some(code) = self.reap()? {
                return Ok(Ended {
                    code,
                    outlived: self.outlived(),
                });
            }
        }
    }

    /// The clock of the buckets.
    fn now(&self) -> u64 {
        self.ways.buckets[0].clock().now()
    }

    /// How long poll may sleep: until the first held call's tokens are
    /// covered, and no longer than [`SIGNAL_LOOK`] while calls are held.
    fn timeout(&self) -> Option<Duration> {
        let now = self.now();
        let dials_due = self.dials.iter().filter_map(|(_, d)| d.due);
        let due = dials_due.chain(self.collect_at()).min();
        if self.held.is_empty() {
            return due.map(|t| Duration::from_nanos(t.saturating_sub(now)));
        }
        let first = self.held.iter().filter_map(|(_, h)| h.wake_at);
        let first = first.chain(due).min();
        let until = first.map(|t| Duration::from_nanos(t.saturating_sub(now)));
        Some(until.map_or(SIGNAL_LOOK, |d| d.min(SIGNAL_LOOK)))
    }

    /// Takes every call waiting on the listener.
    fn take_calls(&mut self) -> io::Result<()> {
        loop {
            let mut look = [PollFd::new(&self.listener, PollFlags::IN)];
            let zero = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            match rustix::event::poll(&mut look, Some(&zero)) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => return Err(err.into()),
            }
            if !look[0].revents().contains(PollFlags::IN) {
                // Hung up: no process is left under the filter.
                return Ok(());
            }
            match kernel::receive(self.listener.as_fd()) {
                Ok(notification) => self.take(notification),
                // The caller was killed before it could be received.
                Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// Answers `notification` at once, or holds it and takes its first
    /// step.
    fn take(&mut self, notification: Notification) {
        let Notification { tid, nr, args, .. } = notification;
        if nr == libc::SYS_socket {
            return self.make_socket(&notification);
        }
        if nr == libc::SYS_close {
            return self.close(&notification);
        }
        if nr == libc::SYS_connect {
            return match self.relay {
                Some(_) => self.connect(notification),
                None => self.respond(&notification, Response::Continue),
            };
        }
        let Some(fd) = call::descriptor(nr, &args) else {
            return self.respond(&notification, Response::Continue);
        };
        let buffer = buffer_for(&self.ways.buckets);
        let (mut fd, mut kind) = (fd, self.sockets.kind(tid, fd, buffer));
        let mut spliced_in = false;
        if kind == SocketKind::Unshaped && nr == libc::SYS_splice {
            // splice out of a socket (into a pipe) is a receive.
            (fd, spliced_in) = (args[0] as i32, true);
            kind = self.sockets.kind(tid, fd, buffer);
        }
        if kind == SocketKind::Unshaped {
            return self.respond(&notification, Response::Continue);
        }
        let mut read = |at, into: &mut [u8]| read_exactly(tid, at, into);
        let decoded = match spliced_in {
            true => Ok(call::splice_out(&args)),
            false => call::decode(nr, &args, &mut read),
        };
        let decoded = match decoded {
            Ok(call) if self.sockets.keeps_copies() => Ok(self.coarse_without_taking(call)),
            other => other,
        };
        let (call, socket) = match decoded {
            Ok(Call::Other) | Err(_) => return self.respond(&notification, Response::Continue),
            Ok(Call::DupTo { to, .. }) => {
                if to < self.base as i32 {
                    self.say_moved(to);
                }
                return self.respond(&notification, Response::Continue);
            }
            Ok(call) => match self.sockets.take(tid, fd) {
                Ok(socket) => (call, socket),
                Err(_) => return self.respond(&notification, Response::Continue),
            },
        };
        if let Call::Dup { least, cloexec, .. } = call {
            // `close(0); dup(socket)` puts a socket on standard input, as
            // inetd's children expect: that is honoured (and said), other
            // copies are kept high.
            let least = least.max(0) as u32;
            if let Some(stdio @ 0..=2) = free_descriptor(tid, least) {
                self.say_moved(stdio as i32);
                return self.respond(&notification, Response::Continue);
            }
            return self.place_socket(&notification, socket, least.max(self.base), cloexec);
        }
        let flags = match &call {
            Call::Transfer(transfer) => transfer.flags,
            _ => 0,
        };
        let flags = match &call {
            Call::SpliceOut { flags, .. } if flags & libc::SPLICE_F_NONBLOCK != 0 => {
                libc::MSG_DONTWAIT
            }
            _ => flags,
        };
        let nonblocking = flags & libc::MSG_DONTWAIT != 0
            || rustix::fs::fcntl_getfl(&socket)
                .is_ok_and(|status| status.contains(rustix::fs::OFlags::NONBLOCK));
        if kind == SocketKind::Datagram
            && self.datagrams_linked()
            && matches!(call, Call::Coarse { .. })
            && !rustix::net::getpeername(&socket).is_ok_and(|peer| peer.is_some())
        {
            self.say_once(
                "coarse datagrams",
                "shape: the command sent or received datagrams on an unconnected socket with \
                 sendmmsg, recvmmsg or control data: those pass without the link's delay and \
                 faults (they are paid for)",
            );
        }
        let key = self.held.insert(HeldCall {
            notification,
            socket,
            kind,
            call,
            nonblocking,
            paid: None,
            peeked: None,
            wake_at: None,
            other: None,
            watched: None,
        });
        self.step(key);
    }

    /// Answers `notification`; a caller killed meanwhile needs none.
    fn respond(&self, notification: &Notification, response: Response) {
        let _ = kernel::respond(self.listener.as_fd(), notification.id, response);
    }

    /// Takes held call `key` as far as it can go, and lets it go once
    /// answered.
    fn step(&mut self, key: usize) {
        let Some(held) = self.held.get(key) else {
            return;
        };
        let step = match &held.call {
            Call::Transfer(transfer) if transfer.way == Way::Up => self.send(key),
            Call::Transfer(_) => self.receive(key),
            Call::SendFile { .. } => self.send_file(key),
            Call::Coarse { .. } => self.coarse(key),
            Call::Accept { .. } => self.accept(key),
            Call::SpliceOut { .. } => self.splice_out(key),
            Call::Connect { .. } => self.connecting(),
            Call::Socket { .. } | Call::Dup { .. } | Call::DupTo { .. } | Call::Other => {
                Progress::Done(Response::Continue)
            }
        };
        match step {
            Progress::Wait => {}
            Progress::Done(answer) => {
                let held = self.release(key);
                self.respond(&held.notification, answer);
            }
            Progress::Answered => {
                self.release(key);
            }
        }
    }

    /// Lets held call `key` go.
    fn release(&mut self, key: usize) -> HeldCall {
        let held = self.held.remove(key);
        if let Some(fd) = held.watched {
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
        }
        held
    }

    /// Watches held call `key`'s socket for `interest`.
    fn watch(&mut self, key: usize, interest: Interest) -> Progress {
        let fd = self.held[key].socket.as_raw_fd();
        self.watch_fd(key, fd, interest)
    }

    /// Watches `fd` of held call `key` (its socket, or the other
    /// descriptor it moves bytes to) for `interest`.
    fn watch_fd(&mut self, key: usize, fd: RawFd, interest: Interest) -> Progress {
        let held = &mut self.held[key];
        let registry = self.poll.registry();
        let token = Token(key + FIRST_CALL);
        if let Some(old) = held.watched.filter(|&old| old != fd) {
            let _ = registry.deregister(&mut SourceFd(&old));
            held.watched = None;
        }
        let watched = match held.watched {
            Some(_) => registry.reregister(&mut SourceFd(&fd), token, interest),
            None => registry.register(&mut SourceFd(&fd), token, interest),
        };
        match watched {
            Ok(()) => {
                held.watched = Some(fd);
                Progress::Wait
            }
            Err(err) => Progress::Done(Response::Error(errno(&err))),
        }
    }

    /// Reserves `amount` tokens of `way` for held call `key` (once: a
    /// call that waits keeps what it first reserved, though the rate and
    /// so the chunk change), and returns how many are reserved once they
    /// are covered; until then, when they will be is noted.
    fn pay(&mut self, key: usize, way: Way, amount: u64) -> Option<u64> {
        if self.paid_elsewhere(key) {
            return Some(amount);
        }
        let bucket = &self.ways.buckets[way as usize];
        let held = &mut self.held[key];
        let (reservation, reserved) = held
            .paid
            .get_or_insert_with(|| (bucket.reserve(amount), amount));
        held.wake_at = bucket.deadline(reservation);
        held.wake_at.is_none().then_some(*reserved)
    }

    /// Whether held call `key` is paid for, and counted, by a datagram
    /// link rather than here.
    fn paid_elsewhere(&self, key: usize) -> bool {
        let held = &self.held[key];
        if !self.datagrams_linked() || held.kind != SocketKind::Datagram {
            return false;
        }
        // A call the kernel carries out goes where the command said: to
        // the link only from a socket connected to it.
        !matches!(held.call, Call::Coarse { .. })
            || rustix::net::getpeername(&held.socket).is_ok_and(|peer| peer.is_some())
    }

    /// Counts `bytes` passed `way` for held call `key`, unless its link
    /// counts them.
    fn count(&self, key: usize, way: Way, bytes: u64) {
        if !self.paid_elsewhere(key) {
            self.ways.passed[way as usize].add(bytes);
        }
    }

    /// Returns what held call `key` reserved beyond `used`.
    fn refund(&mut self, key: usize, way: Way, used: u64) {
        let bucket = &self.ways.buckets[way as usize];
        if let Some((mut reservation, amount)) = self.held[key].paid.take() {
            bucket.give_back(&mut reservation, amount.saturating_sub(used));
        }
    }

    /// The most bytes a stream call of `way` moves at once: one chunk.
    fn chunk(&self, way: Way) -> u64 {
        let bucket = &self.ways.buckets[way as usize];
        chunk_size(bucket.limit(), bucket.burst()) as u64
    }
}

/// The errno of `err`, EIO if it has none.
fn errno(err: &io::Error) -> i32 {
    err.raw_os_error().unwrap_or(libc::EIO)
}
