//! Copy mode, the default: every input in turn, through one bucket (the
//! run's own or a share's), to standard output or a connection, directly
//! or through a delay line, with progress, live controls and `--stats`.

use super::input::Input;
use super::live::{Start, go_live, printer, start_reporter};
use super::warn;
use crate::cli::Cli;
use crate::control::{Adjuster, Bucket, ControlDir, default_burst, share};
use crate::exit::{Exit, die_of_sigpipe};
use crate::net;
use crate::pipe::{CopyError, DelayedOutput, Ended, Output, Pump};
use crate::progress::Reporter;
use anyhow::{Context, anyhow};
use shape_bucket::units::{Size, human_bytes, human_rate};
use shape_bucket::{Limit, MonotonicClock};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long `--connect` keeps trying without `--connect-timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Copies every input; [`Exit::Failure`] if an input could not be read
/// (the others are still copied). A failing output ends the run with an
/// error, or, if the reader downstream went away, by SIGPIPE.
pub fn run(cli: &Cli) -> anyhow::Result<Exit> {
    let start = Start::of(cli)?;
    let burst = start.burst.unwrap_or_else(|| default_burst(start.limit));
    let bucket = Arc::new(bucket(cli, start.limit, burst)?);
    let adjuster = Arc::new(Adjuster::new(bucket.clone(), start.burst.is_some()));
    let inputs = Input::all(cli);
    let total = cli
        .size
        .map(Size::bytes)
        .or_else(|| Input::known_total(&inputs))
        .map(|total| cli.stop_after.map_or(total, |stop| total.min(stop.bytes())));
    let forwarded = Arc::new(AtomicU64::new(0));
    let reporter = start_reporter(cli, &forwarded, total, &bucket);
    let say = printer(reporter.as_ref());
    let (started, registration) = go_live(cli, adjuster, &forwarded, say.clone())?;
    let (file, output_name) = open_output(cli)?;
    let output = output(cli, file, &bucket, &forwarded)?;
    let mut pump = Pump::new(
        &bucket,
        output.pump_count(&forwarded),
        cli.stop_after.map(Size::bytes),
    )
    .with_max_chunk(cli.slow_link().max_chunk());
    // The reader downstream went away: die of SIGPIPE at once, as cat and
    // pv do, without a last word; any other failure ends the bar first.
    let write_failed = |err: io::Error, reporter: Option<Reporter>| {
        if err.kind() == io::ErrorKind::BrokenPipe {
            drop(registration);
            die_of_sigpipe();
        }
        if let Some(reporter) = reporter {
            reporter.finish();
        }
        anyhow!(err).context(format!("write to {output_name}"))
    };
    let say = (!cli.quiet).then_some(say);
    let mut all_read = true;
    for source in &inputs {
        let input = match source.open(say.as_ref()) {
            Ok(input) => input,
            Err(err) => {
                warn(&anyhow!(err).context(source.to_string()));
                all_read = false;
                continue;
            }
        };
        match output.forward(&mut pump, &input) {
            Ok(Ended::InputDone) => {}
            Ok(Ended::LimitReached) => break,
            Err(CopyError::Read(err)) => {
                warn(&anyhow!(err).context(format!("read from {source}")));
                all_read = false;
            }
            Err(CopyError::Write(err)) => return Err(write_failed(err, reporter)),
        }
    }
    drop(pump);
    let file = match output.finish() {
        Ok(file) => file,
        Err(err) => return Err(write_failed(err, reporter)),
    };
    if cli.connect.is_some() {
        net::finish(file).with_context(|| format!("close the connection to {output_name}"))?;
    }
    if let Some(reporter) = reporter {
        reporter.finish();
    }
    if cli.stats && !cli.quiet {
        let (limit, burst) = bucket.limit_and_burst();
        let seconds = started.elapsed().as_secs_f64();
        eprintln!(
            "{}",
            stats_line(forwarded.load(Ordering::Relaxed), seconds, limit, burst)
        );
    }
    Ok(if all_read {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// The bucket to spend from: the share's, or one of our own.
fn bucket(cli: &Cli, limit: Limit, burst: u64) -> anyhow::Result<Bucket> {
    let Some(name) = &cli.share else {
        return Ok(share::own(limit, burst)?);
    };
    let settings_given = cli.rate.is_some() || cli.burst.is_some();
    let (bucket, notice) = share::join(&ControlDir::open()?, name, limit, burst, settings_given)?;
    if let (Some(notice), false) = (notice, cli.quiet) {
        eprintln!("shape: {notice}");
    }
    Ok(bucket)
}

/// The output asked for, and its name for messages: a connection, or
/// standard output.
fn open_output(cli: &Cli) -> anyhow::Result<(File, String)> {
    match &cli.connect {
        Some(address) => {
            let timeout = cli.connect_timeout.unwrap_or(CONNECT_TIMEOUT);
            let connection = address
                .connect(timeout)
                .with_context(|| format!("connect to {address}"))?;
            Ok((connection, address.to_string()))
        }
        None => {
            let stdout = io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .context("standard output")?;
            Ok((File::from(stdout), "stdout".to_string()))
        }
    }
}

/// `file` as the pump's output: through a delay line if the link delays,
/// holding at most what the link's capacity says at the bucket's settings
/// of the moment.
fn output(
    cli: &Cli,
    file: File,
    bucket: &Arc<Bucket>,
    forwarded: &Arc<AtomicU64>,
) -> anyhow::Result<Output> {
    let link = cli.slow_link();
    if !link.delays() {
        return Ok(Output::Direct(file));
    }
    let bucket = bucket.clone();
    let capacity = Box::new(move || {
        let (limit, burst) = bucket.limit_and_burst();
        link.capacity(limit, burst)
    });
    let line = DelayedOutput::start(
        file,
        link.line(),
        capacity,
        MonotonicClock,
        forwarded.clone(),
    )
    .context("start the delay line")?;
    Ok(Output::delayed(line))
}

/// The `--stats` summary: what passed, and an average that says what it
/// is, beside the limit and the burst that may lift an average above it.
fn stats_line(bytes: u64, seconds: f64, limit: Limit, burst: u64) -> String {
    let average = if seconds > 0.0 {
        bytes as f64 / seconds
    } else {
        0.0
    };
    let limit = match limit {
        Limit::Unlimited => "no limit".to_string(),
        Limit::Rate(_) => format!("limit {limit} plus a {} burst", human_bytes(burst)),
    };
    format!(
        "shape: {bytes} bytes ({}) in {seconds:.3} s: average {}/s, {limit}",
        human_bytes(bytes),
        human_rate(average)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_say_bytes_time_the_average_and_what_bounds_it() {
        assert_eq!(
            stats_line(2 << 20, 1.9, Limit::per_second(1 << 20), 104_857),
            "shape: 2097152 bytes (2.00 MiB) in 1.900 s: average 1.05 MiB/s, limit 1.00 MiB/s plus a 102.40 KiB burst"
        );
        assert_eq!(
            stats_line(7, 0.0, Limit::Unlimited, 1 << 17),
            "shape: 7 bytes (7 B) in 0.000 s: average 0 B/s, no limit"
        );
    }
}
