//! Wires a running shape to what may change it while it runs: remote
//! control messages, SIGHUP and the rate file, SIGUSR1 status lines, and
//! the timetable. Also owns one rule: a burst the user never set follows
//! the rate (a tenth of a second of it), whoever changes the rate.

use crate::bucket::{InvalidBurst, check_burst};
use crate::control::{ControlDir, Registration, Request, Settings, apply};
use crate::progress::Printer;
use crate::rate::{Limit, human_rate};
use crate::schedule::{RateFile, Schedule};
use crate::share::Bucket;
use crate::signals::{Handlers, answer};
use crate::size::human_bytes;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// Changes the settings of the running shape's buckets: one for a copy, a
/// proxy's two directions, and the buckets a proxy makes for each
/// connection with `--per-connection`.
pub struct Adjuster {
    /// What every change applies to; the first is what answers report.
    buckets: Vec<Arc<Bucket>>,
    /// Buckets made from the settings while running, reached while they
    /// live. The lock also keeps a change from falling between making one
    /// and registering it.
    followers: Mutex<Vec<Weak<Bucket>>>,
    /// True until someone sets a burst.
    burst_follows_rate: AtomicBool,
    /// Called after each change, so that a user that does not sleep on the
    /// buckets (a proxy's poll loop) re-times its waits.
    on_change: Mutex<Option<Box<dyn Fn() + Send>>>,
}

impl Adjuster {
    pub fn new(bucket: Arc<Bucket>, burst_was_set: bool) -> Adjuster {
        Adjuster::over(vec![bucket], burst_was_set)
    }

    /// An adjuster of several buckets, changed together.
    pub fn over(buckets: Vec<Arc<Bucket>>, burst_was_set: bool) -> Adjuster {
        assert!(!buckets.is_empty(), "an adjuster needs a bucket");
        Adjuster {
            buckets,
            followers: Mutex::new(Vec::new()),
            burst_follows_rate: AtomicBool::new(!burst_was_set),
            on_change: Mutex::new(None),
        }
    }

    /// Calls `notify` after every change from now on.
    pub fn on_change(&self, notify: Box<dyn Fn() + Send>) {
        *lock(&self.on_change) = Some(notify);
    }

    /// A fresh bucket with the settings bucket `index` has now, which later
    /// changes reach too while it lives.
    pub fn follower(&self, index: usize) -> anyhow::Result<Arc<Bucket>> {
        let mut followers = lock(&self.followers);
        let model = &self.buckets[index];
        let bucket = Arc::new(crate::share::own(model.limit(), model.burst())?);
        bucket.set_paused(model.paused());
        followers.retain(|follower| follower.strong_count() > 0);
        followers.push(Arc::downgrade(&bucket));
        Ok(bucket)
    }

    /// Applies `request`, giving a new rate its default burst unless a
    /// burst was ever set. A burst no bucket can take refuses the whole
    /// request, and nothing changes.
    pub fn apply(&self, request: &Request) -> Result<(), InvalidBurst> {
        let mut request = *request;
        if let Some(burst) = request.burst {
            check_burst(burst)?;
        }
        if request.burst.is_some() {
            self.burst_follows_rate.store(false, Ordering::Relaxed);
        } else if self.burst_follows_rate.load(Ordering::Relaxed) {
            request.burst = request.limit.map(default_burst);
        }
        {
            // The burst was checked above: no bucket refuses the request.
            let mut followers = lock(&self.followers);
            for bucket in &self.buckets {
                apply(bucket, &request)?;
            }
            followers.retain(|follower| match follower.upgrade() {
                Some(bucket) => apply(&bucket, &request).is_ok(),
                None => false,
            });
        }
        if let Some(notify) = lock(&self.on_change).as_ref() {
            notify();
        }
        Ok(())
    }

    /// Changes the limit alone, as a timetable does.
    pub fn set_limit(&self, limit: Limit) {
        // A limit, and the burst that may follow it, are always valid.
        let _ = self.apply(&Request {
            limit: Some(limit),
            ..Request::default()
        });
    }

    /// The buckets every change applies to, in the order given.
    pub fn buckets(&self) -> &[Arc<Bucket>] {
        &self.buckets
    }

    /// The settings of the first bucket: what an answer to `--remote`
    /// reports.
    pub fn settings(&self) -> Settings {
        Settings::of(&self.buckets[0])
    }

    /// The settings for a status line: of the one bucket, or of a proxy's
    /// two directions if they differ.
    pub fn describe(&self) -> String {
        match self.buckets.as_slice() {
            [up, down] if Settings::of(up) != Settings::of(down) => {
                format!("up {}; down {}", Settings::of(up), Settings::of(down))
            }
            _ => self.settings().to_string(),
        }
    }
}

/// Locks `mutex`, which no code panics while holding.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A tenth of a second at the rate, at least one byte; 128 KiB unlimited
/// (what a later limit would start with).
pub fn default_burst(limit: Limit) -> u64 {
    match limit {
        Limit::Unlimited => 128 * 1024,
        Limit::Rate(rate) => ((rate.bytes_per_sec() / 10.0) as u64).max(1),
    }
}

/// What the live controls need to know of the run.
pub struct Run {
    pub adjuster: Arc<Adjuster>,
    pub forwarded: Arc<AtomicU64>,
    pub started: Instant,
    pub printer: Printer,
    pub rate_file: Option<PathBuf>,
}

/// Starts answering signals and remote control for `run`, registered as
/// spending from `share` if it does. The result
/// keeps the registration for remote control; drop it at the end. If the
/// control directory is unusable, says why once (unless `quiet`) and runs
/// without remote control.
pub fn start(run: Run, share: Option<String>, quiet: bool) -> anyhow::Result<Option<Registration>> {
    let pid = std::process::id();
    let control = match ControlDir::open() {
        Ok(dir) => Some(Arc::new(dir)),
        Err(err) => {
            if !quiet {
                run.printer
                    .line(&format!("shape: remote control is off: {err}"));
            }
            None
        }
    };
    let Run {
        adjuster,
        forwarded,
        started,
        printer,
        rate_file,
    } = run;
    let last_status = Mutex::new((started, 0u64));
    let handlers = Handlers {
        reload: rate_file.map(|path| {
            let (adjuster, printer) = (adjuster.clone(), printer.clone());
            Box::new(move || {
                let applied = RateFile::load(&path).and_then(|file| {
                    adjuster
                        .apply(&Request {
                            limit: Some(file.limit),
                            burst: file.burst,
                            paused: None,
                        })
                        .map_err(|err| err.to_string())
                });
                if let Err(why) = applied {
                    printer.line(&format!(
                        "shape: {}: {why}; settings unchanged",
                        path.display()
                    ));
                }
            }) as Box<dyn Fn() + Send>
        }),
        status: {
            let (adjuster, printer) = (adjuster.clone(), printer.clone());
            Box::new(move || {
                let now = Instant::now();
                let bytes = forwarded.load(Ordering::Relaxed);
                let mut last = lock(&last_status);
                let line = status_line(
                    bytes,
                    now - started,
                    bytes - last.1,
                    now - last.0,
                    &adjuster.describe(),
                );
                *last = (now, bytes);
                printer.line(&line);
            })
        },
        control: {
            let control = control.clone();
            Box::new(move || {
                if let Some(dir) = &control {
                    let apply =
                        |request: &Request| adjuster.apply(request).map_err(|err| err.to_string());
                    for refusal in dir.serve(pid, &apply, &|| adjuster.settings()) {
                        printer.line(&format!("shape: {refusal}"));
                    }
                }
            })
        },
        before_exit: {
            let control = control.clone();
            Box::new(move || {
                if let Some(dir) = &control {
                    dir.unregister(pid);
                }
            })
        },
    };
    // Answer first, publish second: a remote that finds the registration
    // sends SIGUSR2, whose default action would end the process.
    answer(handlers)?;
    let registration = match &control {
        Some(dir) => Some(dir.register(pid, share.as_deref())?),
        None => None,
    };
    Ok(registration)
}

/// Follows `schedule` from `started` on a thread of its own; entries at
/// offset zero are applied before this returns.
pub fn follow(schedule: Schedule, adjuster: Arc<Adjuster>, started: Instant) {
    let (now, later): (Vec<_>, Vec<_>) = schedule
        .0
        .into_iter()
        .partition(|(offset, _)| offset.is_zero());
    for (_, limit) in now {
        adjuster.set_limit(limit);
    }
    std::thread::spawn(move || {
        for (offset, limit) in later {
            std::thread::sleep((started + offset).saturating_duration_since(Instant::now()));
            adjuster.set_limit(limit);
        }
    });
}

/// The SIGUSR1 line: bytes so far, time so far, the rate since the last
/// such line (or the start), and the settings.
fn status_line(
    bytes: u64,
    elapsed: std::time::Duration,
    recent: u64,
    over: std::time::Duration,
    settings: &str,
) -> String {
    let rate = if over.is_zero() {
        0.0
    } else {
        recent as f64 / over.as_secs_f64()
    };
    format!(
        "shape: {bytes} bytes ({}) in {:.3} s, {}/s now; {settings}",
        human_bytes(bytes),
        elapsed.as_secs_f64(),
        human_rate(rate)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_default_burst_is_a_tenth_of_a_second() {
        assert_eq!(default_burst(Limit::per_second(5 << 20)), 524_288);
        assert_eq!(default_burst(Limit::per_second(4)), 1);
        assert_eq!(default_burst(Limit::Unlimited), 131_072);
    }

    #[test]
    fn status_lines_say_bytes_time_rate_and_settings() {
        let settings = Settings {
            limit: Limit::per_second(1 << 20),
            burst: 102_400,
            paused: false,
        };
        assert_eq!(
            status_line(
                3 << 20,
                Duration::from_secs(3),
                1 << 20,
                Duration::from_secs(1),
                &settings.to_string()
            ),
            "shape: 3145728 bytes (3.00 MiB) in 3.000 s, 1.00 MiB/s now; rate 1.00 MiB/s, burst 100.00 KiB"
        );
    }

    #[test]
    fn changes_reach_every_bucket_and_every_living_follower() {
        let kib = |n: u64| Limit::per_second(n << 10);
        let up = Arc::new(crate::share::own(kib(64), 1000).unwrap());
        let down = Arc::new(crate::share::own(kib(1024), 1000).unwrap());
        let adjuster = Adjuster::over(vec![up.clone(), down.clone()], true);
        let changes = Arc::new(AtomicU64::new(0));
        adjuster.on_change({
            let changes = changes.clone();
            Box::new(move || {
                changes.fetch_add(1, Ordering::SeqCst);
            })
        });
        assert_eq!(
            adjuster.describe(),
            "up rate 64.00 KiB/s, burst 1000 B; down rate 1.00 MiB/s, burst 1000 B"
        );
        let follower = adjuster.follower(1).unwrap();
        assert_eq!(follower.limit(), kib(1024), "made with the settings now");
        let gone = adjuster.follower(0).unwrap();
        drop(gone);
        adjuster
            .apply(&Request {
                limit: Some(kib(8)),
                paused: Some(true),
                ..Request::default()
            })
            .unwrap();
        for bucket in [&up, &down, &follower] {
            assert_eq!(bucket.limit(), kib(8));
            assert!(bucket.paused());
        }
        assert_eq!(adjuster.describe(), "rate 8.00 KiB/s, burst 1000 B, paused");
        assert_eq!(changes.load(Ordering::SeqCst), 1);
        assert_eq!(
            lock(&adjuster.followers).len(),
            1,
            "the dropped one is gone"
        );
    }

    #[test]
    fn a_burst_never_set_follows_the_rate() {
        let bucket = Arc::new(crate::share::own(Limit::Unlimited, 10).unwrap());
        let adjuster = Adjuster::new(bucket.clone(), false);
        let mib = Limit::per_second(1 << 20);
        adjuster.set_limit(mib);
        assert_eq!(bucket.burst(), 104_857);
        adjuster
            .apply(&Request {
                burst: Some(5000),
                ..Request::default()
            })
            .unwrap();
        adjuster.set_limit(Limit::Unlimited);
        assert_eq!(bucket.burst(), 5000);
    }

    #[test]
    fn a_burst_no_bucket_can_take_refuses_the_whole_request() {
        let up = Arc::new(crate::share::own(Limit::per_second(1000), 100).unwrap());
        let down = Arc::new(crate::share::own(Limit::per_second(1000), 100).unwrap());
        let adjuster = Adjuster::over(vec![up.clone(), down.clone()], true);
        let follower = adjuster.follower(0).unwrap();
        for burst in [0, crate::bucket::MAX_BURST + 1] {
            let refused = adjuster.apply(&Request {
                limit: Some(Limit::per_second(5000)),
                burst: Some(burst),
                paused: Some(true),
            });
            assert_eq!(refused, Err(InvalidBurst(burst)));
            for bucket in [&up, &down, &follower] {
                assert_eq!(
                    (bucket.limit(), bucket.burst(), bucket.paused()),
                    (Limit::per_second(1000), 100, false),
                    "nothing changed"
                );
            }
        }
    }
}
