//! Time, and waiting for it. The bucket never reads the time or sleeps by
//! itself: it asks a [`Clock`], so tests can move time by hand with a
//! [`FakeClock`] and the real program uses the system-wide monotonic clock.
//!
//! The real clock is `CLOCK_MONOTONIC` in nanoseconds rather than an
//! `Instant`, because an `Instant` has a per-process epoch and the bucket's
//! state is meant to be shared between processes.

use crate::atomics::AtomicU32;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of time in nanoseconds, and a way to sleep until a moment on it.
pub trait Clock {
    /// Nanoseconds on this clock. Never decreases.
    fn now(&self) -> u64;

    /// Blocks until `deadline` (a value of [`Clock::now`]), or until `word`
    /// no longer holds `seen`, whichever comes first. May return early for
    /// no reason; callers re-check and sleep again.
    ///
    /// The word is the bucket's configuration generation: a rate change
    /// bumps it and calls [`Clock::wake`], so a sleeper re-times its wait at
    /// once instead of sleeping out a deadline computed at the old rate.
    fn sleep_until(&self, deadline: u64, word: &AtomicU32, seen: u32);

    /// Wakes every thread, in any process, sleeping on `word`.
    fn wake(&self, word: &AtomicU32);
}

/// `CLOCK_MONOTONIC`: one time line for every process on the machine.
/// Sleeps are futex waits with an absolute deadline, so they neither drift
/// nor poll, and a wake from another process reaches them.
#[cfg(not(loom))]
#[derive(Debug, Clone, Copy, Default)]
pub struct MonotonicClock;

#[cfg(not(loom))]
impl Clock for MonotonicClock {
    fn now(&self) -> u64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        // The monotonic clock counts from boot and is never negative.
        (t.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec as u64)
    }

    fn sleep_until(&self, deadline: u64, word: &AtomicU32, seen: u32) {
        use rustix::thread::futex;
        let deadline = timespec(deadline);
        // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. The
        // futex is not private because the word may live in memory shared
        // between processes. Every outcome (woken, timed out, value already
        // changed, interrupted by a signal) sends the caller back to re-check.
        let _ = futex::wait_bitset(
            word,
            futex::Flags::empty(),
            seen,
            Some(&deadline),
            std::num::NonZeroU32::MAX,
        );
    }

    fn wake(&self, word: &AtomicU32) {
        use rustix::thread::futex;
        let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
    }
}

/// `moment`, in nanoseconds on [`MonotonicClock`], as the kernel takes a
/// moment on `CLOCK_MONOTONIC` (for a futex, or a timerfd of one's own).
pub fn timespec(moment: u64) -> rustix::time::Timespec {
    rustix::time::Timespec {
        tv_sec: (moment / 1_000_000_000).min(i64::MAX as u64) as i64,
        tv_nsec: (moment % 1_000_000_000) as _,
    }
}

/// A clock that moves only when told to. Sleeping on it jumps time straight
/// to the deadline, so blocking calls finish at once and a test can read how
/// long they would have slept.
#[derive(Debug, Default)]
pub struct FakeClock {
    now: AtomicU64,
}

impl FakeClock {
    /// A clock that reads `start` nanoseconds.
    pub fn new(start: u64) -> Self {
        Self {
            now: AtomicU64::new(start),
        }
    }

    /// Moves time forward by `ns` nanoseconds.
    pub fn advance(&self, ns: u64) {
        self.now.fetch_add(ns, Ordering::SeqCst);
    }

    /// Moves time to `t`, unless it is already later.
    pub fn advance_to(&self, t: u64) {
        self.now.fetch_max(t, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn sleep_until(&self, deadline: u64, _word: &AtomicU32, _seen: u32) {
        self.advance_to(deadline);
    }

    fn wake(&self, _word: &AtomicU32) {}
}

/// A reference to a clock, or a shared one, is that clock.
macro_rules! forward_clock {
    ($($pointer:ty),*) => {$(
        impl<C: Clock + ?Sized> Clock for $pointer {
            fn now(&self) -> u64 {
                (**self).now()
            }
            fn sleep_until(&self, deadline: u64, word: &AtomicU32, seen: u32) {
                (**self).sleep_until(deadline, word, seen)
            }
            fn wake(&self, word: &AtomicU32) {
                (**self).wake(word)
            }
        }
    )*};
}

forward_clock!(&C, std::sync::Arc<C>);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = MonotonicClock.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = MonotonicClock.now();
        assert!(b >= a + 1_000_000, "{a} then {b}");
    }

    #[test]
    fn monotonic_sleep_reaches_its_deadline() {
        let word = AtomicU32::new(0);
        let start = MonotonicClock.now();
        let deadline = start + 20_000_000;
        while MonotonicClock.now() < deadline {
            MonotonicClock.sleep_until(deadline, &word, 0);
        }
        assert!(MonotonicClock.now() - start < 2_000_000_000);
    }

    #[test]
    fn monotonic_sleep_returns_when_the_word_changes() {
        let word = std::sync::Arc::new(AtomicU32::new(0));
        let start = MonotonicClock.now();
        let waker = {
            let word = word.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(30));
                word.store(1, Ordering::SeqCst);
                MonotonicClock.wake(&word);
            })
        };
        // An hour's deadline: only the wake can end this in time.
        while word.load(Ordering::SeqCst) == 0 {
            MonotonicClock.sleep_until(start + 3_600_000_000_000, &word, 0);
        }
        waker.join().unwrap();
        assert!(MonotonicClock.now() - start < 10_000_000_000);
    }

    #[test]
    fn fake_clock_sleep_jumps_to_the_deadline() {
        let clock = FakeClock::new(5);
        clock.sleep_until(100, &AtomicU32::new(0), 0);
        assert_eq!(clock.now(), 100);
        clock.sleep_until(50, &AtomicU32::new(0), 0);
        assert_eq!(clock.now(), 100);
        clock.advance(7);
        assert_eq!(clock.now(), 107);
    }
}
