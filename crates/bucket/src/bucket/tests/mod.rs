//! The bucket against a fake clock: exact figures here, properties over
//! random rates, bursts, requests and live changes in [`properties`].

mod properties;

use super::*;
use crate::clock::FakeClock;
use crate::rate::Rate;
use std::sync::Arc;

pub(super) const SEC: u64 = 1_000_000_000;
const GIB: u64 = 1 << 30;
/// A start time far from zero, as on a machine that has been up a while.
pub(super) const BOOT: u64 = 12_345 * SEC;

pub(super) fn rate(bytes_per_sec: f64) -> Limit {
    Limit::Rate(Rate::from_bytes_per_sec(bytes_per_sec).unwrap())
}

pub(super) fn bucket(limit: Limit, burst: u64, fill: Fill) -> TokenBucket<Arc<FakeClock>> {
    TokenBucket::with_clock(limit, burst, fill, Arc::new(FakeClock::new(BOOT))).unwrap()
}

/// Nanoseconds the fake clock moved during `f`, which must not find the
/// bucket damaged.
pub(super) fn elapsed(
    bucket: &TokenBucket<Arc<FakeClock>>,
    f: impl FnOnce() -> Result<(), Damaged>,
) -> u64 {
    let start = bucket.clock().now();
    f().expect("a bucket of the test's own is never damaged");
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
        let pieces = elapsed(&many, || (0..1_000_000).try_for_each(|_| many.acquire(1)));
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
                b.acquire(n)?;
                left -= n;
            }
            Ok(())
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
fn giving_back_never_lifts_the_bucket_above_its_burst() {
    let b = bucket(rate(1000.0), 100, Fill::Full);
    let mut paid = b.reserve(30);
    // 10 ms bring 10 tokens: 80 in hand, so only 20 of the 30 fit.
    b.clock().advance(SEC / 100);
    let before = b.spent();
    b.give_back(&mut paid, 30);
    assert_eq!(before.wrapping_sub(b.spent()), 20);
    assert_eq!(b.available(), 100);
    // A full bucket takes nothing back, and still grants its burst once.
    let mut more = b.reserve(30);
    b.clock().advance(SEC);
    let before = b.spent();
    b.give_back(&mut more, 30);
    assert_eq!(b.spent(), before);
    assert_eq!(b.try_acquire(100), Ok(()));
    assert!(b.try_acquire(1).is_err());
}

#[test]
fn granted_counts_what_was_granted_and_not_what_overflowed() {
    let b = bucket(rate(1000.0), 100, Fill::Full).counting_grants();
    assert_eq!(b.granted(), Some(0));
    // Ten idle seconds bring 10,000 tokens, 10,000 of them above the burst.
    b.clock().advance(10 * SEC);
    let before = b.spent();
    assert_eq!(b.try_acquire(30), Ok(()));
    assert_eq!(b.spent().wrapping_sub(before), 10_030);
    let mut paid = b.reserve(50);
    b.give_back(&mut paid, 20);
    assert_eq!(b.granted(), Some(60));
    assert_eq!(bucket(rate(1000.0), 100, Fill::Full).granted(), None);
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

#[test]
fn a_change_wakes_whoever_sleeps_until_the_settings_change() {
    let b = Arc::new(TokenBucket::new(rate(1000.0), 100).unwrap());
    let seen = b.generation();
    let sleeper = {
        let b = b.clone();
        std::thread::spawn(move || {
            // Spurious returns are allowed: sleep again until it moved.
            while b.generation() == seen {
                b.sleep_until_changed(seen);
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    b.set_limit(rate(2000.0));
    sleeper.join().unwrap();
    assert_ne!(b.generation(), seen);
}
