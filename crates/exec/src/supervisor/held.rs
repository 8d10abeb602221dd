//! A call held until it can be carried out: what it keeps, how it is
//! stepped, watched, paid for (or left to a datagram link to pay) and
//! let go.

use super::{FIRST_CALL, Supervisor, errno};
use crate::call::Call;
use crate::kernel::{Notification, Response};
use crate::sockets::SocketKind;
use mio::unix::SourceFd;
use mio::{Interest, Token};
use shape_bucket::Reservation;
use shape_impair::faults::Way;
use shape_leaves::chunk::chunk_size;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// A call held until it can be carried out.
pub(super) struct HeldCall {
    pub(super) notification: Notification,
    pub(super) socket: OwnedFd,
    pub(super) kind: SocketKind,
    pub(super) call: Call,
    /// The socket's file status says non-blocking, or the call does.
    pub(super) nonblocking: bool,
    /// The tokens reserved, and how many.
    pub(super) paid: Option<(Reservation, u64)>,
    /// What a receive found waiting, before it is consumed.
    pub(super) peeked: Option<Peeked>,
    /// When its tokens are covered, if it waits for them.
    pub(super) wake_at: Option<u64>,
    /// Another descriptor it moves bytes to (a splice's pipe).
    pub(super) other: Option<OwnedFd>,
    /// The descriptor poll watches for it, if any.
    pub(super) watched: Option<RawFd>,
}

impl HeldCall {
    /// `call` of `notification` on `socket`, held, nothing done yet.
    pub(super) fn new(notification: Notification, socket: OwnedFd, call: Call) -> HeldCall {
        HeldCall {
            notification,
            socket,
            kind: SocketKind::Stream,
            call,
            nonblocking: false,
            paid: None,
            peeked: None,
            wake_at: None,
            other: None,
            watched: None,
        }
    }
}

/// A receive's bytes, seen but not yet consumed.
pub(super) struct Peeked {
    pub(super) data: Vec<u8>,
    /// What the receive returned: with MSG_TRUNC, a datagram's length.
    pub(super) whole: usize,
    pub(super) name: Vec<u8>,
}

/// Where a held call stands after a step.
pub(super) enum Progress {
    /// Still waiting: for tokens, or for its socket.
    Wait,
    /// To be answered so.
    Done(Response),
    /// Answered already.
    Answered,
}

impl Supervisor<'_> {
    /// Takes held call `key` as far as it can go, and lets it go once
    /// answered.
    pub(super) fn step(&mut self, key: usize) {
        let Some(held) = self.held.get(key) else {
            return;
        };
        let step = match &held.call {
            Call::Transfer(transfer) if transfer.way == Way::Up => self.send(key),
            Call::Transfer(_) => self.receive(key),
            Call::SendFile { .. } => self.send_file(key),
            Call::Coarse { .. } => self.coarse(key),
            Call::Accept { .. } => self.accept(key),
            Call::SpliceOut { .. } => self.splice_out(key),
            // A blocking connect: its pending connect answers it.
            Call::Connect { .. } => Progress::Wait,
            Call::Socket { .. } | Call::Dup { .. } | Call::DupTo { .. } | Call::Other => {
                Progress::Done(Response::Continue)
            }
        };
        match step {
            Progress::Wait => {}
            Progress::Done(answer) => {
                let held = self.release(key);
                self.respond(&held.notification, answer);
            }
            Progress::Answered => {
                self.release(key);
            }
        }
    }

    /// Lets held call `key` go.
    pub(super) fn release(&mut self, key: usize) -> HeldCall {
        let held = self.held.remove(key);
        if let Some(fd) = held.watched {
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
        }
        held
    }

    /// Watches held call `key`'s socket for `interest`.
    pub(super) fn watch(&mut self, key: usize, interest: Interest) -> Progress {
        let fd = self.held[key].socket.as_raw_fd();
        self.watch_fd(key, fd, interest)
    }

    /// Watches `fd` of held call `key` (its socket, or the other
    /// descriptor it moves bytes to) for `interest`.
    pub(super) fn watch_fd(&mut self, key: usize, fd: RawFd, interest: Interest) -> Progress {
        let held = &mut self.held[key];
        let registry = self.poll.registry();
        let token = Token(key + FIRST_CALL);
        if let Some(old) = held.watched.filter(|&old| old != fd) {
            let _ = registry.deregister(&mut SourceFd(&old));
            held.watched = None;
        }
        let watched = match held.watched {
            Some(_) => registry.reregister(&mut SourceFd(&fd), token, interest),
            None => registry.register(&mut SourceFd(&fd), token, interest),
        };
        match watched {
            Ok(()) => {
                held.watched = Some(fd);
                Progress::Wait
            }
            Err(err) => Progress::Done(Response::Error(errno(&err))),
        }
    }

    /// Reserves `amount` tokens of `way` for held call `key` (once: a
    /// call that waits keeps what it first reserved, though the rate and
    /// so the chunk change), and returns how many are reserved once they
    /// are covered; until then, when they will be is noted.
    pub(super) fn pay(&mut self, key: usize, way: Way, amount: u64) -> Option<u64> {
        if self.paid_elsewhere(key) {
            return Some(amount);
        }
        let bucket = &self.ways.buckets[way as usize];
        let held = &mut self.held[key];
        let (reservation, reserved) = held
            .paid
            .get_or_insert_with(|| (bucket.reserve(amount), amount));
        held.wake_at = bucket.deadline(reservation);
        held.wake_at.is_none().then_some(*reserved)
    }

    /// Whether held call `key` is paid for, and counted, by a datagram
    /// link rather than here.
    pub(super) fn paid_elsewhere(&self, key: usize) -> bool {
        let held = &self.held[key];
        if !self.datagrams_linked() || held.kind != SocketKind::Datagram {
            return false;
        }
        // A call the kernel carries out goes where the command said: to
        // the link only from a socket connected to it.
        !matches!(held.call, Call::Coarse { .. })
            || rustix::net::getpeername(&held.socket).is_ok_and(|peer| peer.is_some())
    }

    /// Counts `bytes` passed `way` for held call `key`, unless its link
    /// counts them.
    pub(super) fn count(&self, key: usize, way: Way, bytes: u64) {
        if !self.paid_elsewhere(key) {
            self.ways.passed[way as usize].add(bytes);
        }
    }

    /// Returns what held call `key` reserved beyond `used`.
    pub(super) fn refund(&mut self, key: usize, way: Way, used: u64) {
        let bucket = &self.ways.buckets[way as usize];
        if let Some((mut reservation, amount)) = self.held[key].paid.take() {
            bucket.give_back(&mut reservation, amount.saturating_sub(used));
        }
    }

    /// The most bytes a stream call of `way` moves at once: one chunk.
    pub(super) fn chunk(&self, way: Way) -> u64 {
        let bucket = &self.ways.buckets[way as usize];
        chunk_size(bucket.limit(), bucket.burst()) as u64
    }
}
