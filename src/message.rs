//! How shape words what it says on standard error: one line per message,
//! reasons in words, without the "(os error N)" that Rust's I/O errors
//! append, and control characters escaped so that a hostile value cannot
//! break the line.

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
    fn a_newline_cannot_break_the_line() {
        assert_eq!(escape_controls("a\nb\tc"), "a\\nb\\tc");
    }
}
