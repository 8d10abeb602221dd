//! /metrics in Prometheus' text format: each proxy's counters, as
//! toxiproxy's `-proxy-metrics` gives them, and with `--runtime-metrics`
//! the standard `process_*` metrics of Prometheus' client libraries (CPU
//! seconds, memory, descriptors, start time), read from /proc, as
//! toxiproxy's `-runtime-metrics` gives them beside Go's own `go_*`
//! metrics, which shape, not being a Go program, has none of.

use crate::carry::shaping::Counters;
use crate::model::Model;
use shape_impair::faults::Way;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// The bytes each of `counters` (a proxy's name and its counters)
/// received and sent, each way, labelled as toxiproxy labels them.
pub(super) fn proxy_metrics<'a>(
    model: &Model,
    counters: impl Iterator<Item = (&'a String, &'a Counters)> + Clone,
) -> String {
    let mut text = String::new();
    for (counter, read) in [("received", true), ("sent", false)] {
        let name = format!("toxiproxy_proxy_{counter}_bytes_total");
        let _ = writeln!(text, "# HELP {name} ");
        let _ = writeln!(text, "# TYPE {name} counter");
        for (proxy_name, counters) in counters.clone() {
            // One made and refused in the same request is not there.
            let Ok(proxy) = model.proxy(proxy_name) else {
                continue;
            };
            for (way, direction) in Way::BOTH.map(Way::stream).iter().enumerate() {
                let bytes = match read {
                    true => counters.received[way].load(Ordering::Relaxed),
                    false => counters.sent[way].total(),
                };
                let _ = writeln!(
                    text,
                    "{name}{{direction=\"{direction}\",listener=\"{}\",proxy=\"{}\",upstream=\"{}\"}} {bytes}",
                    label(&proxy.listen),
                    label(proxy_name),
                    label(&proxy.upstream)
                );
            }
        }
    }
    requests(&mut text, model, counters);
    text
}

/// What each proxy's `http` toxics saw, matched and picked, as
/// shape's own counter.
fn requests<'a>(
    text: &mut String,
    model: &Model,
    counters: impl Iterator<Item = (&'a String, &'a Counters)>,
) {
    let name = "shape_http_requests_total";
    let _ = writeln!(
        text,
        "# HELP {name} HTTP requests an http toxic saw, matched and picked"
    );
    let _ = writeln!(text, "# TYPE {name} counter");
    for (proxy_name, counters) in counters {
        let Ok(proxy) = model.proxy(proxy_name) else {
            continue;
        };
        for (id, counted) in counters.requests() {
            let Some(toxic) = proxy.toxics.iter().find(|toxic| toxic.id == id) else {
                continue;
            };
            for (what, count) in [
                ("seen", counted.seen),
                ("matched", counted.matched),
                ("picked", counted.picked),
            ] {
                let _ = writeln!(
                    text,
                    "{name}{{counted=\"{what}\",proxy=\"{}\",toxic=\"{}\"}} {count}",
                    label(proxy_name),
                    label(&toxic.name)
                );
            }
        }
    }
}

/// `value` as a Prometheus label value: backslashes, quotes and line
/// breaks escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The process metrics in Prometheus' text format; a figure that cannot
/// be read is left out.
pub fn process_metrics() -> String {
    let mut text = String::new();
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let fields = stat.as_deref().and_then(stat_fields).unwrap_or_default();
    let field = |n: usize| fields.get(n).and_then(|v| v.parse::<u64>().ok());
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let mut metric = |name: &str, kind: &str, help: &str, value: Option<f64>| {
        if let Some(value) = value {
            let _ = writeln!(
                text,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
    };
    // Fields counted from the third of /proc/self/stat (its state): utime
    // is 14th, stime 15th, starttime 22nd, vsize 23rd, rss 24th.
    let cpu = field(11)
        .zip(field(12))
        .map(|(user, system)| (user + system) as f64 / ticks);
    metric(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        cpu,
    );
    let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    metric(
        "process_max_fds",
        "gauge",
        "Maximum number of open file descriptors.",
        nofile.current.map(|n| n as f64),
    );
    let open = std::fs::read_dir("/proc/self/fd").map(|dir| dir.count() as f64);
    metric(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        open.ok(),
    );
    let page = rustix::param::page_size() as f64;
    metric(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        field(21).map(|pages| pages as f64 * page),
    );
    let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|stat| {
        stat.lines()
            .find_map(|line| line.strip_prefix("btime "))
            .and_then(|t| t.trim().parse::<u64>().ok())
    });
    metric(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        boot.zip(field(19))
            .map(|(boot, start)| boot as f64 + start as f64 / ticks),
    );
    metric(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        field(20).map(|bytes| bytes as f64),
    );
    let most = rustix::process::getrlimit(rustix::process::Resource::As);
    metric(
        "process_virtual_memory_max_bytes",
        "gauge",
        "Maximum amount of virtual memory available in bytes.",
        Some(most.current.map_or(u64::MAX as f64, |n| n as f64)),
    );
    text
}

/// The fields of /proc/self/stat after the command's name (which may hold
/// spaces and parentheses, so the last ')' ends it): the state first.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_metrics_are_there_and_sensible() {
        let text = process_metrics();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|line| line.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} in {text}"))
                .parse()
                .unwrap()
        };
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(started <= now + 1.0 && started > now - 3600.0, "{started}");
        assert!(value("process_cpu_seconds_total") >= 0.0);
        assert!(text.contains("# TYPE process_cpu_seconds_total counter\n"));
    }

    #[test]
    fn a_name_with_parentheses_does_not_shift_the_fields() {
        let stat = "42 (a) b)) S 1 2 3";
        assert_eq!(stat_fields(stat).unwrap(), ["S", "1", "2", "3"]);
    }
}
