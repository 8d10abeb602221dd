//! `--stats`: the line a copy ends with, what passed in how long, and the
//! average beside the limit and burst that bound it.

use crate::mode::plan::CopyPlan;
use shape_bucket::Limit;
use shape_leaves::counting::Counting;
use shape_leaves::throughput::Throughput;
use std::time::Instant;

/// The `--stats` line of a copy that started at `started`, asked as
/// `plan`, paid from a bucket of `limit_and_burst` (a share's as a whole,
/// when on one) and passed on `forwarded` (`dropped` bytes of them lost
/// by `--drop`), with its seed when faults drew from it.
pub fn line(
    plan: &CopyPlan,
    (limit, burst): (Limit, u64),
    forwarded: &Throughput,
    dropped: u64,
    started: Instant,
) -> String {
    let stats = Stats {
        counting: plan.pacing.start.counting,
        count: forwarded.total(),
        dropped,
        seconds: started.elapsed().as_secs_f64(),
        limit,
        burst,
        written: plan
            .rate_written
            .as_deref()
            .filter(|_| limit == plan.pacing.start.limit),
        share: plan.pacing.share.as_ref().map(|share| share.to_string()),
    };
    let mut line = stats.line();
    if plan.faults.draws() || !plan.slow_link.jitter.is_zero() {
        line += &format!("; seed {}", plan.seed);
    }
    line
}

/// What the `--stats` line reports.
struct Stats<'a> {
    counting: Counting,
    /// Units paid for and passed on (records, or bytes), dropped or not.
    count: u64,
    /// Bytes of them that `--drop` lost.
    dropped: u64,
    seconds: f64,
    limit: Limit,
    burst: u64,
    /// The rate as the user wrote it, while it is the limit in force.
    written: Option<&'a str>,
    /// The share the limit is the whole of, if the copy spent from one.
    share: Option<String>,
}

/// The unit a rate is written in, to tell `40Mbit` (worth saying as
/// written) from `1MiB` (as shape would say it, `1.00 MiB/s`); empty for
/// a plain number, which is in the unit shape counts.
fn unit_of(rate: &str) -> String {
    let unit: String = rate
        .chars()
        .filter(|c| !(c.is_ascii_digit() || *c == '.' || *c == ' '))
        .collect::<String>()
        .to_ascii_lowercase();
    unit.strip_suffix("/s").unwrap_or(&unit).to_string()
}

impl Stats<'_> {
    /// The summary: what passed (and what of it was dropped), and an
    /// average that says what it is, beside the limit (in the user's own
    /// words too) and the burst that may lift an average above it.
    fn line(&self) -> String {
        let counting = self.counting;
        let average = if self.seconds > 0.0 {
            self.count as f64 / self.seconds
        } else {
            0.0
        };
        let limit = match (self.limit, self.written) {
            (Limit::Unlimited, _) => "no limit".to_string(),
            (limit, written) => {
                let shown = counting.show_limit(limit);
                let limit = match written {
                    Some(text) if !unit_of(text).is_empty() && unit_of(text) != unit_of(&shown) => {
                        format!("{text} ({shown})")
                    }
                    _ => shown,
                };
                let burst = counting.show_tokens(self.burst);
                match &self.share {
                    None => format!("limit {limit} plus a {burst} burst"),
                    // The share's limit is every shape's on it together.
                    Some(share) => format!(
                        "{:.0}% of share {share}'s limit {limit} plus a {burst} burst",
                        100.0 * average / counting.per_second(self.limit).unwrap_or(f64::INFINITY)
                    ),
                }
            }
        };
        let passed = match (self.dropped, counting) {
            (0, _) => counting.tally(self.count),
            (dropped, Counting::Bytes) => format!(
                "{} delivered and {dropped} bytes dropped",
                counting.tally(self.count - dropped.min(self.count))
            ),
            (dropped, _) => format!(
                "{} ({dropped} bytes of them dropped)",
                counting.tally(self.count)
            ),
        };
        format!(
            "shape: {passed} in {:.3} s: average {}, {limit}",
            self.seconds,
            counting.show_rate(average)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(
        counting: Counting,
        count: u64,
        seconds: f64,
        limit: Limit,
        burst: u64,
    ) -> Stats<'static> {
        Stats {
            counting,
            count,
            dropped: 0,
            seconds,
            limit,
            burst,
            written: None,
            share: None,
        }
    }

    #[test]
    fn on_a_share_the_limit_is_the_share_s_and_this_shape_s_part_is_said() {
        let quarter = Stats {
            share: Some("redis://127.0.0.1/backups".into()),
            ..stats(
                Counting::Bytes,
                20 << 20,
                1.0,
                Limit::per_second(80 << 20),
                8 << 20,
            )
        };
        assert_eq!(
            quarter.line(),
            "shape: 20971520 bytes (20.00 MiB) in 1.000 s: average 20.00 MiB/s, 25% of share \
             redis://127.0.0.1/backups's limit 80.00 MiB/s plus a 8.00 MiB burst"
        );
    }

    #[test]
    fn stats_say_what_passed_the_time_the_average_and_what_bounds_it() {
        let bytes = Counting::Bytes;
        assert_eq!(
            stats(bytes, 2 << 20, 1.9, Limit::per_second(1 << 20), 104_857).line(),
            "shape: 2097152 bytes (2.00 MiB) in 1.900 s: average 1.05 MiB/s, limit 1.00 MiB/s plus a 102.40 KiB burst"
        );
        assert_eq!(
            stats(bytes, 7, 0.0, Limit::Unlimited, 1 << 17).line(),
            "shape: 7 bytes (7 B) in 0.000 s: average 0 B/s, no limit"
        );
        assert_eq!(
            stats(
                Counting::Lines,
                100,
                19.8,
                Limit::per_second(5 << 20),
                1 << 20
            )
            .line(),
            "shape: 100 lines in 19.800 s: average 5.05 lines/s, limit 5.00 lines/s plus a 1 line burst"
        );
    }

    #[test]
    fn stats_say_the_limit_as_written_and_what_was_dropped_apart() {
        let limit = "40Mbit".parse::<Limit>().unwrap();
        let given = Stats {
            dropped: 10240,
            written: Some("40Mbit"),
            ..stats(Counting::Bytes, 1 << 20, 0.2, limit, 500_000)
        };
        assert_eq!(
            given.line(),
            "shape: 1038336 bytes (1014.00 KiB) delivered and 10240 bytes dropped in 0.200 s: \
             average 5.00 MiB/s, limit 40Mbit (4.77 MiB/s) plus a 488.28 KiB burst"
        );
        for written in ["1MiB", "1 MiB/s", "1048576"] {
            let same = Stats {
                written: Some(written),
                ..stats(Counting::Bytes, 1, 1.0, Limit::per_second(1 << 20), 1)
            };
            assert!(
                same.line().contains("limit 1.00 MiB/s plus"),
                "{}",
                same.line()
            );
        }
    }
}
