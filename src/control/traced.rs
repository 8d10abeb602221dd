//! The ways of a run that follow a recorded link (`--trace`,
//! `--trace-up`, `--trace-down`): each window's setting (from
//! [`shape_impair::trace::follow`]) reaches the way's buckets and their followers
//! through the [`Adjuster`], for as long as the run lasts.

use super::Adjuster;
use shape_impair::trace::Trace;
use shape_impair::trace::follow::follow_with;
use std::io;
use std::sync::Arc;
use std::time::Instant;

/// Follows `traces` (each with the index of the way it sets) from
/// `started`, giving the process's buckets what they allow, for as long
/// as the process runs; the first window is set before this returns.
/// Fails only if the thread cannot be had.
pub fn follow(
    traces: Vec<(usize, Arc<Trace>)>,
    adjuster: Arc<Adjuster>,
    started: Instant,
) -> io::Result<()> {
    if traces.is_empty() {
        return Ok(());
    }
    let following = follow_with(
        traces,
        move |way, setting| adjuster.set_way(way, setting),
        started,
    )?;
    // The run follows its traces until it ends.
    std::mem::forget(following);
    Ok(())
}
