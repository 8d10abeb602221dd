//! The datagram proxy mode (`--listen udp:ADDR --connect udp:ADDR`):
//! binds, then carries every client's flow to the upstream and back until
//! ended by a signal, each way through a link impaired as the flags say
//! and paced by that way's bucket (`--rate`, `--rate-up`, `--rate-down`,
//! a share).

use super::UsageError;
use super::live::{Start, go_live, printer, start_reporter, two_ways};
use crate::cli::Cli;
use crate::control::Adjuster;
use anyhow::Context;
use shape_impair::conditions::{Carried, Conditions, Fixed, InForce};
use shape_impair::faults::Way;
use shape_leaves::bucket::Bucket;
use shape_leaves::counting::Counting;
use shape_leaves::exit::Exit;
use shape_leaves::throughput::{Passed, Throughput};
use shape_net::Address;
use shape_net::udp::{DatagramProxy, IDLE, Impairment, Route, default_queue};
use std::sync::Arc;

/// Serves until the process is ended; returns only if it cannot serve.
pub fn run(cli: &Cli, listen: &Address, connect: &Address) -> anyhow::Result<Exit> {
    let start = Start::of(cli)?;
    let (up, down, member) = two_ways(cli, &start)?;
    let ways = impairments(cli, [&up, &down])?;
    let addresses = || -> std::io::Result<_> {
        Ok((
            listen.datagram_address(true)?,
            connect.datagram_address(false)?,
        ))
    };
    let (listening, upstream) = addresses().with_context(|| format!("{listen} to {connect}"))?;
    // Said at start when anything is drawn, so that a run can be replayed.
    let draws = ways.iter().any(Impairment::draws);
    let route = Route {
        listen: listening,
        upstream,
        idle: cli.udp.udp_idle.unwrap_or(IDLE),
        ways,
        seed: cli.seed.unwrap_or_else(|| fastrand::u64(..)),
    };
    let seed = route.seed;
    let (passed_up, passed_down) = (Arc::<Throughput>::default(), Arc::<Throughput>::default());
    let passed = Passed::Ways {
        up: passed_up.clone(),
        down: passed_down.clone(),
    };
    let mut proxy = DatagramProxy::bind(
        route,
        [up.clone(), down.clone()],
        [passed_up.clone(), passed_down.clone()],
    )
    .with_context(|| format!("listening on {listen}"))?;
    let tallies = proxy.tallies();
    let conditions = conditions(cli);
    proxy.follow(conditions.clone());
    let adjuster = Arc::new(
        Adjuster::over(
            vec![up.clone(), down.clone()],
            cli.counting(),
            start.burst.is_some(),
        )
        .retuning(conditions)
        .reporting(Box::new(move || {
            let [up, down] = *shape_leaves::lock::lock(&tallies);
            format!("up: {}; down: {}", up.describe(), down.describe())
        })),
    );
    let reporter = start_reporter(cli, &passed, None, &[up.clone(), down.clone()]);
    let printer = printer(reporter.as_ref());
    let handle = proxy.handle()?;
    adjuster.on_change(Box::new(move || handle.wake()));
    if cli.per_connection {
        // Each flow's buckets follow the shared ones' settings.
        let adjuster = adjuster.clone();
        proxy.per_flow(Box::new(move |way| {
            adjuster.follower(way).map_err(std::io::Error::other)
        }));
    }
    let (_, _registration) = go_live(
        cli,
        &start,
        adjuster,
        &passed,
        printer.clone(),
        None,
        member.as_ref(),
    )?;
    if !cli.quiet {
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

/// What each way of the link does to datagrams, as the flags say, paced
/// by that way's bucket (`buckets`: up, then down).
pub(super) fn impairments(
    cli: &Cli,
    buckets: [&Arc<Bucket>; 2],
) -> anyhow::Result<[Impairment; 2]> {
    let link = cli.slow_link();
    let counting = cli.counting();
    let queue_given = cli
        .max_buffer
        .map(|given| {
            counting
                .count(given)
                .map(|n| counting.tokens(n))
                .map_err(|why| {
                    UsageError(format!("invalid value for '--max-buffer <SIZE>': {why}"))
                })
        })
        .transpose()?;
    Ok(Way::BOTH.map(|way| {
        let faults = cli.faults(way);
        let (limit, burst) = buckets[way as usize].limit_and_burst();
        // A traced way's queue holds what its trace gives on average.
        let traced = [&cli.trace_up, &cli.trace_down][way as usize];
        let queued = traced.as_ref().map_or(limit, |trace| trace.average());
        let udp = &cli.udp;
        Impairment {
            packets: counting == Counting::Datagrams,
            queue: queue_given.unwrap_or_else(|| default_queue(queued, counting)),
            held_most: link.delays().then(|| link.capacity(limit, burst)),
            queue_drop: udp.queue_drop.map(Into::into).unwrap_or_default(),
            keep_order: udp.jitter_keeps_order,
            ..Impairment::default()
        }
        .under(cli.delays()[way as usize], link.jitter, &faults)
    }))
}

/// The delay, jitter and faults in force at start, which `--remote`
/// changes while the link runs.
fn conditions(cli: &Cli) -> Arc<Conditions> {
    let link = cli.slow_link();
    Arc::new(Conditions::fixing(
        InForce {
            faults: Way::BOTH.map(|way| cli.faults(way)),
            delay: cli.delays(),
            jitter: link.jitter,
        },
        Fixed {
            carried: Carried::Datagrams,
            ..Fixed::default()
        },
    ))
}
