//! What the copy and the proxy share: the settings they start from, the
//! live controls that change them (`--remote`, `--rate-file`, `--schedule`,
//! SIGUSR1) and the progress reporter.

use super::UsageError;
use crate::cli::Cli;
use crate::control::{self, Adjuster, Bucket, RateFile, Registration, Run};
use crate::progress::{Printer, ProgressMode, Reporter, Source, Style};
use shape_bucket::Limit;
use shape_bucket::units::Size;
use std::io::{self, IsTerminal};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// What a run starts with: the limit, and the burst if one was set.
pub struct Start {
    pub limit: Limit,
    pub burst: Option<u64>,
}

impl Start {
    /// From the rate file if one is given, else from `--rate` and
    /// `--burst`. A bad rate file is a usage error.
    pub fn of(cli: &Cli) -> Result<Start, UsageError> {
        let file = match &cli.rate_file {
            None => None,
            Some(path) => Some(
                RateFile::load(path)
                    .map_err(|why| UsageError(format!("--rate-file {}: {why}", path.display())))?,
            ),
        };
        Ok(Start {
            limit: file.map_or(cli.rate.unwrap_or(Limit::Unlimited), |file| file.limit),
            burst: cli
                .burst
                .map(Size::bytes)
                .or(file.and_then(|file| file.burst)),
        })
    }
}

/// Starts the live controls of a run: the timetable, signals and remote
/// control (registered with the share if there is one). Returns when the
/// run started and the registration to keep until it ends.
pub fn go_live(
    cli: &Cli,
    adjuster: Arc<Adjuster>,
    forwarded: &Arc<AtomicU64>,
    printer: Printer,
) -> io::Result<(Instant, Option<Registration>)> {
    let started = Instant::now();
    if let Some(schedule) = cli.schedule.clone() {
        control::follow(schedule, adjuster.clone(), started);
    }
    let run = Run {
        adjuster,
        forwarded: forwarded.clone(),
        started,
        printer,
        rate_file: cli.rate_file.clone(),
    };
    let registration = control::start(run, cli.share.clone(), cli.quiet)?;
    Ok((started, registration))
}

/// The progress reporter asked for, if any, counting `forwarded` towards
/// `total` and showing the limit of `bucket`.
pub fn start_reporter(
    cli: &Cli,
    forwarded: &Arc<AtomicU64>,
    total: Option<u64>,
    bucket: &Arc<Bucket>,
) -> Option<Reporter> {
    progress_style(cli).map(|(style, interval)| {
        let bucket = bucket.clone();
        let source = Source {
            bytes: forwarded.clone(),
            total,
            limit: Box::new(move || bucket.limit()),
        };
        Reporter::start(style, interval, source)
    })
}

/// How to say a line without breaking the bar, if there is one.
pub fn printer(reporter: Option<&Reporter>) -> Printer {
    reporter.map(Reporter::printer).unwrap_or_default()
}

/// The reporter's style and interval, if progress is shown at all.
fn progress_style(cli: &Cli) -> Option<(Style, Duration)> {
    let style = match cli.progress {
        _ if cli.quiet => return None,
        ProgressMode::None => return None,
        ProgressMode::Auto if !io::stderr().is_terminal() => return None,
        ProgressMode::Auto | ProgressMode::Bar => Style::Bar,
        ProgressMode::Json => Style::Json,
    };
    Some((style, cli.interval.unwrap_or(style.default_interval())))
}
