//! How each call the filter hands over is taken: answered at once (a
//! call on no shaped socket, a socket to make, a connect, a close), or
//! held and given its first step.

use super::placing::free_descriptor;
use super::{HeldCall, Supervisor, read_exactly};
use crate::call::{self, Call};
use crate::kernel::{self, Notification, Response};
use crate::sockets::{SocketKind, buffer_for};
use rustix::event::{PollFd, PollFlags};
use std::io;
use std::os::fd::AsFd;

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
        let Notification { tid, nr, args, .. } = notification;
        if nr == libc::SYS_socket {
            return self.make_socket(&notification);
        }
        if nr == libc::SYS_close {
            return self.close(&notification);
        }
        if nr == libc::SYS_connect {
            return match self.relay {
                Some(_) => self.connect(notification),
                None => self.respond(&notification, Response::Continue),
            };
        }
        if nr == libc::SYS_getsockopt {
            return self.socket_error(&notification);
        }
        let Some(fd) = call::descriptor(nr, &args) else {
            return self.respond(&notification, Response::Continue);
        };
        let buffer = buffer_for(&self.ways.buckets);
        let (mut fd, mut kind) = (fd, self.sockets.kind(tid, fd, buffer));
        let mut spliced_in = false;
        if kind == SocketKind::Unshaped && nr == libc::SYS_splice {
            // splice out of a socket (into a pipe) is a receive.
            (fd, spliced_in) = (args[0] as i32, true);
            kind = self.sockets.kind(tid, fd, buffer);
        }
        if kind == SocketKind::Unshaped {
            return self.respond(&notification, Response::Continue);
        }
        let mut read = |at, into: &mut [u8]| read_exactly(tid, at, into);
        let decoded = match spliced_in {
            true => Ok(call::splice_out(&args)),
            false => call::decode(nr, &args, &mut read),
        };
        let decoded = match decoded {
            Ok(call) if self.sockets.keeps_copies() => Ok(self.coarse_without_taking(call)),
            other => other,
        };
        let (call, socket) = match decoded {
            Ok(Call::Other) | Err(_) => return self.respond(&notification, Response::Continue),
            Ok(Call::DupTo { to, .. }) => {
                if to < self.base as i32 {
                    self.say_moved(to);
                }
                return self.respond(&notification, Response::Continue);
            }
            Ok(call) => match self.sockets.take(tid, fd) {
                Ok(socket) => (call, socket),
                Err(_) => return self.respond(&notification, Response::Continue),
            },
        };
        if let Call::Dup { least, cloexec, .. } = call {
            // `close(0); dup(socket)` puts a socket on standard input, as
            // inetd's children expect: that is honoured (and said), other
            // copies are kept high.
            let least = least.max(0) as u32;
            if let Some(stdio @ 0..=2) = free_descriptor(tid, least) {
                self.say_moved(stdio as i32);
                return self.respond(&notification, Response::Continue);
            }
            return self.place_socket(&notification, socket, least.max(self.base), cloexec);
        }
        let flags = match &call {
            Call::Transfer(transfer) => transfer.flags,
            _ => 0,
        };
        let flags = match &call {
            Call::SpliceOut { flags, .. } if flags & libc::SPLICE_F_NONBLOCK != 0 => {
                libc::MSG_DONTWAIT
            }
            _ => flags,
        };
        let nonblocking = flags & libc::MSG_DONTWAIT != 0
            || rustix::fs::fcntl_getfl(&socket)
                .is_ok_and(|status| status.contains(rustix::fs::OFlags::NONBLOCK));
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
