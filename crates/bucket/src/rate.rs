//! Rates: how many bytes per second a limit lets through, or no limit.
//!
//! A rate is kept as binary fixed point, bytes per second times 2^16. That is
//! exact for every rate people write (1.5 KiB/s, 40 Mbit/s, 10 MB/s), keeps
//! the relative error under 10^-5 even at 1 B/s, and reaches far past
//! 100 GiB/s. A rate stored as whole nanoseconds per byte would be 11% off at
//! 300 MB/s and could not pass 1 GB/s.

use crate::units::{byte_factor, human_rate, split_number};
use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

/// Examples of valid rates, shown in every rate error.
pub const RATE_EXAMPLES: &str = "e.g. 5MiB, 1.5M/s, 40Mbit, 100kbps, 10MB/s, unlimited";

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
    /// A limit of `bytes` whole bytes per second, for literals and tests.
    ///
    /// # Panics
    ///
    /// If `bytes` is 0 or more than 2^47; [`Rate::from_whole`] says `None`
    /// instead, for values that come from outside.
    pub fn per_second(bytes: u64) -> Limit {
        Limit::Rate(Rate::from_whole(bytes).expect("1 to 2^47 bytes per second"))
    }
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

impl FromStr for Limit {
    type Err = String;

    /// Parses `unlimited` or `NUMBER[UNIT][/s]`: byte units as for sizes
    /// (`K M G T`, `KiB`.. powers of 1024, `KB`.. powers of 1000), or bits
    /// per second in powers of 1000 (`bit kbit Mbit Gbit Tbit`, `bps kbps
    /// Mbps Gbps Tbps`).
    fn from_str(text: &str) -> Result<Self, String> {
        if text.trim_matches(' ').eq_ignore_ascii_case("unlimited") {
            return Ok(Limit::Unlimited);
        }
        let (number, unit) = split_number(text).map_err(|e| format!("{e} ({RATE_EXAMPLES})"))?;
        if unit.contains("Bps") {
            return Err(format!(
                "'{unit}' is ambiguous: write MB/s for bytes or Mbps for bits ({RATE_EXAMPLES})"
            ));
        }
        let per_second = unit
            .strip_suffix("/s")
            .unwrap_or(unit)
            .trim_end_matches(' ');
        if per_second.len() == 2 && per_second.ends_with('b') {
            // Network people write "Mb" for megabits; refuse to guess.
            let prefix = &per_second[..1];
            return Err(format!(
                "'{per_second}' is ambiguous: write {}B for bytes or {prefix}bit for bits ({RATE_EXAMPLES})",
                prefix.to_ascii_uppercase()
            ));
        }
        let factor =
            bit_factor(per_second, unit.ends_with("/s")).or_else(|| byte_factor(per_second));
        let Some(factor) = factor else {
            return Err(format!("unknown rate unit '{unit}' ({RATE_EXAMPLES})"));
        };
        let bytes_per_sec = number * factor;
        if bytes_per_sec == 0.0 {
            return Err(format!(
                "rate must be greater than zero; for no limit say 'unlimited' ({RATE_EXAMPLES})"
            ));
        }
        match Rate::from_bytes_per_sec(bytes_per_sec) {
            Some(rate) => Ok(Limit::Rate(rate)),
            None if bytes_per_sec < 1.0 => Err(format!(
                "rate must be at least 1 byte per second ({RATE_EXAMPLES})"
            )),
            None => Err(format!("rate must be at most 128 TiB/s ({RATE_EXAMPLES})")),
        }
    }
}

/// Bytes per second in one bit-rate `unit` (`kbit`, `Mbps`, ...), or `None`
/// if it is not one. `bps` already says "per second", so `/s` after it is
/// refused.
fn bit_factor(unit: &str, had_per_second: bool) -> Option<f64> {
    let lower = unit.to_ascii_lowercase();
    let prefix = match (lower.strip_suffix("bit"), lower.strip_suffix("bps")) {
        (Some(prefix), _) => prefix,
        (None, Some(prefix)) if !had_per_second => prefix,
        _ => return None,
    };
    let scale = match prefix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => return None,
    };
    Some(scale / 8.0)
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Unlimited => f.write_str("unlimited"),
            Limit::Rate(rate) => write!(f, "{}/s", human_rate(rate.bytes_per_sec())),
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

    fn parse(text: &str) -> f64 {
        match text.parse::<Limit>() {
            Ok(Limit::Rate(rate)) => rate.bytes_per_sec(),
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn every_rate_form_parses_to_its_bytes_per_second() {
        let table: &[(&str, f64)] = &[
            ("1", 1.0),
            ("4096", 4096.0),
            ("1k", 1024.0),
            ("1m", 1_048_576.0),
            ("5MiB", 5.0 * 1_048_576.0),
            ("5MiB/s", 5.0 * 1_048_576.0),
            ("1.5KiB", 1536.0),
            ("1.5M/s", 1.5 * 1_048_576.0),
            ("2G", 2.0 * 1_073_741_824.0),
            ("1GiB/s", 1_073_741_824.0),
            ("1T", 1_099_511_627_776.0),
            ("100TiB", 100.0 * 1_099_511_627_776.0),
            ("10KB", 10_000.0),
            ("10MB/s", 10_000_000.0),
            ("2GB", 2e9),
            ("1TB", 1e12),
            ("8bit", 1.0),
            ("8bps", 1.0),
            ("100kbit", 12_500.0),
            ("100kbps", 12_500.0),
            ("40Mbit", 5_000_000.0),
            ("40Mbit/s", 5_000_000.0),
            ("40mbit", 5_000_000.0),
            ("1Gbps", 125_000_000.0),
            ("10Gbit", 1.25e9),
            ("1Tbit", 1.25e11),
            ("2.5 Mbps", 312_500.0),
            ("100GiB", 100.0 * 1_073_741_824.0),
        ];
        for &(text, bytes_per_sec) in table {
            assert_eq!(parse(text), bytes_per_sec, "{text}");
        }
        assert_eq!("unlimited".parse::<Limit>(), Ok(Limit::Unlimited));
        assert_eq!("UNLIMITED".parse::<Limit>(), Ok(Limit::Unlimited));
    }

    #[test]
    fn malformed_rates_say_why_and_show_examples() {
        for text in [
            "",
            "0",
            "0k",
            "-1",
            "+5",
            "0.5",
            "1e6",
            "nan",
            "inf",
            "k",
            "5x",
            "5 MiBs",
            "5MBps",
            "5Mbps/s",
            "200TiB",
            "99999999999999999999G",
            "5/s/s",
            "1..5M",
            "unlimitedd",
            "5 Mb",
            "5kb/s",
        ] {
            let err = text.parse::<Limit>().unwrap_err();
            assert!(err.contains("e.g."), "{text}: {err}");
        }
    }

    #[test]
    fn limits_print_in_binary_units() {
        assert_eq!(
            Limit::Rate(Rate::from_whole(5 << 20).unwrap()).to_string(),
            "5.00 MiB/s"
        );
        assert_eq!(
            Limit::Rate(Rate::from_whole(500).unwrap()).to_string(),
            "500 B/s"
        );
        assert_eq!(Limit::Unlimited.to_string(), "unlimited");
    }

    #[test]
    fn awkward_rates_stay_within_a_hundred_thousandth() {
        for bps in [1.1, 3.3333, 7.77, 999.999] {
            let rate = Rate::from_bytes_per_sec(bps).unwrap();
            assert!(((rate.bytes_per_sec() - bps) / bps).abs() < 1e-5, "{bps}");
        }
    }
}
