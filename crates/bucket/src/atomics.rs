//! The atomics the bucket is built from: std's in a normal build, loom's
//! under `RUSTFLAGS="--cfg loom"`, so that the model checker can explore every
//! interleaving of the very code that ships.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence};

/// Gives way while another writer holds the configuration claim. Only the
/// rare writers of a new rate or burst ever call this; acquirers never wait
/// for anybody.
pub(crate) fn back_off() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::sleep(std::time::Duration::from_micros(50));
}
