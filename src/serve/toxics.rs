//! toxiproxy's toxics as its API speaks of them: each type with its
//! attributes (whole numbers, each with its default), how an update
//! merges new attributes into a toxic's, and the attributes shape adds
//! beyond toxiproxy's (`shared` and `burst` on `bandwidth`, and the
//! `loss` and `corrupt` toxics' `probability`).

use serde_json::{Map, Value};

/// The attributes of toxic type `kind` and their defaults; `None` for a
/// type toxiproxy does not know (nor shape).
pub fn defaults(kind: &str) -> Option<Map<String, Value>> {
    let zero = || Value::from(0);
    let names: &[&str] = match kind {
        "latency" => &["latency", "jitter"],
        "bandwidth" => &["rate"],
        "slow_close" => &["delay"],
        "timeout" => &["timeout"],
        "reset_peer" => &["timeout"],
        "slicer" => &["average_size", "size_variation", "delay"],
        "limit_data" => &["bytes"],
        "noop" => &[],
        "loss" | "corrupt" => {
            return Some(Map::from_iter([(
                "probability".to_string(),
                Value::from(0.0),
            )]));
        }
        _ => return None,
    };
    Some(
        names
            .iter()
            .map(|name| (name.to_string(), zero()))
            .collect(),
    )
}

/// Why attributes were refused: the attribute and what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadAttribute {
    pub name: String,
    pub wanted: &'static str,
}

/// `attributes` (defaults of type `kind`, or a toxic's own) with `given`
/// merged in: what is given replaces, what is omitted stays, and names
/// the type does not have are ignored, as toxiproxy ignores unknown JSON
/// fields. Whole numbers must be whole (toxiproxy decodes them into
/// integers); shape's extras are taken where they belong.
pub fn merge(
    kind: &str,
    attributes: &mut Map<String, Value>,
    given: &Map<String, Value>,
) -> Result<(), BadAttribute> {
    for (name, value) in given {
        let extra = matches!((kind, name.as_str()), ("bandwidth", "shared" | "burst"));
        if !attributes.contains_key(name) && !extra {
            continue;
        }
        let fits = match name.as_str() {
            "probability" => value.as_f64().is_some_and(|p| (0.0..=1.0).contains(&p)),
            _ => value.is_i64(),
        };
        if !fits {
            let wanted = match name.as_str() {
                "probability" => "a number from 0 to 1",
                _ => "a whole number",
            };
            return Err(BadAttribute {
                name: name.clone(),
                wanted,
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
    fn every_toxiproxy_type_has_its_attributes_with_defaults() {
        assert_eq!(
            Value::Object(defaults("latency").unwrap()),
            json!({"latency": 0, "jitter": 0})
        );
        assert_eq!(
            Value::Object(defaults("slicer").unwrap()),
            json!({"average_size": 0, "size_variation": 0, "delay": 0})
        );
        assert_eq!(Value::Object(defaults("noop").unwrap()), json!({}));
        assert_eq!(
            Value::Object(defaults("loss").unwrap()),
            json!({"probability": 0.0})
        );
        assert!(defaults("bogus").is_none());
    }

    #[test]
    fn an_update_merges_and_keeps_what_it_omits() {
        let mut attributes = defaults("latency").unwrap();
        merge("latency", &mut attributes, &map(json!({"latency": 100}))).unwrap();
        merge(
            "latency",
            &mut attributes,
            &map(json!({"jitter": 5, "colour": "red"})),
        )
        .unwrap();
        assert_eq!(
            Value::Object(attributes.clone()),
            json!({"latency": 100, "jitter": 5})
        );
        let refused = merge("latency", &mut attributes, &map(json!({"latency": 1.5})));
        assert_eq!(
            refused,
            Err(BadAttribute {
                name: "latency".into(),
                wanted: "a whole number"
            })
        );
        let mut bandwidth = defaults("bandwidth").unwrap();
        merge(
            "bandwidth",
            &mut bandwidth,
            &map(json!({"rate": 1000, "shared": 1})),
        )
        .unwrap();
        assert_eq!(Value::Object(bandwidth), json!({"rate": 1000, "shared": 1}));
    }
}
