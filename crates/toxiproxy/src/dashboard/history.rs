//! The last minute of every proxy's counters, kept by the server, so
//! that a page opened now shows what flowed before it was opened: a
//! sample a second of each proxy's bytes each way, taken on a thread of
//! its own whether or not a page is open.

use crate::carry::shaping::Counters;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Samples kept of each proxy: a minute's worth and the one before it,
/// so that the minute's first rate can be had.
const KEPT: usize = 61;

/// How often a sample is taken.
const EVERY: Duration = Duration::from_secs(1);

/// One proxy's bytes each way, as they stood at `at` (the dashboard's
/// clock, in milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub at: u64,
    pub up: u64,
    pub down: u64,
}

/// Each proxy's recent samples, by name.
#[derive(Debug, Default)]
pub struct Samples(BTreeMap<String, VecDeque<Sample>>);

impl Samples {
    /// Adds a sample of each proxy in `counters` taken at `at`; a proxy
    /// no longer there is forgotten.
    pub fn take(&mut self, at: u64, counters: &BTreeMap<String, Counters>) {
        self.0.retain(|name, _| counters.contains_key(name));
        for (name, counters) in counters {
            let kept = self.0.entry(name.clone()).or_default();
            kept.push_back(Sample {
                at,
                up: counters.sent[0].total(),
                down: counters.sent[1].total(),
            });
            while kept.len() > KEPT {
                kept.pop_front();
            }
        }
    }

    /// `GET /ui/history`: `{"at": now, "proxies": {name: [[at, up,
    /// down], …]}}`. A proxy through which nothing moved in the minute
    /// has only its first and last samples: its graph is as flat, and a
    /// thousand idle proxies cost a few kilobytes.
    pub fn answer(&self, now: u64) -> Value {
        let proxies: serde_json::Map<String, Value> = self
            .0
            .iter()
            .map(|(name, kept)| {
                let moved = kept
                    .iter()
                    .zip(kept.iter().skip(1))
                    .any(|(a, b)| (a.up, a.down) != (b.up, b.down));
                let shown: Vec<&Sample> = if moved || kept.len() <= 2 {
                    kept.iter().collect()
                } else {
                    kept.iter().take(1).chain(kept.back()).collect()
                };
                let shown: Vec<Value> = shown
                    .into_iter()
                    .map(|sample| json!([sample.at, sample.up, sample.down]))
                    .collect();
                (name.clone(), Value::Array(shown))
            })
            .collect();
        json!({"at": now, "proxies": proxies})
    }
}

/// The samples, taken on their own thread while the proxies' counters
/// live.
#[derive(Clone, Default)]
pub struct History(Arc<Mutex<Samples>>);

impl History {
    /// Samples each proxy in `tallies` every second, until `tallies` is
    /// gone (the server with it). If no thread can be had, nothing is
    /// kept: a page opens on an empty graph, as it would have before.
    pub fn sampling(tallies: Weak<Mutex<BTreeMap<String, Counters>>>) -> History {
        let history = History::default();
        let samples = Arc::downgrade(&history.0);
        let _ = std::thread::Builder::new()
            .name("history".into())
            .spawn(move || {
                while let (Some(tallies), Some(samples)) = (tallies.upgrade(), samples.upgrade()) {
                    let at = super::clock_ms();
                    let counters = shape_leaves::lock::lock(&tallies).clone();
                    shape_leaves::lock::lock(&samples).take(at, &counters);
                    drop((tallies, samples));
                    std::thread::sleep(EVERY);
                }
            });
        history
    }

    /// What [`Samples::answer`] says now.
    pub fn answer(&self) -> Value {
        shape_leaves::lock::lock(&self.0).answer(super::clock_ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(up: u64, down: u64) -> Counters {
        let counters = Counters::default();
        counters.sent[0].add(up);
        counters.sent[1].add(down);
        counters
    }

    #[test]
    fn a_minute_is_kept_of_each_proxy_and_a_gone_one_forgotten() {
        let mut samples = Samples::default();
        let busy = counters(0, 0);
        let idle = counters(5, 5);
        for second in 0..100u64 {
            busy.sent[1].add(1000);
            let all = BTreeMap::from([
                ("busy".to_string(), busy.clone()),
                ("idle".into(), idle.clone()),
            ]);
            samples.take(second * 1000, &all);
        }
        let answer = samples.answer(100_000);
        assert_eq!(answer["at"], 100_000);
        let kept = answer["proxies"]["busy"].as_array().unwrap();
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept[0], json!([39_000, 0, 40_000]));
        assert_eq!(kept[KEPT - 1], json!([99_000, 0, 100_000]));
        // Nothing moved: the minute's ends alone.
        assert_eq!(
            answer["proxies"]["idle"],
            json!([[39_000, 5, 5], [99_000, 5, 5]])
        );
        samples.take(100_000, &BTreeMap::from([("idle".to_string(), idle)]));
        assert!(samples.answer(100_000)["proxies"].get("busy").is_none());
    }

    #[test]
    fn the_thread_samples_while_the_counters_live_and_ends_with_them() {
        let tallies = Arc::new(Mutex::new(BTreeMap::from([(
            "p".to_string(),
            counters(7, 9),
        )])));
        let history = History::sampling(Arc::downgrade(&tallies));
        // The first sample is taken as the thread starts.
        let waited = std::time::Instant::now();
        let first = loop {
            let answer = history.answer();
            if !answer["proxies"]["p"].is_null() {
                break answer;
            }
            assert!(waited.elapsed() < Duration::from_secs(30), "no sample");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(first["proxies"]["p"][0][1], 7);
        assert_eq!(first["proxies"]["p"][0][2], 9);
        drop(tallies);
    }
}
