//! Progress on standard error: an indicatif bar, a bar pinned to the
//! terminal's last row under `--exec` (`pinned.rs`), JSON lines for
//! scripts, or nothing. The reporter runs on a thread of its own and only reads a byte
//! counter that the copy bumps with one relaxed add per chunk, so progress
//! never slows the copy and never touches standard output.

mod pinned;

use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use shape_bucket::Limit;
use shape_leaves::counting::Counting;
use shape_leaves::lock::{lock, wait_timeout};
use shape_leaves::say::Printer;
use shape_leaves::throughput::Passed;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How progress is shown, as `--progress` chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ProgressMode {
    /// A bar when standard error is a terminal, otherwise nothing.
    #[default]
    Auto,
    /// A progress bar.
    Bar,
    /// One JSON object per line per interval.
    Json,
    /// One number per line per interval: the percentage done when the
    /// total is known, else the count, as pv -n prints them for
    /// `dialog --gauge`.
    Numeric,
    /// Nothing.
    None,
}

/// How a running reporter draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Bar,
    /// A bar in the terminal's last row, below a command that writes to
    /// the same terminal.
    PinnedBar,
    Json,
    Numeric,
}

impl Style {
    /// The interval used when `--interval` is not given.
    pub fn default_interval(self) -> Duration {
        match self {
            Style::Bar | Style::PinnedBar => Duration::from_millis(100),
            Style::Json | Style::Numeric => Duration::from_secs(1),
        }
    }
}

/// What a reporter reads each interval.
pub struct Source {
    /// Bytes (or records) passed so far, and lately.
    pub passed: Passed,
    /// What is counted.
    pub counting: Counting,
    /// The expected total, if known.
    pub total: Option<u64>,
    /// The limits in force now, in tokens: one, or each way's (up,
    /// down).
    pub limits: Box<dyn Fn() -> Vec<Limit> + Send>,
    /// What the bar looks like, as pv's switches ask.
    pub look: BarLook,
    /// The HTTP requests an HTTP rule has seen, matched and picked, if it
    /// has one: JSON records carry them.
    pub requests: Option<Box<dyn Fn() -> [u64; 3] + Send>>,
}

/// What the bar shows, as pv's switches ask: its name (`-N`), whether it
/// waits for the first byte (`-W`), and the parts chosen (`-p -t -e -a`),
/// if any were; without, the count, the rate, the limit and the time,
/// and with a size the bar, percentage and ETA.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BarLook {
    pub name: Option<String>,
    pub wait: bool,
    pub parts: Option<Parts>,
}

/// The parts pv's switches choose; the count and the rate are always
/// shown (pv's `-b` and `-r` are shape's burst and rate).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Parts {
    /// The bar and percentage (`-p`), with a size.
    pub percent: bool,
    /// The time since the start (`-t`).
    pub timer: bool,
    /// The time left (`-e`), with a size.
    pub eta: bool,
    /// The average rate since the start (`-a`).
    pub average: bool,
}

impl BarLook {
    /// The bar's indicatif template, for a bar of known total or not.
    fn template(&self, total: bool) -> String {
        let Some(parts) = self.parts else {
            return match total {
                true => "{msg} {elapsed_precise} [{wide_bar}] {percent}% ETA {eta}".into(),
                false => "{msg} {elapsed_precise}".into(),
            };
        };
        let mut template = String::from("{msg}");
        if parts.timer {
            template += " {elapsed_precise}";
        }
        if parts.percent && total {
            template += " [{wide_bar}] {percent}%";
        }
        if parts.eta && total {
            template += " ETA {eta}";
        }
        template
    }

    /// `message` as the look has it: named, with the average if asked.
    fn message(&self, message: String, average: impl FnOnce() -> String) -> String {
        let message = match self.parts {
            Some(parts) if parts.average => format!("{message} avg {}", average()),
            _ => message,
        };
        match &self.name {
            Some(name) => format!("{name}: {message}"),
            None => message,
        }
    }
}

/// A thread drawing progress until [`Reporter::finish`].
pub struct Reporter {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: JoinHandle<()>,
    printer: Printer,
}

impl Reporter {
    /// Starts drawing `source` in `style` every `interval`.
    pub fn start(style: Style, interval: Duration, source: Source) -> Reporter {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let mut draw = Drawing::new(style, interval, &source);
        let printer = match &draw {
            Drawing::Bar(bar, _) => {
                let bar = bar.clone();
                Printer::lifting(Arc::new(move |print: &mut dyn FnMut()| bar.suspend(print)))
            }
            Drawing::Pinned(_) | Drawing::Json { .. } | Drawing::Numeric => Printer::default(),
        };
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (stopping, signal) = &*stop;
                let mut stopped = lock(stopping);
                let started = Instant::now();
                let mut next = started + interval;
                while !*stopped {
                    let wait = next.saturating_duration_since(Instant::now());
                    stopped = wait_timeout(signal, stopped, wait);
                    if !*stopped && Instant::now() >= next {
                        draw.update(&source, false, started.elapsed());
                        next += interval;
                    }
                }
                draw.update(&source, true, started.elapsed());
            })
        };
        Reporter {
            stop,
            thread,
            printer,
        }
    }

    /// A way to print lines that keeps the bar intact.
    pub fn printer(&self) -> Printer {
        self.printer.clone()
    }

    /// Draws the final state and stops the thread.
    pub fn finish(self) {
        let (stopping, signal) = &*self.stop;
        *lock(stopping) = true;
        signal.notify_all();
        let _ = self.thread.join();
    }
}

/// The drawing state of one reporter.
enum Drawing {
    /// An indicatif bar, and how often a second it may draw.
    Bar(ProgressBar, u8),
    Pinned(pinned::Pinned),
    Json {
        start: Instant,
        last: (Instant, u64),
    },
    Numeric,
}

impl Drawing {
    fn new(style: Style, interval: Duration, source: &Source) -> Drawing {
        match style {
            Style::Bar => {
                let hz = (1.0 / interval.as_secs_f64()).clamp(1.0, 50.0) as u8;
                // Drawn even when standard error is not a terminal: the bar
                // was asked for (auto only picks it for terminals).
                let stderr = Box::new(console::Term::stderr());
                let target = ProgressDrawTarget::term_like_with_hz(stderr, hz);
                // Waiting for the first byte (-W), it is drawn nowhere.
                let bar = match source.look.wait {
                    true => {
                        ProgressBar::with_draw_target(source.total, ProgressDrawTarget::hidden())
                    }
                    false => ProgressBar::with_draw_target(source.total, target),
                };
                // Bytes and rate are drawn by shape, in the one style it
                // prints sizes and rates in (see `bar_message`).
                let template = source.look.template(source.total.is_some());
                bar.set_style(
                    ProgressStyle::with_template(&template)
                        .expect("the template is valid")
                        .progress_chars("=> "),
                );
                // The first frame in the mode's own words (each way's).
                let limits = (source.limits)();
                bar.set_message(frame(source, 0, &limits, Duration::ZERO));
                Drawing::Bar(bar, hz)
            }
            Style::PinnedBar => Drawing::Pinned(pinned::Pinned::new()),
            Style::Json => Drawing::Json {
                start: Instant::now(),
                last: (Instant::now(), 0),
            },
            Style::Numeric => Drawing::Numeric,
        }
    }

    /// Draws what `source` says `elapsed` after the start; `done`, the
    /// last time.
    fn update(&mut self, source: &Source, done: bool, elapsed: Duration) {
        let count = source.passed.total();
        let limits = (source.limits)();
        let limit = limits.first().copied().unwrap_or(Limit::Unlimited);
        // -W: nothing is drawn until the first byte has passed.
        let waiting = source.look.wait && count == 0;
        match self {
            Drawing::Bar(..) | Drawing::Pinned(_) if waiting => {}
            Drawing::Bar(bar, hz) => {
                if source.look.wait && bar.is_hidden() {
                    let stderr = Box::new(console::Term::stderr());
                    bar.set_draw_target(ProgressDrawTarget::term_like_with_hz(stderr, *hz));
                }
                if done && std::io::stderr().is_terminal() {
                    // The last frame goes: the terminal is left as it was
                    // found, the cursor at the start of an empty line
                    // (--stats says what passed).
                    bar.finish_and_clear();
                    return;
                }
                bar.set_message(frame(source, count, &limits, elapsed));
                bar.set_position(count);
                if done {
                    // A bar asked for where standard error is a file: its
                    // last frame stays, a line of its own.
                    bar.finish();
                    eprintln!();
                }
            }
            Drawing::Pinned(pinned) => match done {
                true => pinned.clear(),
                false => pinned.draw(&frame(source, count, &limits, elapsed)),
            },
            Drawing::Json { start, last } => {
                let now = Instant::now();
                let seconds = (now - last.0).as_secs_f64();
                let rate = if seconds > 0.0 {
                    (count - last.1) as f64 / seconds
                } else {
                    0.0
                };
                *last = (now, count);
                let record = ProgressLine {
                    count,
                    elapsed: (now - *start).as_secs_f64(),
                    rate,
                    limit: source.counting.per_second(limit),
                    total: source.total,
                    requests: source.requests.as_ref().map(|requests| requests()),
                    done,
                };
                let line = record.json(source.counting, source.look.name.as_deref());
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
            Drawing::Numeric => {
                let _ = writeln!(std::io::stderr().lock(), "{}", numeric(count, source.total));
            }
        }
    }
}

/// A frame's words: what passed, the recent rate and the limits, as the
/// look has them (named, with the average over `elapsed` if asked).
fn frame(source: &Source, count: u64, limits: &[Limit], elapsed: Duration) -> String {
    let recent = source.passed.recent(source.counting);
    let message = bar_message(source.counting, count, &recent, limits);
    let average = || {
        let seconds = elapsed.as_secs_f64().max(1e-3);
        source.counting.show_rate(count as f64 / seconds)
    };
    source.look.message(message, average)
}

/// What the bar shows before the time: what passed so far, the recent
/// rate and the limit, e.g. `2.00 MiB 1.00 MiB/s (limit 1.00 MiB/s)` or
/// `120 lines 2.00 lines/s (limit 2.00 lines/s)`.
fn bar_message(counting: Counting, count: u64, recent: &str, limits: &[Limit]) -> String {
    let one = |limit: Limit| match limit {
        Limit::Unlimited => "unlimited".to_string(),
        Limit::Rate(_) => counting.show_limit(limit),
    };
    let limit = match limits {
        [up, down] if up != down => format!("limit up {}, down {}", one(*up), one(*down)),
        [Limit::Unlimited, ..] | [] => "unlimited".to_string(),
        [limit, ..] => format!("limit {}", one(*limit)),
    };
    format!("{} {recent} ({limit})", counting.show(count))
}

/// What `--progress numeric` prints: the whole percentage done of a
/// known total (at most 100), else the count.
fn numeric(count: u64, total: Option<u64>) -> u64 {
    match total {
        Some(0) => 100,
        Some(total) => (u128::from(count) * 100 / u128::from(total)).min(100) as u64,
        None => count,
    }
}

/// One progress record, in the unit counted.
struct ProgressLine {
    count: u64,
    elapsed: f64,
    /// Over the last interval.
    rate: f64,
    /// The limit per second, if any.
    limit: Option<f64>,
    total: Option<u64>,
    /// HTTP requests seen, matched and picked, under an HTTP rule.
    requests: Option<[u64; 3]>,
    done: bool,
}

impl ProgressLine {
    /// The record as one JSON line, its count named for what is counted
    /// (`bytes`, `lines`, `records`). `eta` is seconds left at the limit
    /// (or, with no limit, at the rate of the last interval), when the
    /// total is known. A name (`-N`) comes first, so that the records of
    /// several shapes in one log can be told apart.
    fn json(&self, counting: Counting, name: Option<&str>) -> String {
        let ProgressLine {
            count,
            elapsed,
            rate,
            limit,
            total,
            requests,
            done,
        } = *self;
        let pace = limit.map_or(rate, |l| if rate > 0.0 { rate.min(l) } else { l });
        let eta = total.and_then(|total| {
            let left = total.saturating_sub(count) as f64;
            (left == 0.0 || pace > 0.0).then(|| left / pace.max(f64::MIN_POSITIVE))
        });
        let number = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.3}"));
        let named = name.map_or(String::new(), |name| {
            format!("\"name\":{},", json_string(name))
        });
        let http = requests.map_or(String::new(), |[seen, matched, picked]| {
            format!("\"http\":{{\"seen\":{seen},\"matched\":{matched},\"picked\":{picked}}},")
        });
        format!(
            "{{{named}\"{}\":{count},\"elapsed\":{elapsed:.3},\"rate\":{rate:.3},\"limit\":{},\"total\":{},\"eta\":{},{http}\"done\":{done}}}",
            counting.units(),
            number(limit),
            total.map_or("null".to_string(), |t| t.to_string()),
            number(eta),
        )
    }
}

/// `text` as a JSON string, quoted and escaped.
fn json_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            c if u32::from(c) < 0x20 => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_whole_percentages_of_a_known_total_or_the_count() {
        assert_eq!(numeric(0, Some(300)), 0);
        assert_eq!(numeric(299, Some(300)), 99);
        assert_eq!(numeric(300, Some(300)), 100);
        assert_eq!(numeric(400, Some(300)), 100, "never past 100");
        assert_eq!(numeric(7, Some(0)), 100);
        assert_eq!(numeric(u64::MAX, Some(u64::MAX)), 100);
        assert_eq!(numeric(12345, None), 12345);
    }

    #[test]
    fn the_bar_says_what_passed_the_rate_and_the_limit_in_one_style() {
        assert_eq!(
            bar_message(
                Counting::Bytes,
                2 << 20,
                "1.00 MiB/s",
                &[Limit::per_second(1 << 20)]
            ),
            "2.00 MiB 1.00 MiB/s (limit 1.00 MiB/s)"
        );
        assert_eq!(
            bar_message(
                Counting::Bytes,
                500,
                &Counting::Bytes.show_rate(250.4),
                &[Limit::Unlimited]
            ),
            "500 B 250 B/s (unlimited)"
        );
        assert_eq!(
            bar_message(
                Counting::Lines,
                120,
                &Counting::Lines.show_rate(2.0),
                &[Limit::per_second(2 << 20)]
            ),
            "120 lines 2.00 lines/s (limit 2.00 lines/s)"
        );
        // Two ways: both limits where they differ, one where they agree.
        let (up, down) = (Limit::per_second(1 << 20), Limit::per_second(4 << 20));
        assert_eq!(
            bar_message(Counting::Bytes, 0, "up 0 B/s, down 0 B/s", &[up, down]),
            "0 B up 0 B/s, down 0 B/s (limit up 1.00 MiB/s, down 4.00 MiB/s)"
        );
        assert_eq!(
            bar_message(Counting::Bytes, 0, "up 0 B/s, down 0 B/s", &[up, up]),
            "0 B up 0 B/s, down 0 B/s (limit 1.00 MiB/s)"
        );
        assert_eq!(
            bar_message(Counting::Bytes, 0, "0 B/s", &[up, Limit::Unlimited]),
            "0 B 0 B/s (limit up 1.00 MiB/s, down unlimited)"
        );
    }

    #[test]
    fn json_lines_carry_every_figure() {
        let record = |count, elapsed, rate, limit, total, done| ProgressLine {
            count,
            elapsed,
            rate,
            limit,
            total,
            requests: None,
            done,
        };
        assert_eq!(
            record(500, 1.5, 900.0, Some(1000.0), Some(2000), false).json(Counting::Bytes, None),
            r#"{"bytes":500,"elapsed":1.500,"rate":900.000,"limit":1000.000,"total":2000,"eta":1.667,"done":false}"#
        );
        assert_eq!(
            record(7, 0.25, 28.0, None, None, true).json(Counting::Bytes, None),
            r#"{"bytes":7,"elapsed":0.250,"rate":28.000,"limit":null,"total":null,"eta":null,"done":true}"#
        );
        assert!(
            record(2000, 2.0, 0.0, None, Some(2000), true)
                .json(Counting::Bytes, None)
                .contains(r#""eta":0.000"#)
        );
        let http = ProgressLine {
            requests: Some([3, 2, 1]),
            ..record(9, 1.0, 9.0, None, None, false)
        };
        assert!(
            http.json(Counting::Bytes, None)
                .ends_with(r#""http":{"seen":3,"matched":2,"picked":1},"done":false}"#)
        );
        assert_eq!(
            record(40, 20.0, 2.0, Some(2.0), Some(100), false).json(Counting::Lines, None),
            r#"{"lines":40,"elapsed":20.000,"rate":2.000,"limit":2.000,"total":100,"eta":30.000,"done":false}"#
        );
    }

    #[test]
    fn a_name_leads_the_json_record_whatever_it_holds() {
        let name = "backup \"db\" \\ 1\n\u{1b}[31m é";
        let record = ProgressLine {
            count: 7,
            elapsed: 0.25,
            rate: 28.0,
            limit: None,
            total: None,
            requests: None,
            done: true,
        };
        let line = record.json(Counting::Bytes, Some(name));
        assert!(
            line.starts_with(r#"{"name":"backup \"db\" \\ 1\n\u001b[31m é","bytes":7,"#),
            "{line}"
        );
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["name"], name);
        assert_eq!(parsed["bytes"], 7);
    }
}
