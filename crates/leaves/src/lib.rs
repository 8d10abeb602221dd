//! The leaves every part of shape stands on, depending on nothing of
//! shape's but the token bucket: units counted ([`counting`]) and sized
//! into chunks ([`chunk`]), durations ([`duration`]), what has passed and
//! how fast ([`throughput`]), one-line messages ([`message`]) and the sink
//! every line is said through ([`say`]), exit statuses ([`exit`]),
//! poison-tolerant locks ([`lock`]), what is known of shares
//! ([`share`]), and the bucket a run spends from
//! ([`bucket`]). Each crate above names a leaf by its full path
//! (`shape_leaves::counting`), so that a path says where it lives.

#![forbid(unsafe_code)]

pub mod bucket;
pub mod chunk;
pub mod counting;
pub mod duration;
pub mod exit;
pub mod lock;
pub mod message;
pub mod say;
pub mod share;
pub mod throughput;
