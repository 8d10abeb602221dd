//! Settings that come from outside the command line while shape runs: a
//! timetable of rates (`--schedule`) and a rate file reread on SIGHUP
//! (`--rate-file`).

use super::protocol::Request;
use shape_bucket::units::Quantity;
use shape_bucket::{Limit, RateSpec};
use shape_leaves::counting::{Counting, Written};
use shape_leaves::duration::{self, Accepted};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

/// Rates at offsets from the start of the transfer, in order, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSchedule(pub Vec<(Duration, Written<RateSpec>)>);

impl RateSchedule {
    /// The limits of the timetable when `counting` is counted.
    pub fn limits(&self, counting: Counting) -> Result<Vec<(Duration, Limit)>, String> {
        self.0
            .iter()
            .map(|(offset, rate)| {
                let limit = counting
                    .limit(&rate.value)
                    .map_err(|e| format!("rate '{rate}': {e}"))?;
                Ok((*offset, limit))
            })
            .collect()
    }
}

const SCHEDULE_EXAMPLE: &str = "e.g. \"0s=1MiB, 30s=10MiB, 2m=unlimited\"";

/// What an offset may be: from the start on, without end.
const OFFSET: Accepted = Accepted {
    least: Duration::ZERO,
    most: Duration::MAX,
    plain_seconds: false,
    examples: SCHEDULE_EXAMPLE,
};

impl FromStr for RateSchedule {
    type Err = String;

    /// Parses `OFFSET=RATE, OFFSET=RATE, ...` with humantime offsets (a
    /// bare `0` is allowed) in increasing order.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut entries: Vec<(Duration, Written<RateSpec>)> = Vec::new();
        for entry in text.split(',') {
            let entry = entry.trim();
            let Some((offset, rate)) = entry.split_once('=') else {
                return Err(format!("'{entry}' is not OFFSET=RATE ({SCHEDULE_EXAMPLE})"));
            };
            let offset = duration::parse(offset, &OFFSET)
                .map_err(|e| format!("offset '{}': {e}", offset.trim()))?;
            let rate = rate
                .parse::<Written<RateSpec>>()
                .map_err(|e| format!("rate '{}': {e}", rate.trim()))?;
            if entries.last().is_some_and(|&(last, _)| offset <= last) {
                return Err(format!(
                    "offsets must increase, and {offset:?} does not ({SCHEDULE_EXAMPLE})"
                ));
            }
            entries.push((offset, rate));
        }
        Ok(RateSchedule(entries))
    }
}

/// What a rate file sets: a rate, and optionally a burst, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct RateFile {
    pub rate: Written<RateSpec>,
    pub burst: Option<Written<Quantity>>,
}

impl RateFile {
    /// The change the file asks for.
    pub fn request(&self) -> Request {
        Request {
            rate: Some(self.rate.clone()),
            burst: self.burst.clone(),
            ..Request::default()
        }
    }
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
        let rate = words.next().ok_or("no rate in it")?.parse()?;
        let burst = words.next().map(str::parse).transpose()?;
        if let Some(extra) = words.next() {
            return Err(format!("unexpected '{extra}' after RATE BURST"));
        }
        Ok(RateFile { rate, burst })
    }
}

/// The most a rate file may hold: a line, with room for comments. A
/// larger file is refused rather than read whole (a gigabyte of one line,
/// or /dev/zero, would be read into memory).
const RATE_FILE_MOST: u64 = 4096;

impl RateFile {
    /// Reads and parses `path`, reading at most [`RATE_FILE_MOST`] bytes.
    pub fn load(path: &Path) -> Result<RateFile, String> {
        let text = RateFile::read(path).map_err(|err| shape_leaves::message::one_line(&err))?;
        RateFile::from_bytes(text)
    }

    /// The bytes of the file at `path`, no more than one past the most a
    /// rate file holds: the I/O alone, which fails as an input does.
    pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let mut text = Vec::new();
        std::fs::File::open(path)?
            .take(RATE_FILE_MOST + 1)
            .read_to_end(&mut text)?;
        Ok(text)
    }

    /// The rate file `text` says, or why it says none.
    pub fn from_bytes(text: Vec<u8>) -> Result<RateFile, String> {
        if text.len() as u64 > RATE_FILE_MOST {
            return Err(format!(
                "longer than {RATE_FILE_MOST} bytes; a rate file holds one line, RATE [BURST]"
            ));
        }
        String::from_utf8(text)
            .map_err(|_| "not text; a rate file holds one line, RATE [BURST]".to_string())?
            .parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timetable_parses_in_order() {
        let schedule: RateSchedule = "0s=1MiB, 30s=10MiB, 2m=unlimited".parse().unwrap();
        assert_eq!(
            schedule.limits(Counting::Bytes).unwrap(),
            [
                (Duration::ZERO, Limit::per_second(1 << 20)),
                (Duration::from_secs(30), Limit::per_second(10 << 20)),
                (Duration::from_secs(120), Limit::Unlimited)
            ]
        );
        assert_eq!(
            "0=1m"
                .parse::<RateSchedule>()
                .unwrap()
                .limits(Counting::Bytes),
            Ok(vec![(Duration::ZERO, Limit::per_second(1 << 20))])
        );
        let crawl: RateSchedule = "0=2, 1m=30/min".parse().unwrap();
        assert_eq!(
            crawl.limits(Counting::Lines),
            Ok(vec![
                (Duration::ZERO, Limit::per_second(2 << 20)),
                (Duration::from_secs(60), Limit::per_second(1 << 19))
            ])
        );
        assert!(
            crawl
                .limits(Counting::Bytes)
                .unwrap_err()
                .contains("'30/min'")
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
            assert!(bad.parse::<RateSchedule>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_rate_file_is_read_no_further_than_a_few_kilobytes() {
        let dir = tempfile::tempdir().unwrap();
        let long = dir.path().join("long");
        std::fs::write(&long, format!("{}\n", "1".repeat(1 << 20))).unwrap();
        assert_eq!(
            RateFile::load(&long),
            Err("longer than 4096 bytes; a rate file holds one line, RATE [BURST]".into())
        );
        let endless = RateFile::load(Path::new("/dev/zero"));
        assert!(endless.unwrap_err().starts_with("longer than 4096 bytes"));
        let binary = dir.path().join("binary");
        std::fs::write(&binary, [0xff, 0xfe, b'\n']).unwrap();
        assert!(RateFile::load(&binary).unwrap_err().starts_with("not text"));
        let fine = dir.path().join("fine");
        std::fs::write(&fine, "# nightly\n5MiB 1MiB\n").unwrap();
        assert!(RateFile::load(&fine).is_ok());
    }

    #[test]
    fn rate_files_hold_a_rate_and_maybe_a_burst() {
        let change = |text: &str, counting| {
            text.parse::<RateFile>()
                .and_then(|file| file.request().adjustment(counting))
        };
        let adjusted = |limit, burst| {
            Ok(shape_leaves::bucket::Adjustment {
                limit: Some(limit),
                burst,
                paused: None,
            })
        };
        let bytes = Counting::Bytes;
        assert_eq!(
            change("2MiB\n", bytes),
            adjusted(Limit::per_second(2 << 20), None)
        );
        assert_eq!(
            change("# nightly\n\n 4MiB 64k \n", bytes),
            adjusted(Limit::per_second(4 << 20), Some(65_536))
        );
        assert_eq!(change("unlimited", bytes), adjusted(Limit::Unlimited, None));
        assert_eq!(
            change("2 10", Counting::Lines),
            adjusted(Limit::per_second(2 << 20), Some(10 << 20))
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
            assert!(change(bad, bytes).is_err(), "{bad}");
        }
    }
}
