//! The sockets of the proxy: the listener and both sides of every
//! connection, TCP or Unix, as one type each for the event loop.

use crate::Listening;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

/// Where clients come in.
pub(super) enum Listener {
    Tcp(TcpListener),
    /// A Unix socket and its path, removed when it closes.
    Unix(UnixListener, std::path::PathBuf),
}

impl Drop for Listener {
    /// A Unix socket's file is removed with it, so that a proxy closed,
    /// or a server stopped, leaves nothing behind.
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// One side of a connection, and what the system last said of it.
///
/// A connection is stepped whole, both ways, when either side has an
/// event or a deadline of its own comes, so most steps find one side with
/// nothing to read: asked anyway, it costs a system call that says so
/// (a third of the calls of a thousand slow connections). The sockets are
/// watched edge-triggered, so a side that would block stays so until its
/// next event, and is not asked again before it.
pub(super) struct Stream {
    socket: Socket,
    /// A read would block: nothing came since the last one said so.
    dry: bool,
    /// A write would block: no room was made since the last one said so.
    full: bool,
}

enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(super) fn tcp(stream: TcpStream) -> Stream {
        Stream::of(Socket::Tcp(stream))
    }

    pub(super) fn unix(stream: UnixStream) -> Stream {
        Stream::of(Socket::Unix(stream))
    }

    fn of(socket: Socket) -> Stream {
        Stream {
            socket,
            dry: false,
            full: false,
        }
    }

    /// Takes an event of its socket: whatever it was (data, room, an end
    /// or an error), reads and writes are worth trying again.
    pub(super) fn stirred(&mut self) {
        self.dry = false;
        self.full = false;
    }

    pub(super) fn source(&mut self) -> &mut dyn mio::event::Source {
        match &mut self.socket {
            Socket::Tcp(s) => s,
            Socket::Unix(s) => s,
        }
    }

    pub(super) fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        unless_blocked(&mut self.full, || match &mut self.socket {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        })
    }

    /// Makes `call`, which takes bytes out of the socket (a splice), on
    /// its descriptor, as a read: a socket with nothing now is dry until
    /// its next event.
    pub(super) fn read_with<T>(
        &mut self,
        call: impl FnOnce(BorrowedFd<'_>) -> io::Result<T>,
    ) -> io::Result<T> {
        let fd = self.socket.fd();
        unless_blocked(&mut self.dry, || call(fd))
    }

    /// Makes `call`, which puts bytes into the socket (a splice), on its
    /// descriptor, as a write: a socket with no room now is full until
    /// its next event.
    pub(super) fn write_with<T>(
        &mut self,
        call: impl FnOnce(BorrowedFd<'_>) -> io::Result<T>,
    ) -> io::Result<T> {
        let fd = self.socket.fd();
        unless_blocked(&mut self.full, || call(fd))
    }

    pub(super) fn shutdown_write(&self) -> io::Result<()> {
        match &self.socket {
            Socket::Tcp(s) => s.shutdown(Shutdown::Write),
            Socket::Unix(s) => s.shutdown(Shutdown::Write),
        }
    }

    /// This socket's own address, if it is a TCP one.
    pub(super) fn local_tcp(&self) -> Option<std::net::SocketAddr> {
        match &self.socket {
            Socket::Tcp(s) => s.local_addr().ok(),
            Socket::Unix(_) => None,
        }
    }

    /// The address of its peer, if it is a TCP socket.
    pub(super) fn peer_tcp(&self) -> Option<std::net::SocketAddr> {
        match &self.socket {
            Socket::Tcp(s) => s.peer_addr().ok(),
            Socket::Unix(_) => None,
        }
    }

    /// Makes the close that follows a reset rather than an orderly end.
    pub(super) fn reset_on_close(&self) {
        let fd = self.socket.fd();
        let _ = rustix::net::sockopt::set_socket_linger(fd, Some(Duration::ZERO));
    }
}

impl Stream {
    /// Its socket as the standard library's, for a library of its own to
    /// carry on, if it is a TCP one (it stays non-blocking); else itself.
    pub(super) fn into_std_tcp(self) -> Result<std::net::TcpStream, Stream> {
        match self.socket {
            Socket::Tcp(s) => Ok(std::net::TcpStream::from(std::os::fd::OwnedFd::from(s))),
            socket => Err(Stream::of(socket)),
        }
    }

    /// True if its socket is a TCP one.
    pub(super) fn is_tcp(&self) -> bool {
        matches!(self.socket, Socket::Tcp(_))
    }
}

impl Socket {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Socket::Tcp(s) => s.as_fd(),
            Socket::Unix(s) => s.as_fd(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        unless_blocked(&mut self.dry, || match &mut self.socket {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        })
    }
}

/// Would block at once if `blocked` says the last try did, with no event
/// since; else makes the `call`, and notes whether it would block.
fn unless_blocked<T>(blocked: &mut bool, call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    if *blocked {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    let done = call();
    *blocked = done
        .as_ref()
        .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock);
    done
}

impl Listener {
    /// A non-blocking listener for poll, from one bound by [`Address::listen`](crate::Address::listen).
    pub(super) fn from_listening(listening: Listening) -> io::Result<Listener> {
        match listening {
            Listening::Tcp(listener) => {
                listener.set_nonblocking(true)?;
                Ok(Listener::Tcp(TcpListener::from_std(listener)))
            }
            Listening::Unix(listener, path) => {
                listener.set_nonblocking(true)?;
                Ok(Listener::Unix(UnixListener::from_std(listener), path))
            }
        }
    }

    pub(super) fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Listener::Tcp(l) => l,
            Listener::Unix(l, _) => l,
        }
    }

    /// Accepts a client, and describes it for messages.
    pub(super) fn accept(&mut self, listen: &str) -> io::Result<(Stream, String)> {
        match self {
            Listener::Tcp(l) => l.accept().map(|(s, peer)| {
                let _ = s.set_nodelay(true);
                (Stream::tcp(s), format!("connection from {peer}"))
            }),
            // Unix clients are rarely bound to a name: say where they came.
            Listener::Unix(l, _) => l
                .accept()
                .map(|(s, _)| (Stream::unix(s), format!("connection on {listen}"))),
        }
    }
}
