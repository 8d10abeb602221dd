//! A proxy's toxics as the rules of its route on the event loop: for each
//! connection and stream, the toxics that strike it (each drawn once per
//! connection against its toxicity) added up into one bucket, one delay
//! and one set of faults, as shape's flags would give them.
//!
//! Several toxics of a kind on one stream add up as toxiproxy's chain of
//! them does: latencies and jitters add, the least bandwidth holds, and
//! faults apply in the order the toxics were added.

use super::carry::{Effect, effect};
use super::model::Toxic;
use crate::bucket::Bucket;
use crate::conditions::Now;
use crate::faults::{Change, Way};
use crate::net::proxy::rules::{Luck, Pay, Plan, Rules, Terms, WayPlan};
use crate::slowlink::SlowLink;
use crate::throughput::Throughput;
use shape_bucket::Limit;
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// What each direction of each connection may hold at once: a latency
/// toxic holds what arrives during the latency, up to this, then stops
/// reading, so that many connections under latency keep memory bounded
/// (4 MiB holds 40 MiB/s at 100 ms).
pub const MOST_HELD: u64 = 4 << 20;

/// How long a bandwidth toxic's bucket may run ahead: the tokens of this
/// much time, so that its first chunk goes at once and nothing more (at
/// 1000 KB/s, 5 KB).
const BURST_TIME: f64 = 0.005;

/// What a proxy read and sent, up then down: toxiproxy's
/// `received_bytes` and `sent_bytes`.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub received: [Arc<AtomicU64>; 2],
    pub sent: [Arc<Throughput>; 2],
}

/// The toxics of one proxy, with the buckets its shared bandwidths spend
/// from and the counters of what it passed.
pub struct ToxicRules {
    toxics: Vec<(Toxic, Effect)>,
    /// The bucket of each shared bandwidth, by toxic id.
    shared: Vec<(u64, Arc<Bucket>)>,
    counters: Counters,
}

impl ToxicRules {
    /// The rules of `toxics`, counting what passes in `counters`. Each
    /// shared bandwidth spends from the bucket `shared(id, limit, burst)`
    /// gives for it (none: the toxic does nothing).
    pub fn new(
        toxics: &[Toxic],
        mut shared: impl FnMut(u64, Limit, u64) -> Option<Arc<Bucket>>,
        counters: Counters,
    ) -> ToxicRules {
        let toxics: Vec<(Toxic, Effect)> = toxics.iter().map(|t| (t.clone(), effect(t))).collect();
        let shared = toxics
            .iter()
            .filter_map(|(toxic, effect)| match effect {
                Effect::Limit {
                    limit,
                    burst,
                    shared: true,
                } => {
                    let burst = burst.unwrap_or_else(|| bandwidth_burst(*limit));
                    shared(toxic.id, *limit, burst).map(|bucket| (toxic.id, bucket))
                }
                _ => None,
            })
            .collect();
        ToxicRules {
            toxics,
            shared,
            counters,
        }
    }

    /// The bucket of each shared bandwidth, by toxic id.
    pub fn shared(&self) -> &[(u64, Arc<Bucket>)] {
        &self.shared
    }

    /// How the toxics that strike a connection with `luck` shape its
    /// direction `way`, and when they close the connection, if they do.
    fn way(&self, way: Way, luck: &mut Luck) -> (WayPlan, Option<Duration>) {
        let mut close_after: Option<Duration> = None;
        let stream = match way {
            Way::Up => "upstream",
            Way::Down => "downstream",
        };
        let mut pay = None;
        let mut now = Now::default();
        let mut changes = Vec::new();
        for (toxic, effect) in &self.toxics {
            if !toxic.stream.eq_ignore_ascii_case(stream) || !luck.strikes(toxic.id, toxic.toxicity)
            {
                continue;
            }
            match effect {
                Effect::Nothing => {}
                Effect::Limit {
                    limit,
                    burst,
                    shared,
                } => {
                    let own = || Pay::Own {
                        limit: *limit,
                        burst: burst.unwrap_or_else(|| bandwidth_burst(*limit)),
                    };
                    let this = match self
                        .shared
                        .iter()
                        .find(|(id, _)| *shared && *id == toxic.id)
                    {
                        Some((_, bucket)) => Pay::Bucket(bucket.clone()),
                        None => own(),
                    };
                    pay = Some(match pay {
                        Some(that) if slower(&that, &this) => that,
                        _ => this,
                    });
                }
                Effect::Delay { delay, jitter } => {
                    now.delay = (now.delay + *delay).min(crate::slowlink::LONGEST_DELAY);
                    now.jitter = (now.jitter + *jitter).min(crate::slowlink::LONGEST_DELAY);
                }
                Effect::Faults(more) => changes.extend(more.iter().cloned()),
                Effect::Hold { close_after: after } => {
                    changes.push(Change::parse("stall-after", "0s").expect("a valid value"));
                    if let Some(after) = after {
                        close_after = Some(close_after.map_or(*after, |t| t.min(*after)));
                    }
                }
            }
        }
        let faults = Change::all(&changes, way);
        now.faults = [faults, faults];
        let plan = WayPlan {
            pay: pay.unwrap_or(Pay::Own {
                limit: Limit::Unlimited,
                burst: 1,
            }),
            terms: Terms::Own(Box::new(now)),
        };
        (plan, close_after)
    }
}

/// The burst of a bandwidth of `limit` unless told: one small chunk's
/// worth.
pub fn bandwidth_burst(limit: Limit) -> u64 {
    match limit {
        Limit::Unlimited => 1,
        Limit::Rate(rate) => ((rate.bytes_per_sec() * BURST_TIME) as u64).max(2),
    }
}

/// True if `a` is the slower way to pay of the two.
fn slower(a: &Pay, b: &Pay) -> bool {
    let rate = |pay: &Pay| match pay {
        Pay::Own { limit, .. } => *limit,
        Pay::Bucket(bucket) => bucket.limit(),
    };
    match (rate(a), rate(b)) {
        (Limit::Rate(a), Limit::Rate(b)) => a.bytes_per_sec() <= b.bytes_per_sec(),
        (Limit::Rate(_), Limit::Unlimited) => true,
        (Limit::Unlimited, _) => false,
    }
}

impl Rules for ToxicRules {
    fn plan(&self, luck: &mut Luck) -> io::Result<Plan> {
        let (up, up_closes) = self.way(Way::Up, luck);
        let (down, down_closes) = self.way(Way::Down, luck);
        Ok(Plan {
            ways: [up, down],
            close_after: match (up_closes, down_closes) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        })
    }

    fn closes_when_unstalled(&self) -> bool {
        // As toxiproxy closes a connection whose timeout toxic is removed.
        true
    }

    fn closes_when_unreachable(&self) -> bool {
        // As toxiproxy closes a client whose upstream refuses.
        true
    }

    fn link(&self) -> SlowLink {
        SlowLink {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            max_buffer: Some(MOST_HELD),
        }
    }

    fn affect(&self) -> f64 {
        // Each toxic draws for itself, by its toxicity.
        1.0
    }

    fn passed(&self) -> [Arc<Throughput>; 2] {
        self.counters.sent.clone()
    }

    fn received(&self) -> Option<[Arc<AtomicU64>; 2]> {
        Some(self.counters.received.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn toxic(id: u64, kind: &str, stream: &str, toxicity: f64, attributes: Value) -> Toxic {
        Toxic {
            id,
            attributes: attributes.as_object().unwrap().clone(),
            name: format!("{kind}_{id}"),
            kind: kind.into(),
            stream: stream.into(),
            toxicity,
        }
    }

    fn rules(toxics: &[Toxic]) -> ToxicRules {
        ToxicRules::new(toxics, |_, _, _| None, Default::default())
    }

    fn own_limit(pay: &Pay) -> Limit {
        match pay {
            Pay::Own { limit, .. } => *limit,
            Pay::Bucket(_) => panic!("not its own"),
        }
    }

    fn terms(plan: &WayPlan) -> Now {
        match &plan.terms {
            Terms::Own(now) => **now,
            Terms::Shared(_) => panic!("not its own"),
        }
    }

    #[test]
    fn toxics_add_up_per_stream_as_a_chain_of_them_does() {
        let toxics = [
            toxic(
                1,
                "latency",
                "downstream",
                1.0,
                json!({"latency": 100, "jitter": 5}),
            ),
            toxic(
                2,
                "latency",
                "downstream",
                1.0,
                json!({"latency": 50, "jitter": 0}),
            ),
            toxic(3, "bandwidth", "downstream", 1.0, json!({"rate": 100})),
            toxic(4, "bandwidth", "downstream", 1.0, json!({"rate": 10})),
            toxic(
                5,
                "slicer",
                "upstream",
                1.0,
                json!({"average_size": 8, "size_variation": 0, "delay": 0}),
            ),
        ];
        let plan = rules(&toxics).plan(&mut Luck::new(1)).unwrap();
        let [up, down] = &plan.ways;
        assert_eq!(terms(down).delay, Duration::from_millis(150));
        assert_eq!(terms(down).jitter, Duration::from_millis(5));
        assert_eq!(
            own_limit(&down.pay),
            Limit::per_second(10_000),
            "the least holds"
        );
        assert_eq!(terms(down).faults(Way::Down).slice, None);
        assert_eq!(own_limit(&up.pay), Limit::Unlimited);
        assert_eq!(terms(up).delay, Duration::ZERO);
        assert_eq!(terms(up).faults(Way::Up).slice.map(|s| s.size), Some(8));
    }

    #[test]
    fn toxicity_is_drawn_once_per_connection_and_kept() {
        let half = [toxic(
            7,
            "latency",
            "downstream",
            0.5,
            json!({"latency": 10, "jitter": 0}),
        )];
        let mut struck = 0;
        for seed in 0..1000 {
            let mut luck = Luck::new(seed);
            let first = terms(&rules(&half).plan(&mut luck).unwrap().ways[1]).delay;
            for _ in 0..3 {
                let again = terms(&rules(&half).plan(&mut luck).unwrap().ways[1]).delay;
                assert_eq!(again, first, "the draw is kept");
            }
            struck += usize::from(!first.is_zero());
        }
        assert!(
            (400..600).contains(&struck),
            "{struck} of 1000 struck at 0.5"
        );
        let none = [toxic(
            8,
            "latency",
            "downstream",
            0.0,
            json!({"latency": 10, "jitter": 0}),
        )];
        let plan = rules(&none).plan(&mut Luck::new(3)).unwrap();
        assert_eq!(terms(&plan.ways[1]).delay, Duration::ZERO);
    }

    #[test]
    fn a_shared_bandwidth_pays_from_the_proxy_s_bucket() {
        let shared = Arc::new(crate::bucket::own(Limit::per_second(1000), 10).unwrap());
        let toxics = [toxic(
            9,
            "bandwidth",
            "upstream",
            1.0,
            json!({"rate": 1, "shared": 1}),
        )];
        let rules = ToxicRules::new(&toxics, |_, _, _| Some(shared.clone()), Default::default());
        let plan = rules.plan(&mut Luck::new(0)).unwrap();
        match &plan.ways[0].pay {
            Pay::Bucket(bucket) => assert!(Arc::ptr_eq(bucket, &shared)),
            Pay::Own { .. } => panic!("a bucket of its own"),
        }
    }

    proptest::proptest! {
        /// Whatever whole numbers (and probabilities) the model lets
        /// through, every toxic gives a plan, and a connection can be
        /// shaped by it: nothing panics, every bucket can be made.
        #[test]
        fn any_attributes_give_a_plan_a_connection_can_take(
            kind in proptest::sample::select(vec![
                "latency", "bandwidth", "slow_close", "timeout", "reset_peer",
                "slicer", "limit_data", "noop", "loss", "corrupt",
            ]),
            numbers in proptest::collection::vec(proptest::num::i64::ANY, 4),
            probability in 0.0..=1.0f64,
            toxicity in proptest::num::f64::NORMAL,
        ) {
            let mut attributes = crate::serve::toxics::defaults(kind).unwrap();
            let names: Vec<String> = attributes.keys().cloned().collect();
            for (name, number) in names.iter().zip(&numbers) {
                let value = match name.as_str() {
                    "probability" => json!(probability),
                    _ => json!(number),
                };
                attributes.insert(name.clone(), value);
            }
            attributes.insert("burst".into(), json!(numbers[3]));
            attributes.insert("shared".into(), json!(numbers[2]));
            let toxics = [Toxic {
                id: 1,
                attributes,
                name: kind.into(),
                kind: kind.into(),
                stream: "downstream".into(),
                toxicity,
            }];
            let plan = rules(&toxics).plan(&mut Luck::new(0)).unwrap();
            for way in &plan.ways {
                if let Pay::Own { limit, burst } = way.pay {
                    proptest::prop_assert!(crate::bucket::own(limit, burst).is_ok());
                }
            }
        }
    }

    #[test]
    fn a_bandwidth_runs_ahead_by_one_small_chunk_only() {
        assert_eq!(bandwidth_burst(Limit::per_second(1_000_000)), 5000);
        assert_eq!(bandwidth_burst(Limit::per_second(10)), 2);
    }
}
