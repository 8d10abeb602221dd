//! Nanoseconds per `try_acquire` on the real clock, uncontended and with two
//! threads, for shape's bucket, the `governor` crate and a Mutex-protected
//! floating-point bucket, all at the same rate and burst, in one run.
//!
//! shape's bucket runs on `CLOCK_MONOTONIC`, which every process on the
//! machine shares; governor reads the TSC through `quanta`, with a
//! calibration of its own process. To tell the bucket's cost from the
//! clock's, shape's bucket also runs on the same TSC clock as governor
//! ("shape-tsc"), and the two clocks are timed alone.
//!
//! Run with `cargo bench -p shape-bucket --bench bucket`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use governor::{Quota, RateLimiter};
use shape_bucket::{AtomicU32, Clock, Fill, Limit, MonotonicClock, Rate, TokenBucket};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Fast enough that the bucket never runs dry in a tight loop, so every call
/// takes the granting path, the one a busy pipe takes.
const RATE: u32 = 1_000_000_000;
const BURST: u32 = 1_000_000;

/// The textbook bucket: a float of tokens and a timestamp under a Mutex.
struct MutexBucket {
    state: Mutex<(f64, Instant)>,
    rate: f64,
    burst: f64,
}

impl MutexBucket {
    fn new() -> Self {
        MutexBucket {
            state: Mutex::new((f64::from(BURST), Instant::now())),
            rate: f64::from(RATE),
            burst: f64::from(BURST),
        }
    }

    fn try_acquire(&self, n: f64) -> bool {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        let tokens = (state.0 + (now - state.1).as_secs_f64() * self.rate).min(self.burst);
        *state = (tokens, now);
        if tokens >= n {
            state.0 -= n;
            true
        } else {
            false
        }
    }
}

/// The TSC through quanta, as governor reads it. Per-process, so fit for
/// this comparison only.
struct TscClock {
    clock: quanta::Clock,
    start: u64,
}

impl Clock for TscClock {
    fn now(&self) -> u64 {
        self.clock.delta_as_nanos(self.start, self.clock.raw())
    }
    fn sleep_until(&self, deadline: u64, _: &AtomicU32, _: u32) {
        std::thread::sleep(Duration::from_nanos(deadline.saturating_sub(self.now())));
    }
    fn wake(&self, _: &AtomicU32) {}
}

type Contender = Arc<dyn Fn() -> bool + Send + Sync>;

fn contenders() -> Vec<(&'static str, Contender)> {
    let limit = Limit::Rate(Rate::from_whole(RATE.into()).unwrap());
    let shape = TokenBucket::new(limit, BURST.into()).unwrap();
    let clock = quanta::Clock::new();
    let tsc = TscClock {
        start: clock.raw(),
        clock,
    };
    let shape_tsc = TokenBucket::with_clock(limit, BURST.into(), Fill::Full, tsc).unwrap();
    let governor = RateLimiter::direct(
        Quota::per_second(NonZeroU32::new(RATE).unwrap())
            .allow_burst(NonZeroU32::new(BURST).unwrap()),
    );
    let mutex = MutexBucket::new();
    vec![
        ("shape", Arc::new(move || shape.try_acquire(1).is_ok())),
        (
            "shape-tsc",
            Arc::new(move || shape_tsc.try_acquire(1).is_ok()),
        ),
        ("governor", Arc::new(move || governor.check().is_ok())),
        ("mutex-f64", Arc::new(move || mutex.try_acquire(1.0))),
    ]
}

/// Time per call as each of `threads` threads sees it, all calling at once.
fn per_call(f: &Contender, threads: usize, iters: u64) -> Duration {
    let start = Arc::new(std::sync::Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (f, start) = (f.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let t = Instant::now();
                for _ in 0..iters {
                    black_box(f());
                }
                t.elapsed()
            })
        })
        .collect();
    start.wait();
    workers
        .into_iter()
        .map(|w| w.join().unwrap())
        .max()
        .unwrap()
}

fn clocks(c: &mut Criterion) {
    let mut group = c.benchmark_group("clock");
    group.bench_function("CLOCK_MONOTONIC", |b| {
        b.iter(|| black_box(MonotonicClock.now()))
    });
    let quanta = quanta::Clock::new();
    group.bench_function("quanta-tsc", |b| b.iter(|| black_box(quanta.now())));
    group.finish();
}

fn try_acquire(c: &mut Criterion) {
    for threads in [1, 2] {
        let mut group = c.benchmark_group(format!("try_acquire/{threads}-thread"));
        for (name, f) in contenders() {
            if threads == 1 {
                group.bench_function(BenchmarkId::from_parameter(name), |b| {
                    b.iter(|| black_box(f()))
                });
            } else {
                group.bench_function(BenchmarkId::from_parameter(name), |b| {
                    b.iter_custom(|iters| per_call(&f, threads, iters))
                });
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = clocks, try_acquire
}
criterion_main!(benches);
