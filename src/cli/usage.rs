//! What a command line that clap refused becomes: help and version on
//! standard output with status 0, anything else one line naming the flag
//! and the value, with status 2.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use shape_leaves::counting::Counting;
use shape_leaves::exit::Exit;
use shape_leaves::message::hide_password;
use shape_leaves::message::{clip_quoted, escape_controls};
use std::io::IsTerminal;

/// Prints what `err` calls for, and returns the exit status.
pub fn report(err: &clap::Error) -> Exit {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        // Written as every other output is: a full disk is an error.
        let text = err.render();
        let text = if std::io::stdout().is_terminal() {
            text.ansi().to_string()
        } else {
            text.to_string()
        };
        return shape_leaves::exit::print_whole(text.as_bytes());
    }
    // pv's letters where shape's mean something else: one line saying
    // what they mean here and what to write instead.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    if let Some(line) = pv_habit(&args) {
        eprintln!("shape: {}", clip_quoted(&line));
        return Exit::Usage;
    }
    // A file that cannot be read is an I/O failure, whichever flag names
    // it: one line and status 1, as for an input.
    let unreadable = std::error::Error::source(err)
        .and_then(|source| source.downcast_ref::<super::values::TraceRefused>())
        .and_then(|refused| match refused {
            super::values::TraceRefused::Unreadable(why) => Some(why),
            super::values::TraceRefused::NotATrace(_) => None,
        });
    if let Some(why) = unreadable {
        let flag = err
            .get(clap::error::ContextKind::InvalidArg)
            .map(|arg| arg.to_string())
            .unwrap_or_else(|| "--trace".into());
        let flag = flag
            .split_whitespace()
            .next()
            .unwrap_or("--trace")
            .to_string();
        eprintln!("shape: {flag} {}", clip_quoted(why));
        return Exit::Failure;
    }
    let line = in_units_counted(&message(err), counting_asked());
    eprintln!("shape: {}", clip_quoted(&line));
    Exit::Usage
}

/// What the command line asks to count, read from the words themselves:
/// clap refused it, so there is no parsed `--lines` or `--null` to ask.
fn counting_asked() -> Counting {
    let words: Vec<_> = std::env::args_os().skip(1).collect();
    let given = |names: &[&str]| words.iter().any(|word| names.iter().any(|n| word == n));
    match (
        given(&["--lines", "-l"]),
        given(&["--null", "-0"]),
        given(&["--packets"]),
    ) {
        (true, _, _) => Counting::Lines,
        (_, true, _) => Counting::Nul,
        (_, _, true) => Counting::Datagrams,
        _ => Counting::Bytes,
    }
}

/// `line` with its examples in the units `counting` counts: a value
/// parser knows nothing of `--lines`, and shows bytes.
fn in_units_counted(line: &str, counting: Counting) -> String {
    let (bytes, counted) = (Counting::Bytes.examples(), counting.examples());
    line.replace(bytes.rate, counted.rate)
        .replace(bytes.amount, counted.amount)
}

/// The one line a usage error prints. Control characters are escaped, so
/// that a newline in a bad value cannot break the line.
pub(crate) fn message(err: &clap::Error) -> String {
    let context = |kind| match err.get(kind) {
        Some(ContextValue::String(text)) => Some(text.clone()),
        _ => None,
    };
    if let (Some(arg), Some(value)) = (
        context(ContextKind::InvalidArg),
        context(ContextKind::InvalidValue),
    ) {
        let why = match err.kind() {
            ErrorKind::ValueValidation => std::error::Error::source(err).map(|e| e.to_string()),
            _ => match err.get(ContextKind::ValidValue) {
                Some(ContextValue::Strings(valid)) if !valid.is_empty() => {
                    Some(format!("expected one of {}", valid.join(", ")))
                }
                // No value at all: clap names no valid ones.
                _ if value.is_empty() => Some(format!("it needs a value ({})", examples(&arg))),
                _ => None,
            },
        };
        let why = why.map(|why| format!(": {why}")).unwrap_or_default();
        // An address of a share in Redis may hold a password.
        let value = hide_password(&value);
        return escape_controls(&format!("invalid value '{value}' for '{arg}'{why}"));
    }
    if let (ErrorKind::MissingRequiredArgument, Some(ContextValue::Strings(missing))) =
        (err.kind(), err.get(ContextKind::InvalidArg))
    {
        return format!("{} must be given too", missing.join(" and "));
    }
    let rendered = err.render().to_string();
    let first = rendered.lines().next().unwrap_or("invalid usage");
    let first = first.strip_prefix("error: ").unwrap_or(first).to_string();
    // clap's tip, on a line of its own, is the most useful part. The
    // argument quoted may hold a carriage return, which would break the
    // line too.
    escape_controls(&match err.get(ContextKind::SuggestedArg) {
        Some(ContextValue::String(similar)) => {
            format!("{first}; a similar argument exists: '{similar}'")
        }
        _ => first,
    })
}

/// Examples of a value for `arg` (`--rate <RATE>`), by the kind of value
/// it takes: what a flag given without one is told.
fn examples(arg: &str) -> String {
    let kind = arg
        .split_once('<')
        .map_or("", |(_, rest)| rest.trim_end_matches('>'));
    let bytes = Counting::Bytes.examples();
    match kind {
        "RATE" => bytes.rate.to_string(),
        "SIZE" => bytes.amount.to_string(),
        "ADDR" => "e.g. localhost:8080, :8080, [::1]:8080, unix:/tmp/s".to_string(),
        "PID|share:NAME" => "e.g. 4242, share:backups".to_string(),
        "DURATION" => "e.g. 500ms, 2s, 1min".to_string(),
        "FILE" => "a file's path".to_string(),
        _ => "see shape --help".to_string(),
    }
}

/// Where pv's habits meet shape's letters in `args` (those before
/// `--exec`), the line that says what they mean here and what to write
/// instead: pv's `-pterb`, whose `-r` and `-b` are shape's rate and burst,
/// and `-c`, pv's cursor positioning for several pvs in one pipeline.
pub fn pv_habit(args: &[String]) -> Option<String> {
    let args = args
        .iter()
        .take_while(|arg| *arg != "--exec" && *arg != "--");
    for arg in args {
        if arg == "-c" {
            return Some(
                "-c is pv's, for several pvs in one pipeline to share a terminal; shape draws \
                 one bar: name each with -N, or use --progress json"
                    .into(),
            );
        }
        let Some(letters) = arg.strip_prefix('-').filter(|rest| !rest.starts_with('-')) else {
            continue;
        };
        let pvs = letters.len() > 1 && letters.chars().all(|letter| "ptearb".contains(letter));
        if pvs && letters.contains(['r', 'b']) {
            let kept: String = letters
                .chars()
                .filter(|letter| !"rb".contains(*letter))
                .collect();
            let instead = match kept.is_empty() {
                true => "--progress bar".to_string(),
                false => format!("-{kept}"),
            };
            return Some(format!(
                "{arg} is pv's: here -r is the rate and -b the burst, and the bar always shows \
                 the rate and the count; write {instead}"
            ));
        }
    }
    None
}
