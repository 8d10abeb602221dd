//! A proxy's `http` toxics as its HTTP rules: one set of rules per proxy,
//! kept while the proxy lives so that its connections' gates see every
//! change, each toxic a rule in the order added (the first that picks a
//! request does its fault), its counts kept while the toxic is unchanged.

use crate::model::Toxic;
use crate::toxics::Kind;
use crate::toxics::http::rule_of;
use shape_bucket::Clock;
use shape_http::rule::LiveRule;
use shape_leaves::say::Printer;
use shape_net::proxy::http_gate::HttpRules;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The HTTP rules of one proxy.
pub struct HttpToxics {
    live: Arc<LiveRule>,
    rules: HttpRules,
}

impl HttpToxics {
    /// The rules of the proxy `name`, none yet, their chances drawn from
    /// `seed` and the name, their windows (`during`) from now; its HTTP/2
    /// connections carried by a relay that says failures to `report`.
    pub fn new(seed: u64, name: &str, report: Option<Printer>) -> HttpToxics {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut hasher);
        let started = shape_bucket::MonotonicClock.now();
        let live = Arc::new(LiveRule::new(None, seed ^ hasher.finish(), started));
        let http2 = Arc::new(shape_h2::Http2Relay::new(live.clone(), report));
        HttpToxics {
            rules: HttpRules::new(live.clone()).handing_http2_to(http2),
            live,
        }
    }

    /// Puts the rules of `toxics`' `http` toxics in force, and gives the
    /// rules new connections are put to: none while there is no `http`
    /// toxic, so that a proxy without one follows no HTTP.
    pub fn rules(&self, toxics: &[Toxic]) -> Option<HttpRules> {
        let rules: Vec<_> = toxics
            .iter()
            .filter(|toxic| toxic.kind == Kind::Http && toxic.toxicity > 0.0)
            // The model let through only toxics whose rule reads.
            .filter_map(|toxic| {
                let rule = rule_of(&toxic.attributes, toxic.toxicity).ok()?;
                Some((HttpToxics::key(toxic), rule))
            })
            .collect();
        let any = toxics.iter().any(|toxic| toxic.kind == Kind::Http);
        self.live.set_all(rules, shape_bucket::MonotonicClock.now());
        any.then(|| self.rules.clone())
    }

    /// The rules, which count what they see.
    pub fn live(&self) -> Arc<LiveRule> {
        self.live.clone()
    }

    /// The key of `toxic`'s rule: its id and revision, so that a toxic
    /// changed counts afresh.
    fn key(toxic: &Toxic) -> u64 {
        (toxic.id << 24) | (toxic.revision & 0xff_ffff)
    }

    /// The id of the toxic whose rule has `key`.
    pub fn toxic_of(key: u64) -> u64 {
        key >> 24
    }
}
