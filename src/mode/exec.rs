//! `--exec` mode: runs a command with its own traffic shaped, up and down
//! paid from the buckets of two ways as a proxy's are, with a copy's live
//! controls (`--remote`, `--rate-file`, `--schedule`, SIGUSR1, progress),
//! and ends with the command's own status. With a link (`--delay`,
//! `--jitter`, a stream's faults, an HTTP fault), its TCP connections go through a
//! relay on a thread of its own, a proxy whose servers the supervisor
//! connects and hands over.

use super::http::LiveHttp;
use super::live::{
    PassOn, damaged, go_live, printer, two_counts, two_way_adjuster, two_way_reporter, two_ways,
};
use super::plan::{ConditionsPlan, DatagramPlan, ExecPlan};
use super::proxy::Tuning;
use crate::control::Adjuster;
use crate::progress::Reporter;
use anyhow::Context;
use shape_bucket::Limit;
use shape_bucket::units::{human_bytes, human_rate};
use shape_exec::{CommandWays, Exited, MakeNetem, NotRun, Relay};
use shape_impair::conditions::{Carried, Conditions, Fixed};
use shape_impair::faults::Way;
use shape_leaves::counting::Counting;
use shape_leaves::exit::Exit;
use shape_leaves::lock::lock;
use shape_leaves::message::one_line;
use shape_leaves::say::Printer;
use shape_leaves::throughput::Throughput;
use shape_net::proxy::http_gate::HttpRules;
use shape_net::proxy::{RelayLoop, Shaping};
use shape_net::udp::{DatagramProxy, FlowEnds, Route};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Runs `command` shaped, until it ends.
pub fn run(plan: &ExecPlan) -> anyhow::Result<Exit> {
    let ExecPlan {
        command,
        pacing,
        conditions: at_start,
        linked,
        ..
    } = plan;
    let (up, down, member) = two_ways(pacing)?;
    let conditions = conditions(at_start, *linked);
    let ([passed_up, passed_down], passed) = two_counts();
    let live = LiveHttp::of(plan.http.as_ref(), at_start.seed);
    let reporter = two_way_reporter(&plan.progress, pacing, &passed, [&up, &down], live.as_ref());
    let printer = printer(reporter.as_ref());
    let report = (!pacing.quiet).then(|| printer.clone());
    let http = live.as_ref().map(|live| live.rules(report));
    let remote = live.as_ref().map(LiveHttp::remote);
    let adjuster = two_way_adjuster([&up, &down], pacing, conditions.clone(), remote);
    // Signals are passed on from the start (see `PassedOn`).
    let (target, pass_on) = PassedOn::shared();
    let (started_at, _registration) = go_live(
        pacing,
        adjuster.clone(),
        &passed,
        printer.clone(),
        Some(pass_on),
        member.as_ref(),
    )?;
    let shown = command
        .first()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let relay = match linked {
        true => Some(start_relay(
            plan,
            &adjuster,
            conditions,
            &[passed_up.clone(), passed_down.clone()],
            &printer,
            http.clone(),
        )?),
        false => None,
    };
    let started = match shape_exec::start(command, relay.is_some()) {
        Ok(started) => started,
        Err(not_run) => return Ok(refused(&not_run)),
    };
    lock(&target).started(started.pid());
    let ways = CommandWays {
        buckets: [up.clone(), down],
        passed: [passed_up, passed_down],
    };
    let on_change = |notify| adjuster.on_change(notify);
    let say = say_unless(pacing.quiet, &printer);
    let told_to_end = || lock(&target).told;
    let ended = shape_exec::supervise(started, &ways, relay, on_change, &shown, say, told_to_end)
        .map_err(|err| match damaged(&err) {
        true => anyhow::anyhow!(shape_leaves::bucket::damage_line(&up)),
        false => err.into(),
    })?;
    drop(member);
    let exited = match ended {
        Ok(exited) => exited,
        Err(not_run) => return Ok(refused(&not_run)),
    };
    let told = lock(&target).told;
    let end = CommandEnd {
        reporter,
        printer,
        told,
        ways,
        started_at,
        shown,
        http,
    };
    Ok(wind_up(plan, exited, end))
}

/// What a command's run has left to say once the command ended.
struct CommandEnd {
    reporter: Option<Reporter>,
    printer: Printer,
    /// shape was told to end (then what the command left ended with it).
    told: bool,
    ways: CommandWays,
    started_at: Instant,
    /// The command's name, as said.
    shown: String,
    /// Its HTTP rule, whose counts `--stats` says.
    http: Option<HttpRules>,
}

/// Says what a command's end leaves to say (the last frame, what it left
/// running, `--stats`), and gives its status as shape's.
fn wind_up(plan: &ExecPlan, Exited { code, outlived }: Exited, end: CommandEnd) -> Exit {
    // The last frame goes before anything more is said.
    if let Some(reporter) = end.reporter {
        reporter.finish();
    }
    if outlived && !plan.pacing.quiet && !end.told {
        end.printer.line(&format!(
            "shape: {} ended; processes it started still run; their network calls now \
             fail (ENOSYS), and their connections through shape are closed",
            end.shown
        ));
    }
    if plan.stats {
        say_stats(&end.printer, &end.ways, end.started_at, end.http.as_ref());
    }
    Exit::Command(code.clamp(0, 255) as u8)
}

/// What the supervisor says goes through `printer`, unless `quiet`.
fn say_unless(quiet: bool, printer: &Printer) -> Box<dyn Fn(&str)> {
    match quiet {
        true => Box::new(|_: &str| {}),
        false => {
            let printer = printer.clone();
            Box::new(move |line: &str| printer.line(line))
        }
    }
}

/// The status and line of a command that was not run.
fn refused(not_run: &NotRun) -> Exit {
    eprintln!("shape: {not_run}");
    Exit::Command(not_run.status() as u8)
}

/// The `--stats` line of a command: what it sent and received, each
/// with its average and the limit of its way.
fn say_stats(printer: &Printer, ways: &CommandWays, started: Instant, http: Option<&HttpRules>) {
    let seconds = started.elapsed().as_secs_f64();
    let way = |way: Way| {
        let bytes = ways.passed[way as usize].total();
        let average = if seconds > 0.0 {
            bytes as f64 / seconds
        } else {
            0.0
        };
        let limit = match ways.buckets[way as usize].limit() {
            Limit::Unlimited => "no limit".to_string(),
            limit => format!("limit {}", Counting::Bytes.show_limit(limit)),
        };
        format!(
            "{bytes} bytes ({}), average {}/s, {limit}",
            human_bytes(bytes),
            human_rate(average)
        )
    };
    let http = http.map(|rules| format!("; {}", rules.describe()));
    printer.line(&format!(
        "shape: sent {}; received {}; in {seconds:.3} s{}",
        way(Way::Up),
        way(Way::Down),
        http.unwrap_or_default()
    ));
}

/// The link's conditions: a command started without one (not `linked`)
/// has none to change (its connections are not relayed).
fn conditions(at_start: &ConditionsPlan, linked: bool) -> Arc<Conditions> {
    let unlinked = (!linked).then_some(
        "this command started without a link (--delay, --jitter, a fault or a UDP link's \
         option): start it with one ('--delay 0' will do)",
    );
    Arc::new(Conditions::fixing(
        at_start.in_force(),
        Fixed {
            faults: unlinked,
            ends: unlinked,
            delay: unlinked,
            carried: Carried::Both,
            ..Fixed::default()
        },
    ))
}

/// Starts the relay that carries the command's TCP connections through
/// the link, on a thread of its own, and says how its datagrams' proxies
/// are made.
fn start_relay(
    plan: &ExecPlan,
    adjuster: &Arc<Adjuster>,
    conditions: Arc<Conditions>,
    [passed_up, passed_down]: &[Arc<Throughput>; 2],
    printer: &Printer,
    http: Option<HttpRules>,
) -> anyhow::Result<Relay> {
    let at_start = &plan.conditions;
    let quiet = plan.pacing.quiet;
    let shaping = Shaping {
        settings: Arc::new(Tuning(adjuster.clone())),
        per_connection: false,
        link: at_start.slow_link,
        conditions: conditions.clone(),
        affect: at_start.affect,
        passed_up: passed_up.clone(),
        passed_down: passed_down.clone(),
        report: (!quiet).then(|| printer.clone()),
        seed: at_start.seed,
        say_seed: at_start.say_seed,
        // One loop relays the command's connections.
        loops: 1,
        http,
    };
    let seed = shaping.seed;
    let relay_loop = RelayLoop::start(shaping).context("the link's relay")?;
    let say = (!quiet).then(|| printer.clone());
    let passed = [passed_up, passed_down];
    let flow_ends = FlowEnds::default();
    let shared = DatagramShared {
        adjuster,
        conditions: &conditions,
        passed,
        seed,
        say,
        flow_ends: flow_ends.clone(),
    };
    let datagrams = datagram_proxies(at_start, &plan.datagrams, shared);
    Ok(Relay {
        relay_loop,
        conditions,
        datagrams,
        flow_ends,
    })
}

/// What the command's datagram proxies share: the run's settings and
/// conditions, the counts of both ways, the seed, where to say what they
/// have to say, and where their flows send from.
struct DatagramShared<'a> {
    adjuster: &'a Arc<Adjuster>,
    conditions: &'a Arc<Conditions>,
    passed: [&'a Arc<Throughput>; 2],
    seed: u64,
    say: Option<Printer>,
    flow_ends: FlowEnds,
}

/// What makes a datagram link of the command's, for one destination: the
/// UDP link's proxy, on a thread of its own, impaired as the flags say,
/// following the link's conditions and paying from both ways' buckets.
fn datagram_proxies(
    at_start: &ConditionsPlan,
    plan: &DatagramPlan,
    shared: DatagramShared,
) -> MakeNetem {
    let DatagramShared {
        adjuster,
        conditions,
        passed,
        seed,
        say,
        flow_ends,
    } = shared;
    let buckets = adjuster.buckets().to_vec();
    let ways = super::udp::impaired(at_start, plan, [&buckets[0], &buckets[1]]);
    let idle = plan.idle;
    let (adjuster, conditions) = (adjuster.clone(), conditions.clone());
    let passed = passed.map(Arc::clone);
    let made = AtomicU64::new(0);
    Box::new(move |listen, upstream| {
        let route = Route {
            listen,
            upstream,
            idle,
            ways: ways.clone(),
            // Each link draws its own, in the order they are made.
            seed: seed.wrapping_add(made.fetch_add(1, Ordering::Relaxed)),
        };
        let buckets = [buckets[0].clone(), buckets[1].clone()];
        let mut proxy = DatagramProxy::bind(route, buckets, passed.clone())?;
        proxy.follow(conditions.clone());
        proxy.noting_ends(flow_ends.clone());
        let handle = proxy.handle()?;
        adjuster.on_change(Box::new(move || handle.wake()));
        if let Some(say) = &say {
            proxy.saying(say.clone());
        }
        let local = proxy.local()?;
        std::thread::Builder::new()
            .name("shape-datagrams".into())
            .spawn(move || {
                if let Err(err) = proxy.serve() {
                    eprintln!("shape: the link to {upstream}: {}", one_line(&err));
                }
            })?;
        Ok(local)
    })
}

/// Where SIGINT, SIGTERM and SIGHUP sent to shape go: to the command, once
/// it has a pid. One that comes while the command starts (it is a child
/// already, but its pid is not known yet) is kept and passed on once it
/// is: dropped, it left a command sent SIGTERM at its start running to
/// its end (a test saw `sleep 30` end with 0 under load).
#[derive(Default)]
struct PassedOn {
    pid: Option<rustix::process::Pid>,
    early: Option<rustix::process::Signal>,
    /// shape was told to end (SIGINT, SIGTERM, SIGHUP): what the command
    /// leaves ends with it.
    told: bool,
}

impl PassedOn {
    /// Where signals go, and what passes them on there.
    fn shared() -> (Arc<Mutex<PassedOn>>, PassOn) {
        let target = Arc::new(Mutex::new(PassedOn::default()));
        let pass_on = {
            let target = target.clone();
            Box::new(move |signal: i32| lock(&target).pass(signal))
        };
        (target, pass_on)
    }

    /// Passes `signal` on; a second one kills: a command that ignores
    /// SIGTERM or SIGINT would otherwise keep shape (and a test run) from
    /// ending, where Ctrl-C twice must get out, as `timeout -k` does.
    fn pass(&mut self, signal: i32) {
        let Some(signal) = rustix::process::Signal::from_named_raw(signal) else {
            return;
        };
        let signal = match self.told {
            true => rustix::process::Signal::KILL,
            false => signal,
        };
        self.told = true;
        match self.pid {
            Some(pid) => {
                let _ = rustix::process::kill_process(pid, signal);
            }
            None => self.early = Some(signal),
        }
    }

    fn started(&mut self, pid: i32) {
        self.pid = rustix::process::Pid::from_raw(pid);
        if let (Some(pid), Some(signal)) = (self.pid, self.early.take()) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_signal_sent_before_the_command_has_a_pid_reaches_it_once_it_has() {
        let mut command = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut passed = PassedOn::default();
        passed.pass(libc::SIGTERM);
        passed.started(command.id() as i32);
        assert_eq!(command.wait().unwrap().signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn a_second_signal_kills_a_command_that_ignores_the_first() {
        let mut command = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM INT; echo ready; exec sleep 30"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(command.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        let mut passed = PassedOn::default();
        passed.started(command.id() as i32);
        passed.pass(libc::SIGTERM);
        passed.pass(libc::SIGINT);
        assert_eq!(command.wait().unwrap().signal(), Some(libc::SIGKILL));
    }
}
