//! Real-time behaviour, with tolerances wide enough for a busy machine. The
//! exact timing is tested against a fake clock in the library.

use crate::harness::*;
use std::process::Stdio;
use std::time::Duration;

#[test]
fn two_mebibytes_at_one_mebibyte_per_second_take_about_two_seconds() {
    let dir = Scratch::new("timing");
    let input = dir.file("in", &random_bytes(2 << 20, 4));
    let run = run(
        shape([
            "--rate",
            "1MiB",
            "--burst",
            "64KiB",
            input.to_str().unwrap(),
        ]),
        Stdio::null(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(run.stdout.len(), 2 << 20);
    // (2 MiB - 64 KiB) / (1 MiB/s) = 1.94 s.
    assert!(
        run.elapsed >= Duration::from_millis(1900),
        "{:?}",
        run.elapsed
    );
    assert!(run.elapsed <= Duration::from_secs(3), "{:?}", run.elapsed);
}

#[test]
fn bit_rates_are_bits() {
    // 800 kbit/s is 100 kB/s: 150 kB with a 50 kB burst takes a second.
    let run = run_with_input(
        shape(["--rate", "800kbit", "--burst", "50KB"]),
        vec![7; 150_000],
        4096,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(
        run.elapsed >= Duration::from_millis(950),
        "{:?}",
        run.elapsed
    );
    assert!(run.elapsed <= Duration::from_secs(2), "{:?}", run.elapsed);
}
