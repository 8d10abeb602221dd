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
//! caller. Here, the loop; how a call is taken, `calls.rs`; what a held
//! call keeps and how it is paid for, `held.rs`; how each call moves
//! bytes, `moves.rs`; where sockets are placed, `placing.rs`.

mod calls;
mod connects;
mod copies;
mod datagrams;
mod ending;
mod held;
mod moves;
mod placing;
mod signals;

use super::Relay;
use super::kernel::{self};
use super::sockets::Sockets;
use super::waiting_port::WaitingPorts;
pub use datagrams::MakeNetem;
pub use ending::Exited;
use held::{HeldCall, Peeked, Progress};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use moves::read_exactly;
use placing::{is_ip_socket, net_namespace};
use shape_bucket::Clock;
use shape_impair::conditions::Conditions;
use shape_impair::faults::Way;
use shape_leaves::bucket::Bucket;
use shape_leaves::throughput::Throughput;
use shape_net::proxy::RelayLoop;
use signals::SIGNAL_LOOK;
use slab::Slab;
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
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
pub struct CommandWays {
    pub buckets: [Arc<Bucket>; 2],
    pub passed: [Arc<Throughput>; 2],
}

/// What the supervisor keeps of a link's relay: where it hands TCP
/// connections, and the link's conditions (a connect takes its round
/// trip).
struct Relaying {
    relay_loop: RelayLoop,
    conditions: Arc<Conditions>,
}

/// The loop and its state.
pub struct Supervisor<'a> {
    listener: OwnedFd,
    /// The command's parent, which says how it ended.
    reaper: kernel::Reaper,
    poll: Poll,
    events: Events,
    ways: &'a CommandWays,
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
    connects: Slab<connects::PendingConnect>,
    /// Where shape's own connections to loopback servers come from.
    own_ends: connects::OwnEnds,
    /// Where the command's connects wait for the link, with a relay.
    waiting_ports: Option<WaitingPorts>,
    /// Sockets (by inode) whose connect in progress shape refused, until
    /// the command asks their error.
    refused: connects::RefusedConnects,
    /// The links of the command's datagrams, with a relay.
    datagram_proxies: Option<datagrams::DatagramProxies>,
    /// When the copies of sockets were last looked over (where copies
    /// are kept).
    collected: u64,
}

impl<'a> Supervisor<'a> {
    /// A supervisor for the command below `reaper`, answering the calls of
    /// `listener`, paying from `ways`. Returns it and a waker to call when
    /// the buckets' settings change.
    pub fn new(
        listener: OwnedFd,
        reaper: kernel::Reaper,
        base: u32,
        ways: &'a CommandWays,
        relay: Option<Relay>,
        say: Box<dyn Fn(&str)>,
    ) -> io::Result<(Supervisor<'a>, Arc<Waker>)> {
        kernel::wake_on_one_cpu(listener.as_fd());
        let poll = Poll::new()?;
        let waker = watch(&poll, &listener, &reaper)?;
        wake_on_changes(ways, &waker)?;
        let (relay, datagram_proxies, waiting_ports) = keep_relay(relay, &waker)?;
        say_if_given_an_ip_socket(&*say, relay.is_some());
        Ok((
            Supervisor {
                listener,
                reaper,
                poll,
                events: Events::with_capacity(256),
                ways,
                sockets: Sockets::relayed_by(
                    waiting_ports
                        .as_ref()
                        .map(WaitingPorts::all)
                        .unwrap_or_default(),
                ),
                held: Slab::new(),
                scratch: Vec::new(),
                looks: signals::Looks::default(),
                base,
                say,
                said: HashSet::new(),
                own_net: net_namespace("self"),
                relay,
                datagram_proxies,
                connects: Slab::new(),
                own_ends: connects::OwnEnds::default(),
                waiting_ports,
                refused: connects::RefusedConnects::default(),
                collected: 0,
            },
            waker,
        ))
    }

    /// Answers calls until the command ends; fails if the loop cannot go
    /// on, or the link's relay failed.
    pub fn run(&mut self) -> io::Result<Exited> {
        loop {
            let timeout = self.timeout();
            match self.poll.poll(&mut self.events, timeout) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            }
            let (mut ready, mut connecting) = (Vec::new(), Vec::new());
            let (mut calls, mut changed, mut child) = (false, false, false);
            for event in &self.events {
                match event.token() {
                    LISTENER => calls = true,
                    CHANGED => changed = true,
                    CHILD => child = true,
                    Token(n) if n >= connects::CONNECTS => connecting.push(n - connects::CONNECTS),
                    Token(n) => ready.push(n - FIRST_CALL),
                }
            }
            if changed {
                // The relay wakes the loop too, should it fail.
                self.relay_failed()?;
            }
            if calls {
                self.take_calls()?;
            }
            // Deadlines are timed anew on a change, and whenever poll
            // timed out: a bucket changed elsewhere without a word (a
            // share's) is then followed within SIGNAL_LOOK.
            let timed_out = self.events.is_empty();
            for key in connecting {
                self.connect_event(key);
            }
            let now = self.now();
            self.finish_due_connects(now);
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
                return Ok(Exited {
                    code,
                    outlived: self.outlived(),
                });
            }
        }
    }

    /// Fails as the link's relay failed, if it has: the connections it
    /// carries cannot go on, and the run ends with them.
    fn relay_failed(&self) -> io::Result<()> {
        let relay_loop = self.relay.as_ref().map(|relay| &relay.relay_loop);
        match relay_loop.and_then(RelayLoop::failure) {
            Some(failed) => Err(failed.into()),
            None => Ok(()),
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
        let connects_due = self.connects.iter().filter_map(|(_, d)| d.due);
        let due = connects_due.chain(self.collect_at()).min();
        if self.held.is_empty() {
            return due.map(|t| Duration::from_nanos(t.saturating_sub(now)));
        }
        let first = self.held.iter().filter_map(|(_, h)| h.wake_at);
        let first = first.chain(due).min();
        let until = first.map(|t| Duration::from_nanos(t.saturating_sub(now)));
        Some(until.map_or(SIGNAL_LOOK, |d| d.min(SIGNAL_LOOK)))
    }
}

/// Registers with `poll` what wakes the loop: the calls waiting on
/// `listener`, the command's end (which `reaper` says), and the returned
/// waker.
fn watch(poll: &Poll, listener: &OwnedFd, reaper: &kernel::Reaper) -> io::Result<Arc<Waker>> {
    let registry = poll.registry();
    registry.register(
        &mut SourceFd(&listener.as_raw_fd()),
        LISTENER,
        Interest::READABLE,
    )?;
    // The reaper says when the command ended, with its status.
    registry.register(
        &mut SourceFd(&reaper.said().as_raw_fd()),
        CHILD,
        Interest::READABLE,
    )?;
    Ok(Arc::new(Waker::new(registry, CHANGED)?))
}

/// Wakes the loop through `waker` whenever the settings of a bucket of
/// `ways` change. A share's bucket changes in other processes too (a
/// fleet's with each lease): a thread asleep on each bucket's generation
/// wakes the loop, which times its held calls anew.
fn wake_on_changes(ways: &CommandWays, waker: &Arc<Waker>) -> io::Result<()> {
    for (at, bucket) in ways.buckets.iter().enumerate() {
        if ways.buckets[..at].iter().any(|b| Arc::ptr_eq(b, bucket)) {
            continue;
        }
        let waker = waker.clone();
        shape_leaves::bucket::watch_for_changes(bucket.clone(), move || {
            let _ = waker.wake();
        })?;
    }
    Ok(())
}

/// What the supervisor keeps of a link's `relay`, if there is one: the
/// relay (which wakes the loop through `waker` should it fail), the links
/// of the command's datagrams, and where its connects wait for the link.
fn keep_relay(
    relay: Option<Relay>,
    waker: &Arc<Waker>,
) -> io::Result<(
    Option<Relaying>,
    Option<datagrams::DatagramProxies>,
    Option<WaitingPorts>,
)> {
    let Some(Relay {
        relay_loop,
        conditions,
        datagrams,
        flow_ends,
    }) = relay
    else {
        return Ok((None, None, None));
    };
    let waker = waker.clone();
    relay_loop.on_failure(move || {
        let _ = waker.wake();
    });
    Ok((
        Some(Relaying {
            relay_loop,
            conditions,
        }),
        Some(datagrams::DatagramProxies::new(datagrams, flow_ends)),
        Some(WaitingPorts::open()?),
    ))
}

/// Says so if the command was given an IP socket as its standard input,
/// output or error: shape did not make it, and does not shape it.
fn say_if_given_an_ip_socket(say: &dyn Fn(&str), relayed: bool) {
    let inherited = [
        rustix::stdio::stdin(),
        rustix::stdio::stdout(),
        rustix::stdio::stderr(),
    ]
    .into_iter()
    .position(is_ip_socket);
    if let Some(fd) = inherited {
        say(&format!(
            "shape: the command's descriptor {fd} is an IP socket it was given: {}",
            placing::low_socket(relayed)
        ));
    }
}

/// The errno of `err`, EIO if it has none.
fn errno(err: &io::Error) -> i32 {
    err.raw_os_error().unwrap_or(libc::EIO)
}
