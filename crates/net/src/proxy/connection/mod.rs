//! One proxied connection: a client, its server, and a [`Direction`] each
//! way that reads, pays, holds and writes.

use super::direction_faults::DirectionFaults;
use super::handoff::{Handed, Handoff};
use super::http_gate::HttpGate;
use super::rules::{ConnectionShaping, Pay, RuleDraws, Rules, Terms, WayPlan};
use super::stream::Stream;
use shape_bucket::{BucketCell, Clock, Damaged, Reservation, TokenBucket};
use shape_impair::conditions::{Conditions, Watch};
use shape_impair::faults::{ResetStruck, Way, drop_block};
use shape_impair::slowlink::{Line, SlowLink};
use shape_leaves::bucket::Bucket;
use shape_leaves::chunk::proxy_chunk_size;
use shape_leaves::duration::least;
use shape_leaves::throughput::Throughput;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

mod direction;
mod piped;

pub(super) use direction::{Direction, HeldTo, Piece, Seeds, Setup};
use piped::Pipes;

/// The largest chunk a direction reads at once: the size of the event
/// loop's scratch buffer.
pub(super) const BUFFER: usize = 64 * 1024;
/// One side of a connection as a direction reads and writes it: a socket
/// of the event loop, or bytes in memory in the tests, which step a
/// direction on a fake clock.
pub(super) trait Side: Read {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Shuts the writing half: the peer reads an end.
    fn shutdown_write(&mut self) -> io::Result<()>;
    /// True if bytes may be spliced from and to it: a socket.
    fn splices(&self) -> bool {
        false
    }
    /// Splices what one call brings, up to `want` bytes, from it into
    /// `pipes` (see [`Pipes::splice_in`]).
    fn splice_into(&mut self, _pipes: &mut Pipes, _want: usize) -> io::Result<Option<usize>> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Splices up to `len` bytes from the front of `pipes` into it.
    fn splice_from(&mut self, _pipes: &mut Pipes, _len: usize) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

impl Side for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Stream::write(self, buf)
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        Stream::shutdown_write(self)
    }

    fn splices(&self) -> bool {
        true
    }

    fn splice_into(&mut self, pipes: &mut Pipes, want: usize) -> io::Result<Option<usize>> {
        self.read_with(|fd| pipes.splice_in(fd, want))
    }

    fn splice_from(&mut self, pipes: &mut Pipes, len: usize) -> io::Result<usize> {
        self.write_with(|fd| pipes.drain_to(fd, len))
    }
}

/// Which end of a connection something happened at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Client,
    Server,
}

/// The error of a connection an HTTP rule reset (`--http-reset`).
#[derive(Debug)]
pub(super) struct ResetByRule;

impl std::fmt::Display for ResetByRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("reset, as --http-reset asked")
    }
}

impl std::error::Error for ResetByRule {}

impl ResetByRule {
    /// Whether `err` is one.
    pub(super) fn is(err: &io::Error) -> bool {
        err.get_ref().is_some_and(|inner| inner.is::<ResetByRule>())
    }
}

/// What ended a connection: the end that failed, and how.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) end: End,
    pub(super) err: io::Error,
}

/// A client, its server, both directions, and what shapes each.
pub(super) struct Connection {
    pub(super) client: Stream,
    pub(super) server: Stream,
    pub(super) up: Direction,
    pub(super) down: Direction,
    /// What each direction pays from and is held to, up then down.
    shaping: [Bounds; 2],
    /// Its draws of chance, for rules that strike some connections only.
    pub(super) draws: RuleDraws,
    /// Its HTTP exchange, if its route has an HTTP rule.
    http: Option<HttpGate>,
    /// The route it came in on.
    pub(super) route: usize,
    /// The addresses its server was found at, tried in turn until one
    /// answers, and which of them its server is.
    pub(super) upstream: Arc<[SocketAddr]>,
    pub(super) upstream_at: usize,
    /// Its server socket's own address (TCP), which a client of this
    /// very loop would come from if the route leads back to it.
    pub(super) own_end: Option<SocketAddr>,
    /// Whether its client is one of this loop's own server sockets: a
    /// route that leads back to the loop.
    pub(super) looped: bool,
    /// When its plan closes it, if it does.
    close_at: Option<u64>,
    /// Whether it is to be closed now.
    closing: bool,
    pub(super) wake_at: Option<u64>,
    /// Who it is, for messages: `connection from 127.0.0.1:41234`.
    pub(super) peer: String,
    /// When it was accepted: where its link's round trip starts.
    accepted_at: u64,
    /// A failure to reach its server, held until the link's round trip
    /// has passed (see [`Connection::hold_until_answered`]).
    held: Option<(u64, Failure)>,
}

/// What one direction pays from and is held to, and whether each is its
/// own (changed in place) or shared (replaced).
struct Bounds {
    bucket: Arc<Bucket>,
    own_bucket: bool,
    conditions: Arc<Conditions>,
    own_conditions: bool,
    passed: Arc<Throughput>,
}

impl Bounds {
    fn new(plan: WayPlan, passed: Arc<Throughput>) -> io::Result<Bounds> {
        let (bucket, own_bucket) = bucket_of(plan.pay)?;
        let (conditions, own_conditions) = conditions_of(plan.terms);
        Ok(Bounds {
            bucket,
            own_bucket,
            conditions,
            own_conditions,
            passed,
        })
    }

    /// Takes `plan` while `direction` is under way: an own bucket or own
    /// conditions change in place, others are replaced, and a chunk that
    /// waits for tokens is paid for again from the new bucket. Returns
    /// whether a stall was lifted.
    fn take(&mut self, plan: WayPlan, direction: &mut Direction) -> io::Result<bool> {
        let stalled = direction
            .direction_faults
            .as_ref()
            .is_some_and(DirectionFaults::stalled);
        match plan.pay {
            // A limit where there was none starts afresh, empty (see
            // `bucket_of`); a limit changed keeps its tokens.
            Pay::Own { limit, burst }
                if self.own_bucket && self.bucket.limit() != shape_bucket::Limit::Unlimited =>
            {
                self.bucket.set(limit, burst).map_err(io::Error::other)?
            }
            Pay::Bucket(bucket) if Arc::ptr_eq(&bucket, &self.bucket) => {}
            pay => {
                let (bucket, own) = bucket_of(pay)?;
                direction.pay_from(&self.bucket, &bucket);
                (self.bucket, self.own_bucket) = (bucket, own);
            }
        }
        match plan.terms {
            Terms::Own(now) if self.own_conditions => self.conditions.set(*now),
            Terms::Shared(conditions) if Arc::ptr_eq(&conditions, &self.conditions) => {}
            terms => {
                (self.conditions, self.own_conditions) = conditions_of(terms);
                direction.watch = Watch::default();
            }
        }
        let lifted = self.conditions.now().faults[direction.way as usize]
            .stall_after
            .is_none();
        Ok(stalled && lifted)
    }
}

/// The bucket `pay` names, or a new one of the connection's own, and
/// whether it is its own. A bucket of its own (a bandwidth toxic's)
/// starts empty, as toxiproxy's bandwidth waits out a chunk's time before
/// it passes it on: its burst is room to keep pace, not a head start.
fn bucket_of(pay: Pay) -> io::Result<(Arc<Bucket>, bool)> {
    Ok(match pay {
        Pay::Bucket(bucket) => (bucket, false),
        Pay::Own { limit, burst } => (
            Arc::new(shape_leaves::bucket::own_empty(limit, burst).map_err(io::Error::other)?),
            true,
        ),
    })
}

/// The conditions `terms` names, or new ones of the connection's own, and
/// whether they are its own.
fn conditions_of(terms: Terms) -> (Arc<Conditions>, bool) {
    match terms {
        Terms::Shared(conditions) => (conditions, false),
        Terms::Own(now) => (Arc::new(Conditions::new(*now)), true),
    }
}

/// How a connection starts out.
pub(super) struct Opening<'a> {
    pub(super) client: Stream,
    pub(super) server: Stream,
    pub(super) plan: ConnectionShaping,
    pub(super) rules: &'a dyn Rules,
    pub(super) draws: RuleDraws,
    pub(super) seeds: [Seeds; 2],
    /// Whether the faults are done to it.
    pub(super) affected: bool,
    pub(super) route: usize,
    pub(super) upstream: Arc<[SocketAddr]>,
    pub(super) upstream_at: usize,
    pub(super) peer: String,
    pub(super) now: u64,
}

impl Connection {
    /// A connection shaped by `start.plan`.
    pub(super) fn new(start: Opening) -> io::Result<Connection> {
        let [up_plan, down_plan] = start.plan.ways;
        let close_after = start.plan.close_after;
        let [passed_up, passed_down] = start.rules.passed();
        let shaping = [
            Bounds::new(up_plan, passed_up)?,
            Bounds::new(down_plan, passed_down)?,
        ];
        let http = (start.rules.http()).map(|rules| rules.gate(start.client.is_tcp()));
        let link = start.rules.link();
        let received = start.rules.received();
        let direction = |way: Way| {
            let shaped = &shaping[way as usize];
            let (limit, burst) = shaped.bucket.limit_and_burst();
            Direction::new(
                way,
                &Setup {
                    link: &link,
                    conditions: &shaped.conditions,
                    seeds: start.seeds[way as usize],
                    affected: start.affected,
                    // What --drop loses at once, from the rate of the
                    // moment the connection began.
                    block: drop_block(proxy_chunk_size(limit, burst, 0)),
                    received: received.as_ref().map(|r| r[way as usize].clone()),
                    now: start.now,
                },
            )
        };
        Ok(Connection {
            up: direction(Way::Up),
            down: direction(Way::Down),
            client: start.client,
            server: start.server,
            shaping,
            draws: start.draws,
            http,
            route: start.route,
            upstream: start.upstream,
            upstream_at: start.upstream_at,
            own_end: None,
            looped: false,
            close_at: close_after.map(|after| {
                start
                    .now
                    .saturating_add(shape_leaves::duration::nanos(after))
            }),
            closing: false,
            wake_at: None,
            peer: start.peer,
            accepted_at: start.now,
            held: None,
        })
    }

    /// Takes `plan` at `now` while open: the rules of its route changed.
    /// If `unstalled_closes`, a stall lifted closes it.
    pub(super) fn take(
        &mut self,
        plan: ConnectionShaping,
        now: u64,
        unstalled_closes: bool,
    ) -> io::Result<()> {
        let [up, down] = plan.ways;
        let lifted =
            self.shaping[0].take(up, &mut self.up)? | self.shaping[1].take(down, &mut self.down)?;
        self.closing |= lifted && unstalled_closes;
        self.close_at = match plan.close_after {
            None => None,
            Some(after) => self.close_at.or(Some(
                now.saturating_add(shape_leaves::duration::nanos(after)),
            )),
        };
        Ok(())
    }

    /// Steps both directions at `now`, unless it is to close, while its
    /// proxy has `busy` directions with bytes on their way (the more, the
    /// larger their chunks).
    pub(super) fn step(
        &mut self,
        scratch: &mut [u8],
        now: u64,
        busy: usize,
    ) -> Result<(), Failure> {
        if let Some((until, _)) = &self.held {
            if now < *until {
                self.wake_at = Some(*until);
                return Ok(());
            }
            let (_, failure) = self.held.take().expect("held, just seen");
            return Err(failure);
        }
        self.closing |= self.close_at.is_some_and(|at| at <= now);
        if self.closing {
            return Ok(());
        }
        self.up.busy_in_proxy = busy;
        self.down.busy_in_proxy = busy;
        let [up, down] = &self.shaping;
        let up = self.up.step(
            &mut self.client,
            &mut self.server,
            HeldTo {
                bucket: &up.bucket,
                conditions: &up.conditions,
                passed: &up.passed,
            },
            scratch,
            self.http.as_mut(),
        )?;
        if self.handing_over() {
            return Ok(());
        }
        let down = self.down.step(
            &mut self.server,
            &mut self.client,
            HeldTo {
                bucket: &down.bucket,
                conditions: &down.conditions,
                passed: &down.passed,
            },
            scratch,
            self.http.as_mut(),
        )?;
        self.wake_at = least(least(up, down), self.close_at);
        Ok(())
    }

    /// What the faults did to each direction, if any that are counted
    /// were asked for: `down: corrupted 5 bytes`.
    pub(super) fn tally(&self) -> Option<String> {
        let said: Vec<String> = [(&self.up, Way::Up), (&self.down, Way::Down)]
            .into_iter()
            .filter_map(|(direction, way)| {
                direction
                    .tally()
                    .map(|said| format!("{}: {said}", way.name()))
            })
            .collect();
        (!said.is_empty()).then(|| said.join("; "))
    }

    /// Why it is not followed as HTTP, if it is the first of its proxy's
    /// connections that is not.
    pub(super) fn first_opaque(&self) -> Option<String> {
        self.http.as_ref().and_then(HttpGate::first_opaque)
    }

    /// True once its client was found to speak HTTP/2, to a route that
    /// hands such connections over.
    pub(super) fn handing_over(&self) -> bool {
        self.up.handed.is_some()
    }

    /// Hands its client, which spoke HTTP/2, to the relay: the relay's
    /// end of a new socket pair takes the client's place, and from now on
    /// the connection carries what the relay and the server say to each
    /// other, untouched by HTTP rules, what the server said first before
    /// the rest. Its client must be out of the loop's poll, and the new
    /// one put in. Fails if the client is not a TCP socket, or no pair
    /// can be made (then it is to be closed).
    pub(super) fn hand_over(&mut self, now: u64) -> io::Result<(Arc<dyn Handoff>, Handed)> {
        let refused = || io::Error::other("not to be handed over");
        let from_client = self.up.handed.take().ok_or_else(refused)?;
        let (relay, held) = self
            .http
            .take()
            .and_then(|mut gate| gate.http2())
            .ok_or_else(refused)?;
        if !self.client.is_tcp() {
            return Err(refused());
        }
        let (ours, relays) = std::os::unix::net::UnixStream::pair()?;
        ours.set_nonblocking(true)?;
        relays.set_nonblocking(true)?;
        let ours = Stream::unix(mio::net::UnixStream::from_std(ours));
        let client = std::mem::replace(&mut self.client, ours);
        let client = client.into_std_tcp().map_err(|_| refused())?;
        self.up.carry_on();
        self.down.pass_on(held, now);
        let handed = Handed {
            client,
            from_client,
            server: relays,
            peer: self.peer.clone(),
        };
        Ok((relay, handed))
    }

    /// True once a byte has passed to or from the server.
    /// Holds `failure` to reach the server until its answer would have
    /// crossed the link: a refusal comes back a round trip (the delay up
    /// and down) after the client's SYN left, as on a real link, not at
    /// once. The client's own connect cannot wait (the kernel completed
    /// it when shape accepted): its reset can. Returns `failure` back if
    /// the round trip has passed by `now`.
    pub(super) fn hold_until_answered(&mut self, failure: Failure, now: u64) -> Option<Failure> {
        let way = |way: Way| {
            let conditions = &self.shaping[way as usize].conditions;
            shape_leaves::duration::nanos(conditions.now().delay(way))
        };
        let answered = self
            .accepted_at
            .saturating_add(way(Way::Up))
            .saturating_add(way(Way::Down));
        if now >= answered {
            return Some(failure);
        }
        self.held = Some((answered, failure));
        self.wake_at = Some(answered);
        None
    }

    pub(super) fn server_touched(&self) -> bool {
        self.up.wrote_any || self.down.read_any
    }

    /// How many of its directions have bytes on their way.
    pub(in crate::proxy) fn busy(&self) -> usize {
        usize::from(!self.up.idle()) + usize::from(!self.down.idle())
    }

    /// True once both directions are done, or its plan closes it.
    pub(super) fn done(&self) -> bool {
        self.closing || (self.up.done() && self.down.done())
    }

    /// Makes closing both sides a reset.
    pub(super) fn reset_on_close(&self) {
        self.client.reset_on_close();
        self.server.reset_on_close();
    }
}

#[cfg(test)]
mod on_a_fake_clock;
