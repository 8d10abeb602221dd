//! What a toxiproxy server holds, and every change its API makes to it,
//! with toxiproxy's answers: the proxies by name (each with its listen
//! address, upstream, whether enabled, and its toxics), as plain data
//! without sockets; a trace a toxic names is read here, when given, so
//! that a bad one is refused with the change. The server carries a change
//! out on its event loop after this has accepted it.
//!
//! The data: a proxy and what it carries (`proxy.rs`), a toxic and its
//! stream (`toxic.rs`), and toxiproxy's errors (`error.rs`). The changes,
//! with the checks a toxic's body must pass, are the [`Model`]'s, here.

mod error;
mod proxy;
mod toxic;

pub use error::ApiError;
pub use proxy::{DEFAULT_LISTEN, Protocol, Proxy, ProxyGiven};
pub use toxic::{Toxic, ToxicStream};

use crate::toxics::{Attributes, Kind, merge};
use serde_json::{Map, Value};
use shape_impair::faults::Way;
use shape_impair::trace::Trace;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every proxy, by name.
#[derive(Debug, Default)]
pub struct Model {
    pub proxies: BTreeMap<String, Proxy>,
    /// The id of the last toxic added.
    last_toxic: u64,
}

impl Model {
    /// POST /proxies: a new proxy, enabled unless told otherwise, listening
    /// on `localhost:0` unless told where.
    pub fn create(&mut self, given: ProxyGiven) -> Result<&Proxy, ApiError> {
        let name = given
            .name
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::missing("name"))?;
        let upstream = given
            .upstream
            .filter(|u| !u.is_empty())
            .ok_or_else(|| ApiError::missing("upstream"))?;
        if self.proxies.contains_key(&name) {
            return Err(ApiError::new("proxy already exists", 409));
        }
        let protocol = Protocol::given(given.protocol.as_deref())?.unwrap_or_default();
        let mut proxy = Proxy {
            name: name.clone(),
            listen: given.listen.unwrap_or_else(|| DEFAULT_LISTEN.into()),
            upstream,
            enabled: given.enabled.unwrap_or(true),
            toxics: Vec::new(),
            protocol,
        };
        for toxic in given.toxics.unwrap_or_default() {
            self.last_toxic += 1;
            add_toxic(&mut proxy, &toxic, self.last_toxic)?;
        }
        Ok(self.proxies.entry(name).or_insert(proxy))
    }

    /// GET /proxies/{name}.
    pub fn proxy(&self, name: &str) -> Result<&Proxy, ApiError> {
        self.proxies.get(name).ok_or_else(ApiError::proxy_not_found)
    }

    /// POST or PATCH /proxies/{name}: what is given replaces, what is
    /// omitted stays.
    pub fn update(&mut self, name: &str, given: ProxyGiven) -> Result<&Proxy, ApiError> {
        let proxy = self
            .proxies
            .get_mut(name)
            .ok_or_else(ApiError::proxy_not_found)?;
        if Protocol::given(given.protocol.as_deref())?.is_some_and(|p| p != proxy.protocol) {
            return Err(ApiError::new(
                "a proxy's protocol cannot change: delete it and make it anew",
                400,
            ));
        }
        if let Some(listen) = given.listen {
            proxy.listen = listen;
        }
        if let Some(upstream) = given.upstream {
            proxy.upstream = upstream;
        }
        if let Some(enabled) = given.enabled {
            proxy.enabled = enabled;
        }
        Ok(proxy)
    }

    /// DELETE /proxies/{name}.
    pub fn delete(&mut self, name: &str) -> Result<Proxy, ApiError> {
        self.proxies
            .remove(name)
            .ok_or_else(ApiError::proxy_not_found)
    }

    /// POST /reset: every proxy enabled, every toxic gone.
    pub fn reset(&mut self) {
        for proxy in self.proxies.values_mut() {
            proxy.enabled = true;
            proxy.toxics.clear();
        }
    }

    /// POST /proxies/{name}/toxics.
    pub fn add_toxic(
        &mut self,
        proxy: &str,
        given: &Map<String, Value>,
    ) -> Result<&Toxic, ApiError> {
        let proxy = self
            .proxies
            .get_mut(proxy)
            .ok_or_else(ApiError::proxy_not_found)?;
        self.last_toxic += 1;
        add_toxic(proxy, given, self.last_toxic)?;
        Ok(proxy.toxics.last().expect("just added"))
    }

    /// POST or PATCH /proxies/{name}/toxics/{toxic}: attributes merged,
    /// toxicity replaced if given.
    pub fn update_toxic(
        &mut self,
        proxy: &str,
        toxic: &str,
        given: &Map<String, Value>,
    ) -> Result<&Toxic, ApiError> {
        let (proxy, at) = self.toxic_at(proxy, toxic)?;
        let protocol = proxy.protocol;
        let toxic = &mut proxy.toxics[at];
        toxic.revision += 1;
        if let Some(attributes) = attributes_given(given)? {
            let mut merged = toxic.attributes.clone();
            merge(toxic.kind, &mut merged, attributes)?;
            // Read again whenever given, so that a trace file changed is
            // taken up by giving its path again.
            if attributes.contains_key("trace") {
                toxic.trace = trace_of(toxic.kind, &merged)?;
            }
            toxic.attributes = merged;
        }
        if let Some(toxicity) = given.get("toxicity") {
            let toxicity = toxicity_of(toxicity)?;
            struck_whole(protocol, toxic.kind, toxicity)?;
            toxic.toxicity = toxicity;
        }
        rule_checked(toxic.kind, &toxic.attributes, toxic.toxicity)?;
        Ok(toxic)
    }

    /// DELETE /proxies/{name}/toxics/{toxic}.
    pub fn delete_toxic(&mut self, proxy: &str, toxic: &str) -> Result<Toxic, ApiError> {
        let (proxy, at) = self.toxic_at(proxy, toxic)?;
        Ok(proxy.toxics.remove(at))
    }

    /// Proxy `proxy` and where its toxic `toxic` is among its toxics.
    fn toxic_at(&mut self, proxy: &str, toxic: &str) -> Result<(&mut Proxy, usize), ApiError> {
        let proxy = self
            .proxies
            .get_mut(proxy)
            .ok_or_else(ApiError::proxy_not_found)?;
        let at = proxy
            .toxics
            .iter()
            .position(|t| t.name == toxic)
            .ok_or_else(ApiError::toxic_not_found)?;
        Ok((proxy, at))
    }
}

/// The attributes a toxic's body gives, if any: missing and `null` are
/// none, as Go decodes them (toxiproxy's Go client sends `null` when
/// given no attributes).
fn attributes_given(given: &Map<String, Value>) -> Result<Option<&Map<String, Value>>, ApiError> {
    match given.get("attributes") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(attributes)) => Ok(Some(attributes)),
        Some(_) => Err(ApiError::bad_body("attributes must be an object")),
    }
}

/// Adds toxic `given` to `proxy`: downstream, toxicity 1 and named
/// `TYPE_STREAM` unless told otherwise; names are unique across both
/// streams.
fn add_toxic(proxy: &mut Proxy, given: &Map<String, Value>, id: u64) -> Result<(), ApiError> {
    let text = |field: &str, default: &str| -> Result<String, ApiError> {
        match given.get(field) {
            None | Some(Value::Null) => Ok(default.to_string()),
            Some(Value::String(text)) => Ok(text.clone()),
            Some(_) => Err(ApiError::bad_body(format!("{field} must be a string"))),
        }
    };
    let stream = ToxicStream::parse(&text("stream", Way::Down.stream())?).ok_or_else(|| {
        ApiError::new(
            "stream was invalid, can be either upstream or downstream",
            400,
        )
    })?;
    let kind = text("type", "")?;
    let kind = Kind::named(&kind).ok_or_else(|| ApiError::new("invalid toxic type", 400))?;
    if !proxy.protocol.takes(kind.row().on) {
        return Err(ApiError::new(
            format!(
                "{} toxics do not apply to {} proxies",
                kind.name(),
                proxy.protocol.name()
            ),
            400,
        ));
    }
    let mut name = text("name", "")?;
    if name.is_empty() {
        name = format!("{}_{}", kind.name(), stream.said);
    }
    let mut attributes = kind.defaults();
    if proxy.toxics.iter().any(|t| t.name == name) {
        return Err(ApiError::new("toxic already exists", 409));
    }
    if let Some(given) = attributes_given(given)? {
        merge(kind, &mut attributes, given)?;
    }
    let toxicity = given
        .get("toxicity")
        .map(toxicity_of)
        .transpose()?
        .unwrap_or(1.0);
    struck_whole(proxy.protocol, kind, toxicity)?;
    let trace = trace_of(kind, &attributes)?;
    rule_checked(kind, &attributes, toxicity)?;
    proxy.toxics.push(Toxic {
        id,
        revision: 0,
        attributes,
        name,
        kind,
        stream,
        toxicity,
        trace,
    });
    Ok(())
}

/// Refuses an `http` toxic whose attributes give no rule that reads.
fn rule_checked(
    kind: Kind,
    attributes: &Map<String, Value>,
    toxicity: f64,
) -> Result<(), ApiError> {
    if kind != Kind::Http {
        return Ok(());
    }
    crate::toxics::http::rule_of(attributes, toxicity)
        .map(|_| ())
        .map_err(ApiError::bad_body)
}

/// The trace a toxic of `kind` with `attributes` follows, if it names
/// one.
fn trace_of(kind: Kind, attributes: &Map<String, Value>) -> Result<Option<Arc<Trace>>, ApiError> {
    if kind.attribute("trace").is_none() {
        return Ok(None);
    }
    Attributes::of(kind, attributes)
        .trace("trace")
        .map_err(|why| ApiError::bad_body(format!("attribute trace: {why}")))
}

/// Refuses a toxicity between 0 and 1 for a toxic that, on a UDP proxy,
/// must strike every datagram or none: a datagram is not a connection,
/// and a link has one latency, one bandwidth and one limit per flow. The
/// toxics that draw for each datagram (loss, corrupt, duplicate,
/// reorder) take any toxicity, as the share of datagrams they strike.
fn struck_whole(protocol: Protocol, kind: Kind, toxicity: f64) -> Result<(), ApiError> {
    let whole = matches!(kind, Kind::Latency | Kind::Bandwidth | Kind::LimitData);
    if protocol == Protocol::Udp && whole && toxicity > 0.0 && toxicity < 1.0 {
        return Err(ApiError::new(
            format!(
                "a {} toxic on a udp proxy strikes every datagram or none: its toxicity must be 0 or 1",
                kind.name()
            ),
            400,
        ));
    }
    Ok(())
}

/// A toxicity as given: a number, kept as given. As in toxiproxy, which
/// takes any number, one of 1 or more strikes every connection and one of
/// 0 or less none.
fn toxicity_of(value: &Value) -> Result<f64, ApiError> {
    value
        .as_f64()
        .ok_or_else(|| ApiError::bad_body("toxicity must be a number"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn given(value: Value) -> ProxyGiven {
        serde_json::from_value(value).unwrap()
    }

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_stream_is_read_once_in_any_case_and_shown_as_given() {
        let stream = ToxicStream::parse("UpStream").unwrap();
        assert_eq!(stream.way, Way::Up);
        assert_eq!(serde_json::to_value(&stream).unwrap(), json!("UpStream"));
        assert_eq!(ToxicStream::parse("down").map(|s| s.way), None);
        let mut model = Model::default();
        model
            .create(ProxyGiven {
                name: Some("p".into()),
                upstream: Some("127.0.0.1:1".into()),
                ..ProxyGiven::default()
            })
            .unwrap();
        let given = json!({"type": "latency", "stream": "DOWNSTREAM"});
        let toxic = model.add_toxic("p", given.as_object().unwrap()).unwrap();
        assert_eq!(
            (toxic.stream.way, toxic.name.as_str()),
            (Way::Down, "latency_DOWNSTREAM")
        );
    }

    #[test]
    fn proxies_are_created_found_changed_and_deleted_as_toxiproxy_does() {
        let mut model = Model::default();
        let made = model
            .create(given(
                json!({"name": "db", "upstream": "127.0.0.1:5432", "colour": 1}),
            ))
            .unwrap();
        assert_eq!(
            serde_json::to_value(made).unwrap(),
            json!({"name": "db", "listen": "localhost:0", "upstream": "127.0.0.1:5432", "enabled": true, "toxics": []})
        );
        assert_eq!(
            model
                .create(given(json!({"name": "db", "upstream": "x:1"})))
                .unwrap_err()
                .status,
            409
        );
        assert_eq!(
            model.create(given(json!({"upstream": "x:1"}))).unwrap_err(),
            ApiError::new("missing required field: name", 400)
        );
        assert_eq!(
            model
                .create(given(json!({"name": "n"})))
                .unwrap_err()
                .status,
            400
        );
        let changed = model
            .update("db", given(json!({"enabled": false})))
            .unwrap();
        assert_eq!(
            (changed.enabled, changed.upstream.as_str()),
            (false, "127.0.0.1:5432")
        );
        assert_eq!(
            model
                .update("nope", ProxyGiven::default())
                .unwrap_err()
                .status,
            404
        );
        model.reset();
        assert!(model.proxy("db").unwrap().enabled);
        assert_eq!(model.delete("db").unwrap().name, "db");
        assert_eq!(
            model.delete("db").unwrap_err(),
            ApiError::new("proxy not found", 404)
        );
    }

    #[test]
    fn toxics_take_toxiproxy_defaults_and_names_and_merge_on_update() {
        let mut model = Model::default();
        model
            .create(given(json!({"name": "p", "upstream": "u:1"})))
            .unwrap();
        let added = model
            .add_toxic(
                "p",
                &map(json!({"type": "latency", "attributes": {"latency": 100}})),
            )
            .unwrap();
        assert_eq!(
            serde_json::to_value(added).unwrap(),
            json!({"attributes": {"latency": 100, "jitter": 0}, "name": "latency_downstream", "type": "latency", "stream": "downstream", "toxicity": 1})
        );
        // `null` attributes are the defaults, as toxiproxy's Go client
        // sends them when given none.
        let bare = model
            .add_toxic(
                "p",
                &map(json!({"type": "slicer", "stream": "upstream", "attributes": null})),
            )
            .unwrap();
        assert_eq!(
            serde_json::to_value(&bare.attributes).unwrap(),
            json!({"average_size": 0, "size_variation": 0, "delay": 0})
        );
        let kept = model
            .update_toxic("p", "slicer_upstream", &map(json!({"attributes": null})))
            .unwrap();
        assert_eq!(kept.attributes["delay"], json!(0));
        assert_eq!(
            model
                .add_toxic("p", &map(json!({"type": "noop", "attributes": 7})))
                .unwrap_err()
                .status,
            400
        );
        model.delete_toxic("p", "slicer_upstream").unwrap();
        // Names are unique across both streams.
        let again = model.add_toxic(
            "p",
            &map(json!({"type": "latency", "name": "latency_downstream", "stream": "upstream"})),
        );
        assert_eq!(
            again.unwrap_err(),
            ApiError::new("toxic already exists", 409)
        );
        assert_eq!(
            model
                .add_toxic("p", &map(json!({"type": "bogus"})))
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            model
                .add_toxic("p", &map(json!({"type": "noop", "stream": "sideways"})))
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            model
                .add_toxic("q", &map(json!({"type": "noop"})))
                .unwrap_err()
                .status,
            404
        );
        let updated = model
            .update_toxic(
                "p",
                "latency_downstream",
                &map(json!({"attributes": {"jitter": 7}, "toxicity": 0.5})),
            )
            .unwrap();
        assert_eq!(
            updated.attributes,
            map(json!({"latency": 100, "jitter": 7}))
        );
        assert_eq!(updated.toxicity, 0.5);
        assert_eq!(
            model
                .update_toxic("p", "nope", &Map::new())
                .unwrap_err()
                .status,
            404
        );
        assert_eq!(
            model.delete_toxic("p", "latency_downstream").unwrap().kind,
            super::Kind::Latency
        );
        assert_eq!(
            model
                .delete_toxic("p", "latency_downstream")
                .unwrap_err()
                .status,
            404
        );
    }

    #[test]
    fn a_proxy_may_come_with_its_toxics() {
        let mut model = Model::default();
        let made = model
            .create(given(json!({"name": "p", "upstream": "u:1", "toxics": [{"type": "bandwidth", "attributes": {"rate": 1000, "shared": 1}}]})))
            .unwrap();
        assert_eq!(made.toxics[0].name, "bandwidth_downstream");
        assert_eq!(
            made.toxics[0].attributes,
            map(json!({"rate": 1000, "shared": 1}))
        );
    }
}
