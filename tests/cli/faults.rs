//! Faults for tests in a pipe: slices, a cut-off with a slow close, lost
//! chunks and flipped bits, each said at the end, and all of it replayed
//! by seed. What the reader downstream sees is what is checked.

use crate::harness::*;
use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The number `shape: <what> N ...` says on stderr.
fn said(stderr: &str, what: &str) -> u64 {
    let at = stderr
        .find(what)
        .unwrap_or_else(|| panic!("no '{what}' in {stderr}"));
    stderr[at + what.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after '{what}' in {stderr}"))
}

#[test]
fn a_reader_that_keeps_up_sees_every_slice_on_its_own() {
    let data = random_bytes(140, 80);
    let mut shape = Running::start(
        shape(["--slice", "7", "--slice-pause", "15ms"]),
        Stdio::piped(),
        true,
    );
    let mut stdin = shape.child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, &data).unwrap();
    drop(stdin);
    let (status, output, stderr) = shape.finish_with_reads();
    assert!(status.success(), "{stderr}");
    assert!(output.0 == data, "byte-exact");
    assert_eq!(output.1.len(), 20, "{:?}", output.1);
    assert!(output.1.iter().all(|&n| n == 7), "{:?}", output.1);
}

#[test]
fn slices_vary_within_the_variation() {
    let data = random_bytes(20_000, 81);
    let run = run_with_input(
        shape(["--slice", "100:40", "--slice-pause", "1ms", "--seed", "5"]),
        data.clone(),
        20_000,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(run.stdout == data);
}

#[test]
fn a_cut_off_forwards_exactly_that_much_then_ends_after_the_slow_close() {
    let data = random_bytes(100_000, 82);
    let mut child = shape(["--cut-after", "1KiB", "--slow-close", "400ms"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut stdin, &data);
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut first = vec![0; 1024];
    stdout.read_exact(&mut first).unwrap();
    let last_byte = Instant::now();
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let closed = last_byte.elapsed();
    assert!(child.wait().unwrap().success());
    drop(feeder);
    assert!(rest.is_empty(), "{} bytes after the cut", rest.len());
    assert!(
        closed >= Duration::from_millis(350),
        "closed after {closed:?}"
    );
}

#[test]
fn flipped_bits_and_lost_chunks_are_counted_exactly_and_replayed_by_seed() {
    let data = random_bytes(2 << 20, 83);
    let corrupt = |seed: &str| {
        run_with_input(
            shape(["--corrupt", "0.001", "--seed", seed, "--stats"]),
            data.clone(),
            65_536,
        )
    };
    let first = corrupt("7");
    assert_eq!(first.code(), 0, "{}", first.stderr);
    assert_eq!(first.stdout.len(), data.len());
    let differing: u64 = first
        .stdout
        .iter()
        .zip(&data)
        .map(|(a, b)| u64::from((a ^ b).count_ones()))
        .sum();
    assert_eq!(said(&first.stderr, "corrupted "), differing);
    assert!((1500..2700).contains(&differing), "{differing} of 2 MiB");
    assert_says(&first.stderr, "; seed 7");
    assert!(corrupt("7").stdout == first.stdout, "the same seed");
    assert!(corrupt("8").stdout != first.stdout, "another seed");

    // Blocks of 1 KiB: some 2000, so that none lost at all is beyond
    // chance.
    let lossy = run_with_input(
        shape(["--drop", "10%", "--rate", "4MiB", "--stats"]),
        data.clone(),
        65_536,
    );
    assert_eq!(lossy.code(), 0, "{}", lossy.stderr);
    let lost = said(&lossy.stderr, "blocks (");
    assert_eq!(lossy.stdout.len() as u64, data.len() as u64 - lost);
    assert!(lost > 0, "{}", lossy.stderr);
    // A seed is drawn and said, so the run can be replayed.
    let seed = said(&lossy.stderr, "; seed ");
    assert_eq!(
        said(&lossy.stderr, "shape: seed "),
        seed,
        "said at the start too"
    );
    let replayed = run_with_input(
        shape([
            "--drop",
            "10%",
            "--rate",
            "4MiB",
            "--seed",
            &seed.to_string(),
        ]),
        data.clone(),
        65_536,
    );
    assert_eq!(replayed.code(), 0);
    assert_eq!(replayed.stdout.len(), lossy.stdout.len());
    assert!(
        replayed
            .stderr
            .starts_with(&format!("shape: seed {seed}\n")),
        "without --stats too: {}",
        replayed.stderr
    );
}

#[test]
fn without_faults_the_output_is_the_input() {
    let data = random_bytes(1 << 20, 84);
    let run = run_with_input(
        shape(["--seed", "1", "--rate", "100MiB"]),
        data.clone(),
        4096,
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(run.stdout == data);
    assert_eq!(run.stderr, "");
}

#[test]
fn bad_fault_values_are_usage_errors_naming_the_flag() {
    for (args, flag) in [
        (&["--slice", "0"][..], "--slice"),
        (&["--slice", "7:9"][..], "--slice"),
        (&["--drop", "1.5"][..], "--drop"),
        (&["--corrupt", "-1"][..], "--corrupt"),
        (&["--cut-after", "1x"][..], "--cut-after"),
        (&["--lines", "--cut-after", "1k"][..], "--cut-after"),
        (&["--slice-pause", "1s"][..], "--slice"),
    ] {
        assert_refused(shape(args), flag);
    }
}

#[test]
fn a_stall_forwards_that_much_then_keeps_the_output_open_and_silent() {
    let started = Instant::now();
    let mut shape = Running::start(
        shape(["--stall-after", "1KiB"]),
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
        false,
    );
    shape.wait_for_bytes(started, 1024);
    // Then open and silent for a while: the while is the subject.
    sleep_for(Duration::from_millis(500));
    let still_running = shape.child.try_wait().unwrap().is_none();
    let arrived = shape.bytes_between(
        Instant::now() - Duration::from_secs(60),
        Instant::now() + Duration::from_secs(60),
    );
    let (status, _, _) = shape.stop();
    assert!(still_running, "a stalled shape ended: {status:?}");
    assert_eq!(arrived, 1024, "exactly the bytes before the stall");
}

#[test]
fn a_small_loss_rate_loses_something_of_a_short_unlimited_stream_and_stats_say_it_apart() {
    let data = random_bytes(1 << 20, 41);
    let lossy = run_with_input(
        shape(["--drop", "1%", "--seed", "3", "--stats"]),
        data.clone(),
        65_536,
    );
    assert_eq!(lossy.code(), 0, "{}", lossy.stderr);
    let lost = said(&lossy.stderr, "blocks (");
    assert!(lost > 0 && lost % 1024 == 0, "{}", lossy.stderr);
    assert_eq!(lossy.stdout.len() as u64, (1 << 20) - lost);
    let delivered = lossy.stdout.len();
    assert_says(
        &lossy.stderr,
        &format!(
            "shape: {delivered} bytes ({}) delivered and {lost} bytes dropped in ",
            human(delivered)
        ),
    );
}

/// Bytes as shape shows them beside a count, in KiB here.
fn human(bytes: usize) -> String {
    format!("{:.2} KiB", bytes as f64 / 1024.0)
}

/// Waits up to ten seconds for a stalled `child` to end by itself.
fn ended_within_ten_seconds(child: &mut std::process::Child) -> std::process::ExitStatus {
    exit_within(child, Duration::from_secs(10)).expect("a stalled shape whose reader left went on")
}

#[test]
fn a_stalled_copy_ends_as_by_sigpipe_when_its_reader_leaves() {
    use std::os::unix::process::ExitStatusExt;
    // Whether the input is still open (a pipe nobody writes to) or flowing.
    let inputs = [
        Stdio::piped(),
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
    ];
    for (round, input) in inputs.into_iter().enumerate() {
        let mut child = shape(["--stall-after", "200ms", "--progress", "none"])
            .stdin(input)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Past the stall's 200 ms: when is the subject.
        sleep_for(Duration::from_millis(500));
        drop(child.stdout.take());
        let status = ended_within_ten_seconds(&mut child);
        assert_eq!(status.signal(), Some(13), "round {round}: {status:?}");
    }
}

#[test]
fn a_stalled_copy_to_a_socket_ends_when_the_peer_closes() {
    use std::os::unix::process::ExitStatusExt;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let mut child = shape(["--connect", &address, "--stall-after", "1KiB"])
        .stdin(Stdio::from(std::fs::File::open("/dev/zero").unwrap()))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    let mut got = [0; 1024];
    peer.read_exact(&mut got).unwrap();
    drop(peer);
    let status = ended_within_ten_seconds(&mut child);
    assert_eq!(status.signal(), Some(13), "{status:?}");
}

#[test]
fn a_reset_after_bytes_reaches_a_tcp_peer_as_a_reset() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let data = random_bytes(100_000, 85);
    let dir = Scratch::new("reset");
    let input = std::fs::File::open(dir.file("in", &data)).unwrap();
    let mut child = shape(["--connect", &address, "--reset-after", "1000"])
        .stdin(Stdio::from(input))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let mut buffer = [0; 4096];
    let outcome = loop {
        match peer.read(&mut buffer) {
            Ok(0) => break Ok(0),
            Ok(n) => got.extend_from_slice(&buffer[..n]),
            Err(err) => break Err(err),
        }
    };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    assert_eq!(got, data[..1000], "exactly the bytes before the reset");
    assert!(
        matches!(&outcome, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{outcome:?}"
    );
}

#[test]
fn a_reset_after_a_time_ends_shape_with_status_three_even_while_it_waits() {
    let mut child = shape(["--reset-after", "300ms"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Held open: shape waits for input when the reset comes.
    let _stdin = child.stdin.take();
    let started = Instant::now();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(stderr, "shape: reset, as --reset-after asked\n");
}

#[test]
fn a_reset_winds_the_run_up_as_any_end_does_stats_and_all() {
    let runtime = Runtime::new("reset-unwinds");
    let mut child = runtime
        .shape(["--reset-after", "300ms", "--stats", "--rate", "1MiB"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&[1; 1000]).unwrap();
    // Held open: shape waits for more input when the reset comes.
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(3), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(lines[0], "shape: reset, as --reset-after asked");
    assert!(
        lines[1].starts_with("shape: 1000 bytes (1000 B) in 0."),
        "the run was wound up, --stats too: {stderr}"
    );
    // Gone, as a run that ends does: nothing of it is left behind.
    let left: Vec<_> = std::fs::read_dir(runtime.control_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_copy_takes_live_changes_of_the_faults_it_can_and_refuses_the_rest() {
    let runtime = Runtime::new("copy-remote");
    let zeros = vec![0; 600_000];
    let mut shape = Running::start(
        runtime.shape(["--rate", "300KiB", "--drop", "0"]),
        Stdio::piped(),
        true,
    );
    runtime.wait_registered(shape.pid);
    let started = Instant::now();
    let feeder = shape.feed(&zeros, 4096);
    shape.wait_for_bytes(started, 64 << 10);
    let flip = runtime.remote(shape.pid, ["--corrupt", "1"]);
    assert_eq!(flip.code(), 0, "{}", flip.stderr);
    let stall = runtime.remote(shape.pid, ["--stall-after", "1KiB"]);
    assert_eq!(stall.code(), 1, "{}", stall.stderr);
    assert_says(&stall.stderr, "a proxy changes them live");
    feeder.join().unwrap();
    let (status, output, stderr) = shape.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(output.len(), zeros.len());
    assert!(output[..50_000].iter().all(|&b| b == 0), "clean before");
    assert!(output[550_000..].iter().all(|&b| b != 0), "flipped after");
    let flipped = output.iter().filter(|&&b| b != 0).count() as u64;
    assert_eq!(said(&stderr, "corrupted "), flipped);

    let plain = runtime.start(["--rate", "1MiB"]);
    let refused = runtime.remote(plain.pid, ["--corrupt", "1"]);
    assert_eq!(refused.code(), 1);
    assert_says(&refused.stderr, "--drop 0");
}
