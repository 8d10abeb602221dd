//! Rates: how many bytes per second a limit lets through, or no limit.
//!
//! A rate is kept as binary fixed point, bytes per second times 2^16. That is
//! exact for every rate people write (1.5 KiB/s, 40 Mbit/s, 10 MB/s), keeps
//! the relative error under 10^-5 even at 1 B/s, and reaches far past
//! 100 GiB/s. A rate stored as whole nanoseconds per byte would be 11% off at
//! 300 MB/s and could not pass 1 GB/s.

use std::fmt;
use std::num::NonZeroU64;

/// A rate in bytes per second, at least [`Rate::MIN`] and at most
/// [`Rate::MAX`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(NonZeroU64);

impl Rate {
    /// Fractional bits of the fixed-point representation.
    pub const FRACTION_BITS: u32 = 16;
    /// 1 byte per second.
    pub const MIN: Rate = Rate(NonZeroU64::new(1 << Self::FRACTION_BITS).unwrap());
    /// 2^47 bytes per second (128 TiB/s), far past any link, with headroom so
    /// that no product the bucket forms can overflow.
    pub const MAX: Rate = Rate(NonZeroU64::new(1 << (47 + Self::FRACTION_BITS)).unwrap());

    /// The rate nearest to `bytes_per_sec`, or `None` when that is not a
    /// number or lies outside [`Rate::MIN`]..=[`Rate::MAX`].
    pub fn from_bytes_per_sec(bytes_per_sec: f64) -> Option<Rate> {
        let fixed = (bytes_per_sec * f64::from(1u32 << Self::FRACTION_BITS)).round();
        // NaN fails both comparisons.
        if fixed >= Self::MIN.0.get() as f64 && fixed <= Self::MAX.0.get() as f64 {
            Self::from_fixed(fixed as u64)
        } else {
            None
        }
    }

    /// A whole number of bytes per second.
    pub fn from_whole(bytes_per_sec: u64) -> Option<Rate> {
        Self::from_fixed(bytes_per_sec.checked_mul(1 << Self::FRACTION_BITS)?)
    }

    /// The rate whose fixed-point value is `fixed`, if it is in range.
    pub fn from_fixed(fixed: u64) -> Option<Rate> {
        (Self::MIN.0.get()..=Self::MAX.0.get())
            .contains(&fixed)
            .then(|| Rate(NonZeroU64::new(fixed).expect("range excludes zero")))
    }

    /// Bytes per second times 2^[`Rate::FRACTION_BITS`].
    pub fn fixed(self) -> u64 {
        self.0.get()
    }

    /// Bytes per second.
    pub fn bytes_per_sec(self) -> f64 {
        self.0.get() as f64 / f64::from(1u32 << Self::FRACTION_BITS)
    }
}

impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} B/s", self.bytes_per_sec())
    }
}

/// What the bucket lets through: a rate, or everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// No limit: every request is granted at once.
    Unlimited,
    /// At most this many bytes per second, plus the burst.
    Rate(Rate),
}

impl Limit {
    /// The rate, or `None` when unlimited.
    pub fn rate(self) -> Option<Rate> {
        match self {
            Limit::Unlimited => None,
            Limit::Rate(rate) => Some(rate),
        }
    }
}

impl From<Rate> for Limit {
    fn from(rate: Rate) -> Self {
        Limit::Rate(rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_rates_are_exact() {
        for bps in [
            1.0,
            1.5,
            125.0,
            1536.0,
            5_000_000.0,
            10_485_760.0,
            107_374_182_400.0,
        ] {
            assert_eq!(Rate::from_bytes_per_sec(bps).unwrap().bytes_per_sec(), bps);
        }
    }

    #[test]
    fn out_of_range_rates_are_refused() {
        for bps in [0.0, 0.99, -1.0, f64::NAN, f64::INFINITY, 1e15, f64::MAX] {
            assert_eq!(Rate::from_bytes_per_sec(bps), None, "{bps}");
        }
        assert_eq!(Rate::from_whole(0), None);
        assert_eq!(Rate::from_whole(u64::MAX), None);
        assert_eq!(Rate::from_whole(1), Some(Rate::MIN));
    }

    #[test]
    fn awkward_rates_stay_within_a_hundred_thousandth() {
        for bps in [1.1, 3.3333, 7.77, 999.999] {
            let rate = Rate::from_bytes_per_sec(bps).unwrap();
            assert!(((rate.bytes_per_sec() - bps) / bps).abs() < 1e-5, "{bps}");
        }
    }
}
