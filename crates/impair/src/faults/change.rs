//! A [`Change`]: one fault flag's value, as given at start or sent by
//! `--remote` to a running shape, and how it changes [`Faults`].
//!
//! Every fault is one row of the table below: its flag's name, the kind of
//! value it takes, whether it ends or holds a stream (those a copy takes
//! at start only), its help text and clap attributes (clap's only with
//! the `cli` feature), and what it does to
//! [`Faults`]. The command line ([`FaultFlags`], flattened into the CLI),
//! the remote protocol ([`Change::parse`], [`Change::name`]) and those
//! who carry faults out ([`Change::apply`]) all read it. Adding a fault is
//! a row here, a field in [`Faults`], and the code that does it.

use super::{Bytes, Directed, Faults, Loss, Mtu, Probability, Slice, Span, Trigger, Way};
use std::time::Duration;

/// What a fault needs to act on, and so where it may be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Anything: a stream's blocks, or a link's datagrams.
    Anything,
    /// A stream's bytes, to cut into pieces.
    Stream,
    /// A stream to end or hold: a copy takes it at start only.
    Ending,
    /// A UDP link's datagrams.
    Datagrams,
    /// Packets to lose: a proxy's or `--exec`'s connections (which send
    /// them again) or a UDP link's datagrams; a pipe has none.
    Packets,
}

impl Change {
    /// True for the faults that end or hold a stream, which a copy takes
    /// at start only.
    pub fn ends(&self) -> bool {
        self.needs() == Needs::Ending
    }
}

/// The table: for each fault, its help text and clap attributes, then
/// `field (name): Variant(kind), needs: Needs, |faults, value| effect`,
/// where `value` is the flag's value for one direction, `None` for `off`.
macro_rules! fault_table {
    ($(
        $(#[doc = $doc:literal])*
        #[arg($($arg:tt)*)]
        $field:ident ($name:literal): $variant:ident($kind:ty), needs: $needs:ident,
            |$faults:ident, $value:ident| $effect:expr;
    )*) => {
        /// One fault flag and its value.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Change {
            $($variant(Directed<$kind>),)*
        }

        /// Every fault flag of the command line, each given any number of
        /// times (the last given for a direction counts).
        /// clap's derive is the `cli` feature's: a library user never
        /// compiles clap.
        #[derive(Debug, Clone, Default)]
        #[cfg_attr(feature = "cli", derive(clap::Args))]
        pub struct FaultFlags {
            $(
                $(#[doc = $doc])*
                #[cfg_attr(feature = "cli", arg($($arg)*))]
                pub $field: Vec<Directed<$kind>>,
            )*
        }

        impl FaultFlags {
            /// The fault flags given, flag by flag, each in the order given.
            pub fn changes(&self) -> Vec<Change> {
                let mut changes = Vec::new();
                $(changes.extend(self.$field.iter().cloned().map(Change::$variant));)*
                changes
            }
        }

        /// Every fault flag, by the name a message carries (the flag
        /// without its dashes).
        pub const NAMES: &[&str] = &[$($name),*];

        impl Change {
            /// The change that flag `name` (as [`Change::name`] gives it)
            /// with `text` asks for.
            pub fn parse(name: &str, text: &str) -> Result<Change, String> {
                match name {
                    $($name => Ok(Change::$variant(text.parse()?)),)*
                    _ => Err(format!(
                        "no fault is called '{}' (the faults: {})",
                        name.escape_debug(),
                        NAMES.join(", ")
                    )),
                }
            }

            /// The flag's name without its dashes: `slice-pause`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Change::$variant(_) => $name,)*
                }
            }

            /// What the fault needs to act on.
            pub fn needs(&self) -> Needs {
                match self {
                    $(Change::$variant(_) => Needs::$needs,)*
                }
            }

            /// The value as the user wrote it.
            pub fn text(&self) -> &str {
                match self {
                    $(Change::$variant(value) => value.text(),)*
                }
            }

            /// True if the value was given for one direction only.
            pub fn one_sided(&self) -> bool {
                match self {
                    $(Change::$variant(value) => value.one_sided(),)*
                }
            }

            /// Changes `faults`, those of `way`, as this asks; a value not
            /// given for `way` changes nothing.
            pub fn apply(&self, faults: &mut Faults, way: Way) {
                match self {
                    $(Change::$variant(value) => {
                        if let Some($value) = value.of(way) {
                            let $faults = &mut *faults;
                            $effect
                        }
                    })*
                }
            }
        }
    };
}

fault_table! {
    /// Write in pieces of about SIZE bytes.
    ///
    /// Cut every write into pieces of about SIZE bytes (each within
    /// SIZE ± VARIATION), each written on its own, as a slow or
    /// fragmenting server would send them: '7', '1KiB:512'. Every fault
    /// flag takes 'off', and in a proxy 'up:' or 'down:' before its value
    /// for one direction: 'down:7'.
    #[arg(long, value_name = "SIZE[:VARIATION]", allow_hyphen_values = true)]
    slice ("slice"): Slice(Slice), needs: Stream,
        |faults, value| faults.slice = value;

    /// With --slice: the pause between two pieces.
    #[arg(long, value_name = "DURATION", requires = "slice", allow_hyphen_values = true)]
    slice_pause ("slice-pause"): SlicePause(Span), needs: Stream,
        |faults, value| faults.slice_pause = span(value);

    /// Lose packets with probability PROB: TCP sends them again.
    ///
    /// Lose each packet with probability PROB, '0.01' or '1%', or on a
    /// MODEL, as tc netem's loss does. A stream's program meets it as over
    /// a real lossy link: TCP sends a lost segment again, so the stream
    /// stalls for a round trip (fast retransmit) or for the
    /// retransmission timeout (a loss at the tail), its throughput is
    /// bounded as TCP's congestion control bounds it (Mathis et al.), and
    /// no byte is ever missing. A UDP link's datagrams are lost outright.
    /// A MODEL loses in bursts: 'gemodel:P,R[,1-H[,1-K]]' is netem's
    /// Gilbert-Elliott model (the link turns bad with P, good again with
    /// R, default 1-P, and loses with 1-H while bad, default 100%, and 1-K
    /// while good, default 0); 'state:P13[,P31[,P32[,P23[,P14]]]]' is
    /// netem's 4-state model, with tc's defaults. Seeded (--seed).
    #[arg(long, value_name = "PROB|MODEL", allow_hyphen_values = true)]
    loss ("loss"): PacketLoss(Loss), needs: Packets,
        |faults, value| faults.loss = value.unwrap_or_default();

    /// Delete blocks of a stream with probability PROB.
    ///
    /// Delete each block of the stream (1 KiB, or a chunk of data at the
    /// starting rate if that is less), or each datagram of a UDP link,
    /// with probability PROB, '0.01' or '1%': the stream arrives with
    /// holes, a corrupt transfer, for tests of checksums and framing.
    /// (For loss as a link has it, which TCP recovers from, --loss.) A
    /// MODEL deletes in bursts, as --loss's. The blocks and bytes deleted
    /// are said at the end.
    #[arg(long, value_name = "PROB|MODEL", allow_hyphen_values = true)]
    drop ("drop"): Drop(Loss), needs: Anything,
        |faults, value| faults.drop = value.unwrap_or_default();

    /// Flip a bit of bytes with probability PROB.
    ///
    /// Flip one random bit of each byte with probability PROB. The bytes
    /// touched are said at the end.
    #[arg(long, value_name = "PROB", allow_hyphen_values = true)]
    corrupt ("corrupt"): Corrupt(Probability), needs: Anything,
        |faults, value| faults.corrupt = chance(value);

    /// Forward exactly SIZE bytes, then close.
    ///
    /// Forward exactly SIZE bytes, then close cleanly, as a server that
    /// cuts a response short.
    #[arg(long, value_name = "SIZE", conflicts_with_all = ["lines", "null"], allow_hyphen_values = true)]
    cut_after ("cut-after"): CutAfter(Bytes), needs: Ending,
        |faults, value| faults.cut_after = value.map(|bytes| bytes.0);

    /// Hold the close this long after the end of the data.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    slow_close ("slow-close"): SlowClose(Span), needs: Ending,
        |faults, value| faults.slow_close = span(value);

    /// After that much, forward nothing but stay open.
    ///
    /// After that much data or time, forward nothing more but keep the
    /// output open, as a server that stops answering: a size ('1KiB') or a
    /// time ('2s', '1min').
    #[arg(long, value_name = "SIZE|DURATION", allow_hyphen_values = true)]
    stall_after ("stall-after"): StallAfter(Trigger), needs: Ending,
        |faults, value| faults.stall_after = value;

    /// After that much, reset (status 3).
    ///
    /// After that much data or time, reset: a socket is closed with a
    /// reset (RST), and shape ends with status 3.
    #[arg(long, value_name = "SIZE|DURATION", allow_hyphen_values = true)]
    reset_after ("reset-after"): ResetAfter(Trigger), needs: Ending,
        |faults, value| faults.reset_after = value;

    /// UDP: send this share of datagrams twice.
    ///
    /// UDP: each datagram is sent twice with probability PROB ('1%',
    /// '0.01'), the copy right behind it (netem's duplicate). Like every
    /// fault, it takes 'up:' or 'down:', 'off', and changes live.
    #[arg(long, value_name = "PROB", allow_hyphen_values = true, help_heading = "UDP links")]
    duplicate ("duplicate"): Duplicate(Probability), needs: Datagrams,
        |faults, value| faults.duplicate = chance(value);

    /// UDP: send this share of datagrams at once, skipping the delay.
    ///
    /// UDP: each datagram skips the delay with probability PROB, so that
    /// it overtakes those held (netem's reorder).
    #[arg(long, value_name = "PROB", requires = "delay", allow_hyphen_values = true, help_heading = "UDP links")]
    reorder ("reorder"): Reorder(Probability), needs: Datagrams,
        |faults, value| faults.reorder = chance(value);

    /// UDP: drop datagrams over SIZE bytes, or cut them (SIZE:cut).
    #[arg(long, value_name = "SIZE[:cut]", allow_hyphen_values = true, help_heading = "UDP links")]
    mtu ("mtu"): Mtu(Mtu), needs: Datagrams,
        |faults, value| faults.mtu = value;
}

/// A duration, or none for `off`.
fn span(value: Option<Span>) -> Duration {
    value.map_or(Duration::ZERO, |span| span.0)
}

/// A probability, or none for `off`.
fn chance(value: Option<Probability>) -> f64 {
    value.map_or(0.0, |chance| chance.0)
}

impl Change {
    /// The faults that `changes`, in order, make of none, for `way`.
    pub fn all(changes: &[Change], way: Way) -> Faults {
        let mut faults = Faults::default();
        for change in changes {
            change.apply(&mut faults, way);
        }
        faults
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
        assert_eq!(up.drop.rate(), 0.0);
        assert_eq!(down.slice.map(|s| s.size), Some(7));
        assert_eq!(down.drop.rate(), 0.01);
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
