//! Shape's copies of the command's sockets, where they cannot be taken
//! from it (a profile refuses `pidfd_getfd`, as Docker's default does
//! without CAP_SYS_PTRACE). Shape makes every IP socket of the command,
//! so it keeps a copy of each, placed high. A copy must not outlive the
//! command's own, or a closed listener would go on listening and a
//! closed connection would never end: at each close of a high descriptor,
//! and every [`COLLECT`] for processes that ended, the copies no process
//! of the command holds any more are let go.

use super::Supervisor;
use crate::call::Call;
use crate::kernel::{self, Notification, Response};
use shape_impair::faults::Way;
use std::collections::HashSet;
use std::time::Duration;

/// How often copies are looked over while there are any: a process that
/// ended held its sockets without a close.
pub(super) const COLLECT: Duration = Duration::from_secs(1);

impl Supervisor<'_> {
    /// Keeps copies of the command's sockets from now on.
    pub fn keep_copies(&mut self) {
        self.sockets.keep_copies();
        self.say_once(
            "copies",
            "shape: this system refuses pidfd_getfd (a container's seccomp profile): shape \
             keeps its own copy of each of the command's sockets, and a socket the command \
             received from elsewhere is not shaped",
        );
    }

    /// A `close` of a high descriptor, where copies are kept: let through,
    /// and the socket's copy let go unless the command holds it elsewhere.
    pub(super) fn close(&mut self, notification: &Notification) {
        let Notification { tid, args, .. } = *notification;
        let fd = args[0] as i32;
        let closed = rustix::fs::stat(format!("/proc/{tid}/fd/{fd}"))
            .ok()
            .map(|stat| (stat.st_dev, stat.st_ino));
        // Let go first: once the command's close is done, a port it
        // held is free for it to bind again.
        if let Some(closed) = closed
            && self.sockets.is_copied(&closed)
        {
            let process = kernel::thread_group(tid).unwrap_or(tid);
            self.collect(Some((process, fd)));
        }
        self.respond(notification, Response::Continue);
    }

    /// Lets go of every copy that no process of the command holds, the
    /// descriptor `closing` of a process (which is being closed) aside.
    pub(super) fn collect(&mut self, closing: Option<(u32, i32)>) {
        self.collected = self.now();
        if !self.sockets.has_copies() {
            return;
        }
        // Below the reaper: the command, and what it left to the reaper.
        let held = held_high(self.reaper.pid() as u32, self.base, closing);
        self.sockets.let_go_unless(|inode| held.contains(inode));
    }

    /// `call` as it can be carried out where only the command's sockets
    /// are copied: sendfile's file and splice's pipe cannot be taken, so
    /// those calls are paid for whole and let through (said once).
    pub(super) fn coarse_without_taking(&mut self, call: Call) -> Call {
        let coarse = match call {
            Call::SendFile { out, count, .. } => Call::Coarse {
                fd: out,
                way: Way::Up,
                length: Some(count),
            },
            Call::SpliceOut { fd, length, .. } => Call::Coarse {
                fd,
                way: Way::Down,
                length: Some(length),
            },
            call => return call,
        };
        self.say_once(
            "coarse",
            "shape: a sendfile or splice on a socket is paid for whole and let through, \
             without pidfd_getfd",
        );
        coarse
    }

    /// When copies are next looked over, if any are kept.
    pub(super) fn collect_at(&self) -> Option<u64> {
        (self.sockets.has_copies()).then(|| self.collected + COLLECT.as_nanos() as u64)
    }
}

/// The inodes at descriptors `base` or more of process `root` and its
/// descendants, but for `except` (a process and descriptor).
fn held_high(root: u32, base: u32, except: Option<(u32, i32)>) -> HashSet<(u64, u64)> {
    let mut held = HashSet::new();
    for process in descendants(root) {
        let Ok(entries) = std::fs::read_dir(format!("/proc/{process}/fd")) else {
            continue;
        };
        for entry in entries.flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            if fd < base as i32 || except == Some((process, fd)) {
                continue;
            }
            if let Ok(stat) = rustix::fs::stat(entry.path()) {
                held.insert((stat.st_dev, stat.st_ino));
            }
        }
    }
    held
}

/// Process `root` and every process descended from it, from /proc.
fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            Some((pid, parent(pid)?))
        })
        .collect();
    let mut found = vec![root];
    let mut at = 0;
    while at < found.len() {
        let parent = found[at];
        found.extend(
            parents
                .iter()
                .filter(|(_, of)| *of == parent)
                .map(|(pid, _)| *pid),
        );
        at += 1;
    }
    found
}

/// The parent of process `pid`, from its /proc stat.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name, in parentheses, may hold spaces: fields follow its end.
    let after = &stat[stat.rfind(')')? + 2..];
    after.split(' ').nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_process_and_its_children_are_found_with_what_they_hold_high() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let own = std::process::id();
        let found = descendants(own);
        assert_eq!(found[0], own);
        assert!(found.contains(&child.id()), "{found:?}");
        assert_eq!(parent(child.id()), Some(own));
        let _ = child.kill();
        let _ = child.wait();

        // A socket: an inode of its own.
        let file = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = file.as_raw_fd();
        let stat = rustix::fs::fstat(&file).unwrap();
        let inode = (stat.st_dev, stat.st_ino);
        assert!(held_high(own, fd as u32, None).contains(&inode));
        assert!(!held_high(own, fd as u32, Some((own, fd))).contains(&inode));
        assert!(!held_high(own, fd as u32 + 1_000_000, None).contains(&inode));
    }
}
