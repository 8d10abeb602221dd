//! How shape words what it says on standard error: one line per message,
//! reasons in words, without the "(os error N)" that Rust's I/O errors
//! append, control characters escaped so that a hostile value cannot
//! break the line, values quoted back cut short so that a huge one
//! cannot make the line huge, and a password in an address hidden.

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
/// characters cut to that many, the cut marked with "...". A quote opens
/// after something that is not a letter or digit and closes before one,
/// so that an apostrophe (the server's) is not taken for a quote.
pub fn clip_quoted(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let word = |at: Option<usize>| {
        at.and_then(|at| chars.get(at))
            .is_some_and(|c| c.is_alphanumeric())
    };
    let mut clipped = String::with_capacity(line.len().min(1024));
    // The value inside the quote now open, if one is.
    let mut quoted: Option<String> = None;
    for (at, &c) in chars.iter().enumerate() {
        match &mut quoted {
            None => {
                clipped.push(c);
                if c == '\'' && !word(at.checked_sub(1)) {
                    quoted = Some(String::new());
                }
            }
            Some(value) if c == '\'' && !word(Some(at + 1)) => {
                clipped.push_str(&cut(value));
                clipped.push(c);
                quoted = None;
            }
            Some(value) => value.push(c),
        }
    }
    // A quote never closed holds the rest of the line: cut that too.
    if let Some(value) = quoted {
        clipped.push_str(&cut(&value));
    }
    clipped
}

/// `value`, or its first characters and "..." if it is longer than
/// [`MOST_QUOTED`].
fn cut(value: &str) -> String {
    match value.chars().count() > MOST_QUOTED {
        true => value.chars().take(MOST_QUOTED - 3).collect::<String>() + "...",
        false => value.to_string(),
    }
}

/// `text` with control characters (newlines among them) escaped as JSON
/// escapes them: `\n`, `\t`, `\u001b`.
pub fn escape_controls(text: &str) -> String {
    use std::fmt::Write;
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            '\u{8}' => escaped.push_str("\\b"),
            '\u{c}' => escaped.push_str("\\f"),
            c if c.is_control() => {
                let _ = write!(escaped, "\\u{:04x}", c as u32);
            }
            c => escaped.push(c),
        }
    }
    escaped
}

/// `text` with the password of an address in it, if any, as `***`: for
/// messages that must show what the user typed.
pub fn hide_password(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let credentials = &rest[..at];
            let user = credentials
                .split_once(':')
                .map_or(credentials, |(user, _)| user);
            let shown = if credentials.contains(':') {
                format!("{user}:***")
            } else {
                user.to_string()
            };
            format!("{scheme}://{shown}{}", &rest[at..])
        }
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_an_address_is_hidden() {
        assert_eq!(
            hide_password("redis://user:secret@/x"),
            "redis://user:***@/x"
        );
        assert_eq!(
            hide_password("share:redis://:p@h/x"),
            "share:redis://:***@h/x"
        );
        assert_eq!(hide_password("backup"), "backup");
    }

    #[test]
    fn control_characters_are_escaped_as_json_escapes_them() {
        assert_eq!(
            escape_controls("a\nb\r\t\u{1b}[31mred\u{7f}\u{85}é"),
            "a\\nb\\r\\t\\u001b[31mred\\u007f\\u0085é"
        );
    }

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
        let said = format!("the server's certificate {} isn't quoted", "x".repeat(200));
        assert_eq!(clip_quoted(&said), said);
        let unclosed = format!("value '{}", "y".repeat(200));
        assert_eq!(
            clip_quoted(&unclosed),
            format!("value '{}...", "y".repeat(77))
        );
    }

    #[test]
    fn a_newline_cannot_break_the_line() {
        assert_eq!(escape_controls("a\nb\tc"), "a\\nb\\tc");
    }
}
