//! One direction of a UDP link, as netem makes one, on whatever clock it
//! is handed: datagrams arrive, and leave when the link says, whole or
//! not at all, each with the tag it came with (the flow it belongs to). It reads no clock and does no I/O, so every rule here is
//! tested exactly on made-up times.
//!
//! What a datagram goes through, in netem's order:
//! 1. the MTU: one over it is dropped or cut to it;
//! 2. loss ([`Loss`]): at random or in Gilbert-Elliott's bursts;
//! 3. duplication: a copy follows it through everything below;
//! 4. corruption: one bit flipped, chosen at random;
//! 5. the queue: it waits for its tokens, and one that does not fit is
//!    dropped (the tail, or the oldest waiting, as asked);
//! 6. the rate: shape's bucket, handed in (so shares, `--remote` and
//!    schedules rule a datagram link as they rule a stream): each datagram
//!    is paid for whole, the one at the head of the queue at a time, and
//!    never split;
//! 7. the delay, give or take the jitter (which reorders, unless asked
//!    not to); a reordered one (netem's `reorder`) skips the delay.
//!
//! Every draw comes from a generator of its own kind, all seeded from one
//! seed, so that a seed replays everything a link did.

pub mod fuzzing;
mod tally;

pub use tally::Tally;

use shape_bucket::{BucketCell, Clock, Limit, Reservation, TokenBucket};
use shape_impair::faults::{Faults, Losing, Loss, Mtu, Oversize};
use shape_leaves::counting::Counting;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::ops::Deref;
use std::time::Duration;

/// What the queue drops when a datagram does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueDrop {
    /// The datagram that arrives (a router's tail drop).
    #[default]
    Tail,
    /// The oldest waiting, as many as it takes.
    Head,
}

/// The queue holds this much of the rate when not told, and never less
/// than the largest datagram.
const QUEUE_TIME: f64 = 0.1;

/// The queue for `limit`, in tokens, when not told: a tenth of a second
/// of it, and room for the largest datagram (or, counting datagrams, for
/// one).
pub fn default_queue(limit: Limit, counting: Counting) -> u64 {
    let time = match limit {
        Limit::Unlimited => 0,
        Limit::Rate(rate) => (rate.bytes_per_sec() * QUEUE_TIME) as u64,
    };
    let one = match counting {
        Counting::Datagrams => counting.tokens(1),
        _ => shape_impair::faults::LARGEST_DATAGRAM as u64,
    };
    time.max(one)
}

/// How one direction of a link is impaired.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Impairment {
    /// The bucket and the queue count datagrams, not bytes: each is worth
    /// a record's tokens.
    pub packets: bool,
    /// The most that waits for tokens, in the bucket's units.
    pub queue: u64,
    /// The most bytes held for the delay at once (`None`: no bound), so
    /// that a flood into a long delay holds bounded memory.
    pub held_most: Option<u64>,
    pub queue_drop: QueueDrop,
    /// In nanoseconds.
    pub delay: u64,
    /// How far each datagram's delay may stray either way, evenly, in
    /// nanoseconds.
    pub jitter: u64,
    /// Jitter never sends a datagram before one that came earlier.
    pub keep_order: bool,
    pub loss: Option<Loss>,
    /// Probabilities, per datagram.
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    pub mtu: Option<Mtu>,
    /// The most bytes each flow may send this way (toxiproxy's
    /// limit_data); past it, its datagrams are dropped. The proxy keeps
    /// this, since it knows the flows.
    pub flow_limit: Option<u64>,
}

impl Impairment {
    /// This impairment with `delay`, `jitter` and `faults` in force in
    /// place of its own: what the flags, `--remote` and `--schedule` set.
    pub fn under(&self, delay: Duration, jitter: Duration, faults: &Faults) -> Impairment {
        Impairment {
            delay: delay.as_nanos() as u64,
            jitter: jitter.as_nanos() as u64,
            // A datagram lost is lost: --loss and --drop are one here
            // (--loss's, where both are given).
            loss: [faults.loss, faults.drop]
                .into_iter()
                .find(|loss| loss.rate() > 0.0),
            duplicate: faults.duplicate,
            reorder: faults.reorder,
            corrupt: faults.corrupt,
            mtu: faults.mtu,
            ..self.clone()
        }
    }

    /// True if anything in it is drawn at random: then a run says its
    /// seed, so that it can be replayed.
    pub fn draws(&self) -> bool {
        self.loss.is_some()
            || self.jitter > 0
            || self.duplicate > 0.0
            || self.reorder > 0.0
            || self.corrupt > 0.0
    }
}

fn count(what: &mut (u64, u64), datagram: &[u8]) {
    what.0 += 1;
    what.1 += datagram.len() as u64;
}

/// A datagram and its tag.
pub type Tagged = (u64, Vec<u8>);

/// A datagram in the delay line, in the order it is due, then arrived.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InLine {
    due: u64,
    order: u64,
    datagram: Tagged,
}

/// The draws of each kind, each from a generator of its own.
#[derive(Debug)]
struct Draws {
    loss: fastrand::Rng,
    duplicate: fastrand::Rng,
    corrupt: fastrand::Rng,
    reorder: fastrand::Rng,
    jitter: fastrand::Rng,
}

/// One direction of a link.
#[derive(Debug)]
pub struct Netem {
    impairment: Impairment,
    losing: Option<Losing>,
    draws: Draws,
    /// Datagrams waiting for the link, oldest first, and what they hold
    /// in the rate's units.
    waiting: VecDeque<Tagged>,
    waiting_units: u64,
    /// The tokens reserved for the head of the queue, and when they are
    /// covered (`None`: they are).
    paying: Option<(Reservation, Option<u64>)>,
    line: BinaryHeap<Reverse<InLine>>,
    /// The latest time due in the line, for `keep_order`.
    last_due: u64,
    /// Bytes in the line.
    held: u64,
    arrived: u64,
    tally: Tally,
}

impl Netem {
    /// A link impaired as `impairment` says, drawing from `seed`.
    pub fn new(impairment: Impairment, seed: u64) -> Netem {
        let mut seeds = fastrand::Rng::with_seed(seed);
        let losing = impairment.loss.map(Losing::new);
        let draws = Draws {
            loss: fastrand::Rng::with_seed(seeds.u64(..)),
            duplicate: fastrand::Rng::with_seed(seeds.u64(..)),
            corrupt: fastrand::Rng::with_seed(seeds.u64(..)),
            reorder: fastrand::Rng::with_seed(seeds.u64(..)),
            jitter: fastrand::Rng::with_seed(seeds.u64(..)),
        };
        Netem {
            impairment,
            losing,
            draws,
            waiting: VecDeque::new(),
            waiting_units: 0,
            paying: None,
            line: BinaryHeap::new(),
            last_due: 0,
            held: 0,
            arrived: 0,
            tally: Tally::default(),
        }
    }

    /// Is impaired as `impairment` says from now on; datagrams already
    /// queued or held stay, with their times. A loss model that changes
    /// starts afresh (in its good state).
    pub fn retune_to(&mut self, impairment: Impairment) {
        if impairment.loss != self.impairment.loss {
            self.losing = impairment.loss.map(Losing::new);
        }
        self.impairment = impairment;
    }

    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// What it did since this was last asked, or since it was made.
    pub fn take_tally(&mut self) -> Tally {
        std::mem::take(&mut self.tally)
    }

    /// Takes in `datagram`, tagged `tag`, arrived at `now`, to be paid
    /// for from `bucket`.
    pub fn arrive<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        bucket: &TokenBucket<C, S>,
        now: u64,
        tag: u64,
        mut datagram: Vec<u8>,
    ) {
        self.send(bucket, now);
        if let Some(Mtu {
            size: mtu,
            oversize,
        }) = self.impairment.mtu
            && datagram.len() > mtu
        {
            match oversize {
                Oversize::Drop => return count(&mut self.tally.oversize, &datagram),
                Oversize::Cut => {
                    count(&mut self.tally.cut, &datagram);
                    datagram.truncate(mtu);
                }
            }
        }
        if let Some(losing) = &mut self.losing
            && losing.loses(&mut self.draws.loss)
        {
            return count(&mut self.tally.lost, &datagram);
        }
        let copy = (self.impairment.duplicate > 0.0
            && self.draws.duplicate.f64() < self.impairment.duplicate)
            .then(|| datagram.clone());
        if let Some(copy) = &copy {
            count(&mut self.tally.duplicated, copy);
        }
        for mut datagram in std::iter::once(datagram).chain(copy) {
            if self.impairment.corrupt > 0.0
                && !datagram.is_empty()
                && self.draws.corrupt.f64() < self.impairment.corrupt
            {
                let bit = self.draws.corrupt.usize(..datagram.len() * 8);
                datagram[bit / 8] ^= 1 << (bit % 8);
                count(&mut self.tally.corrupted, &datagram);
            }
            self.queue((tag, datagram));
            // Paid for at once if the bucket allows, before its copy
            // comes.
            self.send(bucket, now);
        }
    }

    /// Puts `datagram` in the queue, or drops what the queue cannot hold.
    fn queue(&mut self, datagram: Tagged) {
        let units = self.units(&datagram.1);
        let room = self.impairment.queue;
        // The head is being paid for: it waits on the link, not in the
        // queue.
        let head = self.waiting.front().map_or(0, |head| self.units(&head.1));
        let queued = self.waiting_units - head;
        if !self.waiting.is_empty() && queued + units > room {
            match self.impairment.queue_drop {
                QueueDrop::Tail => return count(&mut self.tally.queue_full, &datagram.1),
                QueueDrop::Head => {
                    let mut queued = queued;
                    while queued + units > room {
                        // The oldest waiting behind the head.
                        let Some(oldest) = self.waiting.remove(1) else {
                            return count(&mut self.tally.queue_full, &datagram.1);
                        };
                        let oldest_units = self.units(&oldest.1);
                        queued -= oldest_units;
                        self.waiting_units -= oldest_units;
                        count(&mut self.tally.queue_full, &oldest.1);
                    }
                }
            }
        }
        self.waiting_units += units;
        self.waiting.push_back(datagram);
    }

    fn units(&self, datagram: &[u8]) -> u64 {
        if self.impairment.packets {
            Counting::Datagrams.tokens_per_unit()
        } else {
            datagram.len() as u64
        }
    }

    /// Sends into the delay line what is paid for by `now`, in turn: the
    /// head of the queue is paid for once the one before it is.
    fn send<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        bucket: &TokenBucket<C, S>,
        now: u64,
    ) {
        while let Some(head) = self.waiting.front() {
            let units = self.units(&head.1);
            let (paid, due) = self
                .paying
                .get_or_insert_with(|| (bucket.reserve(units), None));
            *due = bucket.deadline(paid).filter(|&t| t > now);
            if due.is_some() {
                return;
            }
            self.paying = None;
            let datagram = self.waiting.pop_front().expect("looked at above");
            self.waiting_units -= units;
            self.delay(now, datagram);
        }
    }

    /// Puts a datagram sent at `sent` into the delay line.
    fn delay(&mut self, sent: u64, datagram: Tagged) {
        let impairment = &self.impairment;
        let size = datagram.1.len() as u64;
        if impairment
            .held_most
            .is_some_and(|most| self.held + size > most)
        {
            return count(&mut self.tally.queue_full, &datagram.1);
        }
        self.held += size;
        let due = if impairment.reorder > 0.0 && self.draws.reorder.f64() < impairment.reorder {
            count(&mut self.tally.reordered, &datagram.1);
            sent
        } else {
            let jitter = impairment.jitter as i128;
            let stray = if jitter > 0 {
                self.draws.jitter.i64(-(jitter as i64)..=jitter as i64) as i128
            } else {
                0
            };
            let due = (sent as i128 + impairment.delay as i128 + stray).max(sent as i128) as u64;
            if impairment.keep_order {
                due.max(self.last_due)
            } else {
                due
            }
        };
        self.last_due = self.last_due.max(due);
        self.arrived += 1;
        self.line.push(Reverse(InLine {
            due,
            order: self.arrived,
            datagram,
        }));
    }

    /// The datagrams due by `now`, in the order they leave.
    pub fn leave<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        bucket: &TokenBucket<C, S>,
        now: u64,
    ) -> Vec<Tagged> {
        self.send(bucket, now);
        let mut out = Vec::new();
        while let Some(Reverse(held)) = self.line.peek() {
            if held.due > now {
                break;
            }
            let Reverse(held) = self.line.pop().expect("peeked");
            self.held -= held.datagram.1.len() as u64;
            count(&mut self.tally.passed, &held.datagram.1);
            out.push(held.datagram);
        }
        out
    }

    /// When something is next due: a datagram leaving the line, or the
    /// head of the queue paid for (at the rate in force when it was last
    /// looked at: a change of rate calls for a look).
    pub fn wake(&self) -> Option<u64> {
        let line = self.line.peek().map(|Reverse(held)| held.due);
        let queue = self.paying.as_ref().and_then(|(_, due)| *due);
        line.into_iter().chain(queue).min()
    }
}

#[cfg(test)]
mod tests;
