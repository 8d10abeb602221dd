//! The command's processes and threads by pidfd: taking a descriptor
//! from one (`pidfd_getfd`, where a profile allows it), signalling one,
//! and which process a thread belongs to.

use super::refused;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// A copy, in this process, of descriptor `fd` of the process of `pidfd`.
pub fn take_descriptor(pidfd: BorrowedFd<'_>, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd returns a new descriptor or -1.
    let taken = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if taken < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(taken as RawFd) })
}

/// Whether `pidfd_getfd` is refused here (a container's seccomp profile
/// refuses it as Docker's default does without CAP_SYS_PTRACE), asked of
/// shape's own process with a descriptor that is none.
pub fn taking_refused() -> bool {
    let Ok(own) = open_pidfd(std::process::id()) else {
        return false;
    };
    take_descriptor(own.as_fd(), -1).is_err_and(|err| refused(&err))
}

/// A pidfd for thread (or process) `tid`: the thread's own where the
/// kernel has them (6.9), else its process's.
pub fn open_pidfd(tid: u32) -> io::Result<OwnedFd> {
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    // SAFETY: pidfd_open returns a new descriptor or -1.
    let mut fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
    if fd < 0 {
        let tgid = thread_group(tid)?;
        // SAFETY: as above.
        fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) };
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The process that thread `tid` belongs to.
pub fn thread_group(tid: u32) -> io::Result<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Tgid"))
}

/// Sends `signal` to the process of `pidfd`.
pub fn signal_process(pidfd: BorrowedFd<'_>, signal: i32) -> io::Result<()> {
    // SAFETY: pidfd_send_signal with no siginfo.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
