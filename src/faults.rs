//! Faults for tests: what a link does wrong on purpose, as toxiproxy's
//! toxics and tc netem do, reproducible by seed. [`Faults`] is what the
//! flags ask for; [`Mischief`] carries them out on one stream, with a
//! random generator of its own, and tallies what it did.
//!
//! - `--slice SIZE[:VARIATION]`, `--slice-pause DURATION`: every write
//!   cut into pieces of about SIZE bytes, each written on its own, with
//!   the pause between them (toxiproxy's slicer).
//! - `--drop PROB`: a chunk (about a millisecond of data) is lost
//!   (toxiproxy's packet loss, for tests of checksums and framing).
//! - `--corrupt PROB`: each byte has one random bit flipped with that
//!   probability (netem's corrupt).
//! - `--cut-after SIZE`, `--slow-close DURATION`: exactly SIZE bytes, then
//!   a clean close, held that long (toxiproxy's limit_data and
//!   slow_close).
//!
//! Every random choice (slices, drops, corruption, jitter) comes from a
//! generator seeded by `--seed`, or by a seed drawn at start and shown by
//! `--stats`, so that a failing test can be replayed.

use std::time::Duration;

/// What the fault flags ask for. The default does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    pub slice: Option<Slice>,
    pub slice_pause: Duration,
    /// The chance that a chunk is lost.
    pub drop: f64,
    /// The chance that a byte has a bit flipped.
    pub corrupt: f64,
    pub cut_after: Option<u64>,
    pub slow_close: Duration,
}

impl Faults {
    /// True if and only if something passes through altered or in pieces,
    /// so that bytes must go through shape's hands.
    pub fn alter(&self) -> bool {
        self.slice.is_some() || self.drop > 0.0 || self.corrupt > 0.0
    }
}

/// `--slice SIZE[:VARIATION]`: pieces of SIZE bytes, each within
/// SIZE ± VARIATION (at least one byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub size: u64,
    pub variation: u64,
}

impl std::str::FromStr for Slice {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        const EXAMPLES: &str = "e.g. 7, 1KiB, 1KiB:512";
        let size = |text: &str| {
            text.parse::<shape_bucket::units::Size>()
                .map(|size| size.bytes())
                .map_err(|e| format!("{e} ({EXAMPLES})"))
        };
        let (piece, variation) = match text.split_once(':') {
            Some((piece, variation)) => (size(piece)?, size(variation)?),
            None => (size(text)?, 0),
        };
        if piece == 0 {
            return Err(format!("a slice is at least 1 byte ({EXAMPLES})"));
        }
        if variation >= piece {
            return Err(format!(
                "the variation must be less than the size ({EXAMPLES})"
            ));
        }
        Ok(Slice {
            size: piece,
            variation,
        })
    }
}

/// Parses a probability: `0.01`, `1%`, from 0 to 1.
pub fn parse_probability(text: &str) -> Result<f64, String> {
    const EXAMPLES: &str = "e.g. 0.01, 1%, 0.5";
    let text = text.trim();
    let (number, scale) = match text.strip_suffix('%') {
        Some(number) => (number.trim(), 100.0),
        None => (text, 1.0),
    };
    let plain = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let value = plain
        .then(|| number.parse::<f64>().ok())
        .flatten()
        .map(|n| n / scale)
        .ok_or_else(|| format!("expected a probability ({EXAMPLES})"))?;
    if !(0.0..=1.0).contains(&value) {
        return Err(format!("a probability is from 0 to 1 ({EXAMPLES})"));
    }
    Ok(value)
}

/// What [`Mischief`] did, for the line shape says at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub dropped_chunks: u64,
    pub dropped_bytes: u64,
    pub corrupted_bytes: u64,
}

impl Tally {
    /// The end-of-run line, if any fault that is counted was asked for.
    pub fn line(&self, faults: &Faults) -> Option<String> {
        let mut said = Vec::new();
        if faults.drop > 0.0 {
            said.push(format!(
                "dropped {} chunks ({} bytes)",
                self.dropped_chunks, self.dropped_bytes
            ));
        }
        if faults.corrupt > 0.0 {
            said.push(format!("corrupted {} bytes", self.corrupted_bytes));
        }
        (!said.is_empty()).then(|| format!("shape: {}", said.join(", ")))
    }
}

/// The faults of one stream, carried out with a generator of its own.
pub struct Mischief {
    faults: Faults,
    rng: fastrand::Rng,
    pub tally: Tally,
}

impl Mischief {
    pub fn new(faults: Faults, seed: u64) -> Mischief {
        Mischief {
            faults,
            rng: fastrand::Rng::with_seed(seed),
            tally: Tally::default(),
        }
    }

    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Decides the fate of `chunk`: false if it is lost; else it passes,
    /// with bits flipped in place where corruption strikes.
    pub fn pass(&mut self, chunk: &mut [u8]) -> bool {
        if self.faults.drop > 0.0 && self.rng.f64() < self.faults.drop {
            self.tally.dropped_chunks += 1;
            self.tally.dropped_bytes += chunk.len() as u64;
            return false;
        }
        if self.faults.corrupt > 0.0 {
            for byte in chunk.iter_mut() {
                if self.rng.f64() < self.faults.corrupt {
                    *byte ^= 1 << self.rng.u8(0..8);
                    self.tally.corrupted_bytes += 1;
                }
            }
        }
        true
    }

    /// The size of the next piece of at most `left` bytes: all of them
    /// without slicing, else about the slice's size.
    pub fn piece(&mut self, left: usize) -> usize {
        match self.faults.slice {
            None => left,
            Some(Slice { size, variation }) => {
                let drawn = match variation {
                    0 => size,
                    v => self.rng.u64(size - v..=size + v),
                };
                usize::try_from(drawn)
                    .unwrap_or(usize::MAX)
                    .clamp(1, left.max(1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults() -> Faults {
        Faults::default()
    }

    #[test]
    fn slices_and_probabilities_parse() {
        assert_eq!(
            "7".parse::<Slice>(),
            Ok(Slice {
                size: 7,
                variation: 0
            })
        );
        assert_eq!(
            "1KiB:512".parse::<Slice>(),
            Ok(Slice {
                size: 1024,
                variation: 512
            })
        );
        for bad in ["0", "7:7", "7:9", "x", "", "1:", ":1"] {
            assert!(bad.parse::<Slice>().is_err(), "{bad}");
        }
        assert_eq!(parse_probability("0.25"), Ok(0.25));
        assert_eq!(parse_probability("1%"), Ok(0.01));
        assert_eq!(parse_probability("1"), Ok(1.0));
        for bad in ["", "-0.1", "1.5", "101%", "nan", "inf", "1e-3", "x%"] {
            assert!(parse_probability(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pieces_stay_within_the_variation_and_cover_everything() {
        let mut mischief = Mischief::new(
            Faults {
                slice: Some(Slice {
                    size: 10,
                    variation: 3,
                }),
                ..faults()
            },
            7,
        );
        let mut left = 10_000usize;
        let mut sizes = Vec::new();
        while left > 0 {
            let piece = mischief.piece(left);
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
        assert_eq!(Mischief::new(faults(), 1).piece(500), 500, "no slicing");
    }

    #[test]
    fn the_same_seed_does_the_same_mischief_and_the_tally_is_exact() {
        let run = |seed| {
            let mut mischief = Mischief::new(
                Faults {
                    drop: 0.1,
                    corrupt: 0.01,
                    ..faults()
                },
                seed,
            );
            let mut out = Vec::new();
            for i in 0..1000u32 {
                let mut chunk = vec![(i % 251) as u8; 100];
                if mischief.pass(&mut chunk) {
                    out.extend(chunk);
                }
            }
            (out, mischief.tally)
        };
        let (first, tally) = run(42);
        assert_eq!(run(42), (first.clone(), tally), "replayed");
        assert_ne!(run(43).0, first, "another seed, another run");
        assert!((60..140).contains(&tally.dropped_chunks), "{tally:?}");
        assert_eq!(tally.dropped_bytes, tally.dropped_chunks * 100);
        // Every corrupted byte differs from what came in by one bit.
        let mut expected = Vec::new();
        let mut rng = Mischief::new(
            Faults {
                drop: 0.1,
                corrupt: 0.01,
                ..faults()
            },
            42,
        );
        for i in 0..1000u32 {
            let mut chunk = vec![(i % 251) as u8; 100];
            let original = chunk.clone();
            if rng.pass(&mut chunk) {
                expected.extend(original);
            }
        }
        let flipped: u64 = first
            .iter()
            .zip(&expected)
            .map(|(a, b)| u64::from((a ^ b).count_ones()))
            .sum();
        assert_eq!(flipped, tally.corrupted_bytes);
        assert_eq!(
            tally.line(&Faults {
                drop: 0.1,
                corrupt: 0.01,
                ..faults()
            }),
            Some(format!(
                "shape: dropped {} chunks ({} bytes), corrupted {} bytes",
                tally.dropped_chunks, tally.dropped_bytes, tally.corrupted_bytes
            ))
        );
    }
}
