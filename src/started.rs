//! What the process was handed before Rust's runtime touched it: whether
//! standard output was open at all.
//!
//! When a program starts with fd 0, 1 or 2 closed (`shape >&-`), Rust's
//! runtime opens /dev/null read-write in its place before `main`, so that
//! a later file cannot land on a standard descriptor by accident. From
//! `main` that replacement cannot be told from a /dev/null the caller chose
//! on purpose (Python's `subprocess.DEVNULL` and libuv open it read-write
//! too), so the one sound way is to look before the runtime does: a
//! constructor runs from the ELF `.init_array`, ahead of C's `main` and so
//! of Rust's start-up.

use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

// SAFETY: the constructor runs before `main`, where only what needs no
// runtime may be used: it makes one system call and stores one atomic, no
// allocation, no locks, no std I/O.
#[ctor::ctor(unsafe)]
fn look_at_standard_output() {
    // SAFETY: fcntl(F_GETFD) on a bare number reads nothing of ours and
    // changes nothing, whether or not the descriptor is open; a descriptor
    // that may be closed cannot be a `BorrowedFd`, hence libc. It fails
    // with EBADF if and only if fd 1 is closed.
    let closed = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
    STDOUT_CLOSED_AT_START.store(closed, Ordering::Relaxed);
}

/// True if and only if standard output was closed when shape was started
/// (as by `shape >&-`), whatever the runtime put there since.
pub fn stdout_was_closed() -> bool {
    STDOUT_CLOSED_AT_START.load(Ordering::Relaxed)
}
