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
//! - Where a proxy listens and connects: its addresses checked as the API
//!   allows them, and a refused bind said in Go's words (`addresses.rs`).
//! - The loops themselves, one per core, each with every proxy's route
//!   accepting from the proxy's one socket, commanded all at once
//!   ([`loops`]).
//! - What is read of them: the SIGUSR1 line (`status.rs`), and /metrics,
//!   each proxy's counters and the process's (`metrics.rs`).

mod addresses;
pub(crate) mod loops;
mod metrics;
mod status;

use crate::api::CarriesOut;
use crate::carry::HttpToxics;
use crate::carry::datagrams;
use crate::carry::shaping::{Counters, Effects, ToxicRules};
use crate::carry::shared::SharedBuckets;
use crate::dashboard::Traffic;
use crate::dashboard::history::History;
use crate::model::{ApiError, Model, Protocol, Proxy};
use addresses::{bind_failed, upstream_of};
use loops::Loops;
use shape_impair::faults::Way;
use shape_leaves::say::Printer;
use shape_net::Address;
use shape_net::proxy::Command;
use status::Status;
use std::collections::BTreeMap;
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
    /// Its `http` toxics' rules, which its connections opened while it
    /// has any are put to.
    http: HttpToxics,
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
    /// The server's seed, which each proxy's `http` toxics draw from
    /// with its name.
    seed: u64,
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
            seed,
        }
    }

    /// What is kept of `proxy`, made if it is new.
    fn running(&mut self, proxy: &Proxy) -> &mut KeptProxy {
        let tallies = &self.tallies;
        let seed = self.seed;
        let say = self.say.clone();
        self.running.entry(proxy.name.clone()).or_insert_with(|| {
            let http = HttpToxics::new(seed, &proxy.name, say);
            let counters = Counters {
                requests: Some(http.live()),
                ..Counters::default()
            };
            shape_leaves::lock::lock(tallies).insert(proxy.name.clone(), counters.clone());
            KeptProxy {
                route: None,
                datagrams: None,
                shared: SharedBuckets::default(),
                effects: Effects::default(),
                counters,
                http,
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
        let http = running.http.rules(&proxy.toxics);
        ToxicRules::new(
            &proxy.toxics,
            &mut running.effects,
            |id, wanted| change.bucket(id, wanted),
            running.counters.clone(),
        )
        .with_http(http)
    }
}

impl CarriesOut for Proxies {
    fn start(&mut self, proxy: &Proxy) -> Result<String, ApiError> {
        let (listen, connect) = addresses::read(proxy)?;
        if proxy.protocol == Protocol::Udp {
            return self.start_datagrams(proxy, &listen, &connect);
        }
        if !self.extras.allow_unix {
            addresses::refuse_unix(proxy, &listen, &connect)?;
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
            .map_err(|err| addresses::failed(&format!("listen {}", proxy.listen), &err))?;
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
                    requests: running.counters.requests(),
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
        if self.extras.proxy_metrics {
            let counters = (self.running.iter()).map(|(name, running)| (name, &running.counters));
            text.push_str(&metrics::proxy_metrics(model, counters));
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
        let listen = addresses::as_udp(listen, "listen", &proxy.listen)?;
        let connect = addresses::as_udp(connect, "upstream", &proxy.upstream)?;
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
