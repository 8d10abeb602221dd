//! Bytes that cross a direction untouched, moved by splice(2): from one
//! socket into pipes the direction holds, and from them to the other
//! socket, never through user memory. What the delay line holds waits in
//! the pipes, in order, each chunk in the line standing for its bytes
//! there ([`Piped`]); a chain of pipes holds more than one pipe may.
//!
//! A pipe is held only while bytes wait in it: emptied, it goes back to
//! the process's spares ([`SPARES`]), which the next direction to splice
//! takes from. So a thousand connections hold pipes only for what waits,
//! within a user's quota of pipe pages, and an idle one holds none.

use crate::splice::{self, splice_now};
use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use shape_leaves::lock::lock;
use std::collections::VecDeque;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::{Mutex, OnceLock};

/// What one pipe is asked to hold: 1 MiB, the most an unprivileged
/// process may ask by default, so that a delay of 50 ms at 200 MiB/s
/// takes ten pipes, not 160. Where the system refuses (a user past the
/// kernel's quota of pipe pages), a pipe keeps what it has.
const PIPE_SIZE: usize = 1 << 20;
/// The most pipes one direction chains: beyond 64 MiB (the most a delay
/// line holds), chunks wait in memory as they would without pipes.
const MOST_PIPES: usize = 64;
/// The most empty pipes kept for the next direction to take: one for each
/// loop's turn, a loop per core, so that an idle proxy holds little of a
/// user's quota. Eight kept 8 MiB of a user's 64 idle after a load
/// through `--delay`, where other programs of the user found it missing.
fn most_spares() -> usize {
    static MOST: OnceLock<usize> = OnceLock::new();
    *MOST.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// Empty pipes, given back by the directions that emptied them.
static SPARES: Mutex<Vec<splice::Pipe>> = Mutex::new(Vec::new());

/// The bytes of a chunk that wait in a direction's pipes: those to pass
/// on, then those to throw away (cut off by a fault after they were
/// taken in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::proxy) struct Piped {
    pub(in crate::proxy) forward: usize,
    pub(in crate::proxy) discard: usize,
}

/// One pipe of the chain, and how much of it is in use.
struct ChainedPipe {
    /// Non-blocking, as the socket ends are.
    ends: splice::Pipe,
    /// What it takes before it counts as full: its size, or less once its
    /// slots were found full short of it.
    room: usize,
    filled: usize,
}

impl ChainedPipe {
    /// A spare pipe, or a new one.
    fn new() -> io::Result<ChainedPipe> {
        let spare = lock(&SPARES).pop();
        let ends = match spare {
            Some(pipe) => pipe,
            None => splice::Pipe::nonblocking(PIPE_SIZE)?,
        };
        Ok(ChainedPipe {
            room: ends.size,
            ends,
            filled: 0,
        })
    }

    /// Gives it, empty, to the spares, unless they are enough.
    fn spare(self) {
        let mut spares = lock(&SPARES);
        if spares.len() < most_spares() {
            spares.push(self.ends);
        }
    }

    /// True if the pipe has a slot free. A pipe's room is counted in
    /// slots, not bytes: bytes spliced from a socket may fill a slot each
    /// with less than a page, so a pipe can be full short of its size.
    fn writable(&self) -> bool {
        let mut fds = [PollFd::new(&self.ends.write, PollFlags::OUT)];
        rustix::event::poll(&mut fds, Some(&rustix::time::Timespec::default())).is_ok_and(|n| n > 0)
    }
}

/// A direction's chain of pipes: filled at the back, drained at the front.
#[derive(Default)]
pub(in crate::proxy) struct Pipes {
    chain: VecDeque<ChainedPipe>,
}

impl Pipes {
    /// How many pipes it holds.
    #[cfg(test)]
    pub(in crate::proxy) fn pipes(&self) -> usize {
        self.chain.len()
    }

    /// The bytes waiting in the pipes.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.chain.iter().map(|pipe| pipe.filled).sum()
    }

    /// Moves what one splice brings, up to `want` bytes, from `from` into
    /// the pipes: `Some(0)` is the end of the stream, `None` says the
    /// pipes can take nothing more, and `WouldBlock` that the socket has
    /// nothing now.
    pub(in crate::proxy) fn splice_in(
        &mut self,
        from: BorrowedFd<'_>,
        want: usize,
    ) -> io::Result<Option<usize>> {
        let spliced = loop {
            let Some(pipe) = self.back_with_room() else {
                break Ok(None);
            };
            let room = (pipe.room - pipe.filled).min(want);
            match splice_now(from, &pipe.ends.write, room) {
                Ok(n) => {
                    pipe.filled += n;
                    break Ok(Some(n));
                }
                // Either end may have said so: the pipe, if its slots are
                // full; else the socket.
                Err(Errno::AGAIN) if pipe.writable() => {
                    break Err(io::ErrorKind::WouldBlock.into());
                }
                // Full short of its size: the next pipe takes what comes.
                Err(Errno::AGAIN) => pipe.room = pipe.filled,
                Err(err) => break Err(err.into()),
            }
        };
        // A pipe taken for bytes that did not come is not held.
        if self.chain.back().is_some_and(|pipe| pipe.filled == 0) {
            if let Some(untouched) = self.chain.pop_back() {
                untouched.spare();
            }
        }
        spliced
    }

    /// Moves up to `len` bytes from the front of the pipes to `to`;
    /// `WouldBlock` if `to` takes none now.
    pub(in crate::proxy) fn drain_to(
        &mut self,
        to: BorrowedFd<'_>,
        len: usize,
    ) -> io::Result<usize> {
        let pipe = self.front()?;
        let len = len.min(pipe.filled);
        let moved = splice_now(&pipe.ends.read, to, len)?;
        self.took(moved);
        Ok(moved)
    }

    /// Throws away `len` bytes from the front of the pipes, read into
    /// `scratch` (a fault cut them off after they came in: rare).
    pub(in crate::proxy) fn discard(&mut self, len: usize, scratch: &mut [u8]) -> io::Result<()> {
        let mut left = len;
        while left > 0 {
            let pipe = self.front()?;
            let take = left.min(pipe.filled).min(scratch.len());
            match rustix::io::read(&pipe.ends.read, &mut scratch[..take]) {
                Ok(n) => {
                    self.took(n);
                    left -= n;
                }
                Err(Errno::INTR) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    /// The pipe at the back if it has room, or a new one if the chain may
    /// grow; `None` if neither. A pipe that cannot be had (descriptors run
    /// out) is no room: the bytes wait in memory instead.
    fn back_with_room(&mut self) -> Option<&mut ChainedPipe> {
        if self
            .chain
            .back()
            .is_none_or(|pipe| pipe.filled >= pipe.room)
        {
            if self.chain.len() >= MOST_PIPES {
                return None;
            }
            self.chain.push_back(ChainedPipe::new().ok()?);
        }
        self.chain.back_mut()
    }

    /// The pipe at the front, which holds the oldest bytes.
    fn front(&mut self) -> io::Result<&mut ChainedPipe> {
        self.chain
            .front_mut()
            .filter(|pipe| pipe.filled > 0)
            .ok_or_else(|| io::Error::other("nothing waits in the pipes"))
    }

    /// Counts `n` bytes out of the front pipe; an emptied pipe leaves the
    /// chain for the spares.
    fn took(&mut self, n: usize) {
        let Some(pipe) = self.chain.front_mut() else {
            return;
        };
        pipe.filled -= n;
        if pipe.filled > 0 {
            return;
        }
        if let Some(emptied) = self.chain.pop_front() {
            emptied.spare();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn bytes_cross_the_pipes_in_order_and_a_cut_tail_is_thrown_away() {
        let (mut writer, from) = UnixStream::pair().unwrap();
        let (to, mut reader) = UnixStream::pair().unwrap();
        from.set_nonblocking(true).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let sender = {
            let data = data.clone();
            std::thread::spawn(move || writer.write_all(&data))
        };
        let receiver = std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            all
        });
        let mut pipes = Pipes::default();
        let mut scratch = vec![0; 4096];
        // Each chunk's last five bytes are cut off and thrown away.
        let (mut expected, mut at) = (Vec::new(), 0);
        loop {
            match pipes.splice_in(from.as_fd(), 10_000) {
                Ok(Some(0)) => break,
                Ok(None) => panic!("one pipe is room enough"),
                Ok(Some(n)) => {
                    let keep = n.saturating_sub(5);
                    let mut left = keep;
                    while left > 0 {
                        left -= pipes.drain_to(to.as_fd(), left).unwrap();
                    }
                    pipes.discard(n - keep, &mut scratch).unwrap();
                    expected.extend_from_slice(&data[at..at + keep]);
                    at += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        drop(to);
        sender.join().unwrap().unwrap();
        assert_eq!(at, data.len());
        assert_eq!(pipes.held(), 0);
        assert!(receiver.join().unwrap() == expected);
    }

    #[test]
    fn the_chain_grows_to_hold_what_waits_and_gives_it_back_in_order() {
        let (mut writer, from) = UnixStream::pair().unwrap();
        from.set_nonblocking(true).unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        let sender = {
            let data = data.clone();
            std::thread::spawn(move || writer.write_all(&data))
        };
        let mut pipes = Pipes::default();
        while pipes.held() < data.len() {
            match pipes.splice_in(from.as_fd(), 1 << 20) {
                Ok(Some(n)) => assert!(n > 0, "the end came early"),
                Ok(None) => panic!("the chain would not grow"),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        sender.join().unwrap().unwrap();
        assert!(pipes.chain.len() > 1, "three MB in one pipe");
        let (to, mut reader) = UnixStream::pair().unwrap();
        let receiver = std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            all
        });
        while pipes.held() > 0 {
            let held = pipes.held();
            pipes.drain_to(to.as_fd(), held).unwrap();
        }
        drop(to);
        assert!(receiver.join().unwrap() == data);
    }
}
