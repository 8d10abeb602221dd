//! The token bucket every forwarded byte is paid from: one token per byte,
//! refilled at the rate, holding at most the burst.
//!
//! # How the state is kept
//!
//! The bucket is a generic cell-rate algorithm counted in bytes rather than
//! in time. A configuration defines a *fill line*
//!
//! ```text
//! V(t) = v0 + floor((t - t0) * rate)        bytes, t in nanoseconds
//! ```
//!
//! the total number of tokens that have ever flowed in, and the only mutable
//! state is `S`, the total ever spent (one `AtomicU64`, changed by
//! compare-exchange). The tokens in hand are `min(V(t) - S, burst)`; a
//! negative value is debt that earlier callers reserved. Spending `n` moves
//! `S` by `n`, exactly, whatever the rate, so a million `acquire(1)` end at
//! the same moment as one `acquire(1_000_000)`, and `V` is computed from the
//! elapsed time each call, so rounding never accumulates: a call is
//! under-granted by less than one byte and never over-granted. Counting in
//! bytes keeps full precision at 100 GiB/s, where a nanosecond is 107 bytes
//! and any time-based state in one 64-bit word would be either too coarse or
//! wrap within years.
//!
//! `S` wraps modulo 2^64 and is only ever read relative to `v0`; `V(t) - v0`
//! is computed in 128 bits from the full 64-bit clock, so an idle bucket
//! never wraps (the clock itself runs 584 years). `S - v0` starts at no less
//! than minus the burst and is kept below 2^63 by starting a new fill line
//! (a rebase, with the same settings) before anything is spent once `V` has
//! run 2^62 bytes past `v0`: every 1.4 years at 100 GiB/s, or after a long
//! idle spell. Only then may an acquirer wait for a rate change in progress
//! to finish, and for at most a second if its writer died.
//!
//! # Why the configuration is a second place, and how it stays consistent
//!
//! A live rate change needs `t0`, `v0`, `rate` and `burst` to change
//! together, which does not fit in the state word. The change is made
//! continuous instead: the new fill line starts where the old one stood
//! (`v0 = V_old(now)`, capped at the new burst), so `S` itself never has to
//! change. Tokens in hand stay in hand, and debt, being counted in bytes,
//! is re-timed at the new rate by construction.
//!
//! Configurations are published like a seqlock with several slots: a writer
//! fills a slot that is not current, stamps it with its generation and then
//! advances the generation word. A reader takes the slot of the current
//! generation and checks the stamp before and after; since the current slot
//! is never written, a reader never waits for a writer and a writer that
//! dies mid-way leaves only an unused slot behind. Writers (rate changes,
//! rare) take turns through a claim word; a claim older than a second is
//! taken over, and the new writer then skips a slot, so a writer that was
//! frozen rather than dead writes into a slot that is not reused for three
//! more generations. Acquirers never touch the claim.
//!
//! The generation word is also what sleepers wait on (a futex): a rate
//! change wakes them and they re-time their wait against the new line.

use crate::clock::Clock;
#[cfg(not(loom))]
use crate::clock::MonotonicClock;
use crate::rate::{Limit, Rate};
use crate::sync::{AtomicU32, AtomicU64, Ordering, fence};
use std::fmt;
use std::ops::Deref;
use std::time::Duration;

/// Nanoseconds per second times the rate's fixed-point scale: `V` advances
/// by `elapsed_ns * rate_fixed / SCALE` bytes.
const SCALE: u128 = 1_000_000_000 << Rate::FRACTION_BITS;
/// Configuration slots. Writers skip one slot after taking over a claim, so
/// four leave a frozen writer's slot unused for three generations.
const SLOTS: usize = 4;
/// Marks a slot stamp whose slot is being written.
const WRITING: u64 = 1 << 32;
/// A writer's claim older than this is taken over.
const CLAIM_TIMEOUT_NS: u64 = 1_000_000_000;
/// How far `V` may run past `v0` before the fill line is rebased.
const REBASE_AFTER: u128 = 1 << 62;
/// The most one reservation takes; larger acquires go in pieces of this
/// size, which keeps all debt far inside 64 bits.
const MAX_RESERVATION: u64 = 1 << 40;
/// The largest burst accepted (4 EiB).
pub const MAX_BURST: u64 = 1 << 62;

/// Why `try_acquire` did not grant a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// Not enough tokens now; they will be there after this long, if
    /// nothing else is taken and the rate stays.
    Wait(Duration),
    /// The request is larger than the burst, so it can never be granted at
    /// once; `acquire` can still take it.
    ExceedsBurst {
        /// The burst it exceeds.
        burst: u64,
    },
    /// The bucket is paused: nothing is granted until it is resumed.
    Paused,
}

/// A burst that is zero or too large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidBurst(pub u64);

impl fmt::Display for InvalidBurst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "burst must be 1 byte to 4 EiB, not {} bytes", self.0)
    }
}

impl std::error::Error for InvalidBurst {}

/// Whether a new bucket starts with a full burst of tokens or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fill {
    /// Starts with `burst` tokens.
    #[default]
    Full,
    /// Starts with no tokens.
    Empty,
}

/// Tokens reserved by [`TokenBucket::reserve`]: already taken from the
/// bucket, usable once [`TokenBucket::deadline`] says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a reservation has already spent its tokens; wait for it"]
pub struct Reservation {
    /// The value of the fill line at which the reservation is covered, or
    /// `None` when it was covered at once.
    covered_at: Option<u64>,
    /// Tokens it took from the bucket (none while unlimited), which is all
    /// [`TokenBucket::give_back`] may return.
    taken: u64,
}

/// What a new configuration changes; `None` keeps the old value.
#[derive(Debug, Clone, Copy, Default)]
struct Change {
    limit: Option<Limit>,
    burst: Option<u64>,
    paused: Option<bool>,
}

/// One configuration, as a plain value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Config {
    /// Clock time at which the fill line stood at `v0`.
    t0: u64,
    /// The fill line at `t0`, modulo 2^64.
    v0: u64,
    /// The rate as fixed point, or 0 for unlimited.
    rate: u64,
    burst: u64,
    /// Nothing is granted while paused, and the fill line stands still.
    paused: bool,
}

impl Config {
    fn unlimited(&self) -> bool {
        self.rate == 0
    }

    /// `V(now) - v0`: tokens that have flowed in since `t0`, exactly. None
    /// while paused: the line stands still, so that tokens reserved before
    /// or during a pause and the tokens in hand together still fit in the
    /// burst when it ends.
    fn inflow(&self, now: u64) -> u128 {
        if self.paused {
            return 0;
        }
        u128::from(now.saturating_sub(self.t0)) * u128::from(self.rate) / SCALE
    }

    /// `V(now) - S`, uncapped: tokens in hand if positive, debt if negative.
    fn level(&self, spent: u64, now: u64) -> i128 {
        // S - v0 lies in [-2^62, 3 * 2^62): shift, wrap, shift back.
        const SHIFT: u64 = 1 << 62;
        let spent_since_v0 =
            i128::from(spent.wrapping_sub(self.v0).wrapping_add(SHIFT)) - i128::from(SHIFT);
        self.inflow(now) as i128 - spent_since_v0
    }

    /// True if the fill line must be rebased before anything is spent.
    fn rebase_due(&self, now: u64) -> bool {
        !self.unlimited() && self.inflow(now) > REBASE_AFTER
    }

    /// The first clock time at which the fill line reaches `mark`, or `None`
    /// if it had by `t0`.
    fn time_of(&self, mark: u64) -> Option<u64> {
        let needed = mark.wrapping_sub(self.v0) as i64;
        if needed <= 0 {
            return None;
        }
        let ns = (needed as u128 * SCALE).div_ceil(u128::from(self.rate));
        Some(
            self.t0
                .saturating_add(u64::try_from(ns).unwrap_or(u64::MAX)),
        )
    }

    fn limit(&self) -> Limit {
        Rate::from_fixed(self.rate).map_or(Limit::Unlimited, Limit::Rate)
    }
}

/// One published configuration and the stamp that says which generation it
/// holds.
#[repr(C)]
#[derive(Debug)]
struct ConfigSlot {
    stamp: AtomicU64,
    t0: AtomicU64,
    v0: AtomicU64,
    rate: AtomicU64,
    burst: AtomicU64,
    paused: AtomicU64,
}

impl ConfigSlot {
    fn new(stamp: u64, config: Config) -> Self {
        ConfigSlot {
            stamp: AtomicU64::new(stamp),
            t0: AtomicU64::new(config.t0),
            v0: AtomicU64::new(config.v0),
            rate: AtomicU64::new(config.rate),
            burst: AtomicU64::new(config.burst),
            paused: AtomicU64::new(config.paused.into()),
        }
    }

    /// The slot's configuration if it holds generation `generation` and was
    /// not being rewritten while read.
    fn read(&self, generation: u32) -> Option<Config> {
        let before = self.stamp.load(Ordering::Acquire);
        let config = Config {
            t0: self.t0.load(Ordering::Relaxed),
            v0: self.v0.load(Ordering::Relaxed),
            rate: self.rate.load(Ordering::Relaxed),
            burst: self.burst.load(Ordering::Relaxed),
            paused: self.paused.load(Ordering::Relaxed) != 0,
        };
        fence(Ordering::Acquire);
        let after = self.stamp.load(Ordering::Relaxed);
        (before == after && before == u64::from(generation)).then_some(config)
    }
}

/// Everything a bucket shares between its users: plain atomics in a fixed
/// layout, with no pointers, so that it can live in memory shared between
/// processes. Build one with [`TokenBucket`].
///
/// `S` has a cache line to itself: every grant writes it, while the
/// configuration is read by every call and written almost never, and must
/// not be dragged between cores by those writes.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct BucketCell {
    /// `S`: every token ever spent, modulo 2^64.
    spent: CacheLine<AtomicU64>,
    /// The current configuration's generation; sleepers wait on it.
    generation: AtomicU32,
    /// Which writer may publish a configuration: 0, or the clock time at
    /// which the claim was taken (odd, so it is never 0).
    claim: AtomicU64,
    slots: [ConfigSlot; SLOTS],
}

/// Keeps its content on a cache line of its own.
#[repr(C, align(64))]
#[derive(Debug)]
struct CacheLine<T>(T);

impl<T> Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl BucketCell {
    /// A cell for a bucket at `limit` holding at most `burst`, starting
    /// full or empty at clock time `now`: for a bucket whose cell lives
    /// elsewhere (shared memory); see [`TokenBucket::from_cell`].
    pub fn new(limit: Limit, burst: u64, fill: Fill, now: u64) -> Result<Self, InvalidBurst> {
        check_burst(burst)?;
        Ok(Self::from_config(Config {
            t0: now,
            v0: match fill {
                Fill::Full => burst,
                Fill::Empty => 0,
            },
            rate: limit.rate().map_or(0, Rate::fixed),
            burst,
            paused: false,
        }))
    }

    /// True if the cell holds a readable configuration with settings in
    /// range: a check for a cell found in a file, which may be corrupt.
    /// Never spins: a few reads, then it gives up.
    pub fn is_sound(&self) -> bool {
        (0..1000).any(|_| {
            let generation = self.generation.load(Ordering::Acquire);
            self.slots[generation as usize % SLOTS]
                .read(generation)
                .is_some_and(|config| {
                    (config.rate == 0 || Rate::from_fixed(config.rate).is_some())
                        && check_burst(config.burst).is_ok()
                })
        })
    }

    fn from_config(config: Config) -> Self {
        BucketCell {
            spent: CacheLine(AtomicU64::new(0)),
            generation: AtomicU32::new(0),
            claim: AtomicU64::new(0),
            slots: std::array::from_fn(|i| {
                if i == 0 {
                    ConfigSlot::new(0, config)
                } else {
                    ConfigSlot::new(WRITING, config)
                }
            }),
        }
    }
}

/// An exact, lock-free token bucket whose tokens are bytes.
///
/// Every method takes `&self`; share a bucket between threads with an `Arc`.
pub struct TokenBucket<C: Clock, S: Deref<Target = BucketCell> = Box<BucketCell>> {
    cell: S,
    clock: C,
}

#[cfg(not(loom))]
impl TokenBucket<MonotonicClock> {
    /// A full bucket on the system's monotonic clock.
    pub fn new(limit: Limit, burst: u64) -> Result<Self, InvalidBurst> {
        Self::with_clock(limit, burst, Fill::Full, MonotonicClock)
    }
}

impl<C: Clock> TokenBucket<C> {
    /// A bucket on `clock`, starting full or empty.
    pub fn with_clock(
        limit: Limit,
        burst: u64,
        fill: Fill,
        clock: C,
    ) -> Result<Self, InvalidBurst> {
        let cell = BucketCell::new(limit, burst, fill, clock.now())?;
        Ok(TokenBucket::from_cell(Box::new(cell), clock))
    }
}

/// Checks that a bucket can take `burst`: 1 byte to [`MAX_BURST`].
pub fn check_burst(burst: u64) -> Result<(), InvalidBurst> {
    if (1..=MAX_BURST).contains(&burst) {
        Ok(())
    } else {
        Err(InvalidBurst(burst))
    }
}

impl<C: Clock, S: Deref<Target = BucketCell>> TokenBucket<C, S> {
    /// A bucket over a cell kept elsewhere, such as in memory shared
    /// between processes. Every user of the cell must run on the same
    /// time line (`CLOCK_MONOTONIC` is the machine's).
    pub fn from_cell(cell: S, clock: C) -> Self {
        TokenBucket { cell, clock }
    }

    /// Every token ever spent, modulo 2^64: the difference of two readings
    /// is what was spent between them, by everyone using the cell.
    pub fn spent(&self) -> u64 {
        self.cell.spent.load(Ordering::Acquire)
    }

    /// Takes `n` tokens now, or says why not. Never blocks.
    pub fn try_acquire(&self, n: u64) -> Result<(), Denied> {
        let mut spent = self.cell.spent.load(Ordering::Acquire);
        loop {
            let config = self.config().1;
            if config.paused {
                return Err(Denied::Paused);
            }
            if config.unlimited() || n == 0 {
                return Ok(());
            }
            if n > config.burst {
                return Err(Denied::ExceedsBurst {
                    burst: config.burst,
                });
            }
            let now = self.clock.now();
            if config.rebase_due(now) {
                self.publish(Change::default());
                continue;
            }
            let level = config.level(spent, now);
            let in_hand = level.min(i128::from(config.burst));
            if in_hand < i128::from(n) {
                // Only reachable with level < burst, so S + n is the mark.
                let ready = config.time_of(spent.wrapping_add(n)).unwrap_or(now);
                return Err(Denied::Wait(Duration::from_nanos(
                    ready.saturating_sub(now),
                )));
            }
            match self.spend(spent, level, config.burst, n) {
                Ok(_) => return Ok(()),
                Err(actual) => spent = actual,
            }
        }
    }

    /// Takes `n` tokens at once, going into debt if they are not there yet,
    /// so that nobody who comes later can overtake. Never blocks; the tokens
    /// are usable from [`TokenBucket::deadline`] on.
    ///
    /// `n` may exceed the burst. Requests over 2^40 bytes are capped at
    /// 2^40; [`TokenBucket::acquire`] splits them.
    pub fn reserve(&self, n: u64) -> Reservation {
        let n = n.min(MAX_RESERVATION);
        let mut spent = self.cell.spent.load(Ordering::Acquire);
        loop {
            let config = self.config().1;
            if config.unlimited() || n == 0 {
                return Reservation {
                    covered_at: None,
                    taken: 0,
                };
            }
            let now = self.clock.now();
            if config.rebase_due(now) {
                self.publish(Change::default());
                continue;
            }
            let level = config.level(spent, now);
            match self.spend(spent, level, config.burst, n) {
                Ok(new_spent) => {
                    let in_hand = level.min(i128::from(config.burst));
                    let covered_at = (in_hand < i128::from(n)).then_some(new_spent);
                    return Reservation {
                        covered_at,
                        taken: n,
                    };
                }
                Err(actual) => spent = actual,
            }
        }
    }

    /// The clock time from which `reservation` may be used, at the rate now
    /// in force, or `None` if it may be used already.
    pub fn deadline(&self, reservation: &Reservation) -> Option<u64> {
        let config = self.config().1;
        if config.paused {
            return Some(u64::MAX);
        }
        let mark = reservation.covered_at?;
        if config.unlimited() {
            return None;
        }
        config.time_of(mark).filter(|&t| t > self.clock.now())
    }

    /// Blocks until `reservation` may be used, and while the bucket is
    /// paused. A change of rate while it sleeps re-times the wait at once.
    pub fn wait(&self, reservation: &Reservation) {
        loop {
            let (generation, config) = self.config();
            if config.paused {
                self.clock
                    .sleep_until(u64::MAX, &self.cell.generation, generation);
                continue;
            }
            let Some(mark) = reservation.covered_at else {
                return;
            };
            if config.unlimited() {
                return;
            }
            match config.time_of(mark) {
                Some(deadline) if deadline > self.clock.now() => {
                    self.clock
                        .sleep_until(deadline, &self.cell.generation, generation)
                }
                _ => return,
            }
        }
    }

    /// Returns up to `unused` of the tokens `reservation` took, as if they
    /// had never been taken: they are in hand again for whoever comes next.
    /// Whoever reserved after it still waits for its own mark, so nothing
    /// is granted that the fill line has not brought in.
    pub fn give_back(&self, reservation: &mut Reservation, unused: u64) {
        let n = unused.min(reservation.taken);
        if n == 0 {
            return;
        }
        reservation.taken -= n;
        reservation.covered_at = reservation.covered_at.map(|mark| mark.wrapping_sub(n));
        self.cell.spent.fetch_sub(n, Ordering::AcqRel);
    }

    /// Takes `n` tokens, sleeping for as long as the deficit takes to
    /// refill. `n` may exceed the burst.
    pub fn acquire(&self, n: u64) {
        let mut left = n;
        while left > 0 {
            let part = left.min(MAX_RESERVATION);
            self.wait(&self.reserve(part));
            left -= part;
        }
    }

    /// Changes the rate from now on. Tokens in hand stay; debt already
    /// reserved is re-timed at the new rate. Going from unlimited to a rate
    /// starts from a full bucket.
    pub fn set_limit(&self, limit: Limit) {
        self.publish(Change {
            limit: Some(limit),
            ..Change::default()
        });
    }

    /// Pauses or resumes. While paused nothing is granted, sleepers stay
    /// asleep and no tokens accrue, so on resume at most the burst passes at
    /// once, counting what was reserved.
    pub fn set_paused(&self, paused: bool) {
        self.publish(Change {
            paused: Some(paused),
            ..Change::default()
        });
    }

    /// True while paused.
    pub fn paused(&self) -> bool {
        self.config().1.paused
    }

    /// Changes the burst from now on; tokens in hand above it are dropped.
    pub fn set_burst(&self, burst: u64) -> Result<(), InvalidBurst> {
        check_burst(burst)?;
        self.publish(Change {
            burst: Some(burst),
            ..Change::default()
        });
        Ok(())
    }

    /// Changes rate and burst together, as one change.
    pub fn set(&self, limit: Limit, burst: u64) -> Result<(), InvalidBurst> {
        check_burst(burst)?;
        self.publish(Change {
            limit: Some(limit),
            burst: Some(burst),
            paused: None,
        });
        Ok(())
    }

    /// The limit in force.
    pub fn limit(&self) -> Limit {
        self.config().1.limit()
    }

    /// The burst in force.
    pub fn burst(&self) -> u64 {
        self.config().1.burst
    }

    /// The limit and burst in force, read together: one configuration
    /// read where a caller needs both, as the copy loop does per chunk.
    pub fn limit_and_burst(&self) -> (Limit, u64) {
        let config = self.config().1;
        (config.limit(), config.burst)
    }

    /// Tokens in hand now; negative while callers wait on reserved debt.
    /// Unlimited buckets report their burst.
    pub fn available(&self) -> i64 {
        let spent = self.cell.spent.load(Ordering::Acquire);
        let config = self.config().1;
        if config.unlimited() {
            return config.burst as i64;
        }
        let level = config.level(spent, self.clock.now());
        level.clamp(i64::MIN.into(), config.burst.into()) as i64
    }

    /// The clock the bucket runs on.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Moves `S` from `spent` past any tokens above the burst and then by
    /// `n`, returning the new `S`, or the `S` another caller left there
    /// first.
    ///
    /// Callers read the clock after `S`, never before, and again after a
    /// failure: every `S` that lands was then computed at a time no earlier
    /// than that of the `S` it replaced. With an older time the burst cap
    /// would be applied at a point the bucket has already passed, letting
    /// through up to rate x staleness bytes too many.
    fn spend(&self, spent: u64, level: i128, burst: u64, n: u64) -> Result<u64, u64> {
        // Tokens above the burst were never in the bucket: skip them. The
        // excess can pass 2^64 after a long idle spell; arithmetic on S is
        // modulo 2^64 anyway.
        let overflow = (level - level.min(i128::from(burst))) as u64;
        let new_spent = spent.wrapping_add(overflow).wrapping_add(n);
        self.cell
            .spent
            .compare_exchange(spent, new_spent, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| new_spent)
    }

    /// The current generation and its configuration.
    fn config(&self) -> (u32, Config) {
        loop {
            let generation = self.cell.generation.load(Ordering::Acquire);
            if let Some(config) = self.cell.slots[generation as usize % SLOTS].read(generation) {
                return (generation, config);
            }
            // A writer went round every slot while we read: read again.
        }
    }

    /// Publishes a configuration with the given changes, continuing the
    /// fill line from now.
    fn publish(&self, change: Change) {
        loop {
            let (token, took_over) = self.claim();
            let published = self.publish_claimed(token, took_over, change);
            let _ =
                self.cell
                    .claim
                    .compare_exchange(token, 0, Ordering::Release, Ordering::Relaxed);
            if published {
                self.clock.wake(&self.cell.generation);
                return;
            }
            // Our claim was taken over while we wrote: start again.
        }
    }

    fn publish_claimed(&self, token: u64, took_over: bool, change: Change) -> bool {
        let (generation, old) = self.config();
        let spent = self.cell.spent.load(Ordering::Acquire);
        let now = self.clock.now();
        let rate = change
            .limit
            .map_or(old.rate, |l| l.rate().map_or(0, Rate::fixed));
        let burst = change.burst.unwrap_or(old.burst);
        let in_hand = if old.unlimited() {
            i128::from(burst)
        } else {
            old.level(spent, now)
                .min(old.burst.into())
                .min(burst.into())
        };
        let new = Config {
            t0: now,
            v0: spent.wrapping_add(in_hand as i64 as u64),
            rate,
            burst,
            paused: change.paused.unwrap_or(old.paused),
        };
        let next = generation.wrapping_add(if took_over { 2 } else { 1 });
        let slot = &self.cell.slots[next as usize % SLOTS];
        let still_ours = || self.cell.claim.load(Ordering::Acquire) == token;
        if !still_ours() {
            return false;
        }
        slot.stamp
            .store(WRITING | u64::from(next), Ordering::Relaxed);
        fence(Ordering::Release);
        for (field, value) in [
            (&slot.t0, new.t0),
            (&slot.v0, new.v0),
            (&slot.rate, new.rate),
            (&slot.burst, new.burst),
            (&slot.paused, new.paused.into()),
        ] {
            // Narrows the window in which a writer whose claim was taken
            // over could still write to a slot someone else now fills.
            if !still_ours() {
                return false;
            }
            field.store(value, Ordering::Relaxed);
        }
        slot.stamp.store(u64::from(next), Ordering::Release);
        self.cell
            .generation
            .compare_exchange(generation, next, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes the writers' claim, waiting while another writer holds it.
    /// Returns its token and whether it was taken over from a writer that
    /// held it too long.
    fn claim(&self) -> (u64, bool) {
        loop {
            let now = self.clock.now();
            let token = now | 1;
            let held = self.cell.claim.load(Ordering::Acquire);
            let stale = held != 0 && now.saturating_sub(held) > CLAIM_TIMEOUT_NS;
            if (held == 0 || stale)
                && self
                    .cell
                    .claim
                    .compare_exchange(held, token, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return (token, stale);
            }
            crate::sync::back_off();
        }
    }
}

impl<C: Clock, S: Deref<Target = BucketCell>> fmt::Debug for TokenBucket<C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucket")
            .field("limit", &self.limit())
            .field("burst", &self.burst())
            .field("available", &self.available())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
