//! The splice path: shape's own pipe (the "hand") where a chunk waits
//! between two splice(2) calls, so that its bytes never enter user space,
//! and the pipes on either side grown to hold a whole chunk.

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::pipe::{PipeFlags, SpliceFlags};
use shape_leaves::chunk::MAX_CHUNK;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

/// shape's own pipe, where a chunk waits between two splices.
pub(super) struct Hand {
    pub(super) read: OwnedFd,
    pub(super) write: OwnedFd,
    pub(super) capacity: usize,
}

impl Hand {
    pub(super) fn new() -> io::Result<Hand> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
        // The default 64 KiB would cap chunks below MAX_CHUNK.
        let capacity = rustix::pipe::fcntl_setpipe_size(&write, MAX_CHUNK)
            .or_else(|_| rustix::pipe::fcntl_getpipe_size(&write))?;
        Ok(Hand {
            read,
            write,
            capacity,
        })
    }
}

/// splice(2) of up to `len` bytes, retried when interrupted and waiting
/// when a non-blocking end is not ready. Zero means end of input.
pub(super) fn splice(from: impl AsFd, to: impl AsFd, len: usize) -> Result<usize, Errno> {
    loop {
        match rustix::pipe::splice(&from, None, &to, None, len, SpliceFlags::MOVE) {
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => {
                let mut fds = [
                    PollFd::new(&from, PollFlags::IN),
                    PollFd::new(&to, PollFlags::OUT),
                ];
                match rustix::event::poll(&mut fds, None) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(err) => return Err(err),
                }
            }
            done => return done,
        }
    }
}

/// Grows `end` to hold a whole chunk if it is a pipe smaller than that
/// (the default is 64 KiB), so that a chunk crosses it in one splice and
/// one wake-up rather than two: at 200 MiB/s this halves the splices and
/// timed waits. Anything else, or a refusal (a user over the kernel's pipe
/// quota), is left as it is.
pub(super) fn grow_pipe(end: impl AsFd) {
    // F_GETPIPE_SZ fails on anything but a pipe.
    if rustix::pipe::fcntl_getpipe_size(&end).is_ok_and(|size| size < MAX_CHUNK) {
        let _ = rustix::pipe::fcntl_setpipe_size(&end, MAX_CHUNK);
    }
}
