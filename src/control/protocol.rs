//! What travels between `shape --remote` and a running shape: a
//! [`Request`] for a change and the [`Settings`] in force, as small text
//! files parsed strictly, and how a change is applied to a bucket.
//!
//! A request carries the rate and burst as the user wrote them: what a
//! plain number means (bytes or records) is for the running shape to say,
//! which turns the request into an [`Adjustment`] in its bucket's tokens.

use shape_bucket::units::Quantity;
use shape_bucket::{Limit, Rate, RateSpec};
use shape_impair::conditions::Retune;
use shape_impair::faults::{Change, Span};
use shape_leaves::bucket::{Adjustment, Settings};
use shape_leaves::counting::{Counting, Written};
use shape_leaves::message::escape_controls;
use std::fmt;
use std::io;
use std::time::Duration;

/// First line of every message, so that a stray file is never mistaken
/// for one.
pub(super) const MAGIC: &str = "shape-control 2";

/// What a request changes, as written; `None` keeps the current value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Request {
    pub rate: Option<Written<RateSpec>>,
    /// The rate of one way of a proxy or `--exec`: up (what clients send),
    /// then down.
    pub way_rates: [Option<Written<RateSpec>>; 2],
    pub burst: Option<Written<Quantity>>,
    pub paused: Option<bool>,
    /// Delay, jitter and faults to change.
    pub retune: Retune,
    /// A proxy's new HTTP rule, as its flags were given (name without
    /// `--`, value): the whole rule, read by the proxy.
    pub http: Vec<(String, String)>,
}

impl Request {
    /// The limit this request asks of way `way` (0 up, 1 down) of a bucket
    /// that counts `counting`, if it asks one of that way alone.
    pub fn way_limit(&self, way: usize, counting: Counting) -> Result<Option<Limit>, String> {
        match &self.way_rates[way] {
            Some(rate) => counting.limit(&rate.value).map(Some),
            None => Ok(None),
        }
    }

    /// The change this request asks of a bucket that counts `counting`.
    pub fn adjustment(&self, counting: Counting) -> Result<Adjustment, String> {
        Ok(Adjustment {
            limit: match &self.rate {
                Some(rate) => Some(counting.limit(&rate.value)?),
                None => None,
            },
            burst: match &self.burst {
                Some(burst) => Some(counting.burst(burst.value)?),
                None => None,
            },
            paused: self.paused,
        })
    }
}

/// What a running shape answers a request with: its settings, and a
/// report in its own words of what else is in force (delay, faults) and,
/// for a request that changes nothing, what it has passed so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub settings: Settings,
    /// One line; empty when there is nothing more to say.
    pub report: String,
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Where the report names the way down, the settings are the way
        // up's: said so, rather than left to be taken for both.
        let up = match self.report.starts_with("down: ") {
            true => "up: ",
            false => "",
        };
        write!(f, "{up}{}", self.settings)?;
        if !self.report.is_empty() {
            write!(f, "; {}", self.report)?;
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

fn encode_limit(limit: Limit) -> String {
    match limit {
        Limit::Unlimited => "unlimited".into(),
        Limit::Rate(rate) => rate.fixed().to_string(),
    }
}

fn decode_limit(text: &str) -> Option<Limit> {
    if text == "unlimited" {
        return Some(Limit::Unlimited);
    }
    text.parse::<u64>()
        .ok()
        .and_then(Rate::from_fixed)
        .map(Limit::Rate)
}

pub(crate) fn encode_request(request: &Request) -> String {
    let mut text = format!("{MAGIC}\n");
    if let Some(rate) = &request.rate {
        text += &format!("rate {rate}\n");
    }
    for (way, rate) in ["up", "down"].iter().zip(&request.way_rates) {
        if let Some(rate) = rate {
            text += &format!("rate-{way} {rate}\n");
        }
    }
    if let Some(burst) = &request.burst {
        text += &format!("burst {burst}\n");
    }
    if let Some(paused) = request.paused {
        text += if paused { "pause\n" } else { "resume\n" };
    }
    // One delay for both directions is said as before, so that a shape
    // of an earlier version still takes it.
    match request.retune.delay {
        [Some(up), Some(down)] if up == down => {
            text += &format!("delay {}\n", humantime::format_duration(up));
        }
        ways => {
            for (way, delay) in ["up", "down"].iter().zip(ways) {
                if let Some(delay) = delay {
                    text += &format!("delay-{way} {}\n", humantime::format_duration(delay));
                }
            }
        }
    }
    if let Some(jitter) = &request.retune.jitter {
        text += &format!("jitter {}\n", humantime::format_duration(*jitter));
    }
    for change in &request.retune.faults {
        text += &format!("fault {} {}\n", change.name(), change.text());
    }
    for (name, value) in &request.http {
        text += &format!("http {name} {}\n", escape_controls(value));
    }
    text
}

/// Parses a request strictly: the magic line, then at most one of each
/// field, nothing else.
pub(crate) fn decode_request(text: &str) -> Result<Request, String> {
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Err("not a shape control message".into());
    }
    let mut request = Request::default();
    let bad = |what: &str, value: &str, why: String| {
        format!("bad {what} '{}': {why}", value.escape_debug())
    };
    for line in lines {
        // A line ends at "\n" or "\r\n", and the last may end at neither:
        // every carriage return it ends with is the line's end, so that a
        // request read and sent on reads the same again.
        let line = line.trim_end_matches('\r');
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match (key, value) {
            ("rate", value) if request.rate.is_none() => {
                request.rate = Some(value.parse().map_err(|why| bad("rate", value, why))?)
            }
            ("rate-up", value) if request.way_rates[0].is_none() => {
                request.way_rates[0] = Some(value.parse().map_err(|why| bad("rate", value, why))?)
            }
            ("rate-down", value) if request.way_rates[1].is_none() => {
                request.way_rates[1] = Some(value.parse().map_err(|why| bad("rate", value, why))?)
            }
            ("burst", value) if request.burst.is_none() => {
                request.burst = Some(value.parse().map_err(|why| bad("burst", value, why))?)
            }
            ("pause", "") if request.paused.is_none() => request.paused = Some(true),
            ("resume", "") if request.paused.is_none() => request.paused = Some(false),
            ("delay", value) if request.retune.delay == [None; 2] => {
                let Span(delay) = value.parse().map_err(|why| bad("delay", value, why))?;
                request.retune.delay = [Some(delay); 2];
            }
            ("delay-up", value) if request.retune.delay[0].is_none() => {
                let Span(delay) = value.parse().map_err(|why| bad("delay", value, why))?;
                request.retune.delay[0] = Some(delay);
            }
            ("delay-down", value) if request.retune.delay[1].is_none() => {
                let Span(delay) = value.parse().map_err(|why| bad("delay", value, why))?;
                request.retune.delay[1] = Some(delay);
            }
            ("jitter", value) if request.retune.jitter.is_none() => {
                let Span(jitter) = value.parse().map_err(|why| bad("jitter", value, why))?;
                request.retune.jitter = Some(jitter);
            }
            ("fault", change) => {
                let (name, value) = change.split_once(' ').unwrap_or((change, ""));
                let change = Change::parse(name, value).map_err(|why| bad(name, value, why))?;
                request.retune.faults.push(change);
            }
            ("http", flag) => {
                let (name, value) = flag.split_once(' ').unwrap_or((flag, ""));
                request.http.push((name.to_string(), value.to_string()));
            }
            _ => return Err(format!("unexpected line '{}'", line.escape_debug())),
        }
    }
    Ok(request)
}

pub(super) fn encode_answer(answer: &Result<Answer, String>) -> String {
    match answer {
        Ok(Answer {
            settings: s,
            report,
        }) => format!(
            "{MAGIC}\nrate {}\nburst {}\n{}\ncounting {}\nreport {}\n",
            encode_limit(s.limit),
            s.burst,
            if s.paused { "paused" } else { "running" },
            s.counting.code(),
            escape_controls(report)
        ),
        Err(why) => format!("{MAGIC}\nrefused {why}\n"),
    }
}

/// An answer read back. A shape of an earlier version sends no report.
pub(crate) fn decode_answer(text: &str) -> Result<Answer, RemoteError> {
    let settings = decode_settings(text)?;
    let report = text
        .lines()
        .find_map(|line| line.strip_prefix("report "))
        .unwrap_or_default()
        .to_string();
    Ok(Answer { settings, report })
}

fn decode_settings(text: &str) -> Result<Settings, RemoteError> {
    let malformed = || RemoteError::Refused("malformed answer".into());
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Err(malformed());
    }
    let first = lines.next().ok_or_else(malformed)?;
    if let Some(why) = first.strip_prefix("refused ") {
        return Err(RemoteError::Refused(why.to_string()));
    }
    let mut field = |first: Option<&str>, key: &str| {
        first
            .or_else(|| lines.next())
            .and_then(|line| line.strip_prefix(key))
            .map(str::to_string)
            .ok_or_else(malformed)
    };
    let limit = decode_limit(&field(Some(first), "rate ")?).ok_or_else(malformed)?;
    let burst = field(None, "burst ")?.parse().map_err(|_| malformed())?;
    let paused = match field(None, "")?.as_str() {
        "paused" => true,
        "running" => false,
        _ => return Err(malformed()),
    };
    let counting = field(None, "counting ")?
        .parse()
        .ok()
        .and_then(Counting::from_code)
        .ok_or_else(malformed)?;
    Ok(Settings {
        limit,
        burst,
        paused,
        counting,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written<T: std::str::FromStr<Err = String>>(text: &str) -> Written<T> {
        text.parse().unwrap()
    }

    #[test]
    fn requests_and_answers_survive_the_trip() {
        let request = Request {
            rate: Some(written("30/min")),
            way_rates: [None, Some(written("8MiB"))],
            burst: Some(written("64KiB")),
            paused: Some(false),
            retune: Retune {
                faults: vec![
                    Change::parse("slice", "down:7:3").unwrap(),
                    Change::parse("stall-after", "off").unwrap(),
                ],
                delay: [None, Some(Duration::from_millis(1500))],
                jitter: Some(Duration::ZERO),
            },
            http: vec![
                ("http-status".into(), "503:try later".into()),
                ("http-stall".into(), String::new()),
            ],
        };
        assert_eq!(
            decode_request(&encode_request(&request)),
            Ok(request.clone())
        );
        let both = Request {
            retune: Retune {
                delay: [Some(Duration::from_millis(40)); 2],
                ..request.retune
            },
            ..request
        };
        assert!(
            encode_request(&both).contains("\ndelay 40ms\n"),
            "as before"
        );
        assert_eq!(decode_request(&encode_request(&both)), Ok(both));
        let lift = Request {
            rate: Some(written("unlimited")),
            ..Request::default()
        };
        assert_eq!(decode_request(&encode_request(&lift)), Ok(lift));
        let settings = Settings {
            limit: Limit::per_second(1 << 20),
            burst: 7,
            paused: true,
            counting: Counting::Lines,
        };
        assert_eq!(
            decode_answer(&encode_answer(&Ok(Answer {
                settings,
                report: "delay 200ms; 5 bytes\nin 1 s".into()
            })))
            .unwrap(),
            Answer {
                settings,
                report: "delay 200ms; 5 bytes\\nin 1 s".into()
            }
        );
        assert!(
            matches!(decode_answer(&encode_answer(&Err("no".into()))), Err(RemoteError::Refused(w)) if w == "no")
        );
    }

    #[test]
    fn an_answer_names_the_way_up_where_the_way_down_differs() {
        let settings = Settings {
            limit: Limit::per_second(1 << 20),
            burst: 1 << 17,
            paused: false,
            counting: Counting::Bytes,
        };
        let answer = |report: &str| {
            Answer {
                settings,
                report: report.into(),
            }
            .to_string()
        };
        assert!(answer("down: rate 2.00 MiB/s").starts_with("up: rate 1.00 MiB/s"));
        assert!(answer("delay 20ms").starts_with("rate 1.00 MiB/s"));
        assert!(answer("").starts_with("rate 1.00 MiB/s"));
    }

    #[test]
    fn a_last_line_ending_in_carriage_returns_is_sent_on_the_same() {
        // Found by fuzzing: the last line kept its carriage returns, and
        // a share's member sent the request on with one fewer.
        let text = format!("{MAGIC}\nrate 5MiB\nfault drop 0.5\r\r");
        let request = decode_request(&text).unwrap();
        assert_eq!(decode_request(&encode_request(&request)).unwrap(), request);
        assert_eq!(
            request,
            decode_request(&format!("{MAGIC}\nrate 5MiB\nfault drop 0.5\n")).unwrap()
        );
    }

    #[test]
    fn a_request_means_what_the_running_shape_counts() {
        let request = Request {
            rate: Some(written("2")),
            burst: Some(written("3")),
            ..Request::default()
        };
        let in_bytes = request.adjustment(Counting::Bytes).unwrap();
        assert_eq!(in_bytes.limit, Some(Limit::per_second(2)));
        assert_eq!(in_bytes.burst, Some(3));
        let in_lines = request.adjustment(Counting::Lines).unwrap();
        assert_eq!(in_lines.limit, Some(Limit::per_second(2 << 20)));
        assert_eq!(in_lines.burst, Some(3 << 20));
        let bytes = Request {
            rate: Some(written("5MiB")),
            ..Request::default()
        };
        assert!(bytes.adjustment(Counting::Lines).is_err());
    }

    #[test]
    fn malformed_requests_are_refused() {
        for text in [
            "",
            "rate 1\n",
            "shape-control 1\nrate 65536\n",
            "shape-control 2\nrate 0\n",
            "shape-control 2\nrate fast\n",
            "shape-control 2\nburst -5\n",
            "shape-control 2\nburst 99999999999999999999\n",
            "shape-control 2\nrate 1\nrate 1\n",
            "shape-control 2\npause\nresume\n",
            "shape-control 2\nexec rm -rf /\n",
            "shape-control 2\npause now\n",
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
            counting: Counting::Bytes,
        };
        assert_eq!(settings.to_string(), "rate 4.00 MiB/s, burst 64.00 KiB");
        let paused = Settings {
            limit: Limit::Unlimited,
            burst: 1,
            paused: true,
            counting: Counting::Bytes,
        };
        assert_eq!(paused.to_string(), "rate unlimited, burst 1 B, paused");
        let lines = Settings {
            limit: Limit::per_second(1 << 19),
            burst: 1 << 20,
            paused: false,
            counting: Counting::Lines,
        };
        assert_eq!(lines.to_string(), "rate 30.00 lines/min, burst 1 line");
    }
}
