//! Everything that changes a running shape, and everything shapes share:
//! the private control directory ([`dir`]), the messages of
//! `shape --remote` ([`protocol`], [`messages`]), the [`Adjuster`] that
//! applies every change, the signals and timetables that drive it
//! ([`signals`], [`schedule`], [`running`]), and limits shared between
//! processes ([`share`]).
//!
//! Messages and shares are files in a directory only the user can enter
//! (`$XDG_RUNTIME_DIR/shape`, or `/tmp/shape-UID`, mode 0700): checked
//! before use, opened relative to it without following links, created
//! whole or not at all, so nobody can plant or redirect one.

mod adjuster;
mod dir;
#[cfg(feature = "fleet")]
pub use shape_fleet as fleet;
#[cfg(not(feature = "fleet"))]
#[path = "left_out_fleet.rs"]
pub mod fleet;
mod messages;
pub(crate) mod protocol;
mod running;
mod schedule;
pub mod share;
mod signals;
pub mod traced;

pub use adjuster::{Adjuster, RuleControl};
pub use dir::{ControlDir, Registration};
pub use protocol::Request;
pub use running::{Run, follow, start};
pub use schedule::{RateFile, RateSchedule};

/// A share's name: of this machine's, or a fleet's in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareName {
    Local(String),
    Redis(fleet::RedisShare),
}

impl std::str::FromStr for ShareName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if fleet::RedisShare::is_redis(text) {
            text.parse().map(ShareName::Redis)
        } else {
            shape_leaves::share::check_name(text).map(ShareName::Local)
        }
    }
}

impl std::fmt::Display for ShareName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShareName::Local(name) => f.write_str(name),
            ShareName::Redis(share) => write!(f, "{share}"),
        }
    }
}
