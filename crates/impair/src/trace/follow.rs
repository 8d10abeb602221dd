//! Following a recorded link: a thread of its own gives each traced
//! way's setting, window by window, what the trace
//! delivers in that window: its bytes at that window's rate, with a
//! burst of the window's bytes (a window's unused capacity is lost with
//! it, as a trace's unused opportunities are), and a pause where it
//! delivers nothing (an outage). The trace repeats.

use super::{OPPORTUNITY, Trace};
use shape_bucket::Limit;
use shape_leaves::bucket::{Adjustment, Bucket, apply};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The window each setting holds for, in milliseconds: fine enough that
/// every second carries what the trace does, coarse enough to cost a
/// hundred changes a second.
pub const WINDOW_MS: u64 = 10;

/// What a trace gives one window: a limit and its burst, or `None`
/// (nothing: paused).
pub type WindowLimit = Option<(Limit, u64)>;

/// What the trace gives in window `k` (milliseconds `k·WINDOW_MS` on).
pub fn setting(trace: &Trace, k: u64) -> WindowLimit {
    let from = k.saturating_mul(WINDOW_MS);
    let bytes = trace.bytes_between(from, from.saturating_add(WINDOW_MS));
    let burst = bytes.min(OPPORTUNITY);
    (bytes > 0).then(|| (Limit::per_second(bytes * (1_000 / WINDOW_MS)), burst))
}

/// What `setting` asks of a bucket: the limit and burst, resumed; or
/// paused, keeping them.
pub fn adjustment(setting: WindowLimit) -> Adjustment {
    match setting {
        Some((limit, burst)) => Adjustment {
            limit: Some(limit),
            burst: Some(burst.clamp(1, shape_bucket::MAX_BURST)),
            paused: Some(false),
        },
        None => Adjustment {
            paused: Some(true),
            ..Adjustment::default()
        },
    }
}

/// A trace followed on a thread of its own, until this is dropped: the
/// thread sees it at its next window and ends.
pub struct Following {
    stopped: Arc<AtomicBool>,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

/// Follows `trace` from now with `bucket`, calling `changed` after each
/// resume from a pause, until the [`Following`] returned is dropped: a
/// toxic's trace, which lasts as long as the toxic. What waits on a paused
/// bucket has no deadline and must be woken; a change of rate alone it
/// meets at its own deadline, so that a trace's hundred changes a second
/// do not step every waiting connection a hundred times a second.
pub fn follow_bucket(
    trace: Arc<Trace>,
    bucket: Arc<Bucket>,
    changed: impl Fn() + Send + 'static,
) -> io::Result<Following> {
    follow_with(
        vec![(0, trace)],
        move |_, setting| {
            let resumed = setting.is_some() && bucket.paused();
            // A limit and a clamped burst are always valid.
            let _ = apply(&*bucket, &adjustment(setting));
            if resumed {
                changed();
            }
        },
        Instant::now(),
    )
}

/// Follows `traces` from `started`, calling `set` with a way's index and
/// its setting whenever that changes, on a thread of its own until the
/// [`Following`] is dropped; the first window is set before this returns.
pub fn follow_with(
    traces: Vec<(usize, Arc<Trace>)>,
    mut set: impl FnMut(usize, WindowLimit) + Send + 'static,
    started: Instant,
) -> io::Result<Following> {
    let mut last: Vec<Option<WindowLimit>> = vec![None; traces.len()];
    let mut set_window = move |k: u64| {
        for ((way, trace), last) in traces.iter().zip(last.iter_mut()) {
            let now = setting(trace, k);
            if *last != Some(now) {
                set(*way, now);
                *last = Some(now);
            }
        }
    };
    set_window(0);
    let stopped = Arc::new(AtomicBool::new(false));
    let stop = stopped.clone();
    std::thread::Builder::new()
        .name("shape-trace".into())
        .spawn(move || {
            for k in 1.. {
                let at = started + Duration::from_millis(k * WINDOW_MS);
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                set_window(k);
            }
        })?;
    Ok(Following { stopped })
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

#[cfg(test)]
mod following {
    use super::*;

    #[test]
    fn a_followed_bucket_is_set_at_once_woken_on_resume_and_left_alone_once_dropped() {
        // Opportunities at 1..=9 ms and 501..=509 ms of a 1 s period:
        // windows 0 and 50 carry nine, the rest none (spans long enough
        // that a busy machine's delays never reach the next step before
        // the test looks).
        let text: String = (1..=9)
            .chain(501..=509)
            .map(|t| format!("{t}\n"))
            .chain(["1000\n".into()])
            .collect();
        let trace = Arc::new(Trace::read("t", &text).unwrap());
        let bucket = Arc::new(shape_leaves::bucket::own(Limit::Unlimited, 1).unwrap());
        let started = Instant::now();
        let changes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = changes.clone();
        let following = follow_bucket(trace, bucket.clone(), move || {
            counted.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(changes.load(Ordering::Relaxed), 0, "set, nobody to wake");
        assert_eq!(
            bucket.limit_and_burst(),
            (Limit::per_second(1_350_000), 1_500)
        );
        // Window 1 has nothing: the bucket is paused then (a busy machine
        // may take longer; the loop waits for it), and nobody is woken.
        while !bucket.paused() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(changes.load(Ordering::Relaxed), 0, "a pause wakes nobody");
        // Window 50 resumes it, and wakes what waits; window 51 pauses
        // it again.
        while changes.load(Ordering::Relaxed) < 1 {
            std::thread::sleep(Duration::from_millis(1));
        }
        while !bucket.paused() {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(following);
        // The second period (from 1 s) would resume it: once stopped,
        // nothing does.
        std::thread::sleep(
            (started + Duration::from_millis(1_050)).saturating_duration_since(Instant::now()),
        );
        assert!(bucket.paused());
        assert_eq!(changes.load(Ordering::Relaxed), 1);
    }
}
