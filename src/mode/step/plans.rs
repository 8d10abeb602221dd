//! The second half of the argument step: a checked command line made into
//! its mode's plan ([`crate::mode::plan`]). Rates, bursts, sizes and the
//! timetable are read here in the units counted, each refused with a
//! one-line usage error naming its flag; a rate file is read here too (an
//! unreadable one is an I/O failure, status 1, as an input is).

use super::{Asked, Checked};
use crate::cli::Cli;
use crate::control::{RateFile, Request};
use crate::mode::UsageError;
use crate::mode::input::Input;
use crate::mode::plan::{
    ConditionsPlan, CopyPlan, DatagramPlan, ExecPlan, Mode, Pacing, ProgressPlan, ProxyPlan,
    RemotePlan, ServePlan, Start, UdpPlan,
};
use crate::progress::{BarLook, Parts, ProgressMode, Style};
use shape_bucket::units::Quantity;
use shape_bucket::{Limit, RateSpec};
use shape_impair::conditions::Retune;
use shape_impair::faults::Way;
use shape_leaves::counting::{Counting, Written};
use shape_leaves::message::one_line;
use shape_net::loops_per_core;
use shape_net::udp::IDLE;
use std::io::{self, IsTerminal};
use std::time::Duration;

/// How long `--connect` keeps trying without `--connect-timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a checked command line plans: its mode, and what it should be
/// told of flags that do less than it may think (said before the run,
/// unless quiet).
pub struct Planned {
    pub mode: Mode,
    pub warnings: Vec<String>,
}

impl Checked {
    /// The plan of the mode asked for, every value resolved.
    pub fn plan(self) -> anyhow::Result<Planned> {
        let Checked { asked, cli } = self;
        let cli = &cli;
        let mut warnings = Vec::new();
        let mode = match asked {
            Asked::Generate(what) => Mode::Generate(what),
            Asked::ListLinks => Mode::ListLinks,
            Asked::ShareStatus(name) => Mode::ShareStatus(name),
            Asked::ShareReset(name) => Mode::ShareReset(name),
            Asked::Remote(target) => Mode::Remote(Box::new(RemotePlan {
                target,
                request: request(cli),
            })),
            Asked::Serve(address) => Mode::Serve(ServePlan {
                address,
                config: cli.config.clone().map(|path| (path, "--config")),
                config_optional: false,
                seed: seed(cli),
                allow_origins: cli.serve_allow_origin.clone(),
                allow_unix: cli.serve_allow_unix,
                runtime_metrics: cli.runtime_metrics,
                proxy_metrics: true,
                quiet: cli.quiet,
                loops: loops(cli),
            }),
            Asked::Proxy { listen, connect } => Mode::Proxy(Box::new(ProxyPlan {
                listen,
                connect,
                pacing: pacing(cli)?,
                progress: progress(cli),
                conditions: conditions_at_start(cli),
                loops: loops(cli),
                http: super::http::plan(cli)?,
            })),
            Asked::Udp { listen, connect } => Mode::Udp(Box::new(UdpPlan {
                listen,
                connect,
                pacing: pacing(cli)?,
                progress: progress(cli),
                conditions: conditions_at_start(cli),
                datagrams: datagrams(cli)?,
            })),
            Asked::Exec(command) => Mode::Exec(Box::new(ExecPlan {
                command,
                pacing: pacing(cli)?,
                progress: progress(cli),
                conditions: conditions_at_start(cli),
                datagrams: datagrams(cli)?,
                linked: linked(cli),
                stats: cli.stats,
                http: super::http::plan(cli)?,
            })),
            Asked::Copy => {
                let plan = copy(cli)?;
                warnings = burst_warnings(cli, &plan.pacing.start);
                Mode::Copy(Box::new(plan))
            }
        };
        Ok(Planned { mode, warnings })
    }
}

/// `value`, converted from `written` given to `flag`, or a usage error
/// that names both.
fn invalid<T, W>(
    flag: &str,
    written: &Written<W>,
    value: Result<T, String>,
) -> Result<T, UsageError> {
    value.map_err(|why| UsageError(format!("invalid value '{written}' for '{flag}': {why}")))
}

/// What a run starts with: from the rate file if one is given, else from
/// `--rate`; the burst from `--burst`, else the rate file.
fn start(cli: &Cli) -> anyhow::Result<Start> {
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
        (None, Some(rate)) => Some(invalid("--rate <RATE>", rate, counting.limit(&rate.value))?),
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

/// How the run spends: where it starts, and each way's limit:
/// `--rate-up` and `--rate-down` if given, else the run's.
fn pacing(cli: &Cli) -> anyhow::Result<Pacing> {
    let start = start(cli)?;
    let way = |flag, given: &Option<Written<RateSpec>>| match given {
        Some(rate) => invalid(flag, rate, Counting::Bytes.limit(&rate.value)),
        None => Ok(start.limit),
    };
    let ways = [
        way("--rate-up <RATE>", &cli.rate_up)?,
        way("--rate-down <RATE>", &cli.rate_down)?,
    ];
    Ok(Pacing {
        start,
        ways,
        share: cli.share.clone(),
        share_fallback: cli.share_fallback,
        settings_given: cli.rate.is_some() || cli.burst.is_some() || cli.rate_file.is_some(),
        rate_file: cli.rate_file.clone(),
        traces: cli.traces(),
        quiet: cli.quiet,
    })
}

/// How progress is shown, as `--progress`, `-q`, `-n`, `-f` and the
/// terminal say, and what pv's switches choose of the bar.
fn progress(cli: &Cli) -> ProgressPlan {
    let chosen = cli.pv_percent || cli.pv_timer || cli.pv_eta || cli.pv_average;
    ProgressPlan {
        shown: shown(cli),
        look: BarLook {
            name: cli.name.clone(),
            wait: cli.wait,
            parts: chosen.then_some(Parts {
                percent: cli.pv_percent,
                timer: cli.pv_timer,
                eta: cli.pv_eta,
                average: cli.pv_average,
            }),
        },
    }
}

/// The reporter's style and interval, if progress is shown at all.
fn shown(cli: &Cli) -> Option<(Style, Duration)> {
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

/// The seed given, or one drawn now.
fn seed(cli: &Cli) -> u64 {
    cli.seed.unwrap_or_else(|| fastrand::u64(..))
}

/// The loops a proxy or the server runs: `--loops`, else one per core.
fn loops(cli: &Cli) -> usize {
    cli.loops.map_or_else(loops_per_core, usize::from)
}

/// What the link does at start, in both ways.
fn conditions_at_start(cli: &Cli) -> ConditionsPlan {
    ConditionsPlan {
        slow_link: cli.slow_link(),
        faults: Way::BOTH.map(|way| cli.faults(way)),
        delays: cli.delays(),
        // Beside an HTTP fault, --affect is the share of requests it
        // picks, and the stream's faults touch every connection.
        affect: match super::http::asked(cli) {
            true => 1.0,
            false => cli.affect.unwrap_or(1.0),
        },
        seed: seed(cli),
        say_seed: cli.draws_at_random(),
        per_connection: cli.per_connection,
    }
}

/// How a UDP link treats datagrams: its queue, as `--max-buffer` gives it
/// in the units counted, and its own options.
fn datagrams(cli: &Cli) -> Result<DatagramPlan, UsageError> {
    let counting = cli.counting();
    let queue = cli
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
    let udp = &cli.udp;
    Ok(DatagramPlan {
        counting,
        queue,
        traced: [&cli.trace_up, &cli.trace_down].map(|trace| trace.as_ref().map(|t| t.average())),
        queue_drop: udp.queue_drop.map(Into::into).unwrap_or_default(),
        keep_order: udp.jitter_keeps_order,
        idle: udp.udp_idle.unwrap_or(IDLE),
    })
}

/// Whether a command's connections and datagrams go through a link: a
/// delay, jitter, a fault or a UDP link's option was asked for at start.
fn linked(cli: &Cli) -> bool {
    cli.delay.is_some()
        || cli.delay_up.is_some()
        || cli.delay_down.is_some()
        || cli.jitter.is_some()
        || !cli.fault_changes().is_empty()
        || cli.udp.first_given().is_some()
        || super::http::asked(cli)
}

/// What `--remote` asks the running shape or the share to change.
fn request(cli: &Cli) -> Request {
    Request {
        rate: cli.rate.clone(),
        way_rates: [cli.rate_up.clone(), cli.rate_down.clone()],
        burst: cli.burst.clone(),
        paused: (cli.pause || cli.resume).then_some(cli.pause),
        retune: Retune {
            faults: cli.fault_changes(),
            delay: cli.delay_changes(),
            jitter: cli.jitter,
        },
        http: cli.http.given(),
    }
}

/// A copy's plan: the amounts read in the units counted.
fn copy(cli: &Cli) -> anyhow::Result<CopyPlan> {
    let pacing = pacing(cli)?;
    let counting = pacing.start.counting;
    let count_of = |flag, given: &Option<Written<Quantity>>| {
        given
            .as_ref()
            .map(|given| invalid(flag, given, counting.count(given.value)))
            .transpose()
    };
    let size = count_of("--size <SIZE>", &cli.size)?;
    let faults = cli.faults(Way::Down);
    // Cutting a stream after SIZE bytes is stopping after them.
    let stop_after = shape_leaves::duration::least(
        count_of("--stop-after <SIZE>", &cli.stop_after)?,
        faults.cut_after,
    );
    let inputs = match (&cli.listen, cli.files.is_empty()) {
        (Some(address), _) => vec![Input::Listen(address.clone())],
        (None, true) => vec![Input::Path("-".into())],
        (None, false) => cli.files.iter().cloned().map(Input::Path).collect(),
    };
    let delayed = cli.delay.is_some();
    Ok(CopyPlan {
        progress: progress(cli),
        inputs,
        connect: cli
            .connect
            .clone()
            .map(|address| (address, cli.connect_timeout.unwrap_or(CONNECT_TIMEOUT))),
        faulty: !cli.fault_changes().is_empty() || delayed,
        delayed,
        slow_link: cli.slow_link(),
        faults,
        size,
        stop_after,
        seed: seed(cli),
        say_seed: cli.draws_at_random(),
        stats: cli.stats,
        rate_written: cli.rate.as_ref().map(|rate| rate.text.clone()),
        pacing,
    })
}

/// What a burst given to a copy does not do: limit anything without a
/// rate, or pass a whole chunk when it is smaller than one.
fn burst_warnings(cli: &Cli, start: &Start) -> Vec<String> {
    let Some(burst) = &cli.burst else {
        return Vec::new();
    };
    let mut said = Vec::new();
    let no_rate = cli.rate.is_none()
        && cli.rate_file.is_none()
        && cli.schedule.is_none()
        && cli.share.is_none();
    if no_rate {
        said.push(format!(
            "shape: --burst {} limits nothing without a rate (--rate, or later --remote PID \
             --rate)",
            burst.text
        ));
    }
    let too_small = match (start.counting, start.burst) {
        (Counting::Bytes, Some(bytes)) => shape_leaves::chunk::burst_too_small(start.limit, bytes),
        _ => None,
    };
    if let Some(why) = too_small {
        said.push(format!(
            "shape: --burst {} is small for the rate: {why}",
            burst.text
        ));
    }
    said
}
