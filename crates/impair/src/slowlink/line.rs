//! The delay line: chunks held until their release time, first in, first
//! out, in a buffer whose memory is counted.
//!
//! Release times never go down, so bytes leave in the order they came: a
//! chunk whose jitter draw would overtake the one before it leaves right
//! after that one instead. The line knows nothing of sockets or threads;
//! its users take due chunks out and say when they are done with them,
//! which is when their memory counts no more. A chunk is its bytes
//! (`Vec<u8>`), or anything with a [`Footprint`] that stands for bytes
//! kept elsewhere.

use super::LONGEST_DELAY;
use shape_leaves::duration::nanos;
use std::collections::VecDeque;
use std::time::Duration;

/// Spare buffers kept for reuse, so that a steady flow allocates nothing.
const SPARES: usize = 2;
/// What a chunk costs in memory beyond its buffer: its place in the queue
/// and the allocator's header. Counted, so that a flood of tiny chunks
/// cannot hold far more memory than the buffer limit says.
const CHUNK_OVERHEAD: u64 = 64;
/// Slack a chunk's buffer may have beyond twice its length before it is
/// copied into one that fits.
const SLACK: usize = 64;

/// What a line holds: something that costs memory while it waits.
pub trait Footprint {
    /// What it costs while held: its buffer and bookkeeping, or the bytes
    /// it stands for where they wait elsewhere (in a pipe).
    fn footprint(&self) -> u64;
}

impl Footprint for Vec<u8> {
    fn footprint(&self) -> u64 {
        self.capacity() as u64 + CHUNK_OVERHEAD
    }
}

/// Chunks waiting for their release time, in order.
pub struct Line<T = Vec<u8>> {
    delay: u64,
    jitter: u64,
    rng: fastrand::Rng,
    waiting: VecDeque<(u64, T)>,
    /// What was pushed and not yet handed back through
    /// [`Line::done_with`], by footprint.
    held: u64,
    /// The release time of the last chunk pushed: none leaves before it.
    last_release: u64,
}

impl<T: Footprint> Line<T> {
    /// A line holding chunks for `delay`, varied by up to `jitter` either
    /// way with draws from `rng`.
    pub fn new(delay: Duration, jitter: Duration, rng: fastrand::Rng) -> Line<T> {
        Line {
            delay: nanos(delay.min(LONGEST_DELAY)),
            jitter: nanos(jitter.min(LONGEST_DELAY)),
            rng,
            waiting: VecDeque::new(),
            held: 0,
            last_release: 0,
        }
    }

    /// The memory of the chunks in the line or taken out and not yet done
    /// with: their buffers and bookkeeping, a little more than their bytes.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// True if and only if no chunk waits in the line.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// When the next chunk is due, if one waits.
    pub fn next_release(&self) -> Option<u64> {
        self.waiting.front().map(|(release, _)| *release)
    }

    /// Puts `chunk`, paid for at `now`, in the line, and returns when it
    /// is due.
    pub fn push(&mut self, chunk: T, now: u64) -> u64 {
        let release = self.release_time(now);
        self.held += chunk.footprint();
        self.waiting.push_back((release, chunk));
        release
    }

    /// Puts `chunk`, paid for at `now`, in the line, due no sooner than
    /// `not_before` if given (a lost packet's retransmission, a bound on
    /// throughput), and returns when it is due. Those behind it wait.
    pub fn push_not_before(&mut self, chunk: T, now: u64, not_before: Option<u64>) -> u64 {
        if let Some(not_before) = not_before {
            self.last_release = self.last_release.max(not_before);
        }
        self.push(chunk, now)
    }

    /// Takes out the next chunk if it is due at `now`. It still counts as
    /// held until given to [`Line::done_with`].
    pub fn pop_due(&mut self, now: u64) -> Option<T> {
        if self.next_release()? > now {
            return None;
        }
        self.waiting.pop_front().map(|(_, chunk)| chunk)
    }

    /// Ends the holding of a chunk taken out by [`Line::pop_due`]: it has
    /// been passed on.
    pub fn done_with(&mut self, chunk: &T) {
        self.held -= chunk.footprint();
        if self.waiting.is_empty() && self.waiting.capacity() > 1024 {
            // The queue of a past flood of small chunks.
            self.waiting = VecDeque::new();
        }
    }

    /// Holds chunks put in from now on for `delay`, varied by up to
    /// `jitter`; those held already keep their release times, and none
    /// overtakes another.
    pub fn set_delay(&mut self, delay: Duration, jitter: Duration) {
        self.delay = nanos(delay.min(LONGEST_DELAY));
        self.jitter = nanos(jitter.min(LONGEST_DELAY));
    }

    /// `now` plus the delay, moved by a uniform draw within the jitter
    /// either way, never before `now` and never before the chunk ahead.
    fn release_time(&mut self, now: u64) -> u64 {
        let delay = if self.jitter == 0 {
            self.delay
        } else {
            // Both at most an hour in nanoseconds, so the sum fits.
            let low = self.delay as i64 - self.jitter as i64;
            let high = self.delay as i64 + self.jitter as i64;
            self.rng.i64(low..=high).max(0) as u64
        };
        let release = now.saturating_add(delay).max(self.last_release);
        self.last_release = release;
        release
    }
}

/// Buffers for chunks, reused: a steady flow allocates nothing, and a
/// short read into a large buffer is kept in one that fits.
#[derive(Default)]
pub struct Spares(Vec<Vec<u8>>);

impl Spares {
    /// A buffer of `len` bytes to fill, reusing a spare one when there is
    /// one.
    pub fn buffer(&mut self, len: usize) -> Vec<u8> {
        let mut buffer = self.0.pop().unwrap_or_default();
        buffer.resize(len, 0);
        buffer
    }

    /// A buffer holding a copy of `bytes`.
    pub fn copy(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut buffer = self.buffer(0);
        buffer.extend_from_slice(bytes);
        self.fitted(buffer)
    }

    /// Keeps `buffer`, no longer used, for a later [`Spares::buffer`].
    pub fn recycle(&mut self, buffer: Vec<u8>) {
        if self.0.len() < SPARES {
            self.0.push(buffer);
        }
    }

    /// `bytes` in a buffer that fits them: a short read into a large
    /// buffer keeps the bytes, not the room around them.
    pub fn fitted(&mut self, mut bytes: Vec<u8>) -> Vec<u8> {
        if bytes.capacity() > 2 * bytes.len() + SLACK {
            let fitted = bytes.as_slice().to_vec();
            self.recycle(std::mem::replace(&mut bytes, fitted));
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn line(delay_ms: u64, jitter_ms: u64) -> Line {
        Line::new(
            Duration::from_millis(delay_ms),
            Duration::from_millis(jitter_ms),
            fastrand::Rng::with_seed(7),
        )
    }

    #[test]
    fn every_chunk_leaves_exactly_the_delay_after_it_is_paid() {
        let mut line = line(100, 0);
        for i in 0..10u64 {
            assert_eq!(
                line.push(vec![i as u8; 10], 1000 + i * 3 * MS),
                1000 + i * 3 * MS + 100 * MS
            );
        }
        for i in 0..10u64 {
            let due = 1000 + i * 3 * MS + 100 * MS;
            assert_eq!(line.pop_due(due - 1), None, "chunk {i} a nanosecond early");
            assert_eq!(line.pop_due(due), Some(vec![i as u8; 10]));
        }
        assert!(line.is_empty());
    }

    #[test]
    fn memory_is_held_until_done_with() {
        let mut line = line(0, 0);
        let mut spares = Spares::default();
        line.push(vec![1; 300], 0);
        line.push(spares.copy(&[2; 200]), 0);
        let both = line.held();
        assert!((500 + 2 * CHUNK_OVERHEAD..600 + 2 * CHUNK_OVERHEAD).contains(&both));
        let first = line.pop_due(0).unwrap();
        assert_eq!(line.held(), both, "taken out is still in memory");
        line.done_with(&first);
        assert_eq!(line.held(), both - 300 - CHUNK_OVERHEAD);
        let second = line.pop_due(0).unwrap();
        assert_eq!(second, vec![2; 200]);
        line.done_with(&second);
        assert_eq!(line.held(), 0);
        assert_eq!(line.pop_due(u64::MAX), None);
    }

    #[test]
    fn small_chunks_in_large_buffers_hold_only_their_bytes() {
        let mut line = line(1000, 0);
        let mut spares = Spares::default();
        for i in 0..1000 {
            let mut buffer = spares.buffer(64 * 1024);
            buffer.truncate(10);
            line.push(spares.fitted(buffer), i);
        }
        assert!(
            line.held() <= 1000 * (10 + 2 * CHUNK_OVERHEAD),
            "{}",
            line.held()
        );
    }

    #[test]
    fn buffers_are_reused() {
        let mut line = line(0, 0);
        let mut spares = Spares::default();
        let buffer = spares.buffer(64 * 1024);
        line.push(buffer, 0);
        let chunk = line.pop_due(0).unwrap();
        let address = chunk.as_ptr();
        line.done_with(&chunk);
        spares.recycle(chunk);
        let reused = spares.buffer(1000);
        assert_eq!(reused.as_ptr(), address);
    }

    #[test]
    fn jitter_spreads_delays_evenly_either_way() {
        let mut line = line(100, 20);
        let mut delays = Vec::new();
        // A second apart, so that no draw is held back by the one before.
        for i in 0..20_000u64 {
            let paid = i * 1000 * MS;
            delays.push(line.push(Vec::new(), paid) - paid);
        }
        let lowest = *delays.iter().min().unwrap();
        let highest = *delays.iter().max().unwrap();
        let mean = delays.iter().sum::<u64>() as f64 / delays.len() as f64;
        assert!((80 * MS..81 * MS).contains(&lowest), "{lowest}");
        assert!((119 * MS..=120 * MS).contains(&highest), "{highest}");
        assert!((mean - 100e6).abs() < 0.5e6, "{mean}");
    }

    #[test]
    fn jitter_never_reorders_and_never_releases_early() {
        let mut line = line(10, 50);
        let mut last = 0;
        for i in 0..10_000u64 {
            let paid = i * MS / 10;
            let release = line.push(vec![(i % 251) as u8], paid);
            assert!(release >= last, "chunk {i} would overtake");
            assert!(release >= paid, "chunk {i} would leave before it came");
            last = release;
        }
        for i in 0..10_000u64 {
            assert_eq!(line.pop_due(u64::MAX), Some(vec![(i % 251) as u8]));
        }
    }
}
