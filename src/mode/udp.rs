//! The datagram proxy mode (`--listen udp:ADDR --connect udp:ADDR`):
//! binds, then carries every client's flow to the upstream and back until
//! ended by a signal, each way through a link impaired as the flags say
//! and paced by that way's bucket (`--rate`, `--rate-up`, `--rate-down`,
//! a share).

use super::live::{go_live, printer, two_counts, two_way_reporter, two_ways};
use super::plan::{ConditionsPlan, DatagramPlan, UdpPlan};
use crate::control::Adjuster;
use anyhow::Context;
use shape_impair::conditions::{Carried, Conditions, Fixed};
use shape_impair::faults::Way;
use shape_leaves::bucket::Bucket;
use shape_leaves::counting::Counting;
use shape_leaves::exit::Exit;
use shape_leaves::throughput::Throughput;
use shape_net::udp::{DatagramProxy, Impairment, Route, default_queue};
use std::sync::Arc;

/// Serves until the process is ended; returns only if it cannot serve.
pub fn run(plan: &UdpPlan) -> anyhow::Result<Exit> {
    let UdpPlan {
        listen,
        connect,
        pacing,
        conditions: at_start,
        ..
    } = plan;
    let (up, down, member) = two_ways(pacing)?;
    let (counts, passed) = two_counts();
    let (mut proxy, draws) = bind(plan, [&up, &down], &counts)?;
    let seed = at_start.seed;
    let tallies = proxy.tallies();
    let conditions = conditions(at_start);
    proxy.follow(conditions.clone());
    let adjuster = Arc::new(
        Adjuster::over(
            vec![up.clone(), down.clone()],
            plan.datagrams.counting,
            pacing.start.burst.is_some(),
        )
        .retuning(conditions)
        .reporting(Box::new(move || {
            let [up, down] = *shape_leaves::lock::lock(&tallies);
            format!("up: {}; down: {}", up.describe(), down.describe())
        })),
    );
    let reporter = two_way_reporter(&plan.progress, pacing, &passed, [&up, &down], None);
    let printer = printer(reporter.as_ref());
    let handle = proxy.handle()?;
    adjuster.on_change(Box::new(move || handle.wake()));
    if at_start.per_connection {
        // Each flow's buckets follow the shared ones' settings.
        let adjuster = adjuster.clone();
        proxy.per_flow(Box::new(move |way| {
            adjuster.follower(way).map_err(std::io::Error::other)
        }));
    }
    let (_, _registration) = go_live(
        pacing,
        adjuster,
        &passed,
        printer.clone(),
        None,
        member.as_ref(),
    )?;
    if !pacing.quiet {
        proxy.saying(printer.clone());
        printer.line(&format!("shape: listening on udp:{}", proxy.local()?));
        if draws {
            printer.line(&format!("shape: seed {seed}"));
        }
    }
    let served = proxy.serve();
    drop(member);
    served.with_context(|| format!("proxy from {listen} to {connect}"))?;
    Ok(Exit::Success)
}

/// The link bound where the plan says, paying from `buckets` and counting
/// on `counts` (up, then down), and whether anything is drawn at random
/// (then the seed is said at start, so that a run can be replayed).
fn bind(
    plan: &UdpPlan,
    buckets: [&Arc<Bucket>; 2],
    counts: &[Arc<Throughput>; 2],
) -> anyhow::Result<(DatagramProxy, bool)> {
    let (listen, connect) = (&plan.listen, &plan.connect);
    let ways = impaired(&plan.conditions, &plan.datagrams, buckets);
    let addresses = || -> std::io::Result<_> {
        Ok((
            listen.datagram_address(true)?,
            connect.datagram_address(false)?,
        ))
    };
    let (listening, upstream) = addresses().with_context(|| format!("{listen} to {connect}"))?;
    let draws = ways.iter().any(Impairment::draws);
    let route = Route {
        listen: listening,
        upstream,
        idle: plan.datagrams.idle,
        ways,
        seed: plan.conditions.seed,
    };
    let proxy = DatagramProxy::bind(route, buckets.map(Arc::clone), counts.clone())
        .with_context(|| format!("listening on {listen}"))?;
    Ok((proxy, draws))
}

/// What each way of the link does to datagrams, as the plan says, paced
/// by that way's bucket (`buckets`: up, then down).
pub(super) fn impaired(
    at_start: &ConditionsPlan,
    datagrams: &DatagramPlan,
    buckets: [&Arc<Bucket>; 2],
) -> [Impairment; 2] {
    let link = at_start.slow_link;
    let counting = datagrams.counting;
    Way::BOTH.map(|way| {
        let faults = &at_start.faults[way as usize];
        let (limit, burst) = buckets[way as usize].limit_and_burst();
        // A traced way's queue holds what its trace gives on average.
        let queued = datagrams.traced[way as usize].unwrap_or(limit);
        Impairment {
            packets: counting == Counting::Datagrams,
            queue: datagrams
                .queue
                .unwrap_or_else(|| default_queue(queued, counting)),
            held_most: link.delays().then(|| link.capacity(limit, burst)),
            queue_drop: datagrams.queue_drop,
            keep_order: datagrams.keep_order,
            ..Impairment::default()
        }
        .under(at_start.delays[way as usize], link.jitter, faults)
    })
}

/// The delay, jitter and faults in force at start, which `--remote`
/// changes while the link runs.
fn conditions(at_start: &ConditionsPlan) -> Arc<Conditions> {
    Arc::new(Conditions::fixing(
        at_start.in_force(),
        Fixed {
            carried: Carried::Datagrams,
            ..Fixed::default()
        },
    ))
}
