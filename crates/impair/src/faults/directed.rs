//! Values for one direction of a proxy or both (`up:7`, `down:7`, `7`,
//! `off`), and the plain values that fault flags take.

use super::parse_probability;
use std::time::Duration;

/// A value for one direction of a proxy or both: `down:7` is the server's
/// replies only, `up:7` the clients' requests only, `7` both. `off` (or
/// `down:off`) turns the fault off, as a change sent with `--remote` may.
/// A pipe has one direction, and takes values without a prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct Directed<T> {
    /// For each direction: not given, off (`Some(None)`), or a value.
    up: Option<Option<T>>,
    down: Option<Option<T>>,
    /// As the user wrote it, to be sent on by `--remote`.
    text: String,
}

impl<T: std::str::FromStr<Err = String> + Clone> std::str::FromStr for Directed<T> {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (up, down, value) = match text.split_once(':') {
            Some(("up", value)) => (true, false, value),
            Some(("down", value)) => (false, true, value),
            _ => (true, true, text),
        };
        let value = match value.trim() {
            "off" => None,
            value => Some(value.parse()?),
        };
        Ok(Directed {
            up: up.then(|| value.clone()),
            down: down.then_some(value),
            text: text.to_string(),
        })
    }
}

impl<T: Clone> Directed<T> {
    /// `value` for both directions, made by shape rather than written by
    /// a user (a toxic's): it has no text to send on.
    pub fn both(value: T) -> Directed<T> {
        Directed {
            up: Some(Some(value.clone())),
            down: Some(Some(value)),
            text: String::new(),
        }
    }

    /// What this says of `direction`: nothing (not given for it), off
    /// (`Some(None)`), or a value.
    pub fn of(&self, direction: Way) -> Option<Option<T>> {
        match direction {
            Way::Up => self.up.clone(),
            Way::Down => self.down.clone(),
        }
    }

    /// True if the value was given for one direction only.
    pub fn one_sided(&self) -> bool {
        self.up.is_none() || self.down.is_none()
    }

    /// The value as the user wrote it.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// One direction of a proxy: the clients' requests, or the replies. A
/// pipe's one direction is `Down`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    Up,
    Down,
}

impl Way {
    pub const BOTH: [Way; 2] = [Way::Up, Way::Down];

    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Way::Up => "up",
            Way::Down => "down",
        }
    }

    /// The way toxiproxy's API calls a stream: `upstream` (the clients'
    /// requests) or `downstream`, in any case.
    pub fn of_stream(stream: &str) -> Option<Way> {
        Way::BOTH
            .into_iter()
            .find(|way| way.stream().eq_ignore_ascii_case(stream))
    }

    /// This way's name in toxiproxy's API.
    pub fn stream(self) -> &'static str {
        match self {
            Way::Up => "upstream",
            Way::Down => "downstream",
        }
    }
}

/// A probability, as a value that [`Directed`] can carry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probability(pub f64);

impl std::str::FromStr for Probability {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        parse_probability(text).map(Probability)
    }
}

/// A size, as a value that [`Directed`] can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl std::str::FromStr for Bytes {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.parse::<shape_bucket::units::Size>()
            .map(|size| Bytes(size.bytes()))
    }
}

/// A duration from 0 to an hour, as a value that [`Directed`] can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

impl std::str::FromStr for Span {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        crate::slowlink::parse_delay(text).map(Span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_for_both_directions_unless_prefixed_and_off_turns_it_off() {
        let both: Directed<Bytes> = "1KiB".parse().unwrap();
        assert_eq!(both.of(Way::Up), Some(Some(Bytes(1024))));
        assert_eq!(both.of(Way::Down), Some(Some(Bytes(1024))));
        assert!(!both.one_sided());
        let down: Directed<Bytes> = "down:7".parse().unwrap();
        assert_eq!(down.of(Way::Up), None);
        assert_eq!(down.of(Way::Down), Some(Some(Bytes(7))));
        assert!(down.one_sided());
        let off: Directed<Bytes> = "up:off".parse().unwrap();
        assert_eq!(off.of(Way::Up), Some(None));
        assert_eq!(off.text(), "up:off");
        let slice: Directed<super::super::Slice> = "down:1KiB:512".parse().unwrap();
        assert_eq!(
            slice.of(Way::Down),
            Some(Some(super::super::Slice {
                size: 1024,
                variation: 512
            }))
        );
        for bad in ["up:", "sideways:7", "down:x", ""] {
            assert!(bad.parse::<Directed<Bytes>>().is_err(), "{bad}");
        }
    }
}
