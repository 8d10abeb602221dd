//! When a member calls Redis, and for what: a lease's worth once what it
//! holds lasts less than a round trip, a margin and half a lease time at
//! its bucket's rate, sized from its part; its demand, from its pace; and
//! a poll for the settings once a lease time while idle.

use super::*;

impl Leases {
    /// Whether to call Redis now, and for what.
    pub(super) fn ask(&mut self, now: u64, local: Local) -> Option<Ask> {
        if self.asking.is_some() {
            return None;
        }
        if let Health::Down { retry, .. } = self.health
            && now < retry
        {
            return None;
        }
        let mut want = self.want(local);
        if now < self.not_before {
            want = 0;
        }
        // Without a lease to ask for, it asks for the settings once a
        // lease time while idle; a member that spends hears them with each
        // lease, and a poll in flight would hold up the lease it needs next.
        let spending = local.granted != self.paced_from.0;
        if want == 0
            && !self.fresh
            && self.up()
            && (spending || now < self.heard + self.lease_time())
        {
            return None;
        }
        self.want_more = want > 0;
        let demand = self.demand(now, local);
        self.fresh = false;
        self.asking = Some(now);
        self.calls += 1;
        self.paced_from = (local.granted, now);
        self.held_back = false;
        Some(Ask {
            want,
            demand,
            lasting: std::time::Duration::from_nanos(self.lease_time()),
            settings: self.held,
            call: self.calls,
            heard: self.heard_call,
        })
    }

    /// Tokens to lease now: a lease's worth when what is held, spendable
    /// or not yet, lasts less than a round trip and a margin at the
    /// member's part.
    fn want(&self, local: Local) -> u64 {
        let Some(rate) = self.share_rate() else {
            return 0;
        };
        if !self.up() {
            // A retry, which is a lease if it gets through.
            return self.lease_size(rate);
        }
        if self.held.paused {
            return 0;
        }
        // Due at a surplus of nothing, as `next_lease` says: else a
        // paused member would be woken each millisecond to ask nothing.
        if self.fresh || self.surplus(local) <= 0.0 {
            self.lease_size(rate)
        } else {
            0
        }
    }

    /// Tokens held, spendable or not yet, beyond what lasts a round trip
    /// and a margin at the bucket's rate: negative when the next lease is
    /// due.
    pub(super) fn surplus(&self, local: Local) -> f64 {
        let spent = local.granted.wrapping_sub(self.base);
        let held = i128::from(self.leased()) - i128::from(spent);
        let horizon = self.round_trip.likely() + MARGIN + self.lease_time() / 2;
        held as f64 - self.local_rate() * horizon as f64 / SECOND as f64
    }

    /// When the member will want its next lease, spending at its bucket's
    /// rate from now: the planner must be awake then, even with leases
    /// still in hand.
    pub(super) fn next_lease(&self, now: u64, local: Local) -> u64 {
        if self.asking.is_some() || !self.up() || self.held.paused || self.share_rate().is_none() {
            return u64::MAX;
        }
        let surplus = self.surplus(local);
        if surplus <= 0.0 {
            // Due, and not asked for: no room on the share for now.
            return self.not_before.max(now);
        }
        now.saturating_add((surplus / self.local_rate() * SECOND as f64) as u64)
    }

    /// A lease: a lease time at the member's part, and at least one unit
    /// and a hundredth of a second of the share.
    fn lease_size(&self, rate: f64) -> u64 {
        let time = self.lease_time() as f64 / SECOND as f64;
        let least = (rate * 0.01).max(self.unit as f64);
        (self.part() * time).max(least).min(4e12) as u64
    }

    /// How long a lease lasts at the member's part: the share's lease time
    /// or two round trips, whichever is longer.
    pub(super) fn lease_time(&self) -> u64 {
        self.share_lease.max(2 * self.round_trip.likely())
    }

    /// What this member would spend, tokens a second: as much as it gets
    /// while its bucket holds it back, else its pace and a quarter more.
    fn demand(&self, now: u64, local: Local) -> u64 {
        let (granted, since) = self.paced_from;
        let seconds = now.saturating_sub(since) as f64 / SECOND as f64;
        let rate = self.share_rate().unwrap_or(f64::MAX);
        if self.fresh || seconds < 0.01 || now < self.warming {
            return INSATIABLE;
        }
        let pace = local.granted.wrapping_sub(granted) as f64 / seconds;
        if self.held_back || pace >= SATURATED * self.local_rate() {
            INSATIABLE
        } else {
            (pace * 1.25).max(rate * 0.01).max(self.unit as f64) as u64
        }
    }
}
