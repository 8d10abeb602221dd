//! Local state that something else broke: a share file written over, cut
//! short or filled with noise while shapes use it, a full disk under the
//! control directory, and noise sent as control messages. Each ends in one
//! line and a status within a second or two, never a spin, a hang or a
//! bare signal death.

use crate::harness::*;
use rustix::process::Signal;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the cell's generation word lies in a share file: after the
/// header's cache line and the cache line of tokens spent.
const GENERATION_AT: u64 = 128;

/// Writes over the generation of the share file at `path`, in place,
/// with one that no slot holds.
fn write_over_the_generation(path: &std::path::Path) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&0xdead_beef_u32.to_ne_bytes(), GENERATION_AT)
        .unwrap();
}

/// Starts a shape on share `name` that copies /dev/zero at 1 MiB/s, and
/// waits until it has passed some bytes.
fn copying_on(runtime: &Runtime, name: &str) -> Running {
    let shape = runtime.start(["--share", name, "--rate", "1MiB", "--progress", "none"]);
    let started = Instant::now();
    wait_until("bytes to pass", || {
        shape.bytes_between(started - Duration::from_secs(1), Instant::now()) > 0
    });
    shape
}

/// Waits up to `most` for `shape` to end by itself; kills it and fails if
/// it does not.
fn ends_within(mut shape: Running, most: Duration) -> (std::process::ExitStatus, String) {
    let ended = exit_within(&mut shape.child, most);
    let (status, _, stderr) = shape.finish();
    assert!(
        ended.is_some(),
        "still running after {most:?}; stderr: {stderr}"
    );
    (status, stderr)
}

#[test]
fn a_share_written_over_while_in_use_stops_the_copy_with_one_line_naming_it() {
    let runtime = Runtime::new("damage-written-over");
    let shape = copying_on(&runtime, "corr");
    let path = runtime.share_file("corr");
    write_over_the_generation(&path);
    let (status, stderr) = ends_within(shape, Duration::from_secs(5));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "shape: share corr: {} was written over while in use and holds no readable \
             settings: stopped; end the shapes on it and run 'shape --share corr --reset'\n",
            path.display()
        )
    );
    // The others that come to it are told at once.
    let started = Instant::now();
    let status = run(
        runtime.shape(["--share", "corr", "--status"]),
        Stdio::null(),
    );
    let remote = run(
        runtime.shape(["--remote", "share:corr", "--rate", "2MiB"]),
        Stdio::null(),
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    for refused in [status, remote] {
        assert_eq!(refused.code(), 1);
        assert!(
            refused
                .stderr
                .ends_with("holds a corrupt bucket; remove it with 'shape --share corr --reset'\n"),
            "{}",
            refused.stderr
        );
    }
}

#[test]
fn a_proxy_on_a_share_written_over_stops_with_the_same_line() {
    let runtime = Runtime::new("damage-proxy");
    let (_closed, port) = refusing_port();
    let upstream = format!("127.0.0.1:{port}");
    let mut command = runtime.shape(["--listen", "127.0.0.1:0", "--connect", &upstream]);
    command.args(["--share", "prox", "--rate", "1MiB", "--progress", "none"]);
    let proxy = Listening::start(command, Stdio::piped());
    let path = runtime.share_file("prox");
    write_over_the_generation(&path);
    // The proxy looks at its bucket when anything happens: a client.
    let _client = std::net::TcpStream::connect(&proxy.address);
    let stderr = proxy.wait_for_stderr("--reset");
    assert_says(
        &stderr,
        &format!(
            "shape: share prox: {} was written over while in use",
            path.display()
        ),
    );
    let (status, _) = proxy.finish();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn a_command_s_link_on_a_share_written_over_ends_shape_through_its_exit_and_leaves_no_control_file()
{
    // The relay that carries the command's connection pays from the
    // share; its loop meets the damage, and shape ends as any mode ends
    // on a failure: one line, status 1, its control file removed.
    let runtime = Runtime::new("damage-exec-link");
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port().to_string();
    let received = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    {
        let received = received.clone();
        std::thread::spawn(move || {
            let (mut connection, _) = server.accept().unwrap();
            let mut buffer = [0u8; 65536];
            while let Ok(n @ 1..) = std::io::Read::read(&mut connection, &mut buffer) {
                received.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    let script = "import socket, sys\n\
                  s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n\
                  while True: s.sendall(b'x' * 65536)\n";
    let command = runtime.shape([
        "--share",
        "rel",
        "--rate",
        "1MiB",
        "--delay",
        "1ms",
        "--progress",
        "none",
        "--exec",
        "python3",
        "-c",
        script,
        &port,
    ]);
    let shape = Running::start(command, Stdio::null(), false);
    runtime.wait_registered(shape.pid);
    let pid = shape.pid;
    wait_until("bytes to reach the server through the link", || {
        received.load(std::sync::atomic::Ordering::Relaxed) > 0
    });
    let path = runtime.share_file("rel");
    write_over_the_generation(&path);
    let (status, stderr) = ends_within(shape, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_says(
        &stderr,
        &format!(
            "share rel: {} was written over while in use",
            path.display()
        ),
    );
    assert!(
        !runtime.control_dir().join(format!("{pid}.shape")).exists(),
        "the control file is left behind"
    );
}

#[test]
fn a_share_cut_short_while_in_use_ends_in_one_line_and_status_1_not_sigbus() {
    let runtime = Runtime::new("damage-cut-short");
    let shape = copying_on(&runtime, "cut");
    let path = runtime.share_file("cut");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    let (status, stderr) = ends_within(shape, Duration::from_secs(5));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "shape: share cut: {} was cut short while in use: stopped; end the shapes on it \
             and run 'shape --share cut --reset'\n",
            path.display()
        )
    );
}

/// Runs `shape ARGS` on 64 KiB of input with its runtime directory on a
/// filesystem that is full: a tmpfs mounted in a mount namespace of the
/// test's own. Returns the run, with what was left in the control
/// directory appended to its standard error after a line "left:". `None`
/// (said) where namespaces cannot be made, except under CI.
fn on_a_full_disk(name: &str, args: &[&str]) -> Option<(Run, String)> {
    if !mount_namespaces() {
        return None;
    }
    let scratch = Scratch::new(name);
    let input = scratch.file("in", &random_bytes(64 << 10, 7));
    // Mounted, then the runtime directory made, then filled to the brim.
    let script = r#"
        disk=$1; shift
        mount -t tmpfs -o size=64k tmpfs "$disk" || exit 99
        mkdir -m 700 "$disk/run"
        dd if=/dev/zero of="$disk/fill" bs=4k 2>/dev/null
        XDG_RUNTIME_DIR="$disk/run" "$@"
        status=$?
        echo left: >&2
        ls -A "$disk/run/shape" >&2
        exit $status
    "#;
    let disk = scratch.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let mut command = Command::new("unshare");
    command
        .args(["--map-root-user", "--mount", "sh", "-c", script, "sh"])
        .arg(&disk)
        .arg(env!("CARGO_BIN_EXE_shape"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let run = run(command, Stdio::from(std::fs::File::open(input).unwrap()));
    assert_ne!(run.status.code(), Some(99), "{}", run.stderr);
    Some((run, disk.display().to_string()))
}

#[test]
fn a_full_control_directory_turns_remote_control_off_and_the_copy_goes_on() {
    let Some((run, disk)) = on_a_full_disk("full-control", &["--rate", "10MiB"]) else {
        return;
    };
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(run.stdout, random_bytes(64 << 10, 7));
    let pid_file = regex_free_pid_file(&run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "shape: remote control is off: {disk}/run/shape/{pid_file}: No space left on device\n\
             left:\n"
        )
    );
}

/// The `PID.shape` named in a line of `stderr`.
fn regex_free_pid_file(stderr: &str) -> String {
    stderr
        .split('/')
        .find(|part| part.contains(".shape:"))
        .and_then(|part| part.split(':').next())
        .unwrap_or_else(|| panic!("no PID.shape named: {stderr}"))
        .to_string()
}

#[test]
fn a_share_made_on_a_full_disk_is_an_error_naming_the_file_and_leaves_nothing() {
    let Some((run, disk)) = on_a_full_disk("full-share", &["--share", "full", "--rate", "10MiB"])
    else {
        return;
    };
    assert_eq!(run.code(), 1, "{}", run.stderr);
    assert!(run.stdout.is_empty());
    assert_eq!(
        run.stderr,
        format!("shape: share full: {disk}/run/shape/full.share: No space left on device\nleft:\n")
    );
}

/// A share file with a sound header and `cell` after it.
fn share_file_holding(runtime: &Runtime, name: &str, cell: &[u8]) -> std::path::PathBuf {
    // A real header, from a share that shape made.
    let made = run(
        runtime.shape(["--share", "model", "--rate", "1MiB", "--stop-after", "1"]),
        Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
    );
    assert_eq!(made.code(), 0, "{}", made.stderr);
    let mut bytes = std::fs::read(runtime.share_file("model")).unwrap();
    bytes[64..64 + cell.len()].copy_from_slice(cell);
    let path = runtime.share_file(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    file.write_all(&bytes).unwrap();
    path
}

/// A cell of random words. Half of them are made to get past the first
/// check (the current slot's stamp matches the generation, and the burst
/// is in range), so that the checks behind it meet noise too; a quarter
/// hold settings a shape can go on from (made in the past, at a rate in
/// range, with no debt), and noise only in what any value may be.
fn noisy_cell(seed: u64) -> Vec<u8> {
    let mut words: Vec<u64> = random_bytes(8 * 34, seed)
        .chunks(8)
        .map(|word| u64::from_ne_bytes(word.try_into().unwrap()))
        .collect();
    // Layout: spent (a cache line: word 0, padding to word 7), the
    // generation (the low half of word 8), the claim (word 9), then four
    // slots of six words: stamp, t0, v0, rate, burst, paused.
    let [spent, generation] = [words[0], words[8] & 0xffff_ffff];
    let slot = 10 + 6 * (generation as usize % 4);
    if seed % 2 == 0 {
        words[slot] = generation;
        words[slot + 4] = 1 + words[slot + 4] % (1 << 30);
    }
    if seed % 4 == 0 {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let now = now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64;
        words[slot + 1] %= now;
        words[slot + 2] = spent;
        // Fixed point with 16 bits of fraction: up to 16 MiB/s.
        words[slot + 3] %= 1 << 40;
        words[slot + 5] = 0;
    }
    words.iter().flat_map(|word| word.to_ne_bytes()).collect()
}

#[test]
fn share_files_full_of_noise_are_used_or_refused_in_one_line_within_seconds() {
    let runtime = Runtime::new("damage-noise");
    let mut used = 0;
    for seed in 0..24 {
        let name = format!("noise{seed}");
        share_file_holding(&runtime, &name, &noisy_cell(seed));
        let started = Instant::now();
        let commands: [&[&str]; 3] = [
            &["--status"],
            &["--stop-after", "1k"],
            &["--rate", "1MiB", "--stop-after", "1k"],
        ];
        for args in commands {
            let mut command = runtime.shape(["--share", &name, "--progress", "none"]);
            command.args(args);
            let run = run(
                command,
                Stdio::from(std::fs::File::open("/dev/zero").unwrap()),
            );
            let code = run.code();
            assert!(
                code == 0 || (code == 1 && run.stderr.lines().count() == 1),
                "seed {seed}, {args:?}: status {code}, stderr {}",
                run.stderr
            );
            used += usize::from(code == 0);
        }
        let remote = run(
            runtime.shape(["--remote", &format!("share:{name}"), "--rate", "2MiB"]),
            Stdio::null(),
        );
        let code = remote.code();
        assert!(
            code == 0 || (code == 1 && remote.stderr.lines().count() == 1),
            "seed {seed}, --remote: status {code}, stderr {}",
            remote.stderr
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "seed {seed}: {:?}",
            started.elapsed()
        );
    }
    eprintln!("noise: {used} of 72 runs found a share they could use");
}

#[test]
fn noise_sent_as_control_messages_is_refused_and_the_copy_goes_on() {
    let runtime = Runtime::new("damage-messages");
    let mut shape = runtime.start(["--rate", "1MiB", "--burst", "64k", "--progress", "none"]);
    let dir = runtime.control_dir();
    for seed in 0..40u64 {
        let mut noise = random_bytes(1 + (seed as usize * 37) % 3000, seed);
        if seed % 2 == 0 {
            // Past the first line, to the parser.
            let mut message = b"shape-control 2\n".to_vec();
            message.append(&mut noise);
            noise = message;
        }
        std::fs::write(dir.join(format!("{}.req.noise{seed}", shape.pid)), noise).unwrap();
        if seed % 8 == 7 {
            shape.signal(Signal::USR2);
        }
    }
    shape.signal(Signal::USR2);
    // Every request read (and refused, and taken away) before the real one.
    let noise = |name: &str| name.contains(".req.noise");
    wait_until("the noise to be read", || {
        !std::fs::read_dir(&dir)
            .unwrap()
            .any(|entry| noise(&entry.unwrap().file_name().to_string_lossy()))
    });
    let answer = runtime.remote(shape.pid, ["--burst", "32k"]);
    let pid = shape.pid;
    assert!(
        shape.child.try_wait().unwrap().is_none(),
        "the shape ended on noise: {answer:?}"
    );
    let (_, _, stderr) = shape.stop();
    assert_eq!(answer.code(), 0, "{}", answer.stderr);
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        format!("shape {pid}: rate 1.00 MiB/s, burst 32.00 KiB\n")
    );
    assert_eq!(
        stderr
            .lines()
            .filter(|line| line.contains(".req.noise"))
            .count(),
        40,
        "one line per message: {stderr}"
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|name| name.contains(".req.")),
        "every request was taken away: {names:?}"
    );
}
