//! toxiproxy's toxics as its API speaks of them, in one table: each kind,
//! its attributes with their units and toxiproxy's defaults, and the
//! attributes and kinds shape adds beyond toxiproxy's. From the table come
//! the [`Kind`] enum, the defaults a new toxic is given, how an update
//! merges new attributes into a toxic's (and which values are refused),
//! the typed reading of attributes that effects are made from
//! ([`Attributes`], in `carry.rs`), and the toxics' list in the man page
//! and README (checked by a test).
//!
//! Adding a toxic is a row here and a variant of [`Kind`]; its effect is
//! an arm of the match in `carry.rs`, which does not compile without it.

use serde::Serialize;
use serde_json::{Map, Value};
use std::time::Duration;

/// The unit of an attribute, as the API gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Milliseconds,
    Microseconds,
    Bytes,
    /// toxiproxy's KB: 1000 bytes.
    KiloBytes,
    /// KB/s of 1000 bytes.
    KiloBytesPerSecond,
    /// A number from 0 to 1.
    Probability,
    /// 0 or 1.
    Flag,
}

impl Unit {
    /// How the docs say it.
    pub fn said(self) -> &'static str {
        match self {
            Unit::Milliseconds => "ms",
            Unit::Microseconds => "µs",
            Unit::Bytes => "bytes",
            Unit::KiloBytes => "KB",
            Unit::KiloBytesPerSecond => "KB/s of 1000 bytes",
            Unit::Probability => "0 to 1",
            Unit::Flag => "0 or 1",
        }
    }

    /// What a value must be, for the error that refuses one.
    fn wanted(self) -> &'static str {
        match self {
            Unit::Probability => "a number from 0 to 1",
            _ => "a whole number",
        }
    }

    /// True if `value` is one of this unit's. Whole numbers must be whole,
    /// as toxiproxy decodes them into integers.
    fn fits(self, value: &Value) -> bool {
        match self {
            Unit::Probability => value.as_f64().is_some_and(|p| (0.0..=1.0).contains(&p)),
            _ => value.is_i64(),
        }
    }

    /// The default, as toxiproxy shows it.
    fn zero(self) -> Value {
        match self {
            Unit::Probability => Value::from(0.0),
            _ => Value::from(0),
        }
    }
}

/// One attribute of a kind of toxic.
#[derive(Debug)]
pub struct Attribute {
    pub name: &'static str,
    pub unit: Unit,
    /// shape's, not toxiproxy's: absent until given, as toxiproxy's own
    /// toxics have no such field.
    pub extra: bool,
}

/// One kind of toxic: a row of the table.
#[derive(Debug)]
pub struct Row {
    pub kind: Kind,
    pub attributes: &'static [Attribute],
    /// A kind of shape's own, not toxiproxy's.
    pub extra: bool,
    /// What shape does with it, for the docs (plain text).
    pub does: &'static str,
    /// What carries it out, for README (Markdown).
    pub by: &'static str,
    /// What shape's extra attributes of it do, and with what, if it has
    /// any.
    pub extras: Option<(&'static str, &'static str)>,
}

/// The kinds of toxic, named as the API names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Latency,
    Bandwidth,
    SlowClose,
    Timeout,
    ResetPeer,
    Slicer,
    LimitData,
    Noop,
    Loss,
    Corrupt,
}

const fn of(name: &'static str, unit: Unit) -> Attribute {
    Attribute {
        name,
        unit,
        extra: false,
    }
}

const fn extra(name: &'static str, unit: Unit) -> Attribute {
    Attribute {
        name,
        unit,
        extra: true,
    }
}

/// The table, in the order the docs list the toxics.
pub static TOXICS: &[Row] = &[
    Row {
        kind: Kind::Latency,
        attributes: &[
            of("latency", Unit::Milliseconds),
            of("jitter", Unit::Milliseconds),
        ],
        extra: false,
        does: "the same, to the microsecond",
        by: "the delay line (`--delay`, `--jitter`)",
        extras: None,
    },
    Row {
        kind: Kind::Bandwidth,
        attributes: &[
            of("rate", Unit::KiloBytesPerSecond),
            extra("shared", Unit::Flag),
            extra("burst", Unit::KiloBytes),
        ],
        extra: false,
        does: "exact: 480 KB at 1000 KB/s take 480 ms, and every 10 ms carries its share (toxiproxy sleeps in steps of up to 100 ms)",
        by: "a bucket per connection, whose burst is one 5 ms chunk",
        extras: Some((
            "shared: one rate for all of a proxy's connections (toxiproxy #190, #613), with burst if given",
            "one bucket per proxy and stream",
        )),
    },
    Row {
        kind: Kind::SlowClose,
        attributes: &[of("delay", Unit::Milliseconds)],
        extra: false,
        does: "the same",
        by: "`--slow-close`",
        extras: None,
    },
    Row {
        kind: Kind::Timeout,
        attributes: &[of("timeout", Unit::Milliseconds)],
        extra: false,
        does: "nothing passes; the connection closes after the timeout, or never with 0; removing the toxic closes it",
        by: "`--stall-after 0`, and a close in the connection's plan",
        extras: None,
    },
    Row {
        kind: Kind::ResetPeer,
        attributes: &[of("timeout", Unit::Milliseconds)],
        extra: false,
        does: "what comes is dropped; both sides reset (ECONNRESET) at the first byte, or after the timeout",
        by: "`--reset-after`",
        extras: None,
    },
    Row {
        kind: Kind::Slicer,
        attributes: &[
            of("average_size", Unit::Bytes),
            of("size_variation", Unit::Bytes),
            of("delay", Unit::Microseconds),
        ],
        extra: false,
        does: "the same",
        by: "`--slice`, `--slice-pause`",
        extras: None,
    },
    Row {
        kind: Kind::LimitData,
        attributes: &[of("bytes", Unit::Bytes)],
        extra: false,
        does: "the same: that many bytes, then the end",
        by: "`--cut-after`",
        extras: None,
    },
    Row {
        kind: Kind::Noop,
        attributes: &[],
        extra: false,
        does: "the same",
        by: "",
        extras: None,
    },
    Row {
        kind: Kind::Loss,
        attributes: &[of("probability", Unit::Probability)],
        extra: true,
        does: "blocks of 1 KiB lost, seeded (toxiproxy #39)",
        by: "`--drop`",
        extras: None,
    },
    Row {
        kind: Kind::Corrupt,
        attributes: &[of("probability", Unit::Probability)],
        extra: true,
        does: "one bit of a byte flipped, seeded (toxiproxy #578)",
        by: "`--corrupt`",
        extras: None,
    },
];

impl Row {
    /// shape's extra attributes of this kind, each as `say` puts it.
    pub fn extras_said(&self, say: impl Fn(&Attribute) -> String) -> Vec<String> {
        self.attributes
            .iter()
            .filter(|a| a.extra)
            .map(say)
            .collect()
    }
}

impl Kind {
    /// The kind the API calls `name`, if there is one.
    pub fn named(name: &str) -> Option<Kind> {
        TOXICS
            .iter()
            .map(|row| row.kind)
            .find(|kind| kind.name() == name)
    }

    /// Its name in the API.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Latency => "latency",
            Kind::Bandwidth => "bandwidth",
            Kind::SlowClose => "slow_close",
            Kind::Timeout => "timeout",
            Kind::ResetPeer => "reset_peer",
            Kind::Slicer => "slicer",
            Kind::LimitData => "limit_data",
            Kind::Noop => "noop",
            Kind::Loss => "loss",
            Kind::Corrupt => "corrupt",
        }
    }

    /// Its row of the table.
    pub fn row(self) -> &'static Row {
        TOXICS
            .iter()
            .find(|row| row.kind == self)
            .expect("every kind has a row: checked by a test")
    }

    /// Its attribute `name`, if it has one.
    fn attribute(self, name: &str) -> Option<&'static Attribute> {
        self.row().attributes.iter().find(|a| a.name == name)
    }

    /// The attributes a new toxic of this kind has: toxiproxy's, each at
    /// its default (shape's extras only once given).
    pub fn defaults(self) -> Map<String, Value> {
        self.row()
            .attributes
            .iter()
            .filter(|attribute| !attribute.extra)
            .map(|attribute| (attribute.name.to_string(), attribute.unit.zero()))
            .collect()
    }
}

/// Why attributes were refused: the attribute and what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadAttribute {
    pub name: String,
    pub wanted: &'static str,
}

/// `attributes` (defaults of kind `kind`, or a toxic's own) with `given`
/// merged in: what is given replaces, what is omitted stays, and names
/// the kind does not have are ignored, as toxiproxy ignores unknown JSON
/// fields. A value must be of its attribute's unit.
pub fn merge(
    kind: Kind,
    attributes: &mut Map<String, Value>,
    given: &Map<String, Value>,
) -> Result<(), BadAttribute> {
    for (name, value) in given {
        let Some(attribute) = kind.attribute(name) else {
            continue;
        };
        if !attribute.unit.fits(value) {
            return Err(BadAttribute {
                name: name.clone(),
                wanted: attribute.unit.wanted(),
            });
        }
        attributes.insert(name.clone(), value.clone());
    }
    Ok(())
}

/// The longest time an attribute gives: shape's longest delay, an hour.
/// Longer times are an hour.
pub const LONGEST: Duration = crate::slowlink::LONGEST_DELAY;

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
        self.whole(name, Unit::Flag) != 0
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

/// README's rows for the table's toxics: toxiproxy's kinds, then shape's
/// extra attributes and kinds, each `| toxic | what shape does | what
/// carries it out |`.
pub fn readme_rows() -> Vec<String> {
    let mut rows: Vec<String> = TOXICS
        .iter()
        .filter(|row| !row.extra)
        .map(|row| cells(&[&signature(row), row.does, row.by]))
        .collect();
    for row in TOXICS {
        if let Some((does, by)) = row.extras {
            let extras = row.extras_said(|a| format!("{}: {}", a.name, a.unit.said()));
            let toxic = format!("**extra:** `{}` ({})", row.kind.name(), extras.join("; "));
            rows.push(cells(&[&toxic, does, by]));
        }
    }
    rows.extend(TOXICS.iter().filter(|row| row.extra).map(|row| {
        let toxic = format!("**extra:** {}", signature(row));
        cells(&[&toxic, row.does, row.by])
    }));
    rows
}

/// A row of a Markdown table: `| a | b | |`.
fn cells(cells: &[&str]) -> String {
    let mut row = String::from("|");
    for cell in cells {
        row.push(' ');
        if !cell.is_empty() {
            row.push_str(cell);
            row.push(' ');
        }
        row.push('|');
    }
    row
}

/// How the docs list a kind: `latency` (latency, jitter: ms), with each
/// run of attributes of one unit named before it, shape's extras left
/// out.
pub fn signature(row: &Row) -> String {
    let mut said = format!("`{}`", row.kind.name());
    let attributes: Vec<&Attribute> = row.attributes.iter().filter(|a| !a.extra).collect();
    if attributes.is_empty() {
        return said;
    }
    let mut runs: Vec<(Vec<&str>, Unit)> = Vec::new();
    for attribute in attributes {
        match runs.last_mut() {
            Some((names, unit)) if *unit == attribute.unit => names.push(attribute.name),
            _ => runs.push((vec![attribute.name], attribute.unit)),
        }
    }
    let runs: Vec<String> = runs
        .iter()
        .map(|(names, unit)| format!("{}: {}", names.join(", "), unit.said()))
        .collect();
    said.push_str(&format!(" ({})", runs.join("; ")));
    said
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn every_kind_has_one_row_and_its_name_back() {
        for row in TOXICS {
            assert!(std::ptr::eq(row.kind.row(), row));
            assert_eq!(Kind::named(row.kind.name()), Some(row.kind));
            assert_eq!(
                serde_json::to_value(row.kind).unwrap(),
                json!(row.kind.name())
            );
        }
        assert_eq!(TOXICS.len(), 10);
        assert_eq!(Kind::named("bogus"), None);
        assert_eq!(Kind::named("Latency"), None, "names are exact");
    }

    #[test]
    fn every_toxiproxy_kind_has_its_attributes_with_defaults() {
        assert_eq!(
            Value::Object(Kind::Latency.defaults()),
            json!({"latency": 0, "jitter": 0})
        );
        assert_eq!(
            Value::Object(Kind::Slicer.defaults()),
            json!({"average_size": 0, "size_variation": 0, "delay": 0})
        );
        assert_eq!(
            Value::Object(Kind::Bandwidth.defaults()),
            json!({"rate": 0})
        );
        assert_eq!(Value::Object(Kind::Noop.defaults()), json!({}));
        assert_eq!(
            Value::Object(Kind::Loss.defaults()),
            json!({"probability": 0.0})
        );
    }

    #[test]
    fn an_update_merges_and_keeps_what_it_omits() {
        let mut attributes = Kind::Latency.defaults();
        merge(
            Kind::Latency,
            &mut attributes,
            &map(json!({"latency": 100})),
        )
        .unwrap();
        merge(
            Kind::Latency,
            &mut attributes,
            &map(json!({"jitter": 5, "colour": "red"})),
        )
        .unwrap();
        assert_eq!(
            Value::Object(attributes.clone()),
            json!({"latency": 100, "jitter": 5})
        );
        let refused = merge(
            Kind::Latency,
            &mut attributes,
            &map(json!({"latency": 1.5})),
        );
        assert_eq!(
            refused,
            Err(BadAttribute {
                name: "latency".into(),
                wanted: "a whole number"
            })
        );
        let mut bandwidth = Kind::Bandwidth.defaults();
        merge(
            Kind::Bandwidth,
            &mut bandwidth,
            &map(json!({"rate": 1000, "shared": 1})),
        )
        .unwrap();
        assert_eq!(Value::Object(bandwidth), json!({"rate": 1000, "shared": 1}));
        let mut loss = Kind::Loss.defaults();
        let refused = merge(Kind::Loss, &mut loss, &map(json!({"probability": 2})));
        assert_eq!(refused.unwrap_err().wanted, "a number from 0 to 1");
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

    #[test]
    fn the_docs_list_every_toxic_as_the_table_has_it() {
        let readme = include_str!("../../README.md");
        let man = crate::cli::generate::toxics_for_the_man_page();
        for line in readme_rows() {
            assert!(
                readme.lines().any(|l| l == line),
                "README.md's toxics table lacks, or has otherwise:\n{line}"
            );
        }
        for row in TOXICS {
            assert!(
                man.contains(&format!("\\fB{}\\fR", row.kind.name())),
                "the man page misses {}",
                row.kind.name()
            );
        }
        assert_eq!(
            signature(Kind::Latency.row()),
            "`latency` (latency, jitter: ms)"
        );
        assert_eq!(
            signature(Kind::Slicer.row()),
            "`slicer` (average_size, size_variation: bytes; delay: µs)"
        );
        assert_eq!(signature(Kind::Noop.row()), "`noop`");
    }
}
