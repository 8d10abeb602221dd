//! A proxy's toxics as the rules of its route on the event loop: for each
//! connection and stream, the toxics that strike it (each drawn once per
//! connection against its toxicity) added up into one bucket, one delay
//! and one set of faults, as shape's flags would give them.
//!
//! Several toxics of a kind on one stream add up as toxiproxy's chain of
//! them does: latencies and jitters add, the least bandwidth holds, and
//! faults apply in the order the toxics were added. A recorded link (a
//! `link` toxic with a trace) is the stream's link: its rate holds over
//! any bandwidth, and of several the first added holds.

use super::effect::{Effect, effect};
use super::shared::Wanted;
use crate::model::Toxic;
use shape_bucket::Limit;
use shape_impair::conditions::InForce;
use shape_impair::faults::{Change, Directed, Trigger, Way};
use shape_impair::slowlink::SlowLink;
use shape_leaves::bucket::Bucket;
use shape_leaves::chunk::bandwidth_burst;
use shape_leaves::duration::least;
use shape_leaves::throughput::Throughput;
use shape_net::proxy::http_gate::HttpRules;
use shape_net::proxy::rules::{ConnectionShaping, Pay, RuleDraws, Rules, Terms, WayPlan};
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// What each direction of each connection may hold at once: a latency
/// toxic holds what arrives during the latency, up to this, then stops
/// reading, so that many connections under latency keep memory bounded
/// (4 MiB holds 40 MiB/s at 100 ms).
pub const MOST_HELD: u64 = 4 << 20;

/// What a proxy read and sent, up then down: toxiproxy's
/// `received_bytes` and `sent_bytes`; and the HTTP requests its `http`
/// toxics saw, matched and picked.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub received: [Arc<AtomicU64>; 2],
    pub sent: [Arc<Throughput>; 2],
    pub requests: Option<Arc<shape_http::rule::LiveRule>>,
}

impl Counters {
    /// What each `http` toxic counted, by the toxic's id.
    pub fn requests(&self) -> Vec<(u64, shape_http::rule::Counted)> {
        let Some(live) = &self.requests else {
            return Vec::new();
        };
        (live.tally().into_iter())
            .map(|(key, counted)| (crate::carry::HttpToxics::toxic_of(key), counted))
            .collect()
    }
}

/// The toxics of one proxy, with the buckets its shared bandwidths spend
/// from and the counters of what it passed.
///
/// A connection's plan is worked out whenever it opens and whenever the
/// toxics change, for every open connection of the proxy, on the event
/// loop; so each stream's toxics are kept as runs of those that strike
/// every connection (toxicity 1), each run added up once here, between
/// those that strike by chance. A plan then costs the chancy toxics and
/// the runs, not every toxic.
#[derive(Clone)]
pub struct ToxicRules {
    /// Up, then down.
    ways: [Vec<Segment>; 2],
    counters: Counters,
    /// The proxy's HTTP rules, while it has an `http` toxic.
    http: Option<HttpRules>,
}

/// A stretch of one stream's toxics, in the order they were added.
#[derive(Clone)]
enum Segment {
    /// Toxics that strike every connection, added up.
    Sure(StreamSum),
    /// A toxic that strikes a connection with its toxicity.
    Chancy {
        id: u64,
        toxicity: f64,
        effect: StreamSum,
    },
}

/// What toxics add up to on one stream.
#[derive(Default, Clone)]
struct StreamSum {
    /// The slowest way to pay, if any toxic limits.
    pay: Option<PayBy>,
    delay: Duration,
    jitter: Duration,
    /// Faults in the order given, each kept once: the last of a kind, as
    /// applying them in turn would leave it.
    changes: Vec<Change>,
    /// Whether nothing passes (a timeout), and when it closes, if it does.
    holds: bool,
    close_after: Option<Duration>,
}

/// How a sum pays: a bucket of the connection's own, a shared one, or a
/// recorded link's.
#[derive(Clone)]
enum PayBy {
    Own { limit: Limit, burst: u64 },
    Shared(Arc<Bucket>),
    Traced(Arc<Bucket>),
}

impl PayBy {
    fn limit(&self) -> Limit {
        match self {
            PayBy::Own { limit, .. } => *limit,
            PayBy::Shared(bucket) | PayBy::Traced(bucket) => bucket.limit(),
        }
    }

    /// True if this holds over `other`, which comes after it: a recorded
    /// link over any bandwidth, else the slower.
    fn holds_over(&self, other: &PayBy) -> bool {
        match (self, other) {
            (PayBy::Traced(_), _) => true,
            (_, PayBy::Traced(_)) => false,
            (this, other) => slower(this.limit(), other.limit()),
        }
    }
}

impl StreamSum {
    /// What `effect` alone gives, with `shared`, the bucket of a shared
    /// bandwidth or a recorded link.
    fn of(effect: &Effect, shared: Option<&Arc<Bucket>>) -> StreamSum {
        let mut sum = StreamSum::default();
        match effect {
            Effect::Nothing => {}
            Effect::Limit {
                limit,
                burst,
                shared: _,
            } => {
                sum.pay = Some(match shared {
                    Some(bucket) => PayBy::Shared(bucket.clone()),
                    None => PayBy::Own {
                        limit: *limit,
                        burst: burst.unwrap_or_else(|| bandwidth_burst(*limit)),
                    },
                })
            }
            Effect::Delay { delay, jitter } => (sum.delay, sum.jitter) = (*delay, *jitter),
            Effect::Faults(changes) => sum.changes = changes.clone(),
            Effect::Hold { close_after } => (sum.holds, sum.close_after) = (true, *close_after),
            Effect::Link { limit, delay } => {
                sum.pay = Some(PayBy::Own {
                    limit: *limit,
                    burst: bandwidth_burst(*limit),
                });
                sum.delay = *delay;
            }
            Effect::Traced { trace: _, delay } => {
                sum.pay = shared.map(|bucket| PayBy::Traced(bucket.clone()));
                sum.delay = *delay;
            }
        }
        sum
    }

    /// Adds `other`, which comes after it, as a chain of toxics adds up:
    /// latencies and jitters add, the least bandwidth holds, a later fault
    /// of a kind replaces an earlier one, the earliest close holds.
    fn add(&mut self, other: &StreamSum) {
        if let Some(pay) = &other.pay {
            let holds = self.pay.as_ref().is_some_and(|this| this.holds_over(pay));
            if !holds {
                self.pay = Some(pay.clone());
            }
        }
        self.delay = (self.delay + other.delay).min(shape_impair::slowlink::LONGEST_DELAY);
        self.jitter = (self.jitter + other.jitter).min(shape_impair::slowlink::LONGEST_DELAY);
        for change in &other.changes {
            self.changes.retain(|kept| kept.name() != change.name());
            self.changes.push(change.clone());
        }
        self.holds |= other.holds;
        self.close_after = least(self.close_after, other.close_after);
    }

    /// The plan of a direction `way` shaped by this sum.
    fn plan(mut self, way: Way) -> WayPlan {
        if self.holds {
            let stall = Change::StallAfter(Directed::both(Trigger::After(Duration::ZERO)));
            self.add(&StreamSum {
                changes: vec![stall],
                ..StreamSum::default()
            });
        }
        let faults = Change::all(&self.changes, way);
        let now = InForce {
            delay: [self.delay; 2],
            jitter: self.jitter,
            faults: [faults, faults],
        };
        WayPlan {
            pay: match self.pay {
                Some(PayBy::Own { limit, burst }) => Pay::Own { limit, burst },
                Some(PayBy::Shared(bucket) | PayBy::Traced(bucket)) => Pay::Bucket(bucket),
                None => Pay::Own {
                    limit: Limit::Unlimited,
                    burst: 1,
                },
            },
            terms: Terms::Own(Box::new(now)),
        }
    }
}

/// Each toxic's effect, kept from one change of a proxy's toxics to the
/// next with the revision of the toxic it was worked out from, so that a
/// change works out the effects of the toxics it changed, not of every
/// toxic again.
#[derive(Default)]
pub struct Effects(HashMap<u64, (u64, Effect)>);

impl Effects {
    /// The effect of each of `toxics`, in order, forgetting those gone.
    fn of(&mut self, toxics: &[Toxic]) -> Vec<Effect> {
        let effects = toxics
            .iter()
            .map(|toxic| match self.0.get(&toxic.id) {
                Some((revision, effect)) if *revision == toxic.revision => effect.clone(),
                _ => {
                    let made = effect(toxic);
                    self.0.insert(toxic.id, (toxic.revision, made.clone()));
                    made
                }
            })
            .collect();
        if self.0.len() > toxics.len() {
            let here: std::collections::HashSet<u64> = toxics.iter().map(|t| t.id).collect();
            self.0.retain(|id, _| here.contains(id));
        }
        effects
    }
}

impl ToxicRules {
    /// The rules of `toxics`, counting what passes in `counters`, with
    /// their effects from `effects`. Each toxic that shares a bucket
    /// among the proxy's connections spends from the bucket
    /// `shared(id, what)` gives for it (none: the toxic does nothing).
    pub fn new(
        toxics: &[Toxic],
        effects: &mut Effects,
        mut shared: impl FnMut(u64, Wanted) -> Option<Arc<Bucket>>,
        counters: Counters,
    ) -> ToxicRules {
        let mut ways: [Vec<Segment>; 2] = Default::default();
        for (toxic, effect) in toxics.iter().zip(effects.of(toxics)) {
            let bucket = match &effect {
                Effect::Limit {
                    limit,
                    burst,
                    shared: true,
                } => {
                    let burst = burst.unwrap_or_else(|| bandwidth_burst(*limit));
                    shared(
                        toxic.id,
                        Wanted::Bandwidth {
                            limit: *limit,
                            burst,
                        },
                    )
                }
                Effect::Traced { trace, .. } => shared(toxic.id, Wanted::Trace(trace.clone())),
                _ => None,
            };
            // A toxicity of 0 or less strikes nobody.
            if toxic.toxicity <= 0.0 || toxic.toxicity.is_nan() {
                continue;
            }
            let way = toxic.stream.way;
            let sum = StreamSum::of(&effect, bucket.as_ref());
            let segments = &mut ways[way as usize];
            match (toxic.toxicity >= 1.0, segments.last_mut()) {
                (true, Some(Segment::Sure(run))) => run.add(&sum),
                (true, _) => segments.push(Segment::Sure(sum)),
                (false, _) => segments.push(Segment::Chancy {
                    id: toxic.id,
                    toxicity: toxic.toxicity,
                    effect: sum,
                }),
            }
        }
        ToxicRules {
            ways,
            counters,
            http: None,
        }
    }

    /// The same rules, with `http` the rules of the proxy's `http`
    /// toxics, if it has any.
    pub fn with_http(mut self, http: Option<HttpRules>) -> ToxicRules {
        self.http = http;
        self
    }

    /// How the toxics that strike a connection with `draws` shape its
    /// direction `way`, and when they close the connection, if they do.
    fn way(&self, way: Way, draws: &mut RuleDraws) -> (WayPlan, Option<Duration>) {
        let mut sum = StreamSum::default();
        for segment in &self.ways[way as usize] {
            match segment {
                Segment::Sure(run) => sum.add(run),
                Segment::Chancy {
                    id,
                    toxicity,
                    effect,
                } => {
                    if draws.applies(*id, *toxicity) {
                        sum.add(effect);
                    }
                }
            }
        }
        let close_after = sum.close_after;
        (sum.plan(way), close_after)
    }
}

/// True if `a` is the slower limit of the two.
fn slower(a: Limit, b: Limit) -> bool {
    match (a, b) {
        (Limit::Rate(a), Limit::Rate(b)) => a.bytes_per_sec() <= b.bytes_per_sec(),
        (Limit::Rate(_), Limit::Unlimited) => true,
        (Limit::Unlimited, _) => false,
    }
}

impl Rules for ToxicRules {
    fn plan(&self, draws: &mut RuleDraws) -> io::Result<ConnectionShaping> {
        let (up, up_closes) = self.way(Way::Up, draws);
        let (down, down_closes) = self.way(Way::Down, draws);
        Ok(ConnectionShaping {
            ways: [up, down],
            close_after: least(up_closes, down_closes),
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

    fn http(&self) -> Option<HttpRules> {
        self.http.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn toxic(id: u64, kind: &str, stream: &str, toxicity: f64, attributes: Value) -> Toxic {
        Toxic::made(id, kind, stream, attributes, toxicity)
    }

    fn rules(toxics: &[Toxic]) -> ToxicRules {
        ToxicRules::new(
            toxics,
            &mut Effects::default(),
            |_, _| None,
            Default::default(),
        )
    }

    fn own_limit(pay: &Pay) -> Limit {
        match pay {
            Pay::Own { limit, .. } => *limit,
            Pay::Bucket(_) => panic!("not its own"),
        }
    }

    fn terms(plan: &WayPlan) -> InForce {
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
        let plan = rules(&toxics).plan(&mut RuleDraws::new(1)).unwrap();
        let [up, down] = &plan.ways;
        assert_eq!(terms(down).delay(Way::Down), Duration::from_millis(150));
        assert_eq!(terms(down).jitter, Duration::from_millis(5));
        assert_eq!(
            own_limit(&down.pay),
            Limit::per_second(10_000),
            "the least holds"
        );
        assert_eq!(terms(down).faults(Way::Down).slice, None);
        assert_eq!(own_limit(&up.pay), Limit::Unlimited);
        assert_eq!(terms(up).delay(Way::Up), Duration::ZERO);
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
            let mut draws = RuleDraws::new(seed);
            let first = terms(&rules(&half).plan(&mut draws).unwrap().ways[1]).delay(Way::Down);
            for _ in 0..3 {
                let again = terms(&rules(&half).plan(&mut draws).unwrap().ways[1]).delay(Way::Down);
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
        let plan = rules(&none).plan(&mut RuleDraws::new(3)).unwrap();
        assert_eq!(terms(&plan.ways[1]).delay(Way::Down), Duration::ZERO);
    }

    #[test]
    fn a_shared_bandwidth_pays_from_the_proxy_s_bucket() {
        let shared = Arc::new(shape_leaves::bucket::own(Limit::per_second(1000), 10).unwrap());
        let toxics = [toxic(
            9,
            "bandwidth",
            "upstream",
            1.0,
            json!({"rate": 1, "shared": 1}),
        )];
        let rules = ToxicRules::new(
            &toxics,
            &mut Effects::default(),
            |_, _| Some(shared.clone()),
            Default::default(),
        );
        let plan = rules.plan(&mut RuleDraws::new(0)).unwrap();
        match &plan.ways[0].pay {
            Pay::Bucket(bucket) => assert!(Arc::ptr_eq(bucket, &shared)),
            Pay::Own { .. } => panic!("a bucket of its own"),
        }
    }

    #[test]
    fn a_recorded_link_holds_over_any_bandwidth_and_adds_its_delay() {
        let traced = Arc::new(shape_leaves::bucket::own(Limit::per_second(1_500_000), 1).unwrap());
        let mut link = toxic(2, "link", "downstream", 1.0, json!({"profile": "slow-4g"}));
        link.trace = Some(Arc::new(
            shape_impair::trace::Trace::read("t", "1\n").unwrap(),
        ));
        // A slower bandwidth before it, and one after.
        let toxics = [
            toxic(1, "bandwidth", "downstream", 1.0, json!({"rate": 1})),
            link,
            toxic(3, "bandwidth", "downstream", 1.0, json!({"rate": 2})),
        ];
        let rules = ToxicRules::new(
            &toxics,
            &mut Effects::default(),
            |id, wanted| {
                assert!(id == 2 && matches!(wanted, Wanted::Trace(_)));
                Some(traced.clone())
            },
            Default::default(),
        );
        let plan = rules.plan(&mut RuleDraws::new(0)).unwrap();
        match &plan.ways[1].pay {
            Pay::Bucket(bucket) => assert!(Arc::ptr_eq(bucket, &traced)),
            Pay::Own { .. } => panic!("a bucket of its own"),
        }
        assert_eq!(
            terms(&plan.ways[1]).delay(Way::Down),
            Duration::from_millis(75)
        );
    }

    proptest::proptest! {
        /// Whatever whole numbers (and probabilities) the model lets
        /// through, every toxic gives a plan, and a connection can be
        /// shaped by it: nothing panics, every bucket can be made.
        #[test]
        fn any_attributes_give_a_plan_a_connection_can_take(
            kind in proptest::sample::select(
                crate::toxics::TOXICS.iter().map(|row| row.kind).collect::<Vec<_>>()
            ),
            numbers in proptest::collection::vec(proptest::num::i64::ANY, 4),
            probability in 0.0..=1.0f64,
            toxicity in proptest::num::f64::NORMAL,
        ) {
            let mut attributes = kind.defaults();
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
                revision: 0,
                attributes,
                name: kind.name().into(),
                kind,
                stream: crate::model::ToxicStream::parse("downstream").unwrap(),
                toxicity,
                trace: None,
            }];
            let plan = rules(&toxics).plan(&mut RuleDraws::new(0)).unwrap();
            for way in &plan.ways {
                if let Pay::Own { limit, burst } = way.pay {
                    proptest::prop_assert!(shape_leaves::bucket::own(limit, burst).is_ok());
                }
            }
        }
    }

    #[test]
    fn effects_are_worked_out_again_only_for_a_toxic_changed() {
        let mut effects = Effects::default();
        let mut toxics = vec![
            toxic(1, "latency", "downstream", 1.0, json!({"latency": 10})),
            toxic(2, "latency", "downstream", 0.5, json!({"latency": 20})),
        ];
        assert_eq!(effects.of(&toxics).len(), 2);
        toxics[0].attributes.insert("latency".into(), json!(30));
        // Not marked changed: the effect kept is used (the model marks
        // every change by its revision).
        let kept = effects.of(&toxics);
        assert!(
            matches!(kept[0], Effect::Delay { delay, .. } if delay == Duration::from_millis(10))
        );
        toxics[0].revision += 1;
        let fresh = effects.of(&toxics);
        assert!(
            matches!(fresh[0], Effect::Delay { delay, .. } if delay == Duration::from_millis(30))
        );
        toxics.remove(1);
        effects.of(&toxics);
        assert_eq!(effects.0.len(), 1, "a toxic gone is forgotten");
    }

    #[test]
    fn runs_of_sure_toxics_and_chancy_ones_add_up_in_order() {
        // Sure, chancy (struck or not), sure: the faults of a later toxic
        // replace those of an earlier one of the same kind.
        let slicer = |id, toxicity, size: u64| {
            toxic(
                id,
                "slicer",
                "upstream",
                toxicity,
                json!({"average_size": size, "size_variation": 0, "delay": 0}),
            )
        };
        let toxics = [slicer(1, 1.0, 8), slicer(2, 0.5, 16), slicer(3, 1.0, 32)];
        let three = rules(&toxics);
        for seed in 0..50 {
            let plan = three.plan(&mut RuleDraws::new(seed)).unwrap();
            let size = terms(&plan.ways[0]).faults(Way::Up).slice.map(|s| s.size);
            assert_eq!(size, Some(32), "the last holds whatever the draw");
        }
        let toxics = [slicer(1, 1.0, 8), slicer(2, 0.5, 16)];
        let two = rules(&toxics);
        let sizes: std::collections::BTreeSet<Option<u64>> = (0..50)
            .map(|seed| {
                let plan = two.plan(&mut RuleDraws::new(seed)).unwrap();
                terms(&plan.ways[0]).faults(Way::Up).slice.map(|s| s.size)
            })
            .collect();
        assert_eq!(sizes, [Some(8), Some(16)].into_iter().collect());
    }
}
