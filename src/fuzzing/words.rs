//! Targets for words a person writes: the command line, toxiproxy-server's
//! flags, rates, sizes and durations, timetables and rate files, link
//! names and trace files.

use super::one_line;
use crate::cli;
use crate::control::{RateFile, RateSchedule};
use shape_bucket::units::{Quantity, Size};
use shape_bucket::{Limit, RateSpec};
use shape_leaves::counting::{Counting, Written};
use shape_leaves::duration::{self, Accepted};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

/// The command line: words split at NUL bytes, parsed and then checked as
/// shape checks them before any mode starts. Words with a `/` are left
/// out: they would name files, which checking may read (a trace, a rate
/// file), and a fuzzer must not read /dev/stdin.
pub fn command_line(data: &[u8]) {
    let words: Vec<OsString> = std::iter::once(OsString::from("shape"))
        .chain(
            data.split(|&b| b == 0)
                .map(|w| OsString::from_vec(w.to_vec())),
        )
        .collect();
    if data.contains(&b'/') || words.len() > 64 {
        return;
    }
    match cli::parse_from(words.clone()) {
        Err(err) => {
            use clap::error::ErrorKind;
            if !matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) {
                one_line(&words, &cli::usage::message(&err));
            }
        }
        Ok(parsed) => {
            if let Err(refused) = crate::mode::step::check(&parsed) {
                one_line(&words, &crate::mode::refusal_line(&refused.0));
            }
        }
    }
}

/// toxiproxy-server's command line, as shape reads it under that name.
pub fn toxiproxy_flags(data: &[u8]) {
    let words: Vec<String> = String::from_utf8_lossy(data)
        .split('\0')
        .map(str::to_string)
        .collect();
    match cli::toxiproxy::parse(&words) {
        cli::toxiproxy::ServerCommand::Refused(why) => one_line(&words, &why),
        cli::toxiproxy::ServerCommand::Serve(flags) => {
            let _ = flags.address().parse::<shape_net::Address>();
        }
        _ => {}
    }
}

/// Rates, sizes and durations. What is read is kept as written (a
/// remote sends the text on), so the text kept reads back the same; a
/// rate shown reads back within the rounding of what is shown (1%, or
/// half a byte a second, as slow rates are shown in whole bytes).
pub fn units(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();
    written::<RateSpec>(text);
    written::<Quantity>(text);
    if let Ok(limit) = text.parse::<Limit>() {
        let shown = limit.to_string();
        let again: Limit = shown
            .parse()
            .unwrap_or_else(|why| panic!("{text:?} shows as {shown:?}, refused: {why}"));
        if let (Limit::Rate(was), Limit::Rate(now)) = (limit, again) {
            let (was, now) = (was.bytes_per_sec(), now.bytes_per_sec());
            assert!(
                (was - now).abs() <= (was * 0.01).max(0.5),
                "{text:?} is {was} B/s, shown as {shown:?}, read back as {now} B/s"
            );
        }
    }
    if let Ok(RateSpec::Per { .. }) = text.parse::<RateSpec>() {
        for counting in [Counting::Bytes, Counting::Lines, Counting::Datagrams] {
            let spec: RateSpec = text.parse().expect("parsed above");
            let _ = spec.in_units(counting.tokens_per_unit(), counting.unit());
        }
    }
    // The very largest show rounded up to 16.00 EiB, past the largest
    // count, and are refused.
    if let Ok(size) = text.parse::<Size>()
        && size.0 < 15 << 60
    {
        let shown = size.to_string();
        assert!(
            shown.parse::<Size>().is_ok(),
            "{text:?} shows as {shown:?}, refused"
        );
    }
    for span in [
        Accepted {
            least: Duration::ZERO,
            most: Duration::from_secs(86_400 * 365),
            plain_seconds: true,
            examples: "e.g. 1s",
        },
        Accepted {
            least: Duration::from_millis(1),
            most: Duration::from_secs(3600),
            plain_seconds: false,
            examples: "e.g. 1s",
        },
    ] {
        if let Ok(took) = duration::parse(text, &span) {
            assert!(
                (span.least..=span.most).contains(&took),
                "{text:?} is {took:?}, outside {:?}..={:?}",
                span.least,
                span.most
            );
        }
    }
}

/// `text` read as a `T` kept as written: the text kept reads as the same.
fn written<T>(text: &str)
where
    T: std::str::FromStr<Err = String> + PartialEq + std::fmt::Debug,
{
    if let Ok(written) = text.parse::<Written<T>>() {
        let again: Result<T, String> = written.text.parse();
        assert!(
            again.as_ref() == Ok(&written.value),
            "{text:?} is {:?}, but as kept ({:?}) it is {again:?}",
            written.value,
            written.text
        );
    }
}

/// `--schedule`'s timetables and `--rate-file`'s contents.
pub fn schedule(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(schedule) = text.parse::<RateSchedule>() {
        for counting in [Counting::Bytes, Counting::Lines] {
            if let Ok(limits) = schedule.limits(counting) {
                assert!(
                    limits.windows(2).all(|pair| pair[0].0 <= pair[1].0),
                    "{text:?}: times out of order: {limits:?}"
                );
            }
        }
    }
    if let Ok(file) = text.parse::<RateFile>() {
        let _ = file.request();
    }
}

/// `--link`'s names.
pub fn link_names(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = shape_impair::profiles::parse_link(&text);
}

/// Trace files: a trace read gives out its opportunities over any span
/// of time (up to 2^40 ms, 34 years), and what it gives over two spans
/// end to end is what it gives over both.
pub fn traces(data: &[u8]) {
    let (times, text) = match data.len() {
        0..24 => (&[][..], data),
        _ => data.split_at(24),
    };
    let text = String::from_utf8_lossy(text);
    match shape_impair::trace::Trace::read("fuzz", &text) {
        Ok(trace) => {
            let _ = (trace.period(), trace.average());
            let at = |n: usize| {
                times
                    .get(n * 8..n * 8 + 8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                    >> 24
            };
            let mut ends = [at(0), at(1), at(2)];
            ends.sort_unstable();
            let [a, b, c] = ends;
            let (first, second) = (trace.bytes_between(a, b), trace.bytes_between(b, c));
            assert_eq!(
                first.checked_add(second),
                Some(trace.bytes_between(a, c)),
                "{a}..{b}..{c} over {text:?}"
            );
        }
        Err(bad) => {
            let _ = bad.to_string();
        }
    }
}
