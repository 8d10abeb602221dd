//! An HTTP rule: which requests it picks ([`Selection`]) and what is done
//! to them ([`HttpFault`]); and the rule a proxy holds in force, which
//! `--remote` changes or turns off, with its counts.

use crate::answer::{GrpcStatus, InjectedAnswer};
use crate::framing::RequestHead;
use crate::select::{Counts, Selection};
use shape_leaves::lock::lock;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What is done to a request a rule picks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpFault {
    /// Answered in the upstream's place, which never sees it (Envoy's
    /// abort, toxy's inject, HTTPChaos's abort with a code and replace).
    Answer(InjectedAnswer),
    /// Held this long before it goes on: the time to its first byte
    /// (Envoy's and HTTPChaos's delay, toxy's slowOpen).
    Delay(Duration),
    /// Never answered, and never sent on: the connection stays open
    /// (toxy's timeout).
    Stall,
    /// Never sent on; the connection is reset in its turn, once the
    /// answers before it are out (toxy's abort).
    Reset,
    /// Sent on; its answer's body is cut after this many bytes, and the
    /// connection to the client closed (toxy's slowRead cut short).
    CutAfter(u64),
    /// Answered in the upstream's place with a gRPC status, trailers only
    /// (Envoy's abort with a gRPC status).
    Grpc(GrpcStatus),
}

/// A rule: the requests it picks, and what is done to them.
#[derive(Debug, Clone)]
pub struct HttpRule {
    pub selection: Selection,
    pub fault: HttpFault,
}

/// What was decided for one request a rule picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// These bytes answer it; with `close`, the connection closes after.
    Answer {
        bytes: Vec<u8>,
        close: bool,
    },
    /// It goes on no sooner than this moment.
    Hold(u64),
    Stall,
    Reset,
    CutAfter(u64),
}

/// A rule in force and its counts: a rule changed counts afresh.
#[derive(Debug)]
struct CountedRule {
    /// What names this rule's version among the others (a toxic's id and
    /// revision): the same key keeps its counts across a change.
    key: u64,
    rule: HttpRule,
    counts: Counts,
    /// When it was put in force, on the clock the connections are stepped
    /// by, which `--during` counts from.
    since: u64,
}

/// The rules of a proxy (or of an `--exec` run), shared by all its
/// connections: changed or turned off while they run. A request meets
/// them in order, and the first that picks it does its fault.
#[derive(Debug)]
pub struct LiveRule {
    in_force: Mutex<Arc<[Arc<CountedRule>]>>,
    /// What chance (`--affect`) draws from.
    seed: u64,
}

/// How many requests a rule has seen, matched and picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counted {
    pub seen: u64,
    pub matched: u64,
    pub picked: u64,
}

impl LiveRule {
    /// The rules of a proxy, `rule` in force from `now`; chance is drawn
    /// from `seed`.
    pub fn new(rule: Option<HttpRule>, seed: u64, now: u64) -> LiveRule {
        let live = LiveRule {
            in_force: Mutex::new(Arc::new([])),
            seed,
        };
        live.set(rule, now);
        live
    }

    /// Puts `rule` in force alone from `now` (none: turns the rules off),
    /// its counts from zero.
    pub fn set(&self, rule: Option<HttpRule>, now: u64) {
        let rules: Vec<Arc<CountedRule>> = (rule.into_iter())
            .map(|rule| CountedRule::new(0, rule, now))
            .collect();
        *lock(&self.in_force) = rules.into();
    }

    /// Puts `rules` in force, in order, each with its key: a key in force
    /// already keeps its counts and its start, a new one counts from zero
    /// and from `now`.
    pub fn set_all(&self, rules: Vec<(u64, HttpRule)>, now: u64) {
        let mut in_force = lock(&self.in_force);
        let kept: Vec<Arc<CountedRule>> = rules
            .into_iter()
            .map(|(key, rule)| {
                in_force
                    .iter()
                    .find(|counted| counted.key == key)
                    .cloned()
                    .unwrap_or_else(|| CountedRule::new(key, rule, now))
            })
            .collect();
        *in_force = kept.into();
    }

    /// The rules in force.
    fn now(&self) -> Arc<[Arc<CountedRule>]> {
        lock(&self.in_force).clone()
    }

    /// The rules in force and their counts, in words (`http: answer 503
    /// to requests among the first 2: seen 3, matched 3, picked 2`); or
    /// that none is.
    pub fn describe(&self) -> String {
        let now = self.now();
        if now.is_empty() {
            return "http: off".into();
        }
        let said: Vec<String> = now
            .iter()
            .map(|counted| {
                let Counted {
                    seen,
                    matched,
                    picked,
                } = counted.counted();
                format!(
                    "{}: seen {seen}, matched {matched}, picked {picked}",
                    counted.rule
                )
            })
            .collect();
        format!("http: {}", said.join("; "))
    }

    /// The counts of each rule in force, by key, in order.
    pub fn tally(&self) -> Vec<(u64, Counted)> {
        self.now()
            .iter()
            .map(|counted| (counted.key, counted.counted()))
            .collect()
    }

    /// The fault done to `request`, come at `now`: none if no rule in
    /// force picks it.
    pub fn pick(&self, request: &RequestHead, now: u64) -> Option<HttpFault> {
        let in_force = self.now();
        in_force
            .iter()
            .find(|counted| {
                let since = Duration::from_nanos(now.saturating_sub(counted.since));
                (counted.rule.selection).picks(request, since, &counted.counts, self.seed)
            })
            .map(|counted| counted.rule.fault.clone())
    }

    /// What is done to HTTP/1.x `request`, come at `now`: nothing if no
    /// rule in force picks it.
    pub fn decide(&self, request: &RequestHead, now: u64) -> Option<Decided> {
        let fault = self.pick(request, now)?;
        // A client waiting to send its body may send it or not: a closed
        // connection leaves no doubt where the next request begins.
        let close = request.close || request.expects_continue;
        Some(match &fault {
            HttpFault::Grpc(status) => Decided::Answer {
                bytes: status.bytes(request, close),
                close,
            },
            HttpFault::Answer(answer) => Decided::Answer {
                bytes: answer.bytes(request, close),
                close,
            },
            HttpFault::Delay(delay) => {
                Decided::Hold(now.saturating_add(delay.as_nanos().min(u64::MAX as u128) as u64))
            }
            HttpFault::Stall => Decided::Stall,
            HttpFault::Reset => Decided::Reset,
            HttpFault::CutAfter(after) => Decided::CutAfter(*after),
        })
    }
}

impl CountedRule {
    fn new(key: u64, rule: HttpRule, since: u64) -> Arc<CountedRule> {
        Arc::new(CountedRule {
            key,
            rule,
            counts: Counts::default(),
            since,
        })
    }

    fn counted(&self) -> Counted {
        Counted {
            seen: self.counts.seen.load(Ordering::Relaxed),
            matched: self.counts.matched.load(Ordering::Relaxed),
            picked: self.counts.picked.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Display for HttpRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fault {
            HttpFault::Answer(answer) => write!(f, "answer {}", answer.status.code)?,
            HttpFault::Delay(delay) => write!(f, "delay {delay:?}")?,
            HttpFault::Stall => f.write_str("stall")?,
            HttpFault::Reset => f.write_str("reset")?,
            HttpFault::CutAfter(after) => write!(f, "cut after {after} B")?,
            HttpFault::Grpc(status) => write!(f, "answer gRPC {}", status.name())?,
        }
        write!(f, " {}", self.selection)
    }
}
