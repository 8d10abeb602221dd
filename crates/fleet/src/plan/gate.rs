//! How the local bucket is set: at the member's part while its leases
//! cover what it spends, paused when they do not (or as
//! `--share-fallback` says while Redis is away), and when the planner
//! must look again.

use super::*;

impl Leases {
    /// How the local bucket is to be set now, and when to look again.
    pub(super) fn gate(&self, now: u64, local: Local) -> (Setting, u64) {
        let burst = self.held.burst;
        let polled = self.next_call(now);
        let Some(rate) = self.share_rate() else {
            return (
                Setting::new(Limit::Unlimited, burst, self.held.paused),
                polled,
            );
        };
        if !self.up() {
            let setting = match self.fallback {
                Fallback::Last => Setting::new(self.fallback_limit(), burst, false),
                Fallback::Open => Setting::new(Limit::Unlimited, burst, false),
                Fallback::Block => return self.gate_on_leases(now, local, polled),
            };
            return (setting, polled);
        }
        if self.held.paused {
            let limit = Rate::from_bytes_per_sec(rate).map_or(Limit::Unlimited, Limit::Rate);
            return (Setting::new(limit, burst, true), polled);
        }
        self.gate_on_leases(now, local, polled)
    }

    /// Runs the bucket at the member's rate while leases cover it, paused
    /// when they do not.
    fn gate_on_leases(&self, now: u64, local: Local, polled: u64) -> (Setting, u64) {
        let rate = self.local_rate();
        let limit = Rate::from_bytes_per_sec(rate).map_or(Limit::Unlimited, Limit::Rate);
        let burst = ((rate * LOCAL_BURST as f64 / SECOND as f64) as u64)
            .clamp(self.unit, self.held.burst.max(self.unit));
        let room = self.room(now, local);
        let was_paused = self.setting.is_some_and(|setting| setting.paused);
        // Paused with less than a millisecond at its rate left, let go
        // with five (or its burst): no wake-up every millisecond on a
        // sliver of room.
        let resume = ((rate * RESUME_AFTER as f64 / SECOND as f64) as i128)
            .min(i128::from(burst))
            .max(1);
        let least = (rate * MS as f64 / SECOND as f64) as i128;
        let paused = room <= least || (was_paused && room < resume);
        let wake = if paused {
            // Until enough is spendable to go on.
            self.time_spendable(local, resume).unwrap_or(u64::MAX)
        } else {
            self.runs_out(now, local, rate)
        };
        let wake = wake.min(polled).max(now + MS);
        (Setting::new(limit, burst, paused), wake)
    }

    /// The first time at which `room` reaches `target`, if it ever does
    /// with the leases held.
    fn time_spendable(&self, local: Local, target: i128) -> Option<u64> {
        let spent = i128::from(local.granted.wrapping_sub(self.base)) + i128::from(local.in_hand);
        let goal = spent + target;
        if i128::from(self.spendable) >= goal {
            return Some(0);
        }
        // Ramps are in the order granted, each beginning where the one
        // before it ends on the member's timeline.
        let mut before = i128::from(self.spendable);
        for ramp in &self.ramps {
            if before + i128::from(ramp.tokens) >= goal {
                let short = (goal - before) as f64;
                let at = ramp.from + (short / ramp.slope * SECOND as f64).ceil() as i128;
                return Some(at.clamp(0, i128::from(u64::MAX)) as u64);
            }
            before += i128::from(ramp.tokens);
        }
        None
    }

    /// When the bucket, spending at `rate` from now, could have handed
    /// out all that is spendable by then.
    fn runs_out(&self, now: u64, local: Local, rate: f64) -> u64 {
        let room = self.room(now, local) as f64;
        // Ignoring what becomes spendable meanwhile: early, so safe.
        let mut at = now.saturating_add((room.max(0.0) / rate * SECOND as f64) as u64);
        // And no later than the next ramp's edge, where that changes.
        for ramp in &self.ramps {
            for edge in [ramp.from, ramp.end()] {
                if edge > i128::from(now) {
                    at = at.min(edge.min(i128::from(u64::MAX)) as u64);
                }
            }
        }
        at
    }

    /// When to call Redis next without being woken: the retry while it is
    /// down, the poll while it is up.
    fn next_call(&self, now: u64) -> u64 {
        if self.asking.is_some() {
            return u64::MAX;
        }
        match self.health {
            Health::Down { retry, .. } => retry,
            Health::Up => (self.heard + self.lease_time()).max(now),
        }
    }

    /// The limit `--share-fallback last` goes on at: this member's part of
    /// the last known rate.
    pub(super) fn fallback_limit(&self) -> Limit {
        match self.share_rate() {
            None => Limit::Unlimited,
            Some(_) => Rate::from_bytes_per_sec(self.part()).map_or(Limit::Unlimited, Limit::Rate),
        }
    }
}
