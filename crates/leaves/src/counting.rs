//! What shape counts: bytes, or records (`--lines`: lines ending in a
//! newline; `--null`: records ending in a NUL byte; `--packets`: a UDP
//! link's datagrams), what one of them is worth in the bucket's tokens,
//! and how amounts and rates of them are read and shown.
//!
//! A byte is one token. A record (or datagram) is [`TOKENS_PER_RECORD`] tokens, so that
//! the bucket, whose rates start at one token a second, paces records as
//! exactly as bytes from one every 12 days to a hundred million a second:
//! `30/min` is exactly 2^19 tokens a second.

use shape_bucket::units::{Quantity, SIZE_EXAMPLES, human_bytes, human_rate};
use shape_bucket::{Limit, MAX_BURST, RATE_EXAMPLES, RateSpec};
use std::fmt;
use std::str::FromStr;

/// A value as the user wrote it, parsed: the text is kept, to be read
/// again elsewhere (a remote's request) and named in messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Written<T> {
    pub text: String,
    pub value: T,
}

impl<T: FromStr<Err = String>> FromStr for Written<T> {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Ok(Written {
            text: text.trim().to_string(),
            value: text.parse()?,
        })
    }
}

impl<T> fmt::Display for Written<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The tokens one record is worth.
pub const TOKENS_PER_RECORD: u64 = 1 << 20;

/// Examples of values, as messages show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Examples {
    pub rate: &'static str,
    pub amount: &'static str,
}

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    Bytes,
    /// Records ending in `\n`.
    Lines,
    /// Records ending in a NUL byte.
    Nul,
    /// A UDP link's datagrams, whatever their size.
    Datagrams,
}

impl Counting {
    /// The byte that ends a record, if records are counted.
    pub fn terminator(self) -> Option<u8> {
        match self {
            Counting::Bytes => None,
            Counting::Lines => Some(b'\n'),
            Counting::Nul => Some(0),
            Counting::Datagrams => None,
        }
    }

    /// What one of them is called: `byte`, `line`, `record`.
    pub fn unit(self) -> &'static str {
        match self {
            Counting::Bytes => "byte",
            Counting::Lines => "line",
            Counting::Nul => "record",
            Counting::Datagrams => "datagram",
        }
    }

    /// The plural: `bytes`, `lines`, `records`.
    pub fn units(self) -> &'static str {
        match self {
            Counting::Bytes => "bytes",
            Counting::Lines => "lines",
            Counting::Nul => "records",
            Counting::Datagrams => "datagrams",
        }
    }

    /// Examples of rates and of amounts, for messages: byte units, or
    /// plain numbers when records are counted.
    pub fn examples(self) -> Examples {
        match self {
            Counting::Bytes => Examples {
                rate: RATE_EXAMPLES,
                amount: SIZE_EXAMPLES,
            },
            _ => Examples {
                rate: "e.g. 2, 0.5, 30/min, 1/5s, unlimited",
                amount: "e.g. 1, 10, 1000",
            },
        }
    }

    /// The number that stands for it in a share file, and back.
    pub fn code(self) -> u32 {
        match self {
            Counting::Bytes => 0,
            Counting::Lines => 1,
            Counting::Nul => 2,
            Counting::Datagrams => 3,
        }
    }

    /// See [`Counting::code`].
    pub fn from_code(code: u32) -> Option<Counting> {
        [
            Counting::Bytes,
            Counting::Lines,
            Counting::Nul,
            Counting::Datagrams,
        ]
        .into_iter()
        .find(|counting| counting.code() == code)
    }

    /// Tokens one unit is worth.
    pub fn tokens_per_unit(self) -> u64 {
        match self {
            Counting::Bytes => 1,
            Counting::Lines | Counting::Nul | Counting::Datagrams => TOKENS_PER_RECORD,
        }
    }

    /// Tokens `count` units are worth.
    pub fn tokens(self, count: u64) -> u64 {
        count.saturating_mul(self.tokens_per_unit())
    }

    /// Whole units in `tokens`.
    pub fn whole_units(self, tokens: u64) -> u64 {
        tokens / self.tokens_per_unit()
    }

    /// The limit `spec` sets, in tokens.
    pub fn limit(self, spec: &RateSpec) -> Result<Limit, String> {
        match self {
            Counting::Bytes => spec.in_bytes(),
            _ => spec.in_units(self.tokens_per_unit(), self.unit()),
        }
    }

    /// How many units `quantity` is: a plain number counts them; a byte
    /// unit is refused when records are counted.
    pub fn count(self, quantity: Quantity) -> Result<u64, String> {
        match (self, quantity) {
            (Counting::Bytes, Quantity::Plain(n) | Quantity::Bytes(n)) => Ok(n),
            (_, Quantity::Plain(n)) => Ok(n),
            (_, Quantity::Bytes(_)) => Err(format!(
                "{} are counted, not bytes: give a number of {}, e.g. 1, 10",
                self.units(),
                self.units()
            )),
        }
    }

    /// The burst `quantity` sets, in tokens: at least one unit, and no more
    /// than a bucket holds.
    pub fn burst(self, quantity: Quantity) -> Result<u64, String> {
        let count = self.count(quantity)?;
        let most = MAX_BURST / self.tokens_per_unit();
        match self {
            Counting::Bytes if !(1..=most).contains(&count) => {
                Err(format!("burst must be 1 byte to 4 EiB, not {count} bytes"))
            }
            _ if !(1..=most).contains(&count) => Err(format!(
                "burst must be 1 to {most} {}, not {count}",
                self.units()
            )),
            _ => Ok(self.tokens(count)),
        }
    }

    /// `count` units as people read them: `2.00 MiB`, `120 lines`,
    /// `1 line`.
    pub fn show(self, count: u64) -> String {
        match self {
            Counting::Bytes => human_bytes(count),
            _ if count == 1 => format!("1 {}", self.unit()),
            _ => format!("{count} {}", self.units()),
        }
    }

    /// `count` units in full, for a summary: `3145728 bytes (3.00 MiB)`,
    /// `120 lines`.
    pub fn tally(self, count: u64) -> String {
        match self {
            Counting::Bytes => format!("{count} bytes ({})", human_bytes(count)),
            _ => self.show(count),
        }
    }

    /// `tokens` as [`Counting::show`] shows units, whole units only.
    pub fn show_tokens(self, tokens: u64) -> String {
        self.show(self.whole_units(tokens))
    }

    /// A rate in units per second as people read it: `1.00 MiB/s`,
    /// `2.00 lines/s`, and for records slower than one a second, per
    /// minute or per hour (`30.00 lines/min`).
    pub fn show_rate(self, per_second: f64) -> String {
        if self == Counting::Bytes {
            return format!("{}/s", human_rate(per_second));
        }
        let units = self.units();
        if per_second >= 1.0 || per_second <= 0.0 {
            format!("{per_second:.2} {units}/s")
        } else if per_second * 60.0 >= 1.0 {
            format!("{:.2} {units}/min", per_second * 60.0)
        } else {
            format!("{:.2} {units}/h", per_second * 3600.0)
        }
    }

    /// Units per second that `limit` lets through; `None` when unlimited.
    pub fn per_second(self, limit: Limit) -> Option<f64> {
        limit
            .rate()
            .map(|rate| rate.bytes_per_sec() / self.tokens_per_unit() as f64)
    }

    /// `limit` as people read it: `1.00 MiB/s`, `30.00 lines/min`,
    /// `unlimited`.
    pub fn show_limit(self, limit: Limit) -> String {
        match self.per_second(limit) {
            None => "unlimited".to_string(),
            Some(per_second) => self.show_rate(per_second),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> RateSpec {
        text.parse().unwrap()
    }

    #[test]
    fn records_are_worth_many_tokens_so_slow_rates_stay_exact() {
        let lines = Counting::Lines;
        assert_eq!(lines.limit(&spec("30/min")), Ok(Limit::per_second(1 << 19)));
        assert_eq!(lines.limit(&spec("2")), Ok(Limit::per_second(2 << 20)));
        assert_eq!(Counting::Bytes.limit(&spec("2")), Ok(Limit::per_second(2)));
        assert_eq!(lines.per_second(Limit::per_second(1 << 19)), Some(0.5));
        assert!(
            lines
                .limit(&spec("5MiB"))
                .unwrap_err()
                .contains("lines are counted")
        );
        assert_eq!(lines.burst(Quantity::Plain(3)), Ok(3 << 20));
        assert!(lines.burst(Quantity::Plain(0)).is_err());
        assert!(Counting::Nul.count(Quantity::Bytes(1024)).is_err());
        assert_eq!(Counting::Bytes.burst(Quantity::Bytes(1024)), Ok(1024));
        assert_eq!(
            Counting::Bytes.burst(Quantity::Plain(0)),
            Err("burst must be 1 byte to 4 EiB, not 0 bytes".into())
        );
    }

    #[test]
    fn amounts_and_rates_read_in_their_unit() {
        assert_eq!(Counting::Lines.show(1), "1 line");
        assert_eq!(Counting::Nul.show(120), "120 records");
        assert_eq!(Counting::Bytes.show(2 << 20), "2.00 MiB");
        assert_eq!(Counting::Bytes.tally(2 << 20), "2097152 bytes (2.00 MiB)");
        assert_eq!(Counting::Lines.tally(120), "120 lines");
        assert_eq!(Counting::Lines.show_rate(2.0), "2.00 lines/s");
        assert_eq!(Counting::Lines.show_rate(0.5), "30.00 lines/min");
        assert_eq!(Counting::Lines.show_rate(1.0 / 3600.0), "1.00 lines/h");
        assert_eq!(Counting::Bytes.show_rate(1_048_576.0), "1.00 MiB/s");
        assert_eq!(
            Counting::Lines.show_limit(Limit::per_second(1 << 19)),
            "30.00 lines/min"
        );
        assert_eq!(Counting::Lines.show_limit(Limit::Unlimited), "unlimited");
        for counting in [
            Counting::Bytes,
            Counting::Lines,
            Counting::Nul,
            Counting::Datagrams,
        ] {
            assert_eq!(Counting::from_code(counting.code()), Some(counting));
        }
    }
}
