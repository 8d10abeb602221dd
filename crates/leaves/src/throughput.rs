//! What has passed, and how fast lately: a running total and the amounts
//! of the last second in tenths, kept by whoever moves the data (the copy
//! loops, the delay line, the proxy) and read by the bar, SIGUSR1 and
//! `--remote`. "How fast lately" is the rate over the last second, as pv
//! shows it, not the average since the start (which an initial burst
//! lifts above the limit for a long time) and not since whoever last
//! asked: idle for a second, it is 0.
//!
//! Keeping the recent amounts where the data moves, one clock reading per
//! chunk, is what lets a reader that wakes only when asked (a signal) say
//! what happened before it woke, with no thread sampling in the meantime.

use crate::counting::Counting;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What a run counts: one throughput for a copy, one for each direction
/// of a proxy, which are limited apart and so are told apart.
#[derive(Debug, Clone)]
pub enum Passed {
    One(Arc<Throughput>),
    Ways {
        up: Arc<Throughput>,
        down: Arc<Throughput>,
    },
}

impl Passed {
    /// Everything that passed so far, both ways.
    pub fn total(&self) -> u64 {
        match self {
            Passed::One(one) => one.total(),
            Passed::Ways { up, down } => up.total() + down.total(),
        }
    }

    /// The rate over the last second: `1.00 MiB/s`, or each direction's,
    /// `up 75.00 MiB/s, down 100.00 MiB/s`.
    pub fn recent(&self, counting: Counting) -> String {
        match self {
            Passed::One(one) => counting.show_rate(one.recent()),
            Passed::Ways { up, down } => format!(
                "up {}, down {}",
                counting.show_rate(up.recent()),
                counting.show_rate(down.recent())
            ),
        }
    }
}

/// How long a share's `--status` watches what its shapes spend.
pub const STATUS_WATCH: Duration = Duration::from_millis(500);

/// How fast the count that `read` gives grows, per second, watched over
/// [`STATUS_WATCH`] (a count that went back, as a Redis started afresh
/// may, grew by nothing).
pub fn growth<E>(mut read: impl FnMut() -> Result<u64, E>) -> Result<f64, E> {
    let (before, started) = (read()?, Instant::now());
    std::thread::sleep(STATUS_WATCH);
    let grown = read()?.saturating_sub(before);
    Ok(grown as f64 / started.elapsed().as_secs_f64())
}

/// How long "lately" is.
const RECENT: Duration = Duration::from_secs(1);
/// The slices of time it is kept in: tenths of a second.
const SLICE: Duration = Duration::from_millis(100);
/// Slices kept: a second's worth and the one being filled.
const SLICES: usize = 11;

/// A count of what passed, with its amounts of the last second.
#[derive(Debug)]
pub struct Throughput {
    total: AtomicU64,
    start: Instant,
    /// What passed in each slice: slot `i` holds slice number `stamps[i]`
    /// (counted from `start`), or is stale.
    amounts: [AtomicU64; SLICES],
    stamps: [AtomicU64; SLICES],
}

impl Default for Throughput {
    fn default() -> Self {
        Throughput::since(Instant::now())
    }
}

impl Throughput {
    /// A count starting at zero at `start`.
    pub fn since(start: Instant) -> Throughput {
        Throughput {
            total: AtomicU64::new(0),
            start,
            amounts: std::array::from_fn(|_| AtomicU64::new(0)),
            stamps: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
        }
    }

    /// Takes note that `n` more passed now.
    pub fn add(&self, n: u64) {
        self.add_at(n, Instant::now());
    }

    /// Everything that passed so far.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Raises the total to `total`, if it is more, without counting it as
    /// recent: for what a delay line counts only once it is out.
    pub fn settle(&self, total: u64) {
        self.total.fetch_max(total, Ordering::Relaxed);
    }

    /// What passed per second over the last second (or since the start,
    /// if that was less than a second ago).
    pub fn recent(&self) -> f64 {
        self.recent_at(Instant::now())
    }

    fn add_at(&self, n: u64, now: Instant) {
        self.total.fetch_add(n, Ordering::Relaxed);
        let slice = self.slice_of(now);
        let at = slice as usize % SLICES;
        let stamp = self.stamps[at].load(Ordering::Acquire);
        if stamp != slice
            && self.stamps[at]
                .compare_exchange(stamp, slice, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // The slot held a slice a second old or more: start it again.
            // An amount another thread adds in between is lost to the
            // recent rate only, never to the total.
            self.amounts[at].store(0, Ordering::Release);
        }
        self.amounts[at].fetch_add(n, Ordering::Relaxed);
    }

    fn recent_at(&self, now: Instant) -> f64 {
        let current = self.slice_of(now);
        // The last second: the slice being filled and the ten before it,
        // the oldest of which is partly out of the window.
        let oldest = current.saturating_sub(SLICES as u64 - 1);
        let slice_start = |slice: u64| {
            self.start + Duration::from_millis(slice.saturating_mul(SLICE.as_millis() as u64))
        };
        let window_start = slice_start(oldest).max(now.checked_sub(RECENT).unwrap_or(self.start));
        let seconds = now
            .saturating_duration_since(window_start.max(self.start))
            .as_secs_f64();
        if seconds <= 0.0 {
            return 0.0;
        }
        let mut amount = 0.0;
        for at in 0..SLICES {
            let stamp = self.stamps[at].load(Ordering::Acquire);
            if stamp > current || stamp < oldest {
                continue;
            }
            let mut part = self.amounts[at].load(Ordering::Relaxed) as f64;
            if stamp == oldest && current >= SLICES as u64 - 1 {
                // Only the end of the oldest slice lies in the window:
                // count as much of it as does, assuming it came evenly.
                let slice_end = slice_start(oldest + 1);
                let inside = slice_end.saturating_duration_since(window_start);
                part *= inside.as_secs_f64() / SLICE.as_secs_f64();
            }
            amount += part;
        }
        amount / seconds
    }

    /// Which slice of time `now` falls in, counted from the start.
    fn slice_of(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.start).as_nanos() / SLICE.as_nanos()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_last_second_not_the_average_since_the_start() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let passed = Throughput::since(start);
        // A 100 KiB burst at once, then 1 KiB every millisecond (1000
        // KiB/s) for two seconds.
        passed.add_at(100 * 1024, at(0));
        for ms in 1..=2000 {
            passed.add_at(1024, at(ms));
        }
        assert_eq!(passed.total(), 2100 * 1024);
        let rate = passed.recent_at(at(2000));
        assert!(
            (rate - 1000.0 * 1024.0).abs() < 0.011 * 1000.0 * 1024.0,
            "the burst has left the window: {rate}"
        );
        // Half a second in, the burst counts over that half second.
        let early = Throughput::since(start);
        early.add_at(100 * 1024, at(0));
        assert_eq!(early.recent_at(at(500)), 200.0 * 1024.0);
    }

    #[test]
    fn idle_for_a_second_the_rate_is_zero_and_the_total_stays() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let passed = Throughput::since(start);
        for ms in 0..3000 {
            passed.add_at(10, at(ms));
        }
        assert_eq!(passed.recent_at(at(4000)), 0.0);
        assert_eq!(passed.recent_at(at(60_000)), 0.0);
        assert_eq!(passed.total(), 30_000);
        // Back at work: the old slots are not counted again.
        passed.add_at(500, at(60_050));
        assert_eq!(passed.recent_at(at(61_000)), 500.0);
    }

    #[test]
    fn settling_raises_the_total_only() {
        let passed = Throughput::default();
        passed.add(5);
        passed.settle(9);
        passed.settle(3);
        assert_eq!(passed.total(), 9);
    }
}
