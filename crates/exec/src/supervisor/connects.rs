//! Connections through a link: where a link (`--delay`, faults) relays
//! the command's TCP connections, its `connect` is carried out by shape.
//! The command's socket is connected to the link's waiting port (`waiting_port.rs`), where it
//! waits in progress, as over a real link, while shape connects to the
//! server itself. One round trip of the link after the server answered,
//! shape answers at the waiting port, which completes the command's connect, and
//! hands its own end and the server to the relay (`net::proxy::RelayLoop`),
//! which carries every byte from then on with the link's delay, jitter,
//! faults and rate. The command's socket stays a real kernel socket, so
//! its readiness is true, and its reads and writes need shape for nothing.
//!
//! A blocking connect is held until then; a non-blocking one is answered
//! EINPROGRESS at once. A server that fails fails the command's connect
//! one round trip late too: a held one with the server's own error; one
//! in progress that the server refused is refused (`WaitingPort::refuse`, and
//! its `getsockopt(SO_ERROR)` answered ECONNREFUSED by shape), and one
//! that failed otherwise is reset (its wait at the waiting port is ended), said
//! once.
//!
//! A command that serves is given, for each connection it accepts, a
//! socket that came through the waiting port, and the relay carries the accepted
//! connection; but a connection from the command itself (a test suite's
//! client to its own server), which came through the link already, is
//! given as it is, so that it crosses the link once.

use super::{HeldCall, MOST_NAME, Supervisor, errno};
use crate::call::{self, Call};
use crate::kernel::{Notification, Response};
use crate::sockets::SocketKind;
use crate::waiting_port::{WaitingPort, local, unmapped};
use mio::{Interest, Token};
use rustix::net::{AddressFamily, SocketType};
use shape_impair::faults::Way;
use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Token of pending connect `d`'s server socket: `CONNECTS + d`.
pub(super) const CONNECTS: usize = usize::MAX / 2;

/// The most of shape's own ends of connections to loopback remembered.
const MOST_OWN_ENDS: usize = 4096;

/// Where shape's own connections to servers on loopback come from: a
/// connection the command accepts from one of them is the command's own,
/// through the link already. Past [`MOST_OWN_ENDS`], all are forgotten,
/// as `Sockets` forgets what it knows: one forgotten is relayed twice.
#[derive(Default)]
pub(super) struct OwnEnds(HashSet<SocketAddr>);

impl OwnEnds {
    fn insert(&mut self, end: SocketAddr) {
        if self.0.len() >= MOST_OWN_ENDS {
            self.0.clear();
        }
        self.0.insert(end);
    }

    /// Whether `end` is one, forgotten once asked: it connects once.
    fn take(&mut self, end: SocketAddr) -> bool {
        self.0.remove(&end)
    }
}

/// A connect under way through the link.
pub(super) struct PendingConnect {
    /// Shape's copy of the command's socket, until it is connected to the
    /// relay (kept no longer: the command's close must close it).
    socket: OwnedFd,
    /// The socket's inode, to know a connect again while this one runs.
    inode: (u64, u64),
    /// Where the connect to the server stands.
    server: ServerConnect,
    /// When the command's connect completes: one round trip after the
    /// server answered.
    pub(super) due: Option<u64>,
    /// The held call of a blocking connect, and its id, to answer then.
    caller: Option<(usize, u64)>,
}

/// Where a pending connect's own connect to the server stands.
/// Sockets whose connect shape refused and whose error the command has
/// not asked yet, by inode. A program that closes one without asking
/// leaves it here: the oldest are forgotten past [`RefusedConnects::MOST`].
#[derive(Default)]
pub(super) struct RefusedConnects {
    inodes: std::collections::VecDeque<(u64, u64)>,
}

impl RefusedConnects {
    const MOST: usize = 1024;

    fn insert(&mut self, inode: (u64, u64)) {
        if self.inodes.len() == Self::MOST {
            self.inodes.pop_front();
        }
        self.inodes.push_back(inode);
    }

    fn remove(&mut self, inode: (u64, u64)) {
        self.inodes.retain(|kept| *kept != inode);
    }

    fn contains(&self, inode: (u64, u64)) -> bool {
        self.inodes.contains(&inode)
    }

    fn is_empty(&self) -> bool {
        self.inodes.is_empty()
    }
}

enum ServerConnect {
    /// Under way.
    Connecting(mio::net::TcpStream),
    /// Connected, to be handed to the relay when due.
    Connected(mio::net::TcpStream),
    /// Failed with this errno.
    Failed(i32),
}

impl Supervisor<'_> {
    /// A `connect` of the command, where a link relays its connections:
    /// a TCP socket to an IP address is connecting through the link, a UDP
    /// socket connected to its destination's link; the rest are let
    /// through.
    pub(super) fn connect(&mut self, notification: Notification) {
        let Notification { tid, args, .. } = notification;
        let answer = |supervisor: &mut Self, response| supervisor.respond(&notification, response);
        if self.elsewhere(tid) {
            // Its loopback is not shape's: the waiting port is not there.
            return answer(self, Response::Continue);
        }
        let buffer = crate::sockets::buffer_for(&self.ways.buckets);
        let fd = args[0] as i32;
        let kind = self.sockets.kind(tid, fd, buffer);
        let datagrams = kind == SocketKind::Datagram && self.datagrams_linked();
        if kind != SocketKind::Stream && !datagrams {
            return answer(self, Response::Continue);
        }
        let (name_at, len) = (args[1], args[2] as u32);
        let mut raw = vec![0u8; (len as usize).min(MOST_NAME)];
        if super::read_exactly(tid, name_at, &mut raw).is_err() {
            return answer(self, Response::Continue);
        }
        let Some(server_at) = call::ip_address(&raw) else {
            return answer(self, Response::Continue);
        };
        let Ok(socket) = self.sockets.take(tid, fd) else {
            return answer(self, Response::Continue);
        };
        if datagrams {
            return self.connect_datagrams(&notification, socket.as_fd(), server_at);
        }
        let Ok(stat) = rustix::fs::fstat(&socket) else {
            return answer(self, Response::Continue);
        };
        let inode = (stat.st_dev, stat.st_ino);
        if self
            .connects
            .iter()
            .any(|(_, pending)| pending.inode == inode)
        {
            return answer(self, Response::Error(libc::EALREADY));
        }
        if rustix::net::getpeername(&socket).is_ok_and(|peer| peer.is_some()) {
            // Connected already: the kernel says so.
            return answer(self, Response::Continue);
        }
        match self.begin(socket, inode, server_at, &notification) {
            Ok(()) => {}
            Err(err) => answer(self, Response::Error(errno(&err))),
        }
    }

    /// Begins connecting to `server_at` for the command's `socket`: the server
    /// is connected to at once, and the socket is connected to the waiting port; the
    /// command's call waits (blocking) or is answered EINPROGRESS.
    fn begin(
        &mut self,
        socket: OwnedFd,
        inode: (u64, u64),
        server_at: SocketAddr,
        notification: &Notification,
    ) -> io::Result<()> {
        let family = rustix::net::sockopt::socket_domain(&socket)?;
        let server_at = unmapped(server_at);
        if family == AddressFamily::INET && server_at.is_ipv6() {
            return Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT));
        }
        let server = mio::net::TcpStream::connect(server_at)?;
        let _ = server.set_nodelay(true);
        if server_at.ip().is_loopback()
            && let Ok(end) = server.local_addr()
        {
            self.own_ends.insert(end);
        }
        WaitingPort::wait_at(socket.as_fd(), self.waiting_port(family)?)?;
        let nonblocking = rustix::fs::fcntl_getfl(&socket)
            .is_ok_and(|status| status.contains(rustix::fs::OFlags::NONBLOCK));
        let entry = self.connects.vacant_entry();
        let key = entry.key();
        let mut server = server;
        self.poll
            .registry()
            .register(&mut server, Token(CONNECTS + key), Interest::WRITABLE)?;
        let caller = match nonblocking {
            true => None,
            false => {
                let copy = socket.try_clone()?;
                let call = Call::Connect {
                    fd: notification.args[0] as i32,
                    name_at: notification.args[1],
                    len: notification.args[2] as u32,
                };
                let held = self.held.insert(HeldCall::new(*notification, copy, call));
                Some((held, notification.id))
            }
        };
        entry.insert(PendingConnect {
            socket,
            inode,
            server: ServerConnect::Connecting(server),
            due: None,
            caller,
        });
        if nonblocking {
            self.respond(notification, Response::Error(libc::EINPROGRESS));
        }
        Ok(())
    }

    /// PendingConnect `key`'s server socket had an event: once it is connected, or
    /// failed, the command's connect is due one round trip later.
    pub(super) fn connect_event(&mut self, key: usize) {
        let now = self.now();
        let round_trip = self.round_trip();
        let Some(pending) = self.connects.get_mut(key) else {
            return;
        };
        let ServerConnect::Connecting(server) = &mut pending.server else {
            return;
        };
        let failed = match server.take_error() {
            Ok(Some(err)) | Err(err) => Some(errno(&err)),
            Ok(None) => match server.peer_addr() {
                Ok(_) => None,
                Err(err) if err.kind() == io::ErrorKind::NotConnected => return,
                Err(err) => Some(errno(&err)),
            },
        };
        let _ = self.poll.registry().deregister(server);
        let state = std::mem::replace(
            &mut pending.server,
            ServerConnect::Failed(libc::ECONNABORTED),
        );
        pending.server = match (state, failed) {
            (_, Some(failed)) => ServerConnect::Failed(failed),
            (ServerConnect::Connecting(server), None) => ServerConnect::Connected(server),
            (other, None) => other,
        };
        pending.due = Some(now.saturating_add(round_trip));
    }

    /// The link's round trip now: its delay up and its delay down.
    fn round_trip(&self) -> u64 {
        let Some(relay) = &self.relay else {
            return 0;
        };
        let now = relay.conditions.now();
        shape_leaves::duration::nanos(now.delay(Way::Up) + now.delay(Way::Down))
    }

    /// Ends the connects that are due at `now`.
    pub(super) fn finish_due_connects(&mut self, now: u64) {
        let due: Vec<usize> = self
            .connects
            .iter()
            .filter(|(_, pending)| pending.due.is_some_and(|t| t <= now))
            .map(|(key, _)| key)
            .collect();
        for key in due {
            let pending = self.connects.remove(key);
            self.finish(pending);
        }
    }

    /// Answers the command's socket at the waiting port and hands the relay its
    /// server, or (the server failed) ends its wait; and answers the
    /// caller that waits.
    fn finish(&mut self, pending: PendingConnect) {
        let PendingConnect {
            socket,
            server,
            caller,
            inode,
            ..
        } = pending;
        let answer = match server {
            ServerConnect::Connected(server) => {
                let server = std::net::TcpStream::from(OwnedFd::from(server));
                self.carry(socket.as_fd(), server)
                    .map_err(|err| errno(&err))
            }
            ServerConnect::Failed(failed) => {
                // A connect in progress learns of a refusal as it would
                // from the server; the rest, and any that cannot be
                // refused, are dropped from the waiting port: reset.
                let refused = caller.is_none()
                    && failed == libc::ECONNREFUSED
                    && self.refuse(socket.as_fd(), inode).is_ok();
                if !refused {
                    let _ = rustix::net::connect_unspec(&socket);
                }
                if caller.is_none() && !refused && failed != libc::ECONNRESET {
                    let why =
                        shape_leaves::message::one_line(&io::Error::from_raw_os_error(failed));
                    self.say_once(
                        "failed",
                        &format!(
                            "shape: a connect through the link failed ({why}): one in progress \
                             is told its connection was reset"
                        ),
                    );
                }
                Err(failed)
            }
            // Not due before its server answered.
            ServerConnect::Connecting(_) => Err(libc::ECONNABORTED),
        };
        if let Some((held, id)) = caller
            && self.held.get(held).is_some_and(|h| h.notification.id == id)
        {
            let held = self.release(held);
            let response = match answer {
                Ok(()) => Response::Value(0),
                Err(errno) => Response::Error(errno),
            };
            self.respond(&held.notification, response);
        }
        // Now a socket of the relay's: no longer shaped here, nor kept.
        self.sockets.relayed(socket.as_fd());
    }

    /// Answers the command's `socket`, waiting at the waiting port, and hands
    /// shape's end to the relay with `server`.
    fn carry(&mut self, socket: BorrowedFd<'_>, server: std::net::TcpStream) -> io::Result<()> {
        let Some(relay) = &self.relay else {
            return Err(io::Error::from_raw_os_error(libc::ECONNABORTED));
        };
        let family = rustix::net::sockopt::socket_domain(socket)?;
        let ours = WaitingPort::complete(self.waiting_port(family)?, local(socket)?)?;
        relay.relay_loop.carry(ours, server);
        Ok(())
    }

    /// Ends `socket`'s connect in progress at the waiting port with ECONNREFUSED.
    /// Dropping its wait wakes the command before the refusal lands: its
    /// error is then asked of shape (`socket_error`), which says refused.
    fn refuse(&mut self, socket: BorrowedFd<'_>, inode: (u64, u64)) -> io::Result<()> {
        let family = rustix::net::sockopt::socket_domain(socket)?;
        let Some(waiting_ports) = &self.waiting_ports else {
            return Err(io::Error::from_raw_os_error(libc::ECONNABORTED));
        };
        let closed = waiting_ports.closed_for(family);
        self.refused.insert(inode);
        WaitingPort::refuse(socket, closed).inspect_err(|_| self.refused.remove(inode))
    }

    /// A `getsockopt(SO_ERROR)` of the command's: a socket shape refused
    /// is told ECONNREFUSED (once); the rest are answered by the kernel.
    pub(super) fn socket_error(&mut self, notification: &Notification) {
        let Notification { tid, args, .. } = *notification;
        let fd = args[0] as i32;
        let inode = match self.refused.is_empty() {
            true => None,
            false => rustix::fs::stat(format!("/proc/{tid}/fd/{fd}"))
                .ok()
                .map(|stat| (stat.st_dev, stat.st_ino)),
        };
        let Some(inode) = inode.filter(|inode| self.refused.contains(*inode)) else {
            return self.respond(notification, Response::Continue);
        };
        let (value_at, length_at) = (args[3], args[4]);
        let mut length = [0u8; 4];
        if super::read_exactly(tid, length_at, &mut length).is_err()
            || u32::from_ne_bytes(length) < 4
        {
            return self.respond(notification, Response::Continue);
        }
        let told = super::moves::write_exactly(tid, value_at, &libc::ECONNREFUSED.to_ne_bytes())
            .and_then(|()| super::moves::write_exactly(tid, length_at, &4u32.to_ne_bytes()));
        match told {
            Ok(()) => {
                self.refused.remove(inode);
                self.respond(notification, Response::Value(0));
            }
            Err(err) => self.respond(notification, Response::Error(errno(&err))),
        }
    }

    /// The waiting port a socket of `family` is connected to.
    fn waiting_port(&self, family: AddressFamily) -> io::Result<SocketAddr> {
        match &self.waiting_ports {
            Some(waiting_ports) => Ok(waiting_ports.for_family(family)),
            None => Err(io::Error::from_raw_os_error(libc::ECONNABORTED)),
        }
    }

    /// An `accept` where a link relays connections: `connection`, just
    /// accepted by shape, goes to the relay, and the command is given a
    /// socket that came through the waiting port in its place.
    pub(super) fn relay_accepted(&mut self, connection: OwnedFd) -> io::Result<OwnedFd> {
        let peer = rustix::net::getpeername(&connection).ok().flatten();
        let peer = peer.and_then(|peer| SocketAddr::try_from(peer).ok());
        if peer.is_some_and(|peer| self.own_ends.take(unmapped(peer))) {
            return Ok(connection);
        }
        let socket = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None)?;
        WaitingPort::wait_at(socket.as_fd(), self.waiting_port(AddressFamily::INET)?)?;
        self.carry(socket.as_fd(), std::net::TcpStream::from(connection))?;
        Ok(socket)
    }
}
