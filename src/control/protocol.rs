//! What travels between `shape --remote` and a running shape: a
//! [`Request`] for a change and the [`Settings`] in force, as small text
//! files parsed strictly, and how a request is applied to a bucket.

use shape_bucket::units::human_bytes;
use shape_bucket::{BucketCell, Clock, InvalidBurst, Limit, Rate, TokenBucket, check_burst};
use std::fmt;
use std::io;
use std::ops::Deref;
use std::time::Duration;

/// First line of every message, so that a stray file is never mistaken
/// for one.
pub(super) const MAGIC: &str = "shape-control 1";

/// What a request changes; `None` keeps the current value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Request {
    pub limit: Option<Limit>,
    pub burst: Option<u64>,
    pub paused: Option<bool>,
}

/// The settings in force, as an acknowledgement reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub limit: Limit,
    pub burst: u64,
    pub paused: bool,
}

impl Settings {
    /// The settings of `bucket` now.
    pub fn of<C: Clock, S: Deref<Target = BucketCell>>(bucket: &TokenBucket<C, S>) -> Settings {
        Settings {
            limit: bucket.limit(),
            burst: bucket.burst(),
            paused: bucket.paused(),
        }
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate {}, burst {}", self.limit, human_bytes(self.burst))?;
        if self.paused {
            f.write_str(", paused")?;
        }
        Ok(())
    }
}

/// Why a remote change did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// No shape of this user runs as that PID.
    #[error("{0} is not a running shape of this user")]
    NotRunning(u32),
    /// The shape did not answer in time.
    #[error("shape {0} did not answer within {1:?}")]
    NoAnswer(u32, Duration),
    /// The shape refused the request.
    #[error("refused: {0}")]
    Refused(String),
    /// The control directory or a message could not be used.
    #[error("control directory: {0}")]
    Io(#[from] io::Error),
}

/// Applies `request` to `bucket` as one change where it can. A burst the
/// bucket cannot take refuses the whole request, before anything changes.
pub fn apply<C: Clock, S: Deref<Target = BucketCell>>(
    bucket: &TokenBucket<C, S>,
    request: &Request,
) -> Result<(), InvalidBurst> {
    if let Some(burst) = request.burst {
        check_burst(burst)?;
    }
    match (request.limit, request.burst) {
        (Some(limit), Some(burst)) => bucket.set(limit, burst)?,
        (Some(limit), None) => bucket.set_limit(limit),
        (None, Some(burst)) => bucket.set_burst(burst)?,
        (None, None) => {}
    }
    if let Some(paused) = request.paused {
        bucket.set_paused(paused);
    }
    Ok(())
}

fn encode_limit(limit: Limit) -> String {
    match limit {
        Limit::Unlimited => "unlimited".into(),
        Limit::Rate(rate) => rate.fixed().to_string(),
    }
}

fn decode_limit(text: &str) -> Result<Limit, String> {
    if text == "unlimited" {
        return Ok(Limit::Unlimited);
    }
    text.parse::<u64>()
        .ok()
        .and_then(Rate::from_fixed)
        .map(Limit::Rate)
        .ok_or_else(|| format!("bad rate '{}'", text.escape_debug()))
}

/// A burst as a number of bytes; whether the bucket can take it is the
/// bucket's to say, in [`apply`].
fn decode_burst(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("bad burst '{}'", text.escape_debug()))
}

pub(super) fn encode_request(request: &Request) -> String {
    let mut text = format!("{MAGIC}\n");
    if let Some(limit) = request.limit {
        text += &format!("rate {}\n", encode_limit(limit));
    }
    if let Some(burst) = request.burst {
        text += &format!("burst {burst}\n");
    }
    if let Some(paused) = request.paused {
        text += if paused { "pause\n" } else { "resume\n" };
    }
    text
}

/// Parses a request strictly: the magic line, then at most one of each
/// field, nothing else.
pub(super) fn decode_request(text: &str) -> Result<Request, String> {
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Err("not a shape control message".into());
    }
    let mut request = Request::default();
    for line in lines {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match (key, value) {
            ("rate", value) if request.limit.is_none() => {
                request.limit = Some(decode_limit(value)?)
            }
            ("burst", value) if request.burst.is_none() => {
                request.burst = Some(decode_burst(value)?)
            }
            ("pause", "") if request.paused.is_none() => request.paused = Some(true),
            ("resume", "") if request.paused.is_none() => request.paused = Some(false),
            _ => return Err(format!("unexpected line '{}'", line.escape_debug())),
        }
    }
    Ok(request)
}

pub(super) fn encode_answer(answer: &Result<Settings, String>) -> String {
    match answer {
        Ok(s) => format!(
            "{MAGIC}\nrate {}\nburst {}\n{}\n",
            encode_limit(s.limit),
            s.burst,
            if s.paused { "paused" } else { "running" }
        ),
        Err(why) => format!("{MAGIC}\nrefused {why}\n"),
    }
}

pub(super) fn decode_answer(text: &str) -> Result<Settings, RemoteError> {
    let malformed = || RemoteError::Refused("malformed answer".into());
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Err(malformed());
    }
    let first = lines.next().ok_or_else(malformed)?;
    if let Some(why) = first.strip_prefix("refused ") {
        return Err(RemoteError::Refused(why.to_string()));
    }
    let limit = decode_limit(first.strip_prefix("rate ").ok_or_else(malformed)?)
        .map_err(|_| malformed())?;
    let burst = decode_burst(
        lines
            .next()
            .and_then(|l| l.strip_prefix("burst "))
            .ok_or_else(malformed)?,
    )
    .map_err(|_| malformed())?;
    let paused = match lines.next() {
        Some("paused") => true,
        Some("running") => false,
        _ => return Err(malformed()),
    };
    Ok(Settings {
        limit,
        burst,
        paused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_survive_the_trip() {
        let request = Request {
            limit: Some(Limit::per_second(4 << 20)),
            burst: Some(65_536),
            paused: Some(false),
        };
        assert_eq!(decode_request(&encode_request(&request)), Ok(request));
        let lift = Request {
            limit: Some(Limit::Unlimited),
            ..Request::default()
        };
        assert_eq!(decode_request(&encode_request(&lift)), Ok(lift));
        let settings = Settings {
            limit: Limit::per_second(1 << 20),
            burst: 7,
            paused: true,
        };
        assert_eq!(
            decode_answer(&encode_answer(&Ok(settings))).unwrap(),
            settings
        );
        assert!(
            matches!(decode_answer(&encode_answer(&Err("no".into()))), Err(RemoteError::Refused(w)) if w == "no")
        );
    }

    #[test]
    fn malformed_requests_are_refused() {
        for text in [
            "",
            "rate 1\n",
            "shape-control 2\nrate 65536\n",
            "shape-control 1\nrate 0\n",
            "shape-control 1\nrate fast\n",
            "shape-control 1\nburst -5\n",
            "shape-control 1\nburst 99999999999999999999\n",
            "shape-control 1\nrate 65536\nrate 65536\n",
            "shape-control 1\npause\nresume\n",
            "shape-control 1\nexec rm -rf /\n",
            "shape-control 1\npause now\n",
        ] {
            assert!(decode_request(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn settings_read_as_a_person_would_write_them() {
        let settings = Settings {
            limit: Limit::per_second(4 << 20),
            burst: 65_536,
            paused: false,
        };
        assert_eq!(settings.to_string(), "rate 4.00 MiB/s, burst 64.00 KiB");
        let paused = Settings {
            limit: Limit::Unlimited,
            burst: 1,
            paused: true,
        };
        assert_eq!(paused.to_string(), "rate unlimited, burst 1 B, paused");
    }
}
