//! Sockets: addresses to listen on and connect to, one connection as a
//! copy's input or output ([`address`]), the shaping [`proxy`] and its
//! loop, UDP links ([`udp`]), and splice(2) with the pipes it needs
//! ([`splice`]), which the copy and `--exec` use too. It builds on the
//! impairments (`shape_impair`) and the leaves, and knows nothing of the
//! command line or of how a run is controlled.

#![forbid(unsafe_code)]

mod address;
pub mod deadlines;
pub mod low_ports;
mod pipe_quota;
pub mod proxy;
mod resources;
pub mod splice;
pub mod udp;
pub mod waiting;

pub use address::{Address, Listening, finish, parse_connect, parse_timeout};
pub use resources::{ACCEPT_PAUSE, deepen_backlog, loops_per_core, out_of_resources};

// What this crate builds on, named at its root as its own
// (`shape_impair::faults`).
