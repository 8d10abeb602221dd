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
//! How a configuration is published and read lock-free is told in
//! [`cell`](self::cell)'s documentation.

mod cell;

pub use cell::BucketCell;

use crate::atomics::Ordering;
use crate::clock::Clock;
#[cfg(not(loom))]
use crate::clock::MonotonicClock;
use crate::rate::Limit;
use cell::Change;
use std::fmt;
use std::ops::Deref;
use std::time::Duration;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("burst must be 1 byte to 4 EiB, not {0} bytes")]
pub struct InvalidBurst(pub u64);

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
        self.cell.spent().load(Ordering::Acquire)
    }

    /// Takes `n` tokens now, or says why not. Never blocks.
    pub fn try_acquire(&self, n: u64) -> Result<(), Denied> {
        let mut spent = self.cell.spent().load(Ordering::Acquire);
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
            let Some(level) = config.level_unless_rebase_due(spent, now) else {
                self.publish(Change::default());
                continue;
            };
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
    /// Reserving lets a caller do other work (or sleep in its own event
    /// loop) until the tokens are covered, then [`TokenBucket::wait`] for
    /// what is left, exactly; here on a [`FakeClock`](crate::FakeClock),
    /// which jumps to the deadline instead of sleeping:
    ///
    /// ```
    /// use shape_bucket::{Clock, FakeClock, Fill, Limit, TokenBucket};
    ///
    /// let bucket = TokenBucket::with_clock(Limit::per_second(1000), 100, Fill::Empty, FakeClock::new(0)).unwrap();
    /// let paid = bucket.reserve(250);
    /// // 250 bytes at 1000 B/s are covered a quarter of a second from now.
    /// assert_eq!(bucket.deadline(&paid), Some(250_000_000));
    /// bucket.wait(&paid);
    /// assert_eq!(bucket.clock().now(), 250_000_000);
    /// assert_eq!(bucket.deadline(&paid), None);
    /// ```
    ///
    /// `n` may exceed the burst. Requests over 2^40 bytes are capped at
    /// 2^40; [`TokenBucket::acquire`] splits them.
    pub fn reserve(&self, n: u64) -> Reservation {
        let n = n.min(MAX_RESERVATION);
        let mut spent = self.cell.spent().load(Ordering::Acquire);
        loop {
            let config = self.config().1;
            if config.unlimited() || n == 0 {
                return Reservation {
                    covered_at: None,
                    taken: 0,
                };
            }
            let now = self.clock.now();
            let Some(level) = config.level_unless_rebase_due(spent, now) else {
                self.publish(Change::default());
                continue;
            };
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
                    .sleep_until(u64::MAX, self.cell.generation(), generation);
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
                        .sleep_until(deadline, self.cell.generation(), generation)
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
        self.cell.spent().fetch_sub(n, Ordering::AcqRel);
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
    /// starts from a full bucket. Threads asleep in the bucket wake at
    /// once and sleep on against the new rate:
    ///
    /// ```
    /// use shape_bucket::{Limit, TokenBucket};
    /// use std::sync::Arc;
    /// use std::time::{Duration, Instant};
    ///
    /// // 1 KiB/s: a 64 KiB acquire would sleep for a minute.
    /// let bucket = Arc::new(TokenBucket::new(Limit::per_second(1024), 1).unwrap());
    /// let sleeper = {
    ///     let bucket = bucket.clone();
    ///     std::thread::spawn(move || bucket.acquire(64 << 10))
    /// };
    /// std::thread::sleep(Duration::from_millis(50));
    /// let changed = Instant::now();
    /// bucket.set_limit(Limit::per_second(64 << 20)); // 64 MiB/s: a millisecond
    /// sleeper.join().unwrap();
    /// assert!(changed.elapsed() < Duration::from_secs(10));
    /// ```
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
        let spent = self.cell.spent().load(Ordering::Acquire);
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
