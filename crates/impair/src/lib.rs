//! Impairments: what makes a link worse than a wire, as plain data and pure
//! functions, with no sockets and no files but a trace's: faults for tests
//! and the one table of them ([`faults`]), delay, jitter and the delay line
//! ([`slowlink`]), the conditions in force and their changes
//! ([`conditions`]), known links by name ([`profiles`]), and recorded
//! links with the thread that follows one ([`trace`]). Every mode that
//! shapes builds on it: the pipe, both proxies, `--serve` and `--exec`.

#![forbid(unsafe_code)]

pub mod conditions;
pub mod faults;
pub mod profiles;
pub mod slowlink;
pub mod trace;

// The leaves, named at the root as this crate's own (`shape_leaves::duration`).
