//! Model checking of the bucket with loom: every interleaving of a few
//! threads that take tokens, reserve debt and change the rate, checking that
//! no token is spent twice and no update is lost.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --test loom`
//! (`.ci/run` does, with a preemption bound that keeps it to a few minutes).
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use shape_bucket::FakeClock;
use shape_bucket::{Fill, TokenBucket};
use shape_bucket::{Limit, Rate};

fn rate(bytes_per_sec: u64) -> Limit {
    Limit::Rate(Rate::from_whole(bytes_per_sec).unwrap())
}

/// A bucket holding 10 tokens on a clock that stands still, so every token
/// granted must come out of those 10.
fn bucket() -> Arc<TokenBucket<FakeClock>> {
    Arc::new(TokenBucket::with_clock(rate(1), 10, Fill::Full, FakeClock::new(1_000)).unwrap())
}

#[test]
fn two_takers_cannot_both_have_the_same_tokens() {
    loom::model(|| {
        let b = bucket();
        let takers: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || b.try_acquire(6).is_ok())
            })
            .collect();
        let granted = takers
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|&ok| ok)
            .count();
        assert_eq!(granted, 1);
        assert_eq!(b.available(), 4);
    });
}

#[test]
fn taking_reserving_and_a_rate_change_lose_no_update() {
    loom::model(|| {
        let b = bucket();
        let taker = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire(3).is_ok())
        };
        let reserver = {
            let b = b.clone();
            thread::spawn(move || {
                let _ = b.reserve(4);
            })
        };
        b.set_limit(rate(2));
        let took = taker.join().unwrap();
        reserver.join().unwrap();
        assert!(took, "3 of 10 tokens are always there");
        assert_eq!(b.available(), 3);
        assert_eq!(b.limit(), rate(2));
    });
}

#[test]
fn concurrent_writers_both_take_effect_in_some_order() {
    loom::model(|| {
        let b = bucket();
        let writer = {
            let b = b.clone();
            thread::spawn(move || b.set(rate(5), 8).unwrap())
        };
        let taken = b.try_acquire(2).is_ok();
        b.set_limit(rate(7));
        writer.join().unwrap();
        assert!(taken);
        // Either order leaves burst 8; the rate is 7 unless 5 came last.
        assert_eq!(b.burst(), 8);
        assert!([rate(5), rate(7)].contains(&b.limit()));
        // Taking 2 before the burst drops to 8 leaves 8; after it, 6.
        assert!([6, 8].contains(&b.available()), "{}", b.available());
    });
}

#[test]
fn a_sleeper_finishes_when_the_limit_is_lifted() {
    loom::model(|| {
        let b =
            Arc::new(TokenBucket::with_clock(rate(1), 1, Fill::Empty, FakeClock::new(0)).unwrap());
        let sleeper = {
            let b = b.clone();
            thread::spawn(move || b.acquire(5))
        };
        b.set_limit(Limit::Unlimited);
        sleeper.join().unwrap().unwrap();
        assert_eq!(b.limit(), Limit::Unlimited);
    });
}

#[test]
fn three_threads_account_for_every_token() {
    loom::model(|| {
        let b = bucket();
        let takers: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || b.try_acquire(4).is_ok())
            })
            .collect();
        let _ = b.reserve(5);
        let granted = takers
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|&ok| ok)
            .count() as i64;
        assert!(granted >= 1, "at least 5 tokens are left for the takers");
        assert_eq!(b.available(), 10 - 4 * granted - 5);
    });
}

/// A taker that loses its compare-exchange tries again with the time it
/// read before, while another thread gives tokens back, moves the clock on
/// and takes a whole burst. The old time may only make it wait: at the new
/// time, what the two took there and what is left make one burst, so no
/// burst cap was applied behind the other's.
#[test]
fn a_taker_that_keeps_its_old_time_never_lets_too_much_through() {
    loom::model(|| {
        // One token a nanosecond, 10 held, 20 more coming in.
        let clock = FakeClock::new(1_000);
        let b =
            Arc::new(TokenBucket::with_clock(rate(1_000_000_000), 10, Fill::Full, clock).unwrap());
        let early = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire(3).is_ok())
        };
        let late = {
            let b = b.clone();
            thread::spawn(move || {
                let mut paid = b.reserve(4);
                b.give_back(&mut paid, 4);
                b.clock().advance(20);
                b.try_acquire(10).is_ok()
            })
        };
        let early = early.join().unwrap();
        let late = late.join().unwrap();
        if late {
            // The early taker came first, at the old time, or not at all.
            assert_eq!(b.available(), 0);
        } else {
            // The early taker came first at the new time: 7 are left.
            assert!(early);
            assert_eq!(b.available(), 7);
        }
    });
}
