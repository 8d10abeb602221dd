//! Proxy mode (`--listen` with `--connect`): serves connections until
//! ended by a signal, with the live controls of a copy (`--remote`,
//! `--rate-file`, `--schedule`, SIGUSR1), which change both directions.

use super::live::{Start, go_live, printer, start_reporter, two_ways};
use crate::cli::Cli;
use crate::control::Adjuster;
use anyhow::{Context, anyhow};
use shape_bucket::Damaged;
use shape_impair::conditions::{Conditions, InForce};
use shape_impair::faults::Way;
use shape_leaves::bucket::Bucket;
use shape_leaves::counting::Counting;
use shape_leaves::exit::Exit;
use shape_leaves::throughput::{Passed, Throughput};
use shape_net::{Address, loops_per_core, proxy};
use std::sync::Arc;

/// Serves until the process is ended; returns only if it cannot serve.
pub fn run(cli: &Cli, listen: &Address, connect: &Address) -> anyhow::Result<Exit> {
    let start = Start::of(cli)?;
    let (up, down, member) = two_ways(cli, &start)?;
    let link = cli.slow_link();
    let conditions = Arc::new(Conditions::new(InForce {
        faults: Way::BOTH.map(|way| cli.faults(way)),
        delay: cli.delays(),
        jitter: link.jitter,
    }));
    let adjuster = Arc::new(
        Adjuster::over(
            vec![up.clone(), down.clone()],
            Counting::Bytes,
            start.burst.is_some(),
        )
        .retuning(conditions.clone()),
    );
    let (passed_up, passed_down) = (Arc::<Throughput>::default(), Arc::<Throughput>::default());
    let passed = Passed::Ways {
        up: passed_up.clone(),
        down: passed_down.clone(),
    };
    let reporter = start_reporter(cli, &passed, None, &[up.clone(), down.clone()]);
    let printer = printer(reporter.as_ref());
    let (_, _registration) = go_live(
        cli,
        &start,
        adjuster.clone(),
        &passed,
        printer.clone(),
        None,
        member.as_ref(),
    )?;
    let shaping = proxy::Shaping {
        settings: Arc::new(Tuning(adjuster)),
        per_connection: cli.per_connection,
        link,
        conditions,
        affect: cli.affect.unwrap_or(1.0),
        passed_up,
        passed_down,
        report: (!cli.quiet).then_some(printer),
        seed: cli.seed.unwrap_or_else(|| fastrand::u64(..)),
        say_seed: cli.draws_at_random(),
        loops: cli.loops.map_or_else(loops_per_core, usize::from),
    };
    let served = proxy::forward(listen, connect, &shaping);
    drop(member);
    if let Err(err) = &served
        && err.get_ref().is_some_and(|inner| inner.is::<Damaged>())
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
