//! What shapes the connections of one route (a listener and where it
//! forwards to): [`Rules`] give each connection its [`ConnectionShaping`], when it is
//! accepted and again whenever the rules change while it is open. Proxy
//! mode has one route whose rules are its flags; `--serve` has a route per
//! proxy whose rules are its toxics.

use super::http_gate::HttpRules;
use shape_bucket::Limit;
use shape_impair::conditions::{Conditions, InForce};
use shape_impair::slowlink::SlowLink;
use shape_leaves::bucket::Bucket;
use shape_leaves::throughput::Throughput;
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// How one direction of a connection pays for its bytes.
pub enum Pay {
    /// From this bucket, which others may spend from too.
    Bucket(Arc<Bucket>),
    /// From a bucket of the connection's own with these settings; a
    /// change of them keeps its tokens.
    Own { limit: Limit, burst: u64 },
}

/// The conditions (delay, jitter, faults) of one direction.
pub enum Terms {
    /// These, which change for every connection at once.
    Shared(Arc<Conditions>),
    /// These, of this connection's own.
    Own(Box<InForce>),
}

/// How one direction of a connection is shaped.
pub struct WayPlan {
    pub pay: Pay,
    pub terms: Terms,
}

/// How a connection is shaped: up (client to server), then down.
pub struct ConnectionShaping {
    pub ways: [WayPlan; 2],
    /// Close the connection (an orderly close of both sides) this long
    /// after the plan is first taken with it: toxiproxy's `timeout`.
    pub close_after: Option<Duration>,
}

/// One connection's draws of chance for rules that come and go: each
/// rule's draw is a hash of the connection's seed and the rule's id, the
/// same every time it is asked for, so that a change of other rules, or of
/// the chance itself, does not draw again, and asking costs the same
/// however many rules there are.
pub struct RuleDraws {
    seed: u64,
}

impl RuleDraws {
    pub fn new(seed: u64) -> RuleDraws {
        RuleDraws { seed }
    }

    /// Whether rule `id`, which applies with `chance`, applies to this
    /// connection.
    pub fn applies(&mut self, id: u64, chance: f64) -> bool {
        let draw = splitmix64(self.seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        // The top 53 bits, as a fraction in [0, 1).
        ((draw >> 11) as f64 / (1u64 << 53) as f64) < chance
    }
}

/// SplitMix64's output function: a well-mixed 64 bits from any 64 bits,
/// so that neighbouring ids and seeds draw unrelated numbers.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// What shapes the connections of a route.
pub trait Rules {
    /// The plan of a connection with `draws`.
    fn plan(&self, draws: &mut RuleDraws) -> io::Result<ConnectionShaping>;
    /// Its buffers, and its delay and jitter at start.
    fn link(&self) -> SlowLink;
    /// The fraction of connections the faults are done to.
    fn affect(&self) -> f64;
    /// Where bytes passed on are counted, up and down.
    fn passed(&self) -> [Arc<Throughput>; 2];
    /// Whether a direction that stalled and is let go again closes the
    /// connection instead of passing bytes again: what it dropped while
    /// stalled would leave a hole in the stream.
    fn closes_when_unstalled(&self) -> bool {
        false
    }
    /// Where bytes read are counted, up and down, if anywhere.
    fn received(&self) -> Option<[Arc<AtomicU64>; 2]> {
        None
    }
    /// The HTTP rule its connections are put to, if any.
    fn http(&self) -> Option<HttpRules> {
        None
    }
    /// Whether a client whose server cannot be reached, before a byte
    /// passed, is closed in good order (FIN) rather than reset: a reset
    /// tells a proxy's client at once that nothing is there, but clients
    /// written for toxiproxy, which closes, may fail at random on one.
    fn closes_when_unreachable(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draw_is_kept_for_the_connection_and_fair_across_connections() {
        let mut draws = RuleDraws::new(42);
        let first: Vec<bool> = (0..100).map(|id| draws.applies(id, 0.5)).collect();
        let again: Vec<bool> = (0..100).rev().map(|id| draws.applies(id, 0.5)).collect();
        assert_eq!(first, again.into_iter().rev().collect::<Vec<_>>());
        // A chance raised applies to whoever it struck before.
        assert!((0..100).all(|id| !first[id as usize] || draws.applies(id, 0.9)));
        let struck = (0..10_000u64)
            .filter(|&seed| RuleDraws::new(seed).applies(7, 0.3))
            .count();
        assert!((2_800..3_200).contains(&struck), "{struck}");
        assert!((0..1000).all(|seed| !RuleDraws::new(seed).applies(1, 0.0)));
        assert!((0..1000).all(|seed| RuleDraws::new(seed).applies(1, 1.0)));
    }
}
