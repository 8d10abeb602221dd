//! Durations as people write them on the command line: humantime's forms
//! (`500ms`, `1.5s`, `2m`, `1h 30m`), and for some flags plain seconds as
//! pv takes them (`0.5`). One parser for every flag, each with its range.

use std::time::Duration;

/// The lesser of two amounts, either of which may be missing (a moment
/// never reached, a limit not set): the earlier of two deadlines.
pub fn least<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    a.into_iter().chain(b).min()
}

/// What one flag accepts.
#[derive(Debug, Clone, Copy)]
pub struct Accepted {
    /// The shortest accepted.
    pub least: Duration,
    /// The longest accepted.
    pub most: Duration,
    /// Whether a bare number counts as seconds; where it does not, a bare
    /// number other than 0 is refused as ambiguous.
    pub plain_seconds: bool,
    /// Examples shown in every error.
    pub examples: &'static str,
}

/// Parses `text` as a duration within `span`.
pub fn parse(text: &str, span: &Accepted) -> Result<Duration, String> {
    let text = text.trim();
    let plain = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let duration = if plain && span.plain_seconds {
        text.parse::<f64>()
            .ok()
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
            .ok_or_else(|| format!("expected a duration ({})", span.examples))?
    } else {
        humantime::parse_duration(text)
            .map_err(|err| format!("{} ({})", in_our_words(text, &err), span.examples))?
    };
    if duration < span.least || duration > span.most {
        return Err(format!(
            "must be from {} to {} ({})",
            humantime::format_duration(span.least),
            humantime::format_duration(span.most),
            span.examples
        ));
    }
    Ok(duration)
}

/// Why `text` is not a duration, said in shape's words rather than the
/// parser's (which counts byte offsets and lists months and years).
fn in_our_words(text: &str, err: &humantime::DurationError) -> String {
    use humantime::DurationError;
    match err {
        _ if text.starts_with('-') => "a duration cannot be negative".into(),
        DurationError::Empty => "no duration given".into(),
        DurationError::UnknownUnit { unit, .. } if unit.is_empty() => {
            "a number needs a unit: ns, us, ms, s, m, h or d".into()
        }
        DurationError::UnknownUnit { unit, .. } => {
            format!("unknown unit '{unit}': use ns, us, ms, s, m, h or d")
        }
        DurationError::NumberOverflow => "too long".into(),
        DurationError::InvalidCharacter(_) | DurationError::NumberExpected(_) => {
            "not a duration".into()
        }
    }
}

/// `span` in nanoseconds, as the monotonic clock counts; saturating, far
/// beyond any span shape is given.
pub fn nanos(span: Duration) -> u64 {
    u64::try_from(span.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_of_two_that_may_be_missing() {
        assert_eq!(least(Some(3), Some(2)), Some(2));
        assert_eq!(least(None, Some(2)), Some(2));
        assert_eq!(least(Some(3), None), Some(3));
        assert_eq!(least::<u64>(None, None), None);
    }

    const SPAN: Accepted = Accepted {
        least: Duration::from_millis(10),
        most: Duration::from_secs(3600),
        plain_seconds: true,
        examples: "e.g. 100ms, 0.5, 2s, 1m",
    };

    #[test]
    fn refusals_are_in_shapes_words() {
        let refused = |text| parse(text, &SPAN).unwrap_err();
        assert_eq!(
            refused("-5ms"),
            "a duration cannot be negative (e.g. 100ms, 0.5, 2s, 1m)"
        );
        assert_eq!(
            refused("5 fortnights"),
            "unknown unit 'fortnights': use ns, us, ms, s, m, h or d (e.g. 100ms, 0.5, 2s, 1m)"
        );
        assert_eq!(refused(""), "no duration given (e.g. 100ms, 0.5, 2s, 1m)");
        assert_eq!(refused("fast"), "not a duration (e.g. 100ms, 0.5, 2s, 1m)");
    }

    #[test]
    fn humantime_forms_and_plain_seconds_parse() {
        assert_eq!(parse("100ms", &SPAN), Ok(Duration::from_millis(100)));
        assert_eq!(parse("0.5", &SPAN), Ok(Duration::from_millis(500)));
        assert_eq!(parse(" 2s ", &SPAN), Ok(Duration::from_secs(2)));
        assert_eq!(parse("1h", &SPAN), Ok(Duration::from_secs(3600)));
        let strict = Accepted {
            least: Duration::ZERO,
            plain_seconds: false,
            ..SPAN
        };
        assert_eq!(parse("0", &strict), Ok(Duration::ZERO));
        assert!(parse("100", &strict).is_err(), "ms or s?");
    }

    #[test]
    fn out_of_range_and_malformed_durations_say_why() {
        for bad in [
            "",
            "0",
            "0s",
            "5ms",
            "2h",
            "-1",
            "1e3",
            "soon",
            "1.2.3",
            "nan",
            "inf",
            "1 fortnight",
        ] {
            assert!(parse(bad, &SPAN).unwrap_err().contains("e.g."), "{bad}");
        }
        assert_eq!(
            parse("2h", &SPAN).unwrap_err(),
            "must be from 10ms to 1h (e.g. 100ms, 0.5, 2s, 1m)"
        );
    }
}
