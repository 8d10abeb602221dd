//! Copy mode, the default: every input in turn, through one bucket (the
//! run's own or a share's), to standard output or a connection, directly
//! or through a delay line, with progress, live controls and `--stats`.

use super::input::Input;
use super::live::{Start, bucket, go_live, invalid, printer, start_reporter};
use super::{UsageError, warn};
use crate::bucket::Bucket;
use crate::chunk::{MAX_CHUNK, chunk_size};
use crate::cli::Cli;
use crate::conditions::{Conditions, Fixed, Now};
use crate::control::{Adjuster, Registration, fleet};
use crate::counting::{Counting, Written};
use crate::exit::{Exit, die_of_sigpipe};
use crate::faults::{Faults, Mischief, ResetStruck, Struck, Trigger, Way, drop_block};
use crate::net;
use crate::pipe::{
    CopyError, DelayedOutput, Ended, Forward, Output, Pump, RecordPump, UnitsOf, reset_on_close,
    when_reader_gone,
};
use crate::progress::{Printer, Reporter};
use crate::slowlink::SlowLink;
use crate::throughput::{Passed, Throughput};
use anyhow::{Context, anyhow};
use shape_bucket::units::Quantity;
use shape_bucket::{Limit, MonotonicClock};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

/// How long `--connect` keeps trying without `--connect-timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Copies every input; [`Exit::Failure`] if an input could not be read
/// (the others are still copied). A failing output ends the run with an
/// error, or, if the reader downstream went away, by SIGPIPE; a reset
/// that `--reset-after` asked for with status 3, once the run is wound
/// up as after any other end (a fleet's share given back, `--stats`).
pub fn run(cli: &Cli) -> anyhow::Result<Exit> {
    let asked = check(cli)?;
    let mut set = set_up(cli, &asked)?;
    let ending = copy(cli, &asked, &mut set);
    finish(cli, &asked, set, ending)
}

/// What the command line asks of a copy, checked.
struct Asked {
    start: Start,
    /// The faults of the one direction a copy has.
    faults: Faults,
    size: Option<u64>,
    /// `--stop-after`, or `--cut-after` if that is less.
    stop_after: Option<u64>,
    seed: u64,
}

/// Checks what only a proxy may be asked, and reads the amounts in the
/// units counted.
fn check(cli: &Cli) -> anyhow::Result<Asked> {
    let start = Start::of(cli)?;
    if let Some(change) = cli.fault_changes().iter().find(|change| change.one_sided()) {
        return Err(UsageError(format!(
            "--{} {}: up: and down: are for a proxy's two directions",
            change.name(),
            change.text()
        ))
        .into());
    }
    if cli.affect.is_some() {
        return Err(UsageError(
            "--affect is for a proxy's connections (--listen with --connect)".into(),
        )
        .into());
    }
    let counting = start.counting;
    let count_of = |flag, given: &Option<Written<Quantity>>| {
        given
            .as_ref()
            .map(|given| invalid(flag, given, counting.count(given.value)))
            .transpose()
    };
    let size = count_of("--size <SIZE>", &cli.size)?;
    let faults = cli.faults(Way::Down);
    // Cutting a stream after SIZE bytes is stopping after them.
    let stop_after = crate::duration::least(
        count_of("--stop-after <SIZE>", &cli.stop_after)?,
        faults.cut_after,
    );
    Ok(Asked {
        start,
        faults,
        size,
        stop_after,
        seed: cli.seed.unwrap_or_else(|| fastrand::u64(..)),
    })
}

/// A copy ready to run: its bucket, its output, and what watches it.
struct SetUp {
    bucket: Arc<Bucket>,
    member: Option<fleet::Member>,
    inputs: Vec<Input>,
    forwarded: Arc<Throughput>,
    reporter: Option<Reporter>,
    say: Printer,
    started: Instant,
    registration: Option<Registration>,
    output: Arc<Output>,
    output_name: String,
    /// The output again, to close with a reset (a socket's).
    resetter: Option<File>,
    struck: Option<Arc<Struck>>,
    /// How the copy's thread and the timers say that the copy ended, and
    /// where it is heard.
    ending: Sender<Ending>,
    ended: Receiver<Ending>,
}

/// How a copy ended.
enum Ending {
    /// Every input was taken, or the output failed; whether every input
    /// could be read.
    Copied {
        all_read: bool,
        failed: Option<CopyError>,
    },
    /// `--reset-after` struck, by time or at its byte.
    Reset,
}

/// Opens everything a copy needs, starts its live controls, and the
/// timers of faults that count time.
fn set_up(cli: &Cli, asked: &Asked) -> anyhow::Result<SetUp> {
    let counting = asked.start.counting;
    let (bucket, member) = bucket(cli, &asked.start)?;
    let conditions = conditions(cli);
    let adjuster = Arc::new(
        Adjuster::new(bucket.clone(), counting, asked.start.burst.is_some())
            .retuning(conditions.clone()),
    );
    let inputs = Input::all(cli);
    let known = match counting {
        Counting::Bytes => Input::known_total(&inputs),
        // Records are not counted ahead.
        _ => None,
    };
    let total = asked
        .size
        .or(known)
        .map(|total| asked.stop_after.map_or(total, |stop| total.min(stop)));
    let forwarded = Arc::new(Throughput::default());
    let passed = Passed::One(forwarded.clone());
    let reporter = start_reporter(cli, &passed, total, &bucket);
    let say = printer(reporter.as_ref());
    let (started, registration) = go_live(cli, &asked.start, adjuster, &passed, say.clone())?;
    let (file, output_name) = open_output(cli)?;
    if asked.faults.stall_after.is_some() {
        // Stalled, nothing is written, so a reader that left is never met
        // by a write: end as the write would have.
        let unregister = registration.as_ref().map(Registration::remover);
        when_reader_gone(&file, move || {
            if let Some(unregister) = unregister {
                unregister();
            }
            die_of_sigpipe();
        })
        .context("watch the output")?;
    }
    let output = output(cli, file, &bucket, &forwarded, (&conditions, asked.seed))?;
    let resetter = output.resetter();
    let struck = output.struck();
    let (ending, ended) = mpsc::channel();
    if let Some(struck) = &struck {
        strike_in_time(&asked.faults, struck, ending.clone());
    }
    Ok(SetUp {
        bucket,
        member,
        inputs,
        forwarded,
        reporter,
        say,
        started,
        registration,
        output: Arc::new(output),
        output_name,
        resetter,
        struck,
        ending,
        ended,
    })
}

/// Copies every input in turn on a thread of its own, and waits for it to
/// end, or for a reset that counts time, which may strike while the copy
/// waits for its input. A copy that stalled waits on after its input, for
/// a reset or for shape to be ended.
fn copy(cli: &Cli, asked: &Asked, set: &mut SetUp) -> Ending {
    let copier = {
        let (bucket, forwarded, output) = (
            set.bucket.clone(),
            set.forwarded.clone(),
            set.output.clone(),
        );
        let inputs = std::mem::take(&mut set.inputs);
        let say = (!cli.quiet).then(|| set.say.clone());
        let terminator = asked.start.counting.terminator();
        let (stop_after, max_chunk) = (asked.stop_after, cli.slow_link().max_chunk());
        let done = set.ending.clone();
        std::thread::Builder::new()
            .name("copy".into())
            .spawn(move || {
                let count = output.pump_count(&forwarded);
                let mut pump: Box<dyn Forward> = match terminator {
                    None => {
                        Box::new(Pump::new(&bucket, count, stop_after).with_max_chunk(max_chunk))
                    }
                    Some(terminator) => {
                        Box::new(RecordPump::new(&bucket, count, terminator, stop_after))
                    }
                };
                let mut all_read = true;
                let mut failed = None;
                for source in &inputs {
                    let input = match source.open(say.as_ref()) {
                        Ok(input) => input,
                        Err(err) => {
                            warn(&anyhow!(err).context(source.to_string()));
                            all_read = false;
                            continue;
                        }
                    };
                    match output.forward(pump.as_mut(), &input) {
                        Ok(Ended::InputDone) => {}
                        Ok(Ended::LimitReached) => break,
                        Err(CopyError::Read(err)) => {
                            warn(&anyhow!(err).context(format!("read from {source}")));
                            all_read = false;
                        }
                        Err(err) => {
                            failed = Some(err);
                            break;
                        }
                    }
                }
                let _ = done.send(Ending::Copied { all_read, failed });
            })
    };
    let copier = match copier {
        Ok(copier) => copier,
        Err(err) => {
            return Ending::Copied {
                all_read: false,
                failed: Some(CopyError::Write(err)),
            };
        }
    };
    let receive = || set.ended.recv().unwrap_or(Ending::Reset);
    let ending = receive();
    if let Ending::Copied { .. } = ending {
        // It has said its last: let it let go of the output too.
        let _ = copier.join();
    }
    let stalled = set
        .struck
        .as_ref()
        .is_some_and(|struck| struck.stalled.load(Ordering::Relaxed));
    match ending {
        // A black hole: the output stays open, and nothing more comes,
        // until shape is ended or reset.
        Ending::Copied { failed: None, .. } if stalled => loop {
            if let Ending::Reset = receive() {
                return Ending::Reset;
            }
        },
        ending => ending,
    }
}

/// Winds the copy up after `ending`: writes out what the delay line holds
/// and closes the output (a reset closes it at once), gives back a
/// fleet's share, says what the faults did and `--stats`.
fn finish(cli: &Cli, asked: &Asked, set: SetUp, ending: Ending) -> anyhow::Result<Exit> {
    let SetUp {
        bucket,
        member,
        forwarded,
        reporter,
        started,
        registration,
        output,
        output_name,
        resetter,
        ..
    } = set;
    let faults = &asked.faults;
    let ending = match ending {
        Ending::Copied {
            failed: Some(CopyError::Write(err)),
            ..
        } if ResetStruck::is(&err) => Ending::Reset,
        ending => ending,
    };
    let (exit, tally) = match ending {
        Ending::Reset => {
            if let Some(output) = &resetter {
                reset_on_close(output);
            }
            if !cli.quiet {
                eprintln!("shape: reset, as --reset-after asked");
            }
            // The copy may still be in the middle of a write: what the
            // faults did is said if it can be had now.
            (Exit::Reset, output.tally_if_free())
        }
        Ending::Copied {
            failed: Some(failure),
            ..
        } => {
            let err = match failure {
                CopyError::Damaged(_) => anyhow!(crate::bucket::damage_line(&bucket)),
                CopyError::Write(err) | CopyError::Read(err) => {
                    return Err(write_failed(err, &output_name, registration, reporter));
                }
            };
            if let Some(reporter) = reporter {
                reporter.finish();
            }
            return Err(err);
        }
        Ending::Copied {
            all_read,
            failed: None,
        } => {
            let tally = output.tally();
            // The copy has ended: the output is this thread's alone again.
            let Ok(output) = Arc::try_unwrap(output) else {
                unreachable!("the copy's thread has ended");
            };
            let file = match output.finish(&forwarded) {
                Ok(file) => file,
                Err(err) => return Err(write_failed(err, &output_name, registration, reporter)),
            };
            if !faults.slow_close.is_zero() {
                std::thread::sleep(faults.slow_close);
            }
            if cli.connect.is_some() {
                net::finish(file)
                    .with_context(|| format!("close the connection to {output_name}"))?;
            }
            let exit = match all_read {
                true => Exit::Success,
                false => Exit::Failure,
            };
            (exit, tally)
        }
    };
    if let Some(member) = member {
        member.leave();
    }
    if let Some(reporter) = reporter {
        reporter.finish();
    }
    if let (Some(line), false) = (tally.and_then(|tally| tally.line(faults)), cli.quiet) {
        eprintln!("{line}");
    }
    if cli.stats && !cli.quiet {
        let (limit, burst) = bucket.limit_and_burst();
        let stats = Stats {
            counting: asked.start.counting,
            count: forwarded.total(),
            dropped: tally.map_or(0, |tally| tally.dropped_bytes),
            seconds: started.elapsed().as_secs_f64(),
            limit,
            burst,
            written: cli
                .rate
                .as_ref()
                .filter(|_| limit == asked.start.limit)
                .map(|rate| rate.text.as_str()),
        };
        let mut line = stats.line();
        if faults.alter() || !cli.jitter.unwrap_or_default().is_zero() {
            line += &format!("; seed {}", asked.seed);
        }
        eprintln!("{line}");
    }
    drop(registration);
    Ok(exit)
}

/// A write that failed. The reader downstream went away: die of SIGPIPE
/// at once, as cat and pv do, without a last word; any other failure ends
/// the bar first and is said.
fn write_failed(
    err: io::Error,
    output_name: &str,
    registration: Option<Registration>,
    reporter: Option<Reporter>,
) -> anyhow::Error {
    if err.kind() == io::ErrorKind::BrokenPipe {
        drop(registration);
        die_of_sigpipe();
    }
    if let Some(reporter) = reporter {
        reporter.finish();
    }
    anyhow!(err).context(format!("write to {output_name}"))
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
            // Checked before anything is read, so that input is never
            // taken and thrown away into the runtime's stand-in.
            if crate::started::stdout_was_closed() {
                return Err(anyhow!(
                    "standard output is closed: give shape somewhere to write ('>/dev/null' \
                     throws it away)"
                ));
            }
            let stdout = io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .context("standard output")?;
            Ok((File::from(stdout), "stdout".to_string()))
        }
    }
}

/// What a copy's conditions are at start, and what of them may change
/// while it runs: faults only if it started with some or with a delay,
/// which put it on the path that looks for them (not splice), and the
/// delay only if it started with one.
fn conditions(cli: &Cli) -> Arc<Conditions> {
    let link = cli.slow_link();
    let delayed = cli.delay.is_some();
    let faulty = !cli.fault_changes().is_empty() || delayed;
    let now = Now {
        faults: [Faults::default(), cli.faults(Way::Down)],
        delay: link.delay,
        jitter: link.jitter,
    };
    let fixed = Fixed {
        faults: (!faulty).then_some(
            "this copy started without faults or --delay, on a path that does not look for \
             them: start it with one ('--drop 0' will do)",
        ),
        ends: Some(
            "a copy takes --stall-after, --reset-after, --cut-after and --slow-close at start; \
             a proxy changes them live",
        ),
        delay: (!delayed).then_some("this copy started without --delay ('--delay 0' will do)"),
    };
    Arc::new(Conditions::fixing(now, fixed))
}

/// `file` as the pump's output: through a delay line if the link delays
/// (or may come to), holding at most what the link's capacity says at the
/// bucket's settings of the moment, and doing the faults of `conditions`
/// (drawn from `seed`) if there may be any.
fn output(
    cli: &Cli,
    file: File,
    bucket: &Arc<Bucket>,
    forwarded: &Arc<Throughput>,
    (conditions, seed): (&Arc<Conditions>, u64),
) -> anyhow::Result<Output> {
    let drop_block = drop_block(match cli.counting() {
        Counting::Bytes => {
            let (limit, burst) = bucket.limit_and_burst();
            chunk_size(limit, burst)
        }
        Counting::Lines | Counting::Nul => MAX_CHUNK,
    });
    let faults = conditions.now().faults(Way::Down);
    // A copy that has faults, or may come to, looks at every write.
    let with_faults = |output: Output| match conditions.faults_may_change() {
        true => output.with_faults(Mischief::new(faults, seed, drop_block), conditions.clone()),
        false => output,
    };
    let link = cli.slow_link();
    if cli.delay.is_none() {
        return Ok(with_faults(Output::direct(file)));
    }
    let bucket = bucket.clone();
    let now = conditions.clone();
    let capacity = Box::new(move || {
        let (limit, burst) = bucket.limit_and_burst();
        let now = now.now();
        SlowLink {
            delay: now.delay,
            jitter: now.jitter,
            ..link
        }
        .capacity(limit, burst)
    });
    let units_of: UnitsOf = match cli.counting().terminator() {
        None => Box::new(|chunk: &[u8]| chunk.len() as u64),
        Some(end) => {
            Box::new(move |chunk: &[u8]| chunk.iter().filter(|&&byte| byte == end).count() as u64)
        }
    };
    let counts = (forwarded.clone(), units_of);
    // The jitter's draws, apart from the faults'.
    let line = link.line(seed ^ 0x9e37_79b9_7f4a_7c15);
    let line = DelayedOutput::start(file, line, capacity, MonotonicClock, counts)
        .context("start the delay line")?;
    Ok(with_faults(Output::delayed(line)))
}

/// Starts the timers of a stall or reset that counts time. A reset is
/// told to the copy's owner, which winds the copy up.
fn strike_in_time(faults: &Faults, struck: &Arc<Struck>, ending: Sender<Ending>) {
    if let Some(after) = faults.stall_after.and_then(Trigger::time) {
        let struck = struck.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            struck.stalled.store(true, Ordering::Relaxed);
        });
    }
    if let Some(after) = faults.reset_after.and_then(Trigger::time) {
        let struck = struck.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            struck.reset.store(true, Ordering::Relaxed);
            let _ = ending.send(Ending::Reset);
        });
    }
}

/// What the `--stats` line reports.
struct Stats<'a> {
    counting: Counting,
    /// Units paid for and passed on (records, or bytes), dropped or not.
    count: u64,
    /// Bytes of them that `--drop` lost.
    dropped: u64,
    seconds: f64,
    limit: Limit,
    burst: u64,
    /// The rate as the user wrote it, while it is the limit in force.
    written: Option<&'a str>,
}

/// The unit a rate is written in, to tell `40Mbit` (worth saying as
/// written) from `1MiB` (as shape would say it, `1.00 MiB/s`); empty for
/// a plain number, which is in the unit shape counts.
fn unit_of(rate: &str) -> String {
    let unit: String = rate
        .chars()
        .filter(|c| !(c.is_ascii_digit() || *c == '.' || *c == ' '))
        .collect::<String>()
        .to_ascii_lowercase();
    unit.strip_suffix("/s").unwrap_or(&unit).to_string()
}

impl Stats<'_> {
    /// The summary: what passed (and what of it was dropped), and an
    /// average that says what it is, beside the limit (in the user's own
    /// words too) and the burst that may lift an average above it.
    fn line(&self) -> String {
        let counting = self.counting;
        let average = if self.seconds > 0.0 {
            self.count as f64 / self.seconds
        } else {
            0.0
        };
        let limit = match (self.limit, self.written) {
            (Limit::Unlimited, _) => "no limit".to_string(),
            (limit, written) => {
                let shown = counting.show_limit(limit);
                let limit = match written {
                    Some(text) if !unit_of(text).is_empty() && unit_of(text) != unit_of(&shown) => {
                        format!("{text} ({shown})")
                    }
                    _ => shown,
                };
                format!(
                    "limit {limit} plus a {} burst",
                    counting.show_tokens(self.burst)
                )
            }
        };
        let passed = match (self.dropped, counting) {
            (0, _) => counting.tally(self.count),
            (dropped, Counting::Bytes) => format!(
                "{} delivered and {dropped} bytes dropped",
                counting.tally(self.count - dropped.min(self.count))
            ),
            (dropped, _) => format!(
                "{} ({dropped} bytes of them dropped)",
                counting.tally(self.count)
            ),
        };
        format!(
            "shape: {passed} in {:.3} s: average {}, {limit}",
            self.seconds,
            counting.show_rate(average)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(
        counting: Counting,
        count: u64,
        seconds: f64,
        limit: Limit,
        burst: u64,
    ) -> Stats<'static> {
        Stats {
            counting,
            count,
            dropped: 0,
            seconds,
            limit,
            burst,
            written: None,
        }
    }

    #[test]
    fn stats_say_what_passed_the_time_the_average_and_what_bounds_it() {
        let bytes = Counting::Bytes;
        assert_eq!(
            stats(bytes, 2 << 20, 1.9, Limit::per_second(1 << 20), 104_857).line(),
            "shape: 2097152 bytes (2.00 MiB) in 1.900 s: average 1.05 MiB/s, limit 1.00 MiB/s plus a 102.40 KiB burst"
        );
        assert_eq!(
            stats(bytes, 7, 0.0, Limit::Unlimited, 1 << 17).line(),
            "shape: 7 bytes (7 B) in 0.000 s: average 0 B/s, no limit"
        );
        assert_eq!(
            stats(
                Counting::Lines,
                100,
                19.8,
                Limit::per_second(5 << 20),
                1 << 20
            )
            .line(),
            "shape: 100 lines in 19.800 s: average 5.05 lines/s, limit 5.00 lines/s plus a 1 line burst"
        );
    }

    #[test]
    fn stats_say_the_limit_as_written_and_what_was_dropped_apart() {
        let limit = "40Mbit".parse::<Limit>().unwrap();
        let given = Stats {
            dropped: 10240,
            written: Some("40Mbit"),
            ..stats(Counting::Bytes, 1 << 20, 0.2, limit, 500_000)
        };
        assert_eq!(
            given.line(),
            "shape: 1038336 bytes (1014.00 KiB) delivered and 10240 bytes dropped in 0.200 s: \
             average 5.00 MiB/s, limit 40Mbit (4.77 MiB/s) plus a 488.28 KiB burst"
        );
        for written in ["1MiB", "1 MiB/s", "1048576"] {
            let same = Stats {
                written: Some(written),
                ..stats(Counting::Bytes, 1, 1.0, Limit::per_second(1 << 20), 1)
            };
            assert!(
                same.line().contains("limit 1.00 MiB/s plus"),
                "{}",
                same.line()
            );
        }
    }
}
