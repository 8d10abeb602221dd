//! Every byte that leaves is counted exactly once, whatever the output is:
//! the `--stats` line and the last JSON progress record both say exactly
//! what was written, on every output path (spliced or written from the
//! buffer, direct or through the delay line).

use crate::harness::*;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::process::Stdio;

const LEN: usize = 10_000_000;

/// The byte count that opens a `--stats` line (`shape: N bytes ...`).
fn stats_bytes(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|line| line.starts_with("shape: "))
        .unwrap_or_else(|| panic!("no stats line in {stderr}"));
    line["shape: ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count in {line}"))
}

/// The `bytes` of the last JSON progress record.
fn progress_bytes(stderr: &str) -> u64 {
    let last = stderr
        .lines()
        .rfind(|line| line.starts_with('{'))
        .unwrap_or_else(|| panic!("no progress record in {stderr}"));
    let record: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(record["done"], true, "{last}");
    record["bytes"].as_u64().unwrap()
}

/// Copies `input` to `output` with `extra` flags, and checks that the
/// count reported is `LEN`, the bytes written. Returns shape's stderr.
fn counted(name: &str, input: &std::path::Path, output: Stdio, extra: &[&str]) -> String {
    let mut command = shape(["--stats", "--progress", "json", "--interval", "1h"]);
    command.args(extra).arg(input);
    let run = run_into(command, output);
    assert_eq!(run.code(), 0, "{name}: {}", run.stderr);
    assert_eq!(
        stats_bytes(&run.stderr),
        LEN as u64,
        "{name}: {}",
        run.stderr
    );
    assert_eq!(
        progress_bytes(&run.stderr),
        LEN as u64,
        "{name}: {}",
        run.stderr
    );
    run.stderr
}

#[test]
fn the_count_is_what_was_written_on_every_kind_of_output() {
    let dir = Scratch::new("counting");
    let data = random_bytes(LEN, 60);
    let input = dir.file("in", &data);

    let plain = dir.path().join("plain");
    counted(
        "file",
        &input,
        Stdio::from(File::create(&plain).unwrap()),
        &[],
    );
    assert!(std::fs::read(&plain).unwrap() == data, "file");

    // A file opened for appending refuses splice: the chunk in hand then
    // goes out by write(2), and must be counted all the same.
    let appended = dir.file("appended", b"");
    let append = OpenOptions::new().append(true).open(&appended).unwrap();
    counted("appending file", &input, Stdio::from(append), &[]);
    assert!(std::fs::read(&appended).unwrap() == data, "appending file");

    counted(
        "/dev/null",
        &input,
        Stdio::from(OpenOptions::new().write(true).open("/dev/null").unwrap()),
        &[],
    );

    for (name, extra) in [
        ("pipe", &[][..]),
        ("pipe at a rate", &["--rate", "500MiB"][..]),
        ("delay line", &["--delay", "5ms"][..]),
    ] {
        let (mut read, write) = std::io::pipe().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            read.read_to_end(&mut got).unwrap();
            got
        });
        counted(name, &input, Stdio::from(write), extra);
        assert!(reader.join().unwrap() == data, "{name}");
    }

    let (mine, theirs) = UnixStream::pair().unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        (&mine).read_to_end(&mut got).unwrap();
        got
    });
    counted(
        "socket",
        &input,
        Stdio::from(std::os::fd::OwnedFd::from(theirs)),
        &[],
    );
    assert!(reader.join().unwrap() == data, "socket");
}
