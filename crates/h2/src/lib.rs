//! HTTP/2 through shape's proxies. A proxy's loop hands over the client
//! of a connection that sent HTTP/2's preface ([`shape_net::proxy::handoff`]);
//! here it is carried on the h2 crate: shape is the HTTP/2 server its
//! client meets and an HTTP/2 client of its upstream (reached through the
//! loop, which paces and delays that link as any), and each stream is
//! put to the proxy's HTTP rules ([`shape_http::rule::LiveRule`]) on its
//! own. A stream a rule picks is answered (a status, or a gRPC status
//! trailers only), held, never answered, reset (RST_STREAM) or cut, while
//! the connection's other streams go on, flow control included. The rest
//! are carried as they came: their header fields, data and trailers.
//!
//! The relay runs on a runtime of its own, on threads of its own, apart
//! from the proxy's loops.

#![forbid(unsafe_code)]

pub mod fuzzing;
mod io;
mod relay;
mod streams;

pub use relay::Http2Relay;
