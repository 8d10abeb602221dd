//! Records mode: `--lines` and `--null` pace records, each leaving whole;
//! rates per any span of time; values read as records; byte units refused.
//! Timing is loose here; the exact pacing is tested against a fake clock
//! beside the records pump.

use crate::harness::*;
use rustix::process::Signal;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The lines of `count` numbered records ending in `end`.
fn records(count: usize, end: u8) -> Vec<u8> {
    let mut data = Vec::new();
    for i in 0..count {
        data.extend_from_slice(format!("record number {i:04}").as_bytes());
        data.push(end);
    }
    data
}

#[test]
fn lines_at_five_a_second_arrive_whole_a_fifth_of_a_second_apart() {
    let mut child = shape(["--lines", "--rate", "5", "--stats"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A fast producer: everything is there at once.
    let data = records(8, b'\n');
    child.stdin.take().unwrap().write_all(&data).unwrap();
    let stderr = drain(child.stderr.take().unwrap());
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut arrivals = Vec::new();
    let mut got = Vec::new();
    loop {
        let mut line = Vec::new();
        if lines.read_until(b'\n', &mut line).unwrap() == 0 {
            break;
        }
        arrivals.push(Instant::now());
        assert_eq!(line.last(), Some(&b'\n'), "a line left whole");
        got.extend_from_slice(&line);
    }
    assert!(child.wait().unwrap().success());
    assert!(got == data);
    // The burst is one line: the other seven follow at 5 a second. Each
    // gap is measured where the reader saw it, so allow for scheduling.
    let gaps: Vec<Duration> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
    let total = arrivals[7] - arrivals[0];
    assert!(
        (Duration::from_millis(1300)..Duration::from_millis(2500)).contains(&total),
        "7 lines at 5 a second took {total:?}: {gaps:?}"
    );
    assert!(
        gaps.iter().all(|&gap| gap >= Duration::from_millis(120)),
        "{gaps:?}"
    );
    let stats = String::from_utf8_lossy(&stderr.join().unwrap()).into_owned();
    assert!(
        stats.starts_with("shape: 8 lines in ")
            && stats
                .trim_end()
                .ends_with(", limit 5.00 lines/s plus a 1 line burst"),
        "{stats}"
    );
}

#[test]
fn nul_records_at_thirty_a_minute_stop_after_two() {
    let data = records(5, 0);
    let run = run_with_input(
        shape(["-0", "--rate", "30/min", "--stop-after", "2"]),
        data.clone(),
        7,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(run.stdout, records(2, 0));
    // The first from the burst of one, the second two seconds later.
    assert!(
        (Duration::from_millis(1900)..Duration::from_secs(4)).contains(&run.elapsed),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn an_unterminated_last_line_is_passed_on_and_counted() {
    let run = run_with_input(
        shape(["--lines", "--progress", "json", "--interval", "1h"]),
        b"first\nsecond\nno end".to_vec(),
        4,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(run.stdout, b"first\nsecond\nno end");
    let last: serde_json::Value = serde_json::from_str(run.stderr.lines().last().unwrap()).unwrap();
    assert_eq!(last["lines"], 3, "{last}");
    assert_eq!(last["limit"], serde_json::Value::Null);
    assert_eq!(last["done"], true);
}

#[test]
fn progress_counts_lines_toward_the_size_given() {
    let run = run_with_input(
        shape([
            "--lines",
            "--rate",
            "1000",
            "--burst",
            "10",
            "--size",
            "200",
            "--progress",
            "json",
            "--interval",
            "1h",
        ]),
        records(200, b'\n'),
        1000,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let last: serde_json::Value = serde_json::from_str(run.stderr.lines().last().unwrap()).unwrap();
    assert_eq!(last["lines"], 200, "{last}");
    assert_eq!(last["total"], 200);
    assert_eq!(last["limit"], 1000.0);
}

#[test]
fn byte_units_and_impossible_rates_are_usage_errors_naming_the_flag() {
    for (args, flag) in [
        (&["--lines", "--rate", "5MiB"][..], "--rate"),
        (&["--null", "--burst", "1k"][..], "--burst"),
        (&["--lines", "--size", "10k"][..], "--size"),
        (&["--lines", "--stop-after", "2MB"][..], "--stop-after"),
        (&["--lines", "--schedule", "0s=1MiB"][..], "--schedule"),
        (&["--null", "--lines"][..], "--lines"),
        (&["--rate", "0/min"][..], "--rate"),
        (&["--rate", "1/0s"][..], "--rate"),
        (&["--lines", "--rate", "1/100d"][..], "--rate"),
        (&["--rate", "0.5"][..], "--rate"),
    ] {
        assert_refused(shape(args), flag);
    }
}

#[test]
fn a_remote_change_of_a_lines_shape_is_read_in_lines() {
    let runtime = Runtime::new("records-remote");
    let running = runtime.start(["--lines", "--rate", "2"]);
    let answer = runtime.remote(running.pid, ["--rate", "30/min", "--burst", "3"]);
    let refused = runtime.remote(running.pid, ["--rate", "5MiB"]);
    let pid = running.pid;
    running.stop();
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        format!("shape {pid}: rate 30.00 lines/min, burst 3 lines\n")
    );
    assert_eq!(refused.code(), 1);
    assert!(
        refused
            .stderr
            .contains("refused: lines are counted, not bytes"),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_share_counts_one_thing_and_says_both() {
    let runtime = Runtime::new("records-share");
    let lines = runtime.start(["--share", "crawl", "--lines", "--rate", "50"]);
    let bytes = run(
        runtime.shape(["--share", "crawl", "--rate", "1MiB"]),
        Stdio::null(),
    );
    let status = run(
        runtime.shape(["--share", "crawl", "--status"]),
        Stdio::null(),
    );
    lines.stop();
    assert_eq!(bytes.code(), 1);
    assert_eq!(
        bytes.stderr,
        "shape: share crawl: it counts lines, and this shape counts bytes: a share counts one thing\n"
    );
    assert!(
        String::from_utf8_lossy(&status.stdout)
            .starts_with("share crawl: rate 50.00 lines/s, burst 1 line; in use "),
        "{status:?}"
    );
}

#[test]
fn a_signal_storm_loses_and_repeats_no_record() {
    let runtime = Runtime::new("records-storm");
    let file = runtime.0.file("rate", b"20000 100\n");
    let data = records(40_000, b'\n');
    let mut command = runtime.shape(["--lines", "--rate-file", file.to_str().unwrap()]);
    command.stdin(Stdio::piped());
    let mut shape = Running::start(command, Stdio::piped(), true);
    let feeder = shape.feed(&data, 3_331);
    runtime.wait_registered(shape.pid);
    let sent = shape.storm(&[Signal::HUP, Signal::USR2, Signal::USR1], 2000);
    feeder.join().unwrap();
    let (status, output, _) = shape.finish();
    assert!(status.success(), "{status:?}");
    assert!(sent > 300, "only {sent} signals were sent");
    assert!(
        output == data,
        "{} bytes out of {} after {sent} signals",
        output.len(),
        data.len()
    );
}
