//! Where the command's IP sockets live: made, accepted and copied by
//! shape and placed at the base descriptor or above, where the filter
//! hands over their reads and writes; and, said once, where they cannot
//! be (a socket moved low, another network namespace, too low a limit).

use super::moves::{read_exactly, write_exactly};
use super::{MOST_NAME, Progress, Supervisor, errno};
use crate::call::Call;
use crate::kernel::{self, Notification, Response};
use crate::sockets::SocketKind;
use crate::sockets::buffer_for;
use mio::Interest;
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

impl Supervisor<'_> {
    /// Says `line` once per run for `what`.
    pub(super) fn say_once(&mut self, what: &'static str, line: &str) {
        if self.said.insert(what) {
            (self.say)(line);
        }
    }

    /// What is shaped of an IP socket at a low descriptor, said.
    pub(super) fn low_socket(&self) -> &'static str {
        low_socket(self.relay.is_some())
    }

    /// Says, once, that a socket was put at low descriptor `to`.
    pub(super) fn say_moved(&mut self, to: i32) {
        let shaped = self.low_socket();
        self.say_once(
            "moved",
            &format!("shape: a process of the command moved a socket to descriptor {to}: {shaped}"),
        );
    }

    /// Makes the IP socket a `socket` call asks for and places it high,
    /// where the filter hands its reads and writes to shape; in another
    /// network namespace, the kernel makes it, and only its sends and
    /// receives are shaped.
    pub(super) fn make_socket(&mut self, notification: &Notification) {
        let Notification { tid, args, .. } = *notification;
        if self.elsewhere(tid) {
            let shaped = self.low_socket();
            self.say_once(
                "namespace",
                &format!(
                    "shape: a process of the command made a socket in another network \
                     namespace: {shaped}"
                ),
            );
            return self.respond(notification, Response::Continue);
        }
        let (domain, kind, protocol) = (args[0] as i32, args[1] as i32, args[2] as i32);
        match kernel::socket(domain, kind, protocol) {
            Ok(socket) => {
                let cloexec = kind & libc::SOCK_CLOEXEC != 0;
                // Where a link relays TCP, its sockets are connected to
                // the relay, which shapes them: their reads and writes
                // need not come to shape, so they go where the command
                // would have had them.
                let stream = kind & 0xf == libc::SOCK_STREAM;
                // Where copies are kept, every socket goes high, where
                // its close is seen.
                let low = self.relay.is_some() && stream && !self.sockets.keeps_copies();
                let least = match low {
                    true => 0,
                    false => self.base,
                };
                self.place_socket(notification, socket, least, cloexec);
            }
            Err(err) => self.respond(notification, Response::Error(errno(&err))),
        }
    }

    /// Whether thread `tid` is in another network namespace than shape's
    /// (or either cannot be told): its sockets are its kernel's.
    pub(super) fn elsewhere(&self, tid: u32) -> bool {
        self.own_net.is_none() || net_namespace(&tid.to_string()) != self.own_net
    }

    /// Gives `socket` to the caller of `notification` at its lowest free
    /// descriptor of `least` or more, and answers with it; where its limit
    /// of open files leaves no room there, at its lowest free one, said
    /// once.
    pub(super) fn place_socket(
        &mut self,
        notification: &Notification,
        socket: OwnedFd,
        least: u32,
        cloexec: bool,
    ) {
        let buffer = buffer_for(&self.ways.buckets);
        if self.sockets.adopt(socket.as_fd(), buffer) != SocketKind::Unshaped {
            self.sockets.keep(socket.as_fd());
        }
        let listener = self.listener.as_fd();
        let id = notification.id;
        if least == 0 {
            // Wherever the kernel would have put it: the lowest free
            // descriptor, chosen by the kernel as it places it, so that a
            // descriptor another thread opens meanwhile is never replaced.
            if let Err(err) = kernel::place(listener, id, socket.as_fd(), None, cloexec)
                && err.raw_os_error() != Some(libc::ENOENT)
            {
                self.respond(notification, Response::Error(errno(&err)));
            }
            return;
        }
        let at = free_descriptor(notification.tid, least);
        let placed = at
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EMFILE))
            .and_then(|at| kernel::place(listener, id, socket.as_fd(), Some(at), cloexec));
        match placed {
            Ok(_) => {}
            // Killed meanwhile.
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {}
            Err(_) => {
                let low = kernel::place(listener, id, socket.as_fd(), None, cloexec);
                let shaped = self.low_socket();
                match low {
                    Ok(fd) => self.say_once(
                        "limit",
                        &format!(
                            "shape: a process of the command has no room for sockets at \
                             descriptor {least} or above (its limit of open files): its socket \
                             at {fd}: {shaped}; raise the limit (ulimit -n)"
                        ),
                    ),
                    Err(err) => self.respond(notification, Response::Error(errno(&err))),
                }
            }
        }
    }

    /// An `accept`: the connection is accepted by shape, which never
    /// waits in the call (the listener is made non-blocking for it if it
    /// is not), and placed high; a caller that would block waits held.
    pub(super) fn accept(&mut self, key: usize) -> Progress {
        let held = &self.held[key];
        let Call::Accept {
            name_at,
            len_at,
            flags,
            ..
        } = held.call
        else {
            return Progress::Done(Response::Continue);
        };
        let listener = held.socket.as_fd();
        let status = rustix::fs::fcntl_getfl(listener).unwrap_or(rustix::fs::OFlags::NONBLOCK);
        let blocking = !status.contains(rustix::fs::OFlags::NONBLOCK);
        if blocking {
            let _ = rustix::fs::fcntl_setfl(listener, status | rustix::fs::OFlags::NONBLOCK);
        }
        let mut name = [0u8; MOST_NAME];
        let accepted = kernel::accept(listener, &mut name, flags);
        if blocking {
            let _ = rustix::fs::fcntl_setfl(listener, status);
        }
        match accepted {
            Ok((connection, name_len)) => {
                let tid = held.notification.tid;
                if name_at != 0 && len_at != 0 {
                    let mut room = [0u8; 4];
                    let written = read_exactly(tid, len_at, &mut room).and_then(|()| {
                        let fits = name_len.min(u32::from_ne_bytes(room) as usize);
                        write_exactly(tid, name_at, &name[..fits])?;
                        write_exactly(tid, len_at, &(name_len as u32).to_ne_bytes())
                    });
                    if let Err(err) = written {
                        return Progress::Done(Response::Error(errno(&err)));
                    }
                }
                let notification = held.notification;
                let cloexec = flags & libc::SOCK_CLOEXEC != 0;
                if self.relay.is_none() {
                    self.place_socket(&notification, connection, self.base, cloexec);
                    return Progress::Answered;
                }
                match self.relay_accepted(connection) {
                    Ok(relayed) => {
                        if flags & libc::SOCK_NONBLOCK != 0 {
                            let _ = rustix::fs::fcntl_setfl(&relayed, rustix::fs::OFlags::NONBLOCK);
                        }
                        self.sockets.relayed(relayed.as_fd());
                        let least = match self.sockets.keeps_copies() {
                            true => self.base,
                            false => 0,
                        };
                        self.place_socket(&notification, relayed, least, cloexec);
                        Progress::Answered
                    }
                    Err(err) => Progress::Done(Response::Error(errno(&err))),
                }
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                if held.nonblocking {
                    return Progress::Done(Response::Error(libc::EAGAIN));
                }
                self.watch(key, Interest::READABLE)
            }
            Err(err) => Progress::Done(Response::Error(errno(&err))),
        }
    }
}

/// What is shaped of an IP socket at a low descriptor, which shape did
/// not put there: its sends and receives, unless a link relays the
/// command's connections (then, as the relay's own sockets, nothing).
pub(super) fn low_socket(relayed: bool) -> &'static str {
    match relayed {
        true => "it is not shaped (a link carries the command's connections)",
        false => "its reads and writes there are not shaped (its sends and receives are)",
    }
}

/// The lowest descriptor of `least` or more that thread `tid`'s process
/// has free, if its table can be read.
pub(super) fn free_descriptor(tid: u32, least: u32) -> Option<u32> {
    let open: HashSet<u32> = std::fs::read_dir(format!("/proc/{tid}/fd"))
        .ok()?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    (least..).find(|fd| !open.contains(fd))
}

/// The network namespace of process `pid` ("self" for this one).
pub(super) fn net_namespace(pid: &str) -> Option<u64> {
    rustix::fs::stat(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|stat| stat.st_ino)
}

/// Whether `fd` of this process is an IP socket.
pub(super) fn is_ip_socket(fd: BorrowedFd<'_>) -> bool {
    crate::sockets::socket_kind(fd) != SocketKind::Unshaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_lowest_free_descriptor_at_or_above_the_base_is_found() {
        let tid = std::process::id();
        let held: Vec<std::fs::File> = (0..3)
            .map(|_| std::fs::File::open("/dev/null").unwrap())
            .collect();
        let taken: Vec<u32> = held.iter().map(|f| f.as_raw_fd() as u32).collect();
        let least = taken[0];
        let free = free_descriptor(tid, least).unwrap();
        assert!(free >= least && !taken.contains(&free));
    }
}
