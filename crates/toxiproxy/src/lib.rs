//! `shape --serve`: toxiproxy's HTTP API over shape's proxies, so that a
//! test suite written for toxiproxy changes nothing but the binary it
//! starts.
//!
//! The API's model ([`model`]: proxies, toxics, their defaults and
//! errors) answers each route ([`api`]) on the HTTP thread ([`http`]);
//! each change is carried out on the event loop that the proxy mode uses
//! ([`proxies`]), where every proxy is a route whose rules are its toxics
//! ([`shaping`]), each toxic carried out by shape's own bucket, delay
//! line or faults ([`carry`]).
//!
//! Held against the real toxiproxy 2.12.0: status codes and error words
//! of every route agree. Where shape differs on purpose: a proxy created
//! without `listen` listens on localhost (toxiproxy: every interface), an
//! upstream that is not `host:port` is refused when the proxy starts, and
//! a malformed body is refused in shape's words rather than Go's
//! decoder's.

#![forbid(unsafe_code)]

pub mod api;
pub mod carry;
mod dashboard;
mod datagrams;
pub mod fuzzing;
pub mod guard;
pub mod http;
mod loops;
pub mod model;
pub mod proxies;
mod runtime;
pub mod shaping;
mod shared;
mod signals;
mod status;
pub mod toxics;

use loops::Loops;
use model::{Model, ProxyGiven};
pub use proxies::Extras;
use proxies::Proxies;
use shape_leaves::message::one_line;
use shape_leaves::say::Printer;
use shape_net::Address;
use std::path::Path;

// What this crate builds on, named at its root as its own
// (`shape_impair::faults`).

/// Why the server could not start: the flag at fault, and why.
#[derive(Debug)]
pub enum Refused {
    /// A flag's value cannot be used (status 2).
    Usage(String),
    /// Something failed (status 1).
    Failed(String),
}

/// A config file of proxies, and the flag that named it, for messages.
#[derive(Debug, Clone, Copy)]
pub struct ConfigFile<'a> {
    pub path: &'a Path,
    /// `--config`, or toxiproxy-server's `-config`.
    pub flag: &'static str,
}

impl std::fmt::Display for ConfigFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.flag, self.path.display())
    }
}

/// How the server is to run.
pub struct Serving<'a> {
    pub address: &'a Address,
    pub config: Option<ConfigFile<'a>>,
    pub seed: u64,
    /// Origins whose pages may drive the API (`--serve-allow-origin`).
    pub allow_origins: &'a [String],
    /// What is allowed beyond toxiproxy's API.
    pub extras: Extras,
    /// Whether a config that cannot be read is said and served without,
    /// as toxiproxy-server does, rather than refused.
    pub config_optional: bool,
    /// Where to say where it serves and what failed; `None` when quiet.
    pub report: Option<Printer>,
    /// How many event loops serve the proxies' clients.
    pub loops: usize,
}

/// Serves the API until SIGINT or SIGTERM, then closes every listener and
/// connection and returns.
pub fn run(serving: Serving) -> Result<(), Refused> {
    let ending = signals::CaughtSignals::catch()
        .map_err(|err| Refused::Failed(format!("cannot start: {}", one_line(&err))))?;
    let failing = ending.failing();
    let (loops, threads) = Loops::start(
        serving.loops,
        serving.report.clone(),
        serving.seed,
        move |why| failing.fail(why),
    )
    .map_err(|why| Refused::Failed(format!("cannot start: {why}")))?;
    let stop = {
        let loops = loops.clone();
        move || loops.stop()
    };
    let mut model = Model::default();
    let mut proxies = Proxies::new(
        loops.clone(),
        serving.extras,
        serving.seed,
        serving.report.clone(),
    );
    // Said once the server says where it serves, which comes first.
    let mut config_trouble = None;
    if let Some(file) = serving.config {
        match populate(&mut model, &mut proxies, file) {
            Err(Refused::Usage(why) | Refused::Failed(why)) if serving.config_optional => {
                config_trouble = Some(format!("shape: {why}; serving without it"));
            }
            Err(refused) => {
                stop();
                return Err(refused);
            }
            Ok(()) => {}
        }
    }
    let api = match listen(serving.address, serving.allow_origins) {
        Ok(api) => api,
        Err(refused) => {
            stop();
            return Err(refused);
        }
    };
    let at = api
        .address()
        .map_or(serving.address.to_string(), |a| a.to_string());
    let status = proxies.status();
    let requester = api
        .serve(serving.report.clone(), move |method, path, body| {
            api::answer(&mut model, &mut proxies, method, path, body)
        })
        .map_err(|err| Refused::Failed(format!("cannot start: {err}")))?;
    if let Some(report) = &serving.report {
        report.line(&format!("shape: serving the toxiproxy API on {at}"));
        if let Some(trouble) = config_trouble {
            report.line(&trouble);
        }
    }
    let ended = ending.wait(&signals::SignalActions {
        status: &|| status.line(loops.connections()),
        reload: &|| serving.config.map(|file| reload(&requester, file)),
        report: serving.report.as_ref(),
    });
    stop();
    for thread in threads {
        let _ = thread.join();
    }
    ended.map_err(Refused::Failed)
}

/// The API listening on `address`: on IPv4 where the name has both, as
/// toxiproxy's `localhost` is 127.0.0.1.
fn listen(address: &Address, allow_origins: &[String]) -> Result<http::Api, Refused> {
    let refused = |why: String| Refused::Failed(format!("--serve {address}: {why}"));
    let Address::Tcp { host, port } = address else {
        return Err(Refused::Usage(format!(
            "--serve {address}: the API listens on TCP (e.g. localhost:8474, 127.0.0.1:0)"
        )));
    };
    let host = if host.is_empty() { "localhost" } else { host };
    let all: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(host, *port))
        .map_err(|err| refused(err.to_string()))?
        .collect();
    let first = all
        .iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .ok_or_else(|| refused("no address found".into()))?;
    let guard = guard::Guard::new(*first, host, allow_origins);
    http::Api::listen(*first, guard).map_err(|err| refused(one_line(&err)))
}

/// The most a config file may hold: far more than any list of proxies
/// needs, and a bound on what `--config /dev/zero` reads.
const MOST_CONFIG: u64 = 16 << 20;

/// The text of config `file`, read up to [`MOST_CONFIG`].
fn read_config(file: ConfigFile) -> Result<Vec<u8>, Refused> {
    use std::io::Read;
    let failed = |err: std::io::Error| Refused::Failed(format!("{file}: {}", one_line(&err)));
    let mut text = Vec::new();
    std::fs::File::open(file.path)
        .and_then(|opened| opened.take(MOST_CONFIG + 1).read_to_end(&mut text))
        .map_err(failed)?;
    if text.len() as u64 > MOST_CONFIG {
        return Err(Refused::Usage(format!(
            "{file}: longer than {} MiB; is it a list of proxies?",
            MOST_CONFIG >> 20
        )));
    }
    Ok(text)
}

/// Creates the proxies of config `file`, as POST /populate would.
fn populate(model: &mut Model, proxies: &mut Proxies, file: ConfigFile) -> Result<(), Refused> {
    let text = read_config(file)?;
    let given: Vec<ProxyGiven> = serde_json::from_slice(&text)
        .map_err(|err| Refused::Usage(format!("{file}: not a list of proxies: {err}")))?;
    api::populate_with(model, proxies, given)
        .map(drop)
        .map_err(|(_, err)| Refused::Usage(format!("{file}: {}", err.error)))
}

/// Reads config `file` again and populates from it, as POST /populate
/// does (SIGHUP): proxies that changed are replaced, new ones made, the
/// rest kept with their toxics. Returns the line that says how it went.
fn reload(requester: &http::Requester, file: ConfigFile) -> String {
    let text = match read_config(file) {
        Ok(text) => text,
        Err(Refused::Usage(why) | Refused::Failed(why)) => {
            return format!("shape: SIGHUP: {why}; the proxies are as they were");
        }
    };
    let answer = requester.ask("POST", "/populate", text);
    match answer.status {
        201 => format!("shape: SIGHUP: {file} read again"),
        _ => {
            let why = answer
                .body
                .as_deref()
                .and_then(|body| serde_json::from_str::<serde_json::Value>(body).ok())
                .and_then(|body| body["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| format!("status {}", answer.status));
            format!("shape: SIGHUP: {file}: {why}")
        }
    }
}
