//! Ways that follow a recorded link (`--trace`): a thread of its own
//! gives each traced way's bucket, window by window, what the trace
//! delivers in that window: its bytes at that window's rate, with a
//! burst of the window's bytes (a window's unused capacity is lost with
//! it, as a trace's unused opportunities are), and a pause where it
//! delivers nothing (an outage). The trace repeats.

use super::Adjuster;
use crate::trace::Trace;
use shape_bucket::Limit;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The window each setting holds for, in milliseconds: fine enough that
/// every second carries what the trace does, coarse enough to cost a
/// hundred changes a second.
pub const WINDOW_MS: u64 = 10;

/// What the trace gives in window `k` (milliseconds `k·WINDOW_MS` on): a
/// limit and its burst, or `None` (nothing: paused).
pub fn setting(trace: &Trace, k: u64) -> Option<(Limit, u64)> {
    let from = k.saturating_mul(WINDOW_MS);
    let bytes = trace.bytes_between(from, from.saturating_add(WINDOW_MS));
    let burst = bytes.min(crate::trace::OPPORTUNITY);
    (bytes > 0).then(|| (Limit::per_second(bytes * (1_000 / WINDOW_MS)), burst))
}

/// Follows `traces` (each with the index of the way it sets) from
/// `started`, on a thread of its own for as long as the process runs;
/// the first window is set before this returns. Fails only if the thread
/// cannot be had.
pub fn follow(
    traces: Vec<(usize, Arc<Trace>)>,
    adjuster: Arc<Adjuster>,
    started: Instant,
) -> io::Result<()> {
    if traces.is_empty() {
        return Ok(());
    }
    let mut last: Vec<Option<Option<(Limit, u64)>>> = vec![None; traces.len()];
    let mut set = move |k: u64| {
        for ((way, trace), last) in traces.iter().zip(last.iter_mut()) {
            let now = setting(trace, k);
            if *last != Some(now) {
                adjuster.set_way(*way, now);
                *last = Some(now);
            }
        }
    };
    set(0);
    std::thread::Builder::new()
        .name("shape-trace".into())
        .spawn(move || {
            for k in 1.. {
                let at = started + Duration::from_millis(k * WINDOW_MS);
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                set(k);
            }
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_window_carries_the_traces_bytes_and_an_outage_pauses() {
        // 1 ms apart for 20 ms (12 Mbit/s), then nothing until 40 ms.
        let text: String = (1..=20)
            .map(|t| format!("{t}\n"))
            .chain(["40\n".into()])
            .collect();
        let trace = Trace::read("t", &text).unwrap();
        // Window 0 is milliseconds 0-9: opportunities at 1..=9.
        assert_eq!(
            setting(&trace, 0),
            Some((Limit::per_second(1_350_000), 1_500))
        );
        assert_eq!(
            setting(&trace, 1),
            Some((Limit::per_second(1_500_000), 1_500))
        );
        assert_eq!(
            setting(&trace, 2),
            Some((Limit::per_second(150_000), 1_500))
        );
        assert_eq!(setting(&trace, 3), None, "30-39 ms: an outage");
        // 40 ms ends the first period; the next has 41 to 49.
        assert_eq!(
            setting(&trace, 4),
            Some((Limit::per_second(1_500_000), 1_500))
        );
    }
}
