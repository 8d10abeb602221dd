//! Bad input: one line naming the flag and the value, status 2, no panic.
//! And the help and version a user reaches for first.

use crate::harness::*;
use std::process::Stdio;

/// Runs shape with `flag value` and checks the usage error.
fn refused(flag: &str, value: &str) {
    refused_as(flag, flag, value);
}

/// Runs shape with `given value` and checks the usage error names `flag`.
fn refused_as(given: &str, flag: &str, value: &str) {
    let run = run(shape([given, value]), Stdio::null());
    let context = format!("{flag} {value:?}: {}", run.stderr);
    assert_eq!(run.code(), 2, "{context}");
    assert_eq!(run.stderr.lines().count(), 1, "{context}");
    assert!(run.stderr.starts_with("shape: "), "{context}");
    assert!(run.stderr.contains(flag), "{context}");
    // Control characters escaped as JSON escapes them.
    let escaped = serde_json::to_string(value).unwrap();
    assert!(
        run.stderr
            .contains(&format!("'{}'", escaped.trim_matches('"'))),
        "{context}"
    );
    assert!(!run.stderr.contains("panicked"), "{context}");
    assert!(run.stdout.is_empty(), "{context}");
}

/// Malformed for every kind of value.
const MALFORMED: &[&str] = &[
    "", " ", "-1", "-0", "+5", "abc", "1e6", "1E3", "nan", "NaN", "inf", "-inf", "1..5", "1.2.3",
    ".", "5x", "5 zb", "0x10", "1,000", "1_000", "５", "\u{1}", "5\nMiB", "10%", "5MiB5", "MiB",
    "1/2",
];

#[test]
fn malformed_rates_are_refused() {
    let rate_only = [
        "0",
        "0k",
        "0.0",
        "0.5",
        "5Mb",
        "5kb/s",
        "5MBps",
        "5Mbps/s",
        "200TiB",
        "999999999999999999999T",
        "unlimitedd",
        "5/s/s",
    ];
    for value in MALFORMED.iter().chain(&rate_only) {
        refused("--rate", value);
    }
    refused_as("-L", "--rate", "0");
    refused_as("-r", "--rate", "1 Mb");
}

#[test]
fn malformed_bursts_are_refused() {
    let burst_only = [
        "0",
        "0k",
        "1.5",
        "5MiB/s",
        "5Mbit",
        "99999999999T",
        "18446744073709551616",
        "5EiB",
    ];
    for value in MALFORMED.iter().chain(&burst_only) {
        refused("--burst", value);
    }
}

#[test]
fn malformed_sizes_are_refused() {
    let size_only = [
        "1.5",
        "5MiB/s",
        "5Mbit",
        "99999999999T",
        "18446744073709551616",
        "1 kbps",
    ];
    for value in MALFORMED.iter().chain(&size_only) {
        refused("--size", value);
        refused("--stop-after", value);
    }
}

#[test]
fn malformed_intervals_are_refused() {
    let interval_only = [
        "0",
        "0s",
        "5ms",
        "2h",
        "1 fortnight",
        "soon",
        "0.001",
        "-5s",
        "1s2",
        "9999999999999999999999s",
    ];
    for value in MALFORMED.iter().chain(&interval_only) {
        refused("--interval", value);
    }
}

#[test]
fn malformed_delays_and_buffers_are_refused() {
    let delay_only = [
        "2h",
        "1h 1s",
        "100",
        "0.5",
        "-5ms",
        "soon",
        "9999999999999999999999s",
    ];
    for value in MALFORMED.iter().chain(&delay_only) {
        refused("--delay", value);
        refused("--jitter", value);
    }
    for value in MALFORMED
        .iter()
        .chain(&["0", "0k", "1.5", "5MiB/s", "5EiB"])
    {
        refused("--max-buffer", value);
    }
}

#[test]
fn jitter_without_a_delay_is_refused() {
    let run = run(shape(["--jitter", "10ms"]), Stdio::null());
    assert_eq!(run.code(), 2, "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert_says(&run.stderr, "--delay");
}

#[test]
fn unknown_flags_and_progress_modes_are_refused() {
    let run = run(shape(["--bogus"]), Stdio::null());
    assert_eq!(
        (run.code(), run.stderr.lines().count()),
        (2, 1),
        "{}",
        run.stderr
    );
    refused("--progress", "sometimes");
}

#[test]
fn help_shows_examples_and_exit_statuses() {
    let long = run(shape(["--help"]), Stdio::null());
    assert_eq!(long.code(), 0);
    let help = String::from_utf8(long.stdout).unwrap();
    for needle in [
        "--rate",
        "-L",
        "--burst",
        "Examples:",
        "Exit status:",
        "141",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
    // -h: the options under their headings, and where to read more.
    let short = run_with_input(shape(["-h"]), Vec::new(), 1);
    let short = String::from_utf8(short.stdout).unwrap();
    for heading in [
        "Rate and burst:",
        "What is counted:",
        "Progress and stats:",
        "Sockets and proxy:",
        "Slow links and faults:",
        "Changing a running shape:",
        "Shares and fleets:",
        "toxiproxy's API:",
    ] {
        assert!(short.contains(heading), "-h lacks {heading}");
    }
    assert!(
        short
            .trim_end()
            .ends_with("remote control, shares and toxiproxy's API.")
    );
    assert!(short.lines().count() < help.lines().count());
    // At most 90 lines: the long help is --help.
    assert!(
        short.lines().count() <= 90,
        "-h is {} lines",
        short.lines().count()
    );
    let run = run(shape(["--version"]), Stdio::null());
    let version = String::from_utf8(run.stdout).unwrap();
    let plain = format!("shape {}\n", env!("CARGO_PKG_VERSION"));
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".git");
    if checkout.exists() {
        // Built from a checkout: the commit follows, as git abbreviates it.
        let commit = version
            .strip_prefix(&plain[..plain.len() - 1])
            .and_then(|rest| rest.strip_prefix(" ("))
            .and_then(|rest| rest.strip_suffix(")\n"))
            .unwrap_or_else(|| panic!("{version:?}"));
        assert!(
            commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{version:?}"
        );
    } else {
        assert_eq!(version, plain);
    }
}

#[test]
fn a_huge_value_is_quoted_back_cut_short_on_one_line() {
    let huge = "a".repeat(10_000);
    for args in [
        vec!["--share".to_string(), huge.clone()],
        vec!["--rate".to_string(), format!("5{huge}")],
    ] {
        let run = run(shape(&args), Stdio::null());
        assert_eq!(run.code(), 2);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(run.stderr.len() < 400, "{} bytes", run.stderr.len());
        assert_says(&run.stderr, &format!("{}...'", "a".repeat(76)));
    }
}

#[test]
fn records_counted_get_examples_in_records_not_bytes() {
    for (args, examples) in [
        (
            ["--lines", "--rate", "5x"],
            "(e.g. 2, 0.5, 30/min, 1/5s, unlimited)",
        ),
        (["--null", "--burst", "5x"], "(e.g. 1, 10, 1000)"),
        (["--lines", "--slice", "9x"], "(e.g. 7, 1KiB, 1KiB:512)"),
    ] {
        let run = run(shape(args), Stdio::null());
        assert_eq!(run.code(), 2);
        assert!(
            run.stderr.ends_with(&format!("{examples}\n")),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(run.stderr.matches("e.g.").count(), 1, "{}", run.stderr);
    }
}

#[test]
fn a_unit_split_from_its_number_is_a_usage_error_unless_it_names_a_file() {
    for (args, hint) in [
        (&["--rate", "5", "MiB"][..], "--rate 5MiB"),
        (&["--burst", "64", "k", "--rate", "1MiB"], "--burst 64k"),
        (&["--stop-after", "1", "Mbit"], "--stop-after 1Mbit"),
        (&["--rate", "2", "MiB/s"], "--rate 2MiB/s"),
    ] {
        let run = run_with_input(shape(args), b"never copied".to_vec(), 100);
        assert_eq!(run.code(), 2, "{args:?}: {}", run.stderr);
        assert_eq!(
            run.stderr,
            format!("shape: did you mean {hint}? (a space split the number from its unit)\n")
        );
        assert!(run.stdout.is_empty());
    }
    // A file that is there is an input, whatever its name.
    let dir = Scratch::new("unit-named-file");
    dir.file("MiB", b"M");
    let mut command = shape(["--rate", "5", "MiB"]);
    command.current_dir(dir.path());
    let run = run_with_input(command, Vec::new(), 100);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(run.stdout, b"M");
}

#[test]
fn a_flag_without_its_value_says_what_it_takes_and_a_typo_what_was_meant() {
    for (flag, example) in [
        ("--rate", "5MiB"),
        ("--burst", "64k"),
        ("--listen", "localhost:8080"),
        ("--remote", "share:backups"),
    ] {
        let run = run(shape([flag]), Stdio::null());
        assert_eq!(run.code(), 2, "{flag}: {}", run.stderr);
        assert!(
            run.stderr.contains("it needs a value (e.g. ") && run.stderr.contains(example),
            "{flag}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("expected one of"), "{}", run.stderr);
    }
    let run = run(shape(["--rat", "5"]), Stdio::null());
    assert_eq!(run.code(), 2);
    assert_eq!(
        run.stderr,
        "shape: unexpected argument '--rat' found; a similar argument exists: '--rate'\n"
    );
    // A carriage return in the argument does not break the line (found
    // by fuzzing).
    let odd = crate::harness::run(shape(["--bo\rgus"]), Stdio::null());
    assert_eq!(odd.code(), 2);
    assert_eq!(
        odd.stderr,
        "shape: unexpected argument '--bo\\rgus' found\n"
    );
}

#[test]
fn every_example_a_refusal_shows_is_taken() {
    let run = run(shape(["--rate", "30/min"]), Stdio::null());
    assert_eq!(run.code(), 2);
    let examples = run
        .stderr
        .split("(e.g. ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("examples")
        .to_string();
    for example in examples.split(", ") {
        let taken = run_with_input(shape(["--rate", example]), b"x".to_vec(), 1);
        assert_eq!(taken.code(), 0, "--rate {example}: {}", taken.stderr);
    }
}

#[test]
fn a_burst_without_a_rate_is_said_to_limit_nothing() {
    let run = run_with_input(shape(["--burst", "1MiB"]), b"passes".to_vec(), 100);
    assert_eq!(run.code(), 0);
    assert_eq!(run.stdout, b"passes");
    assert_eq!(
        run.stderr,
        "shape: --burst 1MiB limits nothing without a rate (--rate, or later --remote PID --rate)\n"
    );
}

#[test]
fn a_burst_too_small_for_the_rate_is_said_with_the_least_that_holds_it() {
    let run = run_with_input(
        shape(["--rate", "100MiB", "--burst", "1k"]),
        b"passes".to_vec(),
        100,
    );
    assert_eq!(run.code(), 0);
    assert_eq!(run.stdout, b"passes");
    assert_eq!(
        run.stderr,
        "shape: --burst 1k is small for the rate: chunks of at most 512 B at 100.00 MiB/s are \
         204800 a second, more than shape can wake for: the rate may not be reached (a burst of \
         20.48 KiB or more holds it)\n"
    );
    let fine = run_with_input(
        shape(["--rate", "100MiB", "--burst", "1MiB"]),
        b"x".to_vec(),
        1,
    );
    assert_eq!(fine.stderr, "");
}
