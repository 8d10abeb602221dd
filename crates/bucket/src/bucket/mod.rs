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

use crate::atomics::{AtomicBool, AtomicU64, Ordering};
use crate::clock::Clock;
#[cfg(not(loom))]
use crate::clock::MonotonicClock;
use crate::rate::Limit;
use cell::{Look, NewConfig};
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
    /// The bucket's cell is damaged: see [`Damaged`].
    Damaged,
}

/// The bucket's cell holds no readable configuration: shared memory that
/// something other than a bucket wrote to. Nothing more is granted from
/// it; a new cell is the only remedy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the bucket's shared state is damaged: it holds no readable settings")]
pub struct Damaged;

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

/// Why an attempt at a grant must be made again.
#[derive(Debug, Clone, Copy)]
enum Retry {
    /// Another caller moved `S` first, to this.
    Lost(u64),
    /// The fill line must be rebased first.
    Rebase,
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
    /// Tokens granted through this handle, net of those given back, once
    /// [`TokenBucket::counting_grants`] asked for it.
    granted: Option<AtomicU64>,
    /// Set once a read of the cell found it damaged; see
    /// [`TokenBucket::damaged`].
    damaged: AtomicBool,
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
        TokenBucket {
            cell,
            clock,
            granted: None,
            damaged: AtomicBool::new(false),
        }
    }

    /// Whether the cell was found damaged: memory shared with others that
    /// holds no readable configuration. From then on nothing is granted:
    /// [`acquire`](Self::acquire), [`wait`](Self::wait) and
    /// [`try_acquire`](Self::try_acquire) fail, setters change nothing,
    /// and [`reserve`](Self::reserve) and [`deadline`](Self::deadline),
    /// which cannot fail, hand out reservations that callers must not use
    /// without asking this first.
    pub fn damaged(&self) -> bool {
        self.damaged.load(Ordering::Relaxed)
    }

    /// Every token ever spent, modulo 2^64: the difference of two readings
    /// is what was spent between them, by everyone using the cell, and
    /// what the bucket threw away above its burst meanwhile. A bucket left
    /// idle throws away what flows in, once the next grant comes; what
    /// was granted alone is [`TokenBucket::granted`].
    pub fn spent(&self) -> u64 {
        self.cell.spent().load(Ordering::Acquire)
    }

    /// Counts the tokens granted through this handle from now on, for
    /// [`TokenBucket::granted`]: one more atomic addition per grant.
    /// Grants while unlimited spend nothing and are not counted.
    pub fn counting_grants(mut self) -> Self {
        self.granted = Some(AtomicU64::new(0));
        self
    }

    /// Tokens granted through this handle since
    /// [`TokenBucket::counting_grants`], net of those given back, modulo
    /// 2^64; `None` unless counting.
    pub fn granted(&self) -> Option<u64> {
        self.granted
            .as_ref()
            .map(|granted| granted.load(Ordering::Acquire))
    }

    /// Adds `n` to the grants counted, if counting.
    fn count_granted(&self, n: u64) {
        if let Some(granted) = &self.granted {
            granted.fetch_add(n, Ordering::AcqRel);
        }
    }

    /// Takes `n` tokens now, or says why not. Never blocks.
    #[inline]
    pub fn try_acquire(&self, n: u64) -> Result<(), Denied> {
        self.grant(|look| self.try_once(look, n))
    }

    /// What `attempt` decides on one look at the bucket: the first in a
    /// straight line, the rest (after a race or a change) out of line.
    #[inline]
    fn grant<T>(&self, attempt: impl Fn(&Look) -> Result<T, Retry>) -> T {
        let look = self.look();
        match attempt(&look) {
            Ok(decided) => decided,
            Err(retry) => self.again(look.generation, look.now, retry, attempt),
        }
    }

    /// The attempts after the first, of a grant whose first attempt on
    /// the configuration of `generation` at time `now` failed for `retry`:
    /// kept out of line, so that the first is a straight line.
    #[cold]
    fn again<T>(
        &self,
        generation: u32,
        now: u64,
        mut retry: Retry,
        attempt: impl Fn(&Look) -> Result<T, Retry>,
    ) -> T {
        let mut look = self.look_again(generation, now, retry);
        loop {
            match attempt(&look) {
                Ok(answer) => return answer,
                Err(again) => retry = again,
            }
            look = self.look_again(look.generation, look.now, retry);
        }
    }

    /// One attempt of [`try_acquire`](Self::try_acquire) on what `look`
    /// saw: its answer, or why it must be tried again.
    #[inline]
    fn try_once(&self, look: &Look, n: u64) -> Result<Result<(), Denied>, Retry> {
        let config = &look.config;
        if config.paused || config.unlimited() || n == 0 || n > config.burst {
            return Ok(Self::unmetered(*config, n));
        }
        let level = config
            .level_unless_rebase_due(look.spent, look.now)
            .ok_or(Retry::Rebase)?;
        if level < i128::from(n) {
            let mark = look.spent.wrapping_add(n);
            return Ok(Err(Self::wait_for(config.time_of(mark), look.now)));
        }
        self.spend(look.spent, level, config.burst, n)
            .map(|_| {
                self.count_granted(n);
                Ok(())
            })
            .map_err(Retry::Lost)
    }

    /// What the next attempt works on after one, on the configuration of
    /// `generation` and the time `now`, failed for `retry`.
    fn look_again(&self, generation: u32, now: u64, retry: Retry) -> Look {
        match retry {
            Retry::Lost(actual) => self.look_after_losing(generation, now, actual),
            Retry::Rebase => {
                self.publish(NewConfig::default());
                self.look()
            }
        }
    }

    /// What [`try_acquire`](Self::try_acquire) says when the bucket does
    /// not meter the request: paused, unlimited, nothing asked or more
    /// than the burst.
    ///
    /// Takes the configuration by value, as do the other cold paths: a
    /// reference would make the fast path store what it refers to, and
    /// stores before the compare-exchange delay it.
    #[cold]
    fn unmetered(config: cell::Config, n: u64) -> Result<(), Denied> {
        if config.damaged {
            Err(Denied::Damaged)
        } else if config.paused {
            Err(Denied::Paused)
        } else if config.unlimited() || n == 0 {
            Ok(())
        } else {
            Err(Denied::ExceedsBurst {
                burst: config.burst,
            })
        }
    }

    /// How long from `now` until `ready`, when the fill line reaches the
    /// tokens asked for (`S + n`, as `n` is at most the burst, so the level
    /// is below it).
    fn wait_for(ready: Option<u64>, now: u64) -> Denied {
        Denied::Wait(Duration::from_nanos(
            ready.unwrap_or(now).saturating_sub(now),
        ))
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
    /// bucket.wait(&paid).unwrap();
    /// assert_eq!(bucket.clock().now(), 250_000_000);
    /// assert_eq!(bucket.deadline(&paid), None);
    /// ```
    ///
    /// `n` may exceed the burst. Requests over 2^40 bytes are capped at
    /// 2^40; [`TokenBucket::acquire`] splits them.
    pub fn reserve(&self, n: u64) -> Reservation {
        let n = n.min(MAX_RESERVATION);
        self.grant(|look| self.reserve_once(look, n))
    }

    /// One attempt of [`reserve`](Self::reserve) on what `look` saw.
    #[inline]
    fn reserve_once(&self, look: &Look, n: u64) -> Result<Reservation, Retry> {
        let config = &look.config;
        if config.unlimited() || n == 0 {
            return Ok(Reservation {
                covered_at: None,
                taken: 0,
            });
        }
        let level = config
            .level_unless_rebase_due(look.spent, look.now)
            .ok_or(Retry::Rebase)?;
        let new_spent = self
            .spend(look.spent, level, config.burst, n)
            .map_err(Retry::Lost)?;
        self.count_granted(n);
        let in_hand = level.min(i128::from(config.burst));
        Ok(Reservation {
            covered_at: (in_hand < i128::from(n)).then_some(new_spent),
            taken: n,
        })
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
    /// Fails at once if the cell is found damaged.
    pub fn wait(&self, reservation: &Reservation) -> Result<(), Damaged> {
        loop {
            let (generation, config) = self.config();
            if config.damaged {
                return Err(Damaged);
            }
            if config.paused {
                self.clock
                    .sleep_until(u64::MAX, self.cell.generation(), generation);
                continue;
            }
            let Some(mark) = reservation.covered_at else {
                return Ok(());
            };
            if config.unlimited() {
                return Ok(());
            }
            match config.time_of(mark) {
                Some(deadline) if deadline > self.clock.now() => {
                    self.clock
                        .sleep_until(deadline, self.cell.generation(), generation)
                }
                _ => return Ok(()),
            }
        }
    }

    /// Returns up to `unused` of the tokens `reservation` took, as if they
    /// had never been taken: they are in hand again for whoever comes next.
    /// Whoever reserved after it still waits for its own mark, so nothing
    /// is granted that the fill line has not brought in. Tokens that would
    /// lift the bucket above its burst are not returned: the next grant
    /// would skip them anyway.
    pub fn give_back(&self, reservation: &mut Reservation, unused: u64) {
        let n = unused.min(reservation.taken);
        if n == 0 {
            return;
        }
        reservation.taken -= n;
        reservation.covered_at = reservation.covered_at.map(|mark| mark.wrapping_sub(n));
        let returned = self.return_tokens(n);
        if let Some(granted) = &self.granted {
            granted.fetch_sub(returned, Ordering::AcqRel);
        }
    }

    /// Takes `n` tokens, sleeping for as long as the deficit takes to
    /// refill. `n` may exceed the burst. Fails if the cell is found
    /// damaged.
    pub fn acquire(&self, n: u64) -> Result<(), Damaged> {
        let mut left = n;
        while left > 0 {
            let part = left.min(MAX_RESERVATION);
            self.wait(&self.reserve(part))?;
            left -= part;
        }
        Ok(())
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
    /// sleeper.join().unwrap().unwrap();
    /// assert!(changed.elapsed() < Duration::from_secs(10));
    /// ```
    pub fn set_limit(&self, limit: Limit) {
        self.publish(NewConfig {
            limit: Some(limit),
            ..NewConfig::default()
        });
    }

    /// Pauses or resumes. While paused nothing is granted, sleepers stay
    /// asleep and no tokens accrue, so on resume at most the burst passes at
    /// once, counting what was reserved.
    pub fn set_paused(&self, paused: bool) {
        self.publish(NewConfig {
            paused: Some(paused),
            ..NewConfig::default()
        });
    }

    /// True while paused.
    pub fn paused(&self) -> bool {
        self.config().1.paused
    }

    /// Changes the burst from now on; tokens in hand above it are dropped.
    pub fn set_burst(&self, burst: u64) -> Result<(), InvalidBurst> {
        check_burst(burst)?;
        self.publish(NewConfig {
            burst: Some(burst),
            ..NewConfig::default()
        });
        Ok(())
    }

    /// Changes rate and burst together, as one change.
    pub fn set(&self, limit: Limit, burst: u64) -> Result<(), InvalidBurst> {
        check_burst(burst)?;
        self.publish(NewConfig {
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

    /// The generation of the settings in force: it moves with every
    /// change, by any user of the cell. See
    /// [`sleep_until_changed`](Self::sleep_until_changed).
    pub fn generation(&self) -> u32 {
        self.config().0
    }

    /// Blocks until the settings are no longer those of generation
    /// `seen`, changed by any user of the cell, in any process; may also
    /// return early (a signal), so callers look again. For those who do
    /// not sleep in the bucket (an event loop) but must know when a
    /// change re-times their waits.
    pub fn sleep_until_changed(&self, seen: u32) {
        self.clock
            .sleep_until(u64::MAX, self.cell.generation(), seen);
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

    /// Where the bucket's state lives.
    pub fn cell(&self) -> &S {
        &self.cell
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
