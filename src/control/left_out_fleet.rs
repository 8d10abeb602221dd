//! A build without fleets (cargo's `fleet` feature off): the names the
//! rest of shape knows a fleet's share by, none of which can be had. A
//! Redis address given as a share is refused in one line; what only a
//! fleet's share would hold (a membership, its leaving) has no value,
//! so the code that would use one is never reached.

use shape_bucket::Limit;
use shape_leaves::bucket::Bucket;
use shape_leaves::say::Printer;
use shape_leaves::share::Joining;
use std::sync::Arc;

/// A fleet's share, which this build cannot name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisShare {}

impl RedisShare {
    /// True if `text` is a Redis address: refused, where given, by
    /// [`RedisShare::from_str`](std::str::FromStr).
    pub fn is_redis(text: &str) -> bool {
        shape_leaves::share::REDIS_SCHEMES
            .iter()
            .any(|scheme| text.starts_with(scheme))
    }
}

impl std::str::FromStr for RedisShare {
    type Err = String;

    fn from_str(_: &str) -> Result<RedisShare, String> {
        Err(
            "a fleet's share on Redis is not in this build of shape: it was built without \
             the `fleet` feature"
                .into(),
        )
    }
}

impl std::fmt::Display for RedisShare {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

/// A membership of a fleet's share: none in this build.
pub enum Member {}

impl Member {
    pub fn leaving(&self) -> Leaving {
        match *self {}
    }

    pub fn share_settings(&self) -> (Limit, u64) {
        match *self {}
    }

    pub fn leave(&self) {
        match *self {}
    }
}

// As the real one leaves the share when dropped.
impl Drop for Member {
    fn drop(&mut self) {
        match *self {}
    }
}

/// Why a fleet's share could not be used: never, in this build.
#[derive(Debug)]
pub enum FleetError {}

impl std::fmt::Display for FleetError {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

impl std::error::Error for FleetError {}

/// Leaving a fleet's share: never, in this build.
#[derive(Clone)]
pub enum Leaving {}

impl Leaving {
    pub fn leave(&self) {
        match *self {}
    }
}

/// Joins a share that cannot be named.
pub fn join(
    share: &RedisShare,
    _: &Joining,
    _: Option<Printer>,
) -> anyhow::Result<(Arc<Bucket>, Member, Option<String>)> {
    match *share {}
}

/// The one-off commands on a share that cannot be named.
pub mod commands {
    use super::{FleetError, RedisShare};
    use shape_leaves::bucket::Adjustment;
    use shape_leaves::counting::Counting;

    pub fn status(share: &RedisShare) -> Result<String, FleetError> {
        match *share {}
    }

    pub fn change(
        share: &RedisShare,
        _: impl FnOnce(Counting) -> Result<Adjustment, String>,
    ) -> Result<String, FleetError> {
        match *share {}
    }

    pub fn reset(share: &RedisShare) -> Result<bool, FleetError> {
        match *share {}
    }
}
