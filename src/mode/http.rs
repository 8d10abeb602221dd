//! A proxy's HTTP rule while it runs: made from the plan, given to the
//! proxy's connections (those whose client speaks HTTP/2 to a relay on
//! the h2 crate, [`shape_h2`]), and changed or turned off by `--remote`, which
//! sends the flags as they were given; the proxy reads them as the
//! argument step reads its own ([`super::step::http::rule_of`]).

use super::plan::HttpPlan;
use crate::control::RuleControl;
use shape_leaves::say::Printer;
use shape_net::proxy::http_gate::HttpRules;

/// The rule `plan` asks for, live: what the proxy's connections are put
/// to, and how `--remote` reaches it. Chance is drawn from `seed`, and
/// `--during` counts from now.
#[cfg(feature = "http")]
pub fn live(
    plan: Option<&HttpPlan>,
    seed: u64,
    report: Option<Printer>,
) -> Option<(HttpRules, Box<dyn RuleControl>)> {
    use shape_bucket::Clock;
    use shape_http::rule::LiveRule;
    use std::sync::Arc;
    let plan = plan?;
    let started = shape_bucket::MonotonicClock.now();
    let rule = Arc::new(LiveRule::new(Some(plan.rule.clone()), seed, started));
    let http2 = Arc::new(shape_h2::Http2Relay::new(rule.clone(), report));
    let rules = HttpRules::new(rule.clone()).handing_http2_to(http2);
    Some((rules, Box::new(Remote(rule))))
}

/// No plan has an HTTP rule in a build without the `http` feature.
#[cfg(not(feature = "http"))]
pub fn live(
    plan: Option<&HttpPlan>,
    _: u64,
    _: Option<Printer>,
) -> Option<(HttpRules, Box<dyn RuleControl>)> {
    plan.map(|plan| match *plan {})
}

/// The rule as `--remote` reaches it.
#[cfg(feature = "http")]
struct Remote(std::sync::Arc<shape_http::rule::LiveRule>);

#[cfg(feature = "http")]
impl Remote {
    /// The rule `flags` give, or why not; `None` turns it off.
    fn read(flags: &[(String, String)]) -> Result<Option<shape_http::rule::HttpRule>, String> {
        let flags = crate::cli::http::HttpFlags::from_given(flags)?;
        super::step::http::rule_of(&flags, None).map_err(|refused| refused.0)
    }
}

#[cfg(feature = "http")]
impl RuleControl for Remote {
    fn check(&self, flags: &[(String, String)]) -> Result<(), String> {
        Remote::read(flags).map(|_| ())
    }

    fn change(&self, flags: &[(String, String)]) {
        if let Ok(rule) = Remote::read(flags) {
            self.0.set(rule);
        }
    }

    fn describe(&self) -> String {
        self.0.describe()
    }
}
