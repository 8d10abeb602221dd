//! `shape` passes a byte stream through at a controlled rate.
//!
//! The heart of it is [`bucket::TokenBucket`], an exact, lock-free token
//! bucket whose tokens are bytes; [`clock`] gives it time.

pub mod bucket;
pub mod clock;
pub mod rate;
pub mod sync;
