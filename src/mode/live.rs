//! What the copy and the proxy share: their buckets, the live controls
//! that change them (`--remote`, `--rate-file`, `--schedule`, SIGUSR1)
//! and the progress reporter, each as the plan's [`Pacing`] and
//! [`ProgressPlan`] say.

use super::http::LiveHttp;
use super::plan::{Pacing, ProgressPlan};
use crate::control::{self, Adjuster, ControlDir, Registration, Run, ShareName, fleet, share};
use crate::progress::{Reporter, Source};
use shape_impair::faults::Way;
use shape_leaves::bucket::Bucket;
use shape_leaves::chunk::default_burst;
use shape_leaves::counting::Counting;
use shape_leaves::say::Printer;
use shape_leaves::throughput::{Passed, Throughput};
use std::io;
use std::sync::Arc;
use std::time::Instant;

/// What passes SIGINT, SIGTERM and SIGHUP on (to a command).
pub type PassOn = Box<dyn Fn(i32) + Send>;

/// Starts the live controls of a run: the timetable, signals and remote
/// control (registered with the share if there is one), passing SIGINT,
/// SIGTERM and SIGHUP to `pass_on` if given, else leaving the fleet's
/// share of `member` on them. Returns when the run started and the
/// registration to keep until it ends.
pub fn go_live(
    pacing: &Pacing,
    adjuster: Arc<Adjuster>,
    passed: &Passed,
    printer: Printer,
    pass_on: Option<PassOn>,
    member: Option<&fleet::Member>,
) -> io::Result<(Instant, Option<Registration>)> {
    let started = Instant::now();
    if !pacing.start.schedule.is_empty() {
        control::follow(pacing.start.schedule.clone(), adjuster.clone(), started);
    }
    control::traced::follow(pacing.traces.clone(), adjuster.clone(), started)?;
    let run = Run {
        adjuster,
        passed: passed.clone(),
        started,
        printer,
        rate_file: pacing.rate_file.clone(),
        pass_on,
        leaving: member.map(fleet::Member::leaving),
    };
    // Only a share of this machine's counts its shapes by registration.
    let local_share = match &pacing.share {
        Some(ShareName::Local(name)) => Some(name.clone()),
        _ => None,
    };
    let registration = control::start(run, local_share, pacing.quiet)?;
    Ok((started, registration))
}

/// The progress reporter `progress` asks for, if any, counting `passed`
/// in `counting`'s units towards `total` and showing the limit of
/// `buckets`.
pub fn start_reporter(
    progress: &ProgressPlan,
    counting: Counting,
    passed: &Passed,
    total: Option<u64>,
    buckets: &[Arc<Bucket>],
) -> Option<Reporter> {
    reporter_with(progress, counting, passed, total, buckets, None)
}

/// As [`start_reporter`], with what an HTTP rule counts in the JSON
/// records, if there is one.
fn reporter_with(
    progress: &ProgressPlan,
    counting: Counting,
    passed: &Passed,
    total: Option<u64>,
    buckets: &[Arc<Bucket>],
    requests: Option<Box<dyn Fn() -> [u64; 3] + Send>>,
) -> Option<Reporter> {
    progress.shown.map(|(style, interval)| {
        let buckets = buckets.to_vec();
        let source = Source {
            passed: passed.clone(),
            counting,
            total,
            limits: Box::new(move || buckets.iter().map(|bucket| bucket.limit()).collect()),
            look: progress.look.clone(),
            requests,
        };
        Reporter::start(style, interval, source)
    })
}

/// The adjuster of a proxy's or a command's two ways, `up` and `down`:
/// it retunes `conditions`, and replaces the HTTP rule through `rule` if
/// there is one.
pub fn two_way_adjuster(
    [up, down]: [&Arc<Bucket>; 2],
    pacing: &Pacing,
    conditions: Arc<shape_impair::conditions::Conditions>,
    rule: Option<Box<dyn control::RuleControl>>,
) -> Arc<Adjuster> {
    let mut adjuster = Adjuster::over(
        vec![up.clone(), down.clone()],
        Counting::Bytes,
        pacing.start.burst.is_some(),
    )
    .retuning(conditions);
    if let Some(rule) = rule {
        adjuster = adjuster.ruling(rule);
    }
    Arc::new(adjuster)
}

/// The counts of a run's two ways, up then down, and both as what the
/// live controls and the reporter count.
pub fn two_counts() -> ([Arc<Throughput>; 2], Passed) {
    let counts = [Arc::<Throughput>::default(), Arc::<Throughput>::default()];
    let passed = Passed::Ways {
        up: counts[0].clone(),
        down: counts[1].clone(),
    };
    (counts, passed)
}

/// The reporter of a run with two ways, which shows both ways' limits.
pub fn two_way_reporter(
    progress: &ProgressPlan,
    pacing: &Pacing,
    passed: &Passed,
    [up, down]: [&Arc<Bucket>; 2],
    http: Option<&LiveHttp>,
) -> Option<Reporter> {
    reporter_with(
        progress,
        pacing.start.counting,
        passed,
        None,
        &[up.clone(), down.clone()],
        http.map(LiveHttp::counting),
    )
}

/// True if `err` is, or carries, a bucket found damaged (a share written
/// over): then the share's own line says what to do.
pub fn damaged(err: &io::Error) -> bool {
    match err.get_ref() {
        Some(inner) if inner.is::<shape_bucket::Damaged>() => true,
        Some(inner) => inner
            .downcast_ref::<shape_net::proxy::RelayFailed>()
            .is_some_and(|failed| damaged(&failed.0)),
        None => false,
    }
}

/// How to say a line without breaking the bar, if there is one.
pub fn printer(reporter: Option<&Reporter>) -> Printer {
    reporter.map(Reporter::printer).unwrap_or_default()
}

/// The bucket to spend from: a share's (with the membership to keep while
/// spending from a fleet's), or one of our own.
pub fn bucket(pacing: &Pacing) -> anyhow::Result<(Arc<Bucket>, Option<fleet::Member>)> {
    let start = &pacing.start;
    let settings = (start.limit, start.burst_or_default());
    let given = pacing.settings_given;
    let (bucket, member, notice) = match &pacing.share {
        None => (
            Arc::new(shape_leaves::bucket::own(settings.0, settings.1)?),
            None,
            None,
        ),
        Some(ShareName::Local(name)) => {
            let dir = ControlDir::open()?;
            let offer = share::Offer {
                limit: settings.0,
                burst: settings.1,
                settings_given: given,
                burst_given: start.burst.is_some(),
            };
            let (bucket, notice) = share::join(&dir, name, &offer, start.counting)?;
            (Arc::new(bucket), None, notice)
        }
        Some(ShareName::Redis(share)) => {
            let joining = shape_leaves::share::Joining {
                limit: settings.0,
                burst: settings.1,
                counting: start.counting,
                settings_given: given,
                burst_given: start.burst.is_some(),
                fallback: pacing.share_fallback,
            };
            let say = (!pacing.quiet).then(Printer::default);
            let (bucket, member, notice) = fleet::join(share, &joining, say)?;
            (bucket, Some(member), notice)
        }
    };
    if let (Some(notice), false) = (notice, pacing.quiet) {
        eprintln!("shape: {notice}");
    }
    Ok((bucket, member))
}

/// The buckets of the two ways of a proxy or a command (up, down), and
/// the membership to keep while spending from a fleet's share: on a
/// share, both ways spend from its one bucket (so `--rate-up` and
/// `--rate-down` are usage errors there); else each has its own, at
/// `--rate-up` and `--rate-down` if given, else at the run's limit.
pub fn two_ways(
    pacing: &Pacing,
) -> anyhow::Result<(Arc<Bucket>, Arc<Bucket>, Option<fleet::Member>)> {
    // On a share both ways spend from its one bucket (`--rate-up` and
    // `--rate-down` are refused with it).
    if pacing.share.is_some() {
        let (bucket, member) = bucket(pacing)?;
        return Ok((bucket.clone(), bucket, member));
    }
    let own = |way| {
        let limit = pacing.way(way);
        let burst = pacing
            .start
            .burst
            .unwrap_or_else(|| default_burst(limit, Counting::Bytes));
        shape_leaves::bucket::own(limit, burst).map(Arc::new)
    };
    Ok((own(Way::Up)?, own(Way::Down)?, None))
}
