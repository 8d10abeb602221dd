//! Copy mode, the default: every input in turn, through one bucket (the
//! run's own or a share's), to standard output or a connection, directly
//! or through a delay line, with progress, live controls and `--stats`.

mod destination;
mod stats;

use super::input::Input;
use super::live::{bucket, go_live, printer, start_reporter};
use super::plan::CopyPlan;
use super::warn;
use crate::control::{Adjuster, Registration, fleet};
use crate::pipe::{
    CopyError, DelayedOutput, Ended, Forward, Output, Pump, RecordPump, UnitsOf, reset_on_close,
    when_reader_gone,
};
use crate::progress::Reporter;
use anyhow::{Context, anyhow};
use destination::{
    conditions, copy_failed, hold_the_close, open_output, output, strike_in_time, write_failed,
};
use shape_bucket::MonotonicClock;
use shape_impair::conditions::{Carried, Conditions, Fixed, InForce};
use shape_impair::faults::{ResetStruck, Schedule, StreamFaults, Struck, Tally, Way, drop_block};
use shape_impair::slowlink::SlowLink;
use shape_leaves::bucket::Bucket;
use shape_leaves::chunk::{MAX_CHUNK, chunk_size};
use shape_leaves::counting::Counting;
use shape_leaves::exit::{Exit, die_of_sigpipe};
use shape_leaves::say::Printer;
use shape_leaves::throughput::{Passed, Throughput};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

/// Copies every input; [`Exit::Failure`] if an input could not be read
/// (the others are still copied). A failing output ends the run with an
/// error, or, if the reader downstream went away, by SIGPIPE; a reset
/// that `--reset-after` asked for with status 3, once the run is wound
/// up as after any other end (a fleet's share given back, `--stats`).
pub fn run(plan: &CopyPlan) -> anyhow::Result<Exit> {
    let mut set = set_up(plan)?;
    let ending = copy(plan, &mut set);
    finish(plan, set, ending)
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

impl Ending {
    /// This, where a write that failed because `--reset-after` struck is
    /// the reset it asked for.
    fn reset_struck(self) -> Ending {
        match self {
            Ending::Copied {
                failed: Some(CopyError::Write(err)),
                ..
            } if ResetStruck::is(&err) => Ending::Reset,
            ending => ending,
        }
    }
}

/// Opens everything a copy needs, starts its live controls, and the
/// timers of faults that count time.
fn set_up(plan: &CopyPlan) -> anyhow::Result<SetUp> {
    let counting = plan.pacing.start.counting;
    let (bucket, member) = bucket(&plan.pacing)?;
    let conditions = conditions(plan);
    let adjuster = Arc::new(
        Adjuster::new(bucket.clone(), counting, plan.pacing.start.burst.is_some())
            .retuning(conditions.clone()),
    );
    let inputs = plan.inputs.clone();
    let known = match counting {
        Counting::Bytes => Input::known_total(&inputs),
        // Records are not counted ahead.
        _ => None,
    };
    let total = plan
        .size
        .or(known)
        .map(|total| plan.stop_after.map_or(total, |stop| total.min(stop)));
    let forwarded = Arc::new(Throughput::default());
    let passed = Passed::One(forwarded.clone());
    let reporter = start_reporter(
        &plan.progress,
        counting,
        &passed,
        total,
        std::slice::from_ref(&bucket),
    );
    let say = printer(reporter.as_ref());
    // What is drawn at random can be replayed: said at the start, as a
    // proxy and --exec say it, not only in --stats.
    if !plan.pacing.quiet && plan.say_seed {
        say.line(&format!("shape: seed {}", plan.seed));
    }
    let (started, registration) = go_live(
        &plan.pacing,
        adjuster,
        &passed,
        say.clone(),
        None,
        member.as_ref(),
    )?;
    let (file, output_name) = open_output(plan.connect.as_ref())?;
    if plan.faults.stall_after.is_some() {
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
    let output = output(plan, file, &bucket, &forwarded, &conditions)?;
    let resetter = output.resetter();
    let struck = output.struck();
    let (ending, ended) = mpsc::channel();
    if let Some(struck) = &struck {
        strike_in_time(&plan.faults, struck, ending.clone());
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
fn copy(plan: &CopyPlan, set: &mut SetUp) -> Ending {
    let copier = {
        let (bucket, forwarded, output) = (
            set.bucket.clone(),
            set.forwarded.clone(),
            set.output.clone(),
        );
        let inputs = std::mem::take(&mut set.inputs);
        let say = (!plan.pacing.quiet).then(|| set.say.clone());
        let terminator = plan.pacing.start.counting.terminator();
        let (stop_after, max_chunk) = (plan.stop_after, plan.slow_link.max_chunk());
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

/// Resets the output, as `--reset-after` asked: closes it with a reset
/// (if it is a socket), and says so.
fn reset(quiet: bool, resetter: Option<&File>) {
    if let Some(output) = resetter {
        reset_on_close(output);
    }
    if !quiet {
        eprintln!("shape: reset, as --reset-after asked");
    }
}

/// Winds the copy up after `ending`: writes out what the delay line holds
/// and closes the output (a reset closes it at once), gives back a
/// fleet's share, says what the faults did and `--stats`.
fn finish(plan: &CopyPlan, set: SetUp, ending: Ending) -> anyhow::Result<Exit> {
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
    let faults = &plan.faults;
    let (exit, tally) = match ending.reset_struck() {
        Ending::Reset => {
            reset(plan.pacing.quiet, resetter.as_ref());
            // The copy may still be in the middle of a write: what the
            // faults did is said if it can be had now.
            (Exit::Reset, output.tally_if_free())
        }
        Ending::Copied {
            failed: Some(failure),
            ..
        } => {
            return Err(copy_failed(
                failure,
                &bucket,
                &output_name,
                registration,
                reporter,
            ));
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
            hold_the_close(faults);
            if plan.connect.is_some() {
                shape_net::finish(file)
                    .with_context(|| format!("close the connection to {output_name}"))?;
            }
            let exit = match all_read {
                true => Exit::Success,
                false => Exit::Failure,
            };
            (exit, tally)
        }
    };
    // The whole share's settings, for --stats: a member's own bucket holds
    // its part only.
    let share_settings = member.as_ref().map(fleet::Member::share_settings);
    if let Some(member) = member {
        member.leave();
    }
    if let Some(reporter) = reporter {
        reporter.finish();
    }
    let bound = share_settings.unwrap_or_else(|| bucket.limit_and_burst());
    say_the_end(plan, tally, bound, &forwarded, started);
    drop(registration);
    Ok(exit)
}

/// What an ended copy says, unless quiet: what the faults did, and with
/// `--stats` what passed, in how long, paid from a bucket of `bound` (a
/// share's as a whole, when on one).
fn say_the_end(
    plan: &CopyPlan,
    tally: Option<Tally>,
    bound: (shape_bucket::Limit, u64),
    forwarded: &Throughput,
    started: Instant,
) {
    if plan.pacing.quiet {
        return;
    }
    if let Some(line) = tally.and_then(|tally| tally.line(&plan.faults)) {
        eprintln!("{line}");
    }
    if plan.stats {
        let dropped = tally.map_or(0, |tally| tally.dropped_bytes);
        let line = stats::line(plan, bound, forwarded, dropped, started);
        eprintln!("{line}");
    }
}
