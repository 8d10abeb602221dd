//! When the faults that count time are due: a stall or a reset after a
//! time, the pause after a slice, the held close. A pure schedule, handed
//! the time (nanoseconds on the caller's clock) like the fleet's planner:
//! it never reads a clock or sleeps. A copy sleeps until what it says, a
//! proxy's direction gives it to poll as a deadline; both ask it the same
//! questions, so the two carry a fault out the same way.

use super::{Faults, Trigger};
use shape_leaves::duration::{least, nanos};
use std::time::Duration;

/// The moments one direction's faults wait for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    /// When a stall and a reset that count time strike.
    stall_at: Option<u64>,
    reset_at: Option<u64>,
    /// Until when the pause after the last slice lasts.
    paused_until: Option<u64>,
    /// When the held close ends, once the data has.
    close_at: Option<u64>,
}

/// What strikes at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Due {
    /// A stall, the first time it is due (it is said once).
    pub stall: bool,
    /// A reset (said for as long as it is due).
    pub reset: bool,
}

impl Schedule {
    /// The schedule of `faults` asked for at `now`.
    pub fn new(faults: &Faults, now: u64) -> Schedule {
        let mut schedule = Schedule::default();
        schedule.retune(&Faults::default(), faults, now);
        schedule
    }

    /// `faults` asked for at `now` in place of `old`: a time that changed
    /// counts from now; one that did not keeps its moment.
    pub fn retune(&mut self, old: &Faults, faults: &Faults, now: u64) {
        let at = |trigger: Option<Trigger>| {
            trigger
                .and_then(Trigger::time)
                .map(|after| now.saturating_add(nanos(after)))
        };
        if faults.stall_after != old.stall_after {
            self.stall_at = at(faults.stall_after);
        }
        if faults.reset_after != old.reset_after {
            self.reset_at = at(faults.reset_after);
        }
        if faults.slice_pause.is_zero() {
            self.paused_until = None;
        }
    }

    /// What strikes by `now`.
    pub fn due(&mut self, now: u64) -> Due {
        let stall = self.stall_at.is_some_and(|at| at <= now);
        if stall {
            self.stall_at = None;
        }
        Due {
            stall,
            reset: self.reset_at.is_some_and(|at| at <= now),
        }
    }

    /// The next moment a stall or reset strikes, if one will.
    pub fn next(&self) -> Option<u64> {
        least(self.stall_at, self.reset_at)
    }

    /// A slice was written at `now`: the next waits `pause`.
    pub fn sliced(&mut self, pause: Duration, now: u64) {
        if !pause.is_zero() {
            self.paused_until = Some(now.saturating_add(nanos(pause)));
        }
    }

    /// Until when writing waits at `now` for the pause after a slice, if
    /// it does.
    pub fn paused(&mut self, now: u64) -> Option<u64> {
        match self.paused_until {
            Some(until) if until > now => Some(until),
            _ => {
                self.paused_until = None;
                None
            }
        }
    }

    /// Whether the close, held `hold` after the data ended (the first time
    /// this is asked), may happen at `now`; if not, when it may.
    pub fn close_due(&mut self, hold: Duration, now: u64) -> Result<(), u64> {
        let at = *self.close_at.get_or_insert(now.saturating_add(nanos(hold)));
        if at <= now { Ok(()) } else { Err(at) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn after(stall: Option<u64>, reset: Option<u64>) -> Faults {
        let time = |ms: u64| Trigger::After(Duration::from_millis(ms));
        Faults {
            stall_after: stall.map(time),
            reset_after: reset.map(time),
            ..Faults::default()
        }
    }

    #[test]
    fn a_stall_and_a_reset_strike_at_their_moments_the_stall_once() {
        let mut schedule = Schedule::new(&after(Some(100), Some(300)), 10 * MS);
        assert_eq!(schedule.next(), Some(110 * MS));
        assert_eq!(schedule.due(110 * MS - 1), Due::default());
        assert_eq!(
            schedule.due(110 * MS),
            Due {
                stall: true,
                reset: false
            }
        );
        assert_eq!(schedule.due(200 * MS), Due::default(), "said once");
        assert_eq!(schedule.next(), Some(310 * MS));
        assert!(schedule.due(310 * MS).reset);
        assert!(schedule.due(400 * MS).reset, "a reset stays due");
    }

    #[test]
    fn a_retune_counts_a_changed_time_from_then_and_keeps_the_others() {
        let first = after(Some(100), Some(300));
        let mut schedule = Schedule::new(&first, 0);
        let second = after(Some(100), Some(50));
        schedule.retune(&first, &second, 200 * MS);
        assert_eq!(
            schedule.next(),
            Some(100 * MS),
            "the stall keeps its moment"
        );
        schedule.due(100 * MS);
        assert_eq!(
            schedule.next(),
            Some(250 * MS),
            "the reset counts from the change"
        );
        schedule.retune(&second, &Faults::default(), 210 * MS);
        assert_eq!(schedule.next(), None, "off");
    }

    #[test]
    fn a_pause_follows_a_slice_and_a_close_is_held() {
        let mut schedule = Schedule::default();
        assert_eq!(schedule.paused(0), None);
        schedule.sliced(Duration::from_millis(10), 5 * MS);
        assert_eq!(schedule.paused(14 * MS), Some(15 * MS));
        assert_eq!(schedule.paused(15 * MS), None);
        schedule.sliced(Duration::ZERO, 20 * MS);
        assert_eq!(schedule.paused(20 * MS), None);
        let hold = Duration::from_millis(300);
        assert_eq!(schedule.close_due(hold, 100 * MS), Err(400 * MS));
        assert_eq!(schedule.close_due(hold, 399 * MS), Err(400 * MS));
        assert_eq!(schedule.close_due(hold, 400 * MS), Ok(()));
    }
}
