//! A direction of the proxy stepped on a fake clock, between sides in
//! memory: the exact bytes out and the exact moments it asks to be
//! stepped again, for a rate, a rate changed while it waits, a delay line,
//! and each fault that counts time. What the event loop adds (sockets,
//! poll, the alarm) is not here; how a direction waits is. Between real
//! sockets, where chunks are spliced, in [`between_sockets`].

mod between_sockets;
mod pacing_grid;
mod read_ahead;

use super::*;
use shape_bucket::{FakeClock, Fill, Limit};
use shape_impair::conditions::{InForce, Retune};
use shape_impair::faults::{Change, Faults, Slice, Trigger};
use std::collections::VecDeque;
use std::time::Duration;

const MS: u64 = 1_000_000;

/// One side in memory. As input it gives what it holds and then would
/// block, or ends once told; as output it takes everything, noting when.
struct MemorySide {
    input: VecDeque<u8>,
    ended: bool,
    /// A reset to report once its input is drained, as Linux reports
    /// ECONNRESET: once, and then the end of the stream.
    reset: bool,
    clock: Arc<FakeClock>,
    /// Each write: when, and how many bytes.
    writes: Vec<(u64, usize)>,
    /// Reads that brought bytes, and the bytes written, in order.
    reads: usize,
    written: Vec<u8>,
    shut_at: Option<u64>,
}

impl MemorySide {
    fn new(clock: &Arc<FakeClock>, input: usize, ended: bool) -> MemorySide {
        MemorySide {
            input: (0..input).map(|i| i as u8).collect(),
            ended,
            reset: false,
            clock: clock.clone(),
            writes: Vec::new(),
            reads: 0,
            written: Vec::new(),
            shut_at: None,
        }
    }

    /// Bytes written by clock time `t` (inclusive).
    fn out_by(&self, t: u64) -> usize {
        self.writes
            .iter()
            .filter(|(at, _)| *at <= t)
            .map(|(_, n)| n)
            .sum()
    }

    fn out(&self) -> usize {
        self.out_by(u64::MAX)
    }
}

impl Read for MemorySide {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        if self.input.is_empty() {
            if std::mem::take(&mut self.reset) {
                self.ended = true;
                return Err(io::ErrorKind::ConnectionReset.into());
            }
            return match self.ended {
                true => Ok(0),
                false => Err(io::ErrorKind::WouldBlock.into()),
            };
        }
        self.reads += 1;
        let n = buffer.len().min(self.input.len());
        for (slot, byte) in buffer.iter_mut().zip(self.input.drain(..n)) {
            *slot = byte;
        }
        Ok(n)
    }
}

impl Side for MemorySide {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writes.push((self.clock.now(), buf.len()));
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shut_at = Some(self.clock.now());
        Ok(())
    }
}

/// A direction going down, its clock, its bucket (starting empty) and its
/// conditions.
struct DirectionBench {
    clock: Arc<FakeClock>,
    bucket: TokenBucket<Arc<FakeClock>>,
    conditions: Conditions,
    direction: Direction,
    passed: Throughput,
    scratch: Vec<u8>,
    /// The HTTP exchange its bytes pass, if any.
    gate: Option<HttpGate>,
}

impl DirectionBench {
    fn new(limit: Limit, burst: u64, delay: Duration, faults: Faults) -> DirectionBench {
        let clock = Arc::new(FakeClock::new(0));
        let bucket = TokenBucket::with_clock(limit, burst, Fill::Empty, clock.clone()).unwrap();
        let conditions = Conditions::new(InForce {
            faults: [Faults::default(), faults],
            delay: [delay; 2],
            jitter: Duration::ZERO,
        });
        let link = SlowLink {
            delay,
            jitter: Duration::ZERO,
            max_buffer: None,
        };
        let direction = Direction::new(
            Way::Down,
            &Setup {
                link: &link,
                conditions: &conditions,
                seeds: Seeds {
                    jitter: 1,
                    faults: 2,
                },
                affected: true,
                block: 1024,
                received: None,
                now: 0,
            },
        );
        DirectionBench {
            clock,
            bucket,
            conditions,
            direction,
            passed: Throughput::default(),
            scratch: vec![0; BUFFER],
            gate: None,
        }
    }

    /// An input holding `input` bytes (and then ending, if `ended`), and
    /// an output that takes everything.
    fn sides(&self, input: usize, ended: bool) -> (MemorySide, MemorySide) {
        (
            MemorySide::new(&self.clock, input, ended),
            MemorySide::new(&self.clock, 0, false),
        )
    }

    /// Steps once, now.
    fn step(&mut self, from: &mut impl Side, to: &mut impl Side) -> Result<Option<u64>, Failure> {
        self.direction.step(
            from,
            to,
            HeldTo {
                bucket: &self.bucket,
                conditions: &self.conditions,
                passed: &self.passed,
            },
            &mut self.scratch,
            self.gate.as_mut(),
        )
    }

    /// Steps at every moment the direction asks for, until it is done or
    /// asks for nothing, or the clock passes `until`; returns the moments.
    fn run(&mut self, from: &mut MemorySide, to: &mut MemorySide, until: u64) -> Vec<u64> {
        let mut moments = Vec::new();
        while let Some(wake) = self.step(from, to).unwrap() {
            if self.direction.done() || wake > until {
                break;
            }
            moments.push(wake);
            self.clock.advance_to(wake);
        }
        moments
    }
}

/// 100,000 B/s with a burst of 10,000: chunks of 250 bytes (2.5 ms).
fn rate() -> Limit {
    Limit::per_second(100_000)
}

#[test]
fn at_a_rate_every_byte_leaves_the_moment_it_is_paid_for() {
    let mut bench = DirectionBench::new(rate(), 10_000, Duration::ZERO, Faults::default());
    let (mut from, mut to) = bench.sides(30_000, true);
    let moments = bench.run(&mut from, &mut to, u64::MAX);
    assert_eq!(to.out(), 30_000);
    // From an empty bucket: a chunk of a packet (1,500 bytes, below
    // 150 KB/s) every 15 ms, to the nanosecond, the last at 300 ms; never
    // a byte before it is paid.
    assert_eq!(moments.len(), 20);
    for (k, &t) in moments.iter().enumerate() {
        assert_eq!(t, (k as u64 + 1) * 15 * MS, "moment {k}");
        assert_eq!(to.out_by(t), (k + 1) * 1500, "by {t} ns");
        assert_eq!(to.out_by(t - 1), k * 1500, "just before {t} ns");
    }
    assert_eq!(to.shut_at, Some(300 * MS), "the end passes on at once");
}

#[test]
fn a_reset_met_while_a_chunk_gathers_is_a_reset_not_an_end() {
    // Unlimited: the whole input is one read, and the reset comes in the
    // read that would have gathered more into the same chunk.
    let mut bench = DirectionBench::new(Limit::Unlimited, 1, Duration::ZERO, Faults::default());
    let (mut from, mut to) = bench.sides(100, false);
    from.reset = true;
    let mut failed = None;
    for _ in 0..10 {
        match bench.step(&mut from, &mut to) {
            Ok(_) if bench.direction.done() => break,
            Ok(_) => {}
            Err(failure) => {
                failed = Some(failure);
                break;
            }
        }
    }
    let failure = failed.expect("the reset is a failure");
    assert_eq!(failure.err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(to.shut_at, None, "never an orderly end");
}

#[test]
fn a_rate_changed_while_a_direction_waits_retimes_its_wait() {
    let mut bench = DirectionBench::new(rate(), 10_000, Duration::ZERO, Faults::default());
    let (mut from, mut to) = bench.sides(30_000, true);
    bench.run(&mut from, &mut to, 100 * MS);
    assert_eq!(
        to.out(),
        9_000,
        "chunks of 1,500 bytes at 100,000 B/s by 90 ms"
    );
    // Doubled at 100 ms, with a chunk of 1,500 bytes paid for at the old
    // rate and due at 105 ms, 500 tokens short: that wait is moved to
    // 102.5 ms, the chunks after it are 10 ms of the new rate (2,000
    // bytes: a proxy's chunk from 150 KB/s), and the last byte leaves at
    // 200 ms.
    bench.clock.advance_to(100 * MS);
    bench.bucket.set_limit(Limit::per_second(200_000));
    let moments = bench.run(&mut from, &mut to, u64::MAX);
    assert_eq!(to.out(), 30_000);
    assert_eq!(moments[0], 102_500_000);
    assert_eq!(to.out_by(102_500_000), 10_500);
    assert_eq!(to.out_by(112_500_000 - 1), 10_500);
    assert_eq!(to.out_by(112_500_000), 12_500);
    assert_eq!(moments.last(), Some(&(200 * MS)));
}

#[test]
fn a_delay_line_holds_each_chunk_for_the_delay_after_it_is_paid() {
    let delay = Duration::from_millis(50);
    let mut bench = DirectionBench::new(rate(), 10_000, delay, Faults::default());
    let (mut from, mut to) = bench.sides(30_000, true);
    bench.run(&mut from, &mut to, u64::MAX);
    assert_eq!(to.out(), 30_000);
    assert_eq!(to.out_by(50 * MS - 1), 0, "nothing before the delay");
    // The first chunk, a packet (1,500 bytes: below 150 KB/s a chunk is
    // one), is paid at 15 ms and leaves at 65 ms; by 150 ms, those paid by
    // 100 ms (the sixth at 90 ms); the last, paid at 300 ms, at 350 ms,
    // and the end follows it.
    assert_eq!(to.writes.first().map(|w| w.0), Some(65_000_000));
    assert_eq!(to.out_by(150 * MS), 9_000);
    assert_eq!(to.writes.last().map(|w| w.0), Some(350 * MS));
    assert_eq!(to.shut_at, Some(350 * MS));
}

#[test]
fn slices_leave_a_pause_apart() {
    let faults = Faults {
        slice: Some(Slice {
            size: 100,
            variation: 0,
        }),
        slice_pause: Duration::from_millis(20),
        ..Faults::default()
    };
    let mut bench = DirectionBench::new(Limit::Unlimited, 1 << 17, Duration::ZERO, faults);
    let (mut from, mut to) = bench.sides(500, true);
    bench.run(&mut from, &mut to, u64::MAX);
    let expected: Vec<(u64, usize)> = (0..5).map(|k| (k * 20 * MS, 100)).collect();
    assert_eq!(to.writes, expected);
}

#[test]
fn a_slow_close_holds_the_end_that_long_after_the_data() {
    let faults = Faults {
        slow_close: Duration::from_millis(300),
        ..Faults::default()
    };
    let mut bench = DirectionBench::new(rate(), 10_000, Duration::ZERO, faults);
    let (mut from, mut to) = bench.sides(10_000, true);
    let moments = bench.run(&mut from, &mut to, u64::MAX);
    assert_eq!(to.out_by(100 * MS), 10_000);
    assert_eq!(moments.last(), Some(&(400 * MS)));
    assert_eq!(to.shut_at, Some(400 * MS));
}

#[test]
fn a_stall_in_time_keeps_the_output_open_and_silent_from_that_moment() {
    let faults = Faults {
        stall_after: Some(Trigger::After(Duration::from_millis(100))),
        ..Faults::default()
    };
    let mut bench = DirectionBench::new(rate(), 10_000, Duration::ZERO, faults);
    let (mut from, mut to) = bench.sides(30_000, true);
    bench.run(&mut from, &mut to, u64::MAX);
    // What was paid before 100 ms went out (a chunk of 1,500 bytes every
    // 15 ms, the last at 90 ms); nothing from that moment on (the chunk
    // due at 105 ms is lost), and no end.
    assert_eq!(to.out(), 9_000);
    assert_eq!(to.writes.last().map(|w| w.0), Some(90 * MS));
    assert_eq!(to.shut_at, None);
    assert!(bench.direction.done(), "its input read to the end, unpaid");
}

#[test]
fn a_reset_in_time_strikes_at_its_moment_even_with_nothing_to_do() {
    let faults = Faults {
        reset_after: Some(Trigger::After(Duration::from_millis(100))),
        ..Faults::default()
    };
    let mut bench = DirectionBench::new(rate(), 10_000, Duration::ZERO, faults);
    // An open input with nothing in it: only the reset is awaited.
    let (mut from, mut to) = bench.sides(0, false);
    assert_eq!(bench.step(&mut from, &mut to).unwrap(), Some(100 * MS));
    bench.clock.advance_to(100 * MS - 1);
    assert!(bench.step(&mut from, &mut to).is_ok(), "not yet");
    bench.clock.advance_to(100 * MS);
    let failure = bench.step(&mut from, &mut to).unwrap_err();
    assert!(ResetStruck::is(&failure.err));
}

#[test]
fn a_fault_sent_while_running_counts_from_that_moment() {
    let mut bench = DirectionBench::new(rate(), 10_000, Duration::ZERO, Faults::default());
    let (mut from, mut to) = bench.sides(30_000, true);
    bench.run(&mut from, &mut to, 50 * MS);
    bench.clock.advance_to(50 * MS);
    bench.conditions.change(&Retune {
        faults: vec![Change::parse("stall-after", "100ms").unwrap()],
        ..Retune::default()
    });
    bench.run(&mut from, &mut to, u64::MAX);
    // Sent at 50 ms, it stalls at 150 ms: the last chunk out is the one
    // due at 135 ms (a chunk of 1,500 bytes every 15 ms); the one due at
    // 150 ms is lost.
    assert_eq!(to.out(), 13_500);
    assert_eq!(to.writes.last().map(|w| w.0), Some(135 * MS));
}

#[test]
fn a_bandwidth_toxic_passes_480_kb_at_1000_kb_s_in_480_ms_evenly() {
    // As `shape --serve` sets up toxiproxy's bandwidth toxic: a bucket of
    // the connection's own, empty, whose burst is 40 ms.
    let limit = Limit::per_second(1_000_000);
    let mut bench = DirectionBench::new(limit, 2, Duration::ZERO, Faults::default());
    let burst = shape_leaves::chunk::bandwidth_burst(limit);
    bench.bucket = TokenBucket::with_clock(limit, burst, Fill::Empty, bench.clock.clone()).unwrap();
    let (mut from, mut to) = bench.sides(480_000, true);
    bench.run(&mut from, &mut to, u64::MAX);
    assert_eq!(to.out(), 480_000);
    let last = to.writes.last().unwrap().0;
    // toxiproxy's test allows 480 ms, give or take 10 ms; nothing is
    // early.
    assert!((475 * MS..=480 * MS).contains(&last), "done at {last} ns");
    assert!(to.out_by(0) <= 5_000, "{} bytes at once", to.out_by(0));
    // Every 10 ms window after the first carries 10,000 bytes, give or
    // take a chunk: a CV far below 0.1.
    let mean = (to.out_by(470 * MS) - to.out_by(10 * MS)) as f64 / 46.0;
    let cv = cv_per(&to, 10 * MS, 10 * MS, 470 * MS);
    assert!((mean - 10_000.0).abs() <= 100.0, "mean {mean}");
    assert!(cv <= 0.1, "CV per 10 ms {cv}");
}

/// The CV of the bytes written in each `window` from `from` to `to`.
fn cv_per(out: &MemorySide, window: u64, from: u64, to: u64) -> f64 {
    let windows: Vec<f64> = (from / window..to / window)
        .map(|k| (out.out_by((k + 1) * window) - out.out_by(k * window)) as f64)
        .collect();
    let mean = windows.iter().sum::<f64>() / windows.len() as f64;
    let variance = windows.iter().map(|w| (w - mean).powi(2)).sum::<f64>() / windows.len() as f64;
    variance.sqrt() / mean
}

#[test]
fn at_any_rate_a_connection_keeps_between_its_burst_and_a_chunk_behind() {
    // From a full bucket of the default burst, a connection with more to
    // send than three seconds carry: by any moment t it has passed at
    // most burst + rate·t, and at least rate·t less one chunk and 10 ms
    // of the rate; from 1 MiB/s every 100 ms carries the same.
    for per_second in [4096, 20_000, 150_000, 200_000, 1 << 20, 10 << 20] {
        let limit = Limit::per_second(per_second);
        let burst =
            shape_leaves::chunk::default_burst(limit, shape_leaves::counting::Counting::Bytes);
        let chunk = proxy_chunk_size(limit, burst, 0) as u128;
        let mut bench = DirectionBench::new(limit, burst, Duration::ZERO, Faults::default());
        bench.bucket =
            TokenBucket::with_clock(limit, burst, Fill::Full, bench.clock.clone()).unwrap();
        let (mut from, mut to) = bench.sides(4 * per_second as usize, true);
        bench.run(&mut from, &mut to, 3_000 * MS);
        // In bytes times nanoseconds, exactly.
        let second = u128::from(1_000 * MS);
        let behind = chunk * second + per_second as u128 * u128::from(10 * MS);
        for &(at, _) in &to.writes {
            for t in [at.saturating_sub(1), at] {
                let passed = to.out_by(t);
                let (out, paid) = (passed as u128 * second, per_second as u128 * t as u128);
                let said = format!("{per_second} B/s: {passed} bytes by {t} ns");
                assert!(out <= u128::from(burst) * second + paid, "{said}");
                assert!(out + behind >= paid, "{said}");
            }
        }
        assert!(
            to.out_by(3_000 * MS) as f64 >= 3.0 * per_second as f64,
            "{per_second} B/s"
        );
        if per_second >= 1 << 20 {
            let cv = cv_per(&to, 100 * MS, 100 * MS, 3_000 * MS);
            assert!(cv <= 0.05, "{per_second} B/s: CV per 100 ms {cv}");
        }
    }
}
