//! How each call the filter hands over is taken: answered at once (a
//! call on no shaped socket, a socket to make, a connect, a close, a
//! copy of a socket), or held and given its first step.

use super::placing::free_descriptor;
use super::{HeldCall, Supervisor, read_exactly};
use crate::call::{self, Call};
use crate::kernel::{self, Notification, Response};
use crate::sockets::{SocketKind, buffer_for};
use rustix::event::{PollFd, PollFlags};
use std::io;
use std::os::fd::{AsFd, OwnedFd};

impl Supervisor<'_> {
    /// Takes every call waiting on the listener.
    pub(super) fn take_calls(&mut self) -> io::Result<()> {
        loop {
            let mut look = [PollFd::new(&self.listener, PollFlags::IN)];
            let zero = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            match rustix::event::poll(&mut look, Some(&zero)) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => return Err(err.into()),
            }
            if !look[0].revents().contains(PollFlags::IN) {
                // Hung up: no process is left under the filter.
                return Ok(());
            }
            match kernel::receive(self.listener.as_fd()) {
                Ok(notification) => self.take(notification),
                // The caller was killed before it could be received.
                Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// Answers `notification` at once, or holds it and takes its first
    /// step.
    pub(super) fn take(&mut self, notification: Notification) {
        match notification.nr {
            libc::SYS_socket => self.make_socket(&notification),
            libc::SYS_close => self.close(&notification),
            libc::SYS_connect => match self.relay {
                Some(_) => self.connect(notification),
                None => self.respond(&notification, Response::Continue),
            },
            libc::SYS_getsockopt => self.socket_error(&notification),
            _ => self.take_on_a_socket(notification),
        }
    }

    /// A call on a descriptor: let through unless it is a call shape
    /// carries out on a shaped socket; else held with its own copy of the
    /// socket (a `dup` of one placed at once).
    fn take_on_a_socket(&mut self, notification: Notification) {
        let Some((call, fd, kind)) = self.shaped_call(&notification) else {
            return self.respond(&notification, Response::Continue);
        };
        if let Call::DupTo { to, .. } = call {
            if to < self.base as i32 {
                self.say_moved(to);
            }
            return self.respond(&notification, Response::Continue);
        }
        let Ok(socket) = self.sockets.take(notification.tid, fd) else {
            return self.respond(&notification, Response::Continue);
        };
        if let Call::Dup { least, cloexec, .. } = call {
            return self.place_copy(&notification, socket, least, cloexec);
        }
        self.hold(notification, call, socket, kind);
    }

    /// What `notification` asks of a shaped socket, the socket's
    /// descriptor and its kind; `None` for a call on no shaped socket, or
    /// one shape lets through as it is.
    fn shaped_call(&mut self, notification: &Notification) -> Option<(Call, i32, SocketKind)> {
        let Notification { tid, nr, args, .. } = *notification;
        let fd = call::descriptor(nr, &args)?;
        let buffer = buffer_for(&self.ways.buckets);
        let (mut fd, mut kind) = (fd, self.sockets.kind(tid, fd, buffer));
        let mut spliced_in = false;
        if kind == SocketKind::Unshaped && nr == libc::SYS_splice {
            // splice out of a socket (into a pipe) is a receive.
            (fd, spliced_in) = (args[0] as i32, true);
            kind = self.sockets.kind(tid, fd, buffer);
        }
        if kind == SocketKind::Unshaped {
            return None;
        }
        let mut read = |at, into: &mut [u8]| read_exactly(tid, at, into);
        let decoded = match spliced_in {
            true => Ok(call::splice_out(&args)),
            false => call::decode(nr, &args, &mut read),
        };
        let call = match decoded.ok()? {
            call if self.sockets.keeps_copies() => self.coarse_without_taking(call),
            call => call,
        };
        (call != Call::Other).then_some((call, fd, kind))
    }

    /// A `dup` of a shaped socket, its copy at descriptor `least` or
    /// above. `close(0); dup(socket)` puts a socket on standard input, as
    /// inetd's children expect: that is honoured (and said), other copies
    /// are kept high.
    fn place_copy(
        &mut self,
        notification: &Notification,
        socket: OwnedFd,
        least: i32,
        cloexec: bool,
    ) {
        let least = least.max(0) as u32;
        if let Some(stdio @ 0..=2) = free_descriptor(notification.tid, least) {
            self.say_moved(stdio as i32);
            return self.respond(notification, Response::Continue);
        }
        self.place_socket(notification, socket, least.max(self.base), cloexec);
    }

    /// Holds `call` on `socket`, a shaped socket of `kind`, and takes its
    /// first step.
    fn hold(&mut self, notification: Notification, call: Call, socket: OwnedFd, kind: SocketKind) {
        let nonblocking = nonblocking(&call, &socket);
        if kind == SocketKind::Datagram
            && self.datagrams_linked()
            && matches!(call, Call::Coarse { .. })
            && !rustix::net::getpeername(&socket).is_ok_and(|peer| peer.is_some())
        {
            self.say_once(
                "coarse datagrams",
                "shape: the command sent or received datagrams on an unconnected socket with \
                 sendmmsg, recvmmsg or control data: those pass without the link's delay and \
                 faults (they are paid for)",
            );
        }
        let key = self.held.insert(HeldCall {
            notification,
            socket,
            kind,
            call,
            nonblocking,
            paid: None,
            peeked: None,
            wake_at: None,
            other: None,
            watched: None,
        });
        self.step(key);
    }

    /// Answers `notification`; a caller killed meanwhile needs none.
    pub(super) fn respond(&self, notification: &Notification, response: Response) {
        let _ = kernel::respond(self.listener.as_fd(), notification.id, response);
    }
}

/// Whether `call` on `socket` must not wait: its flags say so (a
/// splice's `SPLICE_F_NONBLOCK` as a receive's `MSG_DONTWAIT`), or the
/// socket is non-blocking.
fn nonblocking(call: &Call, socket: &OwnedFd) -> bool {
    let flags = match call {
        Call::Transfer(transfer) => transfer.flags,
        Call::SpliceOut { flags, .. } if flags & libc::SPLICE_F_NONBLOCK != 0 => libc::MSG_DONTWAIT,
        _ => 0,
    };
    flags & libc::MSG_DONTWAIT != 0
        || rustix::fs::fcntl_getfl(socket)
            .is_ok_and(|status| status.contains(rustix::fs::OFlags::NONBLOCK))
}
