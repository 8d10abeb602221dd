//! Settings that come from outside the command line while shape runs: a
//! timetable of rates (`--schedule`) and a rate file reread on SIGHUP
//! (`--rate-file`).

use crate::duration::{self, Span};
use shape_bucket::units::Size;
use shape_bucket::{Limit, check_burst};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

/// Rates at offsets from the start of the transfer, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule(pub Vec<(Duration, Limit)>);

const SCHEDULE_EXAMPLE: &str = "e.g. \"0s=1MiB, 30s=10MiB, 2m=unlimited\"";

/// What an offset may be: from the start on, without end.
const OFFSET: Span = Span {
    least: Duration::ZERO,
    most: Duration::MAX,
    plain_seconds: false,
    examples: SCHEDULE_EXAMPLE,
};

impl FromStr for Schedule {
    type Err = String;

    /// Parses `OFFSET=RATE, OFFSET=RATE, ...` with humantime offsets (a
    /// bare `0` is allowed) in increasing order.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut entries: Vec<(Duration, Limit)> = Vec::new();
        for entry in text.split(',') {
            let entry = entry.trim();
            let Some((offset, rate)) = entry.split_once('=') else {
                return Err(format!("'{entry}' is not OFFSET=RATE ({SCHEDULE_EXAMPLE})"));
            };
            let offset = duration::parse(offset, &OFFSET)
                .map_err(|e| format!("offset '{}': {e}", offset.trim()))?;
            let limit = rate
                .trim()
                .parse::<Limit>()
                .map_err(|e| format!("rate '{}': {e}", rate.trim()))?;
            if entries.last().is_some_and(|&(last, _)| offset <= last) {
                return Err(format!(
                    "offsets must increase, and {offset:?} does not ({SCHEDULE_EXAMPLE})"
                ));
            }
            entries.push((offset, limit));
        }
        Ok(Schedule(entries))
    }
}

/// What a rate file sets: a rate, and optionally a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateFile {
    pub limit: Limit,
    pub burst: Option<u64>,
}

impl FromStr for RateFile {
    type Err = String;

    /// The first line that is neither empty nor a `#` comment holds
    /// `RATE [BURST]`, in the units of `--rate` and `--burst`.
    fn from_str(text: &str) -> Result<Self, String> {
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .ok_or("no rate in it")?;
        let mut words = line.split_whitespace();
        let limit = words.next().ok_or("no rate in it")?.parse::<Limit>()?;
        let burst = match words.next() {
            None => None,
            Some(word) => {
                let Size(bytes) = word.parse::<Size>()?;
                check_burst(bytes).map_err(|err| err.to_string())?;
                Some(bytes)
            }
        };
        if let Some(extra) = words.next() {
            return Err(format!("unexpected '{extra}' after RATE BURST"));
        }
        Ok(RateFile { limit, burst })
    }
}

impl RateFile {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<RateFile, String> {
        let text = std::fs::read_to_string(path).map_err(|err| crate::message::one_line(&err))?;
        text.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timetable_parses_in_order() {
        let schedule: Schedule = "0s=1MiB, 30s=10MiB, 2m=unlimited".parse().unwrap();
        assert_eq!(
            schedule.0,
            [
                (Duration::ZERO, Limit::per_second(1 << 20)),
                (Duration::from_secs(30), Limit::per_second(10 << 20)),
                (Duration::from_secs(120), Limit::Unlimited)
            ]
        );
        assert_eq!(
            "0=1m".parse::<Schedule>().unwrap().0,
            [(Duration::ZERO, Limit::per_second(1 << 20))]
        );
    }

    #[test]
    fn malformed_timetables_say_why() {
        for bad in [
            "",
            "1MiB",
            "0s=",
            "=1MiB",
            "soon=1MiB",
            "0s=fast",
            "10s=1MiB, 5s=2MiB",
            "0s=1MiB, 0s=2MiB",
            "0s=1MiB,",
            "0s=0",
        ] {
            assert!(bad.parse::<Schedule>().is_err(), "{bad}");
        }
    }

    #[test]
    fn rate_files_hold_a_rate_and_maybe_a_burst() {
        assert_eq!(
            "2MiB\n".parse(),
            Ok(RateFile {
                limit: Limit::per_second(2 << 20),
                burst: None
            })
        );
        assert_eq!(
            "# nightly\n\n 4MiB 64k \n".parse(),
            Ok(RateFile {
                limit: Limit::per_second(4 << 20),
                burst: Some(65_536)
            })
        );
        assert_eq!(
            "unlimited".parse(),
            Ok(RateFile {
                limit: Limit::Unlimited,
                burst: None
            })
        );
        for bad in [
            "",
            "# only a comment",
            "fast",
            "1MiB 0",
            "1MiB 4194305T",
            "1MiB 64k extra",
            "0",
        ] {
            assert!(bad.parse::<RateFile>().is_err(), "{bad}");
        }
    }
}
