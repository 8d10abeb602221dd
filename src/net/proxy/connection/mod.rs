//! One proxied connection: a client, its server, and a [`Direction`] each
//! way that reads, pays, holds and writes.

use super::rules::{Luck, Pay, Plan, Rules, Terms, WayPlan};
use super::stream::Stream;
use super::trouble::Trouble;
use crate::bucket::Bucket;
use crate::chunk::chunk_size;
use crate::conditions::{Conditions, Watch};
use crate::duration::least;
use crate::faults::{ResetStruck, Way, drop_block};
use crate::slowlink::{Line, SlowLink};
use crate::throughput::Throughput;
use shape_bucket::{BucketCell, Clock, Damaged, Reservation, TokenBucket};
use std::io::{self, Read};
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl Side for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Stream::write(self, buf)
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        Stream::shutdown_write(self)
    }
}

/// Which end of a connection something happened at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Client,
    Server,
}

/// What ended a connection: the end that failed, and how.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) end: End,
    pub(super) err: io::Error,
}

/// One direction of a connection: bytes read from one side wait for their
/// tokens, then pass the faults asked for, then wait in the delay line for
/// their release time, then go out to the other side.
pub(super) struct Direction {
    /// The end read from and the end written to.
    ends: Ends,
    /// Which way the bytes go, for the faults and delay of that way.
    way: Way,
    /// The link as now: delay and jitter may change while running.
    link: SlowLink,
    line: Line,
    /// The faults of this direction, if its connection is one they affect.
    trouble: Option<Trouble>,
    /// Which change of the conditions this direction has taken.
    watch: Watch,
    /// Where what is read is counted, if anywhere.
    received: Option<Arc<AtomicU64>>,
    /// A chunk read whose tokens are reserved but not yet covered.
    unpaid: Option<(Vec<u8>, Reservation)>,
    /// A due chunk being written, and how much of it is out.
    sending: Option<(Vec<u8>, usize)>,
    /// Whether a byte was ever read, and ever written.
    read_any: bool,
    wrote_any: bool,
    /// Nothing more is to be read: the input ended, or was cut.
    ended: bool,
    /// An error met while a chunk gathered, after some of it came: it is
    /// the next read's, since the system reports it once (a reset, then
    /// the end of the stream), and lost it would turn a reset into an
    /// orderly end.
    met: Option<io::Error>,
    /// Nothing more is to be done: the other side's writing is shut, or
    /// the direction stalled and its input ended.
    done: bool,
}

/// The two ends of a direction: read from one, written to the other.
#[derive(Debug, Clone, Copy)]
struct Ends {
    from: End,
    to: End,
}

impl Ends {
    /// Up is the client's requests, down the server's replies.
    fn of(way: Way) -> Ends {
        match way {
            Way::Up => Ends {
                from: End::Client,
                to: End::Server,
            },
            Way::Down => Ends {
                from: End::Server,
                to: End::Client,
            },
        }
    }
}

/// What a direction's random choices are drawn from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seeds {
    pub(super) jitter: u64,
    pub(super) faults: u64,
}

/// Where a direction starts from.
pub(super) struct Setup<'a> {
    pub(super) link: &'a SlowLink,
    pub(super) conditions: &'a Conditions,
    pub(super) seeds: Seeds,
    /// Whether the faults are done to this connection.
    pub(super) affected: bool,
    /// What `--drop` loses at once.
    pub(super) block: usize,
    /// Where to count what is read, if anywhere.
    pub(super) received: Option<Arc<AtomicU64>>,
    pub(super) now: u64,
}

impl Direction {
    /// The direction that goes `way`.
    pub(super) fn new(way: Way, start: &Setup) -> Direction {
        let mut watch = Watch::default();
        let now = watch.now(start.conditions);
        let link = SlowLink {
            delay: now.delay,
            jitter: now.jitter,
            ..*start.link
        };
        let faults = now.faults(way);
        Direction {
            ends: Ends::of(way),
            way,
            link,
            line: link.line(start.seeds.jitter),
            trouble: start
                .affected
                .then(|| Trouble::new(faults, start.seeds.faults, start.block, start.now)),
            watch,
            received: start.received.clone(),
            unpaid: None,
            sending: None,
            read_any: false,
            wrote_any: false,
            ended: false,
            met: None,
            done: false,
        }
    }

    pub(super) fn done(&self) -> bool {
        self.done
    }

    /// What the faults did, if any that are counted were asked for.
    pub(super) fn tally(&self) -> Option<String> {
        self.trouble.as_ref().and_then(Trouble::tally)
    }

    /// Pays for the chunk that waits for tokens, if one does, from `new`
    /// instead of `old`.
    fn pay_from<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        old: &TokenBucket<C, S>,
        new: &TokenBucket<C, S>,
    ) {
        if let Some((chunk, paid)) = &mut self.unpaid {
            old.give_back(paid, chunk.len() as u64);
            *paid = new.reserve(chunk.len() as u64);
        }
    }

    /// Takes the conditions in force, if they changed.
    fn retune(&mut self, conditions: &Conditions, now: u64) {
        let Some(conditions) = self.watch.changed(conditions) else {
            return;
        };
        self.link.delay = conditions.delay;
        self.link.jitter = conditions.jitter;
        self.line.set_delay(conditions.delay, conditions.jitter);
        if let Some(trouble) = &mut self.trouble {
            trouble.retune(conditions.faults(self.way), now);
        }
    }

    /// Moves bytes from `from` to `to` until nothing more can move now:
    /// each side would block, or tokens, release times, pauses or buffer
    /// room are short. Returns when to step again if no event comes first:
    /// when tokens will be covered, a chunk is due or a fault strikes.
    pub(super) fn step<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        from: &mut impl Side,
        to: &mut impl Side,
        bucket: &TokenBucket<C, S>,
        conditions: &Conditions,
        passed: &Throughput,
        scratch: &mut [u8],
    ) -> Result<Option<u64>, Failure> {
        let Ends {
            from: from_end,
            to: to_end,
        } = self.ends;
        let at = |end| move |err| Failure { end, err };
        let now = bucket.clock().now();
        self.retune(conditions, now);
        if self.trouble.as_mut().is_some_and(|t| t.strike(now)) {
            return Err(at(from_end)(io::Error::other(ResetStruck)));
        }
        // The deadline comes from the same look at the bucket that found
        // the tokens short: asked again later, the tokens might be covered
        // by then, and nothing would come back for the chunk.
        let (tokens, paused) = loop {
            let (sent, paused) = self
                .send_due(to, bucket.clock().now(), passed)
                .map_err(at(to_end))?;
            let (paid, tokens) = self.settle(bucket).map_err(at(from_end))?;
            let read = self.read(from, bucket, scratch).map_err(at(from_end))?;
            if !(sent || paid || read) {
                break (tokens, paused);
            }
        };
        let strikes = self.trouble.as_ref().and_then(Trouble::deadline);
        if self.ended && self.unpaid.is_none() && self.sending.is_none() && self.line.is_empty() {
            return self.finish(to, bucket.clock().now()).map_err(at(to_end));
        }
        // While a write is blocked or a pause lasts, the next release
        // waits for writability or the pause's end.
        let release = self
            .sending
            .is_none()
            .then(|| self.line.next_release())
            .flatten();
        Ok(least(least(tokens, paused.or(release)), strikes))
    }

    /// Ends the direction once all its data is out: the other side's
    /// writing is shut when the held close (if any) is over, or left open
    /// if the direction stalled. Returns when to step again if the close
    /// is held.
    fn finish(&mut self, to: &mut impl Side, now: u64) -> io::Result<Option<u64>> {
        if self.done {
            return Ok(None);
        }
        if let Some(trouble) = &mut self.trouble {
            if trouble.stalled() {
                self.done = true;
                return Ok(None);
            }
            if let Err(at) = trouble.close_due(now) {
                return Ok(Some(at));
            }
        }
        to.shutdown_write()?;
        self.done = true;
        Ok(None)
    }

    /// Writes what is due at `now` until the output would block or a
    /// pause between slices begins. Returns whether anything went out,
    /// and when the pause ends if one began.
    fn send_due(
        &mut self,
        to: &mut impl Side,
        now: u64,
        forwarded: &Throughput,
    ) -> io::Result<(bool, Option<u64>)> {
        let mut progress = false;
        loop {
            if self.sending.is_none() {
                self.sending = self.line.pop_due(now).map(|chunk| (chunk, 0));
            }
            let Some((chunk, out)) = &mut self.sending else {
                return Ok((progress, None));
            };
            let due = chunk.len() - *out;
            let piece = match &mut self.trouble {
                Some(trouble) => match trouble.writable(due, now) {
                    Ok(piece) => piece,
                    Err(until) => return Ok((progress, Some(until))),
                },
                None => due,
            };
            match to.write(&chunk[*out..*out + piece]) {
                Ok(n) => {
                    *out += n;
                    self.wrote_any |= n > 0;
                    forwarded.add(n as u64);
                    progress = true;
                    if let Some(trouble) = &mut self.trouble {
                        trouble.wrote(n, now);
                    }
                    if *out == chunk.len() {
                        let (chunk, _) = self.sending.take().expect("just written from");
                        self.line.done_with(chunk);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((progress, None)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Puts the chunk read into the line once its tokens are covered, with
    /// the faults done to it. Returns whether it went in, and else when
    /// its tokens will be covered, if a chunk waits; fails if a fault
    /// resets the connection.
    fn settle<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        bucket: &TokenBucket<C, S>,
    ) -> io::Result<(bool, Option<u64>)> {
        let Some((_, paid)) = &self.unpaid else {
            return Ok((false, None));
        };
        if let Some(deadline) = bucket.deadline(paid) {
            return Ok((false, Some(deadline)));
        }
        if bucket.damaged() {
            // Not paid for after all: the bucket could not be read.
            return Err(io::Error::other(Damaged));
        }
        let (mut chunk, _) = self.unpaid.take().expect("checked above");
        if let Some(trouble) = &mut self.trouble {
            let (reset, cut) = trouble.admit(&mut chunk);
            if reset {
                return Err(io::Error::other(ResetStruck));
            }
            // Cut: what is left of the input is never read.
            self.ended |= cut;
        }
        match chunk.is_empty() {
            true => self.line.recycle(chunk),
            false => {
                self.line.push(chunk, bucket.clock().now());
            }
        }
        Ok((true, None))
    }

    /// Reads a chunk, if none waits for tokens and the buffer has room, and
    /// reserves its tokens; once stalled, what is read is thrown away
    /// unpaid. Returns whether anything was read.
    fn read<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        from: &mut impl Side,
        bucket: &TokenBucket<C, S>,
        scratch: &mut [u8],
    ) -> io::Result<bool> {
        if self.unpaid.is_some() || self.ended {
            return Ok(false);
        }
        let stalled = self.trouble.as_ref().is_some_and(Trouble::stalled);
        let (limit, burst) = bucket.limit_and_burst();
        let room = self
            .link
            .capacity(limit, burst)
            .saturating_sub(self.line.held());
        let want = match stalled {
            true => BUFFER,
            false => chunk_size(limit, burst)
                .min(self.link.max_chunk())
                .min(BUFFER)
                .min(usize::try_from(room).unwrap_or(usize::MAX)),
        };
        if want == 0 {
            return Ok(false);
        }
        // Read into the loop's one scratch buffer, and take a buffer of
        // the direction's own only for what came: an idle connection then
        // holds no buffer at all.
        let want = want.min(scratch.len());
        let scratch = &mut scratch[..want];
        if let Some(err) = self.met.take() {
            return Err(err);
        }
        loop {
            match from.read(scratch) {
                Ok(0) => {
                    self.ended = true;
                    return Ok(true);
                }
                Ok(_) if stalled => {
                    self.read_any = true;
                    return Ok(true);
                }
                Ok(n) => {
                    let (n, met) = fill(from, scratch, n);
                    self.met = met;
                    self.read_any = true;
                    if let Some(received) = &self.received {
                        received.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    let mut chunk = self.line.buffer(n);
                    chunk.copy_from_slice(&scratch[..n]);
                    let paid = bucket.reserve(n as u64);
                    self.unpaid = Some((chunk, paid));
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }
}

/// Reads on into `buffer`, of which `first` bytes are filled, until it is
/// full or nothing more is there, and returns how much is filled. A read
/// brings what the socket's receive buffer held, and buffers differ, while
/// connections on one bucket take a turn per chunk: chunks cut short by a
/// small buffer gave their connection less than its share (0.88 against
/// 1.2 of it). An end is met again at the next read; an error is
/// returned, to be reported there, since the system reports it once.
fn fill(from: &mut impl Read, buffer: &mut [u8], first: usize) -> (usize, Option<io::Error>) {
    let mut filled = first;
    while filled < buffer.len() {
        match from.read(&mut buffer[filled..]) {
            Ok(more) if more > 0 => filled += more,
            Ok(_) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                break;
            }
            Err(e) => return (filled, Some(e)),
        }
    }
    (filled, None)
}

/// A client, its server, both directions, and what shapes each.
pub(super) struct Connection {
    pub(super) client: Stream,
    pub(super) server: Stream,
    pub(super) up: Direction,
    pub(super) down: Direction,
    /// What each direction pays from and is held to, up then down.
    shaping: [Shaped; 2],
    /// Its draws of chance, for rules that strike some connections only.
    pub(super) luck: Luck,
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
}

/// What one direction pays from and is held to, and whether each is its
/// own (changed in place) or shared (replaced).
struct Shaped {
    bucket: Arc<Bucket>,
    own_bucket: bool,
    conditions: Arc<Conditions>,
    own_conditions: bool,
    passed: Arc<Throughput>,
}

impl Shaped {
    fn new(plan: WayPlan, passed: Arc<Throughput>) -> io::Result<Shaped> {
        let (bucket, own_bucket) = bucket_of(plan.pay)?;
        let (conditions, own_conditions) = conditions_of(plan.terms);
        Ok(Shaped {
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
        let stalled = direction.trouble.as_ref().is_some_and(Trouble::stalled);
        match plan.pay {
            Pay::Own { limit, burst } if self.own_bucket => {
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
/// whether it is its own.
fn bucket_of(pay: Pay) -> io::Result<(Arc<Bucket>, bool)> {
    Ok(match pay {
        Pay::Bucket(bucket) => (bucket, false),
        Pay::Own { limit, burst } => (
            Arc::new(crate::bucket::own(limit, burst).map_err(io::Error::other)?),
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
pub(super) struct Start<'a> {
    pub(super) client: Stream,
    pub(super) server: Stream,
    pub(super) plan: Plan,
    pub(super) rules: &'a dyn Rules,
    pub(super) luck: Luck,
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
    pub(super) fn new(start: Start) -> io::Result<Connection> {
        let [up_plan, down_plan] = start.plan.ways;
        let close_after = start.plan.close_after;
        let [passed_up, passed_down] = start.rules.passed();
        let shaping = [
            Shaped::new(up_plan, passed_up)?,
            Shaped::new(down_plan, passed_down)?,
        ];
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
                    block: drop_block(chunk_size(limit, burst)),
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
            luck: start.luck,
            route: start.route,
            upstream: start.upstream,
            upstream_at: start.upstream_at,
            own_end: None,
            looped: false,
            close_at: close_after
                .map(|after| start.now.saturating_add(crate::duration::nanos(after))),
            closing: false,
            wake_at: None,
            peer: start.peer,
        })
    }

    /// Takes `plan` at `now` while open: the rules of its route changed.
    /// If `unstalled_closes`, a stall lifted closes it.
    pub(super) fn take(&mut self, plan: Plan, now: u64, unstalled_closes: bool) -> io::Result<()> {
        let [up, down] = plan.ways;
        let lifted =
            self.shaping[0].take(up, &mut self.up)? | self.shaping[1].take(down, &mut self.down)?;
        self.closing |= lifted && unstalled_closes;
        self.close_at = match plan.close_after {
            None => None,
            Some(after) => self
                .close_at
                .or(Some(now.saturating_add(crate::duration::nanos(after)))),
        };
        Ok(())
    }

    /// Steps both directions at `now`, unless it is to close.
    pub(super) fn step(&mut self, scratch: &mut [u8], now: u64) -> Result<(), Failure> {
        self.closing |= self.close_at.is_some_and(|at| at <= now);
        if self.closing {
            return Ok(());
        }
        let [up, down] = &self.shaping;
        let up = self.up.step(
            &mut self.client,
            &mut self.server,
            &up.bucket,
            &up.conditions,
            &up.passed,
            scratch,
        )?;
        let down = self.down.step(
            &mut self.server,
            &mut self.client,
            &down.bucket,
            &down.conditions,
            &down.passed,
            scratch,
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

    /// True once a byte has passed to or from the server.
    pub(super) fn server_touched(&self) -> bool {
        self.up.wrote_any || self.down.read_any
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
mod tests {
    use super::*;

    /// Gives what it holds a piece at a time, then would block.
    struct Pieces(Vec<Vec<u8>>);

    impl Read for Pieces {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let piece = self.0.remove(0);
            let n = piece.len().min(buffer.len());
            buffer[..n].copy_from_slice(&piece[..n]);
            if n < piece.len() {
                self.0.insert(0, piece[n..].to_vec());
            }
            Ok(n)
        }
    }

    #[test]
    fn a_chunk_gathers_what_comes_in_pieces_up_to_its_size() {
        let mut buffer = [0; 100];
        let mut pieces = Pieces(vec![vec![2; 30], vec![3; 30], vec![4; 50]]);
        buffer[..30].fill(1);
        assert_eq!(fill(&mut pieces, &mut buffer, 30).0, 100);
        assert_eq!(&buffer[..90], [[1; 30], [2; 30], [3; 30]].concat());
        assert_eq!(pieces.0, [vec![4; 40]], "the rest waits for the next chunk");
        let mut dry = Pieces(Vec::new());
        assert_eq!(fill(&mut dry, &mut buffer, 7).0, 7, "nothing more there");
    }
}

#[cfg(test)]
mod on_a_fake_clock;
