//! toxiproxy's toxics as its API speaks of them, in one table: each kind,
//! its attributes with their units and toxiproxy's defaults, and the
//! attributes and kinds shape adds beyond toxiproxy's. From the table come
//! the [`Kind`] enum, the defaults a new toxic is given, how an update
//! merges new attributes into a toxic's (and which values are refused),
//! the typed reading of attributes ([`Attributes`]) that effects are made
//! from (in `carry/effect.rs`), and the toxics' list in the man page and
//! GUIDE.md (checked by a test).
//!
//! Adding a toxic is a row here and a variant of [`Kind`]; its effect is
//! an arm of the matches in `carry/effect.rs` and `carry/datagrams.rs`,
//! which do not compile without it.

mod attributes;
mod docs;
pub mod http;

pub use attributes::Attributes;
pub use docs::{guide_rows, signature};

use serde::Serialize;
use serde_json::{Map, Value};

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
    /// The name of a known link (`--link`).
    Profile,
    /// The path of a trace file on the server (`--trace-down`).
    TracePath,
    /// Text, as the flag of the same name takes it.
    Text,
    /// A whole number of requests.
    Requests,
    /// An HTTP status, 200 to 599; 0 for none.
    Status,
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
            Unit::Flag => "0 or 1 (or false or true)",
            Unit::Profile => "a known link's name (`shape --link list`)",
            Unit::TracePath => "a trace file's path on the server (Mahimahi's format)",
            Unit::Text => "text, as the flag of the same name takes it",
            Unit::Requests => "requests",
            Unit::Status => "an HTTP status, 200 to 599 (0: none)",
        }
    }

    /// What a value must be, for the error that refuses one.
    fn wanted(self) -> &'static str {
        match self {
            Unit::Probability => "a number from 0 to 1",
            Unit::Profile => {
                "a known link's name, as 'shape --link list' gives them, or \"\" for none"
            }
            Unit::TracePath => "a trace file's path, or \"\" for none",
            Unit::Text => "a string",
            _ => "a whole number",
        }
    }

    /// True if `value` is one of this unit's. Whole numbers must be whole,
    /// as toxiproxy decodes them into integers.
    fn fits(self, value: &Value) -> bool {
        match self {
            Unit::Probability => value.as_f64().is_some_and(|p| (0.0..=1.0).contains(&p)),
            Unit::Profile => value.as_str().is_some_and(|name| {
                name.is_empty()
                    || matches!(
                        shape_impair::profiles::parse_link(name),
                        Ok(shape_impair::profiles::LinkArg::Profile(_))
                    )
            }),
            // Read when given: the model refuses a file that is no trace,
            // and text that is no rule.
            Unit::TracePath | Unit::Text => value.is_string(),
            // As a client in a language with booleans writes it.
            Unit::Flag => value.is_i64() || value.is_boolean(),
            _ => value.is_i64(),
        }
    }

    /// The default, as toxiproxy shows it.
    fn zero(self) -> Value {
        match self {
            Unit::Probability => Value::from(0.0),
            // No link yet: the toxic does nothing until given one.
            Unit::Profile | Unit::TracePath | Unit::Text => Value::from(""),
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
    /// What carries it out, for GUIDE.md (Markdown).
    pub by: &'static str,
    /// What shape's extra attributes of it do, and with what, if it has
    /// any.
    pub extras: Option<(&'static str, &'static str)>,
    /// The proxies it applies to: a stream's, a UDP link's, or both.
    pub on: On,
}

/// Which proxies a kind of toxic applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    Both,
    /// TCP proxies alone: what needs a stream (to slice, hold or close).
    Streams,
    /// UDP proxies alone (`"protocol": "udp"`): what needs datagrams.
    Datagrams,
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
    Duplicate,
    Reorder,
    Link,
    Http,
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
        on: On::Both,
    },
    Row {
        kind: Kind::Bandwidth,
        attributes: &[
            of("rate", Unit::KiloBytesPerSecond),
            extra("shared", Unit::Flag),
            extra("burst", Unit::KiloBytes),
        ],
        extra: false,
        does: "exact: 480 KB at 1000 KB/s take 480 ms, and from 150 KB/s every 10 ms carries its share, below a packet at a time (toxiproxy sleeps in steps of up to 100 ms)",
        by: "a bucket per connection, starting empty (as toxiproxy waits out a chunk's time before passing it on), whose burst is 40 ms of the rate, and two packets (3,000 bytes) below 75 KB/s, where a chunk is then a packet",
        extras: Some((
            "shared: one rate for all of a proxy's connections (toxiproxy #190, #613), with burst if given",
            "one bucket per proxy and stream",
        )),
        on: On::Both,
    },
    Row {
        kind: Kind::SlowClose,
        attributes: &[of("delay", Unit::Milliseconds)],
        extra: false,
        does: "the same",
        by: "`--slow-close`",
        extras: None,
        on: On::Streams,
    },
    Row {
        kind: Kind::Timeout,
        attributes: &[of("timeout", Unit::Milliseconds)],
        extra: false,
        does: "nothing passes; the connection closes after the timeout, or never with 0; removing the toxic closes it",
        by: "`--stall-after 0`, and a close in the connection's plan",
        extras: None,
        on: On::Streams,
    },
    Row {
        kind: Kind::ResetPeer,
        attributes: &[of("timeout", Unit::Milliseconds)],
        extra: false,
        does: "what comes is dropped; both sides reset (ECONNRESET) at the first byte, or after the timeout",
        by: "`--reset-after`",
        extras: None,
        on: On::Streams,
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
        on: On::Streams,
    },
    Row {
        kind: Kind::LimitData,
        attributes: &[of("bytes", Unit::Bytes)],
        extra: false,
        does: "the same: that many bytes, then the end (on a UDP proxy, a flow's datagrams past that many bytes are dropped)",
        by: "`--cut-after`",
        extras: None,
        on: On::Both,
    },
    Row {
        kind: Kind::Noop,
        attributes: &[],
        extra: false,
        does: "the same",
        by: "",
        extras: None,
        on: On::Both,
    },
    Row {
        kind: Kind::Loss,
        attributes: &[of("probability", Unit::Probability)],
        extra: true,
        does: "packets lost as TCP meets loss: the stream stalls for each retransmission and its throughput is bounded, no byte missing (whole datagrams lost on a UDP proxy), seeded (toxiproxy #39)",
        by: "`--loss`",
        extras: None,
        on: On::Both,
    },
    Row {
        kind: Kind::Corrupt,
        attributes: &[of("probability", Unit::Probability)],
        extra: true,
        does: "one bit of a byte (of a datagram, on a UDP proxy) flipped, seeded (toxiproxy #578)",
        by: "`--corrupt`",
        extras: None,
        on: On::Both,
    },
    Row {
        kind: Kind::Duplicate,
        attributes: &[of("probability", Unit::Probability)],
        extra: true,
        does: "UDP proxies: datagrams sent twice, seeded (netem's duplicate)",
        by: "`--duplicate`",
        extras: None,
        on: On::Datagrams,
    },
    Row {
        kind: Kind::Reorder,
        attributes: &[of("probability", Unit::Probability)],
        extra: true,
        does: "UDP proxies: datagrams sent at once, skipping the latency, seeded (netem's reorder)",
        by: "`--reorder`",
        extras: None,
        on: On::Datagrams,
    },
    Row {
        kind: Kind::Link,
        attributes: &[of("profile", Unit::Profile), of("trace", Unit::TracePath)],
        extra: true,
        does: "a known link: its stream's rate (down for downstream, up for upstream) and half its round trip, as `--link` gives them; with a trace, the rate follows it, shared by the proxy's connections as one link",
        by: "`--link`, `--trace-down`",
        extras: None,
        on: On::Both,
    },
    Row {
        kind: Kind::Http,
        attributes: &[
            of("status", Unit::Status),
            of("body", Unit::Text),
            of("headers", Unit::Text),
            of("delay", Unit::Milliseconds),
            of("stall", Unit::Flag),
            of("reset", Unit::Flag),
            of("cut_after", Unit::Bytes),
            of("grpc_status", Unit::Text),
            of("first", Unit::Requests),
            of("every", Unit::Requests),
            of("method", Unit::Text),
            of("path", Unit::Text),
            of("header", Unit::Text),
            of("during", Unit::Text),
        ],
        extra: true,
        does: "HTTP faults on the requests it picks, in either stream, as the flags of the same names give them: status and body (503, \"slow down\"), headers (\"Retry-After: 1\", one a line), delay, stall, reset, cut_after and grpc_status (\"UNAVAILABLE\"), one at a time; picked by first, every, method, path, header and during; toxicity is each request's chance (Envoy's abort and delay, toxy's inject, abort, timeout and slowRead, HTTPChaos's abort, delay and replace)",
        by: "`--http-status` and the other HTTP flags: HTTP/1.x and HTTP/2 followed on the proxy's connections opened while it has an `http` toxic",
        extras: None,
        on: On::Streams,
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
            Kind::Duplicate => "duplicate",
            Kind::Reorder => "reorder",
            Kind::Link => "link",
            Kind::Http => "http",
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
    pub fn attribute(self, name: &str) -> Option<&'static Attribute> {
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
        assert_eq!(TOXICS.len(), 14);
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
    fn a_toxics_signature_names_its_attributes_by_unit() {
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
