//! Rates: how many bytes (or tokens) per second a limit lets through, or
//! no limit; and rates as people write them ([`RateSpec`]).
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
pub const RATE_EXAMPLES: &str = "e.g. 5MiB, 1.5M/s, 40Mbit, 100kbps, 100MB/h, unlimited";

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

    /// Parses a rate whose plain numbers are bytes; see [`RateSpec`] for
    /// the forms.
    fn from_str(text: &str) -> Result<Self, String> {
        text.parse::<RateSpec>()?.in_bytes()
    }
}

/// A rate as written, before it is known what a plain number counts:
/// `unlimited`, or an amount per a span of time.
///
/// The amount is a plain number (`30`), bytes (`5MiB`, `1.5M`, `10MB`:
/// binary single letters and `iB` units, decimal `KB`..`EB`) or bits
/// (`40Mbit`, `100kbps`, powers of 1000). The span follows a `/`: `s`,
/// `min`, `h`, `d` or `ms`, with a number or not (`/s`, `/min`, `/5s`,
/// `/1.5h`); without one, the amount is per second. `bps` already says
/// "per second".
///
/// ```
/// use shape_bucket::{Limit, Rate, RateSpec};
///
/// let crawl: RateSpec = "30/min".parse().unwrap();
/// // Lines worth 1024 tokens each: half a line, 512 tokens, a second.
/// assert_eq!(crawl.in_units(1024, "line"), Ok(Limit::per_second(512)));
/// assert!(crawl.in_bytes().is_err(), "half a byte a second is too slow");
/// let hourly: Limit = "100MB/h".parse().unwrap();
/// assert_eq!(hourly, Limit::Rate(Rate::from_bytes_per_sec(1e8 / 3600.0).unwrap()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateSpec {
    /// No limit.
    Unlimited,
    /// `amount` every `seconds`.
    Per {
        /// How much.
        amount: Amount,
        /// In how many seconds; more than zero.
        seconds: f64,
    },
}

/// How much a rate lets through, as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// A number without a unit: bytes or records, as the counter decides.
    Plain(f64),
    /// A number with a byte or bit unit, in bytes.
    Bytes(f64),
}

impl FromStr for RateSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.trim_matches(' ').eq_ignore_ascii_case("unlimited") {
            return Ok(RateSpec::Unlimited);
        }
        let (amount, span) = match text.split_once('/') {
            Some((amount, span)) => (amount, Some(span)),
            None => (text, None),
        };
        let (number, unit) = split_number(amount).map_err(|e| format!("{e} ({RATE_EXAMPLES})"))?;
        if unit.contains("Bps") {
            return Err(format!(
                "'{unit}' is ambiguous: write MB/s for bytes or Mbps for bits ({RATE_EXAMPLES})"
            ));
        }
        let unit = unit.trim_end_matches(' ');
        if unit.len() == 2 && unit.ends_with('b') {
            // Network people write "Mb" for megabits; refuse to guess.
            let prefix = &unit[..1];
            return Err(format!(
                "'{unit}' is ambiguous: write {}B for bytes or {prefix}bit for bits ({RATE_EXAMPLES})",
                prefix.to_ascii_uppercase()
            ));
        }
        let amount = match (unit, bit_factor(unit, span.is_some())) {
            ("", _) => Amount::Plain(number),
            (_, Some(factor)) => Amount::Bytes(number * factor),
            (_, None) => match byte_factor(unit) {
                Some(factor) => Amount::Bytes(number * factor),
                None => return Err(format!("unknown rate unit '{unit}' ({RATE_EXAMPLES})")),
            },
        };
        let seconds = match span {
            None => 1.0,
            Some(span) => span_seconds(span)?,
        };
        if number == 0.0 {
            return Err(format!(
                "rate must be greater than zero; for no limit say 'unlimited' ({RATE_EXAMPLES})"
            ));
        }
        Ok(RateSpec::Per { amount, seconds })
    }
}

impl RateSpec {
    /// The limit when a plain number counts bytes.
    pub fn in_bytes(&self) -> Result<Limit, String> {
        match *self {
            RateSpec::Unlimited => Ok(Limit::Unlimited),
            RateSpec::Per { amount, seconds } => {
                let bytes = match amount {
                    Amount::Plain(n) | Amount::Bytes(n) => n,
                };
                limit_at(bytes / seconds, 1.0, "1 byte per second")
            }
        }
    }

    /// The limit when what is counted is a `unit` (`"line"`) worth
    /// `tokens_per_unit` tokens each; an amount in bytes is refused.
    pub fn in_units(&self, tokens_per_unit: u64, unit: &str) -> Result<Limit, String> {
        match *self {
            RateSpec::Unlimited => Ok(Limit::Unlimited),
            RateSpec::Per {
                amount: Amount::Bytes(_),
                ..
            } => Err(format!(
                "{unit}s are counted, not bytes: give a number of {unit}s, e.g. 2, 0.5, 30/min, 1/5s"
            )),
            RateSpec::Per {
                amount: Amount::Plain(n),
                seconds,
            } => {
                let per_token = tokens_per_unit as f64;
                let slowest = format!("1 {unit} per {} s", (per_token).round());
                limit_at(n / seconds * per_token, 1.0, &slowest)
            }
        }
    }
}

/// The limit of `tokens_per_sec`, at least `least`, which `slowest` names.
fn limit_at(tokens_per_sec: f64, least: f64, slowest: &str) -> Result<Limit, String> {
    match Rate::from_bytes_per_sec(tokens_per_sec) {
        Some(rate) => Ok(Limit::Rate(rate)),
        None if tokens_per_sec < least => {
            Err(format!("rate must be at least {slowest} ({RATE_EXAMPLES})"))
        }
        None => Err(format!("rate is too fast ({RATE_EXAMPLES})")),
    }
}

/// The seconds in the span after a rate's `/`: a unit (`s`, `min`, `h`,
/// `d`, `ms`, and their long names), with a number before it or not.
fn span_seconds(span: &str) -> Result<f64, String> {
    let span = span.trim_matches(' ');
    let starts_with_number = span.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    let (count, unit) = if starts_with_number {
        split_number(span).map_err(|e| format!("{e} after '/' ({RATE_EXAMPLES})"))?
    } else {
        (1.0, span)
    };
    let seconds = match unit.trim_end_matches(' ') {
        "ms" => 0.001,
        "s" | "sec" | "second" | "seconds" => 1.0,
        "m" | "min" | "minute" | "minutes" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86_400.0,
        "" => return Err(format!("the time after '/' needs a unit ({RATE_EXAMPLES})")),
        other => return Err(format!("unknown time unit '{other}' ({RATE_EXAMPLES})")),
    };
    if count == 0.0 {
        return Err(format!(
            "the time in a rate must be longer than zero ({RATE_EXAMPLES})"
        ));
    }
    Ok(count * seconds)
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

    fn spec(text: &str) -> RateSpec {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn rates_may_be_per_any_span_of_time() {
        let per = |amount, seconds| RateSpec::Per { amount, seconds };
        assert_eq!(spec("30/min"), per(Amount::Plain(30.0), 60.0));
        assert_eq!(spec("1/5s"), per(Amount::Plain(1.0), 5.0));
        assert_eq!(spec("2.5/s"), per(Amount::Plain(2.5), 1.0));
        assert_eq!(spec("0.5"), per(Amount::Plain(0.5), 1.0));
        assert_eq!(spec("100MB/h"), per(Amount::Bytes(1e8), 3600.0));
        assert_eq!(spec("8kbit/1.5h"), per(Amount::Bytes(1000.0), 5400.0));
        assert_eq!(spec(" 3 / 2 min "), per(Amount::Plain(3.0), 120.0));
        assert_eq!(spec("unlimited"), RateSpec::Unlimited);
        for bad in [
            "0/min",
            "1/0s",
            "1/2",
            "1/",
            "1/fortnight",
            "5/s/s",
            "5Mbps/min",
            "/s",
            "1/-5s",
        ] {
            assert!(
                bad.parse::<RateSpec>().unwrap_err().contains("e.g."),
                "{bad}"
            );
        }
    }

    #[test]
    fn counted_units_take_plain_numbers_and_rates_below_one_a_second() {
        let per_record = 1 << 20;
        assert_eq!(
            spec("30/min").in_units(per_record, "line"),
            Ok(Limit::per_second(per_record / 2))
        );
        assert_eq!(spec("1/5s").in_units(5, "line"), Ok(Limit::per_second(1)));
        assert_eq!(spec("unlimited").in_units(5, "line"), Ok(Limit::Unlimited));
        let refused = spec("5MiB").in_units(per_record, "line").unwrap_err();
        assert!(
            refused.starts_with("lines are counted, not bytes"),
            "{refused}"
        );
        assert!(
            spec("1/20d").in_units(per_record, "line").is_err(),
            "too slow"
        );
        assert!(
            spec("0.5")
                .in_bytes()
                .unwrap_err()
                .contains("at least 1 byte")
        );
        assert_eq!(
            spec("90/min").in_bytes(),
            Ok(Limit::Rate(Rate::from_bytes_per_sec(1.5).unwrap()))
        );
    }
}
