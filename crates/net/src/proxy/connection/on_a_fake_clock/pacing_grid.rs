//! The pacing grid on a fake clock: once many directions of a proxy are
//! busy, a chunk leaves on the grid's first step after it is paid for;
//! alone, the moment it is paid for.

use super::*;
use crate::deadlines::{PACED_TOGETHER, PACING_GRAIN};

/// Chunks of 1,500 bytes at 100,000 B/s, paid every 15 ms, while `busy`
/// directions of the proxy have bytes on their way: when each left.
fn left_at(busy: usize) -> Vec<u64> {
    let mut bench = DirectionBench::new(rate(), 10_000, Duration::ZERO, Faults::default());
    bench.direction.busy_in_proxy = busy;
    let (mut from, mut to) = bench.sides(30_000, true);
    bench.run(&mut from, &mut to, u64::MAX);
    assert_eq!(to.out(), 30_000);
    to.writes.iter().map(|&(at, _)| at).collect()
}

#[test]
fn among_many_busy_a_chunk_leaves_on_the_grid_once_paid_and_alone_at_once() {
    let paid: Vec<u64> = (1..=20).map(|k| k * 15 * MS).collect();
    assert_eq!(left_at(PACED_TOGETHER - 1), paid);
    let on_the_grid: Vec<u64> = paid
        .iter()
        .map(|at| at.next_multiple_of(PACING_GRAIN))
        .collect();
    // 16, 30, 46, 60 ms...: never before it is paid, and the rate kept:
    // the last at 300 ms as alone.
    assert_eq!(left_at(PACED_TOGETHER), on_the_grid);
    assert_eq!(on_the_grid[..4], [16 * MS, 30 * MS, 46 * MS, 60 * MS]);
    assert_eq!(on_the_grid.last(), Some(&(300 * MS)));
}
