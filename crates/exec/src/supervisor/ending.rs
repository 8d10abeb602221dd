//! How the command's end is known: its wait status once the pidfd says
//! it ended (reaped then), and whether processes it started still run
//! under the filter, which then go on unshaped.

use super::Supervisor;
use rustix::event::{PollFd, PollFlags};
use std::io;

/// How the command ended.
pub struct Exited {
    /// Its wait status, as the shell reads it: the exit code, or 128+N
    /// for signal N.
    pub code: i32,
    /// Processes it started still run (and are no longer shaped).
    pub outlived: bool,
}

impl Supervisor<'_> {
    /// The command's status, if it has ended (it is then reaped).
    pub(super) fn reap(&mut self) -> io::Result<Option<i32>> {
        let pid = rustix::process::Pid::from_raw(self.child.0);
        let status = rustix::process::waitpid(pid, rustix::process::WaitOptions::NOHANG)?;
        Ok(status.and_then(|(_, status)| {
            status
                .exit_status()
                .or_else(|| status.terminating_signal().map(|signal| 128 + signal))
        }))
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
