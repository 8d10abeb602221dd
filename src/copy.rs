//! The copy loop: read a chunk, pay for it from the bucket, write it on.
//!
//! shape holds at most one chunk: it reads only after the previous chunk is
//! written, so the producer upstream feels the limit as back-pressure
//! instead of shape reading ahead. The chunk size follows the rate, so that
//! writes are small enough to flow evenly at low rates and large enough to
//! be cheap at high ones.

use crate::bucket::TokenBucket;
use crate::clock::Clock;
use crate::rate::Limit;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest chunk: big enough that per-chunk costs vanish at any rate.
pub const MAX_CHUNK: usize = 128 * 1024;

/// How a [`Pump::forward`] ended without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The input reached its end.
    InputDone,
    /// `--stop-after` bytes have been forwarded.
    LimitReached,
}

/// A failed read or write, kept apart because they end a run differently.
#[derive(Debug)]
pub enum CopyError {
    Read(io::Error),
    Write(io::Error),
}

/// The bytes of one chunk at `limit`: about a millisecond's worth, at least
/// one byte, at most [`MAX_CHUNK`] and at most the burst.
pub fn chunk_size(limit: Limit, burst: u64) -> usize {
    let chunk = match limit {
        Limit::Unlimited => MAX_CHUNK,
        Limit::Rate(rate) => (rate.bytes_per_sec() / 1000.0).clamp(1.0, MAX_CHUNK as f64) as usize,
    };
    chunk.min(usize::try_from(burst).unwrap_or(usize::MAX))
}

/// Forwards inputs through a bucket, counting what passed.
pub struct Pump<'a, C: Clock> {
    bucket: &'a TokenBucket<C>,
    forwarded: &'a AtomicU64,
    remaining: Option<u64>,
    buffer: Vec<u8>,
}

impl<'a, C: Clock> Pump<'a, C> {
    /// A pump paying from `bucket`, adding each chunk to `forwarded`, and
    /// stopping for good after `stop_after` bytes if given.
    pub fn new(
        bucket: &'a TokenBucket<C>,
        forwarded: &'a AtomicU64,
        stop_after: Option<u64>,
    ) -> Self {
        Pump {
            bucket,
            forwarded,
            remaining: stop_after,
            buffer: vec![0; MAX_CHUNK],
        }
    }

    /// Copies `input` to `output` until the input ends or the stop-after
    /// budget is spent. A read interrupted by a signal is retried, and
    /// `write_all` retries interrupted writes, so no byte is lost or
    /// repeated.
    pub fn forward(
        &mut self,
        input: &mut impl Read,
        output: &mut impl Write,
    ) -> Result<Ended, CopyError> {
        loop {
            let budget = self.remaining.unwrap_or(u64::MAX);
            if budget == 0 {
                return Ok(Ended::LimitReached);
            }
            let want = chunk_size(self.bucket.limit(), self.bucket.burst())
                .min(usize::try_from(budget).unwrap_or(usize::MAX));
            let n = match input.read(&mut self.buffer[..want]) {
                Ok(0) => return Ok(Ended::InputDone),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(CopyError::Read(e)),
            };
            self.bucket.acquire(n as u64);
            output
                .write_all(&self.buffer[..n])
                .map_err(CopyError::Write)?;
            self.forwarded.fetch_add(n as u64, Ordering::Relaxed);
            if let Some(left) = &mut self.remaining {
                *left -= n as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::Fill;
    use crate::clock::FakeClock;
    use crate::rate::Rate;
    use std::sync::Arc;

    fn rate(bytes_per_sec: u64) -> Limit {
        Limit::Rate(Rate::from_whole(bytes_per_sec).unwrap())
    }

    #[test]
    fn chunks_follow_the_rate_within_bounds() {
        assert_eq!(chunk_size(Limit::Unlimited, 1 << 30), MAX_CHUNK);
        assert_eq!(chunk_size(rate(4096), 1 << 20), 4);
        assert_eq!(chunk_size(rate(1), 1 << 20), 1);
        assert_eq!(chunk_size(rate(1 << 20), 1 << 20), 1048);
        assert_eq!(chunk_size(rate(200 << 20), 1 << 30), MAX_CHUNK);
        assert_eq!(chunk_size(rate(200 << 20), 1000), 1000);
    }

    /// Hands out its data in reads of the sizes given, failing with EINTR
    /// in between.
    struct Jerky {
        data: Vec<u8>,
        at: usize,
        interrupt: bool,
    }

    impl Read for Jerky {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(self.data.len() - self.at).min(7);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    #[test]
    fn every_byte_arrives_once_at_exactly_the_rate() {
        let clock = Arc::new(FakeClock::new(0));
        let bucket = TokenBucket::with_clock(rate(1000), 10, Fill::Empty, clock.clone()).unwrap();
        let forwarded = AtomicU64::new(0);
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut input = Jerky {
            data: data.clone(),
            at: 0,
            interrupt: false,
        };
        let mut output = Vec::new();
        let ended = Pump::new(&bucket, &forwarded, None)
            .forward(&mut input, &mut output)
            .unwrap();
        assert_eq!(ended, Ended::InputDone);
        assert_eq!(output, data);
        assert_eq!(forwarded.load(Ordering::Relaxed), 5000);
        assert_eq!(clock.now(), 5_000_000_000);
    }

    #[test]
    fn stop_after_ends_mid_input_and_stays_ended() {
        let bucket =
            TokenBucket::with_clock(Limit::Unlimited, 10, Fill::Full, FakeClock::new(0)).unwrap();
        let forwarded = AtomicU64::new(0);
        let mut pump = Pump::new(&bucket, &forwarded, Some(300_000));
        let mut output = Vec::new();
        assert_eq!(
            pump.forward(&mut io::repeat(1), &mut output).unwrap(),
            Ended::LimitReached
        );
        assert_eq!(output.len(), 300_000);
        assert_eq!(
            pump.forward(&mut io::repeat(1), &mut output).unwrap(),
            Ended::LimitReached
        );
        assert_eq!(output.len(), 300_000);
    }
}
