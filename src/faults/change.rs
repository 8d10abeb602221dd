//! A [`Change`]: one fault flag's value, as given at start or sent by
//! `--remote` to a running shape, and how it changes [`Faults`].

use super::{Bytes, Directed, Faults, Probability, Slice, Span, Trigger, Way};
use std::time::Duration;

/// One fault flag and its value.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Slice(Directed<Slice>),
    SlicePause(Directed<Span>),
    Drop(Directed<Probability>),
    Corrupt(Directed<Probability>),
    CutAfter(Directed<Bytes>),
    SlowClose(Directed<Span>),
    StallAfter(Directed<Trigger>),
    ResetAfter(Directed<Trigger>),
}

/// Every fault flag, by the name a message carries (the flag without its
/// dashes).
const NAMES: [&str; 8] = [
    "slice",
    "slice-pause",
    "drop",
    "corrupt",
    "cut-after",
    "slow-close",
    "stall-after",
    "reset-after",
];

impl Change {
    /// The change that flag `name` (as [`Change::name`] gives it) with
    /// `text` asks for.
    pub fn parse(name: &str, text: &str) -> Result<Change, String> {
        Ok(match name {
            "slice" => Change::Slice(text.parse()?),
            "slice-pause" => Change::SlicePause(text.parse()?),
            "drop" => Change::Drop(text.parse()?),
            "corrupt" => Change::Corrupt(text.parse()?),
            "cut-after" => Change::CutAfter(text.parse()?),
            "slow-close" => Change::SlowClose(text.parse()?),
            "stall-after" => Change::StallAfter(text.parse()?),
            "reset-after" => Change::ResetAfter(text.parse()?),
            _ => return Err(format!("no fault is called '{}'", name.escape_debug())),
        })
    }

    /// The flag's name without its dashes: `slice-pause`.
    pub fn name(&self) -> &'static str {
        NAMES[self.index()]
    }

    fn index(&self) -> usize {
        match self {
            Change::Slice(_) => 0,
            Change::SlicePause(_) => 1,
            Change::Drop(_) => 2,
            Change::Corrupt(_) => 3,
            Change::CutAfter(_) => 4,
            Change::SlowClose(_) => 5,
            Change::StallAfter(_) => 6,
            Change::ResetAfter(_) => 7,
        }
    }

    /// True for the faults that end or hold a stream: `--stall-after`,
    /// `--reset-after`, `--cut-after`, `--slow-close`.
    pub fn ends(&self) -> bool {
        matches!(
            self,
            Change::StallAfter(_)
                | Change::ResetAfter(_)
                | Change::CutAfter(_)
                | Change::SlowClose(_)
        )
    }

    /// The value as the user wrote it.
    pub fn text(&self) -> &str {
        match self {
            Change::Slice(value) => value.text(),
            Change::SlicePause(value) | Change::SlowClose(value) => value.text(),
            Change::Drop(value) | Change::Corrupt(value) => value.text(),
            Change::CutAfter(value) => value.text(),
            Change::StallAfter(value) | Change::ResetAfter(value) => value.text(),
        }
    }

    /// True if the value was given for one direction only.
    pub fn one_sided(&self) -> bool {
        match self {
            Change::Slice(value) => value.one_sided(),
            Change::SlicePause(value) | Change::SlowClose(value) => value.one_sided(),
            Change::Drop(value) | Change::Corrupt(value) => value.one_sided(),
            Change::CutAfter(value) => value.one_sided(),
            Change::StallAfter(value) | Change::ResetAfter(value) => value.one_sided(),
        }
    }

    /// Changes `faults`, those of `direction`, as this asks; a value not
    /// given for `direction` changes nothing.
    pub fn apply(&self, faults: &mut Faults, direction: Way) {
        let span = |value: Option<Span>| value.map_or(Duration::ZERO, |span| span.0);
        let chance = |value: Option<Probability>| value.map_or(0.0, |p| p.0);
        match self {
            Change::Slice(value) => set(&mut faults.slice, value.of(direction)),
            Change::SlicePause(value) => {
                if let Some(pause) = value.of(direction) {
                    faults.slice_pause = span(pause);
                }
            }
            Change::Drop(value) => {
                if let Some(drop) = value.of(direction) {
                    faults.drop = chance(drop);
                }
            }
            Change::Corrupt(value) => {
                if let Some(corrupt) = value.of(direction) {
                    faults.corrupt = chance(corrupt);
                }
            }
            Change::CutAfter(value) => {
                if let Some(cut) = value.of(direction) {
                    faults.cut_after = cut.map(|bytes| bytes.0);
                }
            }
            Change::SlowClose(value) => {
                if let Some(close) = value.of(direction) {
                    faults.slow_close = span(close);
                }
            }
            Change::StallAfter(value) => set(&mut faults.stall_after, value.of(direction)),
            Change::ResetAfter(value) => set(&mut faults.reset_after, value.of(direction)),
        }
    }

    /// The faults that `changes`, in order, make of none, for
    /// `direction`.
    pub fn all(changes: &[Change], direction: Way) -> Faults {
        let mut faults = Faults::default();
        for change in changes {
            change.apply(&mut faults, direction);
        }
        faults
    }
}

/// Sets `field` to `value` if one was given.
fn set<T>(field: &mut Option<T>, value: Option<Option<T>>) {
    if let Some(value) = value {
        *field = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_apply_in_order_per_direction_and_survive_their_names() {
        let changes = [
            Change::parse("slice", "7").unwrap(),
            Change::parse("drop", "down:1%").unwrap(),
            Change::parse("slice", "up:off").unwrap(),
            Change::parse("stall-after", "2s").unwrap(),
        ];
        let up = Change::all(&changes, Way::Up);
        let down = Change::all(&changes, Way::Down);
        assert_eq!(up.slice, None);
        assert_eq!(up.drop, 0.0);
        assert_eq!(down.slice.map(|s| s.size), Some(7));
        assert_eq!(down.drop, 0.01);
        assert_eq!(
            down.stall_after,
            Some(Trigger::After(Duration::from_secs(2)))
        );
        for change in &changes {
            assert_eq!(
                &Change::parse(change.name(), change.text()).unwrap(),
                change
            );
        }
        for name in NAMES {
            assert!(Change::parse(name, "off").is_ok(), "{name}");
        }
        assert!(Change::parse("delay", "1s").is_err());
        assert!(Change::parse("drop", "2").is_err());
    }
}
