//! The dashboard `--serve` shows a browser at `/`: its page, script and
//! style, served from the binary (nothing is fetched from elsewhere, so
//! it works offline), and the two answers the page reads besides the API
//! itself: the state of every proxy with what flows through it
//! (`GET /ui/state`, once a second), the last minute of it when the page
//! opens (`GET /ui/history`, kept by [`history`]), and the toxics' table
//! its forms are made from (`GET /ui/toxics`). Every change the page
//! makes goes through the API, as any client's would.

pub mod history;

use crate::model::Model;
use crate::reply::Reply;
use crate::toxics::{On, TOXICS, Unit};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Instant;

const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("style.css");

/// The dashboard's own file at `path`, if it is one: the same for
/// everyone, and holding nothing of the server's.
pub fn file(path: &str) -> Option<Reply> {
    let (body, content_type) = match path {
        "/" => (PAGE, "text/html; charset=utf-8"),
        "/ui/app.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "/ui/style.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return None,
    };
    Some(Reply {
        status: 200,
        body: Some(body.to_string()),
        content_type,
    })
}

/// What has flowed through one proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traffic {
    /// What each `http` toxic counted, by the toxic's id.
    pub requests: Vec<(u64, shape_http::rule::Counted)>,
    /// Bytes sent on, from clients to the upstream, then back.
    pub up: u64,
    pub down: u64,
    /// Its open connections (a UDP proxy has flows, not connections:
    /// `None`).
    pub connections: Option<usize>,
    /// A UDP proxy's live flows (its clients heard from lately); `None`
    /// for a TCP proxy.
    pub flows: Option<usize>,
}

/// The dashboard's clock, in milliseconds since it was first read: the
/// server's, so that the page's rates are the server's and not the
/// network's, and its history lines up with what it reads each second.
pub fn clock_ms() -> u64 {
    static STARTED: OnceLock<Instant> = OnceLock::new();
    STARTED.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// `GET /ui/state`: every proxy as the API shows it, with its flow, and
/// the totals; `at` is [`clock_ms`].
pub fn state(model: &Model, flows: &BTreeMap<String, Traffic>) -> Value {
    let at = clock_ms();
    let mut totals = Traffic {
        connections: Some(0),
        ..Traffic::default()
    };
    let proxies: Vec<Value> = model
        .proxies
        .values()
        .map(|proxy| {
            let flow = flows.get(&proxy.name).cloned().unwrap_or_default();
            totals.up += flow.up;
            totals.down += flow.down;
            totals.connections = totals
                .connections
                .map(|n| n + flow.connections.unwrap_or(0));
            let mut shown = serde_json::to_value(proxy).expect("the model is plain data");
            shown["up"] = json!(flow.up);
            shown["down"] = json!(flow.down);
            shown["connections"] = json!(flow.connections);
            shown["flows"] = json!(flow.flows);
            for (at, toxic) in proxy.toxics.iter().enumerate() {
                let counted = flow.requests.iter().find(|(id, _)| *id == toxic.id);
                if let Some((_, counted)) = counted {
                    shown["toxics"][at]["requests"] = json!({
                        "seen": counted.seen,
                        "matched": counted.matched,
                        "picked": counted.picked,
                    });
                }
            }
            shown
        })
        .collect();
    json!({
        "at": at,
        "proxies": proxies,
        "totals": {"up": totals.up, "down": totals.down, "connections": totals.connections},
    })
}

/// `GET /ui/toxics`: each kind of toxic with the proxies it applies to
/// and its attributes (unit, default, and the input that takes it), and
/// the known links' names, for the page's forms.
pub fn kinds() -> Value {
    let kinds: Vec<Value> = TOXICS
        .iter()
        .map(|row| {
            let defaults = row.kind.defaults();
            let attributes: Vec<Value> = row
                .attributes
                .iter()
                .map(|attribute| {
                    json!({
                        "name": attribute.name,
                        "unit": attribute.unit.said().replace('`', ""),
                        "default": defaults.get(attribute.name),
                        "input": input(attribute.unit),
                        "extra": attribute.extra,
                    })
                })
                .collect();
            json!({
                "type": row.kind.name(),
                "on": match row.on {
                    On::Both => "both",
                    On::Streams => "tcp",
                    On::Datagrams => "udp",
                },
                "does": row.does,
                "attributes": attributes,
            })
        })
        .collect();
    let profiles: Vec<&str> = shape_impair::profiles::PROFILES
        .iter()
        .map(|profile| profile.name)
        .collect();
    json!({"kinds": kinds, "profiles": profiles})
}

/// The input a unit is given in.
fn input(unit: Unit) -> &'static str {
    match unit {
        Unit::Probability => "probability",
        Unit::Flag => "flag",
        Unit::Profile => "profile",
        Unit::TracePath | Unit::Text => "text",
        Unit::Requests
        | Unit::Status
        | Unit::Milliseconds
        | Unit::Microseconds
        | Unit::Bytes
        | Unit::KiloBytes
        | Unit::KiloBytesPerSecond => "whole",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProxyGiven;

    #[test]
    fn the_page_and_its_files_are_served_and_nothing_else() {
        let page = file("/").unwrap();
        assert_eq!(page.content_type, "text/html; charset=utf-8");
        let body = page.body.unwrap();
        // Its script and style are its own: nothing from elsewhere.
        assert!(body.contains("src=\"/ui/app.js\"") && body.contains("href=\"/ui/style.css\""));
        assert!(!body.contains("http://") && !body.contains("https://"));
        assert!(!SCRIPT.contains("http://") && !SCRIPT.contains("https://"));
        assert!(file("/ui/app.js").is_some() && file("/ui/style.css").is_some());
        for other in ["/ui/", "/ui/state", "/index.html", "/ui/../Cargo.toml"] {
            assert!(file(other).is_none(), "{other}");
        }
    }

    #[test]
    fn the_state_adds_each_proxy_s_flow_to_what_the_api_shows() {
        let mut model = Model::default();
        let given = |name: &str| ProxyGiven {
            name: Some(name.into()),
            upstream: Some("127.0.0.1:1".into()),
            ..ProxyGiven::default()
        };
        model.create(given("a")).unwrap();
        model.create(given("b")).unwrap();
        let toxic = serde_json::json!({"type": "http", "attributes": {"status": 503}});
        let http = model.add_toxic("a", toxic.as_object().unwrap()).unwrap().id;
        let counted = shape_http::rule::Counted {
            seen: 3,
            matched: 2,
            picked: 1,
        };
        let flows = BTreeMap::from([(
            "a".to_string(),
            Traffic {
                requests: vec![(http, counted)],
                up: 10,
                down: 20,
                connections: Some(3),
                flows: None,
            },
        )]);
        let state = state(&model, &flows);
        assert_eq!(
            state["proxies"][0]["toxics"][0]["requests"],
            json!({"seen": 3, "matched": 2, "picked": 1}),
            "an http toxic's counts"
        );
        assert_eq!(state["proxies"][0]["name"], "a");
        assert_eq!(state["proxies"][0]["upstream"], "127.0.0.1:1");
        assert_eq!(
            (
                &state["proxies"][0]["up"],
                &state["proxies"][0]["connections"]
            ),
            (&json!(10), &json!(3))
        );
        assert_eq!(state["proxies"][1]["up"], 0);
        assert_eq!(
            state["totals"],
            json!({"up": 10, "down": 20, "connections": 3})
        );
    }

    #[test]
    fn every_kind_of_toxic_has_a_form_made_from_the_table() {
        let table = kinds();
        let kinds = table["kinds"].as_array().unwrap();
        assert_eq!(kinds.len(), TOXICS.len());
        let latency = kinds.iter().find(|k| k["type"] == "latency").unwrap();
        assert_eq!(
            latency["attributes"][0],
            json!({"name": "latency", "unit": "ms", "default": 0, "input": "whole", "extra": false})
        );
        let slicer = kinds.iter().find(|k| k["type"] == "slicer").unwrap();
        assert_eq!(slicer["on"], "tcp");
        let link = kinds.iter().find(|k| k["type"] == "link").unwrap();
        assert_eq!(link["attributes"][0]["input"], "profile");
        assert!(
            table["profiles"]
                .as_array()
                .unwrap()
                .contains(&json!("slow-3g"))
        );
    }
}
