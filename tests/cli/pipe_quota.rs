//! A proxy run as an ordinary user, whose pipes share the kernel's quota
//! of pipe pages (`/proc/sys/fs/pipe-user-pages-soft`): its pipes stay
//! within it, none shrunk to the two pages the kernel gives past it, and
//! what finds no pipe is copied, every byte in order.

use crate::harness::*;
use crate::proxy::{MIB, Proxy, echo, round_trip, server};
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The pipes process `pid` holds now: their sizes in bytes, each read
/// through one of the process's descriptors for it (a pipe has two).
fn pipe_sizes(pid: u32) -> Vec<usize> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut pipes = std::collections::BTreeMap::new();
    for fd in fds.flatten() {
        if let Ok(to) = std::fs::read_link(fd.path()) {
            let to = to.to_string_lossy().into_owned();
            if to.starts_with("pipe:") {
                pipes.entry(to).or_insert(fd.path());
            }
        }
    }
    pipes
        .values()
        .filter_map(|path| std::fs::File::open(path).ok())
        .filter_map(|pipe| rustix::pipe::fcntl_getpipe_size(pipe.as_fd()).ok())
        .collect()
}

#[test]
fn a_user_past_the_pipe_quota_keeps_whole_pipes_and_passes_every_byte() {
    let quota: usize = std::fs::read_to_string("/proc/sys/fs/pipe-user-pages-soft")
        .ok()
        .and_then(|pages| pages.trim().parse().ok())
        .unwrap_or(0);
    let root = rustix::process::geteuid().is_root();
    if !available(
        root && installed("setpriv"),
        "setpriv as root, to run shape as uid 65534",
        "run the tests as root",
    ) || !available(
        quota > 0,
        "a soft quota of pipe pages",
        "set fs.pipe-user-pages-soft",
    ) {
        return;
    }
    // 48 connections echoing 4 MiB each through a delay of 100 ms hold a
    // delay's worth each way: far more than 64 MiB of pipes of 1 MiB.
    let mut command = Command::new("setpriv");
    command.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"]);
    command.arg(env!("CARGO_BIN_EXE_shape"));
    let proxy = Proxy::start_with(command, &server(echo), &["--delay", "100ms"]);
    let pid = proxy.child.id();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || {
            let (mut most, mut least) = (0, usize::MAX);
            while !done.load(Ordering::Relaxed) {
                let sizes = pipe_sizes(pid);
                most = most.max(sizes.iter().sum::<usize>());
                least = sizes.into_iter().fold(least, usize::min);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            (most, least)
        })
    };
    let echoes: Vec<_> = (0..48u64)
        .map(|i| {
            let address = proxy.address.clone();
            std::thread::spawn(move || {
                let data = random_bytes(4 * MIB, 640 + i);
                round_trip(&address, data.clone()) == data
            })
        })
        .collect();
    let whole = echoes
        .into_iter()
        .map(|echo| echo.join().unwrap())
        .filter(|&same| same)
        .count();
    done.store(true, Ordering::Relaxed);
    let (most, least) = watcher.join().unwrap();
    assert_eq!(whole, 48, "every echo whole and in order");
    assert!(most > 0, "the proxy spliced through pipes of its own");
    // Loops that take a last pipe at once may pass the quota by a pipe
    // each, as the kernel lets them.
    let slack = 4 * 256 * 4096;
    assert!(
        most <= quota * 4096 + slack,
        "{most} bytes of pipes, over the quota of {quota} pages"
    );
    assert!(
        least >= 64 * 1024,
        "a pipe of {least} bytes: shrunk past the quota"
    );
}
