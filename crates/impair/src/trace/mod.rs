//! A recorded link (`--trace FILE`, `--trace-up`, `--trace-down`), in
//! Mahimahi's trace format: each line is a time in milliseconds at which
//! the link may deliver one packet of 1,500 bytes; a time repeated is
//! several opportunities in that millisecond, and the trace repeats when
//! it ends, its last time being its period. Loaded once and shared: a
//! way that follows it keeps no more than where it is.
//!
//! What the trace allows is given to the bucket window by window
//! ([`follow`]): the bytes of a window's opportunities, at that
//! window's rate, with a burst of one opportunity at most, so that
//! capacity left unused is lost.

pub mod follow;

use std::fmt;
use std::io::Read;
use std::path::Path;

/// The bytes one opportunity delivers.
pub const OPPORTUNITY: u64 = 1_500;

/// The largest trace file read: twenty times the longest of Mahimahi's
/// recorded traces (3.4 MB), and a bound on what a file named by mistake
/// (`/dev/zero`) costs.
pub const MOST_BYTES: u64 = 64 << 20;

/// A trace: its opportunities' times within one period, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// Where it was read from, for messages.
    pub name: String,
    times: Vec<u64>,
}

/// Why a trace was refused: where (the file, and the line where there is
/// one), and why. What the line said is kept apart, so that a server can
/// refuse a file named through its API without repeating what is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTrace {
    at: String,
    said: Option<String>,
    why: String,
    /// The file could not be read at all: an I/O failure, not a bad
    /// trace.
    unread: bool,
}

impl BadTrace {
    fn new(at: String, why: impl Into<String>) -> BadTrace {
        BadTrace {
            at,
            said: None,
            why: why.into(),
            unread: false,
        }
    }

    /// True if the file could not be read (missing, a directory, no
    /// permission), rather than read and found to be no trace.
    pub fn unread(&self) -> bool {
        self.unread
    }

    /// The refusal without anything the file says: where and why.
    pub fn without_contents(&self) -> String {
        match &self.said {
            Some(_) => format!("{}: a line {}", self.at, self.why),
            None => self.to_string(),
        }
    }
}

impl fmt::Display for BadTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.said {
            Some(said) => write!(f, "{}: '{said}' {}", self.at, self.why),
            None => write!(f, "{}: {}", self.at, self.why),
        }
    }
}

impl Trace {
    /// Reads the trace at `path`; a bad one is refused in one line that
    /// names the file, and the line where it can.
    pub fn load(path: &Path) -> Result<Trace, BadTrace> {
        let name = path.display().to_string();
        let unread = |err: std::io::Error| BadTrace {
            unread: true,
            ..BadTrace::new(name.clone(), shape_leaves::message::one_line(&err))
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|file| file.take(MOST_BYTES + 1).read_to_string(&mut text))
            .map_err(unread)?;
        if text.len() as u64 > MOST_BYTES {
            return Err(BadTrace::new(
                name,
                format!("larger than {} MiB: not a trace", MOST_BYTES >> 20),
            ));
        }
        Trace::read(&name, &text)
    }

    /// Reads a trace from `text`, named `name`.
    pub fn read(name: &str, text: &str) -> Result<Trace, BadTrace> {
        let mut times: Vec<u64> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            // Made only for a refusal: a long trace loads in milliseconds.
            let at = || format!("{name}:{}", index + 1);
            let said = line.trim();
            let time: u64 = said.parse().map_err(|_| BadTrace {
                at: at(),
                said: Some(said.to_string()),
                why: "is not a time in whole milliseconds".into(),
                unread: false,
            })?;
            if let Some(&last) = times.last()
                && time < last
            {
                return Err(BadTrace::new(
                    at(),
                    format!("{time} comes after {last}: times must not go backwards"),
                ));
            }
            times.push(time);
        }
        match times.last() {
            None => Err(BadTrace::new(
                name.to_string(),
                "no times: a trace needs at least one line",
            )),
            Some(0) => Err(BadTrace::new(
                format!("{name}:{}", times.len()),
                "the trace lasts 0 ms: its last time is its period, and must be above 0",
            )),
            Some(_) => Ok(Trace {
                name: name.to_string(),
                times,
            }),
        }
    }

    /// Its period, in milliseconds: its last time.
    pub fn period(&self) -> u64 {
        self.times.last().copied().unwrap_or(1)
    }

    /// What it delivers on average, over one period: what a queue in front
    /// of it is sized by.
    pub fn average(&self) -> shape_bucket::Limit {
        let bytes = self.times.len() as u64 * OPPORTUNITY;
        let per_second = bytes.saturating_mul(1_000) / self.period();
        // A few packets over years is under a byte a second, and a limit
        // is one at least.
        shape_bucket::Rate::from_whole(per_second.max(1)).map_or(
            shape_bucket::Limit::Rate(shape_bucket::Rate::MAX),
            shape_bucket::Limit::Rate,
        )
    }

    /// The opportunities up to and including millisecond `t` of the trace
    /// repeated from time 0.
    fn opportunities_by(&self, t: u64) -> u64 {
        let period = self.period();
        let (whole, within) = (t / period, t % period);
        let this_one = self.times.partition_point(|&time| time <= within) as u64;
        whole
            .saturating_mul(self.times.len() as u64)
            .saturating_add(this_one)
    }

    /// The bytes it delivers in milliseconds `from` (included) to `to`
    /// (excluded).
    pub fn bytes_between(&self, from: u64, to: u64) -> u64 {
        if to <= from {
            return 0;
        }
        let before = match from {
            0 => 0,
            from => self.opportunities_by(from - 1),
        };
        // Saturating: thousands of years of a fast trace would not fit
        // (found by fuzzing), and no run lasts that long.
        (self.opportunities_by(to - 1) - before).saturating_mul(OPPORTUNITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Trace, String> {
        Trace::read("t.trace", text).map_err(|refusal| refusal.to_string())
    }

    #[test]
    fn opportunities_are_counted_per_window_and_the_trace_repeats() {
        // Two at 1 ms, one at 3 ms, one at 10 ms: a period of 10 ms.
        let trace = read("1\n1\n3\n10\n").unwrap();
        assert_eq!(trace.period(), 10);
        assert_eq!(trace.bytes_between(0, 1), 0);
        assert_eq!(trace.bytes_between(0, 2), 2 * OPPORTUNITY);
        assert_eq!(trace.bytes_between(0, 10), 3 * OPPORTUNITY);
        assert_eq!(trace.bytes_between(0, 11), 4 * OPPORTUNITY);
        // The second period: 11, 11 and 13, then 20; 10 ends the first.
        assert_eq!(trace.bytes_between(11, 12), 2 * OPPORTUNITY);
        assert_eq!(trace.bytes_between(10, 20), 4 * OPPORTUNITY);
        assert_eq!(trace.bytes_between(0, 1_001), 100 * 4 * OPPORTUNITY);
        assert_eq!(trace.bytes_between(5, 5), 0);
        assert_eq!(trace.average(), shape_bucket::Limit::per_second(600_000));
    }

    #[test]
    fn a_trace_slower_than_a_byte_a_second_averages_one() {
        // Two packets in a hundred days (found by fuzzing: it panicked).
        let trace = read("1\n8640000000\n").unwrap();
        assert_eq!(trace.average(), shape_bucket::Limit::per_second(1));
    }

    #[test]
    fn thousands_of_years_of_a_trace_are_no_overflow() {
        // Found by fuzzing: the bytes of a fast trace over 2^48 ms
        // overflowed.
        let trace = read("1\n1\n1\n").unwrap();
        assert_eq!(trace.bytes_between(0, u64::MAX), u64::MAX);
    }

    #[test]
    fn a_one_line_trace_is_twelve_megabits() {
        // One packet a millisecond: 1,500 bytes each, 12 Mbit/s.
        let trace = read("1\n").unwrap();
        assert_eq!(trace.bytes_between(1, 1_001) * 8, 12_000_000);
    }

    #[test]
    fn a_bad_trace_is_refused_naming_the_file_and_line() {
        assert_eq!(
            read("").unwrap_err(),
            "t.trace: no times: a trace needs at least one line"
        );
        assert_eq!(
            read("1\nfast\n").unwrap_err(),
            "t.trace:2: 'fast' is not a time in whole milliseconds"
        );
        assert_eq!(
            read("1\n\n2\n").unwrap_err(),
            "t.trace:2: '' is not a time in whole milliseconds"
        );
        assert_eq!(
            read("5\n7\n6\n").unwrap_err(),
            "t.trace:3: 6 comes after 7: times must not go backwards"
        );
        assert!(
            read("0\n0\n")
                .unwrap_err()
                .starts_with("t.trace:2: the trace lasts 0 ms")
        );
        assert_eq!(
            Trace::read("t.trace", "1\nsecret\n")
                .unwrap_err()
                .without_contents(),
            "t.trace:2: a line is not a time in whole milliseconds"
        );
        assert!(read("-1\n").is_err());
        assert!(read("1.5\n").is_err());
    }

    #[test]
    fn a_file_too_large_for_a_trace_is_refused_without_reading_it_all() {
        let refusal = Trace::load(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "/dev/zero: larger than 64 MiB: not a trace"
        );
        assert!(Trace::load(Path::new("/nonexistent/t.trace")).is_err());
    }

    #[test]
    fn a_long_trace_loads_fast() {
        let text: String = (0..150_000u64)
            .map(|i| format!("{}\n", i / 3 + 1))
            .collect();
        let started = std::time::Instant::now();
        let trace = read(&text).unwrap();
        // A loose bound for a debug build on a busy machine; the bench
        // gives the release figure.
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(trace.period(), 50_000);
    }
}
