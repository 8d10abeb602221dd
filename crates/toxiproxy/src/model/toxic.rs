//! A toxic as the API shows it: its stream, read once and shown as
//! given, and its toxicity written as toxiproxy writes it.

use crate::toxics::Kind;
use serde::Serialize;
use serde_json::{Map, Value};
use shape_impair::faults::Way;
use shape_impair::trace::Trace;
use std::sync::Arc;

/// A toxic as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Toxic {
    /// Which toxic it is for the life of the server, so that a connection
    /// keeps its draw of the toxicity when the toxic changes.
    #[serde(skip)]
    pub id: u64,
    /// How many times it was changed, so that what was worked out from it
    /// is known to be stale.
    #[serde(skip)]
    pub revision: u64,
    pub attributes: Map<String, Value>,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub stream: ToxicStream,
    /// Written as toxiproxy writes it: `1`, `0.5`.
    #[serde(serialize_with = "as_toxiproxy_writes_it")]
    pub toxicity: f64,
    /// The trace its `trace` attribute names, read when that was given.
    #[serde(skip)]
    pub trace: Option<Arc<Trace>>,
}

#[cfg(test)]
impl Toxic {
    /// A toxic for tests: `kind` on `stream` with `attributes` as given
    /// (not merged with the defaults), named after all three.
    pub fn made(id: u64, kind: &str, stream: &str, attributes: Value, toxicity: f64) -> Toxic {
        let kind = Kind::named(kind).expect("a kind of the table");
        Toxic {
            id,
            revision: 0,
            attributes: attributes
                .as_object()
                .expect("attributes are an object")
                .clone(),
            name: format!("{}_{stream}_{id}", kind.name()),
            kind,
            stream: ToxicStream::parse(stream).expect("a stream"),
            toxicity,
            trace: None,
        }
    }
}

/// A toxic's stream: the way it acts on, read once when the toxic is
/// made, and the word it was given as, which the API shows back
/// (toxiproxy takes `upstream` and `downstream` in any case, and keeps
/// them as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToxicStream {
    pub way: Way,
    pub said: String,
}

impl ToxicStream {
    /// The stream `said` names, if it names one.
    pub fn parse(said: &str) -> Option<ToxicStream> {
        Way::of_stream(said).map(|way| ToxicStream {
            way,
            said: said.to_string(),
        })
    }
}

impl Serialize for ToxicStream {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.said)
    }
}

/// A whole toxicity as a whole number, as Go writes a float: `1`, not
/// `1.0`.
fn as_toxiproxy_writes_it<S: serde::Serializer>(value: &f64, to: S) -> Result<S::Ok, S::Error> {
    match value.fract() == 0.0 && value.abs() < 2f64.powi(53) {
        true => to.serialize_i64(*value as i64),
        false => to.serialize_f64(*value),
    }
}
