//! How shape words what it says on standard error: one line per message,
//! reasons in words, without the "(os error N)" that Rust's I/O errors
//! append, control characters escaped so that a hostile value cannot
//! break the line, and values quoted back cut short so that a huge one
//! cannot make the line huge.

use std::fmt::Display;

/// `err` on one line, with its causes if it has any (`{:#}`), without the
/// trailing "(os error N)": the reason is said in words already.
pub fn one_line(err: &dyn Display) -> String {
    let text = format!("{err:#}");
    let text = match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => &text,
    };
    escape_controls(text)
}

/// How many characters of a value quoted back a message keeps.
const MOST_QUOTED: usize = 80;

/// `line` with every value in single quotes longer than [`MOST_QUOTED`]
/// characters cut to that many, the cut marked with "...".
pub fn clip_quoted(line: &str) -> String {
    let mut clipped = String::with_capacity(line.len().min(1024));
    let mut parts = line.split('\'');
    clipped.push_str(parts.next().unwrap_or_default());
    // Between the 1st and 2nd quote, the 3rd and 4th, ...: quoted.
    for (index, part) in parts.enumerate() {
        clipped.push('\'');
        let quoted = index % 2 == 0;
        match part.char_indices().nth(MOST_QUOTED - 3) {
            Some((at, _)) if quoted && part.chars().count() > MOST_QUOTED => {
                clipped.push_str(&part[..at]);
                clipped.push_str("...");
            }
            _ => clipped.push_str(part),
        }
    }
    clipped
}

/// `text` with control characters (newlines among them) escaped.
pub fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_numbers_are_left_out() {
        let err = anyhow::anyhow!(std::io::Error::from_raw_os_error(28)).context("write to stdout");
        assert_eq!(one_line(&err), "write to stdout: No space left on device");
        let err = std::io::Error::from_raw_os_error(111);
        assert_eq!(one_line(&err), "Connection refused");
    }

    #[test]
    fn a_long_value_quoted_back_is_cut_to_80_characters() {
        let long = "é".repeat(10_000);
        let line = clip_quoted(&format!(
            "invalid value '{long}' for '--share <NAME>': why 'x'"
        ));
        assert_eq!(
            line,
            format!(
                "invalid value '{}...' for '--share <NAME>': why 'x'",
                "é".repeat(77)
            )
        );
        let exact = "a".repeat(80);
        assert_eq!(clip_quoted(&format!("'{exact}'")), format!("'{exact}'"));
    }

    #[test]
    fn a_newline_cannot_break_the_line() {
        assert_eq!(escape_controls("a\nb\tc"), "a\\nb\\tc");
    }
}
