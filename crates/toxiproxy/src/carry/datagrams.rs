//! A UDP proxy of the API (`"protocol": "udp"`, a shape extension): its
//! toxics as the impairments of a datagram link each way, and that link
//! running on a thread of its own (the event loop carries streams).
//!
//! Toxics add up as a stream's do: latencies and jitters add, and the
//! least bandwidth and the least limit_data hold; a recorded link (a
//! `link` toxic with a trace) holds over any bandwidth, and its way's
//! bucket follows the trace. Loss, corrupt,
//! duplicate and reorder draw for each datagram, with their probability
//! times their toxicity (the share of datagrams they strike); several of
//! a kind strike as independent draws would.

use super::shaping::{Counters, MOST_HELD};
use crate::model::{Proxy, Toxic};
use crate::toxics::{Attributes, Kind};
use shape_bucket::{Limit, Rate};
use shape_impair::faults::Loss;
use shape_impair::trace::Trace;
use shape_impair::trace::follow::{self, Following};
use shape_leaves::bucket::Bucket;
use shape_leaves::chunk::bandwidth_burst;
use shape_leaves::counting::Counting;
use shape_leaves::say::Printer;
use shape_net::udp::{self, FlowEnds, Handle, Impairment, Route};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

/// A UDP proxy serving on its thread; stopped when dropped.
pub struct RunningDatagrams {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
    /// Client to upstream, then back.
    buckets: [Arc<Bucket>; 2],
    /// The trace each way's bucket follows, if it follows one.
    following: [Option<(Arc<Trace>, Following)>; 2],
    /// Where its live flows send from: as many as it has clients now.
    ends: FlowEnds,
}

impl RunningDatagrams {
    /// Serves `proxy`'s link from `listen` to `upstream`, its draws from
    /// `seed`, what it passes counted in `counters`; says what it has to
    /// say through `say`. Returns it, and where it listens.
    pub fn start(
        proxy: &Proxy,
        (listen, upstream): (SocketAddr, SocketAddr),
        seed: u64,
        counters: &Counters,
        say: Option<Printer>,
    ) -> io::Result<(RunningDatagrams, SocketAddr)> {
        let ways = DatagramWays::of(&proxy.toxics);
        let buckets = ways
            .limits
            .map(|(limit, burst)| shape_leaves::bucket::own(limit, burst));
        let [Ok(up), Ok(down)] = buckets else {
            return Err(io::Error::other("a bandwidth no bucket can hold"));
        };
        let buckets = [Arc::new(up), Arc::new(down)];
        let route = Route {
            listen,
            upstream,
            idle: udp::IDLE,
            ways: ways.impairments,
            seed,
        };
        let mut link = udp::DatagramProxy::bind(route, buckets.clone(), counters.sent.clone())?;
        let handle = link.handle()?;
        let bound = link.local()?;
        if let Some(say) = &say {
            link.saying(say.clone());
        }
        let ends = FlowEnds::default();
        link.noting_ends(ends.clone());
        let name = proxy.name.clone();
        let thread = std::thread::Builder::new()
            .name(format!("udp {name}"))
            .spawn(move || {
                if let (Err(err), Some(say)) = (link.serve(), say) {
                    say.line(&format!(
                        "shape: udp proxy {name}: {}",
                        shape_leaves::message::one_line(&err)
                    ));
                }
            })?;
        let mut running = RunningDatagrams {
            handle,
            thread: Some(thread),
            buckets,
            following: [None, None],
            ends,
        };
        running.follow(&ways.traces)?;
        Ok((running, bound))
    }

    /// Its live flows: one for each client heard from lately.
    pub fn flows(&self) -> usize {
        self.ends.len()
    }

    /// Carries out `toxics` from now on: what is queued and held stays.
    pub fn retune(&mut self, toxics: &[Toxic]) -> io::Result<()> {
        let ways = DatagramWays::of(toxics);
        self.follow(&ways.traces)?;
        for (way, (limit, burst)) in ways.limits.into_iter().enumerate() {
            let bucket = &self.buckets[way];
            if ways.traces[way].is_none() && bucket.limit_and_burst() != (limit, burst) {
                let _ = bucket.set(limit, burst);
            }
        }
        self.handle.retune(ways.impairments);
        Ok(())
    }

    /// Has each way's bucket follow its trace, if it has one: the one it
    /// follows already goes on where it is, and a way whose trace is gone
    /// is let go (resumed, if its trace had paused it).
    fn follow(&mut self, traces: &[Option<Arc<Trace>>; 2]) -> io::Result<()> {
        for (way, wanted) in traces.iter().enumerate() {
            let same = match (&self.following[way], wanted) {
                (Some((followed, _)), Some(trace)) => Arc::ptr_eq(followed, trace),
                (None, None) => true,
                _ => false,
            };
            if same {
                continue;
            }
            let bucket = &self.buckets[way];
            if self.following[way].take().is_some() {
                bucket.set_paused(false);
            }
            if let Some(trace) = wanted {
                let handle = self.handle.clone();
                let following =
                    follow::follow_bucket(trace.clone(), bucket.clone(), move || handle.wake())?;
                self.following[way] = Some((trace.clone(), following));
            }
        }
        Ok(())
    }
}

impl Drop for RunningDatagrams {
    fn drop(&mut self) {
        self.handle.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What a UDP proxy's toxics add up to, each way.
struct DatagramWays {
    impairments: [Impairment; 2],
    /// Each way's bucket: its limit and burst, unless it follows a trace.
    limits: [(Limit, u64); 2],
    traces: [Option<Arc<Trace>>; 2],
}

impl DatagramWays {
    fn of(toxics: &[Toxic]) -> DatagramWays {
        let mut sums = [DatagramSum::default(), DatagramSum::default()];
        for toxic in toxics {
            if toxic.toxicity > 0.0 {
                sums[toxic.stream.way as usize].add(toxic);
            }
        }
        let limits = sums.each_ref().map(|sum| {
            let limit = sum.rate.map_or(Limit::Unlimited, Limit::Rate);
            (limit, sum.burst.unwrap_or_else(|| bandwidth_burst(limit)))
        });
        let impairments = [0, 1].map(|way| {
            // A traced way's queue holds what its trace gives on average.
            let queued = sums[way]
                .trace
                .as_ref()
                .map_or(limits[way].0, |t| t.average());
            sums[way].impairment(queued)
        });
        DatagramWays {
            impairments,
            limits,
            traces: sums.map(|sum| sum.trace),
        }
    }
}

/// One way's toxics, added up.
#[derive(Default)]
struct DatagramSum {
    delay: std::time::Duration,
    jitter: std::time::Duration,
    rate: Option<Rate>,
    burst: Option<u64>,
    flow_limit: Option<u64>,
    loss: f64,
    corrupt: f64,
    duplicate: f64,
    reorder: f64,
    /// The recorded link it follows: the first added.
    trace: Option<Arc<Trace>>,
}

impl DatagramSum {
    fn add(&mut self, toxic: &Toxic) {
        let given = Attributes::of(toxic.kind, &toxic.attributes);
        let share = |p: f64| p * toxic.toxicity.min(1.0);
        let strike = |total: &mut f64, p: f64| *total = 1.0 - (1.0 - *total) * (1.0 - share(p));
        match toxic.kind {
            Kind::Latency => {
                self.delay += given.time("latency");
                self.jitter += given.time("jitter");
            }
            Kind::Bandwidth => {
                // 0 passes everything, as in toxiproxy.
                if let Some(rate) = Rate::from_whole(given.bytes_per_second("rate"))
                    && self
                        .rate
                        .is_none_or(|least| rate.bytes_per_sec() < least.bytes_per_sec())
                {
                    self.rate = Some(rate);
                    self.burst = given.kilobytes("burst").map(|burst| burst.max(1));
                }
            }
            Kind::LimitData => {
                let bytes = given.bytes("bytes");
                self.flow_limit = Some(self.flow_limit.map_or(bytes, |least| least.min(bytes)));
            }
            Kind::Loss => strike(&mut self.loss, given.probability("probability")),
            Kind::Corrupt => strike(&mut self.corrupt, given.probability("probability")),
            Kind::Duplicate => strike(&mut self.duplicate, given.probability("probability")),
            Kind::Reorder => strike(&mut self.reorder, given.probability("probability")),
            Kind::Noop => {}
            Kind::Link => {
                if self.trace.is_none() {
                    self.trace = toxic.trace.clone();
                }
                if let Some((limit, delay)) = crate::carry::link(toxic, &given) {
                    self.delay += delay;
                    if let Limit::Rate(rate) = limit
                        && self
                            .rate
                            .is_none_or(|least| rate.bytes_per_sec() < least.bytes_per_sec())
                    {
                        (self.rate, self.burst) = (Some(rate), None);
                    }
                }
            }
            // A stream's alone: the model refuses them on a UDP proxy.
            Kind::SlowClose | Kind::Timeout | Kind::ResetPeer | Kind::Slicer | Kind::Http => {}
        }
    }

    /// The link's impairment, its queue sized for `limit`.
    fn impairment(&self, limit: Limit) -> Impairment {
        Impairment {
            packets: false,
            queue: udp::default_queue(limit, Counting::Bytes),
            held_most: Some(MOST_HELD),
            delay: self.delay.as_nanos() as u64,
            jitter: self.jitter.as_nanos() as u64,
            loss: (self.loss > 0.0).then_some(Loss::Random(self.loss)),
            duplicate: self.duplicate,
            reorder: self.reorder,
            corrupt: self.corrupt,
            flow_limit: self.flow_limit,
            ..Impairment::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn toxic(kind: &str, stream: &str, attributes: Value, toxicity: f64) -> Toxic {
        Toxic::made(0, kind, stream, attributes, toxicity)
    }

    #[test]
    fn toxics_add_up_each_way_into_a_link_s_impairment() {
        let ways = DatagramWays::of(&[
            toxic("latency", "downstream", json!({"latency": 100}), 1.0),
            toxic(
                "latency",
                "downstream",
                json!({"latency": 50, "jitter": 10}),
                1.0,
            ),
            toxic("bandwidth", "downstream", json!({"rate": 1000}), 1.0),
            toxic(
                "bandwidth",
                "downstream",
                json!({"rate": 500, "burst": 8}),
                1.0,
            ),
            toxic("loss", "upstream", json!({"probability": 0.5}), 0.5),
            toxic("loss", "upstream", json!({"probability": 0.2}), 1.0),
            toxic("limit_data", "upstream", json!({"bytes": 1000}), 1.0),
            toxic("limit_data", "upstream", json!({"bytes": 300}), 1.0),
            toxic("duplicate", "downstream", json!({"probability": 0.1}), 1.0),
            // Struck by none.
            toxic("latency", "upstream", json!({"latency": 999}), 0.0),
        ]);
        let [up, down] = &ways.impairments;
        assert_eq!(down.delay, 150_000_000);
        assert_eq!(down.jitter, 10_000_000);
        assert!((down.duplicate - 0.1).abs() < 1e-12);
        assert_eq!(ways.limits[1], (Limit::per_second(500_000), 8_000));
        // A tenth of a second of the least rate, and a datagram at least.
        assert_eq!(down.queue, shape_impair::faults::LARGEST_DATAGRAM as u64);
        assert_eq!(up.delay, 0);
        assert_eq!(ways.limits[0].0, Limit::Unlimited);
        // Half of a half, then a fifth of the rest: 0.4.
        let Some(Loss::Random(lost)) = up.loss else {
            panic!("{:?}", up.loss)
        };
        assert!((lost - 0.4).abs() < 1e-12, "{lost}");
        assert_eq!(up.flow_limit, Some(300));
        assert_eq!(down.flow_limit, None);
    }
}
