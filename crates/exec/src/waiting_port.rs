//! The link's waiting port: a loopback port where a command's connect waits,
//! unanswered, until shape answers it. A TCP socket whose connect is in
//! progress is what a program expects while a link's round trip passes:
//! poll, select and epoll see it neither readable nor writable, its error
//! is none and it has no peer yet. The kernel keeps it so by itself: the
//! waiting port is a listener whose one place in its queue is taken, so the
//! connect's SYN is dropped and it waits in SYN-SENT. Shape answers it
//! with a socket of its own bound to the same port (both with
//! SO_REUSEPORT) that connects back to the command's socket: a
//! simultaneous open, which completes the command's connect on the spot.
//! Shape's socket then carries the connection, through the relay.
//!
//! A connect whose server refused is refused in turn, as on a real link:
//! shape drops the command's socket's wait at the waiting port and connects it
//! afresh to a port of shape's that is bound and not listening, whose
//! kernel answers the SYN with a reset, so that the connect in progress
//! ends with ECONNREFUSED, as one to the server itself would.

use rustix::net::{AddressFamily, SocketType, sockopt};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// A waiting port on one loopback address.
pub struct WaitingPort {
    at: SocketAddr,
    /// The listener, and the connection that fills its queue.
    _held: [OwnedFd; 2],
    /// A port bound and not listening: a connect there is refused.
    closed: (SocketAddr, OwnedFd),
}

impl WaitingPort {
    /// A waiting port on IPv4's loopback, or IPv6's.
    pub fn open(v6: bool) -> io::Result<WaitingPort> {
        let (family, loopback) = match v6 {
            true => (
                AddressFamily::INET6,
                SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
            ),
            false => (
                AddressFamily::INET,
                SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            ),
        };
        let listener = reusing_socket(family)?;
        rustix::net::bind(&listener, &loopback)?;
        // A backlog of none holds one connection: with it queued and
        // never accepted, every later SYN is dropped.
        rustix::net::listen(&listener, 0)?;
        let at = local(listener.as_fd())?;
        let filler = rustix::net::socket(family, SocketType::STREAM, None)?;
        rustix::net::connect(&filler, &at)?;
        let closed = rustix::net::socket(family, SocketType::STREAM, None)?;
        rustix::net::bind(&closed, &loopback)?;
        Ok(WaitingPort {
            at,
            _held: [listener, filler],
            closed: (local(closed.as_fd())?, closed),
        })
    }

    /// Ends the connect of `socket`, in progress at a waiting port, with
    /// ECONNREFUSED: its wait is dropped and it connects afresh to
    /// `closed`, which the kernel refuses. (Dropping the wait alone
    /// would end it with ECONNRESET.)
    pub fn refuse(socket: BorrowedFd<'_>, closed: SocketAddr) -> io::Result<()> {
        rustix::net::connect_unspec(socket)?;
        // The reset that dropping the wait leaves is not the command's.
        let _ = sockopt::socket_error(socket);
        let status = rustix::fs::fcntl_getfl(socket)?;
        let blocking = !status.contains(rustix::fs::OFlags::NONBLOCK);
        if blocking {
            rustix::fs::fcntl_setfl(socket, status | rustix::fs::OFlags::NONBLOCK)?;
        }
        let refused = rustix::net::connect(socket, &closed);
        if blocking {
            let _ = rustix::fs::fcntl_setfl(socket, status);
        }
        match refused {
            // The reset comes after: the socket keeps its error for the
            // command to read.
            Err(rustix::io::Errno::INPROGRESS) => Ok(()),
            Ok(()) => Err(io::Error::from_raw_os_error(libc::EISCONN)),
            Err(err) => Err(err.into()),
        }
    }

    /// Where the waiting port is.
    pub fn at(&self) -> SocketAddr {
        self.at
    }

    /// Begins `socket`'s connect to `waiting port`, which waits there until
    /// answered; a blocking socket is made non-blocking for the call.
    pub fn wait_at(socket: BorrowedFd<'_>, waiting_port: SocketAddr) -> io::Result<()> {
        let status = rustix::fs::fcntl_getfl(socket)?;
        let blocking = !status.contains(rustix::fs::OFlags::NONBLOCK);
        if blocking {
            rustix::fs::fcntl_setfl(socket, status | rustix::fs::OFlags::NONBLOCK)?;
        }
        let connected = rustix::net::connect(socket, &waiting_port);
        if blocking {
            let _ = rustix::fs::fcntl_setfl(socket, status);
        }
        match connected {
            Ok(()) | Err(rustix::io::Errno::INPROGRESS) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Answers the connect waiting at `waiting port` from `peer`: returns shape's
    /// end of the connection, whose handshake the kernel completes.
    pub fn complete(waiting_port: SocketAddr, peer: SocketAddr) -> io::Result<std::net::TcpStream> {
        let peer = unmapped(peer);
        let waiting_port = unmapped(waiting_port);
        let family = match waiting_port {
            SocketAddr::V4(_) => AddressFamily::INET,
            SocketAddr::V6(_) => AddressFamily::INET6,
        };
        let socket = reusing_socket(family)?;
        rustix::net::bind(&socket, &waiting_port)?;
        rustix::fs::fcntl_setfl(&socket, rustix::fs::OFlags::NONBLOCK)?;
        match rustix::net::connect(&socket, &peer) {
            Ok(()) | Err(rustix::io::Errno::INPROGRESS) => {}
            Err(err) => return Err(err.into()),
        }
        Ok(std::net::TcpStream::from(socket))
    }
}

/// The waiting ports of both loopbacks: IPv6's where it has one.
pub struct WaitingPorts {
    v4: WaitingPort,
    v6: Option<WaitingPort>,
}

impl WaitingPorts {
    pub fn open() -> io::Result<WaitingPorts> {
        Ok(WaitingPorts {
            v4: WaitingPort::open(false)?,
            v6: WaitingPort::open(true).ok(),
        })
    }

    /// Where a socket of `family` waits: IPv4's waiting port, mapped, for an
    /// IPv6 socket where loopback has no IPv6.
    pub fn for_family(&self, family: AddressFamily) -> SocketAddr {
        match (family == AddressFamily::INET6, &self.v6) {
            (false, _) => self.v4.at(),
            (true, Some(v6)) => v6.at(),
            (true, None) => mapped(self.v4.at()),
        }
    }

    /// Where a socket of `family` is refused: a closed port of IPv4's
    /// loopback, mapped, where loopback has no IPv6.
    pub fn closed_for(&self, family: AddressFamily) -> SocketAddr {
        match (family == AddressFamily::INET6, &self.v6) {
            (false, _) => self.v4.closed.0,
            (true, Some(v6)) => v6.closed.0,
            (true, None) => mapped(self.v4.closed.0),
        }
    }

    /// Whether loopback has IPv6 (and so a waiting port there).
    pub fn has_v6(&self) -> bool {
        self.v6.is_some()
    }

    /// Every address a socket that came through a waiting port has as its peer.
    pub fn all(&self) -> Vec<SocketAddr> {
        let v4 = self.v4.at();
        [
            Some(v4),
            Some(mapped(v4)),
            self.v6.as_ref().map(WaitingPort::at),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// A TCP socket that may share its port with the waiting port's others.
fn reusing_socket(family: AddressFamily) -> io::Result<OwnedFd> {
    let socket = rustix::net::socket(family, SocketType::STREAM, None)?;
    sockopt::set_socket_reuseport(&socket, true)?;
    Ok(socket)
}

/// Where `socket` is bound.
pub fn local(socket: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    SocketAddr::try_from(rustix::net::getsockname(socket)?)
        .map_err(|_| io::Error::from_raw_os_error(libc::EAFNOSUPPORT))
}

/// `at` as IPv4 where it is an IPv4 address mapped into IPv6.
pub fn unmapped(at: SocketAddr) -> SocketAddr {
    match at {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => at,
        },
        v4 => v4,
    }
}

/// `at` as IPv6, an IPv4 address mapped.
pub fn mapped(at: SocketAddr) -> SocketAddr {
    match at {
        SocketAddr::V4(v4) => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
        v6 => v6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::event::{PollFd, PollFlags};
    use std::io::{Read, Write};

    /// What poll says of `socket` at once.
    fn readiness(socket: BorrowedFd<'_>) -> PollFlags {
        let mut look = [PollFd::new(&socket, PollFlags::IN | PollFlags::OUT)];
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        rustix::event::poll(&mut look, Some(&zero)).unwrap();
        look[0].revents()
    }

    #[test]
    fn a_connect_in_progress_at_the_waiting_port_is_refused_when_told() {
        let waiting_ports = WaitingPorts::open().unwrap();
        for _ in 0..20 {
            let socket =
                rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
            rustix::fs::fcntl_setfl(&socket, rustix::fs::OFlags::NONBLOCK).unwrap();
            WaitingPort::wait_at(
                socket.as_fd(),
                waiting_ports.for_family(AddressFamily::INET),
            )
            .unwrap();
            assert!(readiness(socket.as_fd()).is_empty());
            WaitingPort::refuse(
                socket.as_fd(),
                waiting_ports.closed_for(AddressFamily::INET),
            )
            .unwrap();
            // Refused, as by a server: ready to be told so, and told.
            let mut look = [PollFd::new(&socket, PollFlags::OUT)];
            rustix::event::poll(&mut look, None).unwrap();
            assert!(look[0].revents().contains(PollFlags::ERR));
            assert_eq!(
                sockopt::socket_error(&socket).unwrap(),
                Err(rustix::io::Errno::CONNREFUSED)
            );
        }
    }

    #[test]
    fn a_connect_waits_at_the_waiting_port_until_answered_then_carries_bytes() {
        let waiting_port = WaitingPort::open(false).unwrap();
        let socket = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        WaitingPort::wait_at(socket.as_fd(), waiting_port.at()).unwrap();
        // In progress, and it stays so (time is what this tests): nothing
        // ready, no error, no peer.
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(readiness(socket.as_fd()).is_empty());
        assert_eq!(sockopt::socket_error(&socket).unwrap(), Ok(()));
        assert!(rustix::net::getpeername(&socket).is_err());
        let from = local(socket.as_fd()).unwrap();
        let mut ours = WaitingPort::complete(waiting_port.at(), from).unwrap();
        ours.set_nonblocking(false).unwrap();
        let mut theirs = std::net::TcpStream::from(socket);
        theirs.write_all(b"over the link").unwrap();
        let mut got = [0u8; 13];
        ours.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"over the link");
        assert_eq!(theirs.peer_addr().unwrap(), waiting_port.at());
    }

    #[test]
    fn a_blocking_socket_waits_without_waiting_and_stays_blocking() {
        let waiting_port = WaitingPort::open(false).unwrap();
        let socket = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        WaitingPort::wait_at(socket.as_fd(), waiting_port.at()).unwrap();
        let status = rustix::fs::fcntl_getfl(&socket).unwrap();
        assert!(!status.contains(rustix::fs::OFlags::NONBLOCK));
    }

    #[test]
    fn addresses_are_mapped_and_unmapped() {
        let v4 = SocketAddr::from(([127, 0, 0, 1], 80));
        assert_eq!(unmapped(mapped(v4)), v4);
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        assert_eq!(unmapped(v6), v6);
        assert_eq!(mapped(v6), v6);
    }
}
