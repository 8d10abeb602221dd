//! What each toxic asks of shape, for the stream it is on: a limit (the
//! bucket), a delay (the delay line), or faults as shape's own flags
//! would give them (the one table of faults), so that the proxy carries
//! toxics out with the machinery a pipe uses.
//!
//! `timeout` is a stall from its start (`--stall-after 0`: what comes is
//! dropped, as by a server that stopped answering), and above 0 the
//! connection's plan closes it after the timeout.

use crate::model::Toxic;
use crate::toxics::{Attributes, Kind};
use shape_bucket::{Limit, MAX_BURST, Rate};
use shape_impair::faults::{Bytes, Change, Directed, Probability, Slice, Span, Trigger};
use shape_impair::trace::Trace;
use std::sync::Arc;
use std::time::Duration;

/// What one toxic asks of its stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Nothing: `noop`, or a bandwidth of 0 or less (toxiproxy then passes
    /// everything through).
    Nothing,
    /// At most this rate: `bandwidth`'s `rate`, in KB/s of 1000 bytes,
    /// with shape's `burst` (KB) if given, and shared by all the proxy's
    /// connections with shape's `shared`.
    Limit {
        limit: Limit,
        burst: Option<u64>,
        shared: bool,
    },
    /// Every byte held this long, give or take the jitter: `latency`.
    Delay { delay: Duration, jitter: Duration },
    /// Faults, as shape's flags give them.
    Faults(Vec<Change>),
    /// Nothing passes from now on, and the connection is closed after
    /// this long if given: `timeout`.
    Hold { close_after: Option<Duration> },
    /// A known link's rate and delay for the stream: `link`.
    Link { limit: Limit, delay: Duration },
    /// A recorded link for the stream, shared by the proxy's connections
    /// as one link is, with a known link's delay if one is named: `link`
    /// with a `trace`.
    Traced { trace: Arc<Trace>, delay: Duration },
}

/// What `toxic` asks of the stream it is on, made from its attributes as
/// their units say. Any attributes the model let through give an effect:
/// out-of-range values are taken to the nearest that shape can carry out
/// (a time of at most an hour, a rate of at most 2^47 bytes a second,
/// beyond which it is unlimited).
pub fn effect(toxic: &Toxic) -> Effect {
    let given = Attributes::of(toxic.kind, &toxic.attributes);
    match toxic.kind {
        Kind::Latency => Effect::Delay {
            delay: given.time("latency"),
            jitter: given.time("jitter"),
        },
        Kind::Bandwidth => match Rate::from_whole(given.bytes_per_second("rate")) {
            // 0 passes everything through, as in toxiproxy; so does a rate
            // beyond any link's.
            None => Effect::Nothing,
            Some(rate) => Effect::Limit {
                limit: Limit::Rate(rate),
                burst: given
                    .kilobytes("burst")
                    .map(|burst| burst.clamp(1, MAX_BURST)),
                shared: given.flag("shared"),
            },
        },
        Kind::SlowClose => Effect::Faults(vec![Change::SlowClose(both(Span(given.time("delay"))))]),
        Kind::Timeout => Effect::Hold {
            close_after: Some(given.time("timeout")).filter(|t| !t.is_zero()),
        },
        // What comes is dropped, and the reset is at the first byte, or
        // after the timeout (counted from the toxic's start: toxiproxy
        // counts from the first byte).
        Kind::ResetPeer => match given.time("timeout") {
            Duration::ZERO => Effect::Faults(vec![Change::ResetAfter(both(Trigger::Bytes(0)))]),
            timeout => Effect::Faults(vec![
                Change::StallAfter(both(Trigger::Bytes(0))),
                Change::ResetAfter(both(Trigger::After(timeout))),
            ]),
        },
        Kind::Slicer => {
            let size = given.bytes("average_size").max(1);
            let variation = given.bytes("size_variation").min(size - 1);
            Effect::Faults(vec![
                Change::Slice(both(Slice { size, variation })),
                Change::SlicePause(both(Span(given.time("delay")))),
            ])
        }
        Kind::LimitData => {
            Effect::Faults(vec![Change::CutAfter(both(Bytes(given.bytes("bytes"))))])
        }
        Kind::Noop => Effect::Nothing,
        // Packet loss as TCP meets it: stalls for retransmissions, a
        // bound on throughput, every byte delivered (`--loss`).
        Kind::Loss => Effect::Faults(vec![Change::PacketLoss(both(
            shape_impair::faults::Loss::Random(given.probability("probability")),
        ))]),
        Kind::Corrupt => Effect::Faults(vec![Change::Corrupt(both(Probability(
            given.probability("probability"),
        )))]),
        // A datagram's alone: the model refuses them on a stream
        // (`datagrams.rs` carries them out on a UDP link).
        Kind::Duplicate | Kind::Reorder => Effect::Nothing,
        // Not the stream's: the proxy's HTTP rules (see `shaping.rs`).
        Kind::Http => Effect::Nothing,
        Kind::Link => match (&toxic.trace, link(toxic, &given)) {
            (Some(trace), known) => Effect::Traced {
                trace: trace.clone(),
                delay: known.map_or(Duration::ZERO, |(_, delay)| delay),
            },
            (None, Some((limit, delay))) => Effect::Link { limit, delay },
            (None, None) => Effect::Nothing,
        },
    }
}

/// The rate and delay of the known link a `link` toxic names, for the
/// stream it is on: upstream (clients to the server) is the link's way
/// up; none if it names none.
pub fn link(toxic: &Toxic, given: &Attributes) -> Option<(Limit, Duration)> {
    let profile = given.profile("profile")?;
    let rate = match toxic.stream.way {
        shape_impair::faults::Way::Up => profile.up,
        shape_impair::faults::Way::Down => profile.down,
    };
    let limit = rate
        .parse::<shape_bucket::RateSpec>()
        .ok()?
        .in_bytes()
        .ok()?;
    Some((limit, profile.one_way()))
}

/// `value` for the stream a toxic is on: its effect is given to that
/// stream's direction alone, so it holds for whichever asks.
fn both<T: Clone>(value: T) -> Directed<T> {
    Directed::both(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use shape_impair::faults::Way;

    fn toxic(kind: &str, attributes: Value) -> Toxic {
        Toxic::made(0, kind, "downstream", attributes, 1.0)
    }

    #[test]
    fn a_link_gives_its_stream_the_links_rate_that_way_and_half_its_round_trip() {
        let on = |stream: &str, profile: &str| {
            let toxic = Toxic::made(0, "link", stream, json!({"profile": profile}), 1.0);
            effect(&toxic)
        };
        let half = Duration::from_millis(75);
        let rate = |text: &str| text.parse::<shape_bucket::RateSpec>().unwrap();
        assert_eq!(
            on("downstream", "slow-4g"),
            Effect::Link {
                limit: rate("1.6Mbit").in_bytes().unwrap(),
                delay: half
            }
        );
        assert_eq!(
            on("upstream", "fast-3g"),
            Effect::Link {
                limit: rate("750kbit").in_bytes().unwrap(),
                delay: half
            }
        );
        assert_eq!(on("downstream", ""), Effect::Nothing);
        let trace = Arc::new(Trace::read("t", "1\n").unwrap());
        let mut traced = Toxic::made(0, "link", "downstream", json!({"profile": "slow-4g"}), 1.0);
        traced.trace = Some(trace.clone());
        assert_eq!(
            effect(&traced),
            Effect::Traced { trace, delay: half },
            "the trace holds the rate, the known link gives the delay"
        );
    }

    fn faults(effect: Effect) -> shape_impair::faults::Faults {
        match effect {
            Effect::Faults(changes) => Change::all(&changes, Way::Down),
            other => panic!("not faults: {other:?}"),
        }
    }

    #[test]
    fn each_toxic_is_carried_by_shape_s_own_machinery() {
        assert_eq!(
            effect(&toxic("bandwidth", json!({"rate": 1000}))),
            Effect::Limit {
                limit: Limit::per_second(1_000_000),
                burst: None,
                shared: false
            }
        );
        assert_eq!(
            effect(&toxic(
                "bandwidth",
                json!({"rate": 10, "shared": 1, "burst": 20})
            )),
            Effect::Limit {
                limit: Limit::per_second(10_000),
                burst: Some(20_000),
                shared: true
            }
        );
        assert_eq!(
            effect(&toxic("bandwidth", json!({"rate": 0}))),
            Effect::Nothing
        );
        assert_eq!(
            effect(&toxic("latency", json!({"latency": 100, "jitter": 10}))),
            Effect::Delay {
                delay: Duration::from_millis(100),
                jitter: Duration::from_millis(10)
            }
        );
        let slicer = faults(effect(&toxic(
            "slicer",
            json!({"average_size": 64, "size_variation": 32, "delay": 10}),
        )));
        assert_eq!(slicer.slice.map(|s| (s.size, s.variation)), Some((64, 32)));
        assert_eq!(slicer.slice_pause, Duration::from_micros(10));
        assert_eq!(
            faults(effect(&toxic("limit_data", json!({"bytes": 7})))).cut_after,
            Some(7)
        );
        assert_eq!(
            faults(effect(&toxic("slow_close", json!({"delay": 250})))).slow_close,
            Duration::from_millis(250)
        );
        assert_eq!(
            effect(&toxic("timeout", json!({"timeout": 0}))),
            Effect::Hold { close_after: None }
        );
        assert_eq!(
            effect(&toxic("timeout", json!({"timeout": 250}))),
            Effect::Hold {
                close_after: Some(Duration::from_millis(250))
            }
        );
        assert!(
            faults(effect(&toxic("reset_peer", json!({"timeout": 5}))))
                .reset_after
                .is_some()
        );
        assert_eq!(
            faults(effect(&toxic("loss", json!({"probability": 0.25})))).loss,
            shape_impair::faults::Loss::Random(0.25)
        );
        assert_eq!(
            faults(effect(&toxic("corrupt", json!({"probability": 0.5})))).corrupt,
            0.5
        );
        assert_eq!(effect(&toxic("noop", json!({}))), Effect::Nothing);
    }
}
