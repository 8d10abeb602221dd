//! A swarm: hundreds or thousands of members of one share in a single
//! process, against a real redis-server, to measure what a share costs
//! Redis as it grows (`benches/fleet_swarm.sh`, and one size as a test).
//!
//! Each member is the real plan ([`Leases`]) and makes the real lease
//! calls ([`Store::lease`]) on the real clock; only its local bucket is a
//! model, with a reader that takes every token it is given. One thread
//! steps every member at the time its plan asks to be woken; a pool of
//! couriers, each with a connection of its own, makes the calls, as each
//! member's own courier would.

use super::Held;
use super::plan::{Ask, Event, LeaseReply, Leases, Local, RedisFailure, Setting};
use super::store::Store;
use super::url::RedisShare;
use shape_bucket::{Clock, Limit, MonotonicClock};
use shape_leaves::counting::Counting;
use shape_leaves::share::Fallback;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECOND: u64 = 1_000_000_000;
/// The share's rate: as in the measurements of real processes.
pub const RATE: u64 = 8 << 20;
/// How often the newcomer's spending is sampled.
const SAMPLE: u64 = SECOND / 20;
/// The newcomer has its part once it spends at this share of it over
/// [`PACE_WINDOW`].
const REACHED: f64 = 0.9;
const PACE_WINDOW: u64 = SECOND / 2;

/// What a run measured.
#[derive(Debug)]
pub struct Report {
    pub members: usize,
    /// The share's lease time as Redis last said it.
    pub lease_time: Duration,
    /// What the members spent together over the window, over the share.
    pub total: f64,
    /// What Redis leased over the window, over the share.
    pub leased: f64,
    /// The least and the most a member spent, over an even split.
    pub parts: (f64, f64),
    pub scripts_per_second: f64,
    pub commands_per_second: f64,
    /// Redis's CPU time over the window, over the window.
    pub redis_cpu: f64,
    /// How long a member that joined last took to spend at its part;
    /// `None` if it never did.
    pub newcomer: Option<Duration>,
}

impl Report {
    /// The report as a row of BENCHMARKS.md's table.
    pub fn row(&self) -> String {
        let newcomer = self.newcomer.map_or("never".into(), |took| {
            format!("{:.2} s", took.as_secs_f64())
        });
        format!(
            "| {} | {:.2} s | {:.4} ({:.4} leased) | {:.3} to {:.3} | {:.0} | {:.0} | {:.1}% | {} |",
            self.members,
            self.lease_time.as_secs_f64(),
            self.total,
            self.leased,
            self.parts.0,
            self.parts.1,
            self.scripts_per_second,
            self.commands_per_second,
            self.redis_cpu * 100.0,
            newcomer
        )
    }
}

/// One member: its plan, and a model of its bucket with a reader that
/// takes every token as it comes.
struct SwarmMember {
    id: String,
    plan: Leases,
    setting: Option<Setting>,
    /// Tokens the bucket handed out in all.
    granted: f64,
    /// When `granted` was brought up to date.
    counted_at: u64,
    /// The wake-up its plan asked for last; earlier ones in the heap are
    /// stale.
    wake: u64,
}

impl SwarmMember {
    fn new(id: String, now: u64) -> SwarmMember {
        SwarmMember {
            id,
            plan: Leases::new(settings(), Fallback::Block, now, 0),
            setting: None,
            granted: 0.0,
            counted_at: now,
            wake: now,
        }
    }

    /// Brings what the reader took up to `now`.
    fn spend(&mut self, now: u64) {
        if let Some(setting) = self.setting
            && !setting.paused
            && let Some(rate) = setting.limit.rate()
        {
            let seconds = now.saturating_sub(self.counted_at) as f64 / SECOND as f64;
            self.granted += rate.bytes_per_sec() * seconds;
        }
        self.counted_at = now;
    }

    fn local(&self) -> Local {
        Local {
            granted: self.granted as u64,
            in_hand: 0,
            waiting: true,
        }
    }
}

/// The settings every member brings: 8 MiB/s, a tenth of a second's
/// burst.
fn settings() -> Held {
    Held {
        limit: Limit::per_second(RATE),
        burst: RATE / 10,
        paused: false,
        counting: Counting::Bytes,
        generation: 0,
        follows: true,
    }
}

/// A lease call to make for member `.0`.
type SwarmCall = (usize, String, Ask);
/// Its answer.
type SwarmAnswer = (usize, Result<LeaseReply, RedisFailure>);

/// Starts `couriers` threads that make the calls queued on the returned
/// sender, each on its own connection to `share`.
fn couriers(
    share: &RedisShare,
    couriers: usize,
    answers: Sender<SwarmAnswer>,
) -> Sender<SwarmCall> {
    let (jobs, work) = mpsc::channel::<SwarmCall>();
    let work = Arc::new(Mutex::new(work));
    for _ in 0..couriers {
        let work = work.clone();
        let answers = answers.clone();
        let share = share.clone();
        std::thread::spawn(move || {
            let mut store = None;
            loop {
                let job = shape_leaves::lock::lock(&work).recv();
                let Ok((member, id, ask)) = job else { return };
                if store.is_none() {
                    store = Store::connect_member(&share, &[]).ok();
                }
                let answer = match store.as_mut() {
                    Some(connected) => connected.lease(&id, &ask).map_err(|err| {
                        if err.broke() {
                            store = None;
                        }
                        err.failure()
                    }),
                    None => Err(RedisFailure::Unreachable("cannot connect".into())),
                };
                if answers.send((member, answer)).is_err() {
                    return;
                }
            }
        });
    }
    jobs
}

/// Redis's counters that a run reads before and after its window.
#[derive(Debug, Clone, Copy)]
struct SwarmCounters {
    scripts: u64,
    commands: u64,
    cpu: f64,
    leased: u64,
}

fn counters(info: &mut redis::Connection, share: &RedisShare) -> SwarmCounters {
    let leased: Option<u64> = redis::cmd("HGET")
        .arg(format!("shape:{{{}}}:settings", share.name))
        .arg("granted")
        .query(info)
        .expect("HGET");
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .arg("cpu")
        .query(info)
        .expect("INFO");
    let mut counted = SwarmCounters {
        scripts: 0,
        commands: 0,
        cpu: 0.0,
        leased: leased.unwrap_or(0),
    };
    for line in text.lines() {
        if let Some(stat) = line.strip_prefix("cmdstat_") {
            let (command, fields) = stat.split_once(':').unwrap_or_default();
            let calls = fields
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))
                .and_then(|calls| calls.parse::<u64>().ok())
                .unwrap_or(0);
            if command != "info" {
                counted.commands += calls;
            }
            if command == "evalsha" || command == "eval" {
                counted.scripts += calls;
            }
        } else if let Some(seconds) = line
            .strip_prefix("used_cpu_sys:")
            .or_else(|| line.strip_prefix("used_cpu_user:"))
        {
            counted.cpu += seconds.trim().parse::<f64>().unwrap_or(0.0);
        }
    }
    counted
}

/// How a run goes.
pub struct SwarmRun {
    /// Members of the share.
    pub members: usize,
    /// Where the members reach the share (perhaps through a proxy).
    pub share: RedisShare,
    /// Where Redis's counters are read, directly.
    pub info: RedisShare,
    /// How long members take to join, one after another.
    pub joining: Duration,
    /// From the first join to the window.
    pub warm_up: Duration,
    /// What is measured.
    pub window: Duration,
    /// How long the newcomer is watched.
    pub newcomer_for: Duration,
    pub couriers: usize,
}

/// The swarm, stepped on one thread.
struct Swarm {
    members: Vec<SwarmMember>,
    wakes: BinaryHeap<Reverse<(u64, usize)>>,
    jobs: Sender<SwarmCall>,
    answers: Receiver<SwarmAnswer>,
    lease_time: Duration,
}

impl Swarm {
    fn join(&mut self, now: u64) {
        let index = self.members.len();
        let id = format!("swarm:{}:{index}", std::process::id());
        self.members.push(SwarmMember::new(id, now));
        self.step(index, now, Event::Tick);
    }

    fn step(&mut self, index: usize, now: u64, event: Event) {
        let member = &mut self.members[index];
        member.spend(now);
        let step = member.plan.step(now, member.local(), event);
        if let Some(setting) = step.set {
            member.setting = Some(setting);
        }
        if let Some(ask) = step.ask {
            let _ = self.jobs.send((index, member.id.clone(), ask));
        }
        member.wake = step.wake;
        self.wakes.push(Reverse((step.wake, index)));
    }

    /// Steps every member until `until`, calling `each` at every sample.
    fn run_until(&mut self, until: u64, mut each: impl FnMut(&mut Swarm, u64)) {
        let clock = MonotonicClock;
        let mut sample = clock.now();
        loop {
            let now = clock.now();
            if now >= until {
                return;
            }
            while let Some(&Reverse((at, index))) = self.wakes.peek() {
                if at > now {
                    break;
                }
                self.wakes.pop();
                if self.members[index].wake == at {
                    self.step(index, now, Event::Tick);
                }
            }
            if now >= sample {
                each(self, now);
                sample = now + SAMPLE;
            }
            let next = self
                .wakes
                .peek()
                .map_or(until, |Reverse((at, _))| *at)
                .min(sample)
                .min(until);
            let wait = Duration::from_nanos(next.saturating_sub(now));
            match self.answers.recv_timeout(wait) {
                Ok(answer) => {
                    self.answered(answer);
                    while let Ok(answer) = self.answers.try_recv() {
                        self.answered(answer);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn answered(&mut self, (index, answer): SwarmAnswer) {
        let now = MonotonicClock.now();
        let event = match answer {
            Ok(reply) => {
                self.lease_time = reply.lease_time;
                Event::Answered(reply)
            }
            Err(failure) => Event::Failed(failure),
        };
        self.step(index, now, event);
    }

    fn spent(&mut self, now: u64) -> Vec<f64> {
        self.members
            .iter_mut()
            .map(|member| {
                member.spend(now);
                member.granted
            })
            .collect()
    }
}

/// Runs a swarm as `run` says and measures it.
pub fn measure(run: &SwarmRun) -> Report {
    let clock = MonotonicClock;
    let mut info = redis::Client::open(run.info.connection_info())
        .and_then(|client| client.get_connection())
        .expect("connecting for INFO");
    Store::connect(&run.share)
        .and_then(|mut store| store.remove())
        .expect("removing the share");
    let (answered, answers) = mpsc::channel();
    let jobs = couriers(&run.share, run.couriers, answered);
    let mut swarm = Swarm {
        members: Vec::with_capacity(run.members + 1),
        wakes: BinaryHeap::new(),
        jobs,
        answers,
        lease_time: Duration::ZERO,
    };
    let start = clock.now();
    let every = run.joining.as_nanos() as u64 / run.members as u64;
    let joined_by = start + run.joining.as_nanos() as u64;
    swarm.run_until(start + run.warm_up.as_nanos() as u64, |swarm, now| {
        while swarm.members.len() < run.members
            && (now >= joined_by || start + every * swarm.members.len() as u64 <= now)
        {
            swarm.join(now);
        }
    });
    assert_eq!(
        swarm.members.len(),
        run.members,
        "all joined in the warm-up"
    );
    let from = clock.now();
    let before = (swarm.spent(from), counters(&mut info, &run.share));
    let to = from + run.window.as_nanos() as u64;
    swarm.run_until(to, |_, _| {});
    let after = (swarm.spent(to), counters(&mut info, &run.share));
    let seconds = run.window.as_secs_f64();
    let spent: Vec<f64> = after.0.iter().zip(&before.0).map(|(a, b)| a - b).collect();
    let total: f64 = spent.iter().sum();
    let even = total / run.members as f64;
    let least = spent.iter().copied().fold(f64::MAX, f64::min) / even;
    let most = spent.iter().copied().fold(0.0, f64::max) / even;
    let (b, a) = (before.1, after.1);
    // A newcomer, timed until it spends at its part.
    let joined = clock.now();
    swarm.join(joined);
    let newcomer = swarm.members.len() - 1;
    let part = RATE as f64 / swarm.members.len() as f64;
    let mut samples: Vec<(u64, f64)> = Vec::new();
    let mut reached = None;
    swarm.run_until(joined + run.newcomer_for.as_nanos() as u64, |swarm, now| {
        let member = &mut swarm.members[newcomer];
        member.spend(now);
        samples.push((now, member.granted));
        if reached.is_none()
            && let Some(&(then, earlier)) = samples
                .iter()
                .rev()
                .find(|(at, _)| now.saturating_sub(*at) >= PACE_WINDOW)
        {
            let pace = (member.granted - earlier) / ((now - then) as f64 / SECOND as f64);
            if pace >= REACHED * part {
                reached = Some(Duration::from_nanos(now - joined));
            }
        }
    });
    Report {
        members: run.members,
        lease_time: swarm.lease_time,
        total: total / (RATE as f64 * seconds),
        leased: (a.leased - b.leased) as f64 / (RATE as f64 * seconds),
        parts: (least, most),
        scripts_per_second: (a.scripts - b.scripts) as f64 / seconds,
        commands_per_second: (a.commands - b.commands) as f64 / seconds,
        redis_cpu: (a.cpu - b.cpu) / seconds,
        newcomer: reached,
    }
}

#[cfg(test)]
mod tests;
