//! An `http` toxic's attributes read into shape's HTTP rule, with the
//! flags' own parsers: its fault (`status` with `body` and `headers`,
//! `delay`, `stall`, `reset`, `cut_after`, `grpc_status`, one at a time)
//! and which requests it picks (`first`, `every`, `method`, `path`,
//! `header`, `during`; its toxicity is each request's chance). What the
//! flags refuse, an attribute refuses too.

use super::{Attributes, Kind};
use serde_json::{Map, Value};
use shape_http::answer::{AnswerStatus, Field, InjectedAnswer};
use shape_http::rule::{HttpFault, HttpRule};
use shape_http::select::Selection;

/// The rule an `http` toxic with `attributes` and `toxicity` gives;
/// refused, naming the attribute, if an attribute does not read, is
/// negative, or the toxic asks for no fault or for two.
pub fn rule_of(attributes: &Map<String, Value>, toxicity: f64) -> Result<HttpRule, String> {
    let given = Attributes::of(Kind::Http, attributes);
    let text = |name: &str| {
        attributes
            .get(name)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    let whole = |name: &str| -> Result<u64, String> {
        let value = attributes.get(name).and_then(Value::as_i64).unwrap_or(0);
        u64::try_from(value).map_err(|_| format!("attribute {name} must be 0 or more"))
    };
    let mut faults = Vec::new();
    let status = whole("status")?;
    if status != 0 {
        let code = u16::try_from(status)
            .ok()
            .filter(|code| (200..600).contains(code))
            .ok_or("attribute status must be an HTTP status from 200 to 599, or 0")?;
        let fields = (text("headers").unwrap_or("").lines())
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                line.parse::<Field>()
                    .map_err(|why| format!("attribute headers: {why}"))
            })
            .collect::<Result<_, _>>()?;
        let body = text("body").unwrap_or("").as_bytes().to_vec();
        let status = AnswerStatus { code, body };
        status
            .check()
            .map_err(|why| format!("attribute body: {why}"))?;
        faults.push(HttpFault::Answer(InjectedAnswer { status, fields }));
    }
    if whole("delay")? > 0 {
        faults.push(HttpFault::Delay(given.time("delay")));
    }
    if given.flag("stall") {
        faults.push(HttpFault::Stall);
    }
    if given.flag("reset") {
        faults.push(HttpFault::Reset);
    }
    if whole("cut_after")? > 0 {
        faults.push(HttpFault::CutAfter(given.bytes("cut_after")));
    }
    if let Some(status) = text("grpc_status") {
        let status = status
            .parse()
            .map_err(|why| format!("attribute grpc_status: {why}"))?;
        faults.push(HttpFault::Grpc(status));
    }
    let fault = match faults.len() {
        1 => faults.remove(0),
        none_or_more => {
            let why = match none_or_more {
                0 => "an http toxic needs a fault",
                _ => "one fault at a time",
            };
            return Err(format!(
                "{why}: status, delay, stall, reset, cut_after or grpc_status"
            ));
        }
    };
    let count = |name: &str| Ok::<_, String>(Some(whole(name)?).filter(|n| *n > 0));
    let method = text("method")
        .map(|method| {
            shape_http::select::method(method).map_err(|why| format!("attribute method: {why}"))
        })
        .transpose()?;
    let selection = Selection {
        first: count("first")?,
        every: count("every")?,
        affect: (toxicity < 1.0).then_some(toxicity.max(0.0)),
        path: parsed(text("path"), "path")?,
        method,
        header: parsed(text("header"), "header")?,
        during: parsed(text("during"), "during")?,
    };
    Ok(HttpRule { selection, fault })
}

/// `text`, if given, read as a `T`, or refused naming attribute `name`.
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(value: Value, toxicity: f64) -> Result<HttpRule, String> {
        let mut attributes = Kind::Http.defaults();
        attributes.extend(value.as_object().unwrap().clone());
        rule_of(&attributes, toxicity)
    }

    #[test]
    fn attributes_read_as_the_flags_of_the_same_names() {
        let attributes =
            json!({"status": 429, "body": "slow down", "headers": "Retry-After: 1", "first": 2});
        let answer = rule(attributes, 0.5).unwrap();
        assert_eq!(
            answer.to_string(),
            "answer 429 to requests among the first 2 and 50% by chance"
        );
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
        .unwrap();
        assert_eq!(
            delay.to_string(),
            "delay 2s to every request of POST /pay/*"
        );
        let windowed = rule(
            json!({"stall": true, "every": 3, "header": "X-A", "during": "0..2s"}),
            1.0,
        )
        .unwrap();
        assert_eq!(
            windowed.to_string(),
            "stall to requests every 3rd with X-A from 0s to 2s after it was set"
        );
    }

    #[test]
    fn a_rule_that_does_not_read_is_refused_naming_its_attribute() {
        for (attributes, words) in [
            (json!({}), "an http toxic needs a fault"),
            (json!({"first": 2}), "an http toxic needs a fault"),
            (json!({"status": 700}), "attribute status"),
            (
                json!({"status": 503, "headers": "Content-Length: 1"}),
                "attribute headers",
            ),
            (json!({"status": 204, "body": "x"}), "attribute body"),
            (json!({"status": 503, "path": "pay"}), "attribute path"),
            (json!({"status": 503, "method": "G T"}), "attribute method"),
            (
                json!({"status": 503, "first": -1}),
                "attribute first must be 0 or more",
            ),
            (json!({"delay": -5}), "attribute delay must be 0 or more"),
            (
                json!({"cut_after": -1}),
                "attribute cut_after must be 0 or more",
            ),
            (json!({"status": 503, "reset": 1}), "one fault at a time"),
        ] {
            let refused = rule(attributes.clone(), 1.0).unwrap_err();
            assert!(refused.contains(words), "{attributes}: {refused}");
        }
    }
}
