//! The order in which a loop's turn steps its connections: the moments
//! fallen due first, then those that events woke, from where the last
//! turn left off so that none is always last, with the moments that fall
//! due meanwhile met between them.
//!
//! A turn over many busy connections can take milliseconds on a machine
//! whose cores are taken (a test suite's load preempts the loop). A
//! connection's deadline is met when due all the same: the busy yield to
//! it. Kept apart from the loop, over [`Stepping`], so that a saturated
//! loop can be run on a fake clock.

use crate::deadlines::Deadlines;

/// How many connections woken by events a turn steps between two looks
/// for moments fallen due: a look is a read of the clock and of the
/// earliest deadline, a step moves a chunk or two.
pub(super) const DUE_LOOK: usize = 8;

/// What a turn steps: a loop's clock, its deadlines, and a connection's
/// step, which files the connection's next moment.
pub(super) trait Stepping {
    fn clock_now(&self) -> u64;
    fn deadlines_mut(&mut self) -> &mut Deadlines;
    fn step_connection(&mut self, key: usize);
}

/// Where the turns have got to.
#[derive(Debug, Default)]
pub(super) struct Woken {
    /// The connections whose moments are due, kept to reuse its memory.
    due: Vec<usize>,
    /// The connection an event woke that was stepped last: the next turn
    /// starts after it.
    last: usize,
}

impl Woken {
    /// Steps every connection whose moment is due by `now`, the earliest
    /// first.
    pub(super) fn meet_due(&mut self, stepping: &mut impl Stepping, now: u64) {
        stepping.deadlines_mut().due(now, &mut self.due);
        for key in self.due.drain(..) {
            stepping.step_connection(key);
        }
    }

    /// Steps the connections that events woke, `ready` (sorted), from
    /// where the last turn left off, and meets the moments that fall due
    /// meanwhile between them.
    pub(super) fn step(&mut self, stepping: &mut impl Stepping, ready: &mut Vec<usize>) {
        let first = ready.partition_point(|&key| key <= self.last);
        ready.rotate_left(first);
        for (stepped, key) in ready.drain(..).enumerate() {
            // Those due within a grain of the last look wait for the
            // next, as between turns (see `Deadlines`).
            if stepped % DUE_LOOK == DUE_LOOK - 1 {
                let now = stepping.clock_now();
                if stepping
                    .deadlines_mut()
                    .wake_at()
                    .is_some_and(|at| at <= now)
                {
                    self.meet_due(stepping, now);
                }
            }
            stepping.step_connection(key);
            self.last = key;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A loop on a fake clock whose busy connections are always woken and
    /// each cost `cost` of the clock to step, as on a machine whose cores
    /// a test suite takes; and a probe, due every `every`, whose lateness
    /// is noted each time it is stepped at its moment.
    struct Saturated {
        now: u64,
        cost: u64,
        deadlines: Deadlines,
        busy: usize,
        probe_due: u64,
        every: u64,
        late: Vec<u64>,
    }

    impl Saturated {
        /// The probe's key: after the busy ones.
        fn probe(&self) -> usize {
            self.busy
        }

        /// One turn, as the loop takes it: the due first, then the woken.
        fn turn(&mut self, woken: &mut Woken) {
            let now = self.now;
            woken.meet_due(self, now);
            let mut ready: Vec<usize> = (0..self.busy).collect();
            woken.step(self, &mut ready);
        }
    }

    impl Stepping for Saturated {
        fn clock_now(&self) -> u64 {
            self.now
        }

        fn deadlines_mut(&mut self) -> &mut Deadlines {
            &mut self.deadlines
        }

        fn step_connection(&mut self, key: usize) {
            self.now += self.cost;
            if key == self.probe() && self.now >= self.probe_due {
                self.late.push(self.now - self.probe_due);
                self.probe_due += self.every;
                let (probe, due) = (self.probe(), self.probe_due);
                self.deadlines.file(probe, Some(due));
            }
        }
    }

    #[test]
    fn a_due_moment_is_met_on_time_however_long_the_busy_take() {
        // 200 busy connections at 0.5 ms a step: a turn takes 100 ms,
        // twice the probe's round trip; stepped only between turns, the
        // probe would be up to 100 ms late.
        let mut saturated = Saturated {
            now: 0,
            cost: MS / 2,
            deadlines: Deadlines::default(),
            busy: 200,
            probe_due: 25 * MS,
            every: 25 * MS + MS / 3,
            late: Vec::new(),
        };
        let (probe, due) = (saturated.probe(), saturated.probe_due);
        saturated.deadlines.file(probe, Some(due));
        let mut woken = Woken::default();
        while saturated.late.len() < 400 {
            saturated.turn(&mut woken);
        }
        let mut late = saturated.late.clone();
        late.sort_unstable();
        let median = late[late.len() / 2];
        let most = late[late.len() - 1];
        // A look every DUE_LOOK steps, and a grain between looks.
        let bound = DUE_LOOK as u64 * saturated.cost + crate::deadlines::GRAIN;
        assert!(median <= 3 * MS, "median {median} ns late");
        assert!(most <= bound, "{most} ns late, past {bound}");
    }

    #[test]
    fn every_woken_connection_gets_its_turn_first_in_turn() {
        struct Order(Vec<usize>, Deadlines);
        impl Stepping for Order {
            fn clock_now(&self) -> u64 {
                0
            }
            fn deadlines_mut(&mut self) -> &mut Deadlines {
                &mut self.1
            }
            fn step_connection(&mut self, key: usize) {
                self.0.push(key);
            }
        }
        let mut order = Order(Vec::new(), Deadlines::default());
        let mut woken = Woken::default();
        woken.step(&mut order, &mut vec![1, 2, 3]);
        woken.last = 1;
        woken.step(&mut order, &mut vec![1, 2, 3]);
        assert_eq!(order.0, [1, 2, 3, 2, 3, 1]);
    }
}
