//! The link as a fuzz target: an impairment and a run of arrivals and
//! departures at made-up times, all read from arbitrary bytes.

use super::{Impairment, Netem, QueueDrop};
use shape_bucket::{FakeClock, Fill, Limit, TokenBucket};
use shape_impair::faults::{Loss, Mtu};
use std::sync::Arc;

/// Runs a link on `data`: its first line says the impairment (`RATE
/// QUEUE DELAY_MS JITTER_MS LOSS MTU DUP REORDER CORRUPT`, any of them
/// refused leaving it out), the rest is events of four bytes: how many
/// microseconds pass, a datagram's size, and whether it arrives or the
/// link is asked what leaves. Nothing due is left behind, no more leaves
/// than came (and their copies), and nothing is counted twice.
pub fn run(data: &[u8]) {
    let (head, events) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let words: Vec<&str> = head.split_whitespace().collect();
    let word = |n: usize| words.get(n).copied().unwrap_or("");
    let number = |n: usize| word(n).parse::<u64>().ok();
    let chance = |n: usize| {
        word(n)
            .parse::<f64>()
            .ok()
            .filter(|p| (0.0..=1.0).contains(p))
    };
    let limit = number(0).map_or(Limit::Unlimited, |rate| {
        Limit::per_second(rate.clamp(1, 1 << 40))
    });
    let impairment = Impairment {
        packets: false,
        queue: number(1).unwrap_or(1 << 20).min(1 << 30),
        held_most: Some(16 << 20),
        queue_drop: if word(1).ends_with('h') {
            QueueDrop::Head
        } else {
            QueueDrop::Tail
        },
        delay: number(2).unwrap_or(0).min(60_000) * 1_000_000,
        jitter: number(3).unwrap_or(0).min(60_000) * 1_000_000,
        keep_order: word(3).ends_with('k'),
        loss: Loss::parse(word(4)).ok(),
        duplicate: chance(6).unwrap_or(0.0),
        reorder: chance(7).unwrap_or(0.0),
        corrupt: chance(8).unwrap_or(0.0),
        mtu: word(5).parse::<Mtu>().ok(),
        flow_limit: None,
    };
    let clock = Arc::new(FakeClock::new(0));
    let Ok(bucket) = TokenBucket::with_clock(limit, 1 << 16, Fill::Full, clock.clone()) else {
        return;
    };
    let mut link = Netem::new(impairment, 7);
    let (mut now, mut arrived, mut left) = (0u64, 0u64, 0u64);
    for event in events.chunks_exact(4).take(4096) {
        now += u64::from(u16::from_le_bytes([event[0], event[1]])) * 1_000;
        clock.advance_to(now);
        let size = usize::from(event[2]) * 8 + usize::from(event[3] & 7);
        if event[3] & 0x80 == 0 {
            link.arrive(&bucket, now, arrived, vec![event[2]; size]);
            arrived += 1;
        } else {
            left += link.leave(&bucket, now).len() as u64;
            // Else the loop that drives it would wake at once, again and
            // again, for nothing.
            assert!(
                link.wake().is_none_or(|due| due > now),
                "at {now} ns, {:?} is due and did not leave",
                link.wake()
            );
        }
    }
    let tally = link.tally();
    assert!(
        left <= arrived + tally.duplicated.0,
        "{left} left of {arrived} and {} copies",
        tally.duplicated.0
    );
    assert!(
        tally.passed.0 + tally.lost.0 + tally.queue_full.0 + tally.oversize.0
            <= arrived + tally.duplicated.0,
        "counted more than came: {tally:?}"
    );
}
