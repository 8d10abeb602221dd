//! Where a proxy's connection goes when its client speaks HTTP/2 and a
//! route's HTTP rules are to meet its streams: a relay on the field's
//! HTTP/2 library, on threads of its own, takes both sockets from the
//! loop (see `http_gate.rs`, which finds the client's preface).

/// Takes over connections whose client speaks HTTP/2.
pub trait Handoff: Send + Sync {
    /// Takes over a connection, from the loop that found it speaks HTTP/2.
    fn take(&self, handed: Handed);
}

/// A connection handed over: both sockets (non-blocking), and what each
/// side sent that the loop read and did not pass on.
pub struct Handed {
    pub client: std::net::TcpStream,
    pub server: std::net::TcpStream,
    pub from_client: Vec<u8>,
    pub from_server: Vec<u8>,
    /// Who it is, for messages: `connection from 127.0.0.1:41234`.
    pub peer: String,
}
