//! toxiproxy's routes: a method and a path, a body, and the answer, on
//! the [`Model`], with each change carried out by what [`CarriesOut`]
//! (the event loops, or nothing in the unit tests). Plain data in and
//! out, so that every route is tested without a socket; the HTTP server
//! hands each request here.
//!
//! - Which route a request names, and each route's answer: its body read
//!   as toxiproxy reads it, and the status toxiproxy gives; the
//!   dashboard's readings (`/ui/...`) too (`routes.rs`).
//! - How each change is carried out: a proxy started, stopped or retuned
//!   as the change asks; one that cannot start is not kept if new, and
//!   disabled if not (`changes.rs`). POST /populate and `--config` both
//!   come through [`populate_with`].

mod changes;
mod routes;

pub use crate::reply::Reply;
pub use changes::{create, populate_with};

use crate::dashboard::Traffic;
use crate::model::{ApiError, Model, Proxy};
use serde_json::Value;
use std::collections::BTreeMap;

/// The version the API reports: the toxiproxy whose API shape serves.
/// Clients decide from it what the server supports (the Ruby client uses
/// POST for PATCH below 2.6), so it is toxiproxy's; shape's own is in
/// every answer's `Server` header.
pub const TOXIPROXY_VERSION: &str = "2.12.0";

/// What carries the model's changes out: proxies listening and
/// forwarding, and their toxics.
pub trait CarriesOut {
    /// Starts `proxy`: listens where it says and forwards to its upstream,
    /// with its toxics. Returns the address it listens on.
    fn start(&mut self, proxy: &Proxy) -> Result<String, ApiError>;
    /// Stops proxy `name`: closes its listener and its connections.
    fn stop(&mut self, name: &str);
    /// Forgets proxy `name`, stopping it first if it runs: it was deleted.
    fn remove(&mut self, name: &str);
    /// `proxy`'s toxics changed: its connections, the open ones too, take
    /// them from now on.
    fn retune(&mut self, proxy: &Proxy);
    /// What every running proxy passed, in Prometheus' text format.
    fn metrics(&self, model: &Model) -> Option<String>;
    /// What has flowed through each running proxy, by name.
    fn traffic(&self) -> BTreeMap<String, Traffic>;
    /// The last minute of it (`GET /ui/history`).
    fn history(&self) -> Value;
}

/// Answers `method path` with `body` on `model`, carried out by
/// `relay_loop`.
pub fn answer(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    method: &str,
    path: &str,
    body: &[u8],
) -> Reply {
    routes::route(model, relay_loop, method, path, body).unwrap_or_else(Reply::error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzing::Nowhere;
    use serde_json::json;

    fn call(model: &mut Model, method: &str, path: &str, body: Value) -> (u16, Value) {
        let answer = answer(
            model,
            &mut Nowhere,
            method,
            path,
            body.to_string().as_bytes(),
        );
        let body = answer
            .body
            .map(|text| serde_json::from_str(&text).unwrap())
            .unwrap_or(Value::Null);
        (answer.status, body)
    }

    #[test]
    fn every_route_answers_with_toxiproxys_status() {
        let mut model = Model::default();
        let m = &mut model;
        assert_eq!(call(m, "GET", "/version", json!(null)).0, 200);
        let proxy = json!({"name": "db", "upstream": "127.0.0.1:5432"});
        assert_eq!(call(m, "POST", "/proxies", proxy.clone()).0, 201);
        assert_eq!(call(m, "POST", "/proxies", proxy).0, 409);
        let (status, index) = call(m, "GET", "/proxies", json!(null));
        assert_eq!(
            (status, index["db"]["upstream"].clone()),
            (200, json!("127.0.0.1:5432"))
        );
        assert_eq!(call(m, "GET", "/proxies/db", json!(null)).0, 200);
        assert_eq!(
            call(m, "PATCH", "/proxies/db", json!({"enabled": false})).1["enabled"],
            json!(false)
        );
        assert_eq!(
            call(m, "POST", "/proxies/db", json!({"enabled": true})).0,
            200
        );
        let toxic = json!({"type": "slow_close", "attributes": {"delay": 10}});
        assert_eq!(call(m, "POST", "/proxies/db/toxics", toxic).0, 200);
        assert_eq!(
            call(m, "GET", "/proxies/db/toxics", json!(null)).1[0]["name"],
            json!("slow_close_downstream")
        );
        assert_eq!(
            call(
                m,
                "GET",
                "/proxies/db/toxics/slow_close_downstream",
                json!(null)
            )
            .0,
            200
        );
        assert_eq!(
            call(
                m,
                "PATCH",
                "/proxies/db/toxics/slow_close_downstream",
                json!({"attributes": {"delay": 20}})
            )
            .1["attributes"]["delay"],
            json!(20)
        );
        assert_eq!(
            call(
                m,
                "DELETE",
                "/proxies/db/toxics/slow_close_downstream",
                json!(null)
            ),
            (204, Value::Null)
        );
        assert_eq!(
            call(
                m,
                "DELETE",
                "/proxies/db/toxics/slow_close_downstream",
                json!(null)
            )
            .0,
            404
        );
        assert_eq!(call(m, "POST", "/reset", json!(null)).0, 204);
        assert_eq!(call(m, "DELETE", "/proxies/db", json!(null)).0, 204);
        assert_eq!(
            call(m, "GET", "/proxies/db", json!(null)),
            (404, json!({"error": "proxy not found", "status": 404}))
        );
        let bad = answer(m, &mut Nowhere, "POST", "/proxies", b"{not json");
        assert_eq!(bad.status, 400);
        assert!(bad.body.unwrap().contains("bad request body"));
        let spaced = json!({"name": "a b", "upstream": "127.0.0.1:1"});
        assert_eq!(call(m, "POST", "/proxies", spaced).0, 201);
        assert_eq!(
            call(m, "GET", "/proxies/a%20b", json!(null)).1["name"],
            json!("a b")
        );
        assert_eq!(call(m, "PUT", "/proxies", json!(null)), (405, Value::Null));
        assert_eq!(call(m, "GET", "/proxies/", json!(null)).0, 404);
        assert_eq!(
            call(m, "POST", "/proxies", json!(null)).1["error"],
            json!("missing required field: name")
        );
        let nowhere = answer(m, &mut Nowhere, "GET", "/nowhere", b"");
        assert_eq!(nowhere.status, 404);
        assert_eq!(nowhere.body.as_deref(), Some("404 page not found\n"));
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use crate::fuzzing::Nowhere;
    use proptest::prelude::*;

    /// Any JSON value, a few levels deep, with the field names and types
    /// the API knows among the others.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            prop_oneof![prop::sample::select(known_words()), ".{0,12}"].prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            let key = prop_oneof![prop::sample::select(known_fields()), "[a-z_]{1,8}"];
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(key, inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    /// Values the API gives meaning to: every kind of toxic in the table,
    /// the streams, the protocols and an address.
    fn known_words() -> Vec<String> {
        let kinds = crate::toxics::TOXICS.iter().map(|row| row.kind.name());
        let others = ["upstream", "downstream", "udp", "tcp", "127.0.0.1:0"];
        kinds.chain(others).map(String::from).collect()
    }

    /// Field names the API reads: a proxy's and a toxic's, and every
    /// attribute of every kind in the table.
    fn known_fields() -> Vec<String> {
        let fields = [
            "name",
            "upstream",
            "listen",
            "enabled",
            "protocol",
            "type",
            "stream",
            "toxicity",
            "attributes",
            "toxics",
        ];
        let attributes = crate::toxics::TOXICS
            .iter()
            .flat_map(|row| row.attributes.iter().map(|attribute| attribute.name));
        fields
            .into_iter()
            .chain(attributes)
            .map(String::from)
            .collect()
    }

    fn any_route() -> impl Strategy<Value = (&'static str, &'static str)> {
        prop::sample::select(vec![
            ("POST", "/proxies"),
            ("POST", "/proxies/p"),
            ("PATCH", "/proxies/p"),
            ("DELETE", "/proxies/p"),
            ("POST", "/proxies/p/toxics"),
            ("PATCH", "/proxies/p/toxics/latency_downstream"),
            ("DELETE", "/proxies/p/toxics/latency_downstream"),
            ("POST", "/populate"),
            ("POST", "/reset"),
            ("GET", "/proxies"),
            ("GET", "/metrics"),
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the body, every route answers one of its statuses, an
        /// error as `{"error", "status"}`, and the model stays sound:
        /// toxic names unique per proxy, every toxic of a known type.
        #[test]
        fn any_body_gets_an_answer_and_leaves_the_model_sound(
            calls in prop::collection::vec((any_route(), any_json()), 1..12)
        ) {
            let mut model = Model::default();
            let seed = serde_json::json!({"name": "p", "upstream": "127.0.0.1:1"});
            answer(&mut model, &mut Nowhere, "POST", "/proxies", seed.to_string().as_bytes());
            for ((method, path), body) in calls {
                let got = answer(&mut model, &mut Nowhere, method, path, body.to_string().as_bytes());
                prop_assert!(
                    [200, 201, 204, 400, 404, 409, 500].contains(&got.status),
                    "{method} {path} {body}: {}", got.status
                );
                if got.status >= 400 {
                    let error: Value = serde_json::from_str(got.body.as_deref().unwrap()).unwrap();
                    prop_assert!(error["error"].is_string());
                    prop_assert_eq!(&error["status"], &Value::from(got.status));
                }
                for proxy in model.proxies.values() {
                    let mut names: Vec<&str> = proxy.toxics.iter().map(|t| t.name.as_str()).collect();
                    names.sort_unstable();
                    let all = names.len();
                    names.dedup();
                    prop_assert_eq!(names.len(), all, "names unique");
                    for toxic in &proxy.toxics {
                        prop_assert!(super::super::toxics::Kind::named(toxic.kind.name()).is_some());
                        prop_assert!(toxic.toxicity.is_finite());
                    }
                }
            }
        }
    }
}
