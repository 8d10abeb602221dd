//! Faults for tests: what a link does wrong on purpose, as toxiproxy's
//! toxics and tc netem do, reproducible by seed. [`Faults`] is what the
//! flags ask for; [`StreamFaults`] carries them out on one stream, with a
//! random generator of its own, and tallies what it did.
//!
//! - `--slice SIZE[:VARIATION]`, `--slice-pause DURATION`: every write
//!   cut into pieces of about SIZE bytes, each written on its own, with
//!   the pause between them (toxiproxy's slicer).
//! - `--loss PROB`: packets lost as a TCP program meets it, its stream
//!   stalled for each retransmission and its throughput bounded, never a
//!   byte missing (`retransmission.rs`); a UDP link's datagrams lost.
//! - `--drop PROB`: a block of the stream (a chunk at the starting
//!   rate, at most 1 KiB) is deleted: a corrupt transfer, for tests of
//!   checksums and framing.
//! - `--corrupt PROB`: each byte has one random bit flipped with that
//!   probability (netem's corrupt).
//! - `--cut-after SIZE`, `--slow-close DURATION`: exactly SIZE bytes, then
//!   a clean close, held that long (toxiproxy's limit_data and
//!   slow_close).
//! - `--stall-after SIZE|DURATION`: after that much data or time, nothing
//!   more is forwarded, and the stream stays open (toxiproxy's timeout of
//!   0, a black hole).
//! - `--reset-after SIZE|DURATION`: after that much, the stream is reset.
//!
//! Every random choice (slices, drops, corruption, jitter) comes from a
//! generator seeded by `--seed`, or by a seed drawn at start and shown by
//! `--stats`, so that a failing test can be replayed. Each kind of fault
//! draws from a generator of its own, in the order of the stream's bytes
//! (a drop per block, a flip per byte, a slice per piece, carried across
//! writes), so the same seed does the same to the same bytes however the
//! input happened to arrive.

mod change;
mod directed;
mod loss;
mod mtu;
mod retransmission;
mod schedule;
mod stream;

pub use change::{Change, FaultFlags, Needs};
pub use directed::{Bytes, Directed, Probability, Span, Way};
pub use loss::{Losing, Loss};
pub use mtu::{LARGEST_DATAGRAM, Mtu, Oversize};
pub use retransmission::{Retransmission, throughput_bound};
pub use schedule::Schedule;
pub use stream::{ResetStruck, StreamFaults, Struck, Tally};

use std::time::Duration;

/// The most `--drop` loses at once: about a packet, so that a small loss
/// rate loses something of a short stream (1% of 1 MiB is some ten
/// blocks, where a 512 KiB chunk would be two chances).
const MOST_DROPPED_AT_ONCE: usize = 1024;

/// The block `--drop` loses whole, for a stream paid for in chunks of
/// `chunk` bytes (2.5 ms of the starting rate): a chunk, or a packet's
/// worth if that is less. Fixed at the start, so that a seed replays
/// whatever the rate does later.
pub fn drop_block(chunk: usize) -> usize {
    chunk.clamp(1, MOST_DROPPED_AT_ONCE)
}

/// What the fault flags ask for. The default does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    pub slice: Option<Slice>,
    pub slice_pause: Duration,
    /// How blocks ([`drop_block`]) or datagrams are lost.
    pub drop: Loss,
    /// How packets are lost: a stream's segments, which TCP sends again
    /// ([`Retransmission`]), or a UDP link's datagrams.
    pub loss: Loss,
    /// The chance that a byte has a bit flipped.
    pub corrupt: f64,
    pub cut_after: Option<u64>,
    pub slow_close: Duration,
    pub stall_after: Option<Trigger>,
    pub reset_after: Option<Trigger>,
    /// A UDP link's: the chance that a datagram is sent twice, and that
    /// it skips the delay; its MTU.
    pub duplicate: f64,
    pub reorder: f64,
    pub mtu: Option<Mtu>,
}

impl Faults {
    /// True if and only if something passes through altered or in pieces,
    /// so that bytes must go through shape's hands.
    pub fn alter(&self) -> bool {
        self.slice.is_some()
            || self.drop.rate() > 0.0
            || self.corrupt > 0.0
            || self.stall_after.is_some()
            || self.reset_after.is_some()
    }
}

impl Faults {
    /// True if and only if something in them is drawn at random, from
    /// the seed: then a run says its seed, so that it can be replayed.
    pub fn draws(&self) -> bool {
        self.slice.is_some_and(|slice| slice.variation > 0)
            || self.drop.rate() > 0.0
            || self.loss.rate() > 0.0
            || self.corrupt > 0.0
            || self.duplicate > 0.0
            || self.reorder > 0.0
    }
}

impl std::fmt::Display for Faults {
    /// The faults in force as their flags would give them, without the
    /// dashes: `slice 7, drop 1%, stall-after 2s`; empty if none.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let time = |span: Duration| humantime::format_duration(span).to_string();
        let trigger = |trigger: Trigger| match trigger {
            Trigger::Bytes(bytes) => format!("{bytes} bytes"),
            Trigger::After(span) => time(span),
        };
        let percent = |chance: f64| format!("{}%", chance * 100.0);
        let said: Vec<String> = [
            self.slice.map(|slice| match slice.variation {
                0 => format!("slice {}", slice.size),
                variation => format!("slice {}:{variation}", slice.size),
            }),
            (!self.slice_pause.is_zero())
                .then(|| format!("slice-pause {}", time(self.slice_pause))),
            (self.drop.rate() > 0.0).then(|| match self.drop {
                Loss::Random(chance) => format!("drop {}", percent(chance)),
                model => format!("drop {model}"),
            }),
            (self.loss.rate() > 0.0).then(|| match self.loss {
                Loss::Random(chance) => format!("loss {}", percent(chance)),
                model => format!("loss {model}"),
            }),
            (self.corrupt > 0.0).then(|| format!("corrupt {}", percent(self.corrupt))),
            self.cut_after
                .map(|bytes| format!("cut-after {bytes} bytes")),
            (!self.slow_close.is_zero()).then(|| format!("slow-close {}", time(self.slow_close))),
            self.stall_after
                .map(|at| format!("stall-after {}", trigger(at))),
            self.reset_after
                .map(|at| format!("reset-after {}", trigger(at))),
            (self.duplicate > 0.0).then(|| format!("duplicate {}", percent(self.duplicate))),
            (self.reorder > 0.0).then(|| format!("reorder {}", percent(self.reorder))),
            self.mtu.map(|mtu| format!("mtu {mtu}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        f.write_str(&said.join(", "))
    }
}

/// When a fault strikes: after so many bytes, or so long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Bytes(u64),
    After(Duration),
}

impl Trigger {
    /// The bytes after which it strikes, if it counts bytes.
    pub fn bytes(self) -> Option<u64> {
        match self {
            Trigger::Bytes(bytes) => Some(bytes),
            Trigger::After(_) => None,
        }
    }

    /// The time after which it strikes, if it counts time.
    pub fn time(self) -> Option<Duration> {
        match self {
            Trigger::After(time) => Some(time),
            Trigger::Bytes(_) => None,
        }
    }
}

impl std::str::FromStr for Trigger {
    type Err = String;

    /// A size (`4096`, `1KiB`, `1m` is a mebibyte) or a time with its unit
    /// (`500ms`, `2s`, `1min`).
    fn from_str(text: &str) -> Result<Self, String> {
        const EXAMPLES: &str = "e.g. 1KiB, 4096, 500ms, 2s, 1min";
        if let Ok(size) = text.parse::<shape_bucket::units::Size>() {
            return Ok(Trigger::Bytes(size.bytes()));
        }
        humantime::parse_duration(text.trim())
            .map(Trigger::After)
            .map_err(|_| format!("expected a size or a time ({EXAMPLES})"))
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
        // The size's own examples give way to a slice's.
        let size = |text: &str| {
            text.parse::<shape_bucket::units::Size>()
                .map(|size| size.bytes())
                .map_err(|e| {
                    let why = e.split(" (e.g.").next().unwrap_or(&e).to_string();
                    format!("{why} ({EXAMPLES})")
                })
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
