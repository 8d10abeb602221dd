//! A link on made-up times: every figure here is exact, or a closed form
//! held within a tolerance over many datagrams.

use super::*;
use shape_bucket::{FakeClock, Fill, Limit};
use std::sync::Arc;

const MS: u64 = 1_000_000;

/// A link, the bucket it pays from and their clock.
struct NetemBench {
    clock: Arc<FakeClock>,
    bucket: TokenBucket<Arc<FakeClock>>,
    netem: Netem,
}

impl NetemBench {
    /// A link paying from an empty bucket of `rate` units a second and a
    /// burst of `burst` (`None`: unlimited).
    fn new(impairment: Impairment, rate: Option<(u64, u64)>, seed: u64) -> NetemBench {
        let clock = Arc::new(FakeClock::new(0));
        let (limit, burst) = match rate {
            Some((rate, burst)) => (Limit::per_second(rate), burst),
            None => (Limit::Unlimited, 1),
        };
        let bucket = TokenBucket::with_clock(limit, burst, Fill::Empty, clock.clone()).unwrap();
        NetemBench {
            clock,
            bucket,
            netem: Netem::new(impairment, seed),
        }
    }

    fn arrive(&mut self, now: u64, tag: u64, datagram: Vec<u8>) {
        self.clock.advance_to(now);
        self.netem.arrive(&self.bucket, now, tag, datagram);
    }

    fn leave(&mut self, now: u64) -> Vec<Tagged> {
        self.clock.advance_to(now);
        self.netem.leave(&self.bucket, now)
    }

    fn wake(&self) -> Option<u64> {
        self.netem.wake()
    }

    fn tally(&self) -> Tally {
        self.netem.tally()
    }
}

/// Datagram `i` of `size` bytes, its number in its first eight bytes.
fn datagram(i: u64, size: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; size.max(8)];
    bytes[..8].copy_from_slice(&i.to_le_bytes());
    bytes.truncate(size.max(8));
    bytes
}

fn number(datagram: &[u8]) -> u64 {
    u64::from_le_bytes(datagram[..8].try_into().unwrap())
}

/// Sends `count` datagrams of `size` bytes, one every `every` ns, and
/// collects what leaves and when, stepping at every wake-up.
fn run(netem: &mut NetemBench, count: u64, size: usize, every: u64) -> Vec<(u64, Vec<u8>)> {
    let mut left = Vec::new();
    let mut next = 0;
    let mut now = 0;
    loop {
        let arrival = (next < count).then_some(next * every);
        let wake = netem.wake();
        let Some(at) = arrival.into_iter().chain(wake).min() else {
            return left;
        };
        now = now.max(at);
        for (_, datagram) in netem.leave(now) {
            left.push((now, datagram));
        }
        if arrival == Some(now) {
            netem.arrive(now, next % 3, datagram(next, size));
            next += 1;
        }
    }
}

#[test]
fn at_twice_the_rate_the_queue_fills_and_the_rest_is_dropped_at_the_tail() {
    // 1,000 B/s, datagrams of 100 B every 50 ms (2,000 B/s), a queue of
    // 3,000 B: each takes 100 ms on the link.
    let mut netem = NetemBench::new(
        Impairment {
            queue: 3000,
            ..Impairment::default()
        },
        Some((1000, 100)),
        1,
    );
    let left = run(&mut netem, 200, 100, 50 * MS);
    // Sent back to back, each 100 ms after the one before, from the first
    // arrival to the last in the queue.
    for (i, (at, _)) in left.iter().enumerate() {
        assert_eq!(*at, (i as u64 + 1) * 100 * MS, "datagram {i}");
    }
    // What was kept: one on the link at each 100 ms of the 10 s of
    // arrivals, and a full queue of 30 behind them; the rest dropped.
    let tally = netem.tally();
    assert_eq!(tally.passed.0, left.len() as u64);
    assert_eq!(tally.passed.0 + tally.queue_full.0, 200);
    assert_eq!(tally.passed.0, 100 + 30);
    // The tail is what was dropped: those kept are in the order sent, and
    // the last one kept came at 9.9 s, when the link took one from a full
    // queue (the one at 9.95 s found it full again).
    let numbers: Vec<u64> = left.iter().map(|(_, d)| number(d)).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(*numbers.last().unwrap(), 198);
}

#[test]
fn a_head_drop_loses_the_oldest_waiting() {
    let mut netem = NetemBench::new(
        Impairment {
            queue: 300,
            queue_drop: QueueDrop::Head,
            ..Impairment::default()
        },
        Some((1000, 100)),
        1,
    );
    // Ten at once: the first goes on the link, the queue keeps three, and
    // each newcomer pushes the oldest waiting out.
    for i in 0..10 {
        netem.arrive(0, i, datagram(i, 100));
    }
    let mut left = Vec::new();
    while let Some(at) = netem.wake() {
        left.extend(netem.leave(at).iter().map(|(tag, d)| {
            assert_eq!(*tag, number(d), "the tag goes with its datagram");
            *tag
        }));
    }
    assert_eq!(left, [0, 7, 8, 9]);
    assert_eq!(netem.tally().queue_full.0, 6);
}

#[test]
fn packets_count_datagrams_whatever_their_size() {
    // 10 datagrams a second: sizes do not matter.
    let one = Counting::Datagrams.tokens(1);
    let mut netem = NetemBench::new(
        Impairment {
            packets: true,
            queue: 100 * one,
            ..Impairment::default()
        },
        Some((10 * one, one)),
        1,
    );
    for (i, size) in [(0, 10), (1, 60_000), (2, 1)] {
        netem.arrive(0, i, datagram(i, size));
    }
    let mut times = Vec::new();
    while let Some(at) = netem.wake() {
        times.extend(netem.leave(at).iter().map(|_| at / MS));
    }
    assert_eq!(times, [100, 200, 300]);
}

/// The share of datagrams that leave before the one that came just
/// before them.
fn overtaken(left: &[(u64, Vec<u8>)]) -> f64 {
    let mut position = vec![0usize; left.len()];
    for (place, (_, d)) in left.iter().enumerate() {
        position[number(d) as usize] = place;
    }
    let overtaking = position.windows(2).filter(|w| w[1] < w[0]).count();
    overtaking as f64 / (left.len() - 1) as f64
}

#[test]
fn jitter_spreads_the_delay_evenly_and_reorders_as_netem_does() {
    let impairment = Impairment {
        delay: 50 * MS,
        jitter: 10 * MS,
        ..Impairment::default()
    };
    let mut netem = NetemBench::new(impairment.clone(), None, 3);
    let count = 100_000;
    let left = run(&mut netem, count, 64, MS);
    assert_eq!(left.len() as u64, count);
    let delays: Vec<f64> = left
        .iter()
        .map(|(at, d)| (at - number(d) * MS) as f64 / MS as f64)
        .collect();
    assert!(delays.iter().all(|d| (40.0..=60.0).contains(d)));
    let mean = delays.iter().sum::<f64>() / count as f64;
    assert!((mean - 50.0).abs() < 0.1, "mean delay {mean} ms");
    // Even: a tenth of them in each tenth of the range, within 3%.
    for tenth in 0..10 {
        let low = 40.0 + 2.0 * tenth as f64;
        let share = delays
            .iter()
            .filter(|d| **d >= low && **d < low + 2.0)
            .count();
        let share = share as f64 / count as f64;
        assert!((share / 0.1 - 1.0).abs() < 0.03, "{share} from {low} ms");
    }
    // A datagram 1 ms behind the one before overtakes it when its delay is
    // over 1 ms shorter: (2J - s)^2 / 8J^2 with J = 10, s = 1.
    let expected = 19.0 * 19.0 / 800.0;
    let seen = overtaken(&left);
    assert!((seen / expected - 1.0).abs() < 0.02, "{seen} of {expected}");
    // Keeping the order, none does, and none leaves before its delay.
    let mut kept = NetemBench::new(
        Impairment {
            keep_order: true,
            ..impairment
        },
        None,
        3,
    );
    let left = run(&mut kept, count, 64, MS);
    assert_eq!(overtaken(&left), 0.0);
    assert!(left.iter().all(|(at, d)| at - number(d) * MS >= 40 * MS));
}

#[test]
fn reordered_datagrams_skip_the_delay() {
    let mut netem = NetemBench::new(
        Impairment {
            delay: 100 * MS,
            reorder: 0.25,
            ..Impairment::default()
        },
        None,
        4,
    );
    let count = 100_000;
    let left = run(&mut netem, count, 16, MS);
    let at_once = left.iter().filter(|(at, d)| *at == number(d) * MS).count();
    let delayed = left
        .iter()
        .filter(|(at, d)| *at == number(d) * MS + 100 * MS)
        .count();
    assert_eq!(at_once + delayed, count as usize);
    assert_eq!(at_once as u64, netem.tally().reordered.0);
    assert!((at_once as f64 / count as f64 / 0.25 - 1.0).abs() < 0.02);
}

#[test]
fn duplicates_follow_their_datagram_and_are_counted() {
    let mut netem = NetemBench::new(
        Impairment {
            duplicate: 0.1,
            ..Impairment::default()
        },
        None,
        5,
    );
    let count = 100_000;
    let left = run(&mut netem, count, 16, MS);
    let tally = netem.tally();
    assert_eq!(left.len() as u64, count + tally.duplicated.0);
    assert!((tally.duplicated.0 as f64 / count as f64 / 0.1 - 1.0).abs() < 0.03);
    // Each copy leaves with its datagram, the same bytes.
    for pair in left.windows(2) {
        if number(&pair[0].1) == number(&pair[1].1) {
            assert_eq!(pair[0], pair[1]);
        }
    }
}

#[test]
fn corruption_flips_one_bit_and_the_mtu_cuts_or_drops() {
    let mut netem = NetemBench::new(
        Impairment {
            corrupt: 1.0,
            mtu: Some(Mtu {
                size: 1000,
                oversize: Oversize::Cut,
            }),
            ..Impairment::default()
        },
        None,
        6,
    );
    netem.arrive(0, 0, vec![0u8; 1500]);
    let out = netem.leave(0);
    assert_eq!(out[0].1.len(), 1000);
    let flipped: u32 = out[0].1.iter().map(|b| b.count_ones()).sum();
    assert_eq!(flipped, 1);
    assert_eq!(netem.tally().cut, (1, 1500));
    assert_eq!(netem.tally().corrupted.0, 1);
    let mut dropping = NetemBench::new(
        Impairment {
            mtu: Some(Mtu {
                size: 1000,
                oversize: Oversize::Drop,
            }),
            ..Impairment::default()
        },
        None,
        6,
    );
    dropping.arrive(0, 0, vec![0u8; 1001]);
    dropping.arrive(0, 0, vec![0u8; 1000]);
    assert_eq!(dropping.leave(0).len(), 1);
    assert_eq!(dropping.tally().oversize, (1, 1001));
}

#[test]
fn a_flood_into_a_long_delay_holds_no_more_than_the_bound() {
    let mut netem = NetemBench::new(
        Impairment {
            delay: 1_000 * MS,
            held_most: Some(10_000),
            ..Impairment::default()
        },
        None,
        7,
    );
    // 1,000 datagrams of 100 bytes in the first 100 ms: a hundred fit.
    let left = run(&mut netem, 1000, 100, MS / 10);
    assert_eq!(left.len(), 100);
    assert_eq!(netem.tally().queue_full.0, 900);
    assert!(
        left.iter()
            .all(|(at, d)| at - number(d) * MS / 10 == 1_000 * MS)
    );
}

#[test]
fn a_seed_replays_everything_a_link_did() {
    let impairment = Impairment {
        queue: 5_000,
        delay: 20 * MS,
        jitter: 5 * MS,
        loss: Some(Loss::parse("gemodel:5%,30%").unwrap()),
        duplicate: 0.05,
        reorder: 0.05,
        corrupt: 0.05,
        ..Impairment::default()
    };
    let replay = |seed| {
        let mut netem = NetemBench::new(impairment.clone(), Some((50_000, 1_000)), seed);
        let left = run(&mut netem, 20_000, 200, MS / 2);
        (left, netem.tally())
    };
    assert_eq!(replay(9), replay(9));
    assert_ne!(replay(9).0, replay(10).0);
}

#[test]
fn an_impairment_draws_when_anything_in_it_is_random() {
    assert!(
        !Impairment::default().draws(),
        "a plain netem draws nothing"
    );
    let delayed = Impairment {
        delay: 50 * MS,
        queue: 3000,
        ..Impairment::default()
    };
    assert!(!delayed.draws(), "a fixed delay and a queue draw nothing");
    let random = [
        Impairment {
            jitter: MS,
            ..Impairment::default()
        },
        Impairment {
            loss: Some(Loss::parse("1%").unwrap()),
            ..Impairment::default()
        },
        Impairment {
            duplicate: 0.01,
            ..Impairment::default()
        },
        Impairment {
            reorder: 0.01,
            ..Impairment::default()
        },
        Impairment {
            corrupt: 0.01,
            ..Impairment::default()
        },
    ];
    for impairment in random {
        assert!(impairment.draws(), "{impairment:?}");
    }
}
