//! The bucket against a fake clock: exact figures, then properties over
//! random rates, bursts, requests and live changes.

use super::*;
use crate::clock::FakeClock;
use proptest::prelude::*;
use std::sync::Arc;

const SEC: u64 = 1_000_000_000;
const GIB: u64 = 1 << 30;
/// A start time far from zero, as on a machine that has been up a while.
const BOOT: u64 = 12_345 * SEC;

fn rate(bytes_per_sec: f64) -> Limit {
    Limit::Rate(Rate::from_bytes_per_sec(bytes_per_sec).unwrap())
}

fn bucket(limit: Limit, burst: u64, fill: Fill) -> TokenBucket<Arc<FakeClock>> {
    TokenBucket::with_clock(limit, burst, fill, Arc::new(FakeClock::new(BOOT))).unwrap()
}

/// Nanoseconds the fake clock moved during `f`.
fn elapsed(bucket: &TokenBucket<Arc<FakeClock>>, f: impl FnOnce()) -> u64 {
    let start = bucket.clock().now();
    f();
    bucket.clock().now() - start
}

#[test]
fn a_new_bucket_is_full_and_then_says_how_long_to_wait() {
    let b = bucket(rate(1000.0), 100, Fill::Full);
    assert_eq!(b.available(), 100);
    assert_eq!(b.try_acquire(100), Ok(()));
    assert_eq!(
        b.try_acquire(1),
        Err(Denied::Wait(Duration::from_millis(1)))
    );
    assert_eq!(
        b.try_acquire(50),
        Err(Denied::Wait(Duration::from_millis(50)))
    );
    b.clock().advance(50 * 1_000_000);
    assert_eq!(b.try_acquire(50), Ok(()));
    assert_eq!(b.available(), 0);
}

#[test]
fn an_empty_bucket_starts_with_nothing() {
    let b = bucket(rate(1000.0), 100, Fill::Empty);
    assert_eq!(b.available(), 0);
    assert_eq!(elapsed(&b, || b.acquire(1000)), SEC);
}

#[test]
fn a_request_over_the_burst_is_refused_by_try_but_granted_by_acquire() {
    let b = bucket(rate(1000.0), 100, Fill::Full);
    assert_eq!(b.try_acquire(101), Err(Denied::ExceedsBurst { burst: 100 }));
    assert_eq!(elapsed(&b, || b.acquire(1100)), SEC);
    assert_eq!(b.available(), 0);
}

#[test]
fn tokens_never_pile_up_beyond_the_burst() {
    let b = bucket(rate(1000.0), 100, Fill::Empty);
    b.clock().advance(3600 * SEC);
    assert_eq!(b.available(), 100);
    assert_eq!(b.try_acquire(100), Ok(()));
    assert_eq!(
        b.try_acquire(1),
        Err(Denied::Wait(Duration::from_millis(1)))
    );
}

#[test]
fn acquire_sleeps_exactly_the_deficit() {
    let b = bucket(rate(1536.0), 1, Fill::Empty);
    assert_eq!(elapsed(&b, || b.acquire(1536 * 5)), 5 * SEC);
    // 1 byte at 1.5 KiB/s is 651041.66 ns: the wait rounds up, never down.
    assert_eq!(elapsed(&b, || b.acquire(1)), 651_042);
}

#[test]
fn requests_queue_in_order() {
    let b = bucket(rate(100.0), 10, Fill::Full);
    let first = b.reserve(60);
    let second = b.reserve(10);
    assert_eq!(b.deadline(&first), Some(BOOT + 500_000_000));
    assert_eq!(b.deadline(&second), Some(BOOT + 600_000_000));
    assert_eq!(
        b.try_acquire(1),
        Err(Denied::Wait(Duration::from_millis(610)))
    );
    assert_eq!(b.available(), -60);
}

#[test]
fn a_million_small_acquires_take_as_long_as_one_large_one() {
    for bps in [1.0, 1.5, 1000.0, 3e8, 1e9, 100.0 * GIB as f64] {
        // The burst holds at least a nanosecond's inflow, since a sleeper
        // wakes on a whole nanosecond.
        let burst = 1000;
        let one = bucket(rate(bps), burst, Fill::Empty);
        let many = bucket(rate(bps), burst, Fill::Empty);
        let whole = elapsed(&one, || one.acquire(1_000_000));
        let pieces = elapsed(&many, || (0..1_000_000).for_each(|_| many.acquire(1)));
        assert_eq!(whole, pieces, "at {bps} B/s");
    }
}

#[test]
fn the_long_run_rate_is_exact_from_1_byte_to_100_gib_per_second() {
    for bps in [
        1.0,
        1.5,
        7.77,
        1000.0,
        1_048_576.0,
        3e8,
        1e9,
        100.0 * GIB as f64,
    ] {
        let limit = rate(bps);
        let b = bucket(limit, 1, Fill::Empty);
        let total = (bps * 1000.0) as u64;
        let chunk = (total / 997).max(1);
        let ns = elapsed(&b, || {
            let mut left = total;
            while left > 0 {
                let n = chunk.min(left);
                b.acquire(n);
                left -= n;
            }
        });
        let measured = total as f64 / (ns as f64 / SEC as f64);
        let error = (measured - bps).abs() / bps;
        assert!(error < 1e-4, "{bps} B/s measured as {measured} ({error:e})");
    }
}

#[test]
fn at_100_gib_per_second_single_bytes_are_not_rounded_up_to_nanoseconds() {
    let b = bucket(rate(100.0 * GIB as f64), 100_000, Fill::Empty);
    // 107.37 bytes flow in per nanosecond; every whole one is usable.
    b.clock().advance(1);
    assert_eq!(b.available(), 107);
    for _ in 0..107 {
        assert_eq!(b.try_acquire(1), Ok(()));
    }
    assert!(b.try_acquire(1).is_err());
    b.clock().advance(99);
    assert_eq!(b.available(), 10_737 - 107);
}

#[test]
fn a_rate_change_re_times_debt_already_reserved() {
    let kib = 1024.0;
    let b = bucket(rate(kib), 1, Fill::Empty);
    let r = b.reserve(64 * 1024);
    assert_eq!(b.deadline(&r), Some(BOOT + 64 * SEC));
    b.clock().advance(SEC);
    b.set_limit(rate(10.0 * kib * kib));
    // 1 KiB arrived in the first second; the other 63 KiB take 6.15 ms.
    assert_eq!(b.deadline(&r), Some(BOOT + SEC + 6_152_344));
    assert_eq!(elapsed(&b, || b.wait(&r)), 6_152_344);
}

#[test]
fn a_rate_change_keeps_tokens_in_hand() {
    let b = bucket(rate(1000.0), 500, Fill::Empty);
    b.clock().advance(SEC / 5);
    assert_eq!(b.available(), 200);
    b.set_limit(rate(10.0));
    assert_eq!(b.available(), 200);
    b.clock().advance(SEC);
    assert_eq!(b.available(), 210);
}

#[test]
fn lowering_the_burst_drops_tokens_for_good() {
    let b = bucket(rate(1000.0), 500, Fill::Full);
    b.set_burst(100).unwrap();
    assert_eq!(b.available(), 100);
    b.set_burst(500).unwrap();
    assert_eq!(b.available(), 100);
    b.clock().advance(SEC);
    assert_eq!(b.available(), 500);
}

#[test]
fn unlimited_grants_everything_and_a_rate_after_it_starts_full() {
    let b = bucket(Limit::Unlimited, 100, Fill::Empty);
    assert_eq!(b.try_acquire(u64::MAX), Ok(()));
    assert_eq!(elapsed(&b, || b.acquire(u64::MAX)), 0);
    assert_eq!(b.limit(), Limit::Unlimited);
    b.set_limit(rate(10.0));
    assert_eq!(b.available(), 100);
    assert_eq!(b.try_acquire(100), Ok(()));
    assert!(b.try_acquire(1).is_err());
}

#[test]
fn tokens_given_back_are_in_hand_again_and_no_more() {
    let b = bucket(rate(100.0), 50, Fill::Full);
    let mut first = b.reserve(80);
    let second = b.reserve(10);
    assert_eq!(b.deadline(&first), Some(BOOT + 300_000_000));
    b.give_back(&mut first, 70);
    // The first now holds 10 and is covered; the second keeps its mark.
    assert_eq!(b.deadline(&first), None);
    assert_eq!(b.deadline(&second), Some(BOOT + 400_000_000));
    assert_eq!(b.available(), 30);
    // Only what was taken can be given back.
    b.give_back(&mut first, 1000);
    assert_eq!(b.available(), 40);
    let mut free = bucket(Limit::Unlimited, 50, Fill::Full).reserve(10);
    b.give_back(&mut free, 10);
    assert_eq!(b.available(), 40);
}

#[test]
fn lifting_the_limit_releases_sleepers() {
    let b = bucket(rate(1.0), 1, Fill::Empty);
    let r = b.reserve(1_000_000);
    b.set_limit(Limit::Unlimited);
    assert_eq!(b.deadline(&r), None);
    assert_eq!(elapsed(&b, || b.wait(&r)), 0);
}

#[test]
fn settings_read_back() {
    let b = bucket(rate(1.5), 7, Fill::Full);
    assert_eq!(b.limit(), rate(1.5));
    assert_eq!(b.burst(), 7);
    b.set(rate(2.0), 9).unwrap();
    assert_eq!((b.limit(), b.burst()), (rate(2.0), 9));
    assert_eq!(b.set_burst(0), Err(InvalidBurst(0)));
    assert_eq!(
        b.set(rate(2.0), MAX_BURST + 1),
        Err(InvalidBurst(MAX_BURST + 1))
    );
    assert!(TokenBucket::with_clock(rate(1.0), 0, Fill::Full, FakeClock::new(0)).is_err());
}

#[test]
fn nothing_wraps_in_a_century() {
    let century = 100 * 365 * 86_400 * SEC;
    let b = bucket(rate(100.0 * GIB as f64), GIB, Fill::Empty);
    // Idle for a century, then busy: the bucket is simply full.
    b.clock().advance(century);
    assert_eq!(b.available(), GIB as i64);
    assert_eq!(elapsed(&b, || b.acquire(101 * GIB)), SEC);
    // Busy for two years at 100 GiB/s, crossing a rebase of the line.
    let month = 30 * 86_400;
    for _ in 0..24 {
        assert_eq!(elapsed(&b, || b.acquire(100 * GIB * month)), month * SEC);
    }
    assert_eq!(elapsed(&b, || b.acquire(100 * GIB)), SEC);
    assert_eq!(b.available(), 0);
}

#[test]
fn a_clock_near_its_end_saturates_instead_of_wrapping() {
    let clock = Arc::new(FakeClock::new(u64::MAX - 10 * SEC));
    let b = TokenBucket::with_clock(rate(1.0), 1, Fill::Empty, clock).unwrap();
    let r = b.reserve(100);
    assert_eq!(b.deadline(&r), Some(u64::MAX));
}

/// One step of a random workload.
#[derive(Debug, Clone)]
enum Step {
    Advance(u64),
    Try(u64),
    Reserve(u64),
    SetRate(f64),
    SetBurst(u64),
}

fn step(burst_max: u64) -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..3 * SEC).prop_map(Step::Advance),
        4 => (1..=burst_max).prop_map(Step::Try),
        2 => (1..=burst_max).prop_map(Step::Reserve),
        1 => (1.0f64..1e7).prop_map(Step::SetRate),
        1 => (1..=burst_max).prop_map(Step::SetBurst),
    ]
}

/// Every grant as (clock time usable, bytes).
type Grants = Vec<(u64, u64)>;
/// The rate in force from each clock time on, in bytes per second.
type Rates = Vec<(u64, f64)>;

/// Runs `steps` and returns the grants and the rates in force.
fn run(b: &TokenBucket<Arc<FakeClock>>, steps: &[Step]) -> (Grants, Rates) {
    let mut grants = Vec::new();
    let mut pending: Vec<(Reservation, u64)> = Vec::new();
    let mut rates = vec![(BOOT, b.limit().rate().unwrap().bytes_per_sec())];
    for step in steps {
        let now = b.clock().now();
        match *step {
            Step::Advance(ns) => {
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
            Step::Try(n) => {
                if b.try_acquire(n).is_ok() {
                    grants.push((now, n));
                }
            }
            Step::Reserve(n) => {
                // Larger requests are a stream spread over time, which the
                // interval bound does not describe.
                let n = n.min(b.burst());
                let r = b.reserve(n);
                match b.deadline(&r) {
                    None => grants.push((now, n)),
                    Some(_) => pending.push((r, n)),
                }
            }
            Step::SetRate(bps) => {
                b.set_limit(rate(bps));
                rates.push((now, b.limit().rate().unwrap().bytes_per_sec()));
            }
            Step::SetBurst(burst) => b.set_burst(burst).unwrap(),
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
        let steps: Vec<Step> = steps
            .into_iter()
            .filter(|s| changes_allowed || !matches!(s, Step::SetRate(_) | Step::SetBurst(_)))
            .collect();
        let burst_max = steps.iter().fold(burst, |m, s| match s {
            Step::SetBurst(b) => m.max(*b),
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
        let pieces = elapsed(&many, || sizes.iter().for_each(|&n| many.acquire(n)));
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
            b.acquire(64 * 1024);
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
