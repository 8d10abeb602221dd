//! Proxy mode (`--listen` with `--connect`): serves connections until
//! ended by a signal, with the live controls of a copy (`--remote`,
//! `--rate-file`, `--schedule`, SIGUSR1), which change both directions.

use super::http::LiveHttp;
use super::live::{
    damaged, go_live, printer, two_counts, two_way_adjuster, two_way_reporter, two_ways,
};
use super::plan::ProxyPlan;
use crate::control::Adjuster;
use anyhow::{Context, anyhow};
use shape_impair::conditions::Conditions;
use shape_impair::faults::Way;
use shape_leaves::bucket::Bucket;
use shape_leaves::exit::Exit;
use shape_net::proxy;
use std::sync::Arc;

/// Serves until the process is ended; returns only if it cannot serve.
pub fn run(plan: &ProxyPlan) -> anyhow::Result<Exit> {
    let ProxyPlan {
        listen,
        connect,
        pacing,
        progress,
        conditions: at_start,
        loops,
        http,
    } = plan;
    let (up, down, member) = two_ways(pacing)?;
    let conditions = Arc::new(Conditions::new(at_start.in_force()));
    let ([passed_up, passed_down], passed) = two_counts();
    let live = LiveHttp::of(http.as_ref(), at_start.seed);
    let reporter = two_way_reporter(progress, pacing, &passed, [&up, &down], live.as_ref());
    let printer = printer(reporter.as_ref());
    let report = (!pacing.quiet).then(|| printer.clone());
    let http = live.as_ref().map(|live| live.rules(report));
    let remote = live.as_ref().map(LiveHttp::remote);
    let adjuster = two_way_adjuster([&up, &down], pacing, conditions.clone(), remote);
    let (_, _registration) = go_live(
        pacing,
        adjuster.clone(),
        &passed,
        printer.clone(),
        None,
        member.as_ref(),
    )?;
    let shaping = proxy::Shaping {
        settings: Arc::new(Tuning(adjuster)),
        per_connection: at_start.per_connection,
        link: at_start.slow_link,
        conditions,
        affect: at_start.affect,
        passed_up,
        passed_down,
        report: (!pacing.quiet).then_some(printer),
        seed: at_start.seed,
        say_seed: at_start.say_seed,
        loops: *loops,
        http,
    };
    let served = proxy::forward(listen, connect, &shaping);
    drop(member);
    if let Err(err) = &served
        && damaged(err)
    {
        return Err(anyhow!(shape_leaves::bucket::damage_line(&up)));
    }
    served.with_context(|| format!("proxy from {listen} to {connect}"))?;
    Ok(Exit::Success)
}

/// The run's adjuster, as the proxy sees its settings. Its buckets are
/// the two directions, in the order of [`Way`].
pub(super) struct Tuning(pub(super) Arc<Adjuster>);

impl proxy::LiveSettings for Tuning {
    fn shared(&self, way: Way) -> Arc<Bucket> {
        self.0.buckets()[way as usize].clone()
    }

    fn own(&self, way: Way) -> std::io::Result<Arc<Bucket>> {
        self.0.follower(way as usize).map_err(std::io::Error::other)
    }

    fn on_change(&self, notify: Box<dyn Fn() + Send>) {
        self.0.on_change(notify);
    }
}
