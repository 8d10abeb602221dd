//! Output is byte-for-byte the input: through stdin, several files and `-`,
//! unlimited and at a rate, whatever the sizes of the pieces it arrives in.

use crate::harness::*;
use std::process::Stdio;

const LEN: usize = 50_000_000;

#[test]
fn fifty_megabytes_through_stdin_unlimited_in_odd_pieces() {
    let data = random_bytes(LEN, 1);
    for piece in [1_048_573, 65_536, 4_093] {
        let run = run_with_input(shape(["--progress", "none"]), data.clone(), piece);
        assert_eq!(run.code(), 0, "{}", run.stderr);
        assert!(
            run.stdout == data,
            "{} bytes differ after pieces of {piece}",
            run.stdout.len()
        );
        assert_eq!(run.stderr, "");
    }
}

#[test]
fn fifty_megabytes_through_stdin_at_a_rate() {
    let data = random_bytes(LEN, 2);
    // Fast enough to finish quickly, slow enough that the bucket runs dry
    // and the chunk size is the rate's, not the maximum.
    let run = run_with_input(
        shape(["--rate", "200MiB", "--burst", "1MiB"]),
        data.clone(),
        100_003,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(run.stdout == data);
}

#[test]
fn several_files_and_dash_arrive_in_order() {
    let dir = Scratch::new("files");
    let parts: Vec<Vec<u8>> = (0..4)
        .map(|i| random_bytes(LEN / 4 + i * 7, 10 + i as u64))
        .collect();
    let paths: Vec<_> = (0..3)
        .map(|i| dir.file(&format!("part{i}"), &parts[i]))
        .collect();
    let stdin_file = dir.file("stdin", &parts[3]);
    let expected: Vec<u8> = [&parts[0], &parts[3], &parts[1], &parts[2]]
        .into_iter()
        .flatten()
        .copied()
        .collect();
    for rate in ["unlimited", "300MiB"] {
        let [a, b, c] = [0, 1, 2].map(|i| paths[i].to_str().unwrap());
        let stdin = std::fs::File::open(&stdin_file).unwrap();
        let run = run(shape(["--rate", rate, a, "-", b, c]), Stdio::from(stdin));
        assert_eq!(run.code(), 0, "{}", run.stderr);
        assert!(run.stdout == expected, "at {rate}");
    }
}

#[test]
fn small_rates_with_tiny_chunks_lose_nothing() {
    let data = random_bytes(30_000, 3);
    let run = run_with_input(
        shape(["--rate", "100KiB", "--burst", "7"]),
        data.clone(),
        333,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(run.stdout == data);
}
