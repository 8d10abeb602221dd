//! Which route a method and a path name, and each route's answer: the
//! body read as toxiproxy reads it, the change made, and the status
//! toxiproxy answers with. A path toxiproxy knows, asked with another
//! method, gets 405; a path it does not know gets Go's router's 404.

use super::changes::{self, retune};
use super::{CarriesOut, TOXIPROXY_VERSION};
use crate::dashboard;
use crate::model::{ApiError, Model, Proxy, ProxyGiven};
use crate::reply::Reply;
use serde::Serialize;
use serde_json::{Map, Value};

/// The answer to `method path` with `body`, or the error that answers it.
pub(super) fn route(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let parts = parts(path);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    match (method, parts.as_slice()) {
        ("GET", ["version"]) => Ok(version()),
        ("GET", ["metrics"]) => Ok(metrics(model, relay_loop)),
        ("POST", ["reset"]) => changes::reset(model, relay_loop).map(|()| Reply::none()),
        ("POST", ["populate"]) => Ok(populate(model, relay_loop, body)),
        ("GET", ["proxies"]) => Ok(Reply::json(200, &model.proxies)),
        // The dashboard's reading of it all, with what flows (shape's own).
        ("GET", ["ui", "state"]) => Ok(ui_state(model, relay_loop)),
        ("GET", ["ui", "history"]) => Ok(Reply::json(200, &relay_loop.history())),
        ("GET", ["ui", "toxics"]) => Ok(Reply::json(200, &dashboard::kinds())),
        ("POST", ["proxies"]) => add_proxy(model, relay_loop, body),
        ("GET", ["proxies", name]) => Ok(Reply::json(200, model.proxy(name)?)),
        ("POST" | "PATCH", ["proxies", name]) => update_proxy(model, relay_loop, name, body),
        ("DELETE", ["proxies", name]) => delete_proxy(model, relay_loop, name),
        ("GET", ["proxies", name, "toxics"]) => Ok(Reply::json(200, &model.proxy(name)?.toxics)),
        ("POST", ["proxies", name, "toxics"]) => add_toxic(model, relay_loop, name, body),
        ("GET", ["proxies", name, "toxics", toxic]) => find_toxic(model, name, toxic),
        ("POST" | "PATCH", ["proxies", name, "toxics", toxic]) => {
            update_toxic(model, relay_loop, name, toxic, body)
        }
        ("DELETE", ["proxies", name, "toxics", toxic]) => {
            delete_toxic(model, relay_loop, name, toxic)
        }
        // A path it knows, with another method: 405 and no body.
        (_, ["version" | "metrics" | "reset" | "populate" | "proxies"])
        | (_, ["proxies", _] | ["proxies", _, "toxics"] | ["proxies", _, "toxics", _]) => {
            Ok(not_allowed())
        }
        // As Go's router answers a path it does not know: plain text.
        _ => Ok(not_found()),
    }
}

/// The parts of `path`, without its query, each decoded, as Go's router
/// matches them: a proxy named `a b` is `/proxies/a%20b`. A trailing
/// slash is another path (its last part is empty).
fn parts(path: &str) -> Vec<String> {
    let path = path.split('?').next().unwrap_or(path);
    path.strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(|part| {
            percent_encoding::percent_decode_str(part)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect()
}

/// GET /version, byte for byte as toxiproxy writes it.
fn version() -> Reply {
    Reply {
        status: 200,
        body: Some(format!("{{\"version\": \"{TOXIPROXY_VERSION}\"}}\n")),
        content_type: "application/json;charset=utf-8",
    }
}

/// GET /metrics: what the proxies passed, in Prometheus' text format.
fn metrics(model: &Model, relay_loop: &dyn CarriesOut) -> Reply {
    match relay_loop.metrics(model) {
        Some(text) => Reply {
            status: 200,
            body: Some(text),
            content_type: "text/plain; version=0.0.4",
        },
        // Metrics not asked for: the route is not there, as in
        // toxiproxy-server without -proxy-metrics or -runtime-metrics.
        None => not_found(),
    }
}

/// GET /ui/state: every proxy with what flows through it.
fn ui_state(model: &Model, relay_loop: &dyn CarriesOut) -> Reply {
    Reply::json(200, &dashboard::state(model, &relay_loop.traffic()))
}

/// POST /proxies.
fn add_proxy(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    body: &[u8],
) -> Result<Reply, ApiError> {
    // `null` is a proxy with nothing given, as Go decodes it.
    let given: Option<ProxyGiven> = parse(body)?;
    let proxy = changes::create(model, relay_loop, given.unwrap_or_default())?;
    Ok(Reply::json(201, &proxy))
}

/// POST or PATCH /proxies/{name}.
fn update_proxy(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    name: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let given: ProxyGiven = parse(body)?;
    Ok(Reply::json(
        200,
        &changes::update(model, relay_loop, name, given)?,
    ))
}

/// DELETE /proxies/{name}.
fn delete_proxy(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    name: &str,
) -> Result<Reply, ApiError> {
    model.delete(name)?;
    relay_loop.remove(name);
    Ok(Reply::none())
}

/// POST /proxies/{name}/toxics.
fn add_toxic(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    name: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let given: Map<String, Value> = parse(body)?;
    let toxic = model.add_toxic(name, &given)?.clone();
    retune(model, relay_loop, name);
    Ok(Reply::json(200, &toxic))
}

/// GET /proxies/{name}/toxics/{toxic}.
fn find_toxic(model: &Model, name: &str, toxic: &str) -> Result<Reply, ApiError> {
    let proxy = model.proxy(name)?;
    let found = proxy.toxics.iter().find(|t| t.name == toxic);
    Ok(Reply::json(
        200,
        found.ok_or_else(ApiError::toxic_not_found)?,
    ))
}

/// POST or PATCH /proxies/{name}/toxics/{toxic}.
fn update_toxic(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    name: &str,
    toxic: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let given: Map<String, Value> = parse(body)?;
    let toxic = model.update_toxic(name, toxic, &given)?.clone();
    retune(model, relay_loop, name);
    Ok(Reply::json(200, &toxic))
}

/// DELETE /proxies/{name}/toxics/{toxic}.
fn delete_toxic(
    model: &mut Model,
    relay_loop: &mut dyn CarriesOut,
    name: &str,
    toxic: &str,
) -> Result<Reply, ApiError> {
    model.delete_toxic(name, toxic)?;
    retune(model, relay_loop, name);
    Ok(Reply::none())
}

/// POST /populate: each proxy given is created, or replaced if its listen
/// address or upstream differ, or kept with its toxics if not. Answers
/// 201 with those proxies, or the first error with those done before it.
fn populate(model: &mut Model, relay_loop: &mut dyn CarriesOut, body: &[u8]) -> Reply {
    let given: Vec<ProxyGiven> = match parse(body) {
        Ok(given) => given,
        Err(err) => return Reply::error(err),
    };
    let done = changes::populate_with(model, relay_loop, given);
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

/// What Go's router answers for a path it knows, asked with a method it
/// does not take there.
fn not_allowed() -> Reply {
    Reply {
        status: 405,
        body: None,
        content_type: "text/plain",
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

/// The body as `T`, or toxiproxy's 400.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(ApiError::bad_body)
}
