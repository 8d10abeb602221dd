//! The reaper: a process of shape's own, forked before the command and
//! its parent, so that nothing the command starts outlives a shape that
//! dies. It is a child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever
//! the command starts and leaves, at any depth, becomes its child, not
//! init's. It reaps them all, tells shape the command's wait status, and
//! watches a pipe whose only write end shape holds:
//! - shape says goodbye on it (a byte) when it ends as it should: the
//!   reaper leaves, and what still runs goes on, as under a shell;
//! - the pipe ends without one when shape died, by any signal, SIGKILL
//!   included: the reaper kills every process below it, then leaves.
//!
//! The command itself dies with the reaper (`PR_SET_PDEATHSIG`), so even
//! a reaper killed at once with shape (`pkill`) takes the command along.
//!
//! The reaper is a fork of a process with threads: like the command's
//! child before its exec, it makes only async-signal-safe system calls,
//! on memory made before the fork, and never returns.

use super::child::{KeptDescriptors, Program};
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, RawFd};

/// What the reaper tells shape, on its socket: a header, then a value.
#[repr(u32)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Said {
    /// The command was cloned: the value is its pid, and the message
    /// carries the filter's listener, if the child installed it.
    Started = 1,
    /// The clone of the command failed: the value is the errno.
    NotStarted = 2,
    /// The command ended: the value is its wait status.
    Ended = 3,
}

impl Said {
    pub(super) fn from_u32(word: u32) -> Option<Said> {
        [Said::Started, Said::NotStarted, Said::Ended]
            .into_iter()
            .find(|said| *said as u32 == word)
    }
}

/// The signals a reaper ignores: those a terminal, a shell or a user
/// sends to a whole process group or to every `shape` by name, which are
/// for shape and the command, not for it. (Ignored here, and given back
/// to the command as shape's caller left them.)
const IGNORED: [i32; 12] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGWINCH,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
];

/// The classic signals, whose dispositions a command inherits.
const CLASSIC: std::ops::RangeInclusive<i32> = 1..=31;

/// The reaper's side of [`super::spawn`]. Never returns.
///
/// # Safety
///
/// Only in the child of a fork (a clone without CLONE_VM or CLONE_FILES);
/// the pointers must stay valid (they do: the child's copy of the
/// parent's memory is never freed).
pub(super) unsafe fn reaper_runs(kept: KeptDescriptors, command: Program<'_>) -> ! {
    // SAFETY (the whole body): plain system calls on descriptors and
    // memory of this process, all async-signal-safe.
    unsafe {
        close_shapes_descriptors(&kept);
        // Shape's handlers are no use here (their descriptors are closed):
        // what shape's caller left ignored is kept for the command, the
        // rest goes back to the default, and the reaper ignores the
        // signals meant for others.
        let mut caller_ignored = [false; 32];
        for signal in CLASSIC {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = match IGNORED.contains(&signal) {
                true => libc::SIG_IGN,
                false => libc::SIG_DFL,
            };
            libc::sigaction(signal, &new, &mut old);
            caller_ignored[signal as usize] = old.sa_sigaction == libc::SIG_IGN;
        }
        // Every child's end wakes the reaper, on a signalfd.
        let mut chld: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_SETMASK, &chld, std::ptr::null_mut());
        let ended = libc::signalfd(-1, &chld, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 || ended < 0 {
            tell(
                kept.to_shape,
                Said::NotStarted,
                *libc::__errno_location(),
                None,
            );
            libc::_exit(1);
        }
        // The command's child makes no descriptor before the filter's
        // listener, which the kernel puts at the least free number.
        let listener_at = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 0);
        libc::close(listener_at);
        let reaper = libc::getpid();
        let flags = (libc::CLONE_FILES | libc::CLONE_VFORK | libc::SIGCHLD) as libc::c_ulong;
        let pid = libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) as i32;
        if pid == 0 {
            super::child::child_runs(&kept, &command, reaper, &caller_ignored);
        }
        if pid < 0 {
            tell(
                kept.to_shape,
                Said::NotStarted,
                *libc::__errno_location(),
                None,
            );
            libc::_exit(1);
        }
        // The command has run its exec, or ended: these were its.
        libc::close(kept.ready);
        libc::close(kept.failed);
        if is_seccomp_listener(listener_at) {
            tell(kept.to_shape, Said::Started, pid, Some(listener_at));
            libc::close(listener_at);
        } else {
            tell(kept.to_shape, Said::Started, pid, None);
        }
        watch(&kept, ended, pid);
    }
}

/// Reaps every child as it ends and tells shape the command's status,
/// until shape says goodbye (the reaper leaves) or dies (the reaper kills
/// every process below it first).
///
/// # Safety
///
/// In the reaper only.
unsafe fn watch(kept: &KeptDescriptors, ended: RawFd, command: i32) -> ! {
    // SAFETY (the whole body): system calls on the reaper's own
    // descriptors and memory.
    unsafe {
        loop {
            let mut look = [
                libc::pollfd {
                    fd: kept.life,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: ended,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            if libc::poll(look.as_mut_ptr(), 2, -1) < 0 {
                continue;
            }
            if look[1].revents != 0 {
                let mut drained = [0u8; 128];
                while libc::read(ended, drained.as_mut_ptr().cast(), drained.len()) > 0 {}
                loop {
                    let mut status = 0;
                    let pid = libc::waitpid(-1, &mut status, libc::WNOHANG);
                    if pid <= 0 {
                        break;
                    }
                    if pid == command {
                        tell(kept.to_shape, Said::Ended, status, None);
                    }
                }
            }
            if look[0].revents != 0 {
                let mut byte = 0u8;
                match libc::read(kept.life, (&raw mut byte).cast(), 1) {
                    1 => libc::_exit(0),
                    0 => {
                        kill_everything_below();
                        libc::_exit(0);
                    }
                    _ => {}
                }
            }
        }
    }
}

/// Kills every process below the reaper: its children, then what their
/// deaths leave to it, until it has none.
///
/// # Safety
///
/// In the reaper only.
unsafe fn kill_everything_below() {
    // SAFETY (the whole body): system calls on the reaper's own memory.
    unsafe {
        let mut path = [0u8; 64];
        let pid = libc::getpid();
        let mut at = put(&mut path, 0, b"/proc/self/task/");
        at = put_number(&mut path, at, pid as u64);
        put(&mut path, at, b"/children\0");
        loop {
            let file = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
            if file >= 0 {
                let mut text = [0u8; 4096];
                let n = libc::read(file, text.as_mut_ptr().cast(), text.len());
                libc::close(file);
                let mut child = 0i32;
                for &byte in text.iter().take(n.max(0) as usize) {
                    match byte {
                        b'0'..=b'9' => child = child * 10 + i32::from(byte - b'0'),
                        _ if child > 0 => {
                            libc::kill(child, libc::SIGKILL);
                            child = 0;
                        }
                        _ => {}
                    }
                }
            }
            // One child gone; its own are the reaper's now, and are read
            // with the next look. None left: done.
            if libc::waitpid(-1, std::ptr::null_mut(), 0) < 0
                && *libc::__errno_location() == libc::ECHILD
            {
                return;
            }
        }
    }
}

/// Whether `fd` is a seccomp filter's listener.
///
/// # Safety
///
/// In the reaper only.
unsafe fn is_seccomp_listener(fd: RawFd) -> bool {
    const LISTENER: &[u8] = b"anon_inode:seccomp notify";
    let mut path = [0u8; 64];
    let at = put(&mut path, 0, b"/proc/self/fd/");
    let at = put_number(&mut path, at, fd.max(0) as u64);
    put(&mut path, at, b"\0");
    let mut link = [0u8; 64];
    // SAFETY: a path ended by NUL and a buffer of its length.
    let n = unsafe { libc::readlink(path.as_ptr().cast(), link.as_mut_ptr().cast(), link.len()) };
    n >= 0 && &link[..n as usize] == LISTENER
}

/// Sends shape `said` and `value`, with descriptor `fd` if given,
/// through rustix's `sendmsg`, which builds the message on the stack.
///
/// # Safety
///
/// `to_shape` is a socket, and `fd` open.
unsafe fn tell(to_shape: RawFd, said: Said, value: i32, fd: Option<RawFd>) {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut words = [0u8; 8];
    words[..4].copy_from_slice(&(said as u32).to_ne_bytes());
    words[4..].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: open descriptors, as the caller promises, borrowed for this
    // call alone.
    let (to_shape, fd) = unsafe {
        (
            BorrowedFd::borrow_raw(to_shape),
            fd.map(|fd| [BorrowedFd::borrow_raw(fd)]),
        )
    };
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if let Some(fd) = &fd {
        control.push(SendAncillaryMessage::ScmRights(fd));
    }
    let words = [IoSlice::new(&words)];
    while let Err(rustix::io::Errno::INTR) =
        rustix::net::sendmsg(to_shape, &words, &mut control, SendFlags::NOSIGNAL)
    {}
}

/// Closes every descriptor of shape's that is closed on exec, but those
/// the reaper keeps: its socket, pipes and epolls are shape's alone.
///
/// # Safety
///
/// In the reaper only.
unsafe fn close_shapes_descriptors(kept: &KeptDescriptors) {
    let keep = [kept.life, kept.to_shape, kept.ready, kept.failed];
    // SAFETY (the whole body): system calls on the reaper's own
    // descriptors, read from its own /proc directory into its own memory.
    unsafe {
        let dir = libc::open(
            c"/proc/self/fd".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return;
        }
        let mut entries = [0u64; 512];
        loop {
            let n = libc::syscall(
                libc::SYS_getdents64,
                dir,
                entries.as_mut_ptr(),
                std::mem::size_of_val(&entries),
            );
            if n <= 0 {
                break;
            }
            let bytes = std::slice::from_raw_parts(entries.as_ptr().cast::<u8>(), n as usize);
            let mut at = 0;
            while at + 19 < bytes.len() {
                // struct linux_dirent64: ino (8), off (8), reclen (2),
                // type (1), then the name, ended by NUL.
                let length = u16::from_ne_bytes([bytes[at + 16], bytes[at + 17]]) as usize;
                let mut fd: i64 = -1;
                for &byte in &bytes[at + 19..(at + length).min(bytes.len())] {
                    match byte {
                        b'0'..=b'9' => fd = fd.max(0) * 10 + i64::from(byte - b'0'),
                        _ => break,
                    }
                }
                at += length.max(1);
                let fd = fd as RawFd;
                if fd < 0 || fd == dir || keep.contains(&fd) {
                    continue;
                }
                if libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC != 0 {
                    libc::close(fd);
                }
            }
        }
        libc::close(dir);
    }
}

/// Writes `text` into `buffer` at `at`; returns where it ends.
fn put(buffer: &mut [u8], at: usize, text: &[u8]) -> usize {
    let end = (at + text.len()).min(buffer.len());
    buffer[at..end].copy_from_slice(&text[..end - at]);
    end
}

/// Writes `number` in decimal into `buffer` at `at`; returns where it
/// ends.
fn put_number(buffer: &mut [u8], at: usize, number: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut left = number;
    let mut count = 0;
    loop {
        digits[19 - count] = b'0' + (left % 10) as u8;
        count += 1;
        left /= 10;
        if left == 0 {
            break;
        }
    }
    put(buffer, at, &digits[20 - count..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_written_without_allocating() {
        let mut path = [0u8; 32];
        let at = put(&mut path, 0, b"/proc/self/fd/");
        let at = put_number(&mut path, at, 1024);
        assert_eq!(&path[..at], b"/proc/self/fd/1024");
        assert_eq!(put_number(&mut path, 0, 0), 1);
        assert_eq!(path[0], b'0');
        // Never past the buffer.
        let mut short = [0u8; 4];
        assert_eq!(put(&mut short, 2, b"long"), 4);
    }

    #[test]
    fn every_word_the_reaper_says_reads_back() {
        for said in [Said::Started, Said::NotStarted, Said::Ended] {
            assert_eq!(Said::from_u32(said as u32), Some(said));
        }
        assert_eq!(Said::from_u32(0), None);
    }
}
