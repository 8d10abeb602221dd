//! One member's leases, as a state machine: it is handed the time, what
//! its local bucket has granted, and what Redis answered, and says what to
//! ask Redis, how to set the local bucket and what to tell the user. It
//! does no I/O and reads no clock, so every rule here is tested exactly on
//! made-up times: distance, hangs, restarts and errors.
//!
//! # How a member spends
//!
//! The local bucket runs at this member's *part* of the share's rate (a
//! max-min fair part of it, worked out by Redis from every member's
//! demand), a little above it so that a member held back for a moment can
//! catch up. What it may spend in all is what its leases allow: a lease of
//! `n` tokens is a stretch of this member's own timeline on Redis's clock,
//! at the part Redis gave (its *slope*), and its tokens become spendable
//! at that slope from the stretch's start less the share's burst in time.
//! Redis never lets the slopes in force add up to more than the rate, so
//! the tokens all members can spend by time `t` never exceed
//! `rate * t + burst`, however far away Redis is and whatever it does
//! next. What a member leaves unspent past the share's burst lapses, as a
//! bucket's tokens past its capacity, so that this holds over any window
//! too, not only from the start.
//!
//! A lease lasts longer on a share of many members, as Redis says, so
//! that the share sees about the same number of calls a second whatever
//! its size; an idle member asks for the settings once a lease time.
//!
//! The plan pauses the local bucket when what it may still spend is in
//! the bucket's hands already, and lets it go when more becomes
//! spendable. It asks for the next lease one round trip (measured) before
//! its leases run out, and sizes it from its part of the rate, so that the
//! pace a small lease allowed never shrinks the next one.
//!
//! While Redis does not answer, the member spends only what it holds;
//! when a call fails or times out, `--share-fallback` decides the rest.

use shape_bucket::{Limit, Rate};
use shape_leaves::counting::Counting;
use shape_leaves::share::Fallback;
use std::collections::VecDeque;

/// The settings a share holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub limit: Limit,
    /// In tokens.
    pub burst: u64,
    pub paused: bool,
    pub counting: Counting,
    /// Bumped by every change; 0 for settings no share held yet.
    pub generation: u64,
    /// The burst was never set, and follows the rate.
    pub follows: bool,
}

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000_000_000;

/// A lease lasts this long at the member's part, at least, and longer on
/// a share of many members, as Redis says.
pub const LEASE_TIME: u64 = 100 * MS;
/// The local bucket's rate over the member's part: room to catch up.
const HEADROOM: f64 = 1.05;
/// The local bucket's burst, in time at its rate.
const LOCAL_BURST: u64 = 20 * MS;
/// A paused bucket is let go once this much more (in time at its rate)
/// is spendable, so that it does not flicker.
const RESUME_AFTER: u64 = 5 * MS;
/// Asking is this much earlier than one round trip before the leases run
/// out.
const MARGIN: u64 = 20 * MS;
/// The first and the longest pause before trying Redis again.
const FIRST_BACKOFF: u64 = 25 * MS;
const MOST_BACKOFF: u64 = 250 * MS;
/// A member given less than its part asks again after this share of a
/// lease time (within [`FIRST_BACKOFF`] and [`LONGEST_RETRY`]): its part
/// comes free as the others' stretches end.
const SHORT_RETRY: u64 = 10;
const LONGEST_RETRY: u64 = SECOND;
/// A slope under this share of the part counts as short of it.
const SHORT: f64 = 0.95;
/// A member spending at least this share of its bucket's rate is held
/// back by it, and asks for as much as it can get.
const SATURATED: f64 = 0.9;
/// How long a new member counts as wanting all it can get, while its
/// pace is measured.
const WARM_UP: u64 = SECOND;
/// Demand reported for a member that would take as much as it is given.
pub const INSATIABLE: u64 = 1 << 50;

/// A granted lease whose tokens are not all spendable yet: from `from` on
/// they become so at `slope` tokens a second.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ramp {
    tokens: u64,
    from: i128,
    slope: f64,
}

impl Ramp {
    /// Tokens of it spendable at `t`.
    fn at(&self, t: u64) -> u64 {
        let since = i128::from(t) - self.from;
        if since <= 0 {
            return 0;
        }
        ((since as f64 * self.slope / SECOND as f64) as u64).min(self.tokens)
    }

    /// When all of it is spendable.
    fn end(&self) -> i128 {
        self.from + (self.tokens as f64 / self.slope * SECOND as f64).ceil() as i128
    }
}

/// Whether Redis serves the share.
#[derive(Debug, Clone, PartialEq)]
enum Health {
    Up,
    /// Not since a call failed for `trouble`; the next try is at `retry`.
    Down {
        failure: RedisFailure,
        retry: u64,
        backoff: u64,
    },
}

/// The round trip to Redis, smoothed as TCP does.
#[derive(Debug, Clone, Copy)]
struct RoundTrip {
    smoothed: f64,
    spread: f64,
}

impl RoundTrip {
    fn note(&mut self, sample: u64) {
        let sample = sample as f64;
        if self.smoothed == 0.0 {
            self.smoothed = sample;
            self.spread = sample / 4.0;
        } else {
            self.spread += ((self.smoothed - sample).abs() - self.spread) / 4.0;
            self.smoothed += (sample - self.smoothed) / 8.0;
        }
    }

    /// A round trip that is rarely exceeded, in nanoseconds.
    fn likely(&self) -> u64 {
        (self.smoothed + 2.0 * self.spread) as u64
    }
}

/// One member's leases.
#[derive(Debug)]
pub struct Leases {
    fallback: Fallback,
    /// Tokens per counted unit: no lease is smaller.
    unit: u64,
    /// The share's settings as last heard.
    held: Held,
    /// This member's part of the rate, tokens a second, as last heard.
    part: f64,
    members: u64,
    /// How long a lease lasts on the share, as last heard: longer as
    /// members are more.
    share_lease: u64,
    /// The local bucket's grants when the leases below began.
    base: u64,
    /// Tokens of leases that are wholly spendable.
    spendable: u64,
    ramps: VecDeque<Ramp>,
    /// When the call in flight was sent.
    asking: Option<u64>,
    /// The number of the last call made, and of the last one answered.
    calls: u64,
    heard_call: u64,
    /// When the last answer came.
    heard: u64,
    round_trip: RoundTrip,
    health: Health,
    /// The grants and time at the last call, for the pace.
    paced_from: (u64, u64),
    /// The bucket held the spending back at some step since the last
    /// call.
    held_back: bool,
    setting: Option<Setting>,
    /// Nothing was asked yet.
    fresh: bool,
    /// The call in flight asks for tokens.
    want_more: bool,
    /// No lease is asked for before this.
    not_before: u64,
    /// Until this time a member counts as wanting all it can get: its
    /// pace is not known yet.
    warming: u64,
    /// The local bucket's grants at the last step.
    stepped: u64,
}

impl Leases {
    /// The share's settings as Redis last gave them.
    pub fn held(&self) -> Held {
        self.held
    }

    /// A member of a share whose settings are `held`, starting at `now`
    /// with a bucket that has granted `granted`.
    pub fn new(held: Held, fallback: Fallback, now: u64, granted: u64) -> Leases {
        Leases {
            fallback,
            unit: held.counting.tokens_per_unit(),
            held,
            part: 0.0,
            members: 1,
            share_lease: LEASE_TIME,
            base: granted,
            spendable: 0,
            ramps: VecDeque::new(),
            asking: None,
            calls: 0,
            heard_call: 0,
            heard: now,
            round_trip: RoundTrip {
                smoothed: 0.0,
                spread: 0.0,
            },
            health: Health::Up,
            paced_from: (granted, now),
            held_back: false,
            setting: None,
            fresh: true,
            want_more: false,
            not_before: 0,
            warming: now + WARM_UP,
            stepped: granted,
        }
    }

    /// True while a lease call is in flight.
    pub fn asking(&self) -> bool {
        self.asking.is_some()
    }

    /// True while Redis serves the share.
    pub fn up(&self) -> bool {
        self.health == Health::Up
    }

    /// Takes in `event` at `now`, with the local bucket as `local` shows
    /// it, and says what to do.
    pub fn step(&mut self, now: u64, local: Local, event: Event) -> Step {
        self.held_back |= local.waiting;
        let say = match event {
            Event::Tick => None,
            Event::Answered(answer) => self.answered(now, local, answer),
            Event::Failed(failure) => self.failed(now, failure),
        };
        self.settle(now);
        self.forfeit(now, local);
        let ask = self.ask(now, local);
        let (setting, mut wake) = self.gate(now, local);
        // Paused, it spends nothing, so what it holds lasts until the
        // gate's wake-up; but one whose lease is due and was refused for
        // want of room on the share has no ramp to wake it, and must ask
        // again when it may.
        if !setting.paused || self.surplus(local) <= 0.0 {
            wake = wake.min(self.next_lease(now, local).max(now + MS));
        }
        // Paused for want of leases after spending some, it would spend
        // more if it could.
        self.held_back |=
            setting.paused && self.up() && !self.held.paused && local.granted != self.base;
        let set = (self.setting != Some(setting)).then_some(setting);
        self.setting = Some(setting);
        Step {
            ask,
            set,
            say,
            wake,
        }
    }

    /// Tokens leased and not spent, to give back on leaving.
    pub fn unused(&self, granted: u64) -> u64 {
        self.leased()
            .saturating_sub(granted.wrapping_sub(self.base))
    }

    /// Tokens of every lease held, spendable or not yet.
    fn leased(&self) -> u64 {
        self.spendable + self.ramps.iter().map(|ramp| ramp.tokens).sum::<u64>()
    }

    fn answered(&mut self, now: u64, local: Local, answer: LeaseReply) -> Option<String> {
        // Redis read its clock about half way through the round trip: the
        // lead counts from there. Counting it from the answer's arrival
        // instead would start every lease half a round trip late, and at a
        // distance of more than twice the share's burst in time, members
        // would run dry before each lease.
        let asked = self.asking.take().unwrap_or(now);
        self.heard_call = self.calls;
        self.round_trip.note(now.saturating_sub(asked));
        let redis_now = asked + now.saturating_sub(asked) / 2;
        self.heard = now;
        let said = match std::mem::replace(&mut self.health, Health::Up) {
            Health::Up => None,
            Health::Down { failure, .. } => {
                if self.fallback != Fallback::Block {
                    // What was spent meanwhile was not leased: leasing
                    // starts afresh.
                    self.base = local.granted;
                    self.spendable = 0;
                    self.ramps.clear();
                }
                Some(match failure {
                    RedisFailure::Unreachable(_) => "Redis is back".to_string(),
                    RedisFailure::Refused(_) => "Redis serves the share again".to_string(),
                })
            }
        };
        self.held = answer.held;
        self.members = answer.members.max(1);
        self.part = answer.part as f64;
        self.share_lease = (answer.lease_time.as_nanos() as u64).max(LEASE_TIME);
        let short = (answer.slope as f64) < self.part * SHORT;
        if self.want_more && (answer.granted == 0 || short) {
            // No room on the share for its part for now: asked again when
            // some more may have come free.
            let retry = (self.share_lease / SHORT_RETRY).clamp(FIRST_BACKOFF, LONGEST_RETRY);
            self.not_before = now + retry;
        }
        if answer.granted > 0 {
            let slope = match answer.slope {
                0 => f64::MAX,
                slope => slope as f64,
            };
            self.ramps.push_back(Ramp {
                tokens: answer.granted,
                from: i128::from(redis_now) + i128::from(answer.lead),
                slope,
            });
        }
        said
    }

    fn failed(&mut self, now: u64, failure: RedisFailure) -> Option<String> {
        self.asking = None;
        let backoff = match &self.health {
            Health::Up => FIRST_BACKOFF,
            Health::Down { backoff, .. } => (backoff * 2).min(MOST_BACKOFF),
        };
        let same = matches!(&self.health, Health::Down { failure: old, .. }
            if std::mem::discriminant(old) == std::mem::discriminant(&failure));
        let line = (!same).then(|| self.failure_line(&failure));
        self.health = Health::Down {
            failure,
            retry: now + backoff,
            backoff,
        };
        line
    }

    /// The line that says Redis is in trouble, and what the member does.
    fn failure_line(&self, failure: &RedisFailure) -> String {
        let what = match self.fallback {
            Fallback::Last => match self.fallback_limit() {
                Limit::Unlimited => "going on without a limit, as the share has none".into(),
                limit => format!(
                    "going on at {}, the last known rate per shape",
                    self.held.counting.show_limit(limit)
                ),
            },
            Fallback::Block => "holding the data until it is back".into(),
            Fallback::Open => "going on without a limit until it is back".into(),
        };
        match failure {
            RedisFailure::Unreachable(why) => format!("Redis is unreachable ({why}); {what}"),
            RedisFailure::Refused(why) => format!("Redis refused the lease ({why}); {what}"),
        }
    }

    /// Folds ramps that are wholly spendable into `spendable`.
    fn settle(&mut self, now: u64) {
        while let Some(ramp) = self.ramps.front() {
            if ramp.end() > i128::from(now) {
                break;
            }
            self.spendable += ramp.tokens;
            self.ramps.pop_front();
        }
    }

    /// Drops what has been spendable for longer than the share's burst
    /// allows and is still unspent, as a bucket drops tokens past its
    /// capacity. Kept, it would be spent late, on top of the part, while
    /// the other members spend theirs: a member that joined a share alone
    /// and leased at the whole rate held a balance that it spent at its
    /// bucket's 5% over its part for minutes, and the share passed its
    /// rate by 1% over any window. Dropped when the member spends, as a
    /// bucket's cap bites only then: an idle member keeps its leases, and
    /// asks for none.
    fn forfeit(&mut self, now: u64, local: Local) {
        let spends = local.waiting || local.granted != self.stepped;
        self.stepped = local.granted;
        let Some(rate) = self.share_rate() else {
            return;
        };
        if !spends {
            return;
        }
        let ahead = self.held.burst as f64 / rate + LOCAL_BURST as f64 / SECOND as f64;
        let most = (self.part() * HEADROOM * ahead) as i128;
        let over = self.room(now, local) - most;
        if over > 0 {
            // Counted as spent: it is neither spendable nor given back.
            self.base = self.base.wrapping_sub(over as u64);
        }
    }

    /// Lease tokens spendable at `t`.
    fn spendable_at(&self, t: u64) -> u64 {
        self.spendable + self.ramps.iter().map(|ramp| ramp.at(t)).sum::<u64>()
    }

    /// Tokens the bucket may still hand out at `t` from what is leased:
    /// negative when it handed out more (a chunk paid for ahead).
    fn room(&self, t: u64, local: Local) -> i128 {
        let spent = local.granted.wrapping_sub(self.base);
        i128::from(self.spendable_at(t)) - i128::from(spent) - i128::from(local.in_hand)
    }

    fn share_rate(&self) -> Option<f64> {
        self.held.limit.rate().map(Rate::bytes_per_sec)
    }

    /// This member's part of the rate: as Redis said, or, before it said,
    /// an even split.
    fn part(&self) -> f64 {
        let rate = self.share_rate().unwrap_or(f64::MAX);
        if self.part > 0.0 {
            self.part.min(rate)
        } else {
            rate / self.members as f64
        }
    }

    /// The local bucket's rate while leasing: a little above the member's
    /// part, so that a member held back for a moment (a busy machine)
    /// catches up with its leases, which alone bound what it spends.
    fn local_rate(&self) -> f64 {
        let rate = self.share_rate().unwrap_or(f64::MAX);
        (self.part() * HEADROOM)
            .min(rate)
            .max(self.unit as f64 / 10.0)
    }
}

mod asking;
mod exchange;
mod gate;

pub use exchange::{Ask, Event, LeaseReply, Local, RedisFailure, Setting, Step};

#[cfg(test)]
mod tests;
