//! What the planner is handed (the time, the local bucket's [`Local`]
//! view, an [`Event`]) and what it hands back (a [`Step`]: a lease call
//! to make, a setting for the local bucket, a line to say).

use super::Held;
use shape_bucket::Limit;

/// What the plan was told.
#[derive(Debug, Clone)]
pub enum Event {
    /// Time passed.
    Tick,
    /// Redis answered the lease call in flight.
    Answered(LeaseReply),
    /// The lease call in flight failed.
    Failed(RedisFailure),
}

/// What a lease call answered, as the plan needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaseReply {
    /// Tokens granted; 0 when none were.
    pub granted: u64,
    /// Nanoseconds from now until the first granted token may be spent;
    /// negative when some may be spent already.
    pub lead: i64,
    pub held: Held,
    /// Shapes on the share, this one among them.
    pub members: u64,
    /// The slope of the lease granted, tokens a second: this member's
    /// part, or less while the others' stretches leave no room for it.
    pub slope: u64,
    /// This member's fair part of the rate, in tokens a second.
    pub part: u64,
    /// How long a lease lasts on this share: longer as members are more.
    pub lease_time: std::time::Duration,
}

/// Why Redis could not serve a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisFailure {
    /// No connection, a broken one, or no answer in time.
    Unreachable(String),
    /// Redis answered with an error: a permission, a script, a key that
    /// holds something else, settings that cannot be read.
    Refused(String),
}

/// A lease call to make now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ask {
    /// Tokens wanted; 0 only asks for the settings.
    pub want: u64,
    /// Tokens a second this member would spend, or [`INSATIABLE`](super::INSATIABLE).
    pub demand: u64,
    /// How long a lease lasts at the member's part: Redis grants no more
    /// than that at the part it gives.
    pub lasting: std::time::Duration,
    /// The settings, with their generation, that start the share again if
    /// Redis lost it.
    pub settings: Held,
    /// This call's number: each is larger than the last.
    pub call: u64,
    /// The number of the last call whose answer was taken in (0 for
    /// none): what was granted on a later one, which the member gave up
    /// waiting for, is not its own.
    pub heard: u64,
}

/// How the local bucket is to be set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    pub limit: Limit,
    pub burst: u64,
    pub paused: bool,
}

/// What to do after a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub ask: Option<Ask>,
    /// A new setting for the local bucket, when it changed.
    pub set: Option<Setting>,
    /// A line for the user.
    pub say: Option<String>,
    /// When to step again at the latest (a clock time).
    pub wake: u64,
}

/// What the local bucket shows the plan at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    /// Tokens it granted in all, modulo 2^64.
    pub granted: u64,
    /// Tokens in its hands now (never below 0).
    pub in_hand: u64,
    /// Someone waits for tokens it paid for ahead: the bucket, not the
    /// input, sets the pace.
    pub waiting: bool,
}

impl Setting {
    pub(super) fn new(limit: Limit, burst: u64, paused: bool) -> Setting {
        Setting {
            limit,
            burst,
            paused,
        }
    }
}
