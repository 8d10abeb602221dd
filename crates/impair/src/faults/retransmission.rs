//! `--loss`: packet loss as a TCP program meets it. A stream over a lossy
//! link never has a hole: TCP sends a lost segment again, and the program
//! sees its stream stall and its throughput fall. [`Retransmission`] gives
//! each chunk of a stream the earliest moment it may be delivered, as such
//! a link would:
//!
//! - The stream is cut into segments of [`MSS`] bytes, counted from its
//!   first byte, and each is lost with the loss model's draw (at random,
//!   or in bursts on netem's models, [`Loss`]), drawn in stream order from
//!   a seeded generator, so a seed replays every loss.
//! - A lost segment, and all that follows it (TCP delivers in order),
//!   waits for its retransmission. With at least [`DUPLICATE_ACKS`]
//!   segments sent behind it, three duplicate acknowledgements bring it
//!   back one round trip later (fast retransmit, RFC 5681 §3.2); at the
//!   tail of what was sent it waits for the retransmission timeout,
//!   Linux's: the smoothed round trip plus four times its variance, never
//!   less than `tcp_rto_min`, 200 ms (RFC 6298 §2; on a steady link, the
//!   round trip plus 200 ms). When it arrives, what waited behind it is
//!   delivered at once, as a receiver hands its queue of segments that
//!   came out of order to the program.
//! - Sustained loss bounds throughput as TCP's congestion control does,
//!   by Mathis, Semke, Mahdavi and Ott, "The macroscopic behavior of the
//!   TCP congestion avoidance algorithm" (CCR 27(3), 1997): at most
//!   `MSS / (RTT · √(2p/3))` bytes a second for loss rate `p`. Chunks are
//!   spaced at that rate (on a clock of their own, which a stall does not
//!   move, so that a stall is not paid twice).
//!
//! Without a round trip (no delay) the rate is not bounded, and a loss at
//! the tail still waits 200 ms. Nothing here reads or changes bytes.

use super::loss::{Losing, Loss};

/// The segment a stream is cut into: Ethernet's 1,500 bytes less the IP
/// and TCP headers with timestamps, as Linux sends over such a link.
pub const MSS: u64 = 1448;

/// Duplicate acknowledgements that start a fast retransmit.
pub const DUPLICATE_ACKS: u64 = 3;

/// Linux's least retransmission timeout (`TCP_RTO_MIN`).
pub const RTO_MIN: u64 = 200_000_000;

/// One direction's losses, as a TCP stream recovers from them.
#[derive(Debug, Clone)]
pub struct Retransmission {
    losing: Losing,
    loss: Loss,
    draws: fastrand::Rng,
    /// Bytes of the stream seen so far.
    seen: u64,
    /// When the bound on throughput lets the next chunk go out.
    paced: u64,
    /// Segments lost, and the time streams waited for them.
    pub lost: u64,
    pub waited: u64,
}

/// The retransmission timeout of a steady link of round trip `rtt` ns:
/// Linux's, the round trip plus the least variance term.
pub fn timeout(rtt: u64) -> u64 {
    rtt.saturating_add(RTO_MIN)
}

/// The most a TCP stream carries over a link of round trip `rtt` ns that
/// loses `rate` of its segments, in bytes a second (Mathis et al.); none
/// without loss or round trip.
pub fn throughput_bound(rtt: u64, rate: f64) -> Option<f64> {
    if rate <= 0.0 || rtt == 0 {
        return None;
    }
    let seconds = rtt as f64 / 1e9;
    Some(MSS as f64 / (seconds * (2.0 * rate.min(1.0) / 3.0).sqrt()))
}

impl Retransmission {
    /// Losses on the model `loss`, drawn from `seed`.
    pub fn new(loss: Loss, seed: u64) -> Retransmission {
        Retransmission {
            losing: Losing::new(loss),
            loss,
            draws: fastrand::Rng::with_seed(seed),
            seen: 0,
            paced: 0,
            lost: 0,
            waited: 0,
        }
    }

    /// The loss in force.
    pub fn loss(&self) -> Loss {
        self.loss
    }

    /// Loses on `loss` from now on; the stream's place and draws go on.
    pub fn set_loss(&mut self, loss: Loss) {
        if loss != self.loss {
            self.loss = loss;
            self.losing = Losing::new(loss);
        }
    }

    /// True if segments may be lost.
    pub fn active(&self) -> bool {
        self.loss.rate() > 0.0
    }

    /// The earliest a chunk of `len` bytes, paid for at `now`, may be
    /// delivered over a link whose delay this way is `delay` ns and round
    /// trip `rtt` ns; `more` says whether more of the stream waited behind
    /// it (the sender had segments in flight after it). `None`: as soon
    /// as the delay allows.
    pub fn earliest(
        &mut self,
        len: usize,
        now: u64,
        delay: u64,
        rtt: u64,
        more: bool,
    ) -> Option<u64> {
        let start = self.seen;
        self.seen = start.saturating_add(len as u64);
        if !self.active() || len == 0 {
            return None;
        }
        let arrives = now.saturating_add(delay);
        // The bound on throughput: the chunk goes out no sooner than the
        // rate allows after the one before.
        let paced = match throughput_bound(rtt, self.loss.rate()) {
            Some(bound) => {
                let took = (len as f64 / bound * 1e9) as u64;
                self.paced = self.paced.max(now).saturating_add(took);
                Some(self.paced.saturating_add(delay))
            }
            None => None,
        };
        // Each segment that begins in the chunk is drawn for, in order.
        let first = start.div_ceil(MSS);
        let end = self.seen.div_ceil(MSS);
        let mut stall = None;
        for segment in first..end {
            if !self.losing.loses(&mut self.draws) {
                continue;
            }
            self.lost += 1;
            if stall.is_some() {
                // Recovered with the first: one round of recovery
                // (selective acknowledgements) brings back every segment
                // lost in it.
                continue;
            }
            let behind = end - segment - 1;
            let wait = match more || behind >= DUPLICATE_ACKS {
                true => rtt,
                false => timeout(rtt),
            };
            self.waited = self.waited.saturating_add(wait);
            stall = Some(arrives.saturating_add(wait));
        }
        [paced, stall].into_iter().flatten().max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn without_loss_nothing_waits() {
        let mut none = Retransmission::new(Loss::Random(0.0), 1);
        assert_eq!(none.earliest(100_000, 0, 50 * MS, 100 * MS, true), None);
    }

    #[test]
    fn a_loss_with_segments_behind_it_waits_a_round_trip_and_one_at_the_tail_the_timeout() {
        // Ten segments, all lost: the first, with nine behind it, is
        // recovered a round trip later, with the rest.
        let mut always = Retransmission::new(Loss::Random(1.0), 1);
        always.earliest(10 * MSS as usize, 0, 50 * MS, 100 * MS, false);
        assert_eq!((always.lost, always.waited), (10, 100 * MS));
        // A segment alone, nothing behind it: the retransmission timeout,
        // later than the bound on throughput lets it go (0.82 round trips).
        let mut always = Retransmission::new(Loss::Random(1.0), 1);
        let stall = always.earliest(MSS as usize, 0, 50 * MS, 100 * MS, false);
        assert_eq!(stall, Some(50 * MS + timeout(100 * MS)));
        assert_eq!(timeout(100 * MS), 300 * MS);
        // With more of the stream waiting: fast retransmit.
        let mut always = Retransmission::new(Loss::Random(1.0), 1);
        let fast = always.earliest(MSS as usize, 0, 50 * MS, 100 * MS, true);
        assert_eq!(fast, Some(150 * MS));
    }

    #[test]
    fn sustained_loss_is_bounded_at_mathis_rate() {
        // 1% over 150 ms: 1448 / (0.15 * sqrt(0.02 / 3)) = 118.2 KB/s.
        let bound = throughput_bound(150 * MS, 0.01).unwrap();
        assert!((bound - 118_226.0).abs() < 10.0, "{bound}");
        assert_eq!(throughput_bound(0, 0.01), None);
        assert_eq!(throughput_bound(150 * MS, 0.0), None);
        // A megabyte offered at once goes out at that rate.
        let mut losses = Retransmission::new(Loss::Random(0.01), 7);
        let mut last = 0;
        for _ in 0..1000 {
            if let Some(at) = losses.earliest(1000, 0, 0, 150 * MS, true) {
                last = last.max(at);
            }
        }
        let seconds = last as f64 / 1e9;
        let expected = 1_000_000.0 / bound;
        assert!(
            (seconds - expected).abs() < 0.3,
            "{seconds} against {expected}"
        );
    }

    #[test]
    fn the_same_seed_loses_the_same_segments_however_the_stream_is_cut() {
        let run = |cuts: &[usize]| {
            let mut losses = Retransmission::new(Loss::Random(0.05), 11);
            for (at, &len) in cuts.iter().enumerate() {
                losses.earliest(len, at as u64, 0, 0, true);
            }
            losses.lost
        };
        // The same stream, in one chunk or in segment-sized ones: each
        // segment drawn once, in order.
        let whole = run(&[1448 * 400]);
        let pieces = run(&[1448; 400]);
        assert_eq!(whole, pieces);
        assert!(whole > 5 && whole < 40, "{whole}");
    }
}
