//! Changes the settings of a running shape's buckets, whoever asks, and
//! owns one rule: a burst the user never set follows the rate (a tenth of
//! a second of it, or one record), whoever changes the rate. Whether it
//! was set is the shape's to know, or a share's, kept in its file for
//! every shape on it and `--remote share:`.

use super::protocol::Request;
use shape_bucket::{InvalidBurst, Limit};
use shape_impair::conditions::Conditions;
use shape_leaves::bucket::{Adjustment, Settings, apply};
use shape_leaves::bucket::{BURST_FOLLOWS_RATE, Bucket};
use shape_leaves::chunk::default_burst;
use shape_leaves::counting::Counting;
use shape_leaves::lock::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Changes the settings of the running shape's buckets: one for a copy, a
/// proxy's two directions, and the buckets a proxy makes for each
/// connection with `--per-connection`.
pub struct Adjuster {
    /// What every change applies to; the first is what answers report.
    buckets: Vec<Arc<Bucket>>,
    /// What the buckets' tokens stand for.
    counting: Counting,
    /// Buckets made from the settings while running, each with the index
    /// of the bucket it follows, reached while they live. The lock also
    /// keeps a change from falling between making one and registering it.
    followers: Mutex<Vec<(usize, Weak<Bucket>)>>,
    /// True until someone sets a burst, for buckets of the shape's own; a
    /// share keeps its own flag.
    burst_follows_rate: AtomicBool,
    /// Called after each change, so that those that do not sleep on the
    /// buckets (a proxy's poll loop, `--exec`'s loops) re-time their waits.
    on_change: Mutex<Vec<Box<dyn Fn() + Send>>>,
    /// The delay, jitter and faults that changes may also retune.
    conditions: Option<Arc<Conditions>>,
    /// What the mode adds to a status line (a UDP link's datagrams).
    report: Option<Box<dyn Fn() -> String + Send + Sync>>,
    /// A proxy's HTTP rule, which changes may also replace.
    rule: Option<Box<dyn RuleControl>>,
}

/// A rule a running shape holds beside its buckets and conditions, which
/// `--remote` replaces: a proxy's HTTP rule.
pub trait RuleControl: Send + Sync {
    /// Refuses the rule `flags` give (as their names, without `--`, and
    /// values), in words, if it cannot be put in force.
    fn check(&self, flags: &[(String, String)]) -> Result<(), String>;
    /// Puts the rule `flags` give in force: one [`RuleControl::check`]
    /// let pass.
    fn change(&self, flags: &[(String, String)]);
    /// The rule in force and its counts, in words; empty if none is.
    fn describe(&self) -> String;
}

impl Adjuster {
    /// An adjuster of `bucket`, whose tokens stand for `counting`.
    pub fn new(bucket: Arc<Bucket>, counting: Counting, burst_was_set: bool) -> Adjuster {
        Adjuster::over(vec![bucket], counting, burst_was_set)
    }

    /// An adjuster of several buckets, changed together.
    pub fn over(buckets: Vec<Arc<Bucket>>, counting: Counting, burst_was_set: bool) -> Adjuster {
        assert!(!buckets.is_empty(), "an adjuster needs a bucket");
        Adjuster {
            buckets,
            counting,
            followers: Mutex::new(Vec::new()),
            burst_follows_rate: AtomicBool::new(!burst_was_set),
            on_change: Mutex::new(Vec::new()),
            conditions: None,
            report: None,
            rule: None,
        }
    }

    /// The same adjuster, retuning `conditions` when a change asks.
    pub fn retuning(mut self, conditions: Arc<Conditions>) -> Adjuster {
        self.conditions = Some(conditions);
        self
    }

    /// The same adjuster, with what `report` says at the end of every
    /// status line.
    pub fn reporting(mut self, report: Box<dyn Fn() -> String + Send + Sync>) -> Adjuster {
        self.report = Some(report);
        self
    }

    /// The same adjuster, replacing `rule` when a change asks.
    pub fn ruling(mut self, rule: Box<dyn RuleControl>) -> Adjuster {
        self.rule = Some(rule);
        self
    }

    /// What the buckets' tokens stand for.
    pub fn counting(&self) -> Counting {
        self.counting
    }

    /// Calls `notify` after every change from now on, as well as those
    /// given before.
    pub fn on_change(&self, notify: Box<dyn Fn() + Send>) {
        lock(&self.on_change).push(notify);
    }

    /// A fresh bucket with the settings bucket `index` has now, which later
    /// changes reach too while it lives.
    pub fn follower(&self, index: usize) -> Result<Arc<Bucket>, InvalidBurst> {
        let mut followers = lock(&self.followers);
        let model = &self.buckets[index];
        let bucket = Arc::new(shape_leaves::bucket::own(model.limit(), model.burst())?);
        bucket.set_paused(model.paused());
        followers.retain(|(_, follower)| follower.strong_count() > 0);
        followers.push((index, Arc::downgrade(&bucket)));
        Ok(bucket)
    }

    /// Applies `request`, read as the buckets count. A request that does
    /// not fit (bytes when records are counted, a burst no bucket can
    /// take) is refused whole, and nothing changes.
    pub fn apply(&self, request: &Request) -> Result<(), String> {
        let change = request.adjustment(self.counting)?;
        let way_limits = [
            request.way_limit(0, self.counting)?,
            request.way_limit(1, self.counting)?,
        ];
        if way_limits.iter().any(Option::is_some) && self.buckets.len() != 2 {
            return Err(
                "--rate-up and --rate-down change a proxy's or --exec's ways; this shape has one \
                 (--rate)"
                    .into(),
            );
        }
        let rule = match (&self.rule, request.http.is_empty()) {
            (_, true) => None,
            (Some(rule), false) => Some(rule),
            (None, false) => {
                return Err("only a proxy started with an HTTP fault (--http-status, \
                            --http-delay, ...) changes its HTTP rule"
                    .into());
            }
        };
        if let Some(rule) = rule {
            rule.check(&request.http)?;
        }
        if !request.retune.is_empty() {
            let Some(conditions) = &self.conditions else {
                return Err("only a copy or a proxy changes delay, jitter or faults".into());
            };
            conditions.check(&request.retune)?;
            // Refused now, before the conditions change, as adjust would
            // refuse it after: a refused request changes nothing.
            if let Some(burst) = change.burst {
                shape_bucket::check_burst(burst).map_err(|err| err.to_string())?;
            }
            // Before the buckets, whose change wakes those who retune.
            conditions.change(&request.retune);
        }
        self.adjust(change)?;
        if let Some(rule) = rule {
            rule.change(&request.http);
        }
        for (way, limit) in way_limits.into_iter().enumerate() {
            if let Some(limit) = limit {
                // One way's rate (`--rate-up`, `--rate-down`), with the
                // burst that follows it unless one was set.
                let burst = self
                    .burst_follows()
                    .then(|| default_burst(limit, self.counting));
                let change = Adjustment {
                    limit: Some(limit),
                    burst,
                    paused: None,
                };
                self.change_way(way, &change);
            }
        }
        self.tell_watchers();
        Ok(())
    }

    /// Changes the limit alone, as a timetable does.
    pub fn set_limit(&self, limit: Limit) {
        // A limit, and the burst that may follow it, are always valid.
        let _ = self.adjust(Adjustment {
            limit: Some(limit),
            ..Adjustment::default()
        });
        self.tell_watchers();
    }

    /// Whether a new rate brings its default burst: until a burst is set,
    /// by anyone on a share.
    fn burst_follows(&self) -> bool {
        match self.buckets[0].cell().shared_burst_rule() {
            Some(flags) => flags.load(Ordering::Acquire) & BURST_FOLLOWS_RATE != 0,
            None => self.burst_follows_rate.load(Ordering::Relaxed),
        }
    }

    /// Applies `change` to every bucket, giving a new rate its default
    /// burst unless a burst was ever set. Those who watch are told by the
    /// caller, once all is changed.
    fn adjust(&self, mut change: Adjustment) -> Result<(), String> {
        if let Some(burst) = change.burst {
            shape_bucket::check_burst(burst).map_err(|err| err.to_string())?;
            self.burst_follows_rate.store(false, Ordering::Relaxed);
            if let Some(flags) = self.buckets[0].cell().shared_burst_rule() {
                flags.fetch_and(!BURST_FOLLOWS_RATE, Ordering::AcqRel);
            }
        } else if self.burst_follows() {
            change.burst = change
                .limit
                .map(|limit| default_burst(limit, self.counting));
        }
        // The burst was checked above: no bucket refuses the change.
        let mut followers = lock(&self.followers);
        for bucket in &self.buckets {
            apply(bucket, &change)?;
        }
        followers.retain(|(_, follower)| match follower.upgrade() {
            Some(bucket) => apply(&bucket, &change).is_ok(),
            None => false,
        });
        Ok(())
    }

    /// Sets bucket `index` alone (one way, as a trace does), and those
    /// that follow it: `Some` a limit and its burst, resumed; `None`
    /// paused.
    pub fn set_way(&self, index: usize, setting: shape_impair::trace::follow::WindowLimit) {
        self.change_way(index, &shape_impair::trace::follow::adjustment(setting));
        self.tell_watchers();
    }

    /// Applies `change` to bucket `index` alone and those that follow it.
    fn change_way(&self, index: usize, change: &Adjustment) {
        let mut followers = lock(&self.followers);
        if let Some(bucket) = self.buckets.get(index) {
            let _ = apply(bucket, change);
        }
        followers.retain(|(way, follower)| match follower.upgrade() {
            Some(bucket) => *way != index || apply(&bucket, change).is_ok(),
            None => false,
        });
    }

    /// Tells those who watch the settings that they changed.
    fn tell_watchers(&self) {
        for notify in lock(&self.on_change).iter() {
            notify();
        }
    }

    /// The buckets every change applies to, in the order given.
    pub fn buckets(&self) -> &[Arc<Bucket>] {
        &self.buckets
    }

    /// The settings of the first bucket: what an answer to `--remote`
    /// reports.
    pub fn settings(&self) -> Settings {
        Settings::of(&self.buckets[0], self.counting)
    }

    /// The settings of the way down, where it has its own that differ
    /// from the way up's ([`Adjuster::settings`]): what an answer to
    /// `--remote` adds, so that both ways are said.
    pub fn settings_down(&self) -> Option<Settings> {
        let of = |bucket| Settings::of(bucket, self.counting);
        match self.buckets.as_slice() {
            [up, down] if of(up) != of(down) => Some(of(down)),
            _ => None,
        }
    }

    /// The delay, jitter and faults in force, in words (empty if none):
    /// what an answer to `--remote` adds to the settings.
    pub fn conditions_in_force(&self) -> String {
        let conditions = self
            .conditions
            .as_ref()
            .map(|conditions| conditions.now().describe(self.buckets.len() == 2))
            .unwrap_or_default();
        let rule = self.rule.as_ref().map(|rule| rule.describe());
        [Some(conditions), rule]
            .into_iter()
            .flatten()
            .filter(|said| !said.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The settings for a status line: of the one bucket, or of a proxy's
    /// two directions if they differ.
    pub fn describe(&self) -> String {
        let of = |bucket| Settings::of(bucket, self.counting);
        let settings = match self.buckets.as_slice() {
            [up, down] if of(up) != of(down) => format!("up {}; down {}", of(up), of(down)),
            _ => self.settings().to_string(),
        };
        let rule = self.rule.as_ref().map(|rule| rule.describe());
        let report = self.report.as_ref().map(|report| report());
        [Some(settings), report, rule]
            .into_iter()
            .flatten()
            .filter(|said| !said.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_leaves::bucket::own;
    use std::sync::atomic::AtomicU64;

    fn request(rate: Option<&str>, burst: Option<&str>, paused: Option<bool>) -> Request {
        Request {
            rate: rate.map(|text| text.parse().unwrap()),
            burst: burst.map(|text| text.parse().unwrap()),
            paused,
            ..Request::default()
        }
    }

    #[test]
    fn changes_reach_every_bucket_and_every_living_follower() {
        let kib = |n: u64| Limit::per_second(n << 10);
        let up = Arc::new(own(kib(64), 1000).unwrap());
        let down = Arc::new(own(kib(1024), 1000).unwrap());
        let adjuster = Adjuster::over(vec![up.clone(), down.clone()], Counting::Bytes, true);
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
            .apply(&request(Some("8KiB"), None, Some(true)))
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
        let bucket = Arc::new(own(Limit::Unlimited, 10).unwrap());
        let adjuster = Adjuster::new(bucket.clone(), Counting::Bytes, false);
        adjuster.set_limit(Limit::per_second(1 << 20));
        assert_eq!(bucket.burst(), 104_857);
        adjuster.apply(&request(None, Some("5000"), None)).unwrap();
        adjuster.set_limit(Limit::Unlimited);
        assert_eq!(bucket.burst(), 5000);
    }

    #[test]
    fn a_request_is_read_as_the_buckets_count() {
        let bucket = Arc::new(own(Limit::per_second(1 << 20), 1 << 20).unwrap());
        let adjuster = Adjuster::new(bucket.clone(), Counting::Lines, false);
        adjuster
            .apply(&request(Some("30/min"), None, None))
            .unwrap();
        assert_eq!(bucket.limit(), Limit::per_second(1 << 19));
        assert_eq!(bucket.burst(), 1 << 20, "one line");
        let refused = adjuster.apply(&request(Some("5MiB"), None, None));
        assert!(refused.unwrap_err().contains("lines are counted"));
        assert_eq!(adjuster.describe(), "rate 30.00 lines/min, burst 1 line");
    }

    #[test]
    fn a_burst_no_bucket_can_take_refuses_the_whole_request() {
        let up = Arc::new(own(Limit::per_second(1000), 100).unwrap());
        let down = Arc::new(own(Limit::per_second(1000), 100).unwrap());
        let adjuster = Adjuster::over(vec![up.clone(), down.clone()], Counting::Bytes, true);
        let follower = adjuster.follower(0).unwrap();
        for burst in ["0", "4194305T"] {
            let refused = adjuster.apply(&request(Some("5000"), Some(burst), Some(true)));
            assert!(
                refused
                    .unwrap_err()
                    .starts_with("burst must be 1 byte to 4 EiB"),
                "{burst}"
            );
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
