//! A proxy's HTTP rule while it runs (or an `--exec` run's): made from
//! the plan, given to the proxy's connections (those whose client speaks
//! HTTP/2 to a relay on the h2 crate, [`shape_h2`]), counted in the JSON
//! progress records, and changed or turned off by `--remote`, which sends
//! the flags as they were given; the proxy reads them as the argument step
//! reads its own ([`super::step::http::rule_of`]).

use super::plan::HttpPlan;
use crate::control::RuleControl;
use shape_leaves::say::Printer;
use shape_net::proxy::http_gate::HttpRules;

/// The rule in force, shared by all that read or change it.
#[cfg(feature = "http")]
pub struct LiveHttp(std::sync::Arc<shape_http::rule::LiveRule>);

/// No run has an HTTP rule in a build without the `http` feature.
#[cfg(not(feature = "http"))]
pub enum LiveHttp {}

#[cfg(feature = "http")]
impl LiveHttp {
    /// The rule `plan` asks for, if it asks for one: chance drawn from
    /// `seed`, and `--during` counting from now.
    pub fn of(plan: Option<&HttpPlan>, seed: u64) -> Option<LiveHttp> {
        use shape_bucket::Clock;
        let plan = plan?;
        let started = shape_bucket::MonotonicClock.now();
        let rule = shape_http::rule::LiveRule::new(Some(plan.rule.clone()), seed, started);
        Some(LiveHttp(std::sync::Arc::new(rule)))
    }

    /// The requests its rules have seen, matched and picked, together.
    pub fn counting(&self) -> Box<dyn Fn() -> [u64; 3] + Send> {
        let rule = self.0.clone();
        Box::new(move || {
            rule.tally()
                .iter()
                .fold([0; 3], |[seen, matched, picked], (_, counted)| {
                    [
                        seen + counted.seen,
                        matched + counted.matched,
                        picked + counted.picked,
                    ]
                })
        })
    }

    /// The rules a proxy's connections are put to; an HTTP/2 client's
    /// goes to a relay that says failures to `report`.
    pub fn rules(&self, report: Option<Printer>) -> HttpRules {
        let relay = shape_h2::Http2Relay::new(self.0.clone(), report);
        HttpRules::new(self.0.clone()).handing_http2_to(std::sync::Arc::new(relay))
    }

    /// The rule as `--remote` reaches it.
    pub fn remote(&self) -> Box<dyn RuleControl> {
        Box::new(Remote(self.0.clone()))
    }
}

#[cfg(not(feature = "http"))]
impl LiveHttp {
    pub fn of(plan: Option<&HttpPlan>, _: u64) -> Option<LiveHttp> {
        plan.map(|plan| match *plan {})
    }

    pub fn counting(&self) -> Box<dyn Fn() -> [u64; 3] + Send> {
        match *self {}
    }

    pub fn rules(&self, _: Option<Printer>) -> HttpRules {
        match *self {}
    }

    pub fn remote(&self) -> Box<dyn RuleControl> {
        match *self {}
    }
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
        use shape_bucket::Clock;
        if let Ok(rule) = Remote::read(flags) {
            self.0.set(rule, shape_bucket::MonotonicClock.now());
        }
    }

    fn describe(&self) -> String {
        self.0.describe()
    }
}
