//! `shape` passes a byte stream through at a controlled rate.
//!
//! The heart of it is [`bucket::TokenBucket`], an exact, lock-free token
//! bucket whose tokens are bytes, running on a [`clock::Clock`]. [`copy`]
//! pumps data through a bucket; [`app`] is the command built on them.

#[cfg(not(loom))]
pub mod app;
pub mod bucket;
pub mod cli;
pub mod clock;
#[cfg(not(loom))]
pub mod control;
pub mod copy;
pub mod generate;
#[cfg(not(loom))]
pub mod live;
pub mod progress;
pub mod rate;
pub mod schedule;
#[cfg(not(loom))]
pub mod share;
#[cfg(not(loom))]
pub mod signals;
pub mod size;
pub mod sync;
