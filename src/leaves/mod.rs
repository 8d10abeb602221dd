//! The leaves every part of shape stands on, depending on nothing of the
//! binary but each other: units counted ([`counting`]) and sized into
//! chunks ([`chunk`]), durations ([`duration`]), what has passed and how
//! fast ([`throughput`]), one-line messages ([`message`]) and the sink
//! every line is said through ([`say`]), exit statuses ([`exit`]) and
//! poison-tolerant locks ([`lock`]). The crate's root names
//! each as its own (`crate::counting`), so that where a leaf lives is
//! said here alone.

pub mod chunk;
pub mod counting;
pub mod duration;
pub mod exit;
pub mod lock;
pub mod message;
pub mod say;
pub mod throughput;
