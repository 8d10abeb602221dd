//! The API as a fuzz target: a run of requests, each answered as the
//! server answers it, with the proxies' side carried out by nothing (no
//! socket is opened). A config file is a populate request's body, so it
//! is read here too.

use crate::api::{CarriesOut, answer};
use crate::dashboard::Traffic;
use crate::model::{ApiError, Model, Proxy};
use std::collections::BTreeMap;

/// The requests most bodies go to, so that a fuzzer need not guess paths;
/// a first byte past them takes the method and path from the request's
/// first line.
const ROUTES: &[(&str, &str)] = &[
    ("POST", "/proxies"),
    ("POST", "/populate"),
    ("POST", "/proxies/a"),
    ("PATCH", "/proxies/b"),
    ("POST", "/proxies/a/toxics"),
    ("POST", "/proxies/b/toxics"),
    ("POST", "/proxies/a/toxics/t"),
    ("PATCH", "/proxies/b/toxics/latency_downstream"),
    ("DELETE", "/proxies/a"),
    ("DELETE", "/proxies/a/toxics/t"),
    ("GET", "/proxies"),
    ("GET", "/proxies/a/toxics"),
    ("POST", "/reset"),
    ("GET", "/metrics"),
    ("GET", "/ui/state"),
    ("GET", "/ui/history"),
];

/// Answers every request of `data` (split at NUL bytes, each a route's
/// number then its body) in turn. Every answer has a status a client
/// knows, a body that is JSON where it says so, and an error said in one
/// line; and the proxies listed are always valid to create again.
pub fn requests(data: &[u8]) {
    let mut model = Model::default();
    let mut relay_loop = Nowhere;
    for request in data.split(|&b| b == 0).take(64) {
        let Some((&route, rest)) = request.split_first() else {
            continue;
        };
        let (method, path, body) = match ROUTES.get(usize::from(route)) {
            Some(&(method, path)) => (method.to_string(), path.to_string(), rest),
            None => {
                let line_end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                let line = String::from_utf8_lossy(&rest[..line_end]).into_owned();
                let (method, path) = line.split_once(' ').unwrap_or((&line, "/"));
                let body = rest.get(line_end + 1..).unwrap_or_default();
                (method.to_string(), path.to_string(), body)
            }
        };
        let reply = answer(&mut model, &mut relay_loop, &method, &path, body);
        assert!(
            (200..600).contains(&reply.status),
            "{method} {path}: {reply:?}"
        );
        if reply.content_type == "application/json"
            && let Some(text) = &reply.body
        {
            let value: serde_json::Value = serde_json::from_str(text)
                .unwrap_or_else(|err| panic!("{method} {path}: not JSON ({err}): {text}"));
            if reply.status >= 400 {
                let said = value["error"].as_str().unwrap_or_default();
                assert!(!said.contains('\n'), "{method} {path}: {said:?}");
            }
        }
    }
    // What the server holds can be said again as a config that makes it.
    let proxies: Vec<&Proxy> = model.proxies.values().collect();
    let listed = serde_json::to_vec(&proxies).expect("the model is plain data");
    let mut again = Model::default();
    let reply = answer(&mut again, &mut Nowhere, "POST", "/populate", &listed);
    assert!(
        reply.status < 300,
        "what the server held is refused as a config: {reply:?}"
    );
}

/// Carries nothing out: a proxy listens where it asks to (port 0 is said
/// as 41234), and metrics are empty. The API's own tests use it too.
pub(crate) struct Nowhere;

impl CarriesOut for Nowhere {
    fn start(&mut self, proxy: &Proxy) -> Result<String, ApiError> {
        Ok(proxy.listen.replace(":0", ":41234"))
    }
    fn stop(&mut self, _: &str) {}
    fn remove(&mut self, _: &str) {}
    fn retune(&mut self, _: &Proxy) {}
    fn metrics(&self, _: &Model) -> Option<String> {
        Some(String::new())
    }
    fn traffic(&self) -> BTreeMap<String, Traffic> {
        BTreeMap::new()
    }
    fn history(&self) -> serde_json::Value {
        serde_json::json!({"at": 0, "proxies": {}})
    }
}
