//! The faults of one direction of a proxied connection. [`StreamFaults`]
//! decides what becomes of each byte, as in a copy; the faults that count
//! time (the pause after a slice, the held close, a stall or reset after a
//! time) are due when the one [`Schedule`] says, which a copy sleeps until
//! and the event loop gives poll as deadlines.

use shape_impair::faults::{Faults, Retransmission, Schedule, StreamFaults};
use std::sync::atomic::Ordering;

/// What `--loss` draws from, apart from the other faults' draws: the
/// seed's, moved by a constant, so that adding a loss changes no slice,
/// drop or flip of the same seed.
const LOSS_DRAWS: u64 = 0x6c6f_7373;

/// The faults of one direction, with the moments they wait for.
pub(super) struct DirectionFaults {
    stream_faults: StreamFaults,
    /// `--loss`: the direction's lost segments and their retransmissions.
    retransmission: Retransmission,
    /// The link's delay this way and its round trip, in ns, for the
    /// retransmissions.
    delay: u64,
    round_trip: u64,
    /// Bytes still to pass before `--cut-after` ends the direction.
    cut_left: Option<u64>,
    /// When the faults that count time are due.
    schedule: Schedule,
    /// What is left of the piece being written, and whether a pause
    /// follows it.
    piece: (usize, bool),
}

impl DirectionFaults {
    /// `faults` done from `now`, drawn from `seed`, losing blocks of
    /// `block` bytes.
    pub(super) fn new(faults: Faults, seed: u64, block: usize, now: u64) -> DirectionFaults {
        let mut direction_faults = DirectionFaults {
            stream_faults: StreamFaults::new(Faults::default(), seed, block),
            retransmission: Retransmission::new(faults.loss, seed ^ LOSS_DRAWS),
            delay: 0,
            round_trip: 0,
            cut_left: None,
            schedule: Schedule::default(),
            piece: (0, false),
        };
        direction_faults.retune(faults, now);
        direction_faults
    }

    /// Does `faults` from `now` on: sizes and times count from now.
    pub(super) fn retune(&mut self, faults: Faults, now: u64) {
        let old = *self.stream_faults.faults();
        self.schedule.retune(&old, &faults, now);
        if faults.cut_after != old.cut_after {
            self.cut_left = faults.cut_after;
        }
        self.retransmission.set_loss(faults.loss);
        self.stream_faults.set_faults(faults);
    }

    /// Takes the link's delay this way and its round trip, in ns.
    pub(super) fn set_link(&mut self, delay: u64, round_trip: u64) {
        (self.delay, self.round_trip) = (delay, round_trip);
    }

    /// The earliest a chunk of `len` bytes, paid for at `now`, may be
    /// delivered, if a lost segment or `--loss`'s bound on throughput
    /// holds it; `more` says whether more of the stream waited behind it.
    pub(super) fn earliest(&mut self, len: usize, now: u64, more: bool) -> Option<u64> {
        let (delay, round_trip) = (self.delay, self.round_trip);
        self.retransmission
            .earliest(len, now, delay, round_trip, more)
    }

    /// Does what is due by `now`: a stall. Returns whether a reset is.
    pub(super) fn strike(&mut self, now: u64) -> bool {
        let due = self.schedule.due(now);
        if due.stall {
            self.stream_faults
                .struck
                .stalled
                .store(true, Ordering::Relaxed);
        }
        due.reset
    }

    /// True once a stall has struck: nothing more passes.
    pub(super) fn stalled(&self) -> bool {
        self.stream_faults.struck.stalled.load(Ordering::Relaxed)
    }

    /// Decides what of `chunk` passes, keeping only that. Returns whether
    /// the connection is to be reset, and whether `--cut-after` has ended
    /// the direction.
    pub(super) fn admit(&mut self, chunk: &mut Vec<u8>) -> (bool, bool) {
        let (kept, reset) = self.stream_faults.pass_through(chunk);
        chunk.truncate(kept);
        let Some(left) = &mut self.cut_left else {
            return (reset, false);
        };
        chunk.truncate(usize::try_from(*left).unwrap_or(usize::MAX));
        *left -= chunk.len() as u64;
        (reset, *left == 0)
    }

    /// [`DirectionFaults::admit`] of a chunk of `len` bytes that the faults need
    /// not touch (see [`DirectionFaults::touches_bytes`]), which waits elsewhere
    /// (in a pipe): how many of its first bytes pass, whether the
    /// connection is to be reset after them, and whether the cut came.
    pub(super) fn admit_length(&mut self, len: usize) -> (usize, bool, bool) {
        let (kept, reset) = self.stream_faults.pass_length(len);
        let Some(left) = &mut self.cut_left else {
            return (kept, reset, false);
        };
        let kept = kept.min(usize::try_from(*left).unwrap_or(usize::MAX));
        *left -= kept as u64;
        (kept, reset, *left == 0)
    }

    /// True if the faults read or change bytes, so that a chunk's bytes
    /// must be in memory.
    pub(super) fn touches_bytes(&self) -> bool {
        self.stream_faults.touches_bytes()
    }

    /// How many of `due` bytes may be written at `now`: a piece of the
    /// slice being written; or, while the pause after a slice lasts, until
    /// when to wait.
    pub(super) fn writable(&mut self, due: usize, now: u64) -> Result<usize, u64> {
        if let Some(until) = self.schedule.paused(now) {
            return Err(until);
        }
        if self.stream_faults.faults().slice.is_none() {
            return Ok(due);
        }
        if self.piece.0 == 0 {
            self.piece = self.stream_faults.piece(due);
        }
        Ok(self.piece.0.min(due))
    }

    /// Counts `written` bytes of the piece as out at `now`; the pause
    /// starts when a slice is.
    pub(super) fn wrote(&mut self, written: usize, now: u64) {
        if self.stream_faults.faults().slice.is_none() {
            return;
        }
        self.piece.0 -= written.min(self.piece.0);
        if self.piece == (0, true) {
            self.schedule
                .sliced(self.stream_faults.faults().slice_pause, now);
        }
    }

    /// Whether the close, held for `--slow-close` after the data ended,
    /// may happen at `now`; if not, when it may.
    pub(super) fn close_due(&mut self, now: u64) -> Result<(), u64> {
        self.schedule
            .close_due(self.stream_faults.faults().slow_close, now)
    }

    /// The next moment a fault strikes by time, if one will.
    pub(super) fn deadline(&self) -> Option<u64> {
        self.schedule.next()
    }

    /// What was done, if any fault that is counted was asked for.
    pub(super) fn tally(&self) -> Option<String> {
        let retransmitted = self.retransmission.lost > 0;
        let retransmitted = retransmitted.then(|| {
            let lost = self.retransmission.lost;
            let segments = if lost == 1 { "segment" } else { "segments" };
            format!(
                "{lost} {segments} lost and sent again, {} ms waited",
                self.retransmission.waited / 1_000_000
            )
        });
        let said = [
            self.stream_faults
                .tally
                .describe(self.stream_faults.faults()),
            retransmitted,
        ];
        let said: Vec<String> = said.into_iter().flatten().collect();
        (!said.is_empty()).then(|| said.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_impair::faults::{Slice, Trigger};
    use std::time::Duration;

    const MS: u64 = 1_000_000;

    fn slicing(size: u64, pause_ms: u64) -> Faults {
        Faults {
            slice: Some(Slice { size, variation: 0 }),
            slice_pause: Duration::from_millis(pause_ms),
            ..Faults::default()
        }
    }

    #[test]
    fn pieces_wait_out_the_pause_and_a_partial_write_finishes_its_piece_first() {
        let mut direction_faults = DirectionFaults::new(slicing(7, 10), 1, 1000, 0);
        assert_eq!(direction_faults.writable(100, 0), Ok(7));
        direction_faults.wrote(3, 0);
        assert_eq!(
            direction_faults.writable(97, 0),
            Ok(4),
            "the rest of the piece"
        );
        direction_faults.wrote(4, 0);
        assert_eq!(direction_faults.writable(93, 5 * MS), Err(10 * MS));
        assert_eq!(direction_faults.writable(93, 10 * MS), Ok(7));
    }

    #[test]
    fn stalls_resets_and_cuts_count_from_when_they_are_set() {
        let stall = Faults {
            stall_after: Some(Trigger::After(Duration::from_millis(50))),
            reset_after: Some(Trigger::After(Duration::from_millis(80))),
            cut_after: Some(10),
            ..Faults::default()
        };
        let mut direction_faults = DirectionFaults::new(stall, 1, 1000, 100 * MS);
        assert_eq!(direction_faults.deadline(), Some(150 * MS));
        assert!(!direction_faults.strike(149 * MS) && !direction_faults.stalled());
        assert!(!direction_faults.strike(150 * MS) && direction_faults.stalled());
        assert!(direction_faults.strike(180 * MS));
        let mut cut = DirectionFaults::new(
            Faults {
                cut_after: Some(10),
                ..Faults::default()
            },
            1,
            1000,
            0,
        );
        let mut chunk = vec![1; 6];
        assert_eq!(cut.admit(&mut chunk), (false, false));
        let mut chunk = vec![2; 6];
        assert_eq!(cut.admit(&mut chunk), (false, true));
        assert_eq!(chunk, [2; 4]);
        assert_eq!(cut.close_due(5), Ok(()), "no slow close");
    }

    #[test]
    fn a_close_is_held_for_the_slow_close() {
        let mut direction_faults = DirectionFaults::new(
            Faults {
                slow_close: Duration::from_millis(20),
                ..Faults::default()
            },
            1,
            1000,
            0,
        );
        assert_eq!(direction_faults.close_due(MS), Err(21 * MS));
        assert_eq!(direction_faults.close_due(20 * MS), Err(21 * MS));
        assert_eq!(direction_faults.close_due(21 * MS), Ok(()));
    }
}
