//! A member's two threads. The planner steps the [`Leases`] on time
//! and on Redis's answers, and sets the local bucket as it says. The
//! courier makes the Redis calls, one at a time, on one connection that it
//! opens again only when it broke. Only the courier ever waits on Redis,
//! so a Redis that hangs holds up no decision: the planner still pauses
//! the bucket when the leases run out, applies the fallback when a call
//! fails, and leaves within [`LEAVE_WITHIN`] whatever Redis does.

use super::connection::Node;
use super::plan::{Ask, Event, LeaseReply, Leases, Local, RedisFailure, Step};
use super::store::Store;
use super::url::RedisShare;
use shape_bucket::{Clock, Limit, MonotonicClock};
use shape_leaves::bucket::Bucket;
use shape_leaves::say::Printer;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a leaving member waits for Redis to take its unused tokens
/// back; past that it leaves them.
pub const LEAVE_WITHIN: Duration = Duration::from_millis(200);

/// What reaches the planner.
enum Note {
    LeaseReply(Result<LeaseReply, RedisFailure>),
    GaveBack,
    Leave,
}

/// What the courier is asked to do.
enum CourierTask {
    Lease(Ask),
    GiveBack(u64),
}

/// A shape's place on a fleet's share: leasing goes on while it lives;
/// leaving gives back what is unused.
pub struct Member {
    leaving: Leaving,
    /// The share's limit and burst, as the planner last heard them.
    share_settings: Arc<Mutex<(Limit, u64)>>,
}

/// What makes a member leave its share from any thread (the one that
/// answers SIGTERM, say), once, whoever asks first: a shape ended by
/// SIGTERM was forgotten only at its deadline, two lease times and a
/// second after its last call, and held its part until then.
#[derive(Clone)]
pub struct Leaving {
    inbox: Sender<Note>,
    planner: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl Leaving {
    /// Stops leasing and gives back what was leased and not spent, if
    /// Redis takes it within [`LEAVE_WITHIN`]; returns when that is done.
    pub fn leave(&self) {
        let _ = self.inbox.send(Note::Leave);
        let planner = shape_leaves::lock::lock(&self.planner).take();
        if let Some(planner) = planner {
            let _ = planner.join();
        }
    }
}

/// Who this member is, where, and what it tells the user.
pub struct Identity {
    pub share: RedisShare,
    /// This member's name in the share: host, PID and a random part.
    pub id: String,
    pub say: Option<Printer>,
}

impl Member {
    /// Starts leasing for `bucket` as `plan` says, with `store` already
    /// connected, and `asked` the call the plan asked for last.
    pub fn start(
        identity: Identity,
        plan: Leases,
        bucket: Arc<Bucket>,
        mut store: Store,
        asked: Option<Ask>,
    ) -> std::io::Result<Member> {
        let (inbox, notes) = mpsc::channel();
        let (jobs, work) = mpsc::channel();
        if let Some(ask) = asked {
            let _ = jobs.send(CourierTask::Lease(ask));
        }
        let courier = Courier {
            share: identity.share.clone(),
            id: identity.id,
            known: store.cluster_nodes(),
            store: Some(store),
        };
        let answers = inbox.clone();
        let held = plan.held();
        let share_settings = Arc::new(Mutex::new((held.limit, held.burst)));
        std::thread::Builder::new()
            .name("fleet-redis".into())
            .spawn(move || courier.run(work, answers))?;
        let planner = Planner {
            plan,
            bucket,
            say: identity.say,
            share: identity.share,
            jobs,
            share_settings: share_settings.clone(),
        };
        let planner = std::thread::Builder::new()
            .name("fleet".into())
            .spawn(move || planner.run(notes))?;
        Ok(Member {
            leaving: Leaving {
                inbox,
                planner: Arc::new(Mutex::new(Some(planner))),
            },
            share_settings,
        })
    }

    /// The whole share's limit and burst (this member spends a part).
    pub fn share_settings(&self) -> (Limit, u64) {
        *shape_leaves::lock::lock(&self.share_settings)
    }

    /// Stops leasing and gives back what was leased and not spent, if
    /// Redis takes it within [`LEAVE_WITHIN`].
    pub fn leave(self) {
        self.leaving.leave();
    }

    /// What makes this member leave from another thread.
    pub fn leaving(&self) -> Leaving {
        self.leaving.clone()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.leaving.leave();
    }
}

/// The bucket as the plan sees it.
pub fn local(bucket: &Bucket) -> Local {
    let available = bucket.available();
    Local {
        granted: bucket.granted().unwrap_or(0),
        in_hand: available.max(0) as u64,
        waiting: available < 0,
    }
}

/// Sets `bucket` as `step` says, and says its line.
pub fn apply(bucket: &Bucket, step: &Step, say: Option<&Printer>, share: &RedisShare) {
    if let Some(setting) = step.set {
        // Pausing first and resuming last: the bucket never runs on the
        // new rate before it may.
        if setting.paused && !bucket.paused() {
            bucket.set_paused(true);
        }
        if bucket.limit_and_burst() != (setting.limit, setting.burst) {
            // The burst comes from the share's settings, which the script
            // keeps valid; a refused one leaves the old one in force.
            let _ = bucket.set(setting.limit, setting.burst);
        }
        if !setting.paused && bucket.paused() {
            bucket.set_paused(false);
        }
    }
    if let (Some(line), Some(say)) = (&step.say, say) {
        say.line(&format!("shape: share {share}: {line}"));
    }
}

struct Planner {
    plan: Leases,
    bucket: Arc<Bucket>,
    say: Option<Printer>,
    share: RedisShare,
    jobs: Sender<CourierTask>,
    /// Where the share's settings are kept for [`Member::share_settings`].
    share_settings: Arc<Mutex<(Limit, u64)>>,
}

impl Planner {
    fn run(mut self, notes: Receiver<Note>) {
        let clock = MonotonicClock;
        let mut event = Event::Tick;
        loop {
            let step = self.step(event);
            let wait = step.wake.saturating_sub(clock.now());
            event = match notes.recv_timeout(Duration::from_nanos(wait)) {
                Ok(Note::LeaseReply(Ok(answer))) => Event::Answered(answer),
                Ok(Note::LeaseReply(Err(failure))) => Event::Failed(failure),
                Ok(Note::GaveBack) | Err(RecvTimeoutError::Timeout) => Event::Tick,
                Ok(Note::Leave) | Err(RecvTimeoutError::Disconnected) => break,
            };
        }
        self.leave(&notes);
    }

    fn step(&mut self, event: Event) -> Step {
        let step = self
            .plan
            .step(MonotonicClock.now(), local(&self.bucket), event);
        apply(&self.bucket, &step, self.say.as_ref(), &self.share);
        let held = self.plan.held();
        *shape_leaves::lock::lock(&self.share_settings) = (held.limit, held.burst);
        if let Some(ask) = step.ask {
            let _ = self.jobs.send(CourierTask::Lease(ask));
        }
        step
    }

    /// Waits, within [`LEAVE_WITHIN`] in all, for the lease call in flight
    /// (its tokens are ours to give back) and then for Redis to take back
    /// what is unused.
    fn leave(mut self, notes: &Receiver<Note>) {
        // Nothing more is spent: what is given back stays unspent.
        self.bucket.set_paused(true);
        let deadline = std::time::Instant::now() + LEAVE_WITHIN;
        let left = || deadline.saturating_duration_since(std::time::Instant::now());
        if self.plan.asking() {
            match notes.recv_timeout(left()) {
                Ok(Note::LeaseReply(Ok(answer))) => {
                    let now = MonotonicClock.now();
                    self.plan
                        .step(now, local(&self.bucket), Event::Answered(answer));
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
        if !self.plan.up() {
            return;
        }
        let unused = self.plan.unused(local(&self.bucket).granted);
        if self.jobs.send(CourierTask::GiveBack(unused)).is_ok() {
            while let Ok(note) = notes.recv_timeout(left()) {
                if matches!(note, Note::GaveBack) {
                    break;
                }
            }
        }
    }
}

struct Courier {
    share: RedisShare,
    id: String,
    /// `None` after the connection broke, until it is opened again.
    store: Option<Store>,
    /// The nodes of the share's cluster when last connected: to connect
    /// through when the node of the address is the one that failed.
    known: Vec<Node>,
}

impl Courier {
    fn run(mut self, work: Receiver<CourierTask>, answers: Sender<Note>) {
        for job in work {
            let note = match job {
                CourierTask::Lease(ask) => {
                    Note::LeaseReply(self.call(|store, id| store.lease(id, &ask)))
                }
                CourierTask::GiveBack(unused) => {
                    let _ = self.call(|store, id| store.give_back(id, unused));
                    Note::GaveBack
                }
            };
            if answers.send(note).is_err() {
                return;
            }
        }
    }

    /// Makes one call, connecting first if need be; a call that broke the
    /// connection drops it.
    fn call<T>(
        &mut self,
        call: impl FnOnce(&mut Store, &str) -> Result<T, super::StoreError>,
    ) -> Result<T, RedisFailure> {
        if self.store.is_none() {
            let mut store =
                Store::connect_member(&self.share, &self.known).map_err(|err| err.failure())?;
            let nodes = store.cluster_nodes();
            if !nodes.is_empty() {
                self.known = nodes;
            }
            self.store = Some(store);
        }
        let store = self.store.as_mut().expect("connected above");
        call(store, &self.id).map_err(|err| {
            if err.broke() {
                self.store = None;
            }
            err.failure()
        })
    }
}
