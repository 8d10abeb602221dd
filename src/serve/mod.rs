//! `shape --serve`: toxiproxy's HTTP API over shape's proxies. Work in
//! progress on this branch: the API's model ([`model`]), its toxics
//! ([`toxics`]), its routes ([`routes`]), the HTTP thread ([`http`]) and
//! what each toxic asks of shape ([`carry`]) are done and tested; the
//! proxies on the one event loop, applying those effects per connection
//! and stream, are not.
//!
//! Held against the real toxiproxy 2.12.0 so far: status codes and error
//! words of every proxy and toxic route in the model agree. Open: a proxy
//! created without `listen` binds `[::]:0` in toxiproxy (all interfaces),
//! and a toxicity of 1 is printed `1` there, `1.0` here.
pub mod carry;
pub mod http;
pub mod model;
pub mod routes;
pub mod toxics;
