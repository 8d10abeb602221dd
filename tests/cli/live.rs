//! Changing a running shape: `--remote`, SIGHUP and the rate file,
//! `--schedule`, SIGUSR1, pause and resume, and the privacy of the control
//! channel. Rates are measured downstream, in real time, with wide
//! tolerances.

use crate::harness::*;
use rustix::process::Signal;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MIB: f64 = 1_048_576.0;

fn within(measured: f64, target: f64, tolerance: f64) -> bool {
    (measured - target).abs() <= target * tolerance
}

#[test]
fn a_remote_rate_change_takes_effect_downstream() {
    let runtime = Runtime::new("remote-rate");
    let shape = runtime.start(["--rate", "1MiB", "--burst", "64KiB"]);
    let before = shape.rate_over(
        Instant::now() + Duration::from_millis(300),
        Duration::from_secs(1),
    );
    let answer = runtime.remote(shape.pid, ["--rate", "4MiB"]);
    let changed = Instant::now();
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        format!("shape {}: rate 4.00 MiB/s, burst 64.00 KiB\n", shape.pid)
    );
    let after = shape.rate_over(
        changed + Duration::from_millis(100),
        Duration::from_millis(1500),
    );
    shape.stop();
    assert!(within(before, MIB, 0.1), "before: {before}");
    assert!(within(after, 4.0 * MIB, 0.1), "after: {after}");
}

#[test]
fn the_limit_can_be_lifted_and_the_burst_changed() {
    let runtime = Runtime::new("remote-lift");
    let shape = runtime.start(["--rate", "1MiB"]);
    let answer = runtime.remote(shape.pid, ["--burst", "1MiB"]);
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        format!("shape {}: rate 1.00 MiB/s, burst 1.00 MiB\n", shape.pid)
    );
    let answer = runtime.remote(shape.pid, ["--rate", "unlimited"]);
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    assert!(String::from_utf8_lossy(&answer.stdout).contains("rate unlimited"));
    let lifted = shape.rate_over(
        Instant::now() + Duration::from_millis(100),
        Duration::from_millis(500),
    );
    shape.stop();
    assert!(lifted > 50.0 * MIB, "{lifted}");
}

#[test]
fn pause_holds_the_data_and_resume_brings_no_catch_up() {
    let runtime = Runtime::new("remote-pause");
    let started = Instant::now();
    let shape = runtime.start(["--rate", "2MiB", "--burst", "64KiB"]);
    // Flowing past its burst when paused.
    shape.wait_for_bytes(started, 128 * 1024);
    let answer = runtime.remote(shape.pid, ["--pause"]);
    assert!(
        String::from_utf8_lossy(&answer.stdout).ends_with(", paused\n"),
        "{answer:?}"
    );
    let paused = Instant::now();
    let held = shape.rate_over(
        paused + Duration::from_millis(50),
        Duration::from_millis(700),
    );
    // Data may flow from the moment the resume is asked for, before the
    // answer comes back: "right after resuming" starts there.
    let asked = Instant::now();
    let answer = runtime.remote(shape.pid, ["--resume"]);
    let resumed = Instant::now();
    assert!(
        !String::from_utf8_lossy(&answer.stdout).contains("paused"),
        "{answer:?}"
    );
    // The pace over the second after the resume is the subject.
    sleep_for(Duration::from_millis(1200));
    let first = shape.bytes_between(asked, resumed + Duration::from_millis(50));
    let flowing = shape.bytes_between(
        resumed + Duration::from_millis(200),
        resumed + Duration::from_millis(1200),
    );
    shape.stop();
    assert_eq!(held, 0.0, "bytes flowed while paused");
    // The burst, the chunk in hand and a pipe buffer at most, not the
    // 1.40 MiB a catch-up would send.
    assert!(
        first <= 64 * 1024 + 2048 + 64 * 1024 + 100 * 1024,
        "{first} bytes right after resuming"
    );
    assert!(within(flowing as f64, 2.0 * MIB, 0.15), "{flowing}");
}

#[test]
fn a_pid_that_is_not_a_running_shape_is_refused() {
    let runtime = Runtime::new("remote-none");
    let mut sleeper = Command::new("sleep").arg("5").spawn().unwrap();
    let answer = runtime.remote(sleeper.id(), ["--rate", "1k"]);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert_eq!(answer.code(), 1);
    assert_eq!(
        answer.stderr,
        format!(
            "shape: {} is not a running shape of this user\n",
            sleeper.id()
        )
    );

    let done = Running::start(
        runtime.shape(["--stop-after", "1"]),
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
        false,
    );
    let pid = done.pid;
    let (status, _, _) = done.finish();
    assert!(status.success());
    let answer = runtime.remote(pid, ["--rate", "1k"]);
    assert_eq!(answer.code(), 1);
    assert_says(&answer.stderr, "is not a running shape");
}

#[test]
fn sighup_rereads_a_good_rate_file_and_keeps_settings_on_a_bad_one() {
    let runtime = Runtime::new("rate-file");
    let file = runtime.0.file("rate", b"# start slow\n1MiB 64k\n");
    let shape = runtime.start(["--rate-file", file.to_str().unwrap()]);
    std::fs::write(&file, "4MiB 64k\n").unwrap();
    shape.signal(Signal::HUP);
    let reloaded = Instant::now();
    let fast = shape.rate_over(
        reloaded + Duration::from_millis(100),
        Duration::from_millis(1500),
    );
    std::fs::write(&file, "very fast\n").unwrap();
    shape.signal(Signal::HUP);
    let kept = shape.rate_over(
        Instant::now() + Duration::from_millis(100),
        Duration::from_millis(1000),
    );
    let (_, _, stderr) = shape.stop();
    assert!(within(fast, 4.0 * MIB, 0.1), "{fast}");
    assert!(within(kept, 4.0 * MIB, 0.1), "{kept}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("shape: {}: ", file.display())),
        "{stderr}"
    );
    assert!(
        stderr.trim_end().ends_with("; settings unchanged"),
        "{stderr}"
    );

    let bad = runtime.0.file("bad", b"fast\n");
    let refused = run(
        runtime.shape(["--rate-file", bad.to_str().unwrap()]),
        Stdio::null(),
    );
    assert_eq!(refused.code(), 2);
    assert!(
        refused.stderr.starts_with("shape: --rate-file "),
        "{}",
        refused.stderr
    );

    // An endless file is refused after a few kilobytes, not read forever.
    let endless = run(runtime.shape(["--rate-file", "/dev/zero"]), Stdio::null());
    assert_eq!(endless.code(), 2);
    assert!(
        endless.stderr.starts_with("shape: --rate-file ")
            && endless.stderr.contains("longer than 4096 bytes"),
        "{}",
        endless.stderr
    );
}

#[test]
fn a_schedule_changes_the_rate_on_time_and_bad_ones_are_usage_errors() {
    let runtime = Runtime::new("schedule");
    // shape's timetable starts between these two moments: the switch to
    // 4 MiB/s comes between a second after the first and after the second.
    let spawned = Instant::now();
    let running = runtime.start(["--schedule", "0s=1MiB, 1s=4MiB", "--burst", "64k"]);
    let registered = Instant::now();
    let slow = running.rate_over(
        spawned + Duration::from_millis(200),
        Duration::from_millis(700),
    );
    let fast = running.rate_over(
        registered + Duration::from_millis(1300),
        Duration::from_millis(1200),
    );
    running.stop();
    assert!(within(slow, MIB, 0.15), "{slow}");
    assert!(within(fast, 4.0 * MIB, 0.1), "{fast}");
    for bad in ["", "1MiB", "0s=fast", "5s=1MiB, 2s=2MiB", "soon=1MiB"] {
        let refused = run(shape(["--schedule", bad]), Stdio::null());
        assert_eq!(refused.code(), 2, "{bad}: {}", refused.stderr);
        assert_says(&refused.stderr, "--schedule");
    }
}

#[test]
fn sigusr1_prints_one_status_line() {
    let runtime = Runtime::new("status");
    let shape = runtime.start(["--rate", "1MiB"]);
    shape.signal(Signal::USR1);
    shape.wait_for_stderr("rate 1.00 MiB/s");
    let (_, _, stderr) = shape.stop();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("shape: ")
            && stderr.contains(" bytes (")
            && stderr.contains("rate 1.00 MiB/s"),
        "{stderr}"
    );
}

#[test]
fn a_signal_storm_loses_and_repeats_nothing() {
    let runtime = Runtime::new("storm");
    // 12 MiB at 20 MiB/s: 0.6 s of storm, some 1,200 signals on an idle
    // machine, and still over 500 on a busy one.
    let file = runtime.0.file("rate", b"20MiB\n");
    let data = random_bytes(12 << 20, 9);
    let mut command = runtime.shape(["--rate-file", file.to_str().unwrap(), "--burst", "256KiB"]);
    command.stdin(Stdio::piped());
    let mut shape = Running::start(command, Stdio::piped(), true);
    let feeder = shape.feed(&data, 33_331);
    runtime.wait_registered(shape.pid);
    let sent = shape.storm(
        &[Signal::HUP, Signal::USR2, Signal::HUP, Signal::USR1],
        3000,
    );
    feeder.join().unwrap();
    let (status, output, _) = shape.finish();
    assert!(status.success(), "{status:?}");
    assert!(sent > 500, "only {sent} signals were sent");
    assert!(
        output == data,
        "{} bytes out of {} after {sent} signals",
        output.len(),
        data.len()
    );
}

#[test]
fn planted_and_foreign_control_messages_are_refused() {
    let runtime = Runtime::new("planted");
    let shape = runtime.start(["--rate", "1MiB", "--burst", "64k"]);
    let dir = runtime.control_dir();
    let target = runtime
        .0
        .file("target", b"shape-control 2\nrate unlimited\n");
    std::os::unix::fs::symlink(&target, dir.join(format!("{}.req.planted", shape.pid))).unwrap();
    let foreign = rustix::process::geteuid().is_root().then(|| {
        let path = dir.join(format!("{}.req.foreign", shape.pid));
        std::fs::write(&path, "shape-control 2\nrate unlimited\n").unwrap();
        rustix::fs::chown(&path, Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
    });
    std::fs::write(
        dir.join(format!("{}.req.garbled", shape.pid)),
        "shape-control 2\nrate unlimited\nrm -rf /\n",
    )
    .unwrap();
    shape.signal(Signal::USR2);
    shape.wait_for_stderr("planted: ");
    shape.wait_for_stderr("garbled: ");
    if foreign.is_some() {
        shape.wait_for_stderr("foreign: ");
    }
    let answer = runtime.remote(shape.pid, ["--burst", "64k"]);
    let pid = shape.pid;
    let (_, _, stderr) = shape.stop();
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        format!("shape {pid}: rate 1.00 MiB/s, burst 64.00 KiB\n")
    );
    assert_says(&stderr, "planted: it is a symbolic link");
    assert_says(&stderr, "garbled: unexpected line 'rm -rf /'");
    if foreign.is_some() {
        assert_says(&stderr, "foreign: it belongs to user 65534");
    }
}

#[test]
fn a_control_directory_open_to_others_is_not_used() {
    let runtime = Runtime::new("open-dir");
    std::fs::create_dir(runtime.control_dir()).unwrap();
    std::fs::set_permissions(
        runtime.control_dir(),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let shape = Running::start(
        runtime.shape(["--rate", "1MiB"]),
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
        false,
    );
    shape.wait_for_stderr("remote control is off");
    let answer = runtime.remote(shape.pid, ["--rate", "2MiB"]);
    let (_, _, stderr) = shape.stop();
    assert!(
        stderr.contains("remote control is off") && stderr.contains("is open to others"),
        "{stderr}"
    );
    assert_eq!(answer.code(), 1);
    assert_says(&answer.stderr, "is open to others");
}

#[test]
fn a_change_reaches_a_shape_asleep_at_a_slow_rate_at_once() {
    let runtime = Runtime::new("remote-wake");
    let started = Instant::now();
    let shape = runtime.start(["--rate", "1KiB", "--burst", "64KiB"]);
    // The burst drained, shape sleeps on the 1 KiB/s schedule.
    shape.wait_for_bytes(started, 64 * 1024);
    let answer = runtime.remote(shape.pid, ["--rate", "10MiB"]);
    let changed = Instant::now();
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    // When, within the second after the change, the bytes came is the
    // subject.
    sleep_for(Duration::from_millis(1000));
    let arrivals = (1..=1000u64)
        .map(|ms| changed + Duration::from_millis(ms))
        .find(|&t| shape.bytes_between(changed, t) >= 64 * 1024);
    shape.stop();
    // 64 KiB at 10 MiB/s take 6 ms; at the old rate a minute.
    let latency = arrivals.map(|t| t - changed);
    eprintln!("64 KiB arrived {latency:?} after the remote returned");
    assert!(
        latency.is_some_and(|l| l < Duration::from_millis(500)),
        "{latency:?}"
    );
}

#[test]
fn a_remote_change_the_moment_a_shape_registers_never_kills_it() {
    let runtime = Runtime::new("remote-early");
    for round in 0..30 {
        let mut shape = Running::start(
            runtime.shape(["--rate", "1MiB", "--progress", "none"]),
            Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
            false,
        );
        // Watch for the registration without sleeping, and send what a
        // remote sends the instant it appears.
        let marker = runtime.control_dir().join(format!("{}.shape", shape.pid));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !marker.exists() {
            assert!(Instant::now() < deadline, "shape never registered");
            std::hint::spin_loop();
        }
        shape.signal(Signal::USR2);
        let answer = runtime.remote(shape.pid, ["--rate", "2MiB"]);
        assert!(
            shape.child.try_wait().unwrap().is_none(),
            "round {round}: a control signal right after registering ended shape"
        );
        assert_eq!(answer.code(), 0, "round {round}: {}", answer.stderr);
        let (status, _, stderr) = shape.stop();
        assert_eq!(status.signal(), Some(15), "round {round}: {stderr}");
    }
}

#[test]
fn a_burst_the_bucket_cannot_take_is_refused_with_its_cause_and_changes_nothing() {
    let runtime = Runtime::new("remote-bad-burst");
    let shape = runtime.start(["--rate", "1MiB", "--burst", "64k"]);
    let dir = runtime.control_dir();
    // A well-formed request whose burst no bucket can take, with a rate
    // that must not be applied either.
    std::fs::write(
        dir.join(format!("{}.req.zero", shape.pid)),
        "shape-control 2\nrate 4MiB\nburst 0\n",
    )
    .unwrap();
    shape.signal(Signal::USR2);
    let answer = dir.join(format!("{}.ack.zero", shape.pid));
    wait_until("an answer to the request", || answer.exists());
    let answer = std::fs::read_to_string(answer).unwrap();
    let settings = runtime.remote(shape.pid, ["--burst", "64k"]);
    let pid = shape.pid;
    let (_, _, stderr) = shape.stop();
    assert_eq!(
        answer,
        "shape-control 2\nrefused burst must be 1 byte to 4 EiB, not 0 bytes\n"
    );
    assert_says(&stderr, "zero: burst must be 1 byte to 4 EiB, not 0 bytes");
    assert_eq!(
        String::from_utf8_lossy(&settings.stdout),
        format!("shape {pid}: rate 1.00 MiB/s, burst 64.00 KiB\n")
    );
}

#[test]
fn a_rate_file_burst_over_the_maximum_is_refused_at_start_and_on_sighup() {
    let runtime = Runtime::new("rate-file-burst");
    let too_big = "1MiB 4194305T\n";
    let file = runtime.0.file("rate", too_big.as_bytes());
    let refused = run(
        runtime.shape(["--rate-file", file.to_str().unwrap()]),
        Stdio::null(),
    );
    assert_eq!(refused.code(), 2);
    assert_eq!(
        refused.stderr,
        format!(
            "shape: --rate-file {}: burst must be 1 byte to 4 EiB, not 4611687117939015680 bytes\n",
            file.display()
        )
    );

    std::fs::write(&file, "1MiB 64k\n").unwrap();
    let shape = runtime.start(["--rate-file", file.to_str().unwrap()]);
    std::fs::write(&file, too_big).unwrap();
    shape.signal(Signal::HUP);
    shape.wait_for_stderr("settings unchanged");
    let settings = runtime.remote(shape.pid, ["--resume"]);
    let pid = shape.pid;
    let (_, _, stderr) = shape.stop();
    assert_eq!(
        stderr,
        format!(
            "shape: {}: burst must be 1 byte to 4 EiB, not 4611687117939015680 bytes; settings unchanged\n",
            file.display()
        )
    );
    assert_eq!(
        String::from_utf8_lossy(&settings.stdout),
        format!("shape {pid}: rate 1.00 MiB/s, burst 64.00 KiB\n")
    );
}

#[test]
fn a_remote_answer_says_what_changed_and_an_empty_one_only_asks() {
    let runtime = Runtime::new("remote-answers");
    let shape = runtime.start(["--rate", "1MiB", "--delay", "50ms", "--drop", "0"]);
    let pid = shape.pid;
    let said = |args: &[&str]| {
        let mut command = runtime.shape(["--remote", &pid.to_string()]);
        command.args(args);
        let answer = run(command, Stdio::null());
        assert_eq!(answer.code(), 0, "{args:?}: {}", answer.stderr);
        String::from_utf8_lossy(&answer.stdout).into_owned()
    };
    let changed = said(&["--drop", "1%", "--slice", "7:3", "--delay", "80ms"]);
    let asked = said(&[]);
    let settings_after = said(&[]);
    shape.stop();
    assert_eq!(
        changed,
        format!("shape {pid}: rate 1.00 MiB/s, burst 102.40 KiB; delay 80ms; slice 7:3, drop 1%\n")
    );
    let prefix =
        format!("shape {pid}: rate 1.00 MiB/s, burst 102.40 KiB; delay 80ms; slice 7:3, drop 1%; ");
    for answer in [&asked, &settings_after] {
        assert!(answer.starts_with(&prefix), "{answer}");
        assert!(answer.contains(" bytes ("), "{answer}");
        assert!(answer.trim_end().ends_with(" s"), "{answer}");
    }
}

#[test]
fn a_copy_refuses_a_remote_delay_of_one_direction() {
    let runtime = Runtime::new("remote-one-way");
    let shape = runtime.start(["--rate", "1MiB", "--delay", "50ms"]);
    let pid = shape.pid.to_string();
    let refused = run(
        runtime.shape(["--remote", &pid, "--delay-up", "80ms"]),
        Stdio::null(),
    );
    let both = run(
        runtime.shape(["--remote", &pid, "--delay", "80ms"]),
        Stdio::null(),
    );
    shape.stop();
    // Refused by the running shape, as any change it cannot take.
    assert_eq!(refused.code(), 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("a copy has one direction"),
        "{}",
        refused.stderr
    );
    assert_eq!(both.code(), 0, "{}", both.stderr);
    assert!(
        String::from_utf8_lossy(&both.stdout).contains("delay 80ms"),
        "{:?}",
        both.stdout
    );
}

#[test]
fn sigusr1_says_the_rate_of_the_last_second_which_is_nothing_when_idle() {
    let runtime = Runtime::new("status-idle");
    let mut shape = Running::start(runtime.shape(["--rate", "1MiB"]), Stdio::piped(), false);
    runtime.wait_registered(shape.pid);
    let mut input = shape.child.stdin.take().unwrap();
    std::io::Write::write_all(&mut input, &[7; 100_000]).unwrap();
    // Idle, with the input still open, for more than a second: the idle
    // second is the subject.
    sleep_for(Duration::from_millis(1500));
    shape.signal(Signal::USR1);
    shape.wait_for_stderr(" now; ");
    drop(input);
    let (_, _, stderr) = shape.finish();
    assert!(
        stderr.starts_with("shape: 100000 bytes (97.66 KiB) in ")
            && stderr.contains(" s, 0 B/s now; rate 1.00 MiB/s"),
        "{stderr}"
    );
}

#[test]
fn a_proxy_says_each_direction_of_the_last_second_apart() {
    let runtime = Runtime::new("status-proxy");
    // Upstream sends 4 MiB down and takes what comes up.
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = upstream.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut peer, _) = upstream.accept().unwrap();
        let mut reader = peer.try_clone().unwrap();
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        let _ = std::io::Write::write_all(&mut peer, &vec![1; 4 << 20]);
    });
    let mut command = runtime.shape(["--listen", "127.0.0.1:0", "--connect", &address]);
    command.args(["--rate-up", "256KiB", "--rate-down", "1MiB"]);
    let proxy = Listening::start(command, Stdio::null());
    let mut client = std::net::TcpStream::connect(&proxy.address).unwrap();
    let mut reader = client.try_clone().unwrap();
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    std::thread::spawn(move || std::io::Write::write_all(&mut client, &vec![2; 4 << 20]));
    // Past the bursts, into the steady rate the line reports: time is the
    // subject.
    sleep_for(Duration::from_millis(2500));
    send_signal(proxy.child.id(), Signal::USR1);
    let said = proxy.wait_for_stderr(" now; ");
    let line = said.lines().find(|line| line.contains(" now; ")).unwrap();
    // Each direction's own rate, not their sum.
    let rate = |way: &str| -> f64 {
        let at = line
            .find(way)
            .unwrap_or_else(|| panic!("no {way:?}: {line}"))
            + way.len();
        let mut words = line[at..].split_whitespace();
        let number: f64 = words.next().unwrap().parse().unwrap();
        match words.next().unwrap().trim_end_matches(',') {
            "KiB/s" => number * 1024.0,
            "MiB/s" => number * 1024.0 * 1024.0,
            unit => panic!("{unit} in {line}"),
        }
    };
    let (up, down) = (rate(" s, up "), rate(", down "));
    assert!((150e3..=400e3).contains(&up), "{line}");
    assert!((600e3..=1600e3).contains(&down), "{line}");
}

#[test]
fn a_remote_rate_of_one_way_changes_that_way_of_a_running_proxy_alone() {
    let runtime = Runtime::new("remote-way");
    let upstream = crate::proxy::server(|mut stream| {
        let _ = std::io::Write::write_all(&mut stream, &vec![7u8; 1 << 20]);
    });
    let mut command = runtime.shape(["--listen", "127.0.0.1:0", "--connect", &upstream]);
    command.args(["--rate", "64KiB"]);
    let proxy = Listening::start(command, Stdio::null());
    let pid = proxy.child.id().to_string();
    let answer = run(
        runtime.shape(["--remote", &pid, "--rate-down", "8MiB"]),
        Stdio::null(),
    );
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    let said = String::from_utf8_lossy(&answer.stdout).into_owned();
    assert!(
        said.starts_with(&format!("shape {pid}: up: rate 64.00 KiB/s"))
            && said.contains("; down: rate 8.00 MiB/s"),
        "{said}"
    );
    // 1 MiB down: sixteen seconds at 64 KiB/s, an eighth of one at 8 MiB/s.
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(&proxy.address).unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut stream, &mut got).unwrap();
    assert_eq!(got.len(), 1 << 20);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // A copy has one way: refused by it, and it runs on.
    let copy = runtime.start(["--rate", "1MiB"]);
    let refused = run(
        runtime.shape(["--remote", &copy.pid.to_string(), "--rate-up", "2MiB"]),
        Stdio::null(),
    );
    copy.stop();
    assert_eq!(refused.code(), 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("this shape has one (--rate)"),
        "{}",
        refused.stderr
    );
}
