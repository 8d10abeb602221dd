//! The proxies running on the event loop, as the API side keeps them:
//! each running proxy's route, the buckets of its shared bandwidths and
//! the counters of what it passed. Each change is a [`Command`] sent with
//! the loop's waker, and the API waits for the loop to say it is done, so
//! that an answer means the change is in force: a proxy disabled refuses
//! connections by the time its PATCH is answered. The loop never blocks,
//! so that wait is short even under load.

use super::model::{ApiError, Model, Proxy};
use super::routes::Carrier;
use super::shaping::{Counters, ToxicRules};
use crate::bucket::Bucket;
use crate::net::Address;
use crate::net::proxy::Command;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, SyncSender, sync_channel};
use std::time::Duration;

/// How long the API waits for the loop to carry a change out. The loop
/// answers in well under a millisecond; only a loop that has ended (the
/// server is stopping) takes longer.
const PATIENCE: Duration = Duration::from_secs(5);

/// The event loop, as the API reaches it.
#[derive(Clone)]
pub struct Loop {
    pub commands: Sender<Command>,
    pub waker: Arc<mio::Waker>,
}

impl Loop {
    /// Sends `command`, which has no reply.
    fn tell(&self, command: Command) -> bool {
        self.commands.send(command).is_ok() && self.waker.wake().is_ok()
    }

    /// Sends the command `make` builds around a reply channel, and waits
    /// for the reply.
    fn ask<T>(&self, make: impl FnOnce(SyncSender<T>) -> Command) -> Option<T> {
        let (reply, replied) = sync_channel(1);
        self.commands.send(make(reply)).ok()?;
        self.waker.wake().ok()?;
        replied.recv_timeout(PATIENCE).ok()
    }
}

/// What the API keeps of one proxy.
struct Running {
    /// Its route on the loop, while enabled.
    route: Option<usize>,
    /// Set while its route lives; a thread that waits for its upstream's
    /// name to resolve gives up when it is cleared.
    alive: Arc<AtomicBool>,
    /// The bucket of each shared bandwidth, by toxic id.
    shared: Vec<(u64, Arc<Bucket>)>,
    counters: Counters,
}

/// The proxies, carried out on the loop.
pub struct Proxies {
    event_loop: Loop,
    running: BTreeMap<String, Running>,
}

impl Proxies {
    pub fn new(event_loop: Loop) -> Proxies {
        Proxies {
            event_loop,
            running: BTreeMap::new(),
        }
    }

    /// The rules of `proxy`'s toxics, making or changing the buckets of
    /// its shared bandwidths.
    fn rules(&mut self, proxy: &Proxy) -> ToxicRules {
        let running = self
            .running
            .entry(proxy.name.clone())
            .or_insert_with(|| Running {
                route: None,
                alive: Arc::default(),
                shared: Vec::new(),
                counters: Counters::default(),
            });
        let kept = std::mem::take(&mut running.shared);
        let rules = ToxicRules::new(
            &proxy.toxics,
            |id, limit, burst| match kept.iter().find(|(kept, _)| *kept == id) {
                Some((_, bucket)) => {
                    if bucket.limit_and_burst() != (limit, burst) {
                        let _ = bucket.set(limit, burst);
                    }
                    Some(bucket.clone())
                }
                None => crate::bucket::own(limit, burst).ok().map(Arc::new),
            },
            running.counters.clone(),
        );
        running.shared = rules.shared().to_vec();
        rules
    }
}

impl Carrier for Proxies {
    fn start(&mut self, proxy: &Proxy) -> Result<String, ApiError> {
        let failed =
            |what: &str, err: &dyn std::fmt::Display| ApiError::new(format!("{what}: {err}"), 500);
        let listen: Address = proxy
            .listen
            .parse()
            .map_err(|err: String| failed(&format!("listen {}", proxy.listen), &err))?;
        let connect: Address = crate::net::parse_connect(&proxy.upstream)
            .map_err(|err| failed(&format!("upstream {}", proxy.upstream), &err))?;
        let listening = listen
            .listen()
            .map_err(|err| failed(&format!("listen {}", proxy.listen), &err))?;
        let bound = listening.local();
        // As toxiproxy dials its upstream per connection, an upstream
        // whose name does not resolve yet (a container not up yet) does
        // not keep the proxy from starting: its clients are refused until
        // a thread of its own sees the name resolve.
        let upstream = match &connect {
            Address::Tcp { .. } => connect.resolve_all().unwrap_or_default(),
            Address::Unix(_) => Vec::new(),
        };
        let unresolved = matches!(connect, Address::Tcp { .. }) && upstream.is_empty();
        let rules = Box::new(self.rules(proxy));
        let opened = self
            .event_loop
            .ask(|opened| Command::Open {
                listening,
                connect: connect.clone(),
                upstream,
                rules,
                opened,
            })
            .ok_or_else(|| ApiError::new("the server is stopping", 500))?;
        let route = opened.map_err(|err| failed(&format!("listen {}", proxy.listen), &err))?;
        let running = self.running.get_mut(&proxy.name).expect("made by rules");
        running.route = Some(route);
        running.alive = Arc::new(AtomicBool::new(true));
        if unresolved {
            resolve_later(
                connect,
                route,
                running.alive.clone(),
                self.event_loop.clone(),
            );
        }
        Ok(bound)
    }

    fn stop(&mut self, name: &str) {
        let Some(running) = self.running.get_mut(name) else {
            return;
        };
        running.alive.store(false, Ordering::SeqCst);
        let Some(route) = running.route.take() else {
            return;
        };
        self.event_loop
            .ask(|closed| Command::Close { route, closed });
    }

    fn remove(&mut self, name: &str) {
        self.stop(name);
        self.running.remove(name);
    }

    fn retune(&mut self, proxy: &Proxy) {
        let rules = Box::new(self.rules(proxy));
        let Some(route) = self.running.get(&proxy.name).and_then(|r| r.route) else {
            return;
        };
        self.event_loop.ask(|retuned| Command::Retune {
            route,
            rules,
            retuned,
        });
    }

    fn metrics(&self, model: &Model) -> String {
        let mut text = String::new();
        for (counter, read) in [("received", true), ("sent", false)] {
            let name = format!("toxiproxy_proxy_{counter}_bytes_total");
            let _ = writeln!(text, "# HELP {name} ");
            let _ = writeln!(text, "# TYPE {name} counter");
            for (proxy_name, running) in &self.running {
                // One made and refused in the same request is not there.
                let Ok(proxy) = model.proxy(proxy_name) else {
                    continue;
                };
                for (way, direction) in ["upstream", "downstream"].iter().enumerate() {
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
        text
    }
}

/// How often a name that did not resolve is looked up again.
const RESOLVE_AGAIN: Duration = Duration::from_secs(1);

/// Looks `connect` up every [`RESOLVE_AGAIN`] on a thread of its own,
/// and tells the loop where route `route` forwards to once it resolves,
/// unless `alive` is cleared first.
fn resolve_later(connect: Address, route: usize, alive: Arc<AtomicBool>, event_loop: Loop) {
    let _ = std::thread::Builder::new()
        .name("resolve".into())
        .spawn(move || {
            while alive.load(Ordering::SeqCst) {
                std::thread::sleep(RESOLVE_AGAIN);
                if let Ok(upstream) = connect.resolve_all() {
                    if alive.load(Ordering::SeqCst) {
                        event_loop.tell(Command::Resolved {
                            route,
                            connect,
                            upstream,
                        });
                    }
                    return;
                }
            }
        });
}

/// `value` as a Prometheus label value: backslashes, quotes and line
/// breaks escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
