//! The flags of a UDP link (`--listen udp:ADDR --connect udp:ADDR`)
//! beyond those it shares with a stream's: what a datagram link does that
//! a stream cannot.

use crate::faults::parse_probability;
use crate::net::udp::{Oversize, QueueDrop};
use clap::{Args, ValueEnum};
use std::time::Duration;

/// Which datagram a full queue drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueueDropFlag {
    /// The one that arrives, as a router does.
    Tail,
    /// The oldest waiting.
    Head,
}

impl From<QueueDropFlag> for QueueDrop {
    fn from(flag: QueueDropFlag) -> QueueDrop {
        match flag {
            QueueDropFlag::Tail => QueueDrop::Tail,
            QueueDropFlag::Head => QueueDrop::Head,
        }
    }
}

#[derive(Debug, Clone, Default, Args)]
pub struct UdpFlags {
    /// UDP: forget a flow idle this long (default 120s).
    ///
    /// UDP: a client that sends and receives nothing for DURATION is
    /// forgotten, with its socket toward the upstream (default 120s, as
    /// Linux keeps a UDP flow that has seen replies).
    #[arg(long, value_name = "DURATION", value_parser = parse_idle, help_heading = "UDP links")]
    pub udp_idle: Option<Duration>,

    /// UDP: which datagram a full queue drops (default tail).
    #[arg(long, value_name = "WHICH", value_enum, help_heading = "UDP links")]
    pub queue_drop: Option<QueueDropFlag>,

    /// UDP: send this share of datagrams twice.
    ///
    /// UDP: each datagram is sent twice with probability PROB ('1%',
    /// '0.01'), the copy right behind it (netem's duplicate).
    #[arg(long, value_name = "PROB", value_parser = parse_probability, help_heading = "UDP links")]
    pub duplicate: Option<f64>,

    /// UDP: send this share of datagrams at once, skipping the delay.
    ///
    /// UDP: each datagram skips the delay with probability PROB, so that
    /// it overtakes those held (netem's reorder).
    #[arg(long, value_name = "PROB", value_parser = parse_probability, requires = "delay", help_heading = "UDP links")]
    pub reorder: Option<f64>,

    /// UDP: count datagrams, not bytes.
    ///
    /// UDP: the rate, burst and --max-buffer count datagrams, whatever
    /// their size ('--rate 1000/s --packets'), as netem's limit counts
    /// packets.
    #[arg(long, conflicts_with_all = ["lines", "null"], help_heading = "UDP links")]
    pub packets: bool,

    /// UDP: jitter never lets a datagram overtake an earlier one.
    #[arg(long, requires = "jitter", help_heading = "UDP links")]
    pub jitter_keeps_order: bool,

    /// UDP: drop datagrams over SIZE bytes, or cut them (SIZE:cut).
    #[arg(long, value_name = "SIZE[:cut]", value_parser = parse_mtu, help_heading = "UDP links")]
    pub mtu: Option<(usize, Oversize)>,
}

impl UdpFlags {
    /// The first flag given, for the error of one given without a UDP
    /// link.
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.udp_idle.is_some(), "--udp-idle"),
            (self.packets, "--packets"),
            (self.queue_drop.is_some(), "--queue-drop"),
            (self.duplicate.is_some(), "--duplicate"),
            (self.reorder.is_some(), "--reorder"),
            (self.jitter_keeps_order, "--jitter-keeps-order"),
            (self.mtu.is_some(), "--mtu"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// Reads `--udp-idle`: from a second to a day.
fn parse_idle(text: &str) -> Result<Duration, String> {
    crate::duration::parse(
        text,
        &crate::duration::Accepted {
            least: Duration::from_secs(1),
            most: Duration::from_secs(86_400),
            plain_seconds: false,
            examples: "e.g. 30s, 2m",
        },
    )
}

/// Reads `SIZE` or `SIZE:cut`: bytes, from 1 to the largest datagram.
fn parse_mtu(text: &str) -> Result<(usize, Oversize), String> {
    let (size, oversize) = match text.strip_suffix(":cut") {
        Some(size) => (size, Oversize::Cut),
        None => (text, Oversize::Drop),
    };
    let size: usize = size
        .parse()
        .map_err(|_| format!("'{size}' is not a number of bytes (e.g. 1200, 1200:cut)"))?;
    let largest = crate::net::udp::LARGEST;
    if !(1..=largest).contains(&size) {
        return Err(format!("an MTU is from 1 to {largest} bytes"));
    }
    Ok((size, oversize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mtu_drops_or_cuts_and_must_fit_a_datagram() {
        assert_eq!(parse_mtu("1200"), Ok((1200, Oversize::Drop)));
        assert_eq!(parse_mtu("1200:cut"), Ok((1200, Oversize::Cut)));
        assert!(parse_mtu("0").is_err());
        assert!(parse_mtu("70000").unwrap_err().contains("65507"));
        assert!(parse_mtu("big").is_err());
    }
}
