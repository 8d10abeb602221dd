//! The value parsers of flags whose values are not a type's own `FromStr`
//! (rates, sizes, addresses and timetables parse themselves).

use super::RemoteTarget;
use shape_bucket::MAX_BURST;
use shape_bucket::units::{Quantity, SIZE_EXAMPLES};
use shape_leaves::counting::Written;
use shape_leaves::duration::{self, Accepted};
use std::time::Duration;

/// Parses `--interval`: a duration from 10ms to 1h, or plain seconds.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    duration::parse(
        text,
        &Accepted {
            least: Duration::from_millis(10),
            most: Duration::from_secs(3600),
            plain_seconds: true,
            examples: "e.g. 100ms, 0.5, 2s, 1m",
        },
    )
}

/// Parses `--seed`: a whole number that fits in 64 bits.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .map_err(|_| format!("expected a whole number from 0 to {} (e.g. 42)", u64::MAX))
}

/// Parses `--serve-allow-origin`: an origin as a browser sends it, a
/// scheme and a host with an optional port and nothing after.
pub fn parse_origin(text: &str) -> Result<String, String> {
    let origin = text.trim().trim_end_matches('/');
    let (scheme, host) = origin.split_once("://").unwrap_or(("", ""));
    let well_formed = matches!(scheme, "http" | "https")
        && !host.is_empty()
        && !host.contains(['/', '?', '#', ' ', '@']);
    match well_formed {
        true => Ok(origin.to_string()),
        false => Err("expected an origin: a scheme and a host (e.g. http://localhost:3000)".into()),
    }
}

impl std::str::FromStr for RemoteTarget {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.strip_prefix("share:") {
            Some(name) => name.parse().map(RemoteTarget::Share),
            None => text
                .parse::<u32>()
                .ok()
                .filter(|&pid| pid > 0 && pid <= i32::MAX as u32)
                .map(RemoteTarget::Process)
                .ok_or_else(|| "expected a process ID or share:NAME".into()),
        }
    }
}

/// A burst is at least one byte or record, and no more than a bucket
/// holds (for records, what they are worth is checked once they are known
/// to be records).
pub fn parse_burst(text: &str) -> Result<Written<Quantity>, String> {
    let burst: Written<Quantity> = text.parse()?;
    match burst.value {
        Quantity::Plain(0) | Quantity::Bytes(0) => Err(format!(
            "burst must be at least 1 byte or record ({SIZE_EXAMPLES})"
        )),
        Quantity::Bytes(bytes) if bytes > MAX_BURST => Err("burst must be at most 4 EiB".into()),
        _ => Ok(burst),
    }
}

/// The largest buffer is a size of at least one byte (or, for a UDP
/// link's `--packets`, a count of at least one datagram).
pub fn parse_max_buffer(text: &str) -> Result<Quantity, String> {
    match text.parse::<Quantity>()? {
        Quantity::Plain(0) | Quantity::Bytes(0) => {
            Err(format!("buffer must be at least 1 byte ({SIZE_EXAMPLES})"))
        }
        Quantity::Plain(n) | Quantity::Bytes(n) if n > MAX_BURST => {
            Err("buffer must be at most 4 EiB".into())
        }
        quantity => Ok(quantity),
    }
}

/// Reads `--trace`'s file (and `--trace-up`'s, `--trace-down`'s).
pub fn parse_trace(path: &str) -> Result<std::sync::Arc<shape_impair::trace::Trace>, TraceRefused> {
    // A file that cannot be read is an I/O failure (status 1), as an
    // input is; one that is not a trace is bad usage (2).
    shape_impair::trace::Trace::load(std::path::Path::new(path))
        .map(std::sync::Arc::new)
        .map_err(|refusal| match refusal.unread() {
            true => TraceRefused::Unreadable(refusal.to_string()),
            false => TraceRefused::NotATrace(refusal.to_string()),
        })
}

/// Why a trace was refused: its file could not be read, or is no trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceRefused {
    #[error("{0}")]
    Unreadable(String),
    #[error("{0}")]
    NotATrace(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_a_scheme_and_a_host() {
        assert_eq!(
            parse_origin("http://localhost:3000/").unwrap(),
            "http://localhost:3000"
        );
        assert_eq!(
            parse_origin("https://ui.example").unwrap(),
            "https://ui.example"
        );
        for bad in ["localhost:3000", "ftp://x", "http://", "http://x/path", "*"] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_seed_is_a_whole_number_of_64_bits() {
        assert_eq!(parse_seed("42"), Ok(42));
        assert_eq!(parse_seed("18446744073709551615"), Ok(u64::MAX));
        let refused = "expected a whole number from 0 to 18446744073709551615 (e.g. 42)";
        for text in ["-1", "18446744073709551616", "x"] {
            assert_eq!(parse_seed(text), Err(refused.into()), "{text}");
        }
    }

    #[test]
    fn intervals_take_plain_seconds_from_10ms_to_an_hour() {
        assert_eq!(parse_interval("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("1m"), Ok(Duration::from_secs(60)));
        for bad in ["0", "5ms", "2h", "soon"] {
            assert!(
                parse_interval(bad).unwrap_err().contains("e.g. 100ms, 0.5"),
                "{bad}"
            );
        }
    }
}
