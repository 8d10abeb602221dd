//! The moments an event loop's connections or flows wait for (a chunk's
//! tokens, a chunk or datagram due out of the delay line, a fault's
//! moment): filed in order, so that the loop finds the earliest and those
//! due without looking at every one, and met at most once every half a
//! millisecond, so that however many it keeps, the loop wakes at most
//! 2,000 times a second for them; one after a quiet while is met on
//! time. A thousand connections at 20 kB/s each looked at
//! every connection twice a turn, 20,000 turns a second; a thousand UDP
//! flows with links of their own cost four times an unshaped relay.

use std::collections::BTreeSet;

/// How often at most the loop wakes for deadlines: all those due within
/// one grain of the last look are met in one wake-up, each at most this
/// late. Measured, when deadlines were put off to the end of their grain:
/// a millisecond made a round trip through `--delay 25ms` 52.0 ms (50.5
/// without coalescing), half of one 51.0 ms for 7% more CPU at 1,000
/// connections of 20 kB/s, and a quarter 50.9 ms for 50% more.
pub const GRAIN: u64 = 500_000;

/// The grid on which a chunk's wait for its tokens ends once a proxy
/// paces many connections ([`PACED_TOGETHER`]): a paced chunk then goes
/// out at the first multiple of it once paid for, so that the chunks of
/// every paced connection fall due together and a loop meets them in one
/// pass. Fifty connections of 200 kB/s, each a chunk every 10 ms at a
/// phase of its own, woke each of two loops a thousand times a second; on
/// a grid of 2 ms, at most 500, for 25% less CPU. A chunk's rate is kept
/// (its tokens are counted from when they were covered, not from when it
/// left), and a chunk that finds its tokens there, as an exchange of
/// small messages does, goes at once.
pub const PACING_GRAIN: u64 = 2_000_000;

/// How many directions of a proxy must be busy for their chunks to go on
/// the grid: as many as a chunk of 10 ms has steps of it. Fewer wake the
/// loop no more often on their own, and a lone connection keeps its
/// chunks exactly as paid: where its cadence crosses the grid, a chunk
/// would leave 2 ms late, and a receiver counting per 10 ms would see one
/// window empty and the next double.
pub const PACED_TOGETHER: usize = 5;

/// When a chunk whose tokens are covered at `at` goes, while `busy`
/// directions of its proxy have bytes on their way: on the grid if they
/// are many, else at once.
pub fn paced(at: u64, busy: usize) -> u64 {
    match busy >= PACED_TOGETHER {
        true => at.checked_next_multiple_of(PACING_GRAIN).unwrap_or(at),
        false => at,
    }
}

/// Each waiting connection's next moment, the earliest first.
#[derive(Debug, Default)]
pub struct Deadlines {
    /// (moment, connection).
    order: BTreeSet<(u64, usize)>,
    /// The moment each connection is filed under, by its key.
    filed: Vec<Option<u64>>,
    /// When the loop last looked for those due.
    looked: Option<u64>,
}

impl Deadlines {
    /// Files connection `key` under `at` (`None`: it waits for nothing),
    /// in place of what it was filed under.
    pub fn file(&mut self, key: usize, at: Option<u64>) {
        if key >= self.filed.len() {
            self.filed.resize(key + 1, None);
        }
        if let Some(old) = std::mem::replace(&mut self.filed[key], at) {
            self.order.remove(&(old, key));
        }
        if let Some(at) = at {
            self.order.insert((at, key));
        }
    }

    /// When the loop must wake for them: the earliest, but no sooner than
    /// a grain after it last looked, so that every deadline of that grain
    /// is met in the same wake-up, and one after a quiet while on time.
    pub fn wake_at(&self) -> Option<u64> {
        let earliest = self.order.first().map(|&(at, _)| at)?;
        let allowed = self.looked.map_or(0, |looked| looked.saturating_add(GRAIN));
        Some(earliest.max(allowed))
    }

    /// Adds the connections due by `now` to `into`, the earliest first.
    pub fn due(&mut self, now: u64, into: &mut Vec<usize>) {
        self.looked = Some(now);
        let due = self.order.iter().take_while(|&&(at, _)| at <= now);
        into.extend(due.map(|&(_, key)| key));
    }

    /// Adds every connection that waits for a moment to `into`: a change
    /// of settings may move them all.
    pub fn waiting(&self, into: &mut Vec<usize>) {
        into.extend(self.order.iter().map(|&(_, key)| key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_is_found_refiled_and_unfiled() {
        let mut deadlines = Deadlines::default();
        deadlines.file(3, Some(5_000_000));
        deadlines.file(7, Some(2_600_000));
        deadlines.file(1, None);
        assert_eq!(deadlines.wake_at(), Some(2_600_000));
        let mut due = Vec::new();
        deadlines.due(2_600_000, &mut due);
        assert_eq!(due, [7]);
        // Refiled later, then unfiled: only connection 3 waits.
        deadlines.file(7, Some(9_000_000));
        deadlines.file(7, None);
        due.clear();
        deadlines.waiting(&mut due);
        assert_eq!(due, [3]);
        assert_eq!(deadlines.wake_at(), Some(5_000_000));
    }

    #[test]
    fn a_deadline_after_a_quiet_while_is_met_on_time_and_the_next_a_grain_later() {
        let mut deadlines = Deadlines::default();
        deadlines.file(1, Some(1_234_567));
        assert_eq!(deadlines.wake_at(), Some(1_234_567));
        let mut due = Vec::new();
        deadlines.due(1_234_567, &mut due);
        assert_eq!(due, [1]);
        deadlines.file(1, Some(1_300_000));
        assert_eq!(deadlines.wake_at(), Some(1_234_567 + GRAIN));
        deadlines.file(1, Some(9_000_000));
        assert_eq!(deadlines.wake_at(), Some(9_000_000));
    }

    /// The loop on made-up times for a second: `connections`, each at a
    /// rate of its own (a chunk every 2.5 ms to every 100 ms, at phases
    /// of their own), are stepped when due and file their next chunk's
    /// moment, paced as among `busy` busy directions. Returns the loop's
    /// wake-ups and the latest a chunk was met after its moment.
    fn a_second_of(connections: usize, busy: usize) -> (u64, u64) {
        let mut rng = fastrand::Rng::with_seed(connections as u64);
        let periods: Vec<u64> = (0..connections)
            .map(|_| rng.u64(2_500_000..=100_000_000))
            .collect();
        let mut due_at: Vec<u64> = periods.iter().map(|&p| rng.u64(0..p)).collect();
        let mut deadlines = Deadlines::default();
        for (key, &at) in due_at.iter().enumerate() {
            deadlines.file(key, Some(paced(at, busy)));
        }
        let (mut wake_ups, mut latest, mut due) = (0, 0, Vec::new());
        while let Some(now) = deadlines.wake_at().filter(|&at| at < 1_000_000_000) {
            wake_ups += 1;
            due.clear();
            deadlines.due(now, &mut due);
            for &key in &due {
                latest = latest.max(now - due_at[key]);
                due_at[key] += periods[key];
                deadlines.file(key, Some(paced(due_at[key], busy)));
            }
        }
        (wake_ups, latest)
    }

    /// However many connections there are, the loop wakes at most once a
    /// grain, 2,000 times a second, for them, and meets each moment less
    /// than a grain late.
    #[test]
    fn any_number_of_connections_wake_the_loop_at_most_once_a_grain() {
        for connections in [1, 50, 1_000, 10_000] {
            let (wake_ups, latest) = a_second_of(connections, 0);
            assert!(wake_ups <= 2_000, "{connections}: {wake_ups} wake-ups");
            assert!(latest < GRAIN, "{connections}: {latest} ns late");
        }
    }

    /// The same connections, each waiting for its tokens: from five on,
    /// on the pacing grid, they wake the loop at most once a grid's step,
    /// 500 times a second, however many they are, each chunk less than a
    /// step late; one alone is met on time.
    #[test]
    fn paced_connections_wake_the_loop_at_most_once_a_pacing_grain() {
        for connections in [1, 5, 50, 1_000, 10_000] {
            let (wake_ups, latest) = a_second_of(connections, connections);
            let most = 1_000_000_000 / PACING_GRAIN;
            assert!(wake_ups <= most, "{connections}: {wake_ups} wake-ups");
            match connections {
                1 => assert_eq!(latest, 0, "alone, on time"),
                _ => assert!(latest < PACING_GRAIN, "{connections}: {latest} ns late"),
            }
        }
    }
}
