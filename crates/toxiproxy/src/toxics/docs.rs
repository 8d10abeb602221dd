//! How the docs show the table of toxics: GUIDE.md's rows, each kind's
//! signature (its attributes with their units) for GUIDE.md and the man
//! page.

use super::{Attribute, Row, TOXICS, Unit};

/// GUIDE.md's rows for the table's toxics: toxiproxy's kinds, then shape's
/// extra attributes and kinds, each `| toxic | what shape does | what
/// carries it out |`.
pub fn guide_rows() -> Vec<String> {
    let mut rows: Vec<String> = TOXICS
        .iter()
        .filter(|row| !row.extra)
        .map(|row| cells(&[&signature(row), row.does, row.by]))
        .collect();
    for row in TOXICS {
        if let Some((does, by)) = row.extras {
            let extras = row.extras_said(|a| format!("{}: {}", a.name, a.unit.said()));
            let toxic = format!("**extra:** `{}` ({})", row.kind.name(), extras.join("; "));
            rows.push(cells(&[&toxic, does, by]));
        }
    }
    rows.extend(TOXICS.iter().filter(|row| row.extra).map(|row| {
        let toxic = format!("**extra:** {}", signature(row));
        cells(&[&toxic, row.does, row.by])
    }));
    rows
}

/// A row of a Markdown table: `| a | b | |`.
fn cells(cells: &[&str]) -> String {
    let mut row = String::from("|");
    for cell in cells {
        row.push(' ');
        if !cell.is_empty() {
            row.push_str(cell);
            row.push(' ');
        }
        row.push('|');
    }
    row
}

/// How the docs list a kind: `latency` (latency, jitter: ms), with each
/// run of attributes of one unit named before it, shape's extras left
/// out.
pub fn signature(row: &Row) -> String {
    let mut said = format!("`{}`", row.kind.name());
    let attributes: Vec<&Attribute> = row.attributes.iter().filter(|a| !a.extra).collect();
    if attributes.is_empty() {
        return said;
    }
    let mut runs: Vec<(Vec<&str>, Unit)> = Vec::new();
    for attribute in attributes {
        match runs.last_mut() {
            Some((names, unit)) if *unit == attribute.unit => names.push(attribute.name),
            _ => runs.push((vec![attribute.name], attribute.unit)),
        }
    }
    let runs: Vec<String> = runs
        .iter()
        .map(|(names, unit)| format!("{}: {}", names.join(", "), unit.said()))
        .collect();
    said.push_str(&format!(" ({})", runs.join("; ")));
    said
}
