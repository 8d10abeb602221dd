//! Properties of the bucket over random rates, bursts, requests and live
//! changes, against a fake clock.

use super::super::*;
use super::{BOOT, SEC, bucket, elapsed, rate};
use crate::clock::FakeClock;
use proptest::prelude::*;
use std::sync::Arc;

/// One step of a random workload.
#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Try(u64),
    Reserve(u64),
    SetRate(f64),
    SetBurst(u64),
}

fn step(burst_max: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3 * SEC).prop_map(Op::Advance),
        4 => (1..=burst_max).prop_map(Op::Try),
        2 => (1..=burst_max).prop_map(Op::Reserve),
        1 => (1.0f64..1e7).prop_map(Op::SetRate),
        1 => (1..=burst_max).prop_map(Op::SetBurst),
    ]
}

/// Every grant as (clock time usable, bytes).
type Grants = Vec<(u64, u64)>;
/// The rate in force from each clock time on, in bytes per second.
type Rates = Vec<(u64, f64)>;

/// Runs `steps` and returns the grants and the rates in force.
fn run(b: &TokenBucket<Arc<FakeClock>>, steps: &[Op]) -> (Grants, Rates) {
    let mut grants = Vec::new();
    let mut pending: Vec<(Reservation, u64)> = Vec::new();
    let mut rates = vec![(BOOT, b.limit().rate().unwrap().bytes_per_sec())];
    for step in steps {
        let now = b.clock().now();
        match *step {
            Op::Advance(ns) => {
                pending.retain(|(r, n)| match b.deadline(r) {
                    Some(t) if t <= now + ns => {
                        grants.push((t, *n));
                        false
                    }
                    Some(_) => true,
                    None => unreachable!("settled before the clock moved"),
                });
                b.clock().advance(ns);
            }
            Op::Try(n) => {
                if b.try_acquire(n).is_ok() {
                    grants.push((now, n));
                }
            }
            Op::Reserve(n) => {
                // Larger requests are a stream spread over time, which the
                // interval bound does not describe.
                let n = n.min(b.burst());
                let r = b.reserve(n);
                match b.deadline(&r) {
                    None => grants.push((now, n)),
                    Some(_) => pending.push((r, n)),
                }
            }
            Op::SetRate(bps) => {
                b.set_limit(rate(bps));
                rates.push((now, b.limit().rate().unwrap().bytes_per_sec()));
            }
            Op::SetBurst(burst) => b.set_burst(burst).unwrap(),
        }
        // A reservation that a rate change made due now is granted now.
        let now = b.clock().now();
        pending.retain(|(r, n)| {
            let waiting = b.deadline(r).is_some();
            if !waiting {
                grants.push((now, *n));
            }
            waiting
        });
    }
    (grants, rates)
}

/// Bytes the rate lets in over [t1, t2], by the piecewise rate in `rates`.
fn inflow(rates: &[(u64, f64)], t1: u64, t2: u64) -> f64 {
    rates
        .iter()
        .enumerate()
        .map(|(i, &(from, bps))| {
            let until = rates.get(i + 1).map_or(u64::MAX, |r| r.0);
            let (a, b) = (from.max(t1), until.min(t2));
            if b > a {
                (b - a) as f64 / SEC as f64 * bps
            } else {
                0.0
            }
        })
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The fill line's division by the scale, done as a shift and a 64-bit
    /// division by a constant, is the 128-bit division exactly: over the
    /// products of every elapsed time and rate, around the 64-bit edge
    /// where it changes method, and over all of u128.
    #[test]
    fn the_fill_line_divides_exactly(
        elapsed in any::<u64>(),
        fixed_rate in 1u64..=(1 << 63),
        near_edge in 0u128..(1 << 40),
        any_x in any::<u128>(),
    ) {
        let scale: u128 = 1_000_000_000 << crate::rate::Rate::FRACTION_BITS;
        let product = u128::from(elapsed) * u128::from(fixed_rate);
        prop_assert_eq!(cell::per_scale(product), product / scale);
        let edge = (u128::from(u64::MAX) << crate::rate::Rate::FRACTION_BITS) - (1 << 39) + near_edge;
        prop_assert_eq!(cell::per_scale(edge), edge / scale);
        prop_assert_eq!(cell::per_scale(any_x), any_x / scale);
    }

    /// Tokens granted in any interval are at most burst + rate * length,
    /// plus one byte of rounding, also across live changes (with the largest
    /// burst the run saw).
    #[test]
    fn grants_conform_to_burst_plus_rate(
        bps in 1.0f64..1e7,
        burst in 1u64..100_000,
        steps in prop::collection::vec(step(100_000), 1..120),
        changes_allowed in any::<bool>(),
    ) {
        let b = bucket(rate(bps), burst, Fill::Full);
        let steps: Vec<Op> = steps
            .into_iter()
            .filter(|s| changes_allowed || !matches!(s, Op::SetRate(_) | Op::SetBurst(_)))
            .collect();
        let burst_max = steps.iter().fold(burst, |m, s| match s {
            Op::SetBurst(b) => m.max(*b),
            _ => m,
        });
        let (mut grants, rates) = run(&b, &steps);
        grants.sort_unstable();
        for i in 0..grants.len() {
            let mut total = 0u64;
            for &(t2, n) in &grants[i..] {
                total += n;
                let bound = burst_max as f64 + inflow(&rates, grants[i].0, t2) + 1.0;
                prop_assert!(total as f64 <= bound, "{} bytes in [{}, {}], bound {}", total, grants[i].0, t2, bound);
            }
        }
    }

    /// Splitting a transfer into requests of any sizes ends it at the same
    /// nanosecond as one request for the whole.
    #[test]
    fn request_sizes_do_not_drift(
        bps in 1.0f64..2e11,
        burst in 1000u64..1_000_000,
        sizes in prop::collection::vec(1u64..5_000_000, 1..200),
    ) {
        let one = bucket(rate(bps), burst, Fill::Empty);
        let many = bucket(rate(bps), burst, Fill::Empty);
        let total: u64 = sizes.iter().sum();
        let whole = elapsed(&one, || one.acquire(total));
        let pieces = elapsed(&many, || sizes.iter().try_for_each(|&n| many.acquire(n)));
        prop_assert_eq!(whole, pieces);
    }

    /// After the wait that reserve computed, the tokens are there, and not
    /// a nanosecond sooner.
    #[test]
    fn the_computed_wait_covers_the_reservation(
        bps in 1.0f64..2e11,
        burst in 1u64..10_000_000,
        before in prop::collection::vec((1u64..10_000_000, 0..SEC), 0..10),
        n in 1u64..100_000_000,
    ) {
        let b = bucket(rate(bps), burst, Fill::Full);
        for (m, ns) in before {
            let _ = b.reserve(m);
            b.clock().advance(ns);
        }
        let r = b.reserve(n);
        if let Some(deadline) = b.deadline(&r) {
            b.clock().advance_to(deadline - 1);
            prop_assert_eq!(b.deadline(&r), Some(deadline));
            b.clock().advance_to(deadline);
            prop_assert_eq!(b.deadline(&r), None);
            prop_assert!(b.available() >= 0);
        }
    }

    /// Rate and burst changes never lose or invent tokens in hand beyond the
    /// new burst.
    #[test]
    fn changes_keep_tokens_in_hand(
        bps in 1.0f64..1e9,
        burst in 1u64..1_000_000,
        idle in 0..10 * SEC,
        new_bps in 1.0f64..1e9,
        new_burst in 1u64..1_000_000,
    ) {
        let b = bucket(rate(bps), burst, Fill::Empty);
        b.clock().advance(idle);
        let before = b.available();
        b.set(rate(new_bps), new_burst).unwrap();
        prop_assert_eq!(b.available(), before.min(new_burst as i64));
    }
}

/// Real time: two threads hammering `try_acquire` for a second at 10 MB/s
/// get burst + rate * elapsed, within 2%.
#[test]
fn two_threads_get_the_rate_in_real_time() {
    let (bps, burst) = (10_000_000u64, 1_000_000u64);
    let b = Arc::new(TokenBucket::new(Limit::per_second(bps), burst).unwrap());
    let start = std::time::Instant::now();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || {
                let mut granted = 0u64;
                while start.elapsed() < Duration::from_secs(1) {
                    if b.try_acquire(1000).is_ok() {
                        granted += 1000;
                    }
                }
                granted
            })
        })
        .collect();
    let granted: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let allowed = burst as f64 + bps as f64 * start.elapsed().as_secs_f64();
    let ratio = granted as f64 / allowed;
    eprintln!("granted {granted} of {allowed:.0} allowed: {ratio:.5}");
    assert!(
        (0.98..=1.0).contains(&ratio),
        "granted {granted} of {allowed}: {ratio}"
    );
}

/// Real time: a 64 KiB acquire asleep at 1 KiB/s finishes soon after the
/// rate goes to 10 MiB/s, not a minute later.
#[test]
fn a_rate_change_reaches_a_real_sleeper() {
    let b = Arc::new(TokenBucket::new(rate(1024.0), 1024).unwrap());
    let sleeper = {
        let b = b.clone();
        std::thread::spawn(move || {
            b.acquire(64 * 1024).unwrap();
            std::time::Instant::now()
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let changed = std::time::Instant::now();
    b.set_limit(rate(10.0 * 1024.0 * 1024.0));
    let woke = sleeper.join().unwrap();
    eprintln!(
        "the sleeper finished {:?} after the rate change",
        woke - changed
    );
    // 63 KiB at 10 MiB/s is 6 ms; a busy machine may add some.
    assert!(
        woke - changed < Duration::from_secs(2),
        "{:?}",
        woke - changed
    );
}

#[test]
fn a_paused_bucket_grants_nothing_and_resumes_with_no_more_than_the_burst() {
    let b = bucket(rate(1000.0), 100, Fill::Full);
    b.set_paused(true);
    assert!(b.paused());
    assert_eq!(b.try_acquire(1), Err(Denied::Paused));
    let r = b.reserve(50);
    assert_eq!(b.deadline(&r), Some(u64::MAX));
    b.clock().advance(3600 * SEC);
    assert_eq!(b.deadline(&r), Some(u64::MAX));
    b.set_paused(false);
    assert!(!b.paused());
    assert_eq!(b.deadline(&r), None);
    // An hour paused banks nothing beyond the burst.
    assert_eq!(b.available(), 50);
    assert_eq!(b.try_acquire(50), Ok(()));
    assert!(b.try_acquire(1).is_err());
}
