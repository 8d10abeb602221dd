//! The sockets of the proxy: the listener and both sides of every
//! connection, TCP or Unix, as one type each for the event loop.

use crate::net::Listening;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsFd;
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

/// One side of a connection.
pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(super) fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }

    pub(super) fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    pub(super) fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Write),
            Stream::Unix(s) => s.shutdown(Shutdown::Write),
        }
    }

    /// Makes the close that follows a reset rather than an orderly end.
    /// This socket's own address, if it is a TCP one.
    pub(super) fn local_tcp(&self) -> Option<std::net::SocketAddr> {
        match self {
            Stream::Tcp(s) => s.local_addr().ok(),
            Stream::Unix(_) => None,
        }
    }

    /// The address of its peer, if it is a TCP socket.
    pub(super) fn peer_tcp(&self) -> Option<std::net::SocketAddr> {
        match self {
            Stream::Tcp(s) => s.peer_addr().ok(),
            Stream::Unix(_) => None,
        }
    }

    pub(super) fn reset_on_close(&self) {
        let fd = match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        };
        let _ = rustix::net::sockopt::set_socket_linger(fd, Some(Duration::ZERO));
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Listener {
    /// A non-blocking listener for poll, from one bound by [`Address::listen`](crate::net::Address::listen).
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
                (Stream::Tcp(s), format!("connection from {peer}"))
            }),
            // Unix clients are rarely bound to a name: say where they came.
            Listener::Unix(l, _) => l
                .accept()
                .map(|(s, _)| (Stream::Unix(s), format!("connection on {listen}"))),
        }
    }
}
