//! What is known of shares whether fleets are built or not: how they are
//! named (a share of this machine by a plain name, checked here, a
//! fleet's by a Redis address, told by its scheme), and what a shape
//! joining a fleet's share brings and does when Redis is away.

use crate::counting::Counting;
use shape_bucket::Limit;

/// How a fleet's share is named: a Redis address, by one of these.
pub const REDIS_SCHEMES: [&str; 3] = ["redis://", "rediss://", "redis+unix://"];

/// `name` if it can name a share of this machine (it becomes a file's
/// name), or why not.
pub fn check_name(name: &str) -> Result<String, String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if valid {
        Ok(name.to_string())
    } else {
        Err(
            "a share name is 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
                .into(),
        )
    }
}

/// What spending from a fleet's share does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Fallback {
    /// Go on at the last known rate per shape (this shape's part of the
    /// share's rate, as Redis last gave it).
    #[default]
    Last,
    /// Hold the data until Redis is back.
    Block,
    /// Go on without a limit until Redis is back.
    Open,
}

/// What a shape joining a fleet's share brings: its settings, and whether
/// the user gave them.
pub struct Joining {
    pub limit: Limit,
    pub burst: u64,
    pub counting: Counting,
    pub settings_given: bool,
    /// The burst was given; if not, it follows the rate.
    pub burst_given: bool,
    pub fallback: Fallback,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain() {
        for good in ["backup", "crawl-1", "a.b_c"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "a/b", "../x", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
