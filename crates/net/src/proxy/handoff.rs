//! Where a proxy's connection goes when its client speaks HTTP/2 and a
//! route's HTTP rules are to meet its streams: a relay on the field's
//! HTTP/2 library, on threads of its own, takes the client's socket from
//! the loop (see `http_gate.rs`, which finds the client's preface) and
//! speaks to the server through a socket pair whose other end takes the
//! client's place in the loop: the link to the server stays the loop's,
//! paced, delayed and faulted as before.

/// Takes over connections whose client speaks HTTP/2.
pub trait Handoff: Send + Sync {
    /// Takes over a connection, from the loop that found it speaks HTTP/2.
    fn take(&self, handed: Handed);
}

/// A connection handed over: the client's socket and what it sent that
/// the loop read (the preface and more), and the relay's end of the pair
/// through which it reaches the server; both non-blocking.
pub struct Handed {
    pub client: std::net::TcpStream,
    pub from_client: Vec<u8>,
    pub server: std::os::unix::net::UnixStream,
    /// Who it is, for messages: `connection from 127.0.0.1:41234`.
    pub peer: String,
}
