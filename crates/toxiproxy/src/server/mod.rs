//! The server's life: it starts the event loops, makes the proxies of
//! `--config` (`config.rs`), listens for the API and serves it until
//! SIGINT or SIGTERM, then closes every listener and connection. Until
//! then SIGUSR1 says how the proxies are doing and SIGHUP reads the
//! config again (`signals.rs`); a loop that fails ends the server too.

mod config;
mod signals;

pub use config::ConfigFile;

use crate::api;
use crate::http::{self, guard::Guard};
use crate::model::Model;
use crate::proxies::{Extras, Proxies, loops::Loops};
use config::{populate, reload};
use shape_leaves::message::one_line;
use shape_leaves::say::Printer;
use shape_net::Address;

/// Why the server could not start: the flag at fault, and why.
#[derive(Debug)]
pub enum Refused {
    /// A flag's value cannot be used (status 2).
    Usage(String),
    /// Something failed (status 1).
    Failed(String),
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
    let guard = Guard::new(*first, host, allow_origins);
    http::Api::listen(*first, guard).map_err(|err| refused(one_line(&err)))
}
