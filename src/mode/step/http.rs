//! The HTTP fault flags checked and read: one fault at a time, the flags
//! that pick requests only beside one, all of it only where requests
//! pass (a proxy), each value read by shape-http's parsers and refused in
//! one line naming its flag.

use super::Asked;
use crate::cli::Cli;
use crate::mode::UsageError;
use crate::mode::plan::HttpPlan;

/// Whether the command line asks for an HTTP fault: it is then checked
/// and read by [`plan`].
pub(super) fn asked(cli: &Cli) -> bool {
    !cli.http.faults_given().is_empty()
}

/// Why the HTTP flags of `cli` do not hold together in `mode`, if they
/// do not.
pub(super) fn refused(cli: &Cli, mode: &Asked) -> Option<String> {
    let flags = &cli.http;
    let faults = flags.faults_given();
    match (&faults[..], flags.first_selector()) {
        ([], None) => None,
        ([], Some(selector)) => Some(format!(
            "{selector} picks requests for an HTTP fault: give --http-status, --http-delay, \
             --http-stall, --http-reset or --http-cut-after"
        )),
        ([one, other, ..], _) => Some(format!("{one} and {other}: one HTTP fault at a time")),
        ([fault], _) if !matches!(mode, Asked::Proxy { .. } | Asked::Remote(_)) => Some(format!(
            "{fault} applies to a proxy's requests (--listen with --connect)"
        )),
        ([fault], _) if matches!(mode, Asked::Remote(_)) => Some(format!(
            "{fault} cannot be changed with --remote: start the proxy with it"
        )),
        _ => None,
    }
}

/// The HTTP rule `cli` asks for, its values read, if it asks for one.
#[cfg(feature = "http")]
pub(super) fn plan(cli: &Cli) -> Result<Option<HttpPlan>, UsageError> {
    use shape_http::answer::{Field, InjectedAnswer};
    use shape_http::rule::{HttpFault, HttpRule};
    use shape_http::select::Selection;
    if !asked(cli) {
        return Ok(None);
    }
    let flags = &cli.http;
    let fault = if let Some(status) = &flags.http_status {
        let fields = flags
            .http_header
            .iter()
            .map(|field| read::<Field>(field, "--http-header <'NAME: VALUE'>"))
            .collect::<Result<_, _>>()?;
        HttpFault::Answer(InjectedAnswer {
            status: read(status, "--http-status <CODE[:BODY]>")?,
            fields,
        })
    } else if let Some(delay) = flags.http_delay {
        HttpFault::Delay(delay)
    } else if flags.http_stall {
        HttpFault::Stall
    } else if flags.http_reset {
        HttpFault::Reset
    } else {
        HttpFault::CutAfter(flags.http_cut_after.map_or(0, |size| size.0))
    };
    let selection = Selection {
        first: flags.first,
        every: flags.every,
        affect: cli.affect,
        path: flags
            .path
            .as_deref()
            .map(|path| read(path, "--path <GLOB>"))
            .transpose()?,
        method: flags.method.as_deref().map(method).transpose()?,
        header: flags
            .header
            .as_deref()
            .map(|header| read(header, "--header <'NAME[: VALUE]'>"))
            .transpose()?,
        during: flags
            .during
            .as_deref()
            .map(|during| read(during, "--during <FROM..UNTIL>"))
            .transpose()?,
    };
    Ok(Some(HttpPlan {
        rule: HttpRule { selection, fault },
    }))
}

/// A build without the `http` feature refuses every HTTP fault.
#[cfg(not(feature = "http"))]
pub(super) fn plan(cli: &Cli) -> Result<Option<HttpPlan>, UsageError> {
    match cli.http.faults_given().first() {
        None => Ok(None),
        Some(flag) => Err(UsageError(format!(
            "{flag} is not in this build of shape: it was built without the `http` feature"
        ))),
    }
}

/// `text` read as a `T`, or refused naming `flag`.
#[cfg(feature = "http")]
fn read<T: std::str::FromStr<Err = String>>(text: &str, flag: &str) -> Result<T, UsageError> {
    text.parse()
        .map_err(|why| UsageError(format!("invalid value '{text}' for '{flag}': {why}")))
}

/// A method's name, which is a token.
#[cfg(feature = "http")]
fn method(text: &str) -> Result<String, UsageError> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    match !text.is_empty() && text.chars().all(token) {
        true => Ok(text.to_string()),
        false => Err(UsageError(format!(
            "invalid value '{text}' for '--method <NAME>': expected a method's name \
             (e.g. GET, POST)"
        ))),
    }
}
