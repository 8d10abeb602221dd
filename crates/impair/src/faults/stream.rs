//! [`StreamFaults`]: the faults of one stream carried out, block by block,
//! with a seeded generator per kind of fault, and tallied.

use super::{Faults, Losing, Slice, Trigger};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The error a write meets once `--reset-after` strikes: the stream is to
/// be reset, not written.
#[derive(Debug, thiserror::Error)]
#[error("reset, as --reset-after asked")]
pub struct ResetStruck;

impl ResetStruck {
    /// True if `err` is this.
    pub fn is(err: &std::io::Error) -> bool {
        err.get_ref().is_some_and(|inner| inner.is::<ResetStruck>())
    }
}

/// What [`StreamFaults`] did, for the line shape says at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub dropped_blocks: u64,
    pub dropped_bytes: u64,
    pub corrupted_bytes: u64,
}

impl Tally {
    /// The end-of-run line, if any fault that is counted was asked for.
    pub fn line(&self, faults: &Faults) -> Option<String> {
        self.describe(faults).map(|said| format!("shape: {said}"))
    }

    /// What was done, if any fault that is counted was asked for or did
    /// something: `dropped 3 blocks (3072 bytes), corrupted 5 bytes`.
    pub fn describe(&self, faults: &Faults) -> Option<String> {
        let mut said = Vec::new();
        let many = |n: u64, one: &str| match n {
            1 => format!("1 {one}"),
            n => format!("{n} {one}s"),
        };
        if faults.drop.rate() > 0.0 || self.dropped_blocks > 0 {
            said.push(format!(
                "dropped {} ({})",
                many(self.dropped_blocks, "block"),
                many(self.dropped_bytes, "byte")
            ));
        }
        if faults.corrupt > 0.0 || self.corrupted_bytes > 0 {
            said.push(format!("corrupted {}", many(self.corrupted_bytes, "byte")));
        }
        (!said.is_empty()).then(|| said.join(", "))
    }
}

/// The faults of one stream, carried out with generators of its own.
pub struct StreamFaults {
    faults: Faults,
    /// Whether each block is lost: the loss model's state, and its draws.
    losing: Losing,
    drops: fastrand::Rng,
    /// Which bytes have a bit flipped, and which bit.
    flips: fastrand::Rng,
    /// The size of each slice.
    slices: fastrand::Rng,
    pub tally: Tally,
    /// The bytes that stand or fall together with `--drop`.
    block: u64,
    /// Bytes offered so far, lost or not: the position in the stream.
    offered: u64,
    /// Whether the block being offered is lost.
    dropping: bool,
    /// What is left of the slice being written.
    slice_left: u64,
    /// Bytes let through so far.
    passed: u64,
    /// Set once the stream stalls or is reset, by bytes here or by time
    /// from a timer.
    pub struck: Arc<Struck>,
}

/// Whether a stall or a reset has struck.
#[derive(Debug, Default)]
pub struct Struck {
    pub stalled: AtomicBool,
    pub reset: AtomicBool,
}

/// What becomes of the bytes offered to [`StreamFaults::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// This many of them pass (all, or up to a stall or reset).
    Pass(usize),
    /// They are lost; and everything after them while stalled.
    Lost,
    /// The stream is to be reset now.
    Reset,
}

impl StreamFaults {
    /// The faults of one stream, drawn from `seed`, losing blocks of `block` bytes (at least one).
    pub fn new(faults: Faults, seed: u64, block: usize) -> StreamFaults {
        let mut seeds = fastrand::Rng::with_seed(seed);
        StreamFaults {
            losing: Losing::new(faults.drop),
            faults,
            drops: seeds.fork(),
            flips: seeds.fork(),
            slices: seeds.fork(),
            tally: Tally::default(),
            block: block.max(1) as u64,
            offered: 0,
            dropping: false,
            slice_left: 0,
            passed: 0,
            struck: Arc::new(Struck::default()),
        }
    }

    /// How many bytes may be offered to [`StreamFaults::admit`] at once: the
    /// rest of the block.
    pub fn block_left(&self) -> usize {
        usize::try_from(self.block - self.offered % self.block).unwrap_or(usize::MAX)
    }

    /// Decides the fate of `chunk`, which lies within one block (see
    /// [`StreamFaults::block_left`]): lost, reset, or (some of) it passes, with
    /// bits flipped where corruption strikes. A stall or reset that counts
    /// bytes strikes exactly at its byte.
    pub fn admit(&mut self, chunk: &mut [u8]) -> Fate {
        self.admit_with(chunk.len(), |stream_faults, at| {
            stream_faults.pass(chunk, at)
        })
    }

    /// True if the faults read or change bytes (`--drop`, `--corrupt`), so
    /// that a stream's bytes must pass through memory; the rest (slices,
    /// cuts, stalls, resets, a held close) need only their count.
    pub fn touches_bytes(&self) -> bool {
        self.faults.drop.rate() > 0.0 || self.faults.corrupt > 0.0
    }

    /// [`StreamFaults::pass_through`] of `len` bytes that wait where the
    /// faults cannot touch them (in a pipe): how many of them pass, and
    /// whether the stream is to be reset after them. What passes is always
    /// their front. Bytes that came in before a drop or a corruption was
    /// asked for pass untouched: it applies from the next bytes read.
    pub fn pass_length(&mut self, len: usize) -> (usize, bool) {
        let (mut offered, mut kept) = (0, 0);
        while offered < len {
            let block = (len - offered).min(self.block_left());
            match self.admit_with(block, |_, _| true) {
                Fate::Lost => {}
                Fate::Reset => return (kept, true),
                Fate::Pass(passing) => kept += passing,
            }
            offered += block;
        }
        (kept, self.struck.reset.load(Ordering::Relaxed))
    }

    /// Decides the fate of `len` bytes within one block, `pass` deciding
    /// (and doing) the loss and corruption of the bytes at a position.
    fn admit_with(&mut self, len: usize, pass: impl FnOnce(&mut Self, u64) -> bool) -> Fate {
        debug_assert!(len <= self.block_left());
        let at = self.offered;
        self.offered += len as u64;
        if self.struck.reset.load(Ordering::Relaxed) {
            return Fate::Reset;
        }
        if self.struck.stalled.load(Ordering::Relaxed) || !pass(self, at) {
            return Fate::Lost;
        }
        let limit = |trigger: Option<Trigger>| {
            trigger
                .and_then(Trigger::bytes)
                .map_or(u64::MAX, |at| at.saturating_sub(self.passed))
        };
        let (stall, reset) = (
            limit(self.faults.stall_after),
            limit(self.faults.reset_after),
        );
        let room = usize::try_from(stall.min(reset)).unwrap_or(usize::MAX);
        if room == 0 {
            // A trigger at byte 0: it strikes now, and these bytes fall
            // to it.
            return match reset <= stall {
                true => {
                    self.struck.reset.store(true, Ordering::Relaxed);
                    Fate::Reset
                }
                false => {
                    self.struck.stalled.store(true, Ordering::Relaxed);
                    Fate::Lost
                }
            };
        }
        let passing = len.min(room);
        self.passed += passing as u64;
        if passing as u64 == stall.min(reset) {
            // The last byte before the fault: it strikes now, not at the
            // next byte, which may never come.
            match reset <= stall {
                true => self.struck.reset.store(true, Ordering::Relaxed),
                false => self.struck.stalled.store(true, Ordering::Relaxed),
            }
        }
        Fate::Pass(passing)
    }

    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Does `faults` from now on, as a change sent by `--remote` asks. A
    /// stall or reset that counts bytes counts them from now; a stall
    /// changed or turned off lets bytes through again.
    pub fn set_faults(&mut self, faults: Faults) {
        if faults.stall_after != self.faults.stall_after
            || faults.reset_after != self.faults.reset_after
        {
            self.passed = 0;
            self.struck.stalled.store(false, Ordering::Relaxed);
        }
        if faults.drop != self.faults.drop {
            self.losing = Losing::new(faults.drop);
        }
        self.faults = faults;
    }

    /// Decides the fate of every byte of `chunk` in place, block by block:
    /// what passes is gathered at its front. Returns how many bytes pass,
    /// and whether the stream is to be reset after them.
    pub fn pass_through(&mut self, chunk: &mut [u8]) -> (usize, bool) {
        let (mut offered, mut kept) = (0, 0);
        while offered < chunk.len() {
            let block = (chunk.len() - offered).min(self.block_left());
            match self.admit(&mut chunk[offered..offered + block]) {
                Fate::Lost => {}
                Fate::Reset => return (kept, true),
                Fate::Pass(passing) => {
                    // Nothing lost yet: the bytes are in place already.
                    if kept != offered {
                        chunk.copy_within(offered..offered + passing, kept);
                    }
                    kept += passing;
                }
            }
            offered += block;
        }
        (kept, self.struck.reset.load(Ordering::Relaxed))
    }

    /// Decides whether `chunk`, at stream position `at`, is lost; if it
    /// passes, bits are flipped in place where corruption strikes.
    fn pass(&mut self, chunk: &mut [u8], at: u64) -> bool {
        if self.faults.drop.rate() > 0.0 && at % self.block == 0 {
            self.dropping = self.losing.loses(&mut self.drops);
            if self.dropping {
                self.tally.dropped_blocks += 1;
            }
        }
        if self.dropping {
            self.tally.dropped_bytes += chunk.len() as u64;
            return false;
        }
        if self.faults.corrupt > 0.0 {
            for byte in chunk.iter_mut() {
                if self.flips.f64() < self.faults.corrupt {
                    *byte ^= 1 << self.flips.u8(0..8);
                    self.tally.corrupted_bytes += 1;
                }
            }
        }
        true
    }

    /// The next piece of at most `left` bytes: all of them without
    /// slicing, else what is left of the slice being written, a slice of
    /// about the size asked being drawn when one is done. The flag says
    /// whether the piece ends its slice, so that the pause follows it.
    pub fn piece(&mut self, left: usize) -> (usize, bool) {
        let Some(Slice { size, variation }) = self.faults.slice else {
            return (left, false);
        };
        if self.slice_left == 0 {
            self.slice_left = match variation {
                0 => size,
                v => self.slices.u64(size - v..=size + v),
            };
        }
        let piece = self.slice_left.min(left as u64);
        self.slice_left -= piece;
        (piece as usize, self.slice_left == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn faults() -> Faults {
        Faults::default()
    }

    #[test]
    fn pieces_stay_within_the_variation_and_cover_everything() {
        let mut stream_faults = StreamFaults::new(
            Faults {
                slice: Some(Slice {
                    size: 10,
                    variation: 3,
                }),
                ..faults()
            },
            7,
            100,
        );
        let mut left = 10_000usize;
        let mut sizes = Vec::new();
        while left > 0 {
            let (piece, ends) = stream_faults.piece(left);
            assert!(ends || piece == left);
            sizes.push(piece);
            left -= piece;
        }
        assert!(
            sizes[..sizes.len() - 1]
                .iter()
                .all(|&s| (7..=13).contains(&s))
        );
        assert_eq!(sizes.iter().sum::<usize>(), 10_000);
        assert!(sizes.contains(&7) && sizes.contains(&13));
        assert_eq!(
            StreamFaults::new(faults(), 1, 100).piece(500),
            (500, false),
            "no slicing"
        );
    }

    #[test]
    fn the_tally_counts_one_in_the_singular() {
        let tally = Tally {
            dropped_blocks: 1,
            dropped_bytes: 1,
            corrupted_bytes: 1,
        };
        assert_eq!(
            tally.describe(&Faults::default()).unwrap(),
            "dropped 1 block (1 byte), corrupted 1 byte"
        );
    }

    #[test]
    fn the_same_seed_does_the_same_faults_and_the_tally_is_exact() {
        let run = |seed| {
            let mut stream_faults = StreamFaults::new(
                Faults {
                    drop: crate::faults::Loss::Random(0.1),
                    corrupt: 0.01,
                    ..faults()
                },
                seed,
                100,
            );
            let mut out: Vec<u8> = Vec::new();
            for i in 0..1000u32 {
                let mut chunk = vec![(i % 251) as u8; 100];
                if let Fate::Pass(n) = stream_faults.admit(&mut chunk) {
                    out.extend(&chunk[..n]);
                }
            }
            (out, stream_faults.tally)
        };
        let (first, tally) = run(42);
        assert_eq!(run(42), (first.clone(), tally), "replayed");
        assert_ne!(run(43).0, first, "another seed, another run");
        assert!((60..140).contains(&tally.dropped_blocks), "{tally:?}");
        assert_eq!(tally.dropped_bytes, tally.dropped_blocks * 100);
        // Every corrupted byte differs from what came in by one bit.
        let mut expected: Vec<u8> = Vec::new();
        let mut rng = StreamFaults::new(
            Faults {
                drop: crate::faults::Loss::Random(0.1),
                corrupt: 0.01,
                ..faults()
            },
            42,
            100,
        );
        for i in 0..1000u32 {
            let mut chunk = vec![(i % 251) as u8; 100];
            let original = chunk.clone();
            if let Fate::Pass(n) = rng.admit(&mut chunk) {
                expected.extend(&original[..n]);
            }
        }
        let flipped: u64 = first
            .iter()
            .zip(&expected)
            .map(|(a, b): (&u8, &u8)| u64::from((a ^ b).count_ones()))
            .sum();
        assert_eq!(flipped, tally.corrupted_bytes);
        assert_eq!(
            tally.line(&Faults {
                drop: crate::faults::Loss::Random(0.1),
                corrupt: 0.01,
                ..faults()
            }),
            Some(format!(
                "shape: dropped {} blocks ({} bytes), corrupted {} bytes",
                tally.dropped_blocks, tally.dropped_bytes, tally.corrupted_bytes
            ))
        );
    }

    #[test]
    fn a_stall_or_reset_strikes_at_its_byte_and_sizes_and_times_parse() {
        assert_eq!("1KiB".parse(), Ok(Trigger::Bytes(1024)));
        assert_eq!("1m".parse(), Ok(Trigger::Bytes(1 << 20)));
        assert_eq!("2s".parse(), Ok(Trigger::After(Duration::from_secs(2))));
        assert_eq!("1min".parse(), Ok(Trigger::After(Duration::from_secs(60))));
        assert!("soon".parse::<Trigger>().is_err());
        let mut stalling = StreamFaults::new(
            Faults {
                stall_after: Some(Trigger::Bytes(150)),
                ..faults()
            },
            1,
            100,
        );
        assert_eq!(stalling.admit(&mut [0; 100]), Fate::Pass(100));
        assert_eq!(stalling.admit(&mut [0; 100]), Fate::Pass(50));
        assert_eq!(stalling.admit(&mut [0; 100]), Fate::Lost);
        let mut resetting = StreamFaults::new(
            Faults {
                reset_after: Some(Trigger::Bytes(100)),
                stall_after: Some(Trigger::Bytes(200)),
                ..faults()
            },
            1,
            100,
        );
        assert_eq!(resetting.admit(&mut [0; 100]), Fate::Pass(100));
        assert_eq!(resetting.admit(&mut [0; 1]), Fate::Reset);
        let timed = StreamFaults::new(faults(), 1, 100);
        timed.struck.stalled.store(true, Ordering::Relaxed);
        let mut timed = timed;
        assert_eq!(timed.admit(&mut [0; 5]), Fate::Lost);
    }

    #[test]
    fn a_length_passes_as_its_bytes_would() {
        // Stalls and resets by bytes, at every offset around the chunks:
        // what passes of a length is what passes of its bytes.
        for (stall, reset) in [
            (Some(0), None),
            (Some(700), None),
            (None, Some(1)),
            (None, Some(1500)),
            (Some(900), Some(900)),
        ] {
            let faults = Faults {
                stall_after: stall.map(Trigger::Bytes),
                reset_after: reset.map(Trigger::Bytes),
                ..faults()
            };
            let mut by_bytes = StreamFaults::new(faults, 3, 256);
            let mut by_length = StreamFaults::new(faults, 3, 256);
            assert!(!by_length.touches_bytes());
            for len in [100, 300, 5, 1000, 64, 2000] {
                let bytes = by_bytes.pass_through(&mut vec![7; len]);
                assert_eq!(
                    by_length.pass_length(len),
                    bytes,
                    "{stall:?} {reset:?} {len}"
                );
            }
        }
        let corrupting = StreamFaults::new(
            Faults {
                corrupt: 0.1,
                ..faults()
            },
            1,
            10,
        );
        assert!(corrupting.touches_bytes());
    }
}
