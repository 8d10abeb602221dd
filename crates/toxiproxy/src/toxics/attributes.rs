//! A toxic's attributes read as their units say, into the typed values
//! that effects are made from: times, bytes, rates, flags and
//! probabilities, each within what shape can carry out.

use super::{Kind, Unit};
use serde_json::{Map, Value};
use shape_impair::trace::Trace;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The longest time an attribute gives: shape's longest delay, an hour.
/// Longer times are an hour.
pub const LONGEST: Duration = shape_impair::slowlink::LONGEST_DELAY;

/// A toxic's attributes, read as their units say. Any value the model let
/// through reads as something shape can carry out: a negative number is
/// 0, a time at most [`LONGEST`].
pub struct Attributes<'a> {
    kind: Kind,
    values: &'a Map<String, Value>,
}

impl<'a> Attributes<'a> {
    pub fn of(kind: Kind, values: &'a Map<String, Value>) -> Attributes<'a> {
        Attributes { kind, values }
    }

    /// Attribute `name` as a whole number, 0 if absent or negative.
    fn whole(&self, name: &str, unit: Unit) -> u64 {
        debug_assert_eq!(
            self.kind.attribute(name).map(|a| a.unit),
            Some(unit),
            "{:?} has no {name} in {unit:?}",
            self.kind
        );
        self.values
            .get(name)
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .max(0) as u64
    }

    /// A time in milliseconds or microseconds, at most [`LONGEST`].
    pub fn time(&self, name: &str) -> Duration {
        let time = match self.kind.attribute(name).map(|a| a.unit) {
            Some(Unit::Microseconds) => Duration::from_micros(self.whole(name, Unit::Microseconds)),
            _ => Duration::from_millis(self.whole(name, Unit::Milliseconds)),
        };
        time.min(LONGEST)
    }

    /// A number of bytes.
    pub fn bytes(&self, name: &str) -> u64 {
        self.whole(name, Unit::Bytes)
    }

    /// A rate, in bytes a second (KB/s of 1000 bytes as given).
    pub fn bytes_per_second(&self, name: &str) -> u64 {
        self.whole(name, Unit::KiloBytesPerSecond)
            .saturating_mul(1000)
    }

    /// An amount in bytes (KB as given), if given.
    pub fn kilobytes(&self, name: &str) -> Option<u64> {
        self.values
            .contains_key(name)
            .then(|| self.whole(name, Unit::KiloBytes).saturating_mul(1000))
    }

    /// A flag: true unless absent or 0.
    pub fn flag(&self, name: &str) -> bool {
        match self.values.get(name) {
            Some(Value::Bool(set)) => *set,
            _ => self.whole(name, Unit::Flag) != 0,
        }
    }

    /// The known link named, if one is.
    pub fn profile(&self, name: &str) -> Option<&'static shape_impair::profiles::Profile> {
        let named = self.values.get(name).and_then(Value::as_str)?;
        match shape_impair::profiles::parse_link(named) {
            Ok(shape_impair::profiles::LinkArg::Profile(profile)) => Some(profile),
            _ => None,
        }
    }

    /// The trace the attribute `name` names, read from the server's files
    /// (a path relative to where it was started); none if `""` or absent.
    /// A refusal says where and why, never what the file holds: the API
    /// must not be a way to read the server's files.
    pub fn trace(&self, name: &str) -> Result<Option<Arc<Trace>>, String> {
        let path = self.values.get(name).and_then(Value::as_str).unwrap_or("");
        if path.is_empty() {
            return Ok(None);
        }
        // A pipe or a device would keep the API waiting, or never end.
        match std::fs::metadata(path) {
            Ok(found) if found.is_file() => {}
            Ok(_) => return Err(format!("{path}: not a file")),
            Err(err) => return Err(format!("{path}: {}", shape_leaves::message::one_line(&err))),
        }
        Trace::load(Path::new(path))
            .map(|trace| Some(Arc::new(trace)))
            .map_err(|refusal| refusal.without_contents())
    }

    /// A probability, from 0 to 1.
    pub fn probability(&self, name: &str) -> f64 {
        debug_assert_eq!(
            self.kind.attribute(name).map(|a| a.unit),
            Some(Unit::Probability)
        );
        self.values
            .get(name)
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
            .clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn attributes_read_in_their_units_and_within_reach() {
        let values = map(json!({"latency": 250, "jitter": -5}));
        let latency = Attributes::of(Kind::Latency, &values);
        assert_eq!(latency.time("latency"), Duration::from_millis(250));
        assert_eq!(latency.time("jitter"), Duration::ZERO);
        let values = map(json!({"delay": 40, "average_size": 9, "size_variation": 1}));
        let slicer = Attributes::of(Kind::Slicer, &values);
        assert_eq!(slicer.time("delay"), Duration::from_micros(40));
        assert_eq!(slicer.bytes("average_size"), 9);
        let values = map(json!({"timeout": i64::MAX}));
        assert_eq!(
            Attributes::of(Kind::Timeout, &values).time("timeout"),
            LONGEST
        );
        let values = map(json!({"rate": 5, "burst": 2}));
        let bandwidth = Attributes::of(Kind::Bandwidth, &values);
        assert_eq!(bandwidth.bytes_per_second("rate"), 5000);
        assert_eq!(bandwidth.kilobytes("burst"), Some(2000));
        assert!(!bandwidth.flag("shared"));
    }
}
