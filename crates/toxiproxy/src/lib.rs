//! `shape --serve`: toxiproxy's HTTP API over shape's proxies, so that a
//! test suite written for toxiproxy changes nothing but the binary it
//! starts.
//!
//! The API's model ([`model`]: proxies, toxics, their defaults and
//! errors, from the one table of toxics in [`toxics`]) answers each route
//! ([`api`]) behind the HTTP server and its guard ([`http`]); each change
//! is carried out on the event loops that the proxy mode uses
//! ([`proxies`]), where every proxy is a route whose rules are its
//! toxics, each toxic carried out by shape's own bucket, delay line or
//! faults ([`carry`]). The dashboard at `/` reads the same model and
//! what flows through the proxies; the server's life (starting,
//! `--config`, signals) is `server/`.
//!
//! Outside tests, each module depends only on those before it in this
//! order: `toxics`, `model`, `reply` (what a request gets back), `carry`,
//! `dashboard`, `api`, `proxies`, `http`, `server`; and `fuzzing` drives
//! `api` with nothing carried out.
//!
//! Held against the real toxiproxy 2.12.0: status codes and error words
//! of every route agree. Where shape differs on purpose: a proxy created
//! without `listen` listens on localhost (toxiproxy: every interface), an
//! upstream that is not `host:port` is refused when the proxy starts, and
//! a malformed body is refused in shape's words rather than Go's
//! decoder's.

#![forbid(unsafe_code)]

pub mod api;
pub mod carry;
mod dashboard;
pub mod fuzzing;
pub mod http;
pub mod model;
pub mod proxies;
mod reply;
mod server;
pub mod toxics;

pub use proxies::Extras;
pub use server::{ConfigFile, Refused, Serving, run};
