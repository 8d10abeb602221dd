//! What each toxic asks of shape, for the stream it is on: a limit (the
//! bucket), a delay (the delay line), or faults as shape's own flags
//! would give them (the one table of faults), so that the proxy carries
//! toxics out with the machinery a pipe uses.
//!
//! `timeout` is a stall from its start (`--stall-after 0`: what comes is
//! dropped, as by a server that stopped answering), and above 0 the
//! connection's plan closes it after the timeout.

use super::model::Toxic;
use crate::faults::Change;
use crate::slowlink::LONGEST_DELAY;
use serde_json::Value;
use shape_bucket::{Limit, MAX_BURST, Rate};
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
}

/// The longest time a toxic's attribute gives, in milliseconds: shape's
/// longest delay, an hour. Longer times are an hour.
const LONGEST_MS: u64 = LONGEST_DELAY.as_millis() as u64;

/// What `toxic` asks of the stream it is on. Any attributes the model let
/// through give an effect: out-of-range values are taken to the nearest
/// that shape can carry out (a time of at most an hour, a rate of at most
/// 2^47 bytes a second, beyond which it is unlimited).
pub fn effect(toxic: &Toxic) -> Effect {
    let number = |name: &str| {
        toxic
            .attributes
            .get(name)
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .max(0) as u64
    };
    let ms = |name: &str| number(name).min(LONGEST_MS);
    let faults = |flags: &[(&str, String)]| {
        Effect::Faults(
            flags
                .iter()
                .filter_map(|(name, value)| Change::parse(name, value).ok())
                .collect(),
        )
    };
    match toxic.kind.as_str() {
        "latency" => Effect::Delay {
            delay: Duration::from_millis(ms("latency")),
            jitter: Duration::from_millis(ms("jitter")),
        },
        "bandwidth" => match Rate::from_whole(number("rate").saturating_mul(1000)) {
            // 0 passes everything through, as in toxiproxy; so does a rate
            // beyond any link's.
            None => Effect::Nothing,
            Some(rate) => Effect::Limit {
                limit: Limit::Rate(rate),
                burst: toxic
                    .attributes
                    .contains_key("burst")
                    .then(|| number("burst").saturating_mul(1000).clamp(1, MAX_BURST)),
                shared: number("shared") != 0,
            },
        },
        "slow_close" => faults(&[("slow-close", format!("{}ms", ms("delay")))]),
        "timeout" => Effect::Hold {
            close_after: match ms("timeout") {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
        },
        // What comes is dropped, and the reset is at the first byte, or
        // after the timeout (counted from the toxic's start: toxiproxy
        // counts from the first byte).
        "reset_peer" => match ms("timeout") {
            0 => faults(&[("reset-after", "0".into())]),
            timeout => faults(&[
                ("stall-after", "0".into()),
                ("reset-after", format!("{timeout}ms")),
            ]),
        },
        "slicer" => {
            let size = number("average_size").max(1);
            let variation = number("size_variation").min(size - 1);
            let pause = number("delay").min(LONGEST_MS * 1000);
            faults(&[
                ("slice", format!("{size}:{variation}")),
                ("slice-pause", format!("{pause}us")),
            ])
        }
        "limit_data" => faults(&[("cut-after", number("bytes").to_string())]),
        "loss" | "corrupt" => {
            let chance = toxic
                .attributes
                .get("probability")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                .clamp(0.0, 1.0);
            let name = match toxic.kind.as_str() {
                "loss" => "drop",
                _ => "corrupt",
            };
            faults(&[(name, chance.to_string())])
        }
        _ => Effect::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::Way;
    use serde_json::json;

    fn toxic(kind: &str, attributes: Value) -> Toxic {
        Toxic {
            attributes: attributes.as_object().unwrap().clone(),
            name: format!("{kind}_downstream"),
            id: 0,
            revision: 0,
            kind: kind.into(),
            stream: "downstream".into(),
            toxicity: 1.0,
        }
    }

    fn faults(effect: Effect) -> crate::faults::Faults {
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
            faults(effect(&toxic("loss", json!({"probability": 0.25})))).drop,
            0.25
        );
        assert_eq!(
            faults(effect(&toxic("corrupt", json!({"probability": 0.5})))).corrupt,
            0.5
        );
        assert_eq!(effect(&toxic("noop", json!({}))), Effect::Nothing);
    }
}
