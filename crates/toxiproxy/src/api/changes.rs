//! How each change of the model is carried out: a proxy started where
//! it is enabled, stopped where it is disabled or moved, retuned where
//! its toxics changed. One that cannot start is not kept if it is new,
//! and is disabled if it is not, so that what the model shows enabled
//! runs.

use super::CarriesOut;
use crate::model::{ApiError, Model, Proxy, ProxyGiven};

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
pub(super) fn update(
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
pub(super) fn reset(model: &mut Model, relay_loop: &mut dyn CarriesOut) -> Result<(), ApiError> {
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
pub(super) fn retune(model: &Model, relay_loop: &mut dyn CarriesOut, name: &str) {
    if let Ok(proxy) = model.proxy(name)
        && proxy.enabled
    {
        relay_loop.retune(proxy);
    }
}
