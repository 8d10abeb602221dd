//! An exact, lock-free token bucket whose tokens are bytes.
//!
//! [`TokenBucket`] refills at a [`Limit`] (a [`Rate`] in bytes per second,
//! or unlimited) and holds at most a burst. Its whole mutable state is one
//! `AtomicU64`; its arithmetic is exact from 1 B/s to 128 TiB/s, so a
//! million `acquire(1)` end at the same nanosecond as one
//! `acquire(1_000_000)`; the rate, the burst and a pause can change while
//! other threads sleep in it, and they wake at once to the new schedule.
//! Sleeps are computed from the token deficit: nothing polls.
//!
//! Time comes from a [`Clock`]: [`MonotonicClock`] (the machine's
//! `CLOCK_MONOTONIC`, with futex sleeps, so that a bucket's cell can even
//! live in memory shared by several processes) or [`FakeClock`], which
//! tests move by hand.
//!
//! Several threads spending from one bucket:
//!
//! ```
//! use shape_bucket::{Limit, TokenBucket};
//! use std::sync::Arc;
//! use std::time::Instant;
//!
//! // 1 MiB/s, at most 64 KiB at once; the bucket starts full.
//! let bucket = Arc::new(TokenBucket::new(Limit::per_second(1 << 20), 64 << 10).unwrap());
//! let started = Instant::now();
//! let workers: Vec<_> = (0..4)
//!     .map(|_| {
//!         let bucket = bucket.clone();
//!         std::thread::spawn(move || {
//!             for _ in 0..8 {
//!                 // Sleeps for as long as the deficit takes; fails only on a
//!                 // damaged cell, and this one is the process's own.
//!                 bucket.acquire(8 << 10).unwrap();
//!             }
//!         })
//!     })
//!     .collect();
//! for worker in workers {
//!     worker.join().unwrap();
//! }
//! // 256 KiB, of which 64 KiB came at once: 192 KiB at 1 MiB/s.
//! assert!(started.elapsed().as_secs_f64() >= 0.18);
//! ```
//!
//! Shaping any reader or writer: see [`Shaped`].
//!
//! Under the loom model checker (`RUSTFLAGS="--cfg loom"`) the bucket runs
//! on loom's atomics, so that `tests/loom.rs` explores every interleaving of
//! the code that ships.
#![forbid(unsafe_code)]

mod atomics;
mod bucket;
pub mod clock;
mod rate;
#[cfg(not(loom))]
mod shaped;
pub mod units;

pub use atomics::AtomicU32;
pub use bucket::{
    BucketCell, Damaged, Denied, Fill, InvalidBurst, MAX_BURST, Reservation, TokenBucket,
    check_burst,
};
#[cfg(not(loom))]
pub use clock::MonotonicClock;
pub use clock::{Clock, FakeClock};
pub use rate::{Amount, Limit, RATE_EXAMPLES, Rate, RateSpec};
#[cfg(not(loom))]
pub use shaped::{Payer, Shaped};

/// The README's example, compiled and run as a test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
