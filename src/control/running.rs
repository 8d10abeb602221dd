//! Wires a running shape to what may change it while it runs: remote
//! control messages, SIGHUP and the rate file, SIGUSR1 status lines, and
//! the timetable.

use super::adjuster::Adjuster;
use super::dir::{ControlDir, Registration};
use super::protocol::{Answer, Request};
use super::schedule::RateFile;
use super::signals::{Handlers, answer};
use shape_bucket::Limit;
use shape_leaves::counting::Counting;
use shape_leaves::message::one_line;
use shape_leaves::say::Printer;
use shape_leaves::throughput::Passed;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the live controls need to know of the run.
pub struct Run {
    pub adjuster: Arc<Adjuster>,
    pub passed: Passed,
    pub started: Instant,
    pub printer: Printer,
    pub rate_file: Option<PathBuf>,
    /// Where SIGINT, SIGTERM and SIGHUP go instead of ending shape
    /// (`--exec`'s command).
    pub pass_on: Option<Box<dyn Fn(i32) + Send>>,
    /// A fleet's share to leave before SIGINT or SIGTERM ends shape, so
    /// that its part is free at once.
    pub leaving: Option<super::fleet::Leaving>,
}

/// Starts answering signals and remote control for `run`, registered as
/// spending from `share` if it does. The result
/// keeps the registration for remote control; drop it at the end. If the
/// control directory is unusable, says why once (unless `quiet`) and runs
/// without remote control.
pub fn start(run: Run, share: Option<String>, quiet: bool) -> io::Result<Option<Registration>> {
    let pid = std::process::id();
    let control = match ControlDir::open() {
        Ok(dir) => Some(Arc::new(dir)),
        Err(err) => {
            if !quiet {
                run.printer
                    .line(&format!("shape: remote control is off: {err}"));
            }
            None
        }
    };
    let Run {
        adjuster,
        passed,
        started,
        printer,
        rate_file,
        pass_on,
        leaving,
    } = run;
    let say = printer.clone();
    let handlers = Handlers {
        reload: rate_file.map(|path| reload(path, adjuster.clone(), printer.clone())),
        status: {
            let (adjuster, printer, passed) = (adjuster.clone(), printer.clone(), passed.clone());
            Box::new(move || {
                printer.line(&status_line(
                    adjuster.counting(),
                    &passed,
                    started.elapsed(),
                    &adjuster.describe(),
                ));
            })
        },
        control: serve_remote(control.clone(), pid, adjuster, passed, started, printer),
        before_exit: {
            let control = control.clone();
            Box::new(move || {
                if let Some(leaving) = &leaving {
                    leaving.leave();
                }
                if let Some(dir) = &control {
                    dir.unregister(pid);
                }
            })
        },
        pass_on,
    };
    // Answer first, publish second: a remote that finds the registration
    // sends SIGUSR2, whose default action would end the process.
    answer(handlers)?;
    let Some(dir) = &control else {
        return Ok(None);
    };
    match dir.register(pid, share.as_deref()) {
        Ok(registration) => Ok(Some(registration)),
        // A shape on a share must be counted as on it, or `--reset` could
        // take the share away from under it.
        Err(err) if share.is_some() => Err(err),
        Err(err) => {
            if !quiet {
                say.line(&format!("shape: remote control is off: {}", one_line(&err)));
            }
            Ok(None)
        }
    }
}

/// Follows a timetable of limits from `started` on a thread of its own;
/// entries at offset zero are applied before this returns.
pub fn follow(
    schedule: Vec<(std::time::Duration, Limit)>,
    adjuster: Arc<Adjuster>,
    started: Instant,
) {
    let (now, later): (Vec<_>, Vec<_>) = schedule
        .into_iter()
        .partition(|(offset, _)| offset.is_zero());
    for (_, limit) in now {
        adjuster.set_limit(limit);
    }
    std::thread::spawn(move || {
        for (offset, limit) in later {
            std::thread::sleep((started + offset).saturating_duration_since(Instant::now()));
            adjuster.set_limit(limit);
        }
    });
}

/// What SIGHUP does with a rate file at `path`: reads it again and
/// applies it, or says why not and leaves the settings as they were.
fn reload(path: PathBuf, adjuster: Arc<Adjuster>, printer: Printer) -> Box<dyn Fn() + Send> {
    Box::new(move || {
        let applied = RateFile::load(&path).and_then(|file| adjuster.apply(&file.request()));
        if let Err(why) = applied {
            printer.line(&format!(
                "shape: {}: {why}; settings unchanged",
                path.display()
            ));
        }
    })
}

/// What SIGUSR2 does: serves every remote request waiting in `control`
/// for process `pid`, answering each with the settings in force (and,
/// asked rather than told, what has passed so far).
fn serve_remote(
    control: Option<Arc<ControlDir>>,
    pid: u32,
    adjuster: Arc<Adjuster>,
    passed: Passed,
    started: Instant,
    printer: Printer,
) -> Box<dyn Fn() + Send> {
    Box::new(move || {
        let Some(dir) = &control else {
            return;
        };
        let apply = |request: &Request| adjuster.apply(request);
        let answer = |request: &Request| {
            let mut report = vec![adjuster.conditions_in_force()];
            if let Some(down) = adjuster.settings_down() {
                report.insert(0, format!("down: {down}"));
            }
            if *request == Request::default() {
                // Asked, not told: say what has passed too.
                report.push(format!(
                    "{} in {:.3} s",
                    adjuster.counting().tally(passed.total()),
                    started.elapsed().as_secs_f64()
                ));
            }
            report.retain(|said| !said.is_empty());
            Answer {
                settings: adjuster.settings(),
                report: report.join("; "),
            }
        };
        for refusal in dir.serve(pid, &apply, &answer) {
            printer.line(&format!("shape: {refusal}"));
        }
    })
}

/// The SIGUSR1 line: what passed so far, time so far, the rate over the
/// last second (each direction's, for a proxy), and the settings.
fn status_line(counting: Counting, passed: &Passed, elapsed: Duration, settings: &str) -> String {
    format!(
        "shape: {} in {:.3} s, {} now; {settings}",
        counting.tally(passed.total()),
        elapsed.as_secs_f64(),
        passed.recent(counting)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_leaves::bucket::Settings;
    use shape_leaves::throughput::Throughput;
    use std::sync::Arc;

    #[test]
    fn status_lines_say_bytes_time_rate_and_settings() {
        let settings = Settings {
            limit: Limit::per_second(1 << 20),
            burst: 102_400,
            paused: false,
            counting: Counting::Bytes,
        };
        // Passed more than a second ago: nothing now.
        let long_ago = Instant::now() - Duration::from_secs(5);
        let passed = Arc::new(Throughput::since(long_ago));
        passed.settle(3 << 20);
        assert_eq!(
            status_line(
                Counting::Bytes,
                &Passed::One(passed.clone()),
                Duration::from_secs(3),
                &settings.to_string()
            ),
            "shape: 3145728 bytes (3.00 MiB) in 3.000 s, 0 B/s now; rate 1.00 MiB/s, burst 100.00 KiB"
        );
        let ways = Passed::Ways {
            up: passed.clone(),
            down: passed,
        };
        assert!(
            status_line(Counting::Bytes, &ways, Duration::from_secs(3), "")
                .contains("6.00 MiB) in 3.000 s, up 0 B/s, down 0 B/s now")
        );
    }
}
