//! Changes the settings of a running shape's buckets, whoever asks, and
//! owns one rule: a burst the user never set follows the rate (a tenth of
//! a second of it), whoever changes the rate.

use super::protocol::{Request, Settings, apply};
use super::share::Bucket;
use crate::lock::lock;
use shape_bucket::{InvalidBurst, Limit, check_burst};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

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
    pub fn follower(&self, index: usize) -> Result<Arc<Bucket>, InvalidBurst> {
        let mut followers = lock(&self.followers);
        let model = &self.buckets[index];
        let bucket = Arc::new(super::share::own(model.limit(), model.burst())?);
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

/// A tenth of a second at the rate, at least one byte; 128 KiB unlimited
/// (what a later limit would start with).
pub fn default_burst(limit: Limit) -> u64 {
    match limit {
        Limit::Unlimited => 128 * 1024,
        Limit::Rate(rate) => ((rate.bytes_per_sec() / 10.0) as u64).max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn the_default_burst_is_a_tenth_of_a_second() {
        assert_eq!(default_burst(Limit::per_second(5 << 20)), 524_288);
        assert_eq!(default_burst(Limit::per_second(4)), 1);
        assert_eq!(default_burst(Limit::Unlimited), 131_072);
    }

    #[test]
    fn changes_reach_every_bucket_and_every_living_follower() {
        let kib = |n: u64| Limit::per_second(n << 10);
        let up = Arc::new(crate::control::share::own(kib(64), 1000).unwrap());
        let down = Arc::new(crate::control::share::own(kib(1024), 1000).unwrap());
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
        let bucket = Arc::new(crate::control::share::own(Limit::Unlimited, 10).unwrap());
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
        let up = Arc::new(crate::control::share::own(Limit::per_second(1000), 100).unwrap());
        let down = Arc::new(crate::control::share::own(Limit::per_second(1000), 100).unwrap());
        let adjuster = Adjuster::over(vec![up.clone(), down.clone()], true);
        let follower = adjuster.follower(0).unwrap();
        for burst in [0, shape_bucket::MAX_BURST + 1] {
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
