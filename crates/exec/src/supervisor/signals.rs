//! Signals for held callers: a thread held in a shaped call that has a
//! signal to handle is answered EINTR, as the kernel ends a blocking call,
//! so that the command's handlers (Ctrl-C in Python, say) run. The kernel
//! tells the supervisor nothing of a caller's signals, so each held
//! caller's /proc status is looked at every [`SIGNAL_LOOK`].

use super::{Supervisor, Way};
use crate::call::{Call, Transfer};
use crate::kernel::Response;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// How often a held call looks whether its thread has a signal to
/// handle: the call is then answered EINTR, as a blocking call would be.
pub(super) const SIGNAL_LOOK: Duration = Duration::from_millis(50);

/// When the held callers were last looked at, and their status files.
#[derive(Default)]
pub(super) struct Looks {
    looked: u64,
    /// Each held caller's /proc status, opened once: a path lookup for
    /// every look was an eighth of shape's CPU with 50 callers held, and
    /// reading an open one costs its text only.
    status: HashMap<u32, File>,
    /// Read into, kept to reuse its memory.
    text: Vec<u8>,
}

impl Looks {
    /// Whether thread `tid` has a pending signal that it neither blocks
    /// nor ignores, and catches: one its handler should run for now.
    fn has_signal_to_handle(&mut self, tid: u32) -> bool {
        let file = match self.status.entry(tid) {
            std::collections::hash_map::Entry::Occupied(file) => file.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                match File::open(format!("/proc/{tid}/status")) {
                    Ok(file) => entry.insert(file),
                    Err(_) => return false,
                }
            }
        };
        self.text.resize(4096, 0);
        let mut filled = 0;
        // The text is made anew for each read from offset 0, and given
        // whole if it fits: a read that leaves room is the end of it.
        loop {
            let room = self.text.len() - filled;
            match file.read_at(&mut self.text[filled..], filled as u64) {
                Ok(n) if n < room => {
                    filled += n;
                    break;
                }
                Ok(n) => filled += n,
                // The thread is gone: its number, if it comes back, is
                // another thread's, to be opened anew.
                Err(_) => {
                    self.status.remove(&tid);
                    return false;
                }
            }
            self.text.resize(filled * 2, 0);
        }
        signal_to_handle(&self.text[..filled])
    }
}

/// Whether a /proc status text says a signal is pending that is neither
/// blocked nor ignored, and caught. One pass over its lines as bytes, up
/// to the last mask it needs: this runs for every held caller twenty
/// times a second.
fn signal_to_handle(status: &[u8]) -> bool {
    let [mut pending, mut blocked, mut caught] = [0u64; 3];
    for line in status.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let value = || {
            std::str::from_utf8(&line[colon + 1..])
                .ok()
                .and_then(|text| u64::from_str_radix(text.trim(), 16).ok())
                .unwrap_or(0)
        };
        match &line[..colon] {
            b"SigPnd" | b"ShdPnd" => pending |= value(),
            b"SigBlk" => blocked = value(),
            b"SigCgt" => {
                caught = value();
                break;
            }
            _ => {}
        }
    }
    pending & !blocked & caught != 0
}

impl Supervisor<'_> {
    /// Answers EINTR to held calls whose thread has a signal to handle,
    /// looking at most every [`SIGNAL_LOOK`].
    pub(super) fn interrupt_signalled(&mut self) {
        let now = self.now();
        let looks = &mut self.looks;
        if self.held.is_empty() {
            looks.status.clear();
            return;
        }
        if now < looks.looked + SIGNAL_LOOK.as_nanos() as u64 {
            return;
        }
        looks.looked = now;
        let signalled: Vec<usize> = self
            .held
            .iter()
            .filter(|(_, held)| looks.has_signal_to_handle(held.notification.tid))
            .map(|(key, _)| key)
            .collect();
        // Threads no longer held are let go (a thread ended, its number
        // may come back as another's).
        let held: HashSet<u32> = self.held.iter().map(|(_, h)| h.notification.tid).collect();
        looks.status.retain(|tid, _| held.contains(tid));
        for key in signalled {
            let way = match &self.held[key].call {
                Call::Transfer(Transfer { way, .. }) | Call::Coarse { way, .. } => *way,
                Call::SpliceOut { .. } => Way::Down,
                _ => Way::Up,
            };
            self.refund(key, way, 0);
            let held = self.release(key);
            self.respond(&held.notification, Response::Error(libc::EINTR));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_is_to_handle_when_pending_caught_and_not_blocked() {
        let status = |pending: &str, shared: &str, blocked: &str, caught: &str| {
            format!(
                "Name:\tpython3\nSigQ:\t0/1\nSigPnd:\t{pending}\nShdPnd:\t{shared}\n\
                 SigBlk:\t{blocked}\nSigIgn:\t0000000000000000\nSigCgt:\t{caught}\n"
            )
        };
        let int = "0000000000000002";
        let none = "0000000000000000";
        let to_handle = |text: String| signal_to_handle(text.as_bytes());
        assert!(to_handle(status(none, int, none, int)));
        assert!(to_handle(status(int, none, none, int)));
        assert!(!to_handle(status(none, int, int, int)), "blocked");
        assert!(!to_handle(status(none, int, none, none)), "not caught");
        assert!(!to_handle(status(none, none, none, int)), "none pending");
    }

    #[test]
    fn a_thread_with_nothing_pending_has_no_signal_to_handle_read_again_and_again() {
        let mut looks = Looks::default();
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        assert!(!looks.has_signal_to_handle(tid));
        assert!(!looks.has_signal_to_handle(tid), "from the file kept open");
        assert_eq!(looks.status.len(), 1);
        assert!(!looks.has_signal_to_handle(u32::MAX), "no such thread");
    }
}
