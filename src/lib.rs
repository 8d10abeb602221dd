//! `shape` passes a byte stream through at a controlled rate.
//!
//! The heart of it is [`bucket::TokenBucket`], an exact, lock-free token
//! bucket whose tokens are bytes, running on a [`clock::Clock`]. [`copy`]
//! pumps data through a bucket; [`link`] and [`delayed`] make a link slow
//! beyond its rate (latency, jitter, a bounded buffer); [`share`] puts a bucket in memory shared by
//! several processes; [`control`], [`signals`] and [`live`] change a running
//! shape; [`app`] is the command built on them all.
//!
//! Under the loom model checker (`--cfg loom`) only the bucket and what it
//! needs are built.

#[cfg(not(loom))]
pub mod app;
pub mod bucket;
#[cfg(not(loom))]
pub mod cli;
pub mod clock;
#[cfg(not(loom))]
pub mod control;
pub mod copy;
#[cfg(not(loom))]
pub mod delayed;
#[cfg(not(loom))]
pub mod generate;
#[cfg(not(loom))]
pub mod link;
#[cfg(not(loom))]
pub mod live;
#[cfg(not(loom))]
pub mod message;
#[cfg(not(loom))]
pub mod net;
pub mod progress;
#[cfg(not(loom))]
pub mod proxy;
pub mod rate;
pub mod schedule;
#[cfg(not(loom))]
pub mod share;
#[cfg(not(loom))]
pub mod signals;
pub mod size;
pub mod sync;
