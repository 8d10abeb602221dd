//! The bucket's shared state, [`BucketCell`], and how its configuration
//! changes while others read it.
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

use super::{Fill, InvalidBurst, TokenBucket, check_burst};
use crate::atomics::{AtomicU32, AtomicU64, Ordering, fence};
use crate::clock::Clock;
use crate::rate::{Limit, Rate};
use std::ops::Deref;

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
/// Debt that takes longer than this to cover is damage, not reservations.
const MOST_DEBT_NS: u64 = 3600 * 1_000_000_000;
/// How far `V` may run past `v0` before the fill line is rebased.
const REBASE_AFTER: u128 = 1 << 62;
/// Reads of the configuration before the cell is called damaged. A read
/// fails only while writers go round every slot during it, which a few
/// tries outlast; memory that never yields a configuration was overwritten
/// (a damaged share file), and reading on would spin forever.
const READ_ATTEMPTS: u32 = 10_000;
/// What a new configuration changes; `None` keeps the old value.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct NewConfig {
    pub(super) limit: Option<Limit>,
    pub(super) burst: Option<u64>,
    pub(super) paused: Option<bool>,
}

/// One configuration, as a plain value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Config {
    /// Clock time at which the fill line stood at `v0`.
    pub(super) t0: u64,
    /// The fill line at `t0`, modulo 2^64.
    pub(super) v0: u64,
    /// The rate as fixed point, or 0 for unlimited.
    pub(super) rate: u64,
    pub(super) burst: u64,
    /// Nothing is granted while paused, and the fill line stands still.
    pub(super) paused: bool,
    /// No configuration could be read: the cell is damaged. Such a
    /// configuration is unlimited, so that nobody sleeps on it, and every
    /// caller that grants or waits says so instead.
    pub(super) damaged: bool,
}

impl Config {
    /// What a reader works on when the cell holds no readable
    /// configuration.
    const DAMAGED: Config = Config {
        t0: 0,
        v0: 0,
        rate: 0,
        burst: 1,
        paused: false,
        damaged: true,
    };

    pub(super) fn unlimited(&self) -> bool {
        self.rate == 0
    }

    /// `V(now) - v0`: tokens that have flowed in since `t0`, exactly. None
    /// while paused: the line stands still, so that tokens reserved before
    /// or during a pause and the tokens in hand together still fit in the
    /// burst when it ends.
    pub(super) fn inflow(&self, now: u64) -> u128 {
        if self.paused {
            return 0;
        }
        per_scale(u128::from(now.saturating_sub(self.t0)) * u128::from(self.rate))
    }

    /// `V(now) - S`, uncapped: tokens in hand if positive, debt if negative.
    pub(super) fn level(&self, spent: u64, now: u64) -> i128 {
        self.level_from(spent, self.inflow(now))
    }

    /// [`Config::level`], or `None` if the fill line must be rebased before
    /// anything is spent: one look at the inflow for both, on the path of
    /// every grant.
    pub(super) fn level_unless_rebase_due(&self, spent: u64, now: u64) -> Option<i128> {
        let inflow = self.inflow(now);
        (inflow <= REBASE_AFTER).then(|| self.level_from(spent, inflow))
    }

    /// `V - S` when `inflow` tokens have flowed in since `t0`.
    fn level_from(&self, spent: u64, inflow: u128) -> i128 {
        // S - v0 lies in [-2^62, 3 * 2^62): shift, wrap, shift back.
        const SHIFT: u64 = 1 << 62;
        let spent_since_v0 =
            i128::from(spent.wrapping_sub(self.v0).wrapping_add(SHIFT)) - i128::from(SHIFT);
        inflow as i128 - spent_since_v0
    }

    /// The first clock time at which the fill line reaches `mark`, or `None`
    /// if it had by `t0`.
    pub(super) fn time_of(&self, mark: u64) -> Option<u64> {
        let needed = mark.wrapping_sub(self.v0) as i64;
        if needed <= 0 {
            return None;
        }
        Some(
            self.t0
                .saturating_add(nanoseconds_for(needed as u64, self.rate)),
        )
    }

    pub(super) fn limit(&self) -> Limit {
        Rate::from_fixed(self.rate).map_or(Limit::Unlimited, Limit::Rate)
    }
}

/// How many nanoseconds `rate` takes to bring `tokens`, rounded up. Out of
/// line, as grants only need it when they are refused.
#[cold]
#[inline(never)]
fn nanoseconds_for(tokens: u64, rate: u64) -> u64 {
    let ns = (u128::from(tokens) * SCALE).div_ceil(u128::from(rate));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// `x / SCALE`, exactly, without a 128-bit division on the hot path.
/// SCALE is 10^9 times 2^FRACTION_BITS, and for positive integers
/// floor(floor(x / a) / b) = floor(x / ab): the power of two is a shift,
/// and while what is left fits in 64 bits (an elapsed time times a rate
/// below 2^64 * 2^16, so always between rebases but for the largest
/// rates) the division by the constant 10^9 is a 64-bit one, which the
/// compiler turns into a multiplication by its reciprocal. Beyond that,
/// the 128-bit division by 10^9.
pub(super) fn per_scale(x: u128) -> u128 {
    let shifted = x >> Rate::FRACTION_BITS;
    match u64::try_from(shifted) {
        Ok(small) => u128::from(small / 1_000_000_000),
        Err(_) => shifted / 1_000_000_000,
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
            damaged: false,
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
    /// `S`, every token ever spent.
    pub(super) fn spent(&self) -> &AtomicU64 {
        &self.spent
    }

    /// The generation of the current configuration, which sleepers wait on.
    pub(super) fn generation(&self) -> &AtomicU32 {
        &self.generation
    }

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
            damaged: false,
        }))
    }

    /// True if the cell holds a readable configuration with settings in
    /// range that a bucket can go on from at clock time `now`: a check for
    /// a cell found in a file, which may be corrupt. Never spins: a few
    /// reads, then it gives up.
    ///
    /// A configuration from the future (more than [`CLAIM_TIMEOUT_NS`]
    /// ahead: callers share one clock) would bring no tokens until the
    /// clock caught up, and debt that takes longer than
    /// [`MOST_DEBT_NS`] to cover was never reserved by callers that pay
    /// a chunk at a time: either would make the next caller sleep for
    /// as good as ever.
    pub fn is_sound(&self, now: u64) -> bool {
        (0..1000).any(|_| {
            let generation = self.generation.load(Ordering::Acquire);
            let spent = self.spent.load(Ordering::Acquire);
            self.slots[generation as usize % SLOTS]
                .read(generation)
                .is_some_and(|config| {
                    let level = config.level(spent, now.max(config.t0));
                    let debt = u64::try_from(-level.min(0)).unwrap_or(u64::MAX);
                    (config.rate == 0 || Rate::from_fixed(config.rate).is_some())
                        && check_burst(config.burst).is_ok()
                        && config.t0 <= now.saturating_add(CLAIM_TIMEOUT_NS)
                        && (config.unlimited()
                            || debt == 0
                            || nanoseconds_for(debt, config.rate) <= MOST_DEBT_NS)
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

/// What a grant is computed from: the configuration, the time and `S`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Look {
    pub(super) generation: u32,
    pub(super) config: Config,
    pub(super) now: u64,
    pub(super) spent: u64,
}

impl<C: Clock, S: Deref<Target = BucketCell>> TokenBucket<C, S> {
    /// `S`, the configuration and the time, read in that order: a first
    /// attempt computes at a time no earlier than that of the `S` it
    /// replaces.
    pub(super) fn look(&self) -> Look {
        let spent = self.cell.spent.load(Ordering::Acquire);
        let (generation, config) = self.config();
        let now = self.clock.now();
        Look {
            generation,
            config,
            now,
            spent,
        }
    }

    /// After a [`spend`](Self::spend) on the configuration of `generation`
    /// at time `now` failed: the `S` found there, and that time again
    /// unless the configuration changed meanwhile. Reading the clock again
    /// would widen the window in which the next attempt can fail too; why
    /// the old time may stay is told at `spend`.
    pub(super) fn look_after_losing(&self, generation: u32, now: u64, spent: u64) -> Look {
        let (current, config) = self.config();
        Look {
            generation: current,
            config,
            now: if current == generation {
                now
            } else {
                self.clock.now()
            },
            spent,
        }
    }

    /// Moves `S` from `spent` past any tokens above the burst and then by
    /// `n`, returning the new `S`, or the `S` another caller left there
    /// first.
    ///
    /// `level` is the level of `spent` at a time `now` that may be older
    /// than `spent` itself: callers read the clock after `S`, but keep the
    /// reading when they try again with the `S` a failure returned. That is
    /// sound because every `S` in the cell computed at a time `t` is at
    /// least `V(t) - burst`: here by skipping the tokens above the burst,
    /// in [`return_tokens`](Self::return_tokens) by returning none above
    /// it, and on a new configuration by starting its line at most a burst
    /// above `S`. So an `S` that the bucket is over full against at `now`
    /// was computed before `now`, and a burst cap applied at `now` is never
    /// behind one already applied, which would let up to rate x staleness
    /// bytes too many through. An `S` computed after `now` leaves the
    /// bucket below its burst at `now`, so no cap is applied, and the
    /// tokens counted in hand at `now` are in hand later too: an old time
    /// can only make a caller wait, never let it through early.
    pub(super) fn spend(&self, spent: u64, level: i128, burst: u64, n: u64) -> Result<u64, u64> {
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

    /// Returns up to `n` spent tokens to the bucket, but none that would
    /// lift it above its burst: those would never be granted, since the
    /// next grant skips them, and leaving them out keeps `S` at least
    /// `V(now) - burst`, which [`spend`](Self::spend) relies on. The clock
    /// is read after `S` here, so that the cap is applied at a time no
    /// earlier than the `S` it lowers. Returns how many it returned.
    pub(super) fn return_tokens(&self, n: u64) -> u64 {
        let mut spent = self.cell.spent.load(Ordering::Acquire);
        loop {
            let config = self.config().1;
            let returned = if config.unlimited() {
                n
            } else {
                let room = i128::from(config.burst) - config.level(spent, self.clock.now());
                room.clamp(0, n.into()) as u64
            };
            match self.cell.spent.compare_exchange(
                spent,
                spent.wrapping_sub(returned),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return returned,
                Err(actual) => spent = actual,
            }
        }
    }

    /// The current generation and its configuration, or
    /// [`Config::DAMAGED`] if none can be read (or its burst is out of
    /// range, which no writer publishes): bounded, never a spin.
    pub(super) fn config(&self) -> (u32, Config) {
        let mut generation = 0;
        for _ in 0..READ_ATTEMPTS {
            generation = self.cell.generation.load(Ordering::Acquire);
            if let Some(config) = self.cell.slots[generation as usize % SLOTS].read(generation) {
                if check_burst(config.burst).is_err() {
                    break;
                }
                return (generation, config);
            }
            // A writer went round every slot while we read: read again.
            std::hint::spin_loop();
        }
        self.damaged.store(true, Ordering::Relaxed);
        (generation, Config::DAMAGED)
    }

    /// Publishes a configuration with the given changes, continuing the
    /// fill line from now. Kept out of line: it is rare, and inlined it
    /// would crowd the grants' fast path.
    #[cold]
    #[inline(never)]
    pub(super) fn publish(&self, change: NewConfig) {
        // A damaged cell is left as it is: writing a configuration into it
        // would hide the damage from the others on it, while only a new
        // cell (`--reset`) is sound again.
        if self.config().1.damaged {
            return;
        }
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

    fn publish_claimed(&self, token: u64, took_over: bool, change: NewConfig) -> bool {
        let (generation, old) = self.config();
        if old.damaged {
            // Damaged while we held the claim: give up, as at the start.
            return true;
        }
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
            damaged: false,
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
            // A claim from the future is as stale as an old one: every
            // writer runs on the same clock, so it can only be damage to
            // a shared cell, and waiting for it would wait forever.
            let stale = held != 0
                && (now.saturating_sub(held) > CLAIM_TIMEOUT_NS
                    || held.saturating_sub(now) > CLAIM_TIMEOUT_NS);
            if (held == 0 || stale)
                && self
                    .cell
                    .claim
                    .compare_exchange(held, token, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return (token, stale);
            }
            crate::atomics::back_off();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod damage_tests {
    //! What a bucket does with a cell that something else wrote to, as a
    //! damaged share file holds.
    use crate::atomics::Ordering;
    use crate::{BucketCell, Clock, Damaged, Denied, FakeClock, Fill, Limit, TokenBucket};

    const SEC: u64 = 1_000_000_000;

    fn bucket() -> TokenBucket<FakeClock> {
        TokenBucket::with_clock(
            Limit::per_second(1000),
            100,
            Fill::Full,
            FakeClock::new(5 * SEC),
        )
        .unwrap()
    }

    #[test]
    fn a_claim_from_the_future_is_taken_over_not_waited_for() {
        let bucket = bucket();
        bucket.cell.claim.store(u64::MAX, Ordering::Release);
        bucket.set_limit(Limit::per_second(2000));
        assert_eq!(bucket.limit(), Limit::per_second(2000));
    }

    #[test]
    fn a_generation_written_over_is_found_damaged_and_nothing_is_granted() {
        let bucket = bucket();
        assert!(!bucket.damaged());
        // Slot 3 holds no configuration of this generation.
        bucket.cell.generation.store(0xdead_beef, Ordering::Release);
        assert_eq!(bucket.acquire(10), Err(Damaged));
        assert!(bucket.damaged());
        assert_eq!(bucket.try_acquire(1), Err(Denied::Damaged));
        let paid = bucket.reserve(500);
        assert_eq!(bucket.wait(&paid), Err(Damaged));
        // Setters leave the damage for everyone on the cell to see.
        bucket.set_limit(Limit::per_second(5));
        assert_eq!(bucket.cell.generation.load(Ordering::Acquire), 0xdead_beef);
        assert_eq!(bucket.clock().now(), 5 * SEC, "nobody slept");
    }

    #[test]
    fn a_burst_out_of_range_is_damage() {
        let bucket = bucket();
        bucket.cell.slots[0].burst.store(0, Ordering::Release);
        assert_eq!(bucket.acquire(1), Err(Damaged));
    }

    #[test]
    fn a_sound_cell_has_readable_settings_no_future_and_less_than_an_hour_of_debt() {
        let now = 5 * SEC;
        let fresh = BucketCell::new(Limit::per_second(1000), 100, Fill::Full, now).unwrap();
        assert!(fresh.is_sound(now));
        // Made by a clock more than a second ahead of ours.
        assert!(fresh.is_sound(now - SEC));
        assert!(!fresh.is_sound(now - SEC - 1));

        let indebted = bucket();
        let _ = indebted.reserve(100 + 1000 * 3600);
        assert!(indebted.cell.is_sound(now), "an hour of debt");
        let _ = indebted.reserve(1);
        assert!(!indebted.cell.is_sound(now), "more than an hour of debt");

        let unreadable = bucket();
        unreadable.cell.slots[0].stamp.store(7, Ordering::Release);
        assert!(!unreadable.cell.is_sound(now));
    }
}
