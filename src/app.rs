//! One run of `shape`: parse the command line, open the inputs in turn,
//! pump each to standard output (or a connection) through one bucket, show
//! progress, and turn the outcome into an exit status. Also the two
//! one-off commands: `--remote` and `--share NAME --status`.

use crate::cli::{Cli, RemoteTarget};
use crate::clock::MonotonicClock;
use crate::control::{self, ControlDir, Registration, RemoteError, Request, Settings};
use crate::copy::{CopyError, Ended, Pump};
use crate::delayed::DelayedOutput;
use crate::live::{self, Adjuster, Run, default_burst};
use crate::message::{self, escape_controls};
use crate::net::{self, Address};
use crate::progress::{Printer, ProgressMode, Reporter, Source, Style};
use crate::proxy;
use crate::rate::{Limit, human_rate};
use crate::schedule::RateFile;
use crate::share::{self, Bucket, Opened};
use crate::size::{Size, human_bytes};
use anyhow::{Context, anyhow};
use clap::Parser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use std::fs::File;
use std::io::{self, IsTerminal};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Exit status: everything was copied.
pub const SUCCESS: u8 = 0;
/// Exit status: an input or the output failed.
pub const IO_FAILURE: u8 = 1;
/// Exit status: bad usage.
pub const USAGE: u8 = 2;

/// Runs shape with the process's arguments and returns its exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(&err),
    };
    if let Some(what) = cli.generate {
        return match crate::generate::write(what, &mut io::stdout().lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => fail(&anyhow!(err).context("write to stdout")),
        };
    }
    if let Some(target) = &cli.remote {
        return remote(&cli, target);
    }
    if let (Some(name), true) = (&cli.share, cli.status) {
        return share_status(name);
    }
    if let (Some(name), true) = (&cli.share, cli.reset) {
        return share_reset(name);
    }
    let rate_file = match cli.rate_file.as_deref().map(RateFile::load).transpose() {
        Ok(file) => file,
        Err(why) => {
            let path = cli.rate_file.as_deref().unwrap_or(Path::new("")).display();
            eprintln!(
                "shape: {}",
                escape_controls(&format!("--rate-file {path}: {why}"))
            );
            return ExitCode::from(USAGE);
        }
    };
    if let (Some(listen), Some(connect)) = (&cli.listen, &cli.connect) {
        if let Some(flag) = not_for_a_proxy(&cli) {
            eprintln!("shape: {flag} does not apply to a proxy (--listen with --connect)");
            return ExitCode::from(USAGE);
        }
        return match proxy(&cli, listen, connect, rate_file) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => fail(&err),
        };
    }
    match run(&cli, rate_file) {
        Ok(true) => ExitCode::from(SUCCESS),
        Ok(false) => ExitCode::from(IO_FAILURE),
        Err(err) => fail(&err),
    }
}

/// `shape --remote PID ...`: asks the shape running as PID to change, and
/// prints the settings it then reports; `--remote share:NAME` changes the
/// share's bucket itself, for every shape on it.
fn remote(cli: &Cli, target: &RemoteTarget) -> ExitCode {
    let request = Request {
        limit: cli.rate,
        burst: cli.burst.map(Size::bytes),
        paused: (cli.pause || cli.resume).then_some(cli.pause),
    };
    if request == Request::default() {
        eprintln!("shape: --remote needs --rate, --burst, --pause or --resume");
        return ExitCode::from(USAGE);
    }
    let dir = ControlDir::open().map_err(RemoteError::Io);
    let sent = match target {
        RemoteTarget::Process(pid) => dir
            .and_then(|dir| dir.send(*pid, &request, Duration::from_secs(1)))
            .map_err(anyhow::Error::from),
        RemoteTarget::Share(name) => dir.map_err(anyhow::Error::from).and_then(|dir| {
            let bucket = share::find(&dir, name)?;
            control::apply(&bucket, &request).with_context(|| format!("share {name}"))?;
            Ok(Settings::of(&bucket))
        }),
    };
    let who = match target {
        RemoteTarget::Process(pid) => format!("shape {pid}"),
        RemoteTarget::Share(name) => format!("share {name}"),
    };
    match sent {
        Ok(settings) => {
            println!("{who}: {settings}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("shape: {}", describe(&err));
            ExitCode::from(IO_FAILURE)
        }
    }
}

/// Help and version go to stdout with status 0; any other clap error
/// becomes one line naming the flag and the value, with status 2.
fn usage_error(err: &clap::Error) -> ExitCode {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        let _ = err.print();
        return ExitCode::SUCCESS;
    }
    eprintln!("shape: {}", usage_message(err));
    ExitCode::from(USAGE)
}

/// The one line a usage error prints. Control characters are escaped, so
/// that a newline in a bad value cannot break the line.
fn usage_message(err: &clap::Error) -> String {
    let context = |kind| match err.get(kind) {
        Some(ContextValue::String(text)) => Some(text.clone()),
        _ => None,
    };
    if let (Some(arg), Some(value)) = (
        context(ContextKind::InvalidArg),
        context(ContextKind::InvalidValue),
    ) {
        let why = match err.kind() {
            ErrorKind::ValueValidation => std::error::Error::source(err).map(|e| e.to_string()),
            _ => match err.get(ContextKind::ValidValue) {
                Some(ContextValue::Strings(valid)) => {
                    Some(format!("expected one of {}", valid.join(", ")))
                }
                _ => None,
            },
        };
        let why = why.map(|why| format!(": {why}")).unwrap_or_default();
        return escape_controls(&format!("invalid value '{value}' for '{arg}'{why}"));
    }
    if let (ErrorKind::MissingRequiredArgument, Some(ContextValue::Strings(missing))) =
        (err.kind(), err.get(ContextKind::InvalidArg))
    {
        return format!("{} must be given too", missing.join(" and "));
    }
    let rendered = err.render().to_string();
    let first = rendered.lines().next().unwrap_or("invalid usage");
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

fn fail(err: &anyhow::Error) -> ExitCode {
    eprintln!("shape: {}", describe(err));
    ExitCode::from(IO_FAILURE)
}

/// An error chain on one line; see [`message::one_line`].
fn describe(err: &anyhow::Error) -> String {
    message::one_line(err)
}

fn warn(err: anyhow::Error) {
    eprintln!("shape: {}", describe(&err));
}

/// Copies every input to standard output. Returns whether every input
/// could be read; an error means the output failed and the run stopped.
/// `shape --share NAME --status`: the share's settings and what its
/// shapes spend together, measured over half a second.
fn share_status(name: &str) -> ExitCode {
    let found = ControlDir::open()
        .map_err(anyhow::Error::from)
        .and_then(|dir| Ok(share::find(&dir, name)?));
    match found {
        Ok(bucket) => {
            let (before, started) = (bucket.spent(), Instant::now());
            std::thread::sleep(Duration::from_millis(500));
            let used = bucket.spent().wrapping_sub(before) as f64 / started.elapsed().as_secs_f64();
            println!(
                "share {name}: {}; in use {}/s; {} bytes in hand",
                Settings::of(&bucket),
                human_rate(used),
                bucket.available()
            );
            ExitCode::SUCCESS
        }
        Err(err) => fail(&err),
    }
}

/// `shape --share NAME --reset`: removes the share's file so that the next
/// shape on it starts it afresh.
fn share_reset(name: &str) -> ExitCode {
    let removed = ControlDir::open()
        .map_err(anyhow::Error::from)
        .and_then(|dir| Ok(share::reset(&dir, name)?));
    match removed {
        Ok(true) => {
            println!("share {name}: removed; the next shape on it starts it afresh");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("share {name}: there was none; the next shape on it starts it");
            ExitCode::SUCCESS
        }
        Err(err) => fail(&err),
    }
}

/// The first flag given that means nothing to a proxy, which serves until
/// it is ended and spends from buckets of its own.
fn not_for_a_proxy(cli: &Cli) -> Option<&'static str> {
    [
        (cli.share.is_some(), "--share"),
        (cli.stop_after.is_some(), "--stop-after"),
        (cli.size.is_some(), "--size"),
        (cli.stats, "--stats"),
        (cli.connect_timeout.is_some(), "--connect-timeout"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// Proxy mode: serves connections until ended by a signal, with the live
/// controls of a copy (--remote, --rate-file, --schedule, SIGUSR1), which
/// change both directions.
fn proxy(
    cli: &Cli,
    listen: &Address,
    connect: &Address,
    rate_file: Option<RateFile>,
) -> anyhow::Result<()> {
    let (rate, set_burst) = starting_settings(cli, rate_file);
    let (up, down) = (cli.rate_up.unwrap_or(rate), cli.rate_down.unwrap_or(rate));
    let burst = |limit| set_burst.unwrap_or_else(|| default_burst(limit));
    let shared = (
        Arc::new(share::own(up, burst(up))?),
        Arc::new(share::own(down, burst(down))?),
    );
    let adjuster = Arc::new(Adjuster::over(
        vec![shared.0.clone(), shared.1.clone()],
        set_burst.is_some(),
    ));
    let forwarded = Arc::new(AtomicU64::new(0));
    let reporter = start_reporter(cli, &forwarded, None, &shared.0);
    let (_, _registration) = go_live(cli, adjuster.clone(), &forwarded, reporter.as_ref())?;
    let report = match (cli.quiet, &reporter) {
        (true, _) => None,
        (false, reporter) => Some(reporter.as_ref().map(Reporter::printer).unwrap_or_default()),
    };
    let shaping = proxy::Shaping {
        adjuster,
        per_connection: cli.per_connection,
        link: cli.slow_link(),
        forwarded,
        report,
    };
    proxy::serve(listen, connect, &shaping)
        .with_context(|| format!("proxy from {listen} to {connect}"))
}

/// The limit to start with, and the burst if one was set: from the rate
/// file if given, else from --rate and --burst.
fn starting_settings(cli: &Cli, rate_file: Option<RateFile>) -> (Limit, Option<u64>) {
    let limit = rate_file.map_or(cli.rate.unwrap_or(Limit::Unlimited), |file| file.limit);
    let set_burst = cli
        .burst
        .map(Size::bytes)
        .or(rate_file.and_then(|file| file.burst));
    (limit, set_burst)
}

/// Starts the live controls of a run: the timetable, signals and remote
/// control (registered with the share if there is one). Returns when the
/// run started and the registration to keep until it ends.
fn go_live(
    cli: &Cli,
    adjuster: Arc<Adjuster>,
    forwarded: &Arc<AtomicU64>,
    reporter: Option<&Reporter>,
) -> anyhow::Result<(Instant, Option<Registration>)> {
    let started = Instant::now();
    if let Some(schedule) = cli.schedule.clone() {
        live::follow(schedule, adjuster.clone(), started);
    }
    let live = Run {
        adjuster,
        forwarded: forwarded.clone(),
        started,
        printer: reporter.map(Reporter::printer).unwrap_or_default(),
        rate_file: cli.rate_file.clone(),
    };
    let registration = live::start(live, cli.share.clone(), cli.quiet)?;
    Ok((started, registration))
}

/// The progress reporter asked for, if any, counting `forwarded` towards
/// `total` and showing the limit of `bucket`.
fn start_reporter(
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

/// The bucket to spend from: the share's, or one of our own.
fn bucket(cli: &Cli, limit: Limit, burst: u64) -> anyhow::Result<Bucket> {
    let Some(name) = &cli.share else {
        return Ok(share::own(limit, burst)?);
    };
    let dir = ControlDir::open()?;
    let (bucket, opened) = share::open(&dir, name, limit, burst)?;
    let asked_for = cli.rate.is_some() || cli.burst.is_some();
    let differs = bucket.limit() != limit || bucket.burst() != burst;
    if opened == Opened::Attached && asked_for && differs {
        if dir.spenders(name) == 0 {
            // A share left by shapes that have all ended: this one starts
            // it afresh with its own settings.
            bucket.set(limit, burst)?;
        } else if !cli.quiet {
            eprintln!(
                "shape: share {name} is at {}; using that (change it with --remote share:{name})",
                Settings::of(&bucket)
            );
        }
    }
    Ok(bucket)
}

fn run(cli: &Cli, rate_file: Option<RateFile>) -> anyhow::Result<bool> {
    let (limit, set_burst) = starting_settings(cli, rate_file);
    let bucket = Arc::new(bucket(
        cli,
        limit,
        set_burst.unwrap_or_else(|| default_burst(limit)),
    )?);
    let adjuster = Arc::new(Adjuster::new(bucket.clone(), set_burst.is_some()));
    let inputs = inputs(cli);
    let total = cli
        .size
        .map(Size::bytes)
        .or_else(|| known_total(&inputs))
        .map(|total| cli.stop_after.map_or(total, |stop| total.min(stop.bytes())));
    let forwarded = Arc::new(AtomicU64::new(0));
    let reporter = start_reporter(cli, &forwarded, total, &bucket);
    let (started, registration) = go_live(cli, adjuster, &forwarded, reporter.as_ref())?;
    let (output, output_name) = open_output(cli)?;
    let link = cli.slow_link();
    // Behind a delay line the line counts what it has passed on; what the
    // pump puts in the line is not out yet.
    let put_in_line = AtomicU64::new(0);
    let output = if link.delays() {
        let capacity_of = bucket.clone();
        let capacity = Box::new(move || {
            let (limit, burst) = capacity_of.limit_and_burst();
            link.capacity(limit, burst)
        });
        let line = link.line();
        let delayed =
            DelayedOutput::start(output, line, capacity, MonotonicClock, forwarded.clone())
                .context("start the delay line")?;
        Output::Delayed(delayed)
    } else {
        Output::Direct(output)
    };
    let counted = match output {
        Output::Direct(_) => &*forwarded,
        Output::Delayed(_) => &put_in_line,
    };
    let mut pump = Pump::new(&bucket, counted, cli.stop_after.map(Size::bytes))
        .with_max_chunk(link.max_chunk());
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
    let say = (!cli.quiet).then(|| reporter.as_ref().map(Reporter::printer).unwrap_or_default());
    let mut all_read = true;
    for source in &inputs {
        let name = source.to_string();
        let input = match source.open(say.as_ref()) {
            Ok(input) => input,
            Err(err) => {
                warn(anyhow!(err).context(name.clone()));
                all_read = false;
                continue;
            }
        };
        let copied = match &output {
            Output::Direct(file) => pump.forward(&input, file),
            Output::Delayed(line) => pump.forward_into(&input, &mut &*line),
        };
        match copied {
            Ok(Ended::InputDone) => {}
            Ok(Ended::LimitReached) => break,
            Err(CopyError::Read(err)) => {
                warn(anyhow!(err).context(format!("read from {name}")));
                all_read = false;
            }
            Err(CopyError::Write(err)) => return Err(write_failed(err, reporter)),
        }
    }
    let output = match output {
        Output::Direct(file) => file,
        Output::Delayed(line) => match line.finish() {
            Ok(file) => file,
            Err(err) => return Err(write_failed(err, reporter)),
        },
    };
    if cli.connect.is_some() {
        net::finish(output).with_context(|| format!("close the connection to {output_name}"))?;
    }
    if let Some(reporter) = reporter {
        reporter.finish();
    }
    if cli.stats && !cli.quiet {
        let (limit, burst) = bucket.limit_and_burst();
        eprintln!(
            "{}",
            stats_line(
                forwarded.load(Ordering::Relaxed),
                started.elapsed().as_secs_f64(),
                limit,
                burst
            )
        );
    }
    Ok(all_read)
}

/// Where bytes go: straight out, or through a delay line.
enum Output {
    Direct(File),
    Delayed(DelayedOutput<MonotonicClock>),
}

/// The output asked for, and its name for messages: a connection, or
/// standard output.
fn open_output(cli: &Cli) -> anyhow::Result<(File, String)> {
    match &cli.connect {
        Some(address) => {
            let timeout = cli.connect_timeout.unwrap_or(Duration::from_secs(10));
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

/// Where bytes come from.
enum Input {
    /// A file, or `-` for standard input.
    Path(PathBuf),
    /// One connection accepted on an address.
    Listen(Address),
}

impl Input {
    /// Opens the input; `-` is a fresh handle on standard input. A listener
    /// says where it listens through `say` before it waits.
    fn open(&self, say: Option<&Printer>) -> io::Result<File> {
        match self {
            Input::Path(path) if path == Path::new("-") => {
                Ok(File::from(io::stdin().as_fd().try_clone_to_owned()?))
            }
            Input::Path(path) => File::open(path),
            Input::Listen(address) => {
                let listening = address.listen()?;
                if let Some(say) = say {
                    say.line(&format!("shape: listening on {}", listening.local()));
                }
                listening.accept_one()
            }
        }
    }
}

impl std::fmt::Display for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Path(path) => write!(f, "{}", path.display()),
            Input::Listen(address) => write!(f, "listen on {address}"),
        }
    }
}

/// The inputs asked for: a connection, the files named, or standard input.
fn inputs(cli: &Cli) -> Vec<Input> {
    match (&cli.listen, cli.files.is_empty()) {
        (Some(address), _) => vec![Input::Listen(address.clone())],
        (None, true) => vec![Input::Path(PathBuf::from("-"))],
        (None, false) => cli.files.iter().cloned().map(Input::Path).collect(),
    }
}

/// The sum of the inputs' sizes, if every input is a regular file.
fn known_total(inputs: &[Input]) -> Option<u64> {
    inputs.iter().try_fold(0u64, |sum, input| match input {
        Input::Path(path) if path != Path::new("-") => {
            let meta = std::fs::metadata(path).ok()?;
            meta.is_file().then(|| sum + meta.len())
        }
        _ => None,
    })
}

/// The reporter's style and interval, if progress is shown at all.
fn progress_style(cli: &Cli) -> Option<(Style, std::time::Duration)> {
    let style = match cli.progress {
        _ if cli.quiet => return None,
        ProgressMode::None => return None,
        ProgressMode::Auto if !io::stderr().is_terminal() => return None,
        ProgressMode::Auto | ProgressMode::Bar => Style::Bar,
        ProgressMode::Json => Style::Json,
    };
    Some((style, cli.interval.unwrap_or(style.default_interval())))
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

/// Ends the process the way cat and pv end when the reader downstream has
/// gone: killed by SIGPIPE, which the shell reports as status 141. Rust
/// ignores SIGPIPE, which is why the write returned EPIPE instead.
fn die_of_sigpipe() -> ! {
    let _ = signal_hook::low_level::emulate_default_handler(signal_hook::consts::SIGPIPE);
    // Only reached if the signal could not be raised.
    std::process::exit(141)
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
