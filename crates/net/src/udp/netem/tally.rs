//! What a link did, datagram by datagram: a count and the bytes of each
//! thing that befell them, said in words for SIGUSR1.

/// What a link did, in datagrams and bytes (as they arrived).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub passed: (u64, u64),
    pub lost: (u64, u64),
    pub queue_full: (u64, u64),
    pub duplicated: (u64, u64),
    pub reordered: (u64, u64),
    pub corrupted: (u64, u64),
    pub cut: (u64, u64),
    pub oversize: (u64, u64),
    /// Dropped before the link: no socket could be had for a new
    /// client's flow (the proxy counts these, not the link).
    pub unflowed: (u64, u64),
    /// Dropped before the link, past their flow's limit (the proxy's too).
    pub over_limit: (u64, u64),
    /// Datagrams that passed and that the upstream refused (ICMP port
    /// unreachable; the proxy counts these, one for each error).
    pub refused: u64,
}

impl std::ops::AddAssign for Tally {
    /// Adds what another link did (a flow's own, `--per-connection`).
    fn add_assign(&mut self, other: Tally) {
        let pairs = [
            (&mut self.passed, other.passed),
            (&mut self.lost, other.lost),
            (&mut self.queue_full, other.queue_full),
            (&mut self.duplicated, other.duplicated),
            (&mut self.reordered, other.reordered),
            (&mut self.corrupted, other.corrupted),
            (&mut self.cut, other.cut),
            (&mut self.oversize, other.oversize),
            (&mut self.unflowed, other.unflowed),
            (&mut self.over_limit, other.over_limit),
        ];
        for (sum, (count, bytes)) in pairs {
            sum.0 += count;
            sum.1 += bytes;
        }
        self.refused += other.refused;
    }
}

impl Tally {
    /// In words: what passed, then what else befell datagrams, if
    /// anything did.
    pub fn describe(&self) -> String {
        let mut said = vec![format!(
            "{} datagram{} passed ({} bytes)",
            self.passed.0,
            if self.passed.0 == 1 { "" } else { "s" },
            self.passed.1
        )];
        for (what, (count, _)) in [
            ("lost", self.lost),
            ("dropped by the full queue", self.queue_full),
            ("duplicated", self.duplicated),
            ("reordered", self.reordered),
            ("corrupted", self.corrupted),
            ("cut to the MTU", self.cut),
            ("dropped over the MTU", self.oversize),
            ("dropped for want of a socket for their flow", self.unflowed),
            ("dropped past their flow's limit", self.over_limit),
            (
                "refused by the server (port unreachable)",
                (self.refused, 0),
            ),
        ] {
            if count > 0 {
                said.push(format!("{count} {what}"));
            }
        }
        said.join(", ")
    }
}
