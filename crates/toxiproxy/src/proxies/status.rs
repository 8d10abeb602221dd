//! How the server's proxies are doing, as SIGUSR1 says it: the proxies,
//! the connections the loop counts, and the bytes each way, in all and
//! now.

use crate::carry::shaping::Counters;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// How the proxies are doing, read from any thread: the SIGUSR1 line.
pub struct Status {
    tallies: Arc<Mutex<BTreeMap<String, Counters>>>,
}

impl Status {
    /// The line over each proxy's counters in `tallies`, by name.
    pub fn over(tallies: Arc<Mutex<BTreeMap<String, Counters>>>) -> Status {
        Status { tallies }
    }

    /// `shape: 2 proxies, 3 connections; up 1.00 MiB, 0 B/s now; down
    /// 20.00 MiB, 1.00 MiB/s now`, with `connections` as the loop counts
    /// them (`None` if it could not say).
    pub fn line(&self, connections: Option<usize>) -> String {
        let (proxies, up, down) = {
            let tallies = shape_leaves::lock::lock(&self.tallies);
            let sum = |way: usize| {
                tallies
                    .values()
                    .fold((0, 0.0), |(total, recent), counters| {
                        let sent = &counters.sent[way];
                        (total + sent.total(), recent + sent.recent())
                    })
            };
            (tallies.len(), sum(0), sum(1))
        };
        let connections =
            connections.map_or("connections unknown".into(), |n| plural(n, "connection"));
        let way = |(total, recent): (u64, f64)| {
            format!(
                "{}, {} now",
                shape_bucket::units::human_bytes(total),
                shape_leaves::counting::Counting::Bytes.show_rate(recent)
            )
        };
        format!(
            "shape: {}, {connections}; up {}; down {}",
            plural(proxies, "proxy"),
            way(up),
            way(down)
        )
    }
}

/// `n` and `noun`, in the plural unless `n` is 1.
fn plural(n: usize, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "proxy") => format!("{n} proxies"),
        _ => format!("{n} {noun}s"),
    }
}
