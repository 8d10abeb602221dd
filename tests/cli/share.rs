//! One limit shared by several shape processes: the total, fairness, a
//! participant killed with SIGKILL, bad share files, and changing a share.

use crate::harness::*;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

const MIB: f64 = 1_048_576.0;

#[test]
fn four_shapes_on_one_share_add_up_to_the_limit_and_each_gets_its_part() {
    let runtime = Runtime::new("share-four");
    let started = Instant::now();
    let shapes = runtime.start_many(
        4,
        &["--share", "backup", "--rate", "8MiB", "--burst", "256KiB"],
    );
    let each = rates(
        &shapes,
        started + Duration::from_millis(700),
        Duration::from_secs(3),
    );
    for shape in shapes {
        shape.stop();
    }
    let total: f64 = each.iter().sum();
    eprintln!(
        "four shapes on 8 MiB/s: {:?} MiB/s, total {:.4} MiB/s",
        each.iter().map(|r| r / MIB).collect::<Vec<_>>(),
        total / MIB
    );
    assert!(
        (total - 8.0 * MIB).abs() <= 0.03 * 8.0 * MIB,
        "total {total}"
    );
    for rate in &each {
        assert!(*rate >= 0.15 * total, "{each:?}");
    }
}

#[test]
fn a_shape_killed_with_sigkill_does_not_hold_up_the_others() {
    let runtime = Runtime::new("share-kill");
    let started = Instant::now();
    let mut shapes = runtime.start_many(
        3,
        &["--share", "crawl", "--rate", "6MiB", "--burst", "128KiB"],
    );
    // All three spending.
    for shape in &shapes {
        shape.wait_for_bytes(started, 256 << 10);
    }
    let victim = shapes.remove(0);
    victim.signal(rustix::process::Signal::KILL);
    let (status, _, _) = victim.finish();
    assert!(!status.success());
    let killed = Instant::now();
    let each = rates(
        &shapes,
        killed + Duration::from_millis(300),
        Duration::from_secs(2),
    );
    for shape in shapes {
        shape.stop();
    }
    let total: f64 = each.iter().sum();
    assert!(
        total <= 6.0 * MIB * 1.03,
        "over the limit after the kill: {total}"
    );
    assert!(
        total >= 6.0 * MIB * 0.9,
        "the others were held up: {each:?}"
    );
}

#[test]
fn a_remote_change_of_the_share_reaches_every_shape() {
    let runtime = Runtime::new("share-remote");
    let started = Instant::now();
    let shapes = runtime.start_many(
        2,
        &["--share", "sync", "--rate", "2MiB", "--burst", "128KiB"],
    );
    for shape in &shapes {
        shape.wait_for_bytes(started, 256 << 10);
    }
    let answer = run(
        runtime.shape(["--remote", "share:sync", "--rate", "8MiB"]),
        Stdio::null(),
    );
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        "share sync: rate 8.00 MiB/s, burst 128.00 KiB\n"
    );
    let each = rates(
        &shapes,
        Instant::now() + Duration::from_millis(200),
        Duration::from_secs(2),
    );
    let status = run(
        runtime.shape(["--share", "sync", "--status"]),
        Stdio::null(),
    );
    for shape in shapes {
        shape.stop();
    }
    let total: f64 = each.iter().sum();
    assert!((total - 8.0 * MIB).abs() <= 0.05 * 8.0 * MIB, "{each:?}");
    assert!(each.iter().all(|r| *r > 2.0 * MIB), "{each:?}");
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        status.starts_with("share sync: rate 8.00 MiB/s, burst 128.00 KiB; in use "),
        "{status}"
    );
}

#[test]
fn a_later_shape_adopts_the_share_and_says_so() {
    let runtime = Runtime::new("share-adopt");
    let started = Instant::now();
    let first = runtime.start_many(1, &["--share", "s", "--rate", "1MiB"]);
    first[0].wait_for_bytes(started, 1);
    let second = run(
        runtime.shape(["--share", "s", "--rate", "5MiB", "--stop-after", "1k"]),
        Stdio::null(),
    );
    for shape in first {
        shape.stop();
    }
    assert_eq!(second.code(), 0, "{}", second.stderr);
    assert_eq!(
        second.stderr,
        "shape: share s is at rate 1.00 MiB/s, burst 102.40 KiB; using that (change it with --remote share:s)\n"
    );
}

#[test]
fn bad_share_files_are_refused_with_their_reason() {
    let runtime = Runtime::new("share-bad");
    let created = run(
        runtime.shape(["--share", "x", "--rate", "1MiB", "--stop-after", "1"]),
        Stdio::null(),
    );
    assert_eq!(created.code(), 0, "{}", created.stderr);
    let path = runtime.share_file("x");
    let good = std::fs::read(&path).unwrap();
    let refused = |bytes: &[u8], reason: &str| {
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let run = run(
            runtime.shape(["--share", "x", "--stop-after", "1"]),
            Stdio::null(),
        );
        assert_eq!(run.code(), 1, "{reason}: {}", run.stderr);
        assert!(
            run.stderr
                .starts_with(&format!("shape: share x: {} ", path.display()))
                && run.stderr.contains(reason)
                && run
                    .stderr
                    .ends_with("; remove it with 'shape --share x --reset'\n"),
            "{reason}: {}",
            run.stderr
        );
    };
    refused(&good[..200], "too short");
    let mut version = good.clone();
    version[8] = 9;
    refused(&version, "another version");
    let mut magic = good.clone();
    magic[..8].copy_from_slice(b"NOTSHAPE");
    refused(&magic, "not a shape share file");

    std::fs::remove_file(&path).unwrap();
    let elsewhere = runtime.0.file("elsewhere", &good);
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let linked = run(
        runtime.shape(["--share", "x", "--stop-after", "1"]),
        Stdio::null(),
    );
    assert_eq!(linked.code(), 1);
    assert_says(&linked.stderr, "symbolic link");

    if rustix::process::geteuid().is_root() {
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, &good).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        rustix::fs::chown(&path, Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
        let foreign = run(
            runtime.shape(["--share", "x", "--stop-after", "1"]),
            Stdio::null(),
        );
        assert_eq!(foreign.code(), 1);
        assert_says(&foreign.stderr, "belongs to user 65534");
    }
}

#[test]
fn a_share_whose_shapes_have_all_ended_starts_afresh() {
    let runtime = Runtime::new("share-idle");
    let first = run(
        runtime.shape(["--share", "n", "--rate", "1MiB", "--stop-after", "1"]),
        Stdio::null(),
    );
    assert_eq!(first.code(), 0, "{}", first.stderr);
    let started = Instant::now();
    let shapes = runtime.start_many(1, &["--share", "n", "--rate", "3MiB", "--burst", "64KiB"]);
    shapes[0].wait_for_bytes(started, 1);
    let status = run(runtime.shape(["--share", "n", "--status"]), Stdio::null());
    let (_, _, stderr) = shapes.into_iter().next().unwrap().stop();
    assert_eq!(stderr, "", "no warning: nobody else was on the share");
    assert!(
        String::from_utf8_lossy(&status.stdout)
            .starts_with("share n: rate 3.00 MiB/s, burst 64.00 KiB;"),
        "{status:?}"
    );
}

#[test]
fn a_remote_change_of_a_missing_share_names_the_share() {
    let runtime = Runtime::new("share-missing");
    let run = run(
        runtime.shape(["--remote", "share:nothing", "--rate", "1MiB"]),
        Stdio::null(),
    );
    assert_eq!(run.code(), 1);
    assert_eq!(run.stderr, "shape: share nothing: no such share\n");
}

#[test]
fn a_corrupt_share_names_its_file_and_reset_recreates_it_when_nobody_is_on_it() {
    let runtime = Runtime::new("share-reset");
    let path = runtime.share_file("t9");
    let on_share = |extra: &[&str]| {
        let mut command = runtime.shape(["--share", "t9"]);
        command.args(extra);
        run(
            command,
            Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
        )
    };
    let created = on_share(&["--rate", "1MiB", "--stop-after", "1"]);
    assert_eq!(created.code(), 0, "{}", created.stderr);
    let mut corrupt = std::fs::read(&path).unwrap();
    corrupt[128..464].fill(0xff);
    std::fs::write(&path, &corrupt).unwrap();

    let refused = on_share(&["--stop-after", "1"]);
    assert_eq!(refused.code(), 1);
    assert_eq!(
        refused.stderr,
        format!(
            "shape: share t9: {} holds a corrupt bucket; remove it with 'shape --share t9 --reset'\n",
            path.display()
        )
    );
    let status = on_share(&["--status"]);
    assert_eq!(status.code(), 1);
    assert_eq!(status.stderr, refused.stderr);

    let reset = on_share(&["--reset"]);
    assert_eq!(reset.code(), 0, "{}", reset.stderr);
    assert_eq!(
        String::from_utf8_lossy(&reset.stdout),
        "share t9: removed; the next shape on it starts it afresh\n"
    );
    let again = on_share(&["--rate", "2MiB", "--stop-after", "1k"]);
    assert_eq!(again.code(), 0, "{}", again.stderr);
    assert_eq!(again.stdout.len(), 1024);

    // Not while a shape spends from it.
    let running = runtime.start(["--share", "t9", "--rate", "2MiB"]);
    let refused = on_share(&["--reset"]);
    running.stop();
    assert_eq!(refused.code(), 1);
    assert_eq!(
        refused.stderr,
        "shape: share t9: a running shape is on it; stop it first\n"
    );
    assert!(path.exists(), "the share file was kept");
}

#[test]
fn a_control_directory_that_cannot_be_used_is_named_with_why() {
    let scratch = Scratch::new("control-dir");
    let missing = scratch.path().join("missing");
    let mut command = shape(["--share", "v1"]);
    command.env("XDG_RUNTIME_DIR", &missing);
    let refused = run(command, Stdio::null());
    assert_eq!(refused.code(), 1);
    assert_eq!(
        refused.stderr,
        format!(
            "shape: {}: No such file or directory\n",
            missing.join("shape").display()
        )
    );

    let elsewhere = scratch.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, scratch.path().join("shape")).unwrap();
    let mut command = shape(["--share", "v1"]);
    command.env("XDG_RUNTIME_DIR", scratch.path());
    let refused = run(command, Stdio::null());
    assert_eq!(refused.code(), 1);
    assert_eq!(
        refused.stderr,
        format!(
            "shape: {} is a symlink; it must be a directory of this user's only\n",
            scratch.path().join("shape").display()
        )
    );
}

#[test]
fn a_control_directory_taken_in_the_shared_temporary_directory_says_how_to_use_another() {
    let scratch = Scratch::new("control-taken");
    let uid = rustix::process::geteuid().as_raw();
    let taken = scratch.path().join(format!("shape-{uid}"));
    std::fs::create_dir(&taken).unwrap();
    // As another user's would be, it is not this user's alone.
    std::fs::set_permissions(&taken, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut command = shape(["--rate", "1MiB"]);
    command.env("TMPDIR", scratch.path());
    let ran = run_with_input(command, b"passes anyway".to_vec(), 100);
    assert_eq!(ran.code(), 0, "{}", ran.stderr);
    assert_eq!(ran.stdout, b"passes anyway");
    assert!(
        ran.stderr.starts_with(&format!(
            "shape: remote control is off: {}",
            taken.display()
        )),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .ends_with("; set XDG_RUNTIME_DIR to a directory of your own to use another\n"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_share_burst_never_set_follows_the_rate_for_every_shape_and_remote() {
    let runtime = Runtime::new("share-burst-rule");
    let remote = |args: &[&str]| {
        let mut command = runtime.shape(["--remote", "share:rule"]);
        command.args(args);
        let answer = run(command, Stdio::null());
        assert_eq!(answer.code(), 0, "{}", answer.stderr);
        String::from_utf8_lossy(&answer.stdout).into_owned()
    };
    let running = runtime.start(["--share", "rule", "--rate", "1MiB"]);
    assert_eq!(
        remote(&["--rate", "10MiB"]),
        "share rule: rate 10.00 MiB/s, burst 1.00 MiB\n"
    );
    // A shape on the share changes it by the same rule.
    let via_shape = runtime.remote(running.pid, ["--rate", "20MiB"]);
    assert_eq!(
        String::from_utf8_lossy(&via_shape.stdout),
        format!("shape {}: rate 20.00 MiB/s, burst 2.00 MiB\n", running.pid)
    );
    assert_eq!(
        remote(&["--burst", "64k"]),
        "share rule: rate 20.00 MiB/s, burst 64.00 KiB\n"
    );
    // Set once, it stays, whoever changes the rate.
    assert_eq!(
        remote(&["--rate", "2MiB"]),
        "share rule: rate 2.00 MiB/s, burst 64.00 KiB\n"
    );
    let pid = running.pid;
    let via_shape = runtime.remote(pid, ["--rate", "3MiB"]);
    running.stop();
    assert_eq!(
        String::from_utf8_lossy(&via_shape.stdout),
        format!("shape {pid}: rate 3.00 MiB/s, burst 64.00 KiB\n")
    );
}

#[test]
fn what_a_killed_shape_left_in_the_control_directory_goes_with_the_next_shape() {
    let runtime = Runtime::new("stale-control-files");
    let mut killed = runtime.start(["--rate", "1MiB"]);
    let left = runtime.control_dir().join(format!("{}.shape", killed.pid));
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    assert!(left.exists(), "SIGKILL leaves its registration behind");
    // And a request for it that nobody will read.
    let request = runtime
        .control_dir()
        .join(format!("{}.req.lost", killed.pid));
    std::fs::write(&request, "shape-control 2\nrate 1MiB\n").unwrap();
    let next = run(
        runtime.shape(["--rate", "1MiB", "--stop-after", "1"]),
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
    );
    assert_eq!(next.code(), 0, "{}", next.stderr);
    assert!(
        !left.exists(),
        "the next shape removed the dead one's registration"
    );
    assert!(!request.exists(), "and what was sent to it");
}

#[test]
fn stats_on_a_share_say_this_shape_s_part_of_the_share_s_limit() {
    let runtime = Runtime::new("share-stats");
    let args = [
        "--share",
        "halves",
        "--rate",
        "4MiB",
        "--burst",
        "64KiB",
        "--stats",
        "--stop-after",
        "2MiB",
    ];
    for shape in runtime.start_many(2, &args) {
        let (status, _, stderr) = shape.finish();
        assert!(status.success(), "{status:?}: {stderr}");
        let line = stderr
            .lines()
            .find(|line| line.contains(" of share halves's limit 4.00 MiB/s"))
            .unwrap_or_else(|| panic!("{stderr}"));
        let part: f64 = line
            .split("average ")
            .nth(1)
            .and_then(|rest| rest.split(", ").nth(1))
            .and_then(|rest| rest.split('%').next())
            .and_then(|percent| percent.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        // Loose: two shapes on one share get about half each.
        assert!((20.0..=80.0).contains(&part), "{line}");
    }
}
