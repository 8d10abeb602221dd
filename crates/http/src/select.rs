//! Which requests a rule picks: those that match its filters (`--path`,
//! `--method`, `--header`, `--during`), then, counted among those, the
//! first N, every Nth and a share drawn from the seed (`--first`,
//! `--every`, `--affect`), all of them at once. The counts are the
//! proxy's, not a connection's: a client that retries on a new connection
//! meets the same "first two". The n-th match is drawn from the seed and
//! n alone, so a rerun with the seed picks the same requests.

use crate::framing::RequestHead;
use globset::{GlobBuilder, GlobMatcher};
use shape_leaves::duration::{self, Accepted};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a rule picks.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only the first this many matches.
    pub first: Option<u64>,
    /// Only every this-many-th match: the n-th, 2n-th, ...
    pub every: Option<u64>,
    /// Each match with this chance, drawn from the seed.
    pub affect: Option<f64>,
    pub path: Option<PathPattern>,
    /// The method, whatever its case.
    pub method: Option<String>,
    pub header: Option<HeaderMatch>,
    pub during: Option<During>,
}

/// How many requests a rule has seen, matched and picked: one count for
/// every connection of a proxy, or of an `--exec` run.
#[derive(Debug, Default)]
pub struct Counts {
    pub seen: AtomicU64,
    pub matched: AtomicU64,
    pub picked: AtomicU64,
}

impl Selection {
    /// Whether the rule picks `request`, which came `since` after the
    /// proxy started, counting it in `counts`; chance is drawn from
    /// `seed`.
    pub fn picks(
        &self,
        request: &RequestHead,
        since: Duration,
        counts: &Counts,
        seed: u64,
    ) -> bool {
        counts.seen.fetch_add(1, Ordering::Relaxed);
        if !self.matches(request, since) {
            return false;
        }
        let index = counts.matched.fetch_add(1, Ordering::Relaxed);
        let picked = self.first.is_none_or(|first| index < first)
            && self
                .every
                .is_none_or(|every| every > 0 && (index + 1) % every == 0)
            && self.affect.is_none_or(|chance| draw(seed, index) < chance);
        if picked {
            counts.picked.fetch_add(1, Ordering::Relaxed);
        }
        picked
    }

    /// Whether `request`, `since` after the start, passes every filter.
    pub fn matches(&self, request: &RequestHead, since: Duration) -> bool {
        self.method
            .as_ref()
            .is_none_or(|method| method.eq_ignore_ascii_case(&request.method))
            && self
                .path
                .as_ref()
                .is_none_or(|path| path.matcher.is_match(request.path()))
            && self
                .header
                .as_ref()
                .is_none_or(|header| header.matches(request))
            && self.during.is_none_or(|during| during.holds(since))
    }
}

impl fmt::Display for Selection {
    /// Which requests, in words: `to requests among the first 2 of POST
    /// /pay/*`, `to every request with X-Chaos: hang`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut which = Vec::new();
        if let Some(first) = self.first {
            which.push(format!("among the first {first}"));
        }
        if let Some(every) = self.every {
            which.push(format!("every {}", ordinal(every)));
        }
        if let Some(affect) = self.affect {
            which.push(format!("{}% by chance", affect * 100.0));
        }
        match which.is_empty() {
            true => f.write_str("to every request")?,
            false => write!(f, "to requests {}", which.join(" and "))?,
        }
        let of: Vec<String> = [
            self.method.clone(),
            self.path.as_ref().map(|p| p.to_string()),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !of.is_empty() {
            write!(f, " of {}", of.join(" "))?;
        }
        if let Some(header) = &self.header {
            match &header.value {
                Some(value) => write!(f, " with {}: {value}", header.name)?,
                None => write!(f, " with {}", header.name)?,
            }
        }
        if let Some(during) = &self.during {
            write!(
                f,
                " from {} to {} after it was set",
                span(during.from),
                span(during.until)
            )?;
        }
        Ok(())
    }
}

/// `n` as an ordinal: 1st, 2nd, 3rd, 4th, 11th, 22nd.
fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A time after the rule was set, as a flag would give it: `0s`, `1.5s`.
fn span(time: Duration) -> String {
    match time.is_zero() {
        true => "0s".into(),
        false => format!("{time:?}"),
    }
}

/// The chance of the `index`-th match, in [0, 1): the seed's, mixed with
/// the index alone (splitmix64).
fn draw(seed: u64, index: u64) -> f64 {
    let mut x = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// `text` as a method's name, which is a token (`GET`, `POST`), or why
/// not.
pub fn method(text: &str) -> Result<String, String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    match !text.is_empty() && text.chars().all(token) {
        true => Ok(text.to_string()),
        false => Err("expected a method's name (e.g. GET, POST)".into()),
    }
}

/// A path pattern (`--path '/pay/*'`): `*` and `?` stay within a segment,
/// `**` crosses them, `{a,b}` is either; the query is not part of the
/// path.
#[derive(Debug, Clone)]
pub struct PathPattern {
    text: String,
    matcher: GlobMatcher,
}

impl FromStr for PathPattern {
    type Err = String;

    fn from_str(text: &str) -> Result<PathPattern, String> {
        if !text.starts_with('/') && !text.starts_with('*') {
            return Err("a path starts with / (e.g. /pay/*, /api/**, /shop.Cart/Checkout)".into());
        }
        let glob = GlobBuilder::new(text)
            .literal_separator(true)
            .build()
            .map_err(|err| format!("not a path pattern: {}", err.kind()))?;
        Ok(PathPattern {
            text: text.to_string(),
            matcher: glob.compile_matcher(),
        })
    }
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A header a request must carry (`--header 'X-Chaos: hang'`), with that
/// value if one is given: the name whatever its case, the value exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMatch {
    pub name: String,
    pub value: Option<String>,
}

impl HeaderMatch {
    fn matches(&self, request: &RequestHead) -> bool {
        request
            .headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case(&self.name))
            .any(|(_, value)| {
                self.value
                    .as_ref()
                    .is_none_or(|wanted| value.trim_ascii() == wanted.as_bytes())
            })
    }
}

impl FromStr for HeaderMatch {
    type Err = String;

    fn from_str(text: &str) -> Result<HeaderMatch, String> {
        let (name, value) = match text.split_once(':') {
            Some((name, value)) => (name.trim(), Some(value.trim().to_string())),
            None => (text.trim(), None),
        };
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(token) {
            return Err(
                "expected a header's name, and its value after ':' if it must have one \
                 (e.g. 'X-Chaos: hang', X-Canary)"
                    .into(),
            );
        }
        Ok(HeaderMatch {
            name: name.to_string(),
            value: value.filter(|value| !value.is_empty()),
        })
    }
}

/// A window of time after the proxy's start (`--during 10s..20s`): from
/// the first moment, up to but not including the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct During {
    pub from: Duration,
    pub until: Duration,
}

impl During {
    fn holds(&self, since: Duration) -> bool {
        self.from <= since && since < self.until
    }
}

impl FromStr for During {
    type Err = String;

    fn from_str(text: &str) -> Result<During, String> {
        const SPAN: Accepted = Accepted {
            least: Duration::ZERO,
            most: Duration::from_secs(366 * 24 * 3600),
            plain_seconds: true,
            examples: "e.g. 10s..20s, 0..1m, 5m..1h",
        };
        let Some((from, until)) = text.split_once("..") else {
            return Err("expected FROM..UNTIL after the start (e.g. 10s..20s, 0..1m)".into());
        };
        let (from, until) = (
            duration::parse(from, &SPAN)?,
            duration::parse(until, &SPAN)?,
        );
        if until <= from {
            return Err("the window ends before it begins (e.g. 10s..20s)".into());
        }
        Ok(During { from, until })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::{Framing, RequestHead};

    fn request(method: &str, target: &str, headers: &[(&str, &str)]) -> RequestHead {
        RequestHead {
            method: method.into(),
            target: target.into(),
            minor: 1,
            headers: headers
                .iter()
                .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
                .collect(),
            framing: Framing::Empty,
            close: false,
            expects_continue: false,
        }
    }

    /// Which of `n` GETs of `/` the selection picks, in order.
    fn picked(selection: &Selection, n: u64, seed: u64) -> Vec<u64> {
        let counts = Counts::default();
        let get = request("GET", "/", &[]);
        (0..n)
            .filter(|_| selection.picks(&get, Duration::ZERO, &counts, seed))
            .collect()
    }

    #[test]
    fn first_every_and_affect_count_matches_and_combine() {
        let first = Selection {
            first: Some(2),
            ..Selection::default()
        };
        assert_eq!(picked(&first, 5, 0), [0, 1]);
        let every = Selection {
            every: Some(5),
            ..Selection::default()
        };
        assert_eq!(picked(&every, 12, 0), [4, 9]);
        let both = Selection {
            first: Some(6),
            every: Some(2),
            ..Selection::default()
        };
        assert_eq!(picked(&both, 10, 0), [1, 3, 5]);
        let tenth = Selection {
            affect: Some(0.1),
            ..Selection::default()
        };
        let once = picked(&tenth, 10_000, 7);
        assert_eq!(
            once,
            picked(&tenth, 10_000, 7),
            "a seed picks the same again"
        );
        assert_ne!(once, picked(&tenth, 10_000, 8));
        assert!((900..1100).contains(&once.len()), "{}", once.len());
    }

    #[test]
    fn only_matches_are_counted_towards_first_and_every() {
        let selection = Selection {
            first: Some(1),
            path: Some("/pay/*".parse().unwrap()),
            method: Some("post".into()),
            ..Selection::default()
        };
        let counts = Counts::default();
        let pick = |method, target| {
            selection.picks(&request(method, target, &[]), Duration::ZERO, &counts, 0)
        };
        assert!(!pick("POST", "/shop"));
        assert!(!pick("GET", "/pay/1"));
        assert!(!pick("POST", "/pay/1/2"), "* stays within a segment");
        assert!(pick("POST", "/pay/1?x=2"));
        assert!(
            selection.matches(
                &request("POST", "http://shop:80/pay/3", &[]),
                Duration::ZERO
            ),
            "a target in absolute form"
        );
        assert!(!pick("POST", "/pay/2"));
        let seen = counts.seen.load(Ordering::Relaxed);
        let matched = counts.matched.load(Ordering::Relaxed);
        let picked = counts.picked.load(Ordering::Relaxed);
        assert_eq!((seen, matched, picked), (5, 2, 1));
    }

    #[test]
    fn a_header_and_a_window_filter() {
        let hang: HeaderMatch = "X-Chaos: hang".parse().unwrap();
        assert!(hang.matches(&request("GET", "/", &[("x-chaos", " hang ")])));
        assert!(!hang.matches(&request("GET", "/", &[("X-Chaos", "slow")])));
        let any: HeaderMatch = "X-Canary".parse().unwrap();
        assert!(any.matches(&request("GET", "/", &[("X-CANARY", "")])));
        let window: During = "10s..20s".parse().unwrap();
        assert!(!window.holds(Duration::from_secs(9)));
        assert!(window.holds(Duration::from_secs(10)));
        assert!(!window.holds(Duration::from_secs(20)));
    }

    #[test]
    fn bad_patterns_headers_and_windows_are_refused_in_words() {
        assert!(
            "pay/*"
                .parse::<PathPattern>()
                .unwrap_err()
                .contains("starts with /")
        );
        assert!("/pay/[".parse::<PathPattern>().is_err());
        assert!("Bad Name: x".parse::<HeaderMatch>().is_err());
        assert!(": x".parse::<HeaderMatch>().is_err());
        assert!(
            "20s..10s"
                .parse::<During>()
                .unwrap_err()
                .contains("ends before")
        );
        assert!("10s".parse::<During>().is_err());
        assert!("**".parse::<PathPattern>().is_ok());
    }
}
