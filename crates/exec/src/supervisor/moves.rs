//! How each call on a shaped socket is carried out once its socket is
//! ready: sends and writes (paid for, then sent by shape), receives and
//! reads (peeked, paid for, copied to the caller, consumed, answered),
//! sendfile and splice, and the calls shape only pays for and lets
//! through; and the caller's memory they read and fill.

use super::{MOST_DATAGRAM, MOST_NAME, Peeked, Progress, Supervisor, errno};
use crate::call::{Call, Name, Transfer};
use crate::kernel::{self, Response};
use crate::sockets::SocketKind;
use mio::Interest;
use shape_impair::faults::Way;
use shape_net::splice::splice_now;
use std::io;
use std::os::fd::{AsFd, AsRawFd};

impl Supervisor<'_> {
    /// A send, write or vector write: paid for, then sent by shape.
    pub(super) fn send(&mut self, key: usize) -> Progress {
        let held = &self.held[key];
        let Call::Transfer(transfer) = &held.call else {
            return Progress::Done(Response::Continue);
        };
        let total = transfer.length();
        if total == 0 {
            return Progress::Done(Response::Continue);
        }
        let amount = match held.kind {
            SocketKind::Datagram => total,
            _ => total.min(self.chunk(Way::Up)),
        };
        let Some(amount) = self.pay(key, Way::Up, amount) else {
            return Progress::Wait;
        };
        let held = &self.held[key];
        let Call::Transfer(transfer) = &held.call else {
            return Progress::Done(Response::Continue);
        };
        let tid = held.notification.tid;
        let data = gather(tid, &transfer.buffers, amount as usize);
        let name = match transfer.name {
            Name::To { at, len } => {
                let mut name = vec![0; (len as usize).min(MOST_NAME)];
                read_exactly(tid, at, &mut name).map(|()| name)
            }
            _ => Ok(Vec::new()),
        };
        let (data, name) = match (data, name) {
            (Ok(data), Ok(name)) => (data, name),
            (Err(err), _) | (_, Err(err)) => {
                self.refund(key, Way::Up, 0);
                return Progress::Done(Response::Error(errno(&err)));
            }
        };
        let flags = transfer.flags;
        let id = held.notification.id;
        let name = match self.paid_elsewhere(key) {
            // Sent to its destination's link instead.
            true => self.sent_through_link(key, name),
            false => name,
        };
        let held = &self.held[key];
        if !kernel::still_waiting(self.listener.as_fd(), id) {
            // Killed while it waited: what it asked to send goes nowhere.
            self.refund(key, Way::Up, 0);
            return Progress::Answered;
        }
        let sent = kernel::send_to(
            held.socket.as_fd(),
            &data,
            &name,
            flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        );
        self.sent(key, sent, flags & libc::MSG_NOSIGNAL == 0)
    }

    /// The answer to held call `key` that sent `sent` (raising SIGPIPE on
    /// a broken connection if `pipe_signal`), or waits to send again.
    pub(super) fn sent(
        &mut self,
        key: usize,
        sent: io::Result<usize>,
        pipe_signal: bool,
    ) -> Progress {
        match sent {
            Ok(n) => {
                self.refund(key, Way::Up, n as u64);
                self.count(key, Way::Up, n as u64);
                Progress::Done(Response::Value(n as i64))
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                if self.held[key].nonblocking {
                    self.refund(key, Way::Up, 0);
                    return Progress::Done(Response::Error(libc::EAGAIN));
                }
                self.watch(key, Interest::WRITABLE)
            }
            Err(err) => {
                self.refund(key, Way::Up, 0);
                if pipe_signal && err.raw_os_error() == Some(libc::EPIPE) {
                    let tid = self.held[key].notification.tid;
                    if let Ok(pidfd) = self.sockets.pidfd(tid) {
                        let _ = kernel::signal_process(pidfd, libc::SIGPIPE);
                    }
                }
                Progress::Done(Response::Error(errno(&err)))
            }
        }
    }

    /// A receive, read or vector read: what is there is peeked, paid for,
    /// copied to the caller, consumed, and answered.
    pub(super) fn receive(&mut self, key: usize) -> Progress {
        if let Some(answer) = self.peek(key) {
            return answer;
        }
        let Call::Transfer(transfer) = &self.held[key].call else {
            return Progress::Done(Response::Continue);
        };
        let flags = transfer.flags;
        let held = &self.held[key];
        let Some(peeked) = &held.peeked else {
            return Progress::Wait;
        };
        let cost = match (flags & libc::MSG_PEEK != 0, held.kind) {
            (true, _) => 0,
            (false, SocketKind::Datagram) => peeked.whole,
            (false, _) => peeked.data.len(),
        };
        if self.pay(key, Way::Down, cost as u64).is_none() {
            return Progress::Wait;
        }
        let held = &self.held[key];
        let (Call::Transfer(transfer), Some(peeked)) = (&held.call, &held.peeked) else {
            return Progress::Done(Response::Continue);
        };
        let tid = held.notification.tid;
        let truncated = held.kind == SocketKind::Datagram && peeked.whole > peeked.data.len();
        if let Err(err) = deliver(tid, transfer, peeked, truncated) {
            self.refund(key, Way::Down, 0);
            return Progress::Done(Response::Error(errno(&err)));
        }
        let returned = match truncated && flags & libc::MSG_TRUNC != 0 {
            true => peeked.whole,
            false => peeked.data.len(),
        };
        let id = held.notification.id;
        if !kernel::still_waiting(self.listener.as_fd(), id) {
            // Killed meanwhile: nothing is taken from the socket.
            self.refund(key, Way::Down, 0);
            return Progress::Answered;
        }
        // Consumed before the answer: once answered, the caller may poll
        // the socket at once, and must not find there what it was given.
        let got = peeked.data.len();
        if flags & libc::MSG_PEEK == 0 {
            let consume = match held.kind {
                SocketKind::Datagram => 0,
                _ => got,
            };
            self.scratch.resize(consume.max(self.scratch.len()), 0);
            let mut name = [0u8; MOST_NAME];
            let _ = kernel::receive_from(
                held.socket.as_fd(),
                &mut self.scratch[..consume],
                &mut name,
                libc::MSG_DONTWAIT | (flags & libc::MSG_OOB),
            );
            self.count(key, Way::Down, got as u64);
        }
        Progress::Done(Response::Value(returned as i64))
    }

    /// Peeks, once, what waits on the socket of the held receive `key`,
    /// as much as the caller has room for and a chunk allows (a datagram
    /// whole): `Some` with what to do instead if nothing can be peeked
    /// now.
    fn peek(&mut self, key: usize) -> Option<Progress> {
        let chunk = self.chunk(Way::Down) as usize;
        let held = &mut self.held[key];
        let Call::Transfer(transfer) = &held.call else {
            return Some(Progress::Done(Response::Continue));
        };
        if held.peeked.is_some() {
            return None;
        }
        let room = transfer.length() as usize;
        if room == 0 {
            return Some(Progress::Done(Response::Continue));
        }
        let peek = libc::MSG_PEEK | libc::MSG_DONTWAIT | (transfer.flags & libc::MSG_OOB);
        let (size, peek) = match held.kind {
            SocketKind::Datagram => (room.min(MOST_DATAGRAM), peek | libc::MSG_TRUNC),
            _ => (room.min(chunk), peek),
        };
        let mut data = vec![0; size];
        let mut name = [0u8; MOST_NAME];
        match kernel::receive_from(held.socket.as_fd(), &mut data, &mut name, peek) {
            Ok((0, _)) if held.kind == SocketKind::Stream => {
                Some(Progress::Done(Response::Value(0)))
            }
            Ok((n, name_len)) => {
                data.truncate(n.min(size));
                let name = name[..name_len.min(MOST_NAME)].to_vec();
                let name = match self.paid_elsewhere(key) {
                    // Came through its destination's link: from there.
                    true => self.received_through_proxy(key, name),
                    false => name,
                };
                self.held[key].peeked = Some(Peeked {
                    data,
                    whole: n,
                    name,
                });
                None
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                if held.nonblocking {
                    return Some(Progress::Done(Response::Error(libc::EAGAIN)));
                }
                Some(self.watch(key, Interest::READABLE))
            }
            Err(err) => Some(Progress::Done(Response::Error(errno(&err)))),
        }
    }

    /// `sendfile` into a socket: the file is read at its offset, sent by
    /// shape, and the offset moved by what was sent.
    pub(super) fn send_file(&mut self, key: usize) -> Progress {
        let Call::SendFile {
            from,
            offset_at,
            count,
            ..
        } = self.held[key].call
        else {
            return Progress::Done(Response::Continue);
        };
        if count == 0 {
            return Progress::Done(Response::Continue);
        }
        let Some(amount) = self.pay(key, Way::Up, count.min(self.chunk(Way::Up))) else {
            return Progress::Wait;
        };
        let tid = self.held[key].notification.tid;
        let read = self.sockets.take(tid, from).and_then(|file| {
            let offset = match offset_at {
                0 => rustix::fs::seek(&file, rustix::fs::SeekFrom::Current(0))?,
                at => {
                    let mut bytes = [0; 8];
                    read_exactly(tid, at, &mut bytes)?;
                    u64::from_ne_bytes(bytes)
                }
            };
            let mut data = vec![0; amount as usize];
            let n = rustix::io::pread(&file, &mut data, offset)?;
            data.truncate(n);
            Ok((file, offset, data))
        });
        let (file, offset, data) = match read {
            Ok(read) => read,
            Err(err) => {
                self.refund(key, Way::Up, 0);
                return Progress::Done(Response::Error(errno(&err)));
            }
        };
        if data.is_empty() {
            self.refund(key, Way::Up, 0);
            return Progress::Done(Response::Value(0));
        }
        let sent = kernel::send_to(
            self.held[key].socket.as_fd(),
            &data,
            &[],
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        );
        if let Ok(n) = &sent {
            let moved = offset + *n as u64;
            let _ = match offset_at {
                0 => rustix::fs::seek(&file, rustix::fs::SeekFrom::Start(moved))
                    .map(drop)
                    .map_err(io::Error::from),
                at => write_exactly(tid, at, &moved.to_ne_bytes()),
            };
        }
        self.sent(key, sent, true)
    }

    /// `splice` out of a socket into a pipe: what is waiting (a chunk at
    /// most) is peeked, paid for, and spliced by shape into the caller's
    /// pipe, exactly as much as was paid for.
    pub(super) fn splice_out(&mut self, key: usize) -> Progress {
        let chunk = self.chunk(Way::Down) as usize;
        let held = &mut self.held[key];
        let Call::SpliceOut { pipe, length, .. } = held.call else {
            return Progress::Done(Response::Continue);
        };
        if length == 0 {
            return Progress::Done(Response::Continue);
        }
        if held.peeked.is_none() {
            let mut data = vec![0; (length as usize).min(chunk)];
            let mut name = [0u8; MOST_NAME];
            let peek = libc::MSG_PEEK | libc::MSG_DONTWAIT;
            match kernel::receive_from(held.socket.as_fd(), &mut data, &mut name, peek) {
                Ok((0, _)) => return Progress::Done(Response::Value(0)),
                Ok((n, _)) => {
                    data.truncate(n);
                    held.peeked = Some(Peeked {
                        data,
                        whole: n,
                        name: Vec::new(),
                    });
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    if held.nonblocking {
                        return Progress::Done(Response::Error(libc::EAGAIN));
                    }
                    return self.watch(key, Interest::READABLE);
                }
                Err(err) => return Progress::Done(Response::Error(errno(&err))),
            }
        }
        let waiting = held.peeked.as_ref().map_or(0, |peeked| peeked.whole) as u64;
        let Some(paid) = self.pay(key, Way::Down, waiting) else {
            return Progress::Wait;
        };
        let tid = self.held[key].notification.tid;
        if self.held[key].other.is_none() {
            match self.sockets.take(tid, pipe) {
                Ok(taken) => self.held[key].other = Some(taken),
                Err(err) => {
                    self.refund(key, Way::Down, 0);
                    return Progress::Done(Response::Error(errno(&err)));
                }
            }
        }
        let held = &self.held[key];
        let Some(into) = &held.other else {
            return Progress::Done(Response::Error(libc::EBADF));
        };
        match splice_now(&held.socket, into, paid as usize) {
            Ok(n) => {
                self.refund(key, Way::Down, n as u64);
                self.count(key, Way::Down, n as u64);
                Progress::Done(Response::Value(n as i64))
            }
            // The pipe is full: a caller that would block waits for room.
            Err(rustix::io::Errno::AGAIN) if !self.held[key].nonblocking => {
                let fd = into.as_raw_fd();
                self.watch_fd(key, fd, Interest::WRITABLE)
            }
            Err(err) => {
                self.refund(key, Way::Down, 0);
                Progress::Done(Response::Error(err.raw_os_error()))
            }
        }
    }

    /// A call shape cannot carry out itself: paid for (a receive, for
    /// what is waiting), then let through.
    pub(super) fn coarse(&mut self, key: usize) -> Progress {
        let Call::Coarse { way, length, .. } = self.held[key].call else {
            return Progress::Done(Response::Continue);
        };
        let amount = match way {
            Way::Up => length.unwrap_or(0),
            Way::Down => {
                let waiting = rustix::io::ioctl_fionread(&self.held[key].socket).unwrap_or(0);
                length.map_or(waiting, |length| length.min(waiting))
            }
        };
        let Some(amount) = self.pay(key, way, amount) else {
            return Progress::Wait;
        };
        self.count(key, way, amount);
        Progress::Done(Response::Continue)
    }
}

/// Reads all of `into` from thread `tid`'s memory at `at`, or fails with
/// EFAULT.
pub(super) fn read_exactly(tid: u32, at: u64, into: &mut [u8]) -> io::Result<()> {
    match kernel::read_memory(tid, at, into)? {
        n if n == into.len() => Ok(()),
        _ => Err(io::Error::from_raw_os_error(libc::EFAULT)),
    }
}

/// Writes all of `data` into thread `tid`'s memory at `at`, or fails with
/// EFAULT.
pub(super) fn write_exactly(tid: u32, at: u64, data: &[u8]) -> io::Result<()> {
    match kernel::write_memory(tid, at, data)? {
        n if n == data.len() => Ok(()),
        _ => Err(io::Error::from_raw_os_error(libc::EFAULT)),
    }
}

/// The first `amount` bytes of the caller's `buffers`.
fn gather(tid: u32, buffers: &[(u64, u64)], amount: usize) -> io::Result<Vec<u8>> {
    let mut data = vec![0; amount];
    let mut filled = 0;
    for &(at, len) in buffers {
        if filled == amount {
            break;
        }
        let take = (len as usize).min(amount - filled);
        read_exactly(tid, at, &mut data[filled..filled + take])?;
        filled += take;
    }
    Ok(data)
}

/// Copies a receive's peeked bytes into the caller's buffers, and its
/// sender's address and the message's flags where the call asked.
fn deliver(tid: u32, transfer: &Transfer, peeked: &Peeked, truncated: bool) -> io::Result<()> {
    let mut rest = &peeked.data[..];
    for &(at, len) in &transfer.buffers {
        if rest.is_empty() {
            break;
        }
        let take = (len as usize).min(rest.len());
        write_exactly(tid, at, &rest[..take])?;
        rest = &rest[take..];
    }
    if let Name::From { at, room, len_at } = transfer.name {
        let fits = peeked.name.len().min(room as usize);
        write_exactly(tid, at, &peeked.name[..fits])?;
        write_exactly(tid, len_at, &(peeked.name.len() as u32).to_ne_bytes())?;
    }
    if let Some(at) = transfer.flags_at {
        let flags = if truncated { libc::MSG_TRUNC } else { 0 };
        write_exactly(tid, at, &flags.to_ne_bytes())?;
    }
    Ok(())
}
