//! The options that shape what is forwarded and what is shown.

use crate::harness::*;
use std::process::Stdio;

#[test]
fn stop_after_forwards_exactly_that_many_bytes() {
    for (limit, bytes) in [("1", 1), ("1000", 1000), ("1MiB", 1 << 20), ("0", 0)] {
        let run = run(
            shape(["--stop-after", limit]),
            Stdio::from(std::fs::File::open("/dev/urandom").unwrap()),
        );
        assert_eq!(run.code(), 0, "{}", run.stderr);
        assert_eq!(run.stdout.len(), bytes, "--stop-after {limit}");
    }
}

#[test]
fn json_progress_lines_parse_and_end_at_the_total() {
    let data = random_bytes(3 << 20, 5);
    let args = [
        "--rate",
        "4MiB",
        "--burst",
        "256KiB",
        "--progress",
        "json",
        "--interval",
        "100ms",
        "--size",
        "3MiB",
    ];
    let run = run_with_input(shape(args), data.clone(), 65_536);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(run.stdout == data);
    let records: Vec<serde_json::Value> = run
        .stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect();
    assert!(records.len() >= 3, "{}", run.stderr);
    for record in &records {
        for field in ["bytes", "elapsed", "rate", "limit", "total", "eta", "done"] {
            assert!(record.get(field).is_some(), "{field} missing from {record}");
        }
        assert_eq!(record["limit"], 4.0 * 1024.0 * 1024.0);
    }
    let last = records.last().unwrap();
    assert_eq!(last["bytes"], data.len());
    assert_eq!(last["done"], true);
    let bytes: Vec<u64> = records
        .iter()
        .map(|r| r["bytes"].as_u64().unwrap())
        .collect();
    assert!(bytes.windows(2).all(|w| w[0] <= w[1]), "{bytes:?}");
}

#[test]
fn the_bar_goes_to_stderr_only() {
    let data = random_bytes(1 << 20, 6);
    let run = run_with_input(
        shape(["--progress", "bar", "--rate", "4MiB", "--interval", "50ms"]),
        data.clone(),
        8192,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(run.stdout == data, "the bar leaked into the data");
    assert!(
        run.stderr.contains("KiB") && run.stderr.contains("limit 4.00 MiB/s"),
        "{}",
        run.stderr
    );
}

#[test]
fn stats_print_one_summary_line_and_quiet_silences_everything() {
    let data = random_bytes(100_000, 7);
    let run = run_with_input(shape(["--stats"]), data.clone(), 4096);
    assert_eq!(run.code(), 0);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].starts_with("shape: 100000 bytes (97.66 KiB) in ")
            && lines[0].ends_with(" no limit"),
        "{}",
        lines[0]
    );
    let quiet = run_with_input(
        shape(["--stats", "--quiet", "--progress", "bar"]),
        data,
        4096,
    );
    assert_eq!(quiet.stderr, "");
}

#[test]
fn auto_progress_is_silent_when_stderr_is_not_a_terminal() {
    let run = run_with_input(shape(["--rate", "10MiB"]), vec![1; 500_000], 4096);
    assert_eq!(run.code(), 0);
    assert_eq!(run.stderr, "");
}

#[test]
fn every_rate_form_reaches_the_bucket_as_the_right_bytes_per_second() {
    let table: &[(&str, f64)] = &[
        ("1", 1.0),
        ("1k", 1024.0),
        ("1m", 1_048_576.0),
        ("5MiB", 5_242_880.0),
        ("5MiB/s", 5_242_880.0),
        ("1.5KiB", 1536.0),
        ("1.5M/s", 1_572_864.0),
        ("2G", 2_147_483_648.0),
        ("1GiB/s", 1_073_741_824.0),
        ("1T", 1_099_511_627_776.0),
        ("1TiB", 1_099_511_627_776.0),
        ("10KB", 10_000.0),
        ("10kB/s", 10_000.0),
        ("10MB/s", 10_000_000.0),
        ("2GB", 2e9),
        ("1TB", 1e12),
        ("8bit", 1.0),
        ("100kbit", 12_500.0),
        ("100kbps", 12_500.0),
        ("40Mbit", 5_000_000.0),
        ("40Mbit/s", 5_000_000.0),
        ("1Gbps", 125_000_000.0),
        ("10Gbit", 1.25e9),
        ("1Tbps", 1.25e11),
    ];
    for &(rate, bytes_per_sec) in table {
        let run = run(
            shape(["--rate", rate, "--progress", "json", "--stop-after", "0"]),
            Stdio::null(),
        );
        assert_eq!(run.code(), 0, "{rate}: {}", run.stderr);
        let last: serde_json::Value =
            serde_json::from_str(run.stderr.lines().last().unwrap()).unwrap();
        assert_eq!(last["limit"], bytes_per_sec, "{rate}");
    }
}

/// The figure before `/s (limit` in the last bar drawn, in bytes per
/// second.
fn last_bar_rate(stderr: &str) -> f64 {
    let end = stderr.rfind("/s (limit").expect("a bar with a limit");
    let mut words = stderr[..end].rsplit(' ');
    let unit = match words.next() {
        Some("B") => 1.0,
        Some("KiB") => 1024.0,
        Some("MiB") => 1_048_576.0,
        other => panic!("unexpected unit {other:?} in {stderr}"),
    };
    words.next().unwrap().parse::<f64>().unwrap() * unit
}

#[test]
fn the_bar_and_the_stats_do_not_make_the_limit_look_broken() {
    // 2 MiB at 1 MiB/s with the default burst of 102.4 KiB: the average
    // since the start is above the limit, the recent rate is not.
    let data = random_bytes(2 << 20, 8);
    let run = run_with_input(
        shape([
            "--rate",
            "1MiB",
            "--stats",
            "--progress",
            "bar",
            "--interval",
            "100ms",
        ]),
        data.clone(),
        65_536,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(run.stdout == data);
    let rate = last_bar_rate(&run.stderr);
    assert!(
        (0.9 * 1_048_576.0..=1.1 * 1_048_576.0).contains(&rate),
        "the bar ended at {rate} B/s: {}",
        run.stderr
    );
    let stats = run.stderr.lines().last().unwrap();
    assert!(
        stats.starts_with("shape: 2097152 bytes (2.00 MiB) in ")
            && stats.contains(": average ")
            && stats.ends_with(" MiB/s, limit 1.00 MiB/s plus a 102.40 KiB burst"),
        "{stats}"
    );
}

#[test]
fn numeric_progress_prints_percentages_as_pv_n_does_and_counts_without_a_total() {
    let data = random_bytes(1 << 20, 7);
    for (args, last) in [
        (&["-n", "--size", "1MiB"][..], 100),
        (&["--progress", "numeric"][..], 1 << 20),
    ] {
        let mut all = vec!["--rate", "4MiB", "--burst", "256KiB", "--interval", "50ms"];
        all.extend_from_slice(args);
        let run = run_with_input(shape(all), data.clone(), 65_536);
        assert_eq!(run.code(), 0, "{args:?}: {}", run.stderr);
        assert!(run.stdout == data);
        let numbers: Vec<u64> = run
            .stderr
            .lines()
            .map(|line| {
                line.parse()
                    .unwrap_or_else(|_| panic!("{line:?} in {}", run.stderr))
            })
            .collect();
        assert!(numbers.len() >= 2, "{args:?}: {}", run.stderr);
        assert!(numbers.windows(2).all(|w| w[0] <= w[1]), "{numbers:?}");
        assert_eq!(*numbers.last().unwrap(), last, "{args:?}");
    }
}

#[test]
fn pv_s_display_switches_are_taken_as_pv_takes_them() {
    let data = random_bytes(300_000, 9);
    let scratch = Scratch::new("pv-switches");
    let file = scratch.file("data", &data);
    let file = file.to_str().unwrap();
    // -N names the bar, -f forces it where standard error is no
    // terminal, -t and -a choose the time and the average; without -p
    // the bar itself is not drawn, though the size is known.
    let named = run(
        shape(["-L", "1m", "-N", "backup", "-t", "-a", "-f", file]),
        Stdio::null(),
    );
    assert_eq!(named.code(), 0, "{}", named.stderr);
    assert!(named.stdout == data);
    let last = named
        .stderr
        .rsplit('\r')
        .find(|frame| frame.contains("backup: "))
        .unwrap();
    assert!(
        last.contains(" avg ") && last.contains("00:00:0"),
        "{last:?}"
    );
    assert!(!last.contains("%"), "{last:?}");
    // -p draws the bar and percentage of a known size.
    let percent = run(shape(["-L", "1m", "-p", "-f", file]), Stdio::null());
    assert!(percent.stderr.contains("] 100%"), "{}", percent.stderr);
    // -W: nothing is drawn until a byte has passed, and none does.
    let waiting = run(shape(["-L", "1m", "-W", "-f"]), Stdio::null());
    assert_eq!(waiting.code(), 0);
    assert_eq!(waiting.stderr, "");
}

#[test]
fn where_pvs_letters_mean_something_else_here_one_line_says_what_to_write() {
    for (args, said) in [
        (
            &["-pterb"][..],
            "shape: -pterb is pv's: here -r is the rate and -b the burst",
        ),
        (&["-rb"], "write --progress bar"),
        (&["-pteb"], "write -pte"),
        (
            &["-c"],
            "shape: -c is pv's, for several pvs in one pipeline",
        ),
    ] {
        let run = run(shape(args), Stdio::null());
        assert_eq!(run.code(), 2, "{args:?}");
        assert!(run.stderr.contains(said), "{args:?}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    }
}
