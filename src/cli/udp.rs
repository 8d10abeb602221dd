//! The flags of a UDP link (`--listen udp:ADDR --connect udp:ADDR`)
//! beyond its faults (`--duplicate`, `--reorder` and `--mtu` are rows of
//! the one table of faults, so that `--remote` changes them): its flows,
//! its queue, and what it counts.

use clap::{Args, ValueEnum};
use shape_net::udp::QueueDrop;
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
    #[arg(hide_short_help = true, long, value_name = "DURATION", value_parser = parse_idle, help_heading = "UDP links")]
    pub udp_idle: Option<Duration>,

    /// UDP: what full queues drop (default tail).
    #[arg(
        hide_short_help = true,
        long,
        value_name = "WHICH",
        value_enum,
        help_heading = "UDP links"
    )]
    pub queue_drop: Option<QueueDropFlag>,

    /// UDP: count datagrams, not bytes.
    ///
    /// UDP: the rate, burst and --max-buffer count datagrams, whatever
    /// their size ('--rate 1000/s --packets'), as netem's limit counts
    /// packets.
    #[arg(long, conflicts_with_all = ["lines", "null"], help_heading = "UDP links")]
    pub packets: bool,

    /// UDP: jitter never lets a datagram overtake an earlier one.
    #[arg(
        hide_short_help = true,
        long,
        requires = "jitter",
        help_heading = "UDP links"
    )]
    pub jitter_keeps_order: bool,
}

impl UdpFlags {
    /// The first flag given, for the error of one given without a UDP
    /// link.
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.udp_idle.is_some(), "--udp-idle"),
            (self.packets, "--packets"),
            (self.queue_drop.is_some(), "--queue-drop"),
            (self.jitter_keeps_order, "--jitter-keeps-order"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// Reads `--udp-idle`: from a second to a day.
fn parse_idle(text: &str) -> Result<Duration, String> {
    shape_leaves::duration::parse(
        text,
        &shape_leaves::duration::Accepted {
            least: Duration::from_secs(1),
            most: Duration::from_secs(86_400),
            plain_seconds: false,
            examples: "e.g. 30s, 2m",
        },
    )
}
