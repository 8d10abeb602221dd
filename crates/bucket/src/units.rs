//! Byte counts and rates as people write and read them: [`Size`] parses
//! `20MiB`, `1.5G`, `64k`, `10MB` (and [`Limit`](crate::Limit) parses rates
//! with the same unit table); [`human_bytes`] and [`human_rate`] print them,
//! one style for both.
//!
//! Single letters and the `iB` forms are powers of 1024, as in pv, so that
//! `-L 1m` keeps meaning what pv users mean by it; `KB MB GB TB PB EB` are
//! powers of 1000. Case does not matter. (bytesize's parser reads `K` as 1000,
//! which would silently change pv users' figures, so sizes are parsed here
//! and bytesize only prints them.)

use std::fmt;
use std::str::FromStr;

/// Examples of valid sizes, shown in every size error.
pub const SIZE_EXAMPLES: &str = "e.g. 4096, 64k, 20MiB, 1.5G, 10MB";

/// A count of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

impl Size {
    /// The number of bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", human_bytes(self.0))
    }
}

impl FromStr for Size {
    type Err = String;

    /// Parses `NUMBER[UNIT]`, a plain number being bytes; see
    /// [`Quantity`].
    fn from_str(text: &str) -> Result<Self, String> {
        match text.parse::<Quantity>()? {
            Quantity::Plain(n) | Quantity::Bytes(n) => Ok(Size(n)),
        }
    }
}

/// An amount as written, before it is known what a plain number counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// A whole number without a unit: bytes or records, as the counter
    /// decides.
    Plain(u64),
    /// A number with a byte unit (`64k`, `1.5G`, `10MB`), in bytes,
    /// rounded to the nearest byte.
    Bytes(u64),
}

impl FromStr for Quantity {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (number, unit) = split_number(text).map_err(|e| format!("{e} ({SIZE_EXAMPLES})"))?;
        let Some(factor) = byte_factor(unit) else {
            return Err(format!("unknown size unit '{unit}' ({SIZE_EXAMPLES})"));
        };
        if unit.is_empty() && number.fract() != 0.0 {
            return Err(format!(
                "a number without a unit is a whole count ({SIZE_EXAMPLES})"
            ));
        }
        let kind = if unit.is_empty() {
            Quantity::Plain
        } else {
            Quantity::Bytes
        };
        if let (Ok(whole), Some(factor)) = (
            text.trim_matches(' ')
                .trim_end_matches(unit)
                .trim_end_matches(' ')
                .parse::<u64>(),
            exact(factor),
        ) {
            // Whole numbers stay exact past 2^53, where a float would round.
            return whole
                .checked_mul(factor)
                .map(kind)
                .ok_or_else(|| format!("size is too large ({SIZE_EXAMPLES})"));
        }
        let bytes = (number * factor).round();
        // 2^64 is exactly representable; anything at or past it overflows.
        if bytes >= 18_446_744_073_709_551_616.0 {
            return Err(format!("size is too large ({SIZE_EXAMPLES})"));
        }
        Ok(kind(bytes as u64))
    }
}

/// Splits `text` into a non-negative decimal number and the unit after it
/// (spaces around and between are allowed; other white space is not).
/// Signs, exponents, `inf` and `nan` are not numbers here.
pub(crate) fn split_number(text: &str) -> Result<(f64, &str), String> {
    let text = text.trim_matches(' ');
    if text.is_empty() {
        return Err("empty value".into());
    }
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    if text.starts_with(['-', '+']) {
        return Err("expected a number without a sign".into());
    }
    if !number.bytes().any(|b| b.is_ascii_digit()) || number.matches('.').count() > 1 {
        return Err("expected a number".into());
    }
    let value: f64 = number
        .parse()
        .map_err(|_| "expected a number".to_string())?;
    let exponent = unit.strip_prefix(['e', 'E']).is_some_and(|power| {
        let power = power.strip_prefix(['+', '-']).unwrap_or(power);
        !power.is_empty() && power.bytes().all(|b| b.is_ascii_digit())
    });
    if exponent {
        return Err(format!(
            "'{number}{unit}' has an exponent: write the number out, or with a unit"
        ));
    }
    Ok((value, unit.trim_start_matches(' ')))
}

/// How many bytes one `unit` is, for the byte units; `None` if `unit` is
/// not one.
pub(crate) fn byte_factor(unit: &str) -> Option<f64> {
    const KI: f64 = 1024.0;
    const K: f64 = 1000.0;
    let factor = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => KI,
        "m" | "mib" => KI * KI,
        "g" | "gib" => KI * KI * KI,
        "t" | "tib" => KI * KI * KI * KI,
        // What human_bytes prints past TiB must read back: a size shown
        // is a size that can be given. (No single `e`, which reads as an
        // exponent.)
        "p" | "pib" => KI * KI * KI * KI * KI,
        "eib" => KI * KI * KI * KI * KI * KI,
        "kb" => K,
        "mb" => K * K,
        "gb" => K * K * K,
        "tb" => K * K * K * K,
        "pb" => K * K * K * K * K,
        "eb" => K * K * K * K * K * K,
        _ => return None,
    };
    Some(factor)
}

/// `factor` as an integer, if it is one (every byte unit is).
fn exact(factor: f64) -> Option<u64> {
    (factor.fract() == 0.0).then_some(factor as u64)
}

/// `bytes` in binary units with two decimals (`512 B`, `64.00 KiB`,
/// `1.50 MiB`): the one way sizes are printed, and through [`human_rate`]
/// rates, so that a line never mixes styles.
pub fn human_bytes(bytes: u64) -> String {
    format!("{:.2}", bytesize::ByteSize::b(bytes).display().iec())
}

/// A rate in bytes per second as [`human_bytes`] prints sizes, rounded to
/// the byte, without the `/s`.
pub fn human_rate(bytes_per_sec: f64) -> String {
    // `as` saturates: NaN and negatives print as 0 B, never panic.
    human_bytes(bytes_per_sec.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_parses_to_its_bytes() {
        let table: &[(&str, u64)] = &[
            ("0", 0),
            ("4096", 4096),
            ("1b", 1),
            ("64k", 65_536),
            ("64K", 65_536),
            ("64KiB", 65_536),
            ("1m", 1 << 20),
            ("20MiB", 20 << 20),
            ("1.5G", 3 << 29),
            ("1GiB", 1 << 30),
            ("2T", 2 << 40),
            ("1TiB", 1 << 40),
            ("10KB", 10_000),
            ("10kB", 10_000),
            ("10MB", 10_000_000),
            ("3GB", 3_000_000_000),
            ("1TB", 1_000_000_000_000),
            ("1.5 MiB", 1_572_864),
            (" 7 k ", 7168),
            ("0.5k", 512),
            (".5k", 512),
            ("18446744073709551615", u64::MAX),
            ("9007199254740993", 9_007_199_254_740_993),
            ("16777215T", 16_777_215 << 40),
            ("2PiB", 2 << 50),
            ("3p", 3 << 50),
            ("1PB", 1_000_000_000_000_000),
            ("12.13 EiB", (12.13 * (1u64 << 60) as f64) as u64),
            ("18EB", 18_000_000_000_000_000_000),
        ];
        for &(text, bytes) in table {
            assert_eq!(text.parse::<Size>(), Ok(Size(bytes)), "{text}");
        }
    }

    #[test]
    fn every_size_shown_reads_back() {
        // The very largest (from 15.995 EiB) show rounded up to 16.00 EiB,
        // which is past the largest count, and are refused.
        for bytes in [
            0,
            1,
            1023,
            1 << 40,
            5 << 50,
            13_979_173_241_896_714_240,
            15 << 60,
        ] {
            let shown = human_bytes(bytes);
            let again = shown
                .parse::<Size>()
                .unwrap_or_else(|e| panic!("{shown}: {e}"));
            let off = again.0.abs_diff(bytes) as f64;
            assert!(
                off <= bytes as f64 * 0.005,
                "{bytes} shown as {shown}, read as {again:?}"
            );
        }
    }

    #[test]
    fn malformed_sizes_say_why_and_show_examples() {
        for text in [
            "",
            " ",
            "k",
            "-1",
            "+1",
            "1.5",
            "1..5k",
            "1e6",
            "1x",
            "1 kbit",
            "5MiB/s",
            "nan",
            "inf",
            "99999999999T",
            "18446744073709551616",
        ] {
            let err = text.parse::<Size>().unwrap_err();
            assert!(err.contains("e.g."), "{text}: {err}");
        }
    }

    #[test]
    fn signs_and_exponents_are_named_not_taken_for_units() {
        let err = "1e6".parse::<Size>().unwrap_err();
        assert!(
            err.starts_with("'1e6' has an exponent: write the number out"),
            "{err}"
        );
        let err = "-1".parse::<Size>().unwrap_err();
        assert!(err.starts_with("expected a number without a sign"), "{err}");
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(human_bytes(20 << 20), "20.00 MiB");
        assert_eq!(human_bytes(102_400), "100.00 KiB");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(Size(512).to_string(), "512 B");
    }
}
