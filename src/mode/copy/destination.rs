//! Where a copy writes: standard output or a connection, directly or
//! through a delay line, with the faults of its one direction (those that
//! count time struck by a timer of their own), and what its failing means.

use super::*;
use crate::mode::plan::CopyPlan;
use shape_bucket::Clock;
use shape_impair::faults::Faults;
use shape_net::Address;

/// What ended a copy that failed: a bucket found damaged, or an input or
/// the output failing (see [`write_failed`]).
pub(super) fn copy_failed(
    failure: CopyError,
    bucket: &Bucket,
    output_name: &str,
    registration: Option<Registration>,
    reporter: Option<Reporter>,
) -> anyhow::Error {
    match failure {
        CopyError::Damaged(_) => {
            if let Some(reporter) = reporter {
                reporter.finish();
            }
            anyhow!(shape_leaves::bucket::damage_line(bucket))
        }
        CopyError::Write(err) | CopyError::Read(err) => {
            write_failed(err, output_name, registration, reporter)
        }
    }
}

/// A write that failed. The reader downstream went away: die of SIGPIPE
/// at once, as cat and pv do, without a last word; any other failure ends
/// the bar first and is said.
pub(super) fn write_failed(
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
pub(super) fn open_output(connect: Option<&(Address, Duration)>) -> anyhow::Result<(File, String)> {
    match connect {
        Some((address, timeout)) => {
            let connection = address
                .connect(*timeout)
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
pub(super) fn conditions(plan: &CopyPlan) -> Arc<Conditions> {
    let link = plan.slow_link;
    let (delayed, faulty) = (plan.delayed, plan.faulty);
    let now = InForce {
        faults: [Faults::default(), plan.faults],
        delay: [link.delay; 2],
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
        one_way: Some(
            "--delay-up and --delay-down apply to a proxy or a UDP link: a copy has one \
             direction (--delay)",
        ),
        carried: Carried::Pipe,
    };
    Arc::new(Conditions::fixing(now, fixed))
}

/// `file` as the pump's output: through a delay line if the link delays
/// (or may come to), holding at most what the link's capacity says at the
/// bucket's settings of the moment, and doing the faults of `conditions`
/// (drawn from the plan's seed) if there may be any.
pub(super) fn output(
    plan: &CopyPlan,
    file: File,
    bucket: &Arc<Bucket>,
    forwarded: &Arc<Throughput>,
    conditions: &Arc<Conditions>,
) -> anyhow::Result<Output> {
    let (counting, seed) = (plan.pacing.start.counting, plan.seed);
    let drop_block = drop_block(match counting {
        Counting::Bytes => {
            let (limit, burst) = bucket.limit_and_burst();
            chunk_size(limit, burst)
        }
        // Datagrams are a UDP link's, never a copy's.
        Counting::Lines | Counting::Nul | Counting::Datagrams => MAX_CHUNK,
    });
    let faults = conditions.now().faults(Way::Down);
    // A copy that has faults, or may come to, looks at every write.
    let with_faults = |output: Output| match conditions.faults_may_change() {
        true => output.with_faults(
            StreamFaults::new(faults, seed, drop_block),
            conditions.clone(),
        ),
        false => output,
    };
    let link = plan.slow_link;
    if !plan.delayed {
        return Ok(with_faults(Output::direct(file)));
    }
    let bucket = bucket.clone();
    let now = conditions.clone();
    let capacity = Box::new(move || {
        let (limit, burst) = bucket.limit_and_burst();
        let now = now.now();
        SlowLink {
            delay: now.delay(shape_impair::faults::Way::Down),
            jitter: now.jitter,
            ..link
        }
        .capacity(limit, burst)
    });
    let units_of: UnitsOf = match counting.terminator() {
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

/// Starts the timer of a stall or reset that counts time: a thread that
/// sleeps until the schedule's next moment and strikes what is due then.
/// A reset is told to the copy's owner, which winds the copy up.
pub(super) fn strike_in_time(faults: &Faults, struck: &Arc<Struck>, ending: Sender<Ending>) {
    let clock = MonotonicClock;
    let mut schedule = Schedule::new(faults, clock.now());
    if schedule.next().is_none() {
        return;
    }
    let struck = struck.clone();
    std::thread::spawn(move || {
        while let Some(at) = schedule.next() {
            std::thread::sleep(Duration::from_nanos(at.saturating_sub(clock.now())));
            let due = schedule.due(clock.now());
            if due.stall {
                struck.stalled.store(true, Ordering::Relaxed);
            }
            if due.reset {
                struck.reset.store(true, Ordering::Relaxed);
                let _ = ending.send(Ending::Reset);
                return;
            }
        }
    });
}

/// Holds the close for `--slow-close` after the data ended, as the
/// schedule says.
pub(super) fn hold_the_close(faults: &Faults) {
    let clock = MonotonicClock;
    let now = clock.now();
    if let Err(at) = Schedule::default().close_due(faults.slow_close, now) {
        std::thread::sleep(Duration::from_nanos(at - now));
    }
}
