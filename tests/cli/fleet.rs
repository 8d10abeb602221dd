//! A fleet's share in Redis: a real `redis-server` on a Unix socket of a
//! scratch directory (no port to race for), started and stopped by each
//! test. "Machines" are shapes with runtime directories of their own, so
//! they cannot meet through a local share. Rates are loose real-time
//! checks; the fleet's figures are in BENCHMARKS.md.

use crate::harness::*;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MIB: f64 = 1_048_576.0;

/// A redis-server of the test's own.
struct Redis {
    child: Child,
    dir: Scratch,
    extra: Vec<String>,
}

impl Redis {
    /// Starts one, or says why not: outside CI a missing redis-server
    /// skips the test; under CI it fails it.
    fn start(name: &str, extra: &[&str]) -> Option<Redis> {
        if !installed("redis-server") {
            return None;
        }
        let dir = Scratch::new(name);
        let extra = extra.iter().map(|s| s.to_string()).collect();
        let mut redis = Redis {
            child: Command::new("true").spawn().unwrap(),
            dir,
            extra,
        };
        redis.child = redis.spawn();
        Some(redis)
    }

    fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("redis.sock")
    }

    fn spawn(&self) -> Child {
        let socket = self.socket();
        let _ = std::fs::remove_file(&socket);
        let child = Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(&socket)
            .args(&self.extra)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        wait_until("redis-server to listen", || socket.exists());
        child
    }

    /// The share `name` on this server.
    fn share(&self, name: &str) -> String {
        format!("redis+unix://{}/{name}", self.socket().display())
    }

    fn stop(&mut self) {
        self.freeze(false);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn restart(&mut self) {
        self.stop();
        self.child = self.spawn();
    }

    /// Freezes it (SIGSTOP: connected, never answering) or thaws it.
    fn freeze(&self, frozen: bool) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let signal = if frozen {
            rustix::process::Signal::STOP
        } else {
            rustix::process::Signal::CONT
        };
        // A server already stopped has nothing to thaw.
        let _ = rustix::process::kill_process(pid, signal);
    }

    /// `redis-cli ARGS` on this server.
    fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .arg("-s")
            .arg(self.socket())
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// How many times a script was asked for, run or refused, so far.
    fn scripts_asked(&self) -> u64 {
        self.cli(&["INFO", "commandstats"])
            .lines()
            .filter(|line| line.starts_with("cmdstat_eval"))
            .flat_map(|line| line.split([':', ',']))
            .filter_map(|field| field.split_once('='))
            .filter(|(name, _)| name.ends_with("calls"))
            .filter_map(|(_, n)| n.trim().parse::<u64>().ok())
            .sum()
    }

    /// Waits up to ten seconds for `more` scripts asked for after `from`.
    fn wait_for_scripts(&self, from: u64, more: u64) {
        wait_until("Redis to be asked more", || {
            self.scripts_asked() >= from + more
        });
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn shapes_on_two_machines_share_one_limit_and_each_gets_its_part() {
    let Some(redis) = Redis::start("fleet-two", &[]) else {
        return;
    };
    let share = redis.share("backup");
    let args = ["--share", &share, "--rate", "4MiB", "--burst", "256KiB"];
    let (a, b) = (Runtime::new("fleet-a"), Runtime::new("fleet-b"));
    let shapes = [
        machine(&a, &args),
        machine(&a, &args),
        machine(&b, &args),
        machine(&b, &args),
    ];
    let from = Instant::now() + Duration::from_millis(800);
    let window = Duration::from_secs(3);
    let each = rates(&shapes, from, window);
    let status = run(a.shape(["--share", &share, "--status"]), Stdio::null());
    for shape in shapes {
        shape.stop();
    }
    let total: f64 = each.iter().sum();
    assert!(
        (total - 4.0 * MIB).abs() <= 0.08 * 4.0 * MIB,
        "total {total} of {each:?}"
    );
    for rate in &each {
        assert!(*rate >= 0.15 * total, "{each:?}");
    }
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.starts_with(&format!(
            "share {share}: rate 4.00 MiB/s, burst 256.00 KiB; 4 shapes on it; in use "
        )),
        "{status}"
    );
}

#[test]
fn a_remote_change_reaches_every_shape_on_every_machine() {
    let Some(redis) = Redis::start("fleet-remote", &[]) else {
        return;
    };
    let share = redis.share("crawl");
    let args = ["--share", &share, "--rate", "1MiB", "--burst", "256KiB"];
    let (a, b) = (Runtime::new("fleet-ra"), Runtime::new("fleet-rb"));
    let started = Instant::now();
    let shapes = [machine(&a, &args), machine(&b, &args)];
    // Both on the share, and spending.
    for shape in &shapes {
        shape.wait_for_bytes(started, 1);
    }
    let answer = run(
        a.shape(["--remote", &format!("share:{share}"), "--rate", "4MiB"]),
        Stdio::null(),
    );
    let changed = Instant::now();
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        format!("share {share}: rate 4.00 MiB/s, burst 256.00 KiB\n")
    );
    let from = changed + Duration::from_millis(500);
    let window = Duration::from_secs(2);
    let total: f64 = rates(&shapes, from, window).iter().sum();
    for shape in shapes {
        shape.stop();
    }
    // Well above the old rate and never above the new one. Below it by
    // up to a quarter: on a starved machine each lease takes a turn.
    assert!(
        (0.75 * 4.0 * MIB..=1.05 * 4.0 * MIB).contains(&total),
        "total {total} after the change"
    );
}

#[test]
fn a_shape_that_wakes_from_idle_takes_only_what_it_sends() {
    let Some(redis) = Redis::start("fleet-idle", &[]) else {
        return;
    };
    let share = redis.share("queue");
    let args = ["--share", &share, "--rate", "4MiB", "--burst", "256KiB"];
    let (a, b) = (Runtime::new("fleet-ia"), Runtime::new("fleet-ib"));
    let busy = machine(&a, &args);
    let mut command = b.shape(["--progress", "none"]);
    command.args(args);
    let mut idle = Running::start(command, Stdio::piped(), false);
    let mut input = idle.child.stdin.take().unwrap();
    // Idle long enough for its bucket to have overflowed 8 MiB, then 64 KiB
    // and idle again, its input left open: the idle spell is the subject.
    sleep_for(Duration::from_secs(2));
    input.write_all(&[0; 64 << 10]).unwrap();
    let woke = Instant::now();
    let rate = busy.rate_over(
        woke + Duration::from_millis(500),
        Duration::from_millis(2500),
    );
    drop(input);
    idle.stop();
    busy.stop();
    // The idle shape spent 64 KiB: the busy one keeps nearly the whole
    // share. Counting the tokens its bucket threw away while idle as spent,
    // the idle shape leased half the share for seconds (2.00 MiB/s here).
    assert!(rate >= 0.7 * 4.0 * MIB, "busy shape at {rate} B/s");
}

#[test]
fn redis_stopped_mid_transfer_loses_nothing_and_is_said_once() {
    let Some(mut redis) = Redis::start("fleet-down", &[]) else {
        return;
    };
    let share = redis.share("nightly");
    let data = random_bytes(6 << 20, 70);
    let runtime = Runtime::new("fleet-down-rt");
    let mut command = runtime.shape(["--share", &share, "--rate", "2MiB", "--stats"]);
    command.stdin(Stdio::piped());
    let mut shape = Running::start(command, Stdio::piped(), true);
    let started = Instant::now();
    let feeder = shape.feed(&data, data.len());
    shape.wait_for_bytes(started, 1 << 20);
    redis.stop();
    shape.wait_for_stderr("Redis is unreachable");
    // Down for a while, spending on at the last rate: the outage's length
    // is the subject.
    sleep_for(Duration::from_millis(800));
    redis.restart();
    feeder.join().unwrap();
    let (status, output, stderr) = shape.finish();
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(output == data, "{} of {} bytes", output.len(), data.len());
    let unreachable = stderr.matches("Redis is unreachable").count();
    assert_eq!(unreachable, 1, "{stderr}");
    assert_says(
        &stderr,
        "going on at 2.00 MiB/s, the last known rate per shape",
    );
    assert_says(&stderr, "Redis is back");
}

#[test]
fn failures_name_the_address_and_never_the_password() {
    let Some(redis) = Redis::start("fleet-auth", &["--requirepass", "hunter2"]) else {
        return;
    };
    let socket = redis.socket().display().to_string();
    let share = redis.share("x");
    let mut wrong = shape(["--share", &share, "--stop-after", "1"]);
    wrong.env("SHAPE_REDIS_PASSWORD", "guess");
    let refused = run(wrong, Stdio::null());
    assert_eq!(refused.code(), 1, "{}", refused.stderr);
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .starts_with(&format!("shape: share {share}: "))
            && refused
                .stderr
                .to_lowercase()
                .contains("authentication failed"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("guess"), "{}", refused.stderr);
    // A malformed address with a password: the usage error hides it.
    let typo = run(shape(["--share", "redis://me:hunter2@/x"]), Stdio::null());
    assert_eq!(typo.code(), 2);
    assert_says(&typo.stderr, "redis://me:***@/x");
    assert!(!typo.stderr.contains("hunter2"), "{}", typo.stderr);

    // The right password from the environment, and a database that is not.
    let mut from_env = shape([
        "--share",
        &format!("redis+unix://{socket}/x?db=99"),
        "--status",
    ]);
    from_env.env("SHAPE_REDIS_PASSWORD", "hunter2");
    let no_db = run(from_env, Stdio::null());
    assert_eq!(no_db.code(), 1, "{}", no_db.stderr);
    assert_says(&no_db.stderr, "DB index is out of range");
    assert!(!no_db.stderr.contains("hunter2"), "{}", no_db.stderr);

    let nowhere = run(
        shape([
            "--share",
            "redis+unix:///nonexistent/redis.sock/x",
            "--stop-after",
            "1",
        ]),
        Stdio::null(),
    );
    assert_eq!(nowhere.code(), 1);
    assert!(
        nowhere
            .stderr
            .starts_with("shape: share redis+unix:///nonexistent/redis.sock/x: "),
        "{}",
        nowhere.stderr
    );
}

#[test]
fn a_key_holding_something_else_or_another_unit_is_refused() {
    let Some(redis) = Redis::start("fleet-foreign", &[]) else {
        return;
    };
    redis.cli(&["SET", "shape:{taken}:settings", "not a hash"]);
    let taken = run(
        shape(["--share", &redis.share("taken"), "--stop-after", "1"]),
        Stdio::null(),
    );
    assert_eq!(taken.code(), 1);
    assert_says(&taken.stderr, "WRONGTYPE");

    let bytes = run_with_input(
        shape(["--share", &redis.share("jobs"), "--rate", "1MiB"]),
        b"some bytes".to_vec(),
        4,
    );
    assert_eq!(bytes.code(), 0, "{}", bytes.stderr);
    let lines = run_with_input(
        shape(["--share", &redis.share("jobs"), "--lines", "--rate", "5"]),
        b"a line\n".to_vec(),
        4,
    );
    assert_eq!(lines.code(), 1);
    assert_eq!(
        lines.stderr,
        format!(
            "shape: share {}: it counts bytes, and this shape counts lines: a share counts one thing\n",
            redis.share("jobs")
        )
    );
}

#[test]
fn a_hung_redis_never_lets_a_holding_shape_spend_more_than_it_leased() {
    let Some(redis) = Redis::start("fleet-hung", &[]) else {
        return;
    };
    let share = redis.share("hung");
    let runtime = Runtime::new("fleet-hung-rt");
    let started = Instant::now();
    let shape = machine(
        &runtime,
        &[
            "--share",
            &share,
            "--rate",
            "2MiB",
            "--share-fallback",
            "block",
        ],
    );
    shape.wait_for_bytes(started, 1 << 20);
    redis.freeze(true);
    let frozen = Instant::now();
    // What passes in a freeze of 2.5 s: time is the subject.
    sleep_for(Duration::from_millis(2500));
    let during = shape.bytes_between(frozen, Instant::now());
    redis.freeze(false);
    let thawed = Instant::now();
    let after = shape.rate_over(thawed + Duration::from_millis(700), Duration::from_secs(1));
    let (_, _, stderr) = shape.stop();
    // What it held when Redis froze: a lease and what was in flight, well
    // under a second at 2 MiB/s (it was 4 times the rate before leases
    // bounded it).
    assert!(during < (MIB * 0.6) as usize, "{during} bytes while frozen");
    assert_says(
        &stderr,
        "Redis is unreachable (no answer within 1 s); holding the data",
    );
    assert_eq!(
        stderr.matches("Redis is unreachable").count(),
        1,
        "{stderr}"
    );
    assert_says(&stderr, "Redis is back");
    assert!(after > 0.7 * 2.0 * MIB, "{after} B/s after Redis came back");
}

#[test]
fn a_shape_leaves_promptly_whatever_redis_does() {
    let Some(redis) = Redis::start("fleet-leave", &[]) else {
        return;
    };
    let share = redis.share("leave");
    let runtime = Runtime::new("fleet-leave-rt");
    let mut command = runtime.shape(["--share", &share, "--rate", "8MiB", "-q"]);
    command.stdin(Stdio::piped());
    let mut shape = Running::start(command, Stdio::piped(), false);
    let mut input = shape.child.stdin.take().unwrap();
    let started = Instant::now();
    input.write_all(&[7; 64 << 10]).unwrap();
    shape.wait_for_bytes(started, 64 << 10);
    redis.freeze(true);
    // Frozen while the member's next lease call is under way: it must
    // leave without Redis's answer. The wait for that call is the subject.
    sleep_for(Duration::from_millis(300));
    let closed = Instant::now();
    drop(input);
    let (status, _, stderr) = shape.finish();
    let took = closed.elapsed();
    redis.freeze(false);
    assert!(status.success(), "{status:?} {stderr}");
    // Within half a second by design (a give-back bounded at 200 ms); a
    // second here, so that a busy machine does not fail the test.
    assert!(
        took < Duration::from_secs(1),
        "exit {took:?} after the input ended"
    );
}

#[test]
fn a_shares_settings_survive_a_redis_restart() {
    let Some(mut redis) = Redis::start("fleet-restart", &[]) else {
        return;
    };
    let share = redis.share("kept");
    let runtime = Runtime::new("fleet-restart-rt");
    let started = Instant::now();
    let shape = machine(&runtime, &["--share", &share, "--rate", "1MiB"]);
    // On the share, and spending.
    shape.wait_for_bytes(started, 1);
    let answer = run(
        runtime.shape(["--remote", &format!("share:{share}"), "--rate", "4MiB"]),
        Stdio::null(),
    );
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    // A burst never set follows the rate, as on a single shape.
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        format!("share {share}: rate 4.00 MiB/s, burst 409.60 KiB\n")
    );
    // The member took the change (its leases' replies carry it): it
    // spends faster than the old 1 MiB/s.
    wait_until("the member to spend at the new rate", || {
        let now = Instant::now();
        shape.bytes_between(now - Duration::from_millis(250), now) as f64 > 0.25 * 2.0 * MIB
    });
    redis.restart();
    let back = Instant::now();
    let rate = shape.rate_over(back + Duration::from_millis(800), Duration::from_secs(1));
    let status = run(
        runtime.shape(["--share", &share, "--status"]),
        Stdio::null(),
    );
    let (_, _, stderr) = shape.stop();
    assert!(
        String::from_utf8_lossy(&status.stdout).starts_with(&format!(
            "share {share}: rate 4.00 MiB/s, burst 409.60 KiB; 1 shape on it; in use "
        )),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    assert!(
        rate > 0.75 * 4.0 * MIB,
        "{rate} B/s after the restart; {stderr}"
    );
}

#[test]
fn trouble_mid_run_is_said_by_its_cause_once_and_when_it_heals() {
    let Some(redis) = Redis::start("fleet-trouble", &[]) else {
        return;
    };
    let share = redis.share("acl");
    let runtime = Runtime::new("fleet-trouble-rt");
    let mut command = runtime.shape(["--progress", "none"]);
    command.args(["--share", &share, "--rate", "2MiB"]);
    let started = Instant::now();
    let shape = Running::start(
        command,
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
        false,
    );
    // On the share, and spending.
    shape.wait_for_bytes(started, 1);
    // A key of the share that holds something else, then the right one.
    redis.cli(&["DEL", "shape:{acl}:settings"]);
    redis.cli(&["SET", "shape:{acl}:settings", "not a hash"]);
    shape.wait_for_stderr("WRONGTYPE");
    // Retried, and not said again (below).
    redis.wait_for_scripts(redis.scripts_asked(), 10);
    redis.cli(&["DEL", "shape:{acl}:settings"]);
    shape.wait_for_stderr("Redis serves the share again");
    let settings = redis.cli(&["HGET", "shape:{acl}:settings", "rate"]);
    // The user loses the right to run scripts, then gets it back.
    redis.cli(&["ACL", "SETUSER", "default", "-@scripting"]);
    shape.wait_for_stderr("NOPERM");
    redis.wait_for_scripts(redis.scripts_asked(), 10);
    redis.cli(&["ACL", "SETUSER", "default", "+@all"]);
    shape.wait_for_stderr_times("Redis serves the share again", 2);
    // Some more leases, to see that nothing more is said of it.
    let healed = Instant::now();
    shape.wait_for_bytes(healed, 256 << 10);
    let (_, _, stderr) = shape.stop();
    let refused = stderr.matches("Redis refused the lease").count();
    assert_eq!(refused, 2, "{stderr}");
    assert_says(&stderr, "WRONGTYPE");
    assert_says(&stderr, "NOPERM");
    let healed = stderr.matches("Redis serves the share again").count();
    assert_eq!(healed, 2, "{stderr}");
    // One line each way, not one a retry (hundreds a second before).
    assert_eq!(stderr.lines().count(), 4, "{stderr}");
    // Put back as the member last knew it.
    assert_eq!(settings.trim(), "2097152");
}

#[test]
fn a_share_holds_its_total_and_even_parts_with_redis_far_away() {
    let Some(redis) = Redis::start("fleet-far", &[]) else {
        return;
    };
    let distance = at_a_distance(&redis, Duration::from_millis(150));
    let share = format!("redis://{}/far", distance.address);
    let args = ["--share", &share, "--rate", "4MiB"];
    let (a, b) = (Runtime::new("fleet-far-a"), Runtime::new("fleet-far-b"));
    let shapes = [machine(&a, &args), machine(&b, &args)];
    let from = Instant::now() + Duration::from_millis(2500);
    let window = Duration::from_secs(3);
    let each = rates(&shapes, from, window);
    for shape in shapes {
        shape.stop();
    }
    let total: f64 = each.iter().sum();
    // Exact in BENCHMARKS.md (within 1% at 200 ms); loose here. It was
    // 0.05 of the share at 150 ms before leases were asked for a round
    // trip ahead.
    assert!(
        (total - 4.0 * MIB).abs() <= 0.1 * 4.0 * MIB,
        "total {total} of {each:?}"
    );
    for rate in &each {
        assert!(*rate >= 0.35 * total, "{each:?}");
    }
}

/// A proxy of the test's own that puts `round_trip` between a member and
/// `redis`: shape's own, half of it each way.
fn at_a_distance(redis: &Redis, round_trip: Duration) -> Listening {
    let each_way = format!("{}us", round_trip.as_micros() / 2);
    Listening::start(
        shape([
            "--listen",
            "127.0.0.1:0",
            "--connect",
            &format!("unix:{}", redis.socket().display()),
            "--delay",
            &each_way,
        ]),
        Stdio::null(),
    )
}

/// Each member's bytes over `length` from `from` (after `from`'s own
/// start, for members started at different times), once that passed.
fn spent_from(shapes: &[(Running, Instant)], from: Duration, length: Duration) -> Vec<f64> {
    let last = shapes.iter().map(|(_, started)| *started).max().unwrap();
    sleep_until(last + from + length);
    shapes
        .iter()
        .map(|(shape, started)| {
            let start = *started + from;
            shape.bytes_between(start, start + length) as f64 / length.as_secs_f64()
        })
        .collect()
}

/// Two members 5 ms from Redis and two 200 ms away. The far ones took
/// three seconds to spend anything (ten round trips to join, then a
/// refusal for want of room slept through), and the share fell to 0.95
/// of its rate with the far ones at 0.23 of it each.
#[test]
fn members_near_and_far_from_redis_share_one_limit_evenly() {
    let Some(redis) = Redis::start("fleet-mixed", &[]) else {
        return;
    };
    let near = at_a_distance(&redis, Duration::from_millis(5));
    let far = at_a_distance(&redis, Duration::from_millis(200));
    let rate = 8.0 * MIB;
    let members: Vec<(Running, Instant)> = [&near, &far, &near, &far]
        .iter()
        .enumerate()
        .map(|(i, proxy)| {
            let share = format!("redis://{}/mixed", proxy.address);
            let runtime = Runtime::new(&format!("fleet-mixed-{i}"));
            let started = Instant::now();
            let shape = machine(&runtime, &["--share", &share, "--rate", "8MiB"]);
            (shape, started)
        })
        .collect();
    // Joining: each spends at least half its part within its third
    // second (within a second, here: 5 round trips to join, and the
    // first lease).
    let joined = spent_from(&members, Duration::from_secs(2), Duration::from_secs(1));
    for each in &joined {
        assert!(
            *each >= 0.5 * rate / 4.0,
            "{joined:?} B/s in the third second"
        );
    }
    // Then the total within 3% and each 25% ± 5% of it, as measured;
    // looser here, so that a busy machine does not fail the test.
    let each = spent_from(&members, Duration::from_secs(3), Duration::from_secs(3));
    let total: f64 = each.iter().sum();
    for (shape, _) in members {
        shape.stop();
    }
    assert!(
        (total - rate).abs() <= 0.08 * rate,
        "total {total} of {each:?}"
    );
    for rate in &each {
        assert!((0.2..=0.3).contains(&(rate / total)), "{each:?}");
    }
}

/// Redis frozen (SIGSTOP) for 3 s under four members that hold the data
/// while it is away: from half a second after it wakes they spend the
/// share whole again. They spent 0.76 of it for a second: members whose
/// calls found no room (what the calls queued meanwhile had granted) slept
/// until their poll for the settings.
#[test]
fn a_share_is_spent_whole_again_half_a_second_after_redis_wakes() {
    let Some(redis) = Redis::start("fleet-wakes", &[]) else {
        return;
    };
    let share = redis.share("wakes");
    let args = [
        "--share",
        &share,
        "--rate",
        "8MiB",
        "--share-fallback",
        "block",
    ];
    let members: Vec<Running> = (0..4)
        .map(|i| machine(&Runtime::new(&format!("fleet-wakes-{i}")), &args))
        .collect();
    // All four spend before Redis freezes.
    let moving = |shape: &Running| {
        let now = Instant::now();
        shape.bytes_between(now - Duration::from_millis(100), now) > 0
    };
    wait_until("the members all to spend", || members.iter().all(moving));
    redis.freeze(true);
    // Frozen for three seconds: how the members wake after is the subject.
    sleep_for(Duration::from_secs(3));
    redis.freeze(false);
    let woke = Instant::now();
    let each = rates(
        &members,
        woke + Duration::from_millis(500),
        Duration::from_millis(1500),
    );
    let said: Vec<String> = members.into_iter().map(|shape| shape.stop().2).collect();
    let total: f64 = each.iter().sum();
    // At least 0.9 of it, as measured; 0.85 here, for a busy machine.
    assert!(total >= 0.85 * 8.0 * MIB, "{each:?} B/s after Redis woke");
    for stderr in said {
        assert_says(&stderr, "holding the data until it is back");
        assert_says(&stderr, "Redis is back");
    }
}

/// A shape ended by SIGTERM leaves the share before it exits, so that
/// its part is free at once; it was forgotten only at its deadline, two
/// lease times and a second later (1.29 s before the others spent the
/// whole share, where it is 0.20 s now).
#[test]
fn a_shape_ended_by_sigterm_leaves_the_share_before_it_exits() {
    let Some(redis) = Redis::start("fleet-term", &[]) else {
        return;
    };
    let share = redis.share("term");
    let args = ["--share", &share, "--rate", "4MiB"];
    let (a, b) = (Runtime::new("fleet-term-a"), Runtime::new("fleet-term-b"));
    let shapes = [machine(&a, &args), machine(&b, &args)];
    wait_until("two members", || {
        redis.cli(&["ZCARD", "shape:{term}:deadline"]).trim() == "2"
    });
    let [ended, kept] = shapes;
    let (status, _, stderr) = ended.stop();
    assert_eq!(status.signal(), Some(15), "{status:?} {stderr}");
    // Gone from the share as it exited, not a deadline later.
    assert_eq!(redis.cli(&["ZCARD", "shape:{term}:deadline"]).trim(), "1");
    assert_eq!(redis.cli(&["HLEN", "shape:{term}:member"]).trim(), "1");
    kept.stop();
}

#[test]
fn a_server_that_is_not_redis_and_a_redis_user_without_rights_are_said_plainly() {
    let Some(redis) = Redis::start("fleet-plain", &[]) else {
        return;
    };
    // A server that answers as HTTP does.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = (&stream).write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        }
    });
    let http = run(
        shape(["--share", &format!("redis://{address}/x"), "--status"]),
        Stdio::null(),
    );
    assert_eq!(http.code(), 1, "{}", http.stderr);
    assert_eq!(
        http.stderr,
        format!("shape: share redis://{address}/0/x: the server does not answer as Redis does\n")
    );

    // A user that may not run scripts: refused at start, by its cause.
    redis.cli(&["ACL", "SETUSER", "default", "-@scripting"]);
    let refused = run(
        shape(["--share", &redis.share("rights"), "--stop-after", "1"]),
        Stdio::null(),
    );
    assert_eq!(refused.code(), 1, "{}", refused.stderr);
    assert_says(&refused.stderr, "NOPERM");
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
}

#[cfg(feature = "exec")]
#[test]
fn two_execs_on_a_fleet_share_hold_its_total() {
    if !installed("curl") {
        return;
    }
    let Some(redis) = Redis::start("fleet-exec", &[]) else {
        return;
    };
    let share = redis.share("downloads");
    crate::exec::two_downloads_on_one_share("two on a fleet's share", || {
        shape(["--share", &share, "--rate", "512KiB", "--exec"])
    });
}
