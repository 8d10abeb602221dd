//! What the copy and the proxy share: the settings they start from, the
//! live controls that change them (`--remote`, `--rate-file`, `--schedule`,
//! SIGUSR1) and the progress reporter.

use super::UsageError;
use crate::cli::Cli;
use crate::control::{
    self, Adjuster, ControlDir, RateFile, Registration, Run, ShareName, fleet, share,
};
use crate::progress::{BarLook, Parts, ProgressMode, Reporter, Source, Style};
use shape_bucket::{Limit, RateSpec};
use shape_leaves::bucket::Bucket;
use shape_leaves::chunk::default_burst;
use shape_leaves::counting::{Counting, Written};
use shape_leaves::message::one_line;
use shape_leaves::say::Printer;
use shape_leaves::throughput::Passed;
use std::io::{self, IsTerminal};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a run starts with, read as the run counts: the limit, the burst
/// if one was set, and the timetable, in tokens; a bad value of any of
/// them is a usage error naming its flag.
pub struct Start {
    pub counting: Counting,
    pub limit: Limit,
    pub burst: Option<u64>,
    pub schedule: Vec<(Duration, Limit)>,
}

impl Start {
    /// From the rate file if one is given, else from `--rate`; the burst
    /// from `--burst`, else the rate file.
    /// A rate file that cannot be read is an I/O failure (status 1), as
    /// an input is; one that says something wrong is bad usage (2).
    pub fn of(cli: &Cli) -> anyhow::Result<Start> {
        let counting = cli.counting();
        let file = match &cli.rate_file {
            None => None,
            Some(path) => {
                let text = RateFile::read(path).map_err(|err| {
                    anyhow::anyhow!("--rate-file {}: {}", path.display(), one_line(&err))
                })?;
                let refused = |why| UsageError(format!("--rate-file {}: {why}", path.display()));
                let file = RateFile::from_bytes(text).map_err(refused)?;
                Some(file.request().adjustment(counting).map_err(refused)?)
            }
        };
        let limit = match (&file, &cli.rate) {
            (Some(file), _) => file.limit,
            (None, Some(rate)) => {
                Some(invalid("--rate <RATE>", rate, counting.limit(&rate.value))?)
            }
            (None, None) => None,
        };
        let burst = match &cli.burst {
            Some(burst) => Some(invalid(
                "--burst <SIZE>",
                burst,
                counting.burst(burst.value),
            )?),
            None => file.and_then(|file| file.burst),
        };
        let schedule = match &cli.schedule {
            Some(schedule) => invalid(
                "--schedule <TIMETABLE>",
                schedule,
                schedule.value.limits(counting),
            )?,
            None => Vec::new(),
        };
        Ok(Start {
            counting,
            limit: limit.unwrap_or(Limit::Unlimited),
            burst,
            schedule,
        })
    }

    /// The burst to start with: the one set, else the default for the
    /// limit.
    pub fn burst_or_default(&self) -> u64 {
        self.burst
            .unwrap_or_else(|| default_burst(self.limit, self.counting))
    }
}

/// `value`, converted from `written` given to `flag`, or a usage error
/// that names both.
pub fn invalid<T, W>(
    flag: &str,
    written: &Written<W>,
    value: Result<T, String>,
) -> Result<T, UsageError> {
    value.map_err(|why| UsageError(format!("invalid value '{written}' for '{flag}': {why}")))
}

/// Starts the live controls of a run: the timetable, signals and remote
/// control (registered with the share if there is one), passing SIGINT,
/// SIGTERM and SIGHUP to `pass_on` if given, else leaving the fleet's
/// share of `member` on them. Returns when the run started and the
/// registration to keep until it ends.
pub fn go_live(
    cli: &Cli,
    start: &Start,
    adjuster: Arc<Adjuster>,
    passed: &Passed,
    printer: Printer,
    pass_on: Option<Box<dyn Fn(i32) + Send>>,
    member: Option<&fleet::Member>,
) -> io::Result<(Instant, Option<Registration>)> {
    let started = Instant::now();
    if !start.schedule.is_empty() {
        control::follow(start.schedule.clone(), adjuster.clone(), started);
    }
    control::traced::follow(cli.traces(), adjuster.clone(), started)?;
    let run = Run {
        adjuster,
        passed: passed.clone(),
        started,
        printer,
        rate_file: cli.rate_file.clone(),
        pass_on,
        leaving: member.map(fleet::Member::leaving),
    };
    // Only a share of this machine's counts its shapes by registration.
    let local_share = match &cli.share {
        Some(ShareName::Local(name)) => Some(name.clone()),
        _ => None,
    };
    let registration = control::start(run, local_share, cli.quiet)?;
    Ok((started, registration))
}

/// The progress reporter asked for, if any, counting `passed` towards
/// `total` and showing the limit of `bucket`.
pub fn start_reporter(
    cli: &Cli,
    passed: &Passed,
    total: Option<u64>,
    buckets: &[Arc<Bucket>],
) -> Option<Reporter> {
    progress_style(cli).map(|(style, interval)| {
        let buckets = buckets.to_vec();
        let source = Source {
            passed: passed.clone(),
            counting: cli.counting(),
            total,
            limits: Box::new(move || buckets.iter().map(|bucket| bucket.limit()).collect()),
            look: look(cli),
        };
        Reporter::start(style, interval, source)
    })
}

/// What the bar looks like, as pv's switches ask.
fn look(cli: &Cli) -> BarLook {
    let chosen = cli.pv_percent || cli.pv_timer || cli.pv_eta || cli.pv_average;
    BarLook {
        name: cli.name.clone(),
        wait: cli.wait,
        parts: chosen.then_some(Parts {
            percent: cli.pv_percent,
            timer: cli.pv_timer,
            eta: cli.pv_eta,
            average: cli.pv_average,
        }),
    }
}

/// How to say a line without breaking the bar, if there is one.
pub fn printer(reporter: Option<&Reporter>) -> Printer {
    reporter.map(Reporter::printer).unwrap_or_default()
}

/// The reporter's style and interval, if progress is shown at all.
fn progress_style(cli: &Cli) -> Option<(Style, Duration)> {
    let style = match cli.progress {
        _ if cli.quiet => return None,
        _ if cli.numeric => Style::Numeric,
        ProgressMode::None => return None,
        // -f forces a bar, as pv's does.
        ProgressMode::Auto if cli.force && cli.exec.is_some() && io::stderr().is_terminal() => {
            Style::PinnedBar
        }
        ProgressMode::Auto if cli.force => Style::Bar,
        ProgressMode::Auto if !io::stderr().is_terminal() => return None,
        // The command owns the terminal: a bar only if asked for.
        ProgressMode::Auto if cli.exec.is_some() => return None,
        // A command writing to the same terminal scrolls above the bar.
        ProgressMode::Bar if cli.exec.is_some() && io::stderr().is_terminal() => Style::PinnedBar,
        ProgressMode::Auto | ProgressMode::Bar => Style::Bar,
        ProgressMode::Json => Style::Json,
        ProgressMode::Numeric => Style::Numeric,
    };
    Some((style, cli.interval.unwrap_or(style.default_interval())))
}

/// The bucket to spend from: a share's (with the membership to keep while
/// spending from a fleet's), or one of our own.
pub fn bucket(cli: &Cli, start: &Start) -> anyhow::Result<(Arc<Bucket>, Option<fleet::Member>)> {
    let settings = (start.limit, start.burst_or_default());
    let given = cli.rate.is_some() || cli.burst.is_some() || cli.rate_file.is_some();
    let (bucket, member, notice) = match &cli.share {
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
            let joining = fleet::Joining {
                limit: settings.0,
                burst: settings.1,
                counting: start.counting,
                settings_given: given,
                burst_given: start.burst.is_some(),
                fallback: cli.share_fallback,
            };
            let say = (!cli.quiet).then(Printer::default);
            let (bucket, member, notice) = fleet::join(share, &joining, say)?;
            (bucket, Some(member), notice)
        }
    };
    if let (Some(notice), false) = (notice, cli.quiet) {
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
    cli: &Cli,
    start: &Start,
) -> anyhow::Result<(Arc<Bucket>, Arc<Bucket>, Option<fleet::Member>)> {
    // On a share both ways spend from its one bucket (`--rate-up` and
    // `--rate-down` are refused with it).
    if cli.share.is_some() {
        let (bucket, member) = bucket(cli, start)?;
        return Ok((bucket.clone(), bucket, member));
    }
    let direction = |flag, given: &Option<Written<RateSpec>>| match given {
        Some(rate) => invalid(flag, rate, Counting::Bytes.limit(&rate.value)),
        None => Ok(start.limit),
    };
    let up = direction("--rate-up <RATE>", &cli.rate_up)?;
    let down = direction("--rate-down <RATE>", &cli.rate_down)?;
    let burst = |limit| {
        start
            .burst
            .unwrap_or_else(|| default_burst(limit, Counting::Bytes))
    };
    let up = Arc::new(shape_leaves::bucket::own(up, burst(up))?);
    let down = Arc::new(shape_leaves::bucket::own(down, burst(down))?);
    Ok((up, down, None))
}
