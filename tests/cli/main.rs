//! Integration tests: the real `shape` binary, driven as a user drives it.

mod harness;

mod container;
mod counting;
mod damage;
mod dashboard;
mod exactness;
mod exec;
mod exec_link;
mod failures;
mod faults;
mod fleet;
mod fleet_hosted;
mod generated;
mod links;
mod live;
mod net;
mod options;
mod proxy;
mod proxy_faults;
mod records;
mod serve;
mod serve_clients;
mod serve_extras;
mod serve_hostile;
mod serve_toxics;
mod share;
mod slow_link;
mod timing;
mod toxiproxy_cli;
mod traces;
mod udp;
mod usage;
