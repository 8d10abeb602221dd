//! One direction of a connection: what it reads, pays for, holds in its
//! delay line and writes, with the faults asked of it, stepped by the
//! event loop (or on a fake clock in the tests) and never blocking.
//!
//! Between two sockets, bytes that no fault reads or changes are spliced
//! through pipes of the direction's own ([`Pipes`]) and never enter user
//! memory; the line then holds only their count. Bytes that a fault
//! touches (`--drop`, `--corrupt`), or that a pipe cannot take, are read
//! into memory; both kinds keep their order in the one line. How a chunk
//! is taken in, read or spliced, is [`intake`]'s; how what is due goes
//! out, [`sending`]'s.

use super::piped::Piped;
use super::*;
use crate::deadlines::paced;
use crate::proxy::http_gate::HttpGate;
use shape_impair::conditions::InForce;
use shape_impair::slowlink::{Footprint, Spares};
use shape_leaves::duration::nanos;

mod intake;
mod sending;

/// A chunk on its way: its bytes, or a count of bytes in the pipes; or
/// where an HTTP rule resets the connection.
pub(in crate::proxy) enum Chunk {
    Bytes(Vec<u8>),
    Piped(Piped),
    Reset,
}

/// What an HTTP gate makes of a chunk taken in, in order (see
/// [`HttpGate::take`]); none is made without the `http` feature.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(in crate::proxy) enum Piece {
    /// Bytes to pass on.
    Bytes(Vec<u8>),
    /// What follows goes no sooner than this moment.
    Hold(u64),
    /// The connection is reset here, once what came before is out.
    Reset,
    /// Nothing more passes this way once what came before is out.
    End,
    /// The client speaks HTTP/2: the connection is handed over, with
    /// these bytes it sent.
    Handoff(Vec<u8>),
}

impl Footprint for Chunk {
    fn footprint(&self) -> u64 {
        match self {
            Chunk::Bytes(bytes) => bytes.footprint(),
            // Kernel memory, counted all the same against the buffer.
            Chunk::Piped(piped) => (piped.forward + piped.discard) as u64,
            Chunk::Reset => 0,
        }
    }
}

impl Chunk {
    /// The bytes it passes on.
    fn len(&self) -> usize {
        match self {
            Chunk::Bytes(bytes) => bytes.len(),
            Chunk::Piped(piped) => piped.forward,
            Chunk::Reset => 0,
        }
    }
}

/// One direction of a connection: bytes read from one side wait for their
/// tokens, then pass the faults asked for, then wait in the delay line for
/// their release time, then go out to the other side.
pub(in crate::proxy) struct Direction {
    /// The end read from and the end written to.
    ends: Ends,
    /// Which way the bytes go, for the faults and delay of that way.
    pub(super) way: Way,
    /// The link as now: delay and jitter may change while running.
    pub(super) link: SlowLink,
    line: Line<Chunk>,
    /// Buffers for chunks read into memory.
    spares: Spares,
    /// Where spliced chunks wait.
    pipes: Pipes,
    /// The faults of this direction, if its connection is one they affect.
    pub(super) direction_faults: Option<DirectionFaults>,
    /// Which change of the conditions this direction has taken.
    pub(super) watch: Watch,
    /// Where what is read is counted, if anywhere.
    received: Option<Arc<AtomicU64>>,
    /// A chunk read whose tokens are reserved but not yet covered.
    unpaid: Option<(Chunk, Reservation)>,
    /// What was read after it, unpaid, to be the next chunks.
    ahead: intake::ReadAhead,
    /// Whether the chunk read got all it asked for: more of the stream
    /// waited behind it (segments in flight, for `--loss`).
    more_behind: bool,
    /// How many directions of its proxy have bytes on their way, which
    /// sizes its chunks ([`proxy_chunk_size`]).
    pub(super) busy_in_proxy: usize,
    /// Chunks read into memory, then chunks spliced: for the tests.
    #[cfg(test)]
    pub(super) chunks: [u64; 2],
    /// A due chunk being written, and how much of it is out.
    sending: Option<(Chunk, usize)>,
    /// Whether a byte was ever read, and ever written.
    pub(super) read_any: bool,
    pub(super) wrote_any: bool,
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
    /// What the client sent, once it was found to speak HTTP/2: the
    /// connection is to be handed over.
    pub(in crate::proxy) handed: Option<Vec<u8>>,
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

/// What a direction is held to in a step: the bucket it pays from, the
/// conditions in force, and where what it passes on is counted.
pub(in crate::proxy) struct HeldTo<'a, C: Clock, S: Deref<Target = BucketCell>> {
    pub(in crate::proxy) bucket: &'a TokenBucket<C, S>,
    pub(in crate::proxy) conditions: &'a Conditions,
    pub(in crate::proxy) passed: &'a Throughput,
}

/// What a direction's random choices are drawn from.
#[derive(Debug, Clone, Copy)]
pub(in crate::proxy) struct Seeds {
    pub(in crate::proxy) jitter: u64,
    pub(in crate::proxy) faults: u64,
}

/// Where a direction starts from.
pub(in crate::proxy) struct Setup<'a> {
    pub(in crate::proxy) link: &'a SlowLink,
    pub(in crate::proxy) conditions: &'a Conditions,
    pub(in crate::proxy) seeds: Seeds,
    /// Whether the faults are done to this connection.
    pub(in crate::proxy) affected: bool,
    /// What `--drop` loses at once.
    pub(in crate::proxy) block: usize,
    /// Where to count what is read, if anywhere.
    pub(in crate::proxy) received: Option<Arc<AtomicU64>>,
    pub(in crate::proxy) now: u64,
}

/// The link's round trip in force, in ns: its delay each way.
fn round_trip(in_force: &InForce) -> u64 {
    nanos(in_force.delay(Way::Up) + in_force.delay(Way::Down))
}

impl Direction {
    /// The direction that goes `way`.
    pub(in crate::proxy) fn new(way: Way, start: &Setup) -> Direction {
        let mut watch = Watch::default();
        let now = watch.now(start.conditions);
        let link = SlowLink {
            delay: now.delay(way),
            jitter: now.jitter,
            ..*start.link
        };
        let faults = now.faults(way);
        Direction {
            ends: Ends::of(way),
            way,
            link,
            line: link.line(start.seeds.jitter),
            spares: Spares::default(),
            pipes: Pipes::default(),
            direction_faults: start.affected.then(|| {
                let mut direction_faults =
                    DirectionFaults::new(faults, start.seeds.faults, start.block, start.now);
                direction_faults.set_link(nanos(now.delay(way)), round_trip(&now));
                direction_faults
            }),
            watch,
            received: start.received.clone(),
            unpaid: None,
            ahead: intake::ReadAhead::default(),
            more_behind: false,
            busy_in_proxy: 0,
            #[cfg(test)]
            chunks: [0; 2],
            sending: None,
            read_any: false,
            wrote_any: false,
            ended: false,
            met: None,
            done: false,
            handed: None,
        }
    }

    pub(in crate::proxy) fn done(&self) -> bool {
        self.done
    }

    /// True if nothing waits in it: no chunk for tokens, in the line or
    /// being written.
    pub(super) fn idle(&self) -> bool {
        self.unpaid.is_none()
            && self.ahead.is_empty()
            && self.sending.is_none()
            && self.line.is_empty()
    }

    /// How many pipes it holds now.
    #[cfg(test)]
    pub(super) fn pipes(&self) -> usize {
        self.pipes.pipes()
    }

    /// What the faults did, if any that are counted were asked for.
    pub(in crate::proxy) fn tally(&self) -> Option<String> {
        self.direction_faults
            .as_ref()
            .and_then(DirectionFaults::tally)
    }

    /// Pays for the chunk that waits for tokens, if one does, from `new`
    /// instead of `old`.
    pub(super) fn pay_from<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        old: &TokenBucket<C, S>,
        new: &TokenBucket<C, S>,
    ) {
        if let Some((chunk, paid)) = &mut self.unpaid {
            let len = chunk.len() as u64;
            old.give_back(paid, len);
            *paid = new.reserve(len);
        }
    }

    /// Takes the conditions in force, if they changed.
    fn retune(&mut self, conditions: &Conditions, now: u64) {
        let Some(conditions) = self.watch.changed(conditions) else {
            return;
        };
        self.link.delay = conditions.delay(self.way);
        self.link.jitter = conditions.jitter;
        self.line.set_delay(self.link.delay, conditions.jitter);
        if let Some(direction_faults) = &mut self.direction_faults {
            direction_faults.retune(conditions.faults(self.way), now);
            direction_faults.set_link(nanos(self.link.delay), round_trip(&conditions));
        }
    }

    /// Moves bytes from `from` to `to` until nothing more can move now:
    /// each side would block, or tokens, release times, pauses or buffer
    /// room are short. Returns when to step again if no event comes first:
    /// when tokens will be covered, a chunk is due or a fault strikes.
    pub(in crate::proxy) fn step<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        from: &mut impl Side,
        to: &mut impl Side,
        held_to: HeldTo<'_, C, S>,
        scratch: &mut [u8],
        mut gate: Option<&mut HttpGate>,
    ) -> Result<Option<u64>, Failure> {
        let HeldTo {
            bucket,
            conditions,
            passed,
        } = held_to;
        let Ends {
            from: from_end,
            to: to_end,
        } = self.ends;
        let at = |end| move |err| Failure { end, err };
        let now = bucket.clock().now();
        self.retune(conditions, now);
        if self
            .direction_faults
            .as_mut()
            .is_some_and(|t| t.strike(now))
        {
            return Err(at(from_end)(io::Error::other(ResetStruck)));
        }
        // The deadline comes from the same look at the bucket that found
        // the tokens short: asked again later, the tokens might be covered
        // by then, and nothing would come back for the chunk.
        let (tokens, paused) = loop {
            let (sent, paused) = self
                .send_due(to, bucket.clock().now(), passed, scratch)
                .map_err(at(to_end))?;
            let (paid, tokens) = self
                .settle(bucket, gate.as_deref_mut())
                .map_err(at(from_end))?;
            let answered = match gate.as_deref_mut() {
                Some(gate) => self.take_due(gate, bucket.clock().now()),
                None => false,
            };
            let read = self
                .read(from, to.splices(), bucket, scratch, gate.as_deref_mut())
                .map_err(at(from_end))?;
            if !(sent || paid || answered || read) {
                break (tokens, paused);
            }
        };
        let direction_faults = self
            .direction_faults
            .as_ref()
            .and_then(DirectionFaults::deadline);
        if self.ended && self.idle() {
            return self.finish(to, bucket.clock().now()).map_err(at(to_end));
        }
        // While a write is blocked or a pause lasts, the next release
        // waits for writability or the pause's end.
        let release = self
            .sending
            .is_none()
            .then(|| self.line.next_release())
            .flatten();
        let tokens = tokens.map(|at| paced(at, self.busy_in_proxy));
        Ok(least(least(tokens, paused.or(release)), direction_faults))
    }

    /// Puts the chunk read into the line once its tokens are covered, with
    /// the faults done to it. Returns whether it went in, and else when
    /// its tokens will be covered, if a chunk waits; fails if a fault
    /// resets the connection.
    fn settle<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        bucket: &TokenBucket<C, S>,
        gate: Option<&mut HttpGate>,
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
        let (chunk, _) = self.unpaid.take().expect("checked above");
        #[cfg(test)]
        {
            self.chunks[usize::from(matches!(chunk, Chunk::Piped(_)))] += 1;
        }
        let (chunk, reset) = self.admit(chunk);
        if reset {
            return Err(io::Error::other(ResetStruck));
        }
        let now = bucket.clock().now();
        // A lost segment's retransmission holds it and what follows.
        let not_before = match &mut self.direction_faults {
            Some(direction_faults) => direction_faults.earliest(chunk.len(), now, self.more_behind),
            None => None,
        };
        match (chunk, gate) {
            (Chunk::Bytes(bytes), Some(gate)) if !bytes.is_empty() => {
                let pieces = gate.take(self.way, bytes, now);
                self.put(pieces, now, not_before);
            }
            (chunk, _) => self.push(chunk, now, not_before),
        }
        Ok((true, None))
    }

    /// Puts `chunk`, paid for at `now`, in the line, due no sooner than
    /// `not_before`.
    fn push(&mut self, chunk: Chunk, now: u64, not_before: Option<u64>) {
        match chunk {
            Chunk::Bytes(bytes) if bytes.is_empty() => self.spares.recycle(bytes),
            // A short read into a large buffer holds its bytes only.
            Chunk::Bytes(bytes) => {
                let bytes = self.spares.fitted(bytes);
                self.line
                    .push_not_before(Chunk::Bytes(bytes), now, not_before);
            }
            // Spliced bytes, or a reset in its turn.
            other => {
                self.line.push_not_before(other, now, not_before);
            }
        }
    }

    /// Puts what an HTTP gate made of a chunk in the line, in order.
    fn put(&mut self, pieces: Vec<Piece>, now: u64, mut not_before: Option<u64>) {
        for piece in pieces {
            match piece {
                Piece::Bytes(bytes) => self.push(Chunk::Bytes(bytes), now, not_before),
                Piece::Hold(until) => not_before = not_before.max(Some(until)),
                Piece::Reset => self.push(Chunk::Reset, now, not_before),
                Piece::End => self.ended = true,
                Piece::Handoff(bytes) => {
                    // Nothing more is read or written here: the relay
                    // carries on from these bytes.
                    self.handed = Some(bytes);
                    (self.ended, self.done) = (true, true);
                }
            }
        }
    }

    /// Carries on after its connection's client was handed over: the
    /// relay now speaks in its place.
    pub(in crate::proxy) fn carry_on(&mut self) {
        (self.handed, self.ended, self.done) = (None, false, false);
    }

    /// Passes `bytes` on, as if read and paid for at `now`: what the
    /// server said before its client was handed over.
    pub(in crate::proxy) fn pass_on(&mut self, bytes: Vec<u8>, now: u64) {
        self.put(vec![Piece::Bytes(bytes)], now, None);
    }

    /// Puts the answers of shape's whose turn has come in the line, once
    /// nothing waits for tokens before them, or what the gate kept once
    /// the input ended. Returns whether anything went in.
    fn take_due(&mut self, gate: &mut HttpGate, now: u64) -> bool {
        if self.unpaid.is_some() {
            return false;
        }
        // Once the input ended, what the gate kept to frame is all there
        // will be.
        let mut pieces = match self.ended {
            true => gate.flush(self.way),
            false => Vec::new(),
        };
        if self.way == Way::Down {
            pieces.extend(gate.due());
        }
        let any = !pieces.is_empty();
        self.put(pieces, now, None);
        any
    }

    /// The faults done to a chunk paid for: what of it passes, and whether
    /// the connection is to be reset. A cut ends the reading: what is left
    /// of the input is never read.
    fn admit(&mut self, chunk: Chunk) -> (Chunk, bool) {
        let Some(direction_faults) = &mut self.direction_faults else {
            return (chunk, false);
        };

        match chunk {
            Chunk::Bytes(mut bytes) => {
                let (reset, cut) = direction_faults.admit(&mut bytes);
                self.cut_off(cut);
                (Chunk::Bytes(bytes), reset)
            }
            Chunk::Reset => (Chunk::Reset, false),
            Chunk::Piped(piped) => {
                let (forward, reset, cut) = direction_faults.admit_length(piped.forward);
                self.cut_off(cut);
                let discard = piped.forward - forward;
                (Chunk::Piped(Piped { forward, discard }), reset)
            }
        }
    }

    /// Once a fault cut the input, nothing more of it is read or passed
    /// on: what was read ahead neither.
    fn cut_off(&mut self, cut: bool) {
        if cut {
            self.ended = true;
            self.ahead.clear();
        }
    }
}
