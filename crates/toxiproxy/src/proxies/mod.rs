//! The proxies running on the event loops, as the API side keeps them,
//! and what carries the API's changes out on them ([`Proxies`], the
//! model's [`CarriesOut`]).
//!
//! - Each running proxy's route on every loop, the buckets its
//!   connections share, its toxics' effects and the counters of what it
//!   passed. Each change is a [`Command`] sent with the loop's waker, and
//!   the API waits for the loop to say it is done, so that an answer
//!   means the change is in force: a proxy disabled refuses connections
//!   by the time its PATCH is answered. The loop never blocks, so that
//!   wait is short even under load.
//! - The loops themselves, one per core, each with every proxy's route
//!   accepting from the proxy's one socket, commanded all at once
//!   ([`loops`]).
//! - What is read of them: the SIGUSR1 line (`status.rs`), and /metrics,
//!   each proxy's counters and the process's (`metrics.rs`).

pub(crate) mod loops;
mod metrics;
mod status;

use crate::api::CarriesOut;
use crate::carry::datagrams;
use crate::carry::shaping::{Counters, Effects, ToxicRules};
use crate::carry::shared::SharedBuckets;
use crate::dashboard::Traffic;
use crate::dashboard::history::History;
use crate::model::{ApiError, Model, Protocol, Proxy};
use loops::Loops;
use shape_impair::faults::Way;
use shape_leaves::say::Printer;
use shape_net::Address;
use shape_net::proxy::{Command, Upstream};
use status::Status;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// What the API keeps of one proxy.
struct KeptProxy {
    /// Its route on each loop, by the loop's place, while enabled.
    route: Option<Vec<usize>>,
    /// A UDP proxy's link, on its own thread, while enabled.
    datagrams: Option<datagrams::RunningDatagrams>,
    /// The buckets its connections spend from together.
    shared: SharedBuckets,
    /// Its toxics' effects, worked out once each.
    effects: Effects,
    counters: Counters,
}

/// What the server was started to allow beyond toxiproxy's API.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras {
    /// Proxies may listen on or forward to Unix sockets.
    pub allow_unix: bool,
    /// /metrics gives the process's metrics.
    pub runtime_metrics: bool,
    /// /metrics gives each proxy's counters (always, for `shape --serve`;
    /// as toxiproxy-server's -proxy-metrics asks, under its name).
    pub proxy_metrics: bool,
}

/// The proxies, carried out on the loop.
pub struct Proxies {
    loops: Loops,
    running: BTreeMap<String, KeptProxy>,
    extras: Extras,
    /// Each proxy's counters, for the status line, which is asked for
    /// from another thread.
    tallies: Arc<Mutex<BTreeMap<String, Counters>>>,
    /// The last minute of the tallies, for the dashboard.
    history: History,
    /// The seed of each UDP proxy's draws, drawn in turn from the
    /// server's seed, as the loop draws each connection's.
    seeds: fastrand::Rng,
    /// Where UDP proxies say what they have to say; `None` when quiet.
    say: Option<Printer>,
}

impl Proxies {
    pub fn new(loops: Loops, extras: Extras, seed: u64, say: Option<Printer>) -> Proxies {
        let tallies = Arc::default();
        Proxies {
            loops,
            running: BTreeMap::new(),
            extras,
            history: History::sampling(Arc::downgrade(&tallies)),
            tallies,
            seeds: fastrand::Rng::with_seed(seed),
            say,
        }
    }

    /// What is kept of `proxy`, made if it is new.
    fn running(&mut self, proxy: &Proxy) -> &mut KeptProxy {
        let tallies = &self.tallies;
        self.running.entry(proxy.name.clone()).or_insert_with(|| {
            let counters = Counters::default();
            shape_leaves::lock::lock(tallies).insert(proxy.name.clone(), counters.clone());
            KeptProxy {
                route: None,
                datagrams: None,
                shared: SharedBuckets::default(),
                effects: Effects::default(),
                counters,
            }
        })
    }

    /// Closes a proxy's `routes`, one on each loop by its place.
    fn close_routes(&self, routes: Vec<usize>) {
        self.loops.ask_each(|place, closed| Command::Close {
            route: routes[place],
            closed,
        });
    }

    /// What says how the proxies are doing, from any thread.
    pub fn status(&self) -> Status {
        Status::over(self.tallies.clone())
    }

    /// The rules of `proxy`'s toxics, making, changing or letting go the
    /// buckets its connections share.
    fn rules(&mut self, proxy: &Proxy) -> ToxicRules {
        let changed = self.loops.changed();
        let running = self.running(proxy);
        let mut change = running.shared.change(changed);
        ToxicRules::new(
            &proxy.toxics,
            &mut running.effects,
            |id, wanted| change.bucket(id, wanted),
            running.counters.clone(),
        )
    }
}

impl CarriesOut for Proxies {
    fn start(&mut self, proxy: &Proxy) -> Result<String, ApiError> {
        let failed =
            |what: &str, err: &dyn std::fmt::Display| ApiError::new(format!("{what}: {err}"), 500);
        let listen: Address = proxy
            .listen
            .parse()
            .map_err(|err: String| failed(&format!("listen {}", proxy.listen), &err))?;
        let connect: Address = shape_net::parse_connect(&proxy.upstream)
            .map_err(|err| failed(&format!("upstream {}", proxy.upstream), &err))?;
        for (field, address, given) in [
            ("listen", &listen, &proxy.listen),
            ("upstream", &connect, &proxy.upstream),
        ] {
            if matches!(address, Address::Udp { .. }) {
                return Err(ApiError::new(
                    format!(
                        "{field} {given}: a UDP proxy is made with \"protocol\": \"udp\" and host:port addresses"
                    ),
                    400,
                ));
            }
        }
        if proxy.protocol == Protocol::Udp {
            return self.start_datagrams(proxy, &listen, &connect);
        }
        if !self.extras.allow_unix {
            for (field, address, given) in [
                ("listen", &listen, &proxy.listen),
                ("upstream", &connect, &proxy.upstream),
            ] {
                if matches!(address, Address::Unix(_)) {
                    return Err(ApiError::new(
                        format!(
                            "{field} {given}: Unix sockets are a shape extension, off unless \
                             shape --serve is started with --serve-allow-unix"
                        ),
                        400,
                    ));
                }
            }
        }
        let listening = listen
            .listen_shared(self.loops.count())
            .map_err(|err| ApiError::new(bind_failed(&listen, &proxy.listen, &err), 500))?;
        let bound = listening[0].local();
        let upstream = upstream_of(&connect);
        let rules = self.rules(proxy);
        let mut listening = listening.into_iter();
        let opened = self
            .loops
            .ask_each(|_, opened| Command::Open {
                listening: listening.next().expect("one for each loop"),
                connect: connect.clone(),
                upstream: upstream.clone(),
                rules: Box::new(rules.clone()),
                opened,
            })
            .ok_or_else(|| ApiError::new("the server is stopping", 500))?;
        if opened.iter().any(Result::is_err) {
            // Opened on some loops and not others: closed where opened.
            for (place, route) in opened.iter().enumerate() {
                if let Ok(&route) = route.as_ref() {
                    self.loops
                        .ask_at(place, |closed| Command::Close { route, closed });
                }
            }
        }
        let routes = opened
            .into_iter()
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|err| failed(&format!("listen {}", proxy.listen), &err))?;
        let running = self.running.get_mut(&proxy.name).expect("made by rules");
        running.route = Some(routes);
        Ok(bound)
    }

    fn stop(&mut self, name: &str) {
        let Some(running) = self.running.get_mut(name) else {
            return;
        };
        // Dropped, it stops, and its sockets close.
        running.datagrams = None;
        if let Some(routes) = running.route.take() {
            self.close_routes(routes);
        }
    }

    fn remove(&mut self, name: &str) {
        self.stop(name);
        self.running.remove(name);
        shape_leaves::lock::lock(&self.tallies).remove(name);
    }

    fn retune(&mut self, proxy: &Proxy) {
        if proxy.protocol == Protocol::Udp {
            let say = self.say.clone();
            if let Some(datagrams) = self.running(proxy).datagrams.as_mut()
                && let Err(err) = datagrams.retune(&proxy.toxics)
                && let Some(say) = say
            {
                // Only a thread for a trace can be refused.
                let why = shape_leaves::message::one_line(&err);
                say.line(&format!(
                    "shape: udp proxy {}: its trace: {why}",
                    proxy.name
                ));
            }
            return;
        }
        let rules = self.rules(proxy);
        let Some(routes) = self.running.get(&proxy.name).and_then(|r| r.route.clone()) else {
            return;
        };
        self.loops.ask_each(|place, retuned| Command::Retune {
            route: routes[place],
            rules: Box::new(rules.clone()),
            retuned,
        });
    }

    fn traffic(&self) -> BTreeMap<String, Traffic> {
        let each = self
            .loops
            .ask_each(|_, counted| Command::CountEach { counted })
            .unwrap_or_default();
        self.running
            .iter()
            .map(|(name, running)| {
                let flow = Traffic {
                    up: running.counters.sent[Way::Up as usize].total(),
                    down: running.counters.sent[Way::Down as usize].total(),
                    flows: running
                        .datagrams
                        .as_ref()
                        .map(|datagrams| datagrams.flows()),
                    connections: match running.datagrams {
                        Some(_) => None,
                        None => Some(running.route.as_ref().map_or(0, |routes| {
                            (routes.iter().zip(&each))
                                .map(|(route, counts)| counts.get(route).copied().unwrap_or(0))
                                .sum()
                        })),
                    },
                };
                (name.clone(), flow)
            })
            .collect()
    }

    fn history(&self) -> serde_json::Value {
        self.history.answer()
    }

    fn metrics(&self, model: &Model) -> Option<String> {
        if !self.extras.proxy_metrics && !self.extras.runtime_metrics {
            return None;
        }
        let mut text = String::new();
        let counters = match self.extras.proxy_metrics {
            true => &[("received", true), ("sent", false)][..],
            false => &[],
        };
        for &(counter, read) in counters {
            let name = format!("toxiproxy_proxy_{counter}_bytes_total");
            let _ = writeln!(text, "# HELP {name} ");
            let _ = writeln!(text, "# TYPE {name} counter");
            for (proxy_name, running) in &self.running {
                // One made and refused in the same request is not there.
                let Ok(proxy) = model.proxy(proxy_name) else {
                    continue;
                };
                for (way, direction) in Way::BOTH.map(Way::stream).iter().enumerate() {
                    let bytes = match read {
                        true => running.counters.received[way].load(Ordering::Relaxed),
                        false => running.counters.sent[way].total(),
                    };
                    let _ = writeln!(
                        text,
                        "{name}{{direction=\"{direction}\",listener=\"{}\",proxy=\"{}\",upstream=\"{}\"}} {bytes}",
                        label(&proxy.listen),
                        label(proxy_name),
                        label(&proxy.upstream)
                    );
                }
            }
        }
        if self.extras.runtime_metrics {
            text.push_str(&metrics::process_metrics());
        }
        Some(text)
    }
}

impl Proxies {
    /// Starts UDP proxy `proxy` from `listen` to `connect` (host:port
    /// addresses, taken as UDP's), on a thread of its own. Returns where
    /// it listens.
    fn start_datagrams(
        &mut self,
        proxy: &Proxy,
        listen: &Address,
        connect: &Address,
    ) -> Result<String, ApiError> {
        let as_udp = |address: &Address, field: &str, given: &str| match address {
            Address::Tcp { host, port } => Ok(Address::Udp {
                host: host.clone(),
                port: *port,
            }),
            _ => Err(ApiError::new(
                format!("{field} {given}: a UDP proxy takes host:port addresses"),
                400,
            )),
        };
        let listen = as_udp(listen, "listen", &proxy.listen)?;
        let connect = as_udp(connect, "upstream", &proxy.upstream)?;
        let failed = |field: &str, given: &str, err: &std::io::Error| {
            ApiError::new(
                format!("{field} {given}: {}", shape_leaves::message::one_line(err)),
                500,
            )
        };
        let addresses = (
            listen
                .datagram_address(true)
                .map_err(|err| failed("listen", &proxy.listen, &err))?,
            connect
                .datagram_address(false)
                .map_err(|err| failed("upstream", &proxy.upstream, &err))?,
        );
        let seed = self.seeds.u64(..);
        let say = self.say.clone();
        let running = self.running(proxy);
        let (datagrams, bound) =
            datagrams::RunningDatagrams::start(proxy, addresses, seed, &running.counters, say)
                .map_err(|err| ApiError::new(bind_failed(&listen, &proxy.listen, &err), 500))?;
        running.datagrams = Some(datagrams);
        Ok(bound.to_string())
    }
}

/// Why listening on `listen` (given as `given`) failed, in Go's words
/// where the system refused the bind, as toxiproxy says it and tests
/// match it, naming the address as resolved:
/// `listen tcp 127.0.0.1:3310: bind: address already in use` for
/// `localhost:3310`.
fn bind_failed(listen: &Address, given: &str, err: &std::io::Error) -> String {
    let network = match listen {
        Address::Tcp { .. } => "tcp",
        Address::Udp { .. } => "udp",
        Address::Unix(_) => "",
    };
    match err.raw_os_error() {
        Some(code) if !network.is_empty() => {
            let text = std::io::Error::from_raw_os_error(code).to_string();
            let at = listen
                .listen_address()
                .map_or_else(|_| given.to_string(), |at| at.to_string());
            format!("listen {network} {at}: bind: {}", go_error_text(&text))
        }
        _ => format!("listen {given}: {}", shape_leaves::message::one_line(err)),
    }
}

/// A system error's text as Go says it: the C library's, lower case first
/// and without Rust's "(os error N)".
fn go_error_text(text: &str) -> String {
    let text = text.split(" (os error").next().unwrap_or(text);
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

/// Where a proxy's connections go: an address given as numbers is
/// taken as it is; a name is looked up for every client, off the loop and
/// off the API's lock, as toxiproxy connects it every time (so that a
/// container restarted with a new address, or one not up yet when the
/// proxy was made, is reached).
fn upstream_of(connect: &Address) -> Upstream {
    match connect {
        Address::Tcp { host, port } => match host.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => Upstream::Fixed(Arc::new([SocketAddr::new(ip, *port)])),
            Err(_) => Upstream::PerClient,
        },
        Address::Unix(_) | Address::Udp { .. } => Upstream::Fixed(Arc::new([])),
    }
}

/// `value` as a Prometheus label value: backslashes, quotes and line
/// breaks escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_bind_is_said_in_go_s_words() {
        let listen: Address = "127.0.0.1:3310".parse().unwrap();
        let in_use = std::io::Error::from_raw_os_error(98);
        assert_eq!(
            bind_failed(&listen, "127.0.0.1:3310", &in_use),
            "listen tcp 127.0.0.1:3310: bind: address already in use"
        );
        let denied = std::io::Error::from_raw_os_error(13);
        let low: Address = "127.0.0.1:80".parse().unwrap();
        assert_eq!(
            bind_failed(&low, "127.0.0.1:80", &denied),
            "listen tcp 127.0.0.1:80: bind: permission denied"
        );
        // A name is said as resolved, IPv4 first as Go listens.
        let named: Address = "localhost:3310".parse().unwrap();
        assert_eq!(
            bind_failed(&named, "localhost:3310", &in_use),
            "listen tcp 127.0.0.1:3310: bind: address already in use"
        );
        let v6: Address = "[::1]:3310".parse().unwrap();
        assert_eq!(
            bind_failed(&v6, "[::1]:3310", &in_use),
            "listen tcp [::1]:3310: bind: address already in use"
        );
    }
}
