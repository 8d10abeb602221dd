//! One limit for a fleet: shapes on many machines spend from one share kept
//! in Redis (`--share redis://host/NAME`).
//!
//! Redis is not asked for every chunk. A shape spends from a bucket of its
//! own, with the share's rate and burst, and a thread of its own keeps that
//! spending covered by *leases*: tokens that an atomic script grants
//! against the share's GCRA on Redis's clock. A lease is about a tenth of a
//! second of what this shape spends, capped at its part of the burst; the
//! next is asked for when half of the last is spent, so the flow does not
//! wait for Redis; while spending runs ahead of the leases, the local
//! bucket is paused. Every reply also carries the share's settings, so a
//! change made from any machine reaches every shape within a lease.
//! Unused tokens are given back on exit.
//!
//! If Redis goes away, the transfer goes on as `--share-fallback` says
//! (at the last known rate per shape, held, or unlimited), said once;
//! the thread reconnects with a growing pause and says when Redis is back.

mod store;
mod url;

pub use store::{Held, StoreError};
pub use url::{RedisShare, hide_password};

use super::share::{Bucket, own_empty};
use crate::counting::Counting;
use crate::progress::Printer;
use clap::ValueEnum;
use shape_bucket::Limit;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use store::{Lease, Store};

/// What spending from a fleet's share does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Fallback {
    /// Go on at the last known rate per shape (the share's rate over the
    /// shapes on it).
    #[default]
    Last,
    /// Hold the data until Redis is back.
    Block,
    /// Go on without a limit until Redis is back.
    Open,
}

/// Why a fleet's share could not be used.
#[derive(Debug, thiserror::Error)]
#[error("share {share}: {why}")]
pub struct FleetError {
    /// The address, its password hidden.
    share: String,
    why: String,
}

impl FleetError {
    fn new(share: &RedisShare, why: impl ToString) -> FleetError {
        FleetError {
            share: share.to_string(),
            why: crate::message::one_line(&why.to_string()),
        }
    }
}

/// How often an idle member asks for the share's settings.
const POLL: Duration = Duration::from_millis(100);
/// The time a lease is sized to last at this shape's pace.
const LEASE_TIME: f64 = 0.1;
/// The longest pause between attempts to reach Redis again.
const MOST_BACKOFF: Duration = Duration::from_secs(5);

/// What a shape joining a fleet's share brings: its settings, and whether
/// the user gave them.
pub struct Joining {
    pub limit: Limit,
    pub burst: u64,
    pub counting: Counting,
    pub settings_given: bool,
    pub fallback: Fallback,
}

/// A shape's place on a fleet's share: the lease thread runs while it
/// lives; [`Member::leave`] gives unused tokens back.
pub struct Member {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Joins `share`: the share's settings win if other shapes are on it (the
/// notice returned says so if the user's differ); nobody on it, this
/// shape's settings start it afresh. Returns the bucket to spend from.
pub fn join(
    share: &RedisShare,
    joining: &Joining,
    say: Option<Printer>,
) -> Result<(Arc<Bucket>, Member, Option<String>), FleetError> {
    let fail = |why: StoreError| FleetError::new(share, why);
    let mut store = Store::connect(share).map_err(fail)?;
    let ours = Held {
        limit: joining.limit,
        burst: joining.burst,
        paused: false,
        counting: joining.counting,
        generation: 0,
    };
    let mut notice = None;
    let held = match store.held().map_err(fail)? {
        Some(held) if held.counting != ours.counting => {
            return Err(fail(StoreError::Counts {
                theirs: held.counting.units(),
                ours: ours.counting.units(),
            }));
        }
        Some(_) if store.members().map_err(fail)? == 0 => {
            if joining.settings_given {
                store.replace(&ours).map_err(fail)?;
            }
            store.held().map_err(fail)?.unwrap_or(ours)
        }
        Some(held) => {
            let differs = (held.limit, held.burst) != (ours.limit, ours.burst);
            if joining.settings_given && differs {
                notice = Some(format!(
                    "share {share} is at {}; using that (change it with --remote share:{share})",
                    describe(&held)
                ));
            }
            held
        }
        None => ours,
    };
    // Leases follow what the bucket granted: its spent counter also moves
    // by what it throws away after an idle spell, which no lease should pay.
    let bucket = Arc::new(
        own_empty(held.limit, held.burst)
            .map_err(|err| FleetError::new(share, err))?
            .counting_grants(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut leaser = Leaser {
        share: share.clone(),
        id: format!(
            "{}:{}:{:x}",
            hostname(),
            std::process::id(),
            fastrand::u64(..)
        ),
        store: Some(store),
        bucket: bucket.clone(),
        start: ours,
        held,
        fallback: joining.fallback,
        say,
        members: 1,
        baseline: bucket.granted().unwrap_or(0),
        leased: 0,
        pending: None,
        pace: Pace::new(),
        user_paused: held.paused,
        stop: stop.clone(),
    };
    // The first lease before the first byte, so that the copy starts at
    // once.
    leaser.ask(true);
    leaser.gate();
    let thread = std::thread::Builder::new()
        .name("fleet".into())
        .spawn(move || leaser.run())
        .map_err(|err| FleetError::new(share, err))?;
    Ok((
        bucket,
        Member {
            stop,
            thread: Some(thread),
        },
        notice,
    ))
}

impl Member {
    /// Stops leasing and gives back what was leased and not spent.
    pub fn leave(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// The lease thread's state.
struct Leaser {
    share: RedisShare,
    /// This member's name in the share: host, PID and a random part.
    id: String,
    /// `None` while Redis is unreachable.
    store: Option<Store>,
    bucket: Arc<Bucket>,
    /// This shape's own settings, which start the share if Redis lost it.
    start: Held,
    /// The share's settings, as last heard.
    held: Held,
    fallback: Fallback,
    say: Option<Printer>,
    /// Shapes on the share, as last heard.
    members: u64,
    /// The bucket's spending when leasing began.
    baseline: u64,
    /// Tokens leased and usable since then.
    leased: u64,
    /// A lease granted and not usable yet: its tokens, and from when.
    pending: Option<(u64, Instant)>,
    pace: Pace,
    /// Paused by the share's settings (`--remote share:... --pause`).
    user_paused: bool,
    stop: Arc<AtomicBool>,
}

impl Leaser {
    fn run(mut self) {
        let mut backoff = POLL;
        while !self.stop.load(Ordering::SeqCst) {
            if self.store.is_none() {
                match Store::connect(&self.share) {
                    Ok(store) => {
                        self.store = Some(store);
                        self.back_from_fallback();
                        backoff = POLL;
                    }
                    Err(_) => {
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(MOST_BACKOFF);
                        continue;
                    }
                }
            }
            self.ask(false);
            self.gate();
            std::thread::sleep(self.until_next());
        }
        self.give_back();
    }

    /// Tokens this shape's bucket has granted, modulo 2^64.
    fn granted(&self) -> u64 {
        // The bucket counts its grants from the start (see `join`).
        self.bucket.granted().unwrap_or(0)
    }

    /// Tokens leased and not yet spent (negative: spent ahead of leases).
    fn remaining(&self) -> i128 {
        let spent = self.granted().wrapping_sub(self.baseline);
        i128::from(self.leased) - i128::from(spent)
    }

    /// Credits a lease that has become usable, and asks for the next when
    /// half of what is leased is spent (or, idle, for the settings).
    fn ask(&mut self, first: bool) {
        if let Some((tokens, at)) = self.pending {
            if Instant::now() < at {
                return;
            }
            self.leased += tokens;
            self.pending = None;
        }
        let spent = self.granted().wrapping_sub(self.baseline);
        self.pace.note(spent);
        let size = self.lease_size();
        let want = if first || self.remaining() < i128::from(size / 2) {
            size
        } else {
            0
        };
        let Some(store) = &mut self.store else {
            return;
        };
        match store.lease(&self.id, want, &self.start) {
            Ok(lease) => self.heard(lease),
            Err(StoreError::Redis(err)) if err.is_io_error() || err.is_timeout() => {
                self.lost(&err.to_string())
            }
            Err(err) => self.lost(&err.to_string()),
        }
    }

    /// Takes in what a lease call answered.
    fn heard(&mut self, lease: Lease) {
        self.members = lease.members.max(1);
        if lease.held.generation != self.held.generation {
            let held = lease.held;
            // Settings from the share, checked by the script that holds
            // them; a burst it refused would leave the old one in force.
            let _ = self.bucket.set(held.limit, held.burst);
            self.user_paused = held.paused;
            self.held = held;
        }
        if lease.granted > 0 {
            let at = Instant::now() + lease.wait;
            if lease.wait.is_zero() {
                self.leased += lease.granted;
            } else {
                self.pending = Some((lease.granted, at));
            }
        }
    }

    /// Pauses the local bucket while the share is paused or spending runs
    /// ahead of the leases, and lets it go otherwise.
    fn gate(&self) {
        if self.store.is_none() {
            return;
        }
        let paused = self.user_paused || self.remaining() <= 0;
        if paused != self.bucket.paused() {
            self.bucket.set_paused(paused);
        }
    }

    /// About a tenth of a second of this shape's pace, at least a hundredth
    /// of a second of the share's rate and one unit, at most this shape's
    /// part of the burst.
    fn lease_size(&self) -> u64 {
        let share_rate = self
            .held
            .limit
            .rate()
            .map_or(f64::MAX, |r| r.bytes_per_sec());
        let least = (share_rate * 0.01).max(self.start.counting.tokens_per_unit() as f64);
        let pace = self
            .pace
            .per_second()
            .unwrap_or(share_rate / self.members as f64);
        let most = (self.held.burst as f64 / self.members as f64).max(least);
        (pace * LEASE_TIME).clamp(least, most).min(4e9) as u64
    }

    /// How long to sleep before looking again: until a pending lease is
    /// usable, or spending may need the next one, at most [`POLL`].
    fn until_next(&self) -> Duration {
        let mut next = POLL;
        if let Some((_, at)) = self.pending {
            next = next.min(at.saturating_duration_since(Instant::now()));
        }
        if let (Some(pace), Ok(remaining)) =
            (self.pace.per_second(), u64::try_from(self.remaining()))
        {
            let half = remaining.saturating_sub(self.lease_size() / 2) as f64;
            if pace > 0.0 {
                next = next.min(Duration::from_secs_f64(half / pace));
            }
        }
        next.max(Duration::from_millis(1))
    }

    /// Redis is gone: says so once, and spends as the fallback says.
    fn lost(&mut self, why: &str) {
        self.store = None;
        self.pending = None;
        let (limit, what) = match self.fallback {
            Fallback::Last => {
                let per_shape = self
                    .held
                    .limit
                    .rate()
                    .map(|rate| rate.bytes_per_sec() / self.members as f64)
                    .and_then(shape_bucket::Rate::from_bytes_per_sec)
                    .map_or(Limit::Unlimited, Limit::Rate);
                let shown = self.held.counting.show_limit(per_shape);
                (
                    per_shape,
                    format!("going on at {shown}, the last known rate per shape"),
                )
            }
            Fallback::Block => (self.held.limit, "holding the data until it is back".into()),
            Fallback::Open => (
                Limit::Unlimited,
                "going on without a limit until it is back".into(),
            ),
        };
        let _ = self.bucket.set(limit, self.held.burst);
        self.bucket.set_paused(self.fallback == Fallback::Block);
        self.say(&format!(
            "shape: share {}: Redis is unreachable ({}); {what}",
            self.share,
            crate::message::one_line(&why)
        ));
    }

    /// Redis is back: leasing starts afresh from what is spent now.
    fn back_from_fallback(&mut self) {
        self.baseline = self.granted();
        self.leased = 0;
        let _ = self.bucket.set(self.held.limit, self.held.burst);
        self.say(&format!("shape: share {}: Redis is back", self.share));
    }

    /// Gives back the tokens leased and not spent, and leaves the share.
    fn give_back(&mut self) {
        let unused = u64::try_from(self.remaining()).unwrap_or(0)
            + self.pending.map_or(0, |(tokens, _)| tokens);
        if let Some(store) = &mut self.store {
            let _ = store.give_back(&self.id, unused);
        }
    }

    fn say(&self, line: &str) {
        if let Some(say) = &self.say {
            say.line(line);
        }
    }
}

/// This shape's spending pace, measured over the last second or so.
struct Pace {
    last: Option<(Instant, u64)>,
    per_second: Option<f64>,
}

impl Pace {
    fn new() -> Pace {
        Pace {
            last: None,
            per_second: None,
        }
    }

    /// Takes note that `spent` tokens were spent in all by now.
    fn note(&mut self, spent: u64) {
        let now = Instant::now();
        if let Some((then, before)) = self.last {
            let seconds = (now - then).as_secs_f64();
            if seconds < 0.05 {
                return;
            }
            let recent = spent.saturating_sub(before) as f64 / seconds;
            // A moving average over about a second.
            let weight = seconds.min(1.0);
            self.per_second = Some(
                self.per_second
                    .map_or(recent, |old| old + (recent - old) * weight),
            );
        }
        self.last = Some((now, spent));
    }

    fn per_second(&self) -> Option<f64> {
        self.per_second
    }
}

/// Settings as `--status` and notices show them: as a local share's.
pub fn describe(held: &Held) -> String {
    super::protocol::Settings {
        limit: held.limit,
        burst: held.burst,
        paused: held.paused,
        counting: held.counting,
    }
    .to_string()
}

/// This machine's name, for members' names.
fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// The one-off commands on a fleet's share.
pub mod commands {
    use super::store::Store;
    use super::*;
    use crate::control::protocol::Request;

    /// `--status`: the settings, the shapes on the share, and what they
    /// spend together, over half a second.
    pub fn status(share: &RedisShare) -> Result<String, FleetError> {
        let fail = |why: StoreError| FleetError::new(share, why);
        let (mut store, held) = existing(share)?;
        let before = store.granted().map_err(fail)?;
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(500));
        let granted = store.granted().map_err(fail)?.saturating_sub(before);
        let members = store.members().map_err(fail)?;
        let per_unit = held.counting.tokens_per_unit() as f64;
        let used = granted as f64 / per_unit / started.elapsed().as_secs_f64();
        Ok(format!(
            "share {share}: {}; {members} shapes on it; in use {}",
            describe(&held),
            held.counting.show_rate(used)
        ))
    }

    /// `--remote share:redis://...`: changes the share for every shape on
    /// it, read as the share counts.
    pub fn change(share: &RedisShare, request: &Request) -> Result<String, FleetError> {
        let fail = |why: StoreError| FleetError::new(share, why);
        let (mut store, held) = existing(share)?;
        let change = request
            .adjustment(held.counting)
            .map_err(|why| FleetError::new(share, why))?;
        store
            .update(held.counting, change.limit, change.burst, change.paused)
            .map_err(fail)?;
        let now = store
            .held()
            .map_err(fail)?
            .ok_or_else(|| fail(StoreError::Missing))?;
        Ok(format!("share {share}: {}", describe(&now)))
    }

    /// A connection to `share`, which must exist, and its settings.
    fn existing(share: &RedisShare) -> Result<(Store, Held), FleetError> {
        let fail = |why: StoreError| FleetError::new(share, why);
        let mut store = Store::connect(share).map_err(fail)?;
        let held = store.held().map_err(fail)?;
        Ok((store, held.ok_or_else(|| fail(StoreError::Missing))?))
    }

    /// `--reset`: removes the share unless shapes are on it.
    pub fn reset(share: &RedisShare) -> Result<bool, FleetError> {
        let fail = |why: StoreError| FleetError::new(share, why);
        let mut store = Store::connect(share).map_err(fail)?;
        match store.members().map_err(fail)? {
            0 => store.remove().map_err(fail),
            n => Err(FleetError::new(
                share,
                format!("{n} running shapes are on it; stop them first"),
            )),
        }
    }
}
