//! A measuring sink for shapers. It runs a shaper command (standard input
//! passed through, standard output into the meter), reads what arrives as
//! fast as it can, timestamps every read with the monotonic clock, and
//! prints one Markdown table row:
//!
//! - with `--rate R`: the observed burst (the smallest b such that every
//!   interval [t1, t2] carried at most b + R * (t2 - t1) bytes), the steady
//!   rate after the first second over R, the smoothness (coefficient of
//!   variation of the bytes in each 100 ms window after the first second,
//!   then the same per 10 ms window, where 100 ms lumps cannot hide), and
//!   the shaper's CPU seconds and peak memory;
//! - with `--bytes N` instead: the wall time until N bytes arrived, the
//!   throughput, and the same CPU and memory figures;
//! - with `--records` (and `--rate R` in records a second): the same for
//!   lines, counted as their newlines arrive, with the smallest gap
//!   between consecutive lines after the first and, with `--count N`, the
//!   time from the first line to the Nth.
//!
//! CPU time (user + system, every thread, in nanoseconds from
//! `/proc/PID/task/*/schedstat`) and peak memory (`VmHWM` from
//! `/proc/PID/status`) are read from the kernel just before the shaper is
//! stopped. Used by `benches/compare.sh`:
//!
//! ```sh
//! cargo run --release --example meter -- --label pv --rate 1MiB --seconds 8 -- pv -q -L 1048576 < /dev/zero
//! ```

use clap::Parser;
use shape_bucket::units::{Size, human_bytes, human_rate};
use shape_bucket::{Clock, Limit, MonotonicClock};
use std::io::Read;
use std::process::{Command, Stdio};

#[derive(Debug, Parser)]
struct Args {
    /// What to call the shaper in the table.
    #[arg(long)]
    label: String,
    /// The promised rate; measure fidelity.
    #[arg(long, conflicts_with = "bytes")]
    rate: Option<Limit>,
    /// The configured burst, shown in the table.
    #[arg(long, default_value = "default")]
    burst: String,
    /// How long to measure at a rate.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Measure throughput: stop when this many bytes have arrived.
    #[arg(long, required_unless_present = "rate")]
    bytes: Option<Size>,
    /// Count lines instead of bytes: the rate is in lines a second.
    #[arg(long)]
    records: bool,
    /// With --records: stop when this many lines have arrived.
    #[arg(long, requires = "records")]
    count: Option<usize>,
    /// With --rate: also write the bytes of every 10 ms window, from the
    /// start, to this file as `seconds,bytes` lines (for benches/picture.py).
    #[arg(long, requires = "rate")]
    windows: Option<std::path::PathBuf>,
    /// The shaper and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// One read: when it returned (seconds since the shaper started) and how
/// many bytes it brought.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    at: f64,
    bytes: u64,
}

/// The smallest b such that every interval [t1, t2] carried at most
/// b + rate * (t2 - t1) bytes. One pass: the worst interval ending at read
/// i starts at the read j that maximises rate * t_j - (bytes before j).
fn observed_burst(arrivals: &[Arrival], rate: f64) -> f64 {
    let (mut burst, mut best_start, mut before) = (0.0f64, f64::MIN, 0u64);
    for a in arrivals {
        best_start = best_start.max(rate * a.at - before as f64);
        before += a.bytes;
        burst = burst.max(before as f64 - rate * a.at + best_start);
    }
    burst
}

/// Bytes after `skip` seconds over the time after `skip`, up to `end`.
fn steady_rate(arrivals: &[Arrival], skip: f64, end: f64) -> f64 {
    let bytes: u64 = arrivals
        .iter()
        .filter(|a| a.at > skip)
        .map(|a| a.bytes)
        .sum();
    bytes as f64 / (end - skip)
}

/// Standard deviation over mean of the bytes in each whole `window` from
/// `skip` to `end`.
fn smoothness(arrivals: &[Arrival], window: f64, skip: f64, end: f64) -> f64 {
    let windows = ((end - skip) / window).floor() as usize;
    if windows == 0 {
        return f64::NAN;
    }
    let mut sums = vec![0u64; windows];
    for a in arrivals.iter().filter(|a| a.at >= skip) {
        if let Some(sum) = sums.get_mut(((a.at - skip) / window) as usize) {
            *sum += a.bytes;
        }
    }
    let mean = sums.iter().sum::<u64>() as f64 / windows as f64;
    let variance = sums.iter().map(|&s| (s as f64 - mean).powi(2)).sum::<f64>() / windows as f64;
    variance.sqrt() / mean
}

/// CPU nanoseconds of every thread of `pid`, and its peak resident memory
/// in KiB.
fn usage(pid: u32) -> (f64, u64) {
    let mut cpu_ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            cpu_ns += stat
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let peak_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    (cpu_ns as f64 / 1e9, peak_kib)
}

/// Writes the bytes that arrived in each 10 ms window of [0, end) to
/// `path`, one `seconds,bytes` line per window.
fn write_windows(path: &std::path::Path, arrivals: &[Arrival], end: f64) {
    let count = (end / 0.01).ceil() as usize;
    let mut windows = vec![0u64; count.max(1)];
    for arrival in arrivals {
        let index = ((arrival.at / 0.01) as usize).min(windows.len() - 1);
        windows[index] += arrival.bytes;
    }
    let text: String = windows
        .iter()
        .enumerate()
        .map(|(i, bytes)| format!("{:.2},{bytes}\n", i as f64 * 0.01))
        .collect();
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn main() {
    let args = Args::parse();
    let clock = MonotonicClock;
    let mut child = Command::new(&args.command[0])
        .args(&args.command[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", args.command[0]));
    let start = clock.now();
    let seconds = |t: u64| (t - start) as f64 / 1e9;
    let mut stdout = child.stdout.take().expect("piped");
    let mut buffer = vec![0u8; 1 << 20];
    let mut arrivals = Vec::with_capacity(1 << 20);
    let mut total = 0u64;
    let goal = args.bytes.map_or(u64::MAX, Size::bytes);
    // With --records: when each line ended.
    let mut lines = Vec::new();
    let mut bytes_in = 0u64;
    let end = loop {
        let n = stdout.read(&mut buffer).expect("read from the shaper");
        let now = clock.now();
        bytes_in += n as u64;
        let counted = if args.records {
            let ended = buffer[..n].iter().filter(|&&b| b == b'\n').count();
            lines.extend(std::iter::repeat_n(seconds(now), ended));
            ended as u64
        } else {
            n as u64
        };
        total += counted;
        if args.rate.is_some() && counted > 0 {
            arrivals.push(Arrival {
                at: seconds(now),
                bytes: counted,
            });
        }
        let enough = args.count.is_some_and(|count| lines.len() >= count);
        let timed_out = seconds(now) >= args.seconds && args.rate.is_some();
        if n == 0 || bytes_in >= goal || enough || timed_out {
            break seconds(now);
        }
    };
    if let Some(path) = &args.windows {
        write_windows(path, &arrivals, end);
    }
    let (cpu, peak_kib) = usage(child.id());
    let _ = child.kill();
    let _ = child.wait();
    let memory = human_bytes(peak_kib * 1024);
    match args.rate.and_then(Limit::rate) {
        Some(rate) if args.records => {
            let rate = rate.bytes_per_sec();
            let gaps = lines.windows(2).map(|w| w[1] - w[0]);
            let smallest = gaps.fold(f64::INFINITY, f64::min);
            let span = match (lines.first(), lines.last()) {
                (Some(first), Some(last)) => format!("{:.3} s", last - first),
                _ => "-".into(),
            };
            println!(
                "| {} | {rate} lines/s | {} | {:.0} lines | {:.5} | {:.1} ms | {} lines in {span} | {cpu:.3} | {memory} |",
                args.label,
                args.burst,
                observed_burst(&arrivals, rate),
                steady_rate(&arrivals, 1.0, end) / rate,
                smallest * 1e3,
                lines.len(),
            );
        }
        Some(rate) => {
            let rate = rate.bytes_per_sec();
            println!(
                "| {} | {}/s | {} | {} | {:.5} | {:.4} | {:.4} | {cpu:.3} | {memory} |",
                args.label,
                human_rate(rate),
                args.burst,
                human_bytes(observed_burst(&arrivals, rate) as u64),
                steady_rate(&arrivals, 1.0, end) / rate,
                smoothness(&arrivals, 0.1, 1.0, end),
                smoothness(&arrivals, 0.01, 1.0, end),
            );
        }
        None if args.records => println!(
            "| {} | {total} lines | {end:.3} s | {:.0} lines/s | {cpu:.3} | {memory} |",
            args.label,
            total as f64 / end,
        ),
        None => println!(
            "| {} | {} | {end:.3} s | {}/s | {cpu:.3} | {memory} |",
            args.label,
            human_bytes(total),
            human_rate(total as f64 / end),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `first` bytes at once, then `rate` in pieces every `every` seconds,
    /// each in the middle of its slot so that none sits on a window edge.
    fn even(rate: f64, every: f64, seconds: f64, first: u64) -> Vec<Arrival> {
        let pieces = (seconds / every) as usize;
        let steady = (1..=pieces).map(|i| Arrival {
            at: (i as f64 - 0.5) * every,
            bytes: (rate * every) as u64,
        });
        std::iter::once(Arrival {
            at: 0.0,
            bytes: first,
        })
        .chain(steady)
        .collect()
    }

    #[test]
    fn an_even_stream_after_a_burst_shows_that_burst() {
        let arrivals = even(1000.0, 0.01, 5.0, 500);
        // The burst plus the first piece, less what the rate allows before it.
        assert!((observed_burst(&arrivals, 1000.0) - 505.0).abs() < 1e-6);
        assert!((steady_rate(&arrivals, 1.0, 5.0) / 1000.0 - 1.0).abs() < 0.01);
        assert!(smoothness(&arrivals, 0.1, 1.0, 5.0) < 0.01);
        assert!(smoothness(&arrivals, 0.01, 1.0, 5.0) < 0.01);
    }

    #[test]
    fn lumps_every_100_ms_hide_in_100_ms_windows_but_not_in_10_ms_ones() {
        // 100 bytes at once every 100 ms, mid-slot: 1000 B/s, as pv sends.
        let arrivals = even(1000.0, 0.1, 5.0, 0);
        assert!(smoothness(&arrivals, 0.1, 1.0, 5.0) < 0.01);
        // Nine empty windows of ten: a CV of 3.
        let cv = smoothness(&arrivals, 0.01, 1.0, 5.0);
        assert!((cv - 3.0).abs() < 0.01, "{cv}");
    }

    #[test]
    fn lumps_show_as_burst_and_roughness() {
        // 100 bytes every 100 ms at 1000 B/s, delivered as one lump a second.
        let arrivals: Vec<Arrival> = (1..=5)
            .map(|s| Arrival {
                at: s as f64,
                bytes: 1000,
            })
            .collect();
        assert!((observed_burst(&arrivals, 1000.0) - 1000.0).abs() < 1e-9);
        assert!(smoothness(&arrivals, 0.1, 1.0, 5.0) > 2.0);
    }

    #[test]
    fn a_rate_above_the_promise_grows_the_burst() {
        let arrivals = even(1100.0, 0.01, 10.0, 0);
        let burst = observed_burst(&arrivals, 1000.0);
        assert!((burst - 1000.0).abs() < 20.0, "{burst}");
    }
}
