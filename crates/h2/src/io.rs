//! A client's socket handed over, as tokio reads and writes it, with
//! what the proxy's loop had read from it already put back in front.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A socket whose first bytes to read were read already, and are read
/// again from here.
pub struct Replayed {
    socket: TcpStream,
    first: Vec<u8>,
    /// How much of `first` has been read again.
    at: usize,
}

impl Replayed {
    /// `socket` (non-blocking, as the loop had it), with `first` read
    /// before it: to be read from here first. Needs a runtime.
    pub fn new(socket: std::net::TcpStream, first: Vec<u8>) -> io::Result<Replayed> {
        Ok(Replayed {
            socket: TcpStream::from_std(socket)?,
            first,
            at: 0,
        })
    }
}

impl AsyncRead for Replayed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.first.len() {
            let left = &this.first[this.at..];
            let len = left.len().min(buf.remaining());
            buf.put_slice(&left[..len]);
            this.at += len;
            if this.at == this.first.len() {
                this.first = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.socket).poll_read(cx, buf)
    }
}

impl AsyncWrite for Replayed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.socket).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_shutdown(cx)
    }
}
