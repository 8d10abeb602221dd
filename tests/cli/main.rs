//! Integration tests: the real `shape` binary, driven as a user drives it.
//! Tests of `--serve`, `--exec` and fleets are built only with their
//! features.

// Without them, helpers only their tests use are unused: the full build,
// which CI lints, is where dead code is caught.
#![cfg_attr(
    not(all(feature = "serve", feature = "exec", feature = "fleet")),
    allow(dead_code, unused_imports)
)]

mod harness;

#[cfg(feature = "serve")]
mod container;
mod counting;
mod damage;
#[cfg(feature = "serve")]
mod dashboard;
mod exactness;
#[cfg(feature = "exec")]
mod exec;
#[cfg(feature = "exec")]
mod exec_link;
mod failures;
mod faults;
#[cfg(feature = "fleet")]
mod fleet;
#[cfg(feature = "fleet")]
mod fleet_hosted;
mod generated;
#[cfg(feature = "http")]
mod http2_faults;
#[cfg(feature = "http")]
mod http_faults;
mod layout;
mod links;
mod live;
#[cfg(feature = "exec")]
mod loss;
mod net;
mod options;
mod pipe_quota;
mod proxy;
mod proxy_faults;
mod records;
#[cfg(feature = "serve")]
mod serve;
#[cfg(feature = "serve")]
mod serve_clients;
#[cfg(feature = "serve")]
mod serve_extras;
#[cfg(feature = "serve")]
mod serve_hostile;
#[cfg(feature = "serve")]
mod serve_toxics;
mod share;
mod slow_link;
#[cfg(feature = "exec")]
mod terminal;
mod timing;
#[cfg(feature = "serve")]
mod toxiproxy_cli;
mod traces;
mod udp;
mod usage;
