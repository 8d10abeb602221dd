//! How the command's end is known: its wait status once its reaper says
//! it, and whether processes it started still run under the filter,
//! whose network calls fail once shape has gone.

use super::Supervisor;
use rustix::event::{PollFd, PollFlags};
use std::io;

/// How the command ended.
pub struct Exited {
    /// Its wait status, as the shell reads it: the exit code, or 128+N
    /// for signal N.
    pub code: i32,
    /// Processes it started still run: once shape has gone, their
    /// network calls fail (ENOSYS) and their connections through shape
    /// are closed.
    pub outlived: bool,
}

impl Supervisor<'_> {
    /// The command's status, if it has ended (its reaper has reaped it).
    pub(super) fn reap(&mut self) -> io::Result<Option<i32>> {
        self.reaper.ended()
    }

    /// Lets the reaper go: what the command started and left still runs,
    /// as under a shell. (A supervisor dropped without this, on an
    /// error, takes them all along: the reaper kills them.)
    pub fn leave(self) {
        self.reaper.leave();
    }

    /// Ends every process the command started and left, as when shape
    /// dies: for a shape told to end (SIGINT, SIGTERM, SIGHUP), as
    /// `timeout` ends its command's whole group.
    pub fn end_all(self) {
        self.reaper.end_all();
    }

    /// Whether processes the command started still run under the filter:
    /// the listener hangs up once none does.
    pub(super) fn outlived(&self) -> bool {
        let mut look = [PollFd::new(&self.listener, PollFlags::empty())];
        let wait = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        let _ = rustix::event::poll(&mut look, Some(&wait));
        !look[0].revents().contains(PollFlags::HUP)
    }
}
