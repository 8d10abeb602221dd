//! Reading ahead on a fake clock: one read brings several chunks, each
//! still paid for and sent in its turn, in order, within the buffer.

use super::*;

/// 200,000 B/s from an empty bucket: a chunk of 2,000 bytes every 10 ms.
fn paced_10_ms() -> DirectionBench {
    DirectionBench::new(
        Limit::per_second(200_000),
        20_000,
        Duration::ZERO,
        Faults::default(),
    )
}

#[test]
fn a_paced_direction_reads_an_eighth_as_often_as_it_sends_and_keeps_its_pace() {
    let mut bench = paced_10_ms();
    let (mut from, mut to) = bench.sides(100_000, true);
    let moments = bench.run(&mut from, &mut to, u64::MAX);
    assert_eq!(
        to.written,
        (0..100_000).map(|i| i as u8).collect::<Vec<_>>()
    );
    // 50 chunks, each the moment it is paid: read 8 at a time, the end
    // met by a read of its own.
    assert_eq!(to.writes.len(), 50);
    for (k, &(at, len)) in to.writes.iter().enumerate() {
        assert_eq!((at, len), ((k as u64 + 1) * 10 * MS, 2_000), "chunk {k}");
    }
    assert_eq!(from.reads, 7, "50 chunks' worth in reads of 8");
    assert_eq!(moments.last(), Some(&(500 * MS)));
}

#[test]
fn what_trickles_in_is_topped_up_to_a_whole_chunk_and_what_is_read_ahead_counts_against_the_buffer()
{
    let mut bench = paced_10_ms();
    // Nothing waits in the buffer, which holds 5,000 bytes: a read takes
    // at most that, not eight chunks' worth.
    bench.direction.link.max_buffer = Some(5_000);
    let (mut from, mut to) = bench.sides(3_000, false);
    bench.run(&mut from, &mut to, 9 * MS);
    assert_eq!(from.input.len(), 0, "3,000 read: a chunk and 1,000 ahead");
    from.input.extend((0..20_000).map(|i| i as u8));
    bench.clock.advance_to(10 * MS);
    bench.run(&mut from, &mut to, 10 * MS);
    assert_eq!(to.out(), 2_000);
    // The next chunk is the 1,000 read ahead and 1,000 read to top it up,
    // within the buffer's 5,000.
    assert!(
        from.input.len() >= 20_000 - 5_000,
        "{} left",
        from.input.len()
    );
    bench.clock.advance_to(20 * MS);
    bench.run(&mut from, &mut to, 20 * MS);
    assert_eq!(to.writes[1], (20 * MS, 2_000));
}

#[test]
fn a_cut_forgets_what_was_read_ahead() {
    let faults = Faults {
        cut_after: Some(5_000),
        ..Faults::default()
    };
    let mut bench = DirectionBench::new(Limit::per_second(200_000), 20_000, Duration::ZERO, faults);
    let (mut from, mut to) = bench.sides(100_000, false);
    bench.run(&mut from, &mut to, u64::MAX);
    assert_eq!(to.out(), 5_000, "nothing read ahead passes a cut");
    assert!(bench.direction.idle());
}
