//! splice(2) and the pipes it needs, for every part of shape that moves
//! bytes without taking them into user memory: a pipe of shape's own,
//! made as large as asked where the system allows ([`Pipe`]), a pipe
//! given to shape grown the same way ([`grow`]), and the two ways to
//! splice: at once ([`splice_now`]) or waiting until both ends are ready
//! ([`splice_waiting`]). Neither end is ever at an offset: pipes and
//! sockets have none, and a file moves from where it is.

use crate::pipe_quota::{self, PipePages};
use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::pipe::{PipeFlags, SpliceFlags};
use std::io;
use std::os::fd::{AsFd, OwnedFd};

/// A pipe of shape's own, closed on exec, made to hold a size asked for,
/// or less where a user's quota of pipe pages is filling
/// ([`pipe_quota`](crate::pipe_quota)). None is made where less than a
/// default pipe would be had: the bytes are better copied.
pub struct Pipe {
    pub read: OwnedFd,
    pub write: OwnedFd,
    /// What it holds, in bytes: the size asked, or what the system gave
    /// instead.
    pub size: usize,
    /// Its pages, counted against the quota while it lives.
    _held: PipePages,
}

impl Pipe {
    /// A blocking pipe asked to hold `size` bytes.
    pub fn new(size: usize) -> io::Result<Pipe> {
        Pipe::sized(size, PipeFlags::CLOEXEC)
    }

    /// A non-blocking pipe asked to hold `size` bytes.
    pub fn nonblocking(size: usize) -> io::Result<Pipe> {
        Pipe::sized(size, PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)
    }

    /// A pipe made with `flags`, asked to hold `size` bytes or what the
    /// quota grants, or keeping what it has.
    fn sized(size: usize, flags: PipeFlags) -> io::Result<Pipe> {
        let spent = || io::Error::other("the user's quota of pipe pages is spent");
        let asked = pipe_quota::grant(size).ok_or_else(spent)?;
        let (read, write) = rustix::pipe::pipe_with(flags)?;
        let size = rustix::pipe::fcntl_setpipe_size(&write, asked)
            .or_else(|_| rustix::pipe::fcntl_getpipe_size(&write))?;
        let held = PipePages::take(size, asked).ok_or_else(spent)?;
        Ok(Pipe {
            read,
            write,
            size,
            _held: held,
        })
    }
}

/// Grows `end` to hold `size` bytes if it is a pipe smaller than that.
/// Anything else, or a refusal (a user over the kernel's quota of pipe
/// pages), is left as it is.
pub fn grow(end: impl AsFd, size: usize) {
    // F_GETPIPE_SZ fails on anything but a pipe.
    if rustix::pipe::fcntl_getpipe_size(&end).is_ok_and(|has| has < size) {
        let _ = rustix::pipe::fcntl_setpipe_size(&end, size);
    }
}

/// One splice(2) of up to `len` bytes that does not wait for a pipe
/// (`SPLICE_F_NONBLOCK`), nor for the other end where that end is
/// non-blocking: `Errno::AGAIN` where it would have to. Retried when
/// interrupted. Zero means the end of the input.
pub fn splice_now(from: impl AsFd, to: impl AsFd, len: usize) -> Result<usize, Errno> {
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    loop {
        match rustix::pipe::splice(&from, None, &to, None, len, flags) {
            Err(Errno::INTR) => {}
            done => return done,
        }
    }
}

/// splice(2) of up to `len` bytes, retried when interrupted and waiting
/// when a non-blocking end is not ready. Zero means the end of the
/// input.
pub fn splice_waiting(from: impl AsFd, to: impl AsFd, len: usize) -> Result<usize, Errno> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_pipe_holds_what_was_asked_and_grow_enlarges_only_a_smaller_pipe() {
        let pipe = Pipe::nonblocking(1 << 19).unwrap();
        let size = |end| rustix::pipe::fcntl_getpipe_size(end).unwrap();
        assert_eq!(pipe.size, 1 << 19);
        assert_eq!(size(pipe.write.as_fd()), 1 << 19);
        grow(&pipe.write, 1 << 16);
        assert_eq!(
            size(pipe.write.as_fd()),
            1 << 19,
            "a larger pipe is left as it is"
        );
        let (read, _write) = rustix::pipe::pipe().unwrap();
        grow(&read, 1 << 19);
        assert_eq!(size(read.as_fd()), 1 << 19);
        // Not a pipe: nothing is done, and nothing fails.
        let (socket, _) = UnixStream::pair().unwrap();
        grow(&socket, 1 << 19);
    }

    #[test]
    fn splice_now_says_again_where_splice_waiting_waits_for_the_input() {
        let (mut writer, from) = UnixStream::pair().unwrap();
        from.set_nonblocking(true).unwrap();
        let pipe = Pipe::nonblocking(1 << 16).unwrap();
        assert_eq!(splice_now(&from, &pipe.write, 100), Err(Errno::AGAIN));
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            writer.write_all(b"spliced").unwrap();
        });
        assert_eq!(splice_waiting(&from, &pipe.write, 100), Ok(7));
        sender.join().unwrap();
        let (to, mut reader) = UnixStream::pair().unwrap();
        assert_eq!(splice_now(&pipe.read, &to, 100), Ok(7));
        drop(to);
        let mut got = String::new();
        reader.read_to_string(&mut got).unwrap();
        assert_eq!(got, "spliced");
    }
}
