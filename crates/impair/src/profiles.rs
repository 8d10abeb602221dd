//! Known links by name (`--link NAME`): each profile's rate each way,
//! round trip and loss, exactly as its source gives them, with the source
//! named. One table, which `--link`, `--link list`, the manual and
//! GUIDE.md's table all read. The figures are packet-level ones (a round
//! trip and a throughput), as the sources give them for packet-level
//! shapers, not DevTools' request-level latency (which multiplies the
//! round trip by 3.75 to 5 to stand for a request's several).

use std::time::Duration;

/// A known link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub name: &'static str,
    /// Other names it is known by.
    pub aliases: &'static [&'static str],
    /// The rate from the server to the client, as shape reads a rate.
    pub down: &'static str,
    /// The rate from the client to the server.
    pub up: &'static str,
    /// The round trip, in milliseconds: each way's delay is half of it.
    pub round_trip_ms: u64,
    /// The loss the source gives, in percent.
    pub loss_percent: u32,
    /// Where the figures come from.
    pub source: &'static str,
}

/// Chrome DevTools' network presets (front_end/core/sdk/NetworkManager.ts):
/// their target round trip and nominal throughput ("~500Kbps"), before
/// DevTools derates them for its request-level throttling (throughput
/// ×0.8 for Slow 3G and ×0.9 for the others, latency ×2.75 to ×5). One
/// rule for every DevTools row: shape shapes packets, as the nominal
/// figures describe a link.
const DEVTOOLS: &str = "Chrome DevTools, nominal";
/// Lighthouse's mobile preset (docs/throttling.md, core/config/constants.js):
/// its packet-level round trip and throughput, which DevTools derates by
/// ×0.9 as "Slow 4G".
const LIGHTHOUSE: &str = "Lighthouse, Chrome DevTools, nominal";
/// WebPageTest's connectivity profiles (www/settings/connectivity.ini.sample),
/// packet-level as given.
const WEBPAGETEST: &str = "WebPageTest";

/// Every known link.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "slow-3g",
        aliases: &[],
        down: "500kbit",
        up: "500kbit",
        round_trip_ms: 400,
        loss_percent: 0,
        source: DEVTOOLS,
    },
    Profile {
        name: "slow-4g",
        aliases: &["fast-3g"],
        down: "1.6Mbit",
        up: "750kbit",
        round_trip_ms: 150,
        loss_percent: 0,
        source: LIGHTHOUSE,
    },
    Profile {
        name: "fast-4g",
        aliases: &[],
        down: "9Mbit",
        up: "1.5Mbit",
        round_trip_ms: 60,
        loss_percent: 0,
        source: DEVTOOLS,
    },
    Profile {
        name: "cable",
        aliases: &[],
        down: "5Mbit",
        up: "1Mbit",
        round_trip_ms: 28,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
    Profile {
        name: "dsl",
        aliases: &[],
        down: "1.5Mbit",
        up: "384kbit",
        round_trip_ms: 50,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
    Profile {
        name: "fios",
        aliases: &[],
        down: "20Mbit",
        up: "5Mbit",
        round_trip_ms: 4,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
    Profile {
        name: "dialup",
        aliases: &[],
        down: "49kbit",
        up: "30kbit",
        round_trip_ms: 120,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
    Profile {
        name: "lte",
        aliases: &[],
        down: "12Mbit",
        up: "12Mbit",
        round_trip_ms: 70,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
    Profile {
        name: "3g",
        aliases: &[],
        down: "1.6Mbit",
        up: "768kbit",
        round_trip_ms: 300,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
    Profile {
        name: "3g-fast",
        aliases: &[],
        down: "1.6Mbit",
        up: "768kbit",
        round_trip_ms: 150,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
    Profile {
        name: "3g-slow",
        aliases: &[],
        down: "780kbit",
        up: "330kbit",
        round_trip_ms: 200,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
    Profile {
        name: "2g",
        aliases: &[],
        down: "280kbit",
        up: "256kbit",
        round_trip_ms: 800,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
    Profile {
        name: "edge",
        aliases: &[],
        down: "240kbit",
        up: "200kbit",
        round_trip_ms: 840,
        loss_percent: 0,
        source: WEBPAGETEST,
    },
];

/// What `--link` was given: a profile, or `list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkArg {
    List,
    Profile(&'static Profile),
}

/// Reads `--link`'s value: a known name (or alias, any case), or `list`.
pub fn parse_link(text: &str) -> Result<LinkArg, String> {
    let wanted = text.trim().to_ascii_lowercase();
    if wanted == "list" {
        return Ok(LinkArg::List);
    }
    PROFILES
        .iter()
        .find(|p| p.name == wanted || p.aliases.contains(&wanted.as_str()))
        .map(LinkArg::Profile)
        .ok_or_else(|| {
            let known: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
            format!(
                "no link of that name: known ones are {} ('shape --link list' shows them)",
                known.join(", ")
            )
        })
}

impl Profile {
    /// Each way's delay: half the round trip.
    pub fn one_way(&self) -> Duration {
        Duration::from_micros(self.round_trip_ms * 500)
    }

    /// Its name, with its aliases.
    fn names(&self) -> String {
        std::iter::once(self.name)
            .chain(self.aliases.iter().copied())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The columns of the table: name, down, up, round trip, loss, source.
fn rows() -> impl Iterator<Item = [String; 6]> {
    PROFILES.iter().map(|p| {
        [
            p.names(),
            p.down.to_string(),
            p.up.to_string(),
            format!("{} ms", p.round_trip_ms),
            format!("{}%", p.loss_percent),
            p.source.to_string(),
        ]
    })
}

const HEADINGS: [&str; 6] = ["name", "down", "up", "round trip", "loss", "source"];

/// The table as `shape --link list` prints it: aligned columns.
pub fn table() -> String {
    let rows: Vec<[String; 6]> = rows().collect();
    let mut widths = HEADINGS.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: [&str; 6]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut text = line(HEADINGS);
    for row in &rows {
        text += &line(row.each_ref().map(String::as_str));
    }
    text
}

/// The table as GUIDE.md has it: Markdown rows, the heading first.
pub fn guide_rows() -> Vec<String> {
    let row = |cells: [&str; 6]| format!("| {} |", cells.join(" | "));
    let mut lines = vec![
        row(HEADINGS),
        "| --- | --- | --- | --- | --- | --- |".into(),
    ];
    lines.extend(rows().map(|cells| row(cells.each_ref().map(String::as_str))));
    lines
}

/// The table as the manual has it: one paragraph a link.
pub fn man_rows() -> String {
    rows()
        .map(|[name, down, up, round_trip, loss, source]| {
            format!(
                ".TP\n\\fB{name}\\fR\n{down} down, {up} up, a round trip of {round_trip}, \
                 {loss} loss ({source}).\n"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_bucket::RateSpec;

    #[test]
    fn every_profile_reads_as_rates_and_is_found_by_each_of_its_names() {
        for profile in PROFILES {
            for rate in [profile.up, profile.down] {
                let spec: RateSpec = rate.parse().unwrap();
                assert_ne!(spec, RateSpec::Unlimited, "{}", profile.name);
            }
            for name in std::iter::once(&profile.name).chain(profile.aliases) {
                assert_eq!(parse_link(name), Ok(LinkArg::Profile(profile)));
            }
        }
        assert_eq!(
            parse_link("Fast-3G"),
            Ok(LinkArg::Profile(&PROFILES[1])),
            "any case"
        );
        assert_eq!(parse_link("list"), Ok(LinkArg::List));
        let unknown = parse_link("5g").unwrap_err();
        assert!(unknown.contains("slow-3g, slow-4g"), "{unknown}");
    }

    #[test]
    fn the_sources_figures_are_kept_exactly() {
        let slow_3g = &PROFILES[0];
        let rate = |text: &str| text.parse::<RateSpec>().unwrap();
        // DevTools' 500 * 1000 / 8 bytes a second, before its ×0.8.
        assert_eq!(rate(slow_3g.down), rate("62.5KB"));
        assert_eq!(rate(slow_3g.up), rate("62.5KB"));
        assert_eq!(slow_3g.one_way(), Duration::from_millis(200));
        let dialup = parse_link("dialup").unwrap();
        let LinkArg::Profile(dialup) = dialup else {
            panic!("dialup");
        };
        assert_eq!(rate(dialup.up), rate("3.75KB"));
        assert_eq!(rate(dialup.down), rate("6.125KB"));
        let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(names, unique);
    }

    #[test]
    fn the_table_has_a_row_for_each_profile_in_each_form() {
        let table = table();
        assert_eq!(table.lines().count(), PROFILES.len() + 1);
        assert!(table.starts_with("name"), "{table}");
        assert!(table.contains("slow-4g, fast-3g"), "{table}");
        assert_eq!(guide_rows().len(), PROFILES.len() + 2);
        assert_eq!(man_rows().matches(".TP").count(), PROFILES.len());
    }
}
