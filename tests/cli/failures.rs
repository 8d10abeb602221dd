//! How shape ends when something goes wrong around it: the reader
//! downstream leaves, the disk is full, an input is missing, Ctrl-C.

use crate::harness::*;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

/// Waits up to `limit` for `child` to exit.
fn wait_within(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let mut ended = None;
    if !comes_within(limit, || {
        ended = child.try_wait().unwrap();
        ended.is_some()
    }) {
        let _ = child.kill();
        panic!("shape still running after {limit:?}");
    }
    ended.unwrap()
}

/// `shape [args] < /dev/zero | head -c 1M`: shape dies of SIGPIPE at once,
/// silently.
fn closed_early(args: &[&str]) {
    let mut child = shape(args)
        .stdin(Stdio::from(std::fs::File::open("/dev/zero").unwrap()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = drain(child.stderr.take().unwrap());
    let mut stdout = child.stdout.take().unwrap();
    let mut first = vec![0; 1 << 20];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let status = wait_within(&mut child, Duration::from_secs(5));
    assert_eq!(status.signal(), Some(13), "{status:?}");
    assert_eq!(String::from_utf8_lossy(&stderr.join().unwrap()), "");
}

#[test]
fn a_reader_that_leaves_ends_shape_by_sigpipe() {
    closed_early(&[]);
    closed_early(&["--rate", "50MiB", "--progress", "json"]);
}

#[test]
fn a_full_disk_is_one_line_and_status_one() {
    let mut child = shape(["--stop-after", "1M"])
        .stdin(Stdio::from(std::fs::File::open("/dev/zero").unwrap()))
        .stdout(Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        ))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = drain(child.stderr.take().unwrap());
    let status = wait_within(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&stderr.join().unwrap()),
        "shape: write to stdout: No space left on device\n"
    );
}

#[test]
fn a_missing_file_is_reported_and_the_others_still_copied() {
    let dir = Scratch::new("missing");
    let a = dir.file("a", b"first ");
    let b = dir.file("b", b"second");
    let missing = dir.path().join("missing");
    let run = run(shape([&a, &missing, dir.path(), &b]), Stdio::null());
    assert_eq!(run.code(), 1);
    assert_eq!(run.stdout, b"first second");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stderr);
    assert_eq!(
        lines[0],
        format!("shape: {}: No such file or directory", missing.display())
    );
    assert_eq!(
        lines[1],
        format!("shape: read from {}: Is a directory", dir.path().display())
    );
}

#[test]
fn ctrl_c_ends_a_sleeping_shape_with_sigint() {
    let mut child = shape(["--rate", "1", "--burst", "1"])
        .stdin(Stdio::from(std::fs::File::open("/dev/zero").unwrap()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its byte passed, it waits a second for the next one.
    let state = format!("/proc/{}/stat", child.id());
    wait_until("shape to sleep", || {
        std::fs::read_to_string(&state).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('S'))
        })
    });
    send_signal(child.id(), rustix::process::Signal::INT);
    let status = wait_within(&mut child, Duration::from_secs(2));
    assert_eq!(status.signal(), Some(2), "{status:?}");
}

/// A one-off output (help, version, man page, completions) into `stdout`.
fn one_off(args: &[&str], stdout: Stdio) -> (std::process::ExitStatus, String) {
    let mut child = shape(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = drain(child.stderr.take().unwrap());
    let status = wait_within(&mut child, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&stderr.join().unwrap()).into_owned();
    (status, stderr)
}

#[test]
fn one_off_outputs_fail_as_every_output_does() {
    let full = || {
        Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
    };
    // A full disk: one line and status 1 (completions aborted inside the
    // generator, and help said nothing and returned 0).
    for args in [
        &["--generate", "bash"][..],
        &["--generate", "man"],
        &["--help"],
        &["--version"],
    ] {
        let (status, stderr) = one_off(args, full());
        assert_eq!(status.code(), Some(1), "{args:?}: {status:?} {stderr}");
        assert_eq!(
            stderr, "shape: write to stdout: No space left on device\n",
            "{args:?}"
        );
    }
    // A reader that went away: SIGPIPE, silently, as for cat.
    for args in [&["--generate", "man"][..], &["--help"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let (status, stderr) = one_off(args, Stdio::from(writer));
        assert_eq!(status.signal(), Some(13), "{args:?}: {status:?} {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}

/// `shape --rate 1MiB` run by `sh -c` with `redirect` after it, fed a
/// little input.
fn redirected(redirect: &str) -> Run {
    let mut command = std::process::Command::new("sh");
    command
        .args(["-c", &format!("exec \"$0\" --rate 1MiB {redirect}")])
        .arg(env!("CARGO_BIN_EXE_shape"));
    run_with_input(command, b"somewhere or nowhere".to_vec(), 100)
}

#[test]
fn a_closed_standard_output_is_an_error_before_anything_is_read() {
    let ran = redirected(">&-");
    assert_eq!(ran.code(), 1, "{}", ran.stderr);
    assert_eq!(
        ran.stderr,
        "shape: standard output is closed: give shape somewhere to write ('>/dev/null' throws it away)\n"
    );
}

#[test]
fn a_dev_null_the_caller_chose_is_written_to_whatever_its_open_mode() {
    for redirect in [">/dev/null", "1<>/dev/null"] {
        let ran = redirected(redirect);
        assert_eq!(ran.code(), 0, "{redirect}: {}", ran.stderr);
        assert_eq!(ran.stderr, "", "{redirect}");
    }
}

/// What a test harness in Python or Node sees when it throws shape's
/// output away: both open /dev/null for reading and writing, as Rust's
/// runtime does for a closed descriptor, and both must work.
#[test]
fn harnesses_that_throw_the_output_away_are_served() {
    let shape = env!("CARGO_BIN_EXE_shape");
    if installed("python3") {
        let python = std::process::Command::new("python3")
            .args([
                "-c",
                "import subprocess, sys\n\
                 r = subprocess.run([sys.argv[1], '--rate', '1MiB'], input=b'x' * 1000,\n\
                 \x20   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n\
                 print(r.returncode, r.stderr)",
                shape,
            ])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&python.stdout), "0 b''\n");
    }
    if installed("node") {
        let node = std::process::Command::new("node")
            .args([
                "-e",
                "const r = require('child_process').spawnSync(process.argv[1], ['--rate', '1MiB'],\n\
                 \x20 {input: 'x'.repeat(1000), stdio: ['pipe', 'ignore', 'pipe']});\n\
                 console.log(r.status, JSON.stringify(r.stderr.toString()))",
                shape,
            ])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&node.stdout),
            "0 \"\"\n",
            "{}",
            String::from_utf8_lossy(&node.stderr)
        );
    }
}

#[test]
fn a_file_a_flag_names_that_cannot_be_read_is_an_io_failure_and_a_bad_one_bad_usage() {
    let scratch = Scratch::new("unreadable-flag-files");
    let missing = scratch.path().join("missing");
    let missing = missing.to_str().unwrap();
    let not_a_trace = scratch.file("trace", b"soon\n");
    let not_a_trace = not_a_trace.to_str().unwrap();
    for (args, code, said) in [
        (
            vec!["--trace", missing],
            1,
            format!("shape: --trace {missing}: No such file or directory"),
        ),
        (
            vec!["--rate-file", missing],
            1,
            format!("shape: --rate-file {missing}: No such file or directory"),
        ),
        (
            vec![missing],
            1,
            format!("shape: {missing}: No such file or directory"),
        ),
        (vec!["--trace", not_a_trace], 2, format!("{not_a_trace}:1")),
    ] {
        let ran = run(shape(&args), Stdio::null());
        assert_eq!(ran.code(), code, "{args:?}: {}", ran.stderr);
        assert!(ran.stderr.contains(&said), "{args:?}: {}", ran.stderr);
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    }
}

#[test]
fn link_list_refuses_whatever_follows_it() {
    for args in [
        &["--link", "list", "extra"][..],
        &["--link", "list", "--exec", "true"],
    ] {
        let ran = run(shape(args), Stdio::null());
        assert_eq!(ran.code(), 2, "{args:?}");
        assert!(
            ran.stderr
                .starts_with("shape: --link list prints the known links and takes nothing more"),
            "{}",
            ran.stderr
        );
        assert_eq!(ran.stderr.lines().count(), 1);
        assert!(ran.stdout.is_empty());
    }
}
