//! Sockets: addresses to listen on and connect to, one connection as a
//! copy's input or output ([`address`]), and the shaping [`proxy`].

mod address;
pub(crate) mod alarm;
pub(crate) mod deadlines;
pub mod low_ports;
pub mod proxy;
mod resources;
pub mod udp;

pub use address::{Address, Listening, finish, parse_connect, parse_timeout};
pub use resources::{ACCEPT_PAUSE, deepen_backlog, out_of_resources};
