//! An `http` toxic's attributes read into shape's HTTP rule, with the
//! flags' own parsers: its fault (`status` with `body` and `headers`,
//! `delay`, `stall`, `reset`, `cut_after`, `grpc_status`, one at a time) and which
//! requests it picks (`first`, `every`, `method`, `path`, `header`,
//! `during`; its toxicity is each request's chance).

use super::{Attributes, Kind};
use serde_json::{Map, Value};
use shape_http::answer::{AnswerStatus, Field, InjectedAnswer};
use shape_http::rule::{HttpFault, HttpRule};
use shape_http::select::Selection;

/// The rule an `http` toxic with `attributes` and `toxicity` gives: none
/// if it asks for no fault; refused, naming the attribute, if an
/// attribute does not read or two faults are asked for.
pub fn rule_of(attributes: &Map<String, Value>, toxicity: f64) -> Result<Option<HttpRule>, String> {
    let given = Attributes::of(Kind::Http, attributes);
    let text = |name: &str| {
        attributes
            .get(name)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    let whole = |name: &str| attributes.get(name).and_then(Value::as_i64).unwrap_or(0);
    let read = |name: &str, why: String| format!("attribute {name}: {why}");
    let status = whole("status");
    let mut faults = Vec::new();
    if status != 0 {
        let code = u16::try_from(status)
            .ok()
            .filter(|code| (200..600).contains(code))
            .ok_or_else(|| read("status", "an HTTP status from 200 to 599, or 0".into()))?;
        let fields = text("headers")
            .unwrap_or("")
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| line.parse::<Field>().map_err(|why| read("headers", why)))
            .collect::<Result<_, _>>()?;
        let body = text("body").unwrap_or("").as_bytes().to_vec();
        faults.push(HttpFault::Answer(InjectedAnswer {
            status: AnswerStatus { code, body },
            fields,
        }));
    }
    let delay = given.time("delay");
    if !delay.is_zero() {
        faults.push(HttpFault::Delay(delay));
    }
    if given.flag("stall") {
        faults.push(HttpFault::Stall);
    }
    if given.flag("reset") {
        faults.push(HttpFault::Reset);
    }
    if whole("cut_after") > 0 {
        faults.push(HttpFault::CutAfter(given.bytes("cut_after")));
    }
    if let Some(status) = text("grpc_status") {
        faults.push(HttpFault::Grpc(
            status.parse().map_err(|why| read("grpc_status", why))?,
        ));
    }
    let fault = match faults.len() {
        0 => return Ok(None),
        1 => faults.remove(0),
        _ => {
            return Err(
                "one fault at a time: status, delay, stall, reset, cut_after or grpc_status"
                    .to_string(),
            );
        }
    };
    let count = |name: &str| u64::try_from(whole(name)).ok().filter(|n| *n > 0);
    fn parsed<T: std::str::FromStr<Err = String>>(
        text: Option<&str>,
        name: &str,
    ) -> Result<Option<T>, String> {
        text.map(|value| {
            value
                .parse()
                .map_err(|why| format!("attribute {name}: {why}"))
        })
        .transpose()
    }
    let selection = Selection {
        first: count("first"),
        every: count("every"),
        affect: (toxicity < 1.0).then_some(toxicity.max(0.0)),
        path: parsed(text("path"), "path")?,
        method: text("method").map(str::to_string),
        header: parsed(text("header"), "header")?,
        during: parsed(text("during"), "during")?,
    };
    Ok(Some(HttpRule { selection, fault }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(value: Value, toxicity: f64) -> Result<Option<HttpRule>, String> {
        let mut attributes = Kind::Http.defaults();
        attributes.extend(value.as_object().unwrap().clone());
        rule_of(&attributes, toxicity)
    }

    #[test]
    fn attributes_read_as_the_flags_of_the_same_names() {
        assert!(rule(json!({}), 1.0).unwrap().is_none(), "no fault asked");
        let answer = rule(
            json!({"status": 429, "body": "slow down", "headers": "Retry-After: 1", "first": 2}),
            0.5,
        )
        .unwrap()
        .unwrap();
        assert_eq!(answer.to_string(), "answer 429 to the first 2, 50%");
        let HttpFault::Answer(given) = &answer.fault else {
            panic!("{answer:?}")
        };
        assert_eq!(
            (given.status.body.as_slice(), given.fields.len()),
            (&b"slow down"[..], 1)
        );
        let delay = rule(
            json!({"delay": 2000, "path": "/pay/*", "method": "POST"}),
            1.0,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            delay.to_string(),
            "delay 2s to every request of POST /pay/*"
        );
    }

    #[test]
    fn a_rule_that_does_not_read_is_refused_naming_its_attribute() {
        assert!(
            rule(json!({"status": 700}), 1.0)
                .unwrap_err()
                .contains("status")
        );
        assert!(
            rule(json!({"status": 503, "headers": "Content-Length: 1"}), 1.0)
                .unwrap_err()
                .contains("headers")
        );
        assert!(
            rule(json!({"status": 503, "path": "pay"}), 1.0)
                .unwrap_err()
                .contains("path")
        );
        assert!(
            rule(json!({"status": 503, "reset": 1}), 1.0)
                .unwrap_err()
                .contains("one fault at a time")
        );
    }
}
