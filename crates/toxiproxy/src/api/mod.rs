//! toxiproxy's routes: a method and a path, a body, and the answer, on
//! the [`Model`], with each change carried out by what [`CarriesOut`] (the event
//! loop, or nothing in the unit tests). Plain data in and out, so that
//! every route is tested without a socket; the HTTP server hands each
//! request here.

pub use crate::reply::Reply;

use crate::dashboard::{self, Traffic};
use crate::model::{ApiError, Model, Proxy, ProxyGiven};
use serde::Serialize;
use serde_json::{Map, Value};
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
    fn history(&self) -> serde_json::Value;
}

/// Answers `method path` with `body` on `model`, carried out by `relay loop`.
pub fn answer(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    method: &str,
    path: &str,
    body: &[u8],
) -> Reply {
    route(model, relay_loop, method, path, body).unwrap_or_else(Reply::error)
}

fn route(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let path = path.split('?').next().unwrap_or(path);
    // Each part decoded, as Go's router matches them: a proxy named
    // `a b` is `/proxies/a%20b`. A trailing slash is another path.
    let parts: Vec<String> = path
        .strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(|part| {
            percent_encoding::percent_decode_str(part)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    match (method, parts.as_slice()) {
        // Byte for byte as toxiproxy writes it.
        ("GET", ["version"]) => Ok(Reply {
            status: 200,
            body: Some(format!("{{\"version\": \"{TOXIPROXY_VERSION}\"}}\n")),
            content_type: "application/json;charset=utf-8",
        }),
        ("GET", ["metrics"]) => Ok(match relay_loop.metrics(model) {
            Some(text) => Reply {
                status: 200,
                body: Some(text),
                content_type: "text/plain; version=0.0.4",
            },
            // Metrics not asked for: the route is not there, as in
            // toxiproxy-server without -proxy-metrics or -runtime-metrics.
            None => not_found(),
        }),
        ("POST", ["reset"]) => {
            reset(model, relay_loop)?;
            Ok(Reply::none())
        }
        ("POST", ["populate"]) => Ok(populate(model, relay_loop, body)),
        ("GET", ["proxies"]) => Ok(Reply::json(200, &model.proxies)),
        // The dashboard's reading of it all, with what flows (shape's own).
        ("GET", ["ui", "state"]) => Ok(Reply::json(
            200,
            &dashboard::state(model, &relay_loop.traffic()),
        )),
        ("GET", ["ui", "history"]) => Ok(Reply::json(200, &relay_loop.history())),
        ("GET", ["ui", "toxics"]) => Ok(Reply::json(200, &dashboard::kinds())),
        ("POST", ["proxies"]) => {
            // `null` is a proxy with nothing given, as Go decodes it.
            let given: Option<ProxyGiven> = parse(body)?;
            Ok(Reply::json(
                201,
                &create(model, relay_loop, given.unwrap_or_default())?,
            ))
        }
        ("GET", ["proxies", name]) => Ok(Reply::json(200, model.proxy(name)?)),
        ("POST" | "PATCH", ["proxies", name]) => {
            let given: ProxyGiven = parse(body)?;
            Ok(Reply::json(200, &update(model, relay_loop, name, given)?))
        }
        ("DELETE", ["proxies", name]) => {
            model.delete(name)?;
            relay_loop.remove(name);
            Ok(Reply::none())
        }
        ("GET", ["proxies", name, "toxics"]) => Ok(Reply::json(200, &model.proxy(name)?.toxics)),
        ("POST", ["proxies", name, "toxics"]) => {
            let given: Map<String, Value> = parse(body)?;
            let toxic = model.add_toxic(name, &given)?.clone();
            retune(model, relay_loop, name);
            Ok(Reply::json(200, &toxic))
        }
        ("GET", ["proxies", name, "toxics", toxic]) => {
            let proxy = model.proxy(name)?;
            let found = proxy.toxics.iter().find(|t| t.name == *toxic);
            Ok(Reply::json(
                200,
                found.ok_or_else(ApiError::toxic_not_found)?,
            ))
        }
        ("POST" | "PATCH", ["proxies", name, "toxics", toxic]) => {
            let given: Map<String, Value> = parse(body)?;
            let toxic = model.update_toxic(name, toxic, &given)?.clone();
            retune(model, relay_loop, name);
            Ok(Reply::json(200, &toxic))
        }
        ("DELETE", ["proxies", name, "toxics", toxic]) => {
            model.delete_toxic(name, toxic)?;
            retune(model, relay_loop, name);
            Ok(Reply::none())
        }
        // A path it knows, with another method: 405 and no body.
        (_, ["version" | "metrics" | "reset" | "populate" | "proxies"])
        | (_, ["proxies", _] | ["proxies", _, "toxics"] | ["proxies", _, "toxics", _]) => {
            Ok(Reply {
                status: 405,
                body: None,
                content_type: "text/plain",
            })
        }
        // As Go's router answers a path it does not know: plain text.
        _ => Ok(not_found()),
    }
}

/// What Go's router answers for a path it does not know.
fn not_found() -> Reply {
    Reply {
        status: 404,
        body: Some("404 page not found\n".into()),
        content_type: "text/plain; charset=utf-8",
    }
}

/// POST /proxies: the proxy, started unless disabled, listening where it
/// was bound; if it cannot start it is not kept.
pub fn create(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    given: ProxyGiven,
) -> Result<Proxy, ApiError> {
    let proxy = model.create(given)?.clone();
    if !proxy.enabled {
        return Ok(proxy);
    }
    match relay_loop.start(&proxy) {
        Ok(listen) => {
            let proxy = model.proxies.get_mut(&proxy.name).expect("just created");
            proxy.listen = listen;
            Ok(proxy.clone())
        }
        Err(err) => {
            let _ = model.delete(&proxy.name);
            relay_loop.remove(&proxy.name);
            Err(err)
        }
    }
}

/// POST or PATCH /proxies/{name}: a change of `listen` or `upstream`
/// restarts the proxy, disabling stops it, enabling starts it again on the
/// same address; if it cannot start, it stays disabled.
fn update(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    name: &str,
    given: ProxyGiven,
) -> Result<Proxy, ApiError> {
    let before = model.proxy(name)?.clone();
    let after = model.update(name, given)?.clone();
    let moved = before.listen != after.listen || before.upstream != after.upstream;
    if before.enabled && (moved || !after.enabled) {
        relay_loop.stop(name);
    }
    if after.enabled && (moved || !before.enabled) {
        start(model, relay_loop, name)?;
    }
    Ok(model.proxy(name)?.clone())
}

/// Starts proxy `name`, which the model has enabled, and keeps the
/// address it listens on; if it cannot start, it is disabled.
fn start(model: &mut Model, relay_loop: &mut dyn CarriesOut, name: &str) -> Result<(), ApiError> {
    let started = relay_loop.start(model.proxy(name)?);
    let proxy = model.proxies.get_mut(name).expect("found above");
    match started {
        Ok(listen) => proxy.listen = listen,
        Err(err) => {
            proxy.enabled = false;
            return Err(err);
        }
    }
    Ok(())
}

/// POST /reset: every proxy enabled, every toxic gone.
fn reset(model: &mut Model, relay_loop: &mut dyn CarriesOut) -> Result<(), ApiError> {
    let before: Vec<Proxy> = model.proxies.values().cloned().collect();
    model.reset();
    for proxy in before {
        let name = proxy.name.as_str();
        if !proxy.enabled {
            start(model, relay_loop, name)?;
        } else if !proxy.toxics.is_empty() {
            retune(model, relay_loop, name);
        }
    }
    Ok(())
}

/// POST /populate: each proxy given is created, or replaced if its listen
/// address or upstream differ, or kept with its toxics if not. Answers
/// 201 with those proxies, or the first error with those done before it.
fn populate(model: &mut Model, relay_loop: &mut dyn CarriesOut, body: &[u8]) -> Reply {
    let given: Vec<ProxyGiven> = match parse(body) {
        Ok(given) => given,
        Err(err) => return Reply::error(err),
    };
    let done = populate_with(model, relay_loop, given);
    #[derive(Serialize)]
    struct Populated {
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        error: Option<ApiError>,
        proxies: Vec<Proxy>,
    }
    let (proxies, error) = match done {
        Ok(proxies) => (proxies, None),
        Err((proxies, error)) => (proxies, Some(error)),
    };
    let status = error.as_ref().map_or(201, |e| e.status);
    Reply::json(status, &Populated { error, proxies })
}

/// The proxies of a /populate body (or `--config` file) set up on `model`:
/// those set up, or those and the error that stopped the rest.
pub fn populate_with(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    given: Vec<ProxyGiven>,
) -> Result<Vec<Proxy>, (Vec<Proxy>, ApiError)> {
    // Every proxy is checked before any is made, as toxiproxy does.
    for (at, proxy) in given.iter().enumerate() {
        for (field, value) in [("name", &proxy.name), ("upstream", &proxy.upstream)] {
            if value.as_deref().is_none_or(str::is_empty) {
                return Err((
                    Vec::new(),
                    ApiError::missing(&format!("{field} at proxy {}", at + 1)),
                ));
            }
        }
    }
    let mut done = Vec::new();
    for proxy in given {
        let name = proxy.name.clone().expect("checked above");
        if let Ok(existing) = model.proxy(&name) {
            let listen = proxy
                .listen
                .as_deref()
                .unwrap_or(crate::model::DEFAULT_LISTEN);
            if same_address(listen, &existing.listen)
                && proxy.upstream.as_ref() == Some(&existing.upstream)
            {
                done.push(existing.clone());
                continue;
            }
            let _ = model.delete(&name);
            relay_loop.remove(&name);
        }
        match create(model, relay_loop, proxy) {
            Ok(proxy) => done.push(proxy),
            Err(err) => return Err((done, err)),
        }
    }
    Ok(done)
}

/// True if listen address `given` is `bound`, once resolved as a proxy
/// listening on it would be (`localhost` is 127.0.0.1 where it is ::1
/// too, as in toxiproxy).
fn same_address(given: &str, bound: &str) -> bool {
    given == bound
        || given
            .parse::<shape_net::Address>()
            .and_then(|address| address.listen_address().map_err(|err| err.to_string()))
            .is_ok_and(|address| address.to_string() == bound)
}

/// Carries out a change of proxy `name`'s toxics, if it is running.
fn retune(model: &Model, relay_loop: &mut dyn CarriesOut, name: &str) {
    if let Ok(proxy) = model.proxy(name)
        && proxy.enabled
    {
        relay_loop.retune(proxy);
    }
}

/// The body as `T`, or toxiproxy's 400.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(ApiError::bad_body)
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
