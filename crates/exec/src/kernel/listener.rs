//! The filter's listener: receiving a call, answering it, placing a
//! socket in the caller (`ADDFD`), and asking for one CPU in turn.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Asks the kernel to run the command and shape on one CPU in turn
/// when a call is handed over and answered (Linux 6.6), as a call does
/// in one process: a handover between two CPUs cost about 80 µs on a
/// virtual machine, against 4 µs on one. Older kernels refuse; calls
/// then cost more, and work the same.
pub fn wake_on_one_cpu(listener: BorrowedFd<'_>) -> bool {
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
    // SAFETY: the ioctl takes its flags by value.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        ) == 0
    }
}

/// A call the filter handed to shape.
#[derive(Debug, Clone, Copy)]
pub struct Notification {
    pub id: u64,
    /// The thread that made it.
    pub tid: u32,
    pub nr: i64,
    pub args: [u64; 6],
}

/// How a call is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// The kernel carries it out as made.
    Continue,
    /// It returns this (a count).
    Value(i64),
    /// It fails with this errno.
    Error(i32),
}

/// Waits for the next call (the listener is readable when one waits).
pub fn receive(listener: BorrowedFd<'_>) -> io::Result<Notification> {
    // SAFETY: an all-zero seccomp_notif is valid, as the ioctl requires.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: the ioctl writes one seccomp_notif into `notif`.
        let r = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut notif as *mut libc::seccomp_notif,
            )
        };
        if r == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(Notification {
        id: notif.id,
        tid: notif.pid,
        nr: i64::from(notif.data.nr),
        args: notif.data.args,
    })
}

/// Answers call `id`. Fails with ENOENT if the caller is gone (killed).
pub fn respond(listener: BorrowedFd<'_>, id: u64, response: Response) -> io::Result<()> {
    let (val, error, flags) = match response {
        Response::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Response::Value(n) => (n, 0, 0),
        Response::Error(errno) => (0, -errno, 0),
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: the ioctl reads one seccomp_notif_resp.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut libc::seccomp_notif_resp,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// True if call `id` still waits for its answer: its caller has not been
/// killed. What was read from the caller's memory is only trusted after.
pub fn still_waiting(listener: BorrowedFd<'_>, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads one u64.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        ) == 0
    }
}

/// Puts a copy of `fd` into the process of call `id`, at descriptor `at`
/// if given (which must be free), else at its lowest free one, closed on
/// exec if `cloexec`, and answers the call with its number (Linux 5.14).
pub fn place(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    at: Option<u32>,
    cloexec: bool,
) -> io::Result<i32> {
    let mut flags = libc::SECCOMP_ADDFD_FLAG_SEND as u32;
    if at.is_some() {
        flags |= libc::SECCOMP_ADDFD_FLAG_SETFD as u32;
    }
    let mut addfd = libc::seccomp_notif_addfd {
        id,
        flags,
        srcfd: fd.as_raw_fd() as u32,
        newfd: at.unwrap_or(0),
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one seccomp_notif_addfd.
    let placed = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &mut addfd as *mut libc::seccomp_notif_addfd,
        )
    };
    if placed < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(placed)
}
