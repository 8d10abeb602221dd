//! Slow-link emulation: how a link is slow beyond its rate ([`SlowLink`]:
//! `--delay`, `--jitter`, `--max-buffer`), and the delay line that holds
//! every byte for the delay ([`Line`]).
//!
//! Bytes enter the line once their tokens are paid, so the bucket plays the
//! link's bandwidth and the line its propagation delay: a chunk paid at `t`
//! leaves at `t + delay`, give or take the jitter.

mod line;

pub use line::{Footprint, Line, Spares};

use shape_bucket::Limit;
use shape_leaves::chunk::MAX_CHUNK;
use shape_leaves::duration::{self, Accepted};
use std::time::Duration;

/// The longest `--delay` or `--jitter`: an hour, far beyond any real link,
/// and small enough that no sum of times can overflow.
pub const LONGEST_DELAY: Duration = Duration::from_secs(3600);
/// The least the default buffer holds.
const DEFAULT_BUFFER_LEAST: u64 = 1 << 20;
/// The most the default buffer holds, and what it holds when the rate is
/// unlimited: at a 100 ms delay, enough for 640 MiB/s.
const DEFAULT_BUFFER_MOST: u64 = 64 << 20;
/// How a link is slow beyond its rate: `--delay`, `--jitter` and
/// `--max-buffer`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlowLink {
    /// How long every byte is held.
    pub delay: Duration,
    /// How far the delay of each chunk may stray either way, at random.
    pub jitter: Duration,
    /// The most held at once; `None` follows the rate (see
    /// [`SlowLink::capacity`]).
    pub max_buffer: Option<u64>,
}

impl SlowLink {
    /// True if and only if bytes are held at all, so that a delay line is
    /// needed.
    pub fn delays(&self) -> bool {
        !self.delay.is_zero() || !self.jitter.is_zero()
    }

    /// A fresh, empty line for one direction of this link, its jitter
    /// drawn from `seed`.
    pub fn line<T: Footprint>(&self, seed: u64) -> Line<T> {
        Line::new(self.delay, self.jitter, fastrand::Rng::with_seed(seed))
    }

    /// The most a line may hold at `limit` and `burst`. Without a delay,
    /// a chunk: bytes go straight on. With one, `--max-buffer` if given,
    /// else what flows at the rate during the longest delay plus the burst
    /// and a chunk, so that the buffer never holds the rate down; from
    /// 1 MiB to 64 MiB, and 64 MiB when unlimited.
    pub fn capacity(&self, limit: Limit, burst: u64) -> u64 {
        if !self.delays() {
            return self.max_chunk() as u64;
        }
        if let Some(bytes) = self.max_buffer {
            return bytes;
        }
        match limit {
            Limit::Unlimited => DEFAULT_BUFFER_MOST,
            Limit::Rate(rate) => {
                let in_flight = rate.bytes_per_sec() * (self.delay + self.jitter).as_secs_f64();
                (in_flight as u64)
                    .saturating_add(burst)
                    .saturating_add(MAX_CHUNK as u64)
                    .clamp(DEFAULT_BUFFER_LEAST, DEFAULT_BUFFER_MOST)
            }
        }
    }

    /// The largest chunk to take at once: at most `--max-buffer`, so that
    /// even the chunk in hand keeps within it.
    pub fn max_chunk(&self) -> usize {
        self.max_buffer
            .map_or(MAX_CHUNK, |bytes| bytes.min(MAX_CHUNK as u64) as usize)
    }
}

/// Parses `--delay` and `--jitter`: a duration from 0 to an hour.
pub fn parse_delay(text: &str) -> Result<Duration, String> {
    duration::parse(
        text,
        &Accepted {
            least: Duration::ZERO,
            most: LONGEST_DELAY,
            plain_seconds: false,
            examples: "e.g. 100ms, 1.5s, 0",
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_buffer_holds_what_flows_during_the_delay() {
        let link = SlowLink {
            delay: Duration::from_millis(200),
            jitter: Duration::from_millis(50),
            max_buffer: None,
        };
        // 40 MiB/s for 250 ms, a 4 MiB burst and a chunk.
        assert_eq!(
            link.capacity(Limit::per_second(40 << 20), 4 << 20),
            (10 << 20) + (4 << 20) + MAX_CHUNK as u64
        );
        assert_eq!(link.capacity(Limit::per_second(1000), 100), 1 << 20);
        assert_eq!(link.capacity(Limit::per_second(1 << 40), 1 << 20), 64 << 20);
        assert_eq!(link.capacity(Limit::Unlimited, 1 << 17), 64 << 20);
    }

    #[test]
    fn max_buffer_bounds_the_line_and_the_chunk() {
        let link = SlowLink {
            delay: Duration::from_millis(200),
            jitter: Duration::ZERO,
            max_buffer: Some(5000),
        };
        assert_eq!(link.capacity(Limit::Unlimited, 1 << 17), 5000);
        assert_eq!(link.max_chunk(), 5000);
        assert_eq!(SlowLink::default().max_chunk(), MAX_CHUNK);
        assert!(link.delays());
        assert!(!SlowLink::default().delays());
        let undelayed = SlowLink {
            max_buffer: Some(1 << 30),
            ..SlowLink::default()
        };
        assert_eq!(
            undelayed.capacity(Limit::Unlimited, 1 << 17),
            MAX_CHUNK as u64
        );
        assert_eq!(
            SlowLink::default().capacity(Limit::per_second(1000), 100),
            MAX_CHUNK as u64
        );
    }

    #[test]
    fn delays_parse_from_zero_to_an_hour() {
        assert_eq!(parse_delay("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_delay("0"), Ok(Duration::ZERO));
        assert_eq!(parse_delay("1h"), Ok(LONGEST_DELAY));
        for bad in ["", "-1s", "1h 1s", "fast", "100", "1e3ms"] {
            assert!(parse_delay(bad).is_err(), "{bad}");
        }
    }
}
