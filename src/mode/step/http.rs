//! The HTTP fault flags checked and read: one fault at a time, the flags
//! that pick requests only beside one, all of it only where requests
//! pass (a proxy or `--exec`, or `--remote` to one), each value read by shape-http's
//! parsers and refused in one line naming its flag. A running proxy reads
//! what `--remote` sends with the same [`rule_of`].

use super::Asked;
use crate::cli::Cli;
use crate::cli::http::HttpFlags;
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
    let remote = matches!(mode, Asked::Remote(_));
    let why = match (&faults[..], flags.first_selector()) {
        ([], None) => return None,
        ([fault], _) if !remote && flags.turned_off() => {
            format!("{fault} off turns a running proxy's HTTP rule off, with --remote")
        }
        ([fault], _) if !remote && !matches!(mode, Asked::Proxy { .. } | Asked::Exec(_)) => {
            format!(
                "{fault} applies to a TCP proxy's requests (--listen with --connect, not udp:) \
                 or --exec's"
            )
        }
        _ => return rule_of(flags, cli.affect).err().map(|refused| refused.0),
    };
    Some(why)
}

/// The HTTP rule `cli` asks for, its values read, if it asks for one.
pub(super) fn plan(cli: &Cli) -> Result<Option<HttpPlan>, UsageError> {
    #[cfg(feature = "http")]
    return Ok(rule_of(&cli.http, cli.affect)?.map(|rule| HttpPlan { rule }));
    #[cfg(not(feature = "http"))]
    return rule_of(&cli.http, cli.affect).map(|_| None);
}

/// The rule `flags` give (with `affect`, the share of requests picked):
/// `None` if they give no fault, or turn the rule off.
#[cfg(feature = "http")]
pub fn rule_of(
    flags: &HttpFlags,
    affect: Option<f64>,
) -> Result<Option<shape_http::rule::HttpRule>, UsageError> {
    use shape_http::answer::{Field, InjectedAnswer};
    use shape_http::rule::{HttpFault, HttpRule};
    use shape_http::select::Selection;
    let faults = flags.faults_given();
    match (&faults[..], flags.first_selector()) {
        ([], None) => return Ok(None),
        ([], Some(selector)) => {
            return Err(UsageError(format!(
                "{selector} picks requests for an HTTP fault: give --http-status, \
                 --grpc-status, --http-delay, --http-stall, --http-reset or --http-cut-after"
            )));
        }
        ([one, other, ..], _) => {
            return Err(UsageError(format!(
                "{one} and {other}: one HTTP fault at a time"
            )));
        }
        _ if flags.turned_off() && (flags.given().len() > 1) => {
            return Err(UsageError(format!(
                "{} off turns the HTTP rule off, and takes no other HTTP flag",
                faults[0]
            )));
        }
        _ if flags.turned_off() => return Ok(None),
        _ => {}
    }
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
    } else if let Some(delay) = &flags.http_delay {
        HttpFault::Delay(
            shape_impair::slowlink::parse_delay(delay)
                .map_err(|why| invalid(delay, "--http-delay <DURATION>", why))?,
        )
    } else if let Some(status) = &flags.grpc_status {
        HttpFault::Grpc(read(status, "--grpc-status <STATUS[:MESSAGE]>")?)
    } else if flags.http_stall {
        HttpFault::Stall
    } else if flags.http_reset {
        HttpFault::Reset
    } else {
        let size = flags.http_cut_after.as_deref().unwrap_or("0");
        HttpFault::CutAfter(read::<shape_bucket::units::Size>(size, "--http-cut-after <SIZE>")?.0)
    };
    let selection = Selection {
        first: flags.first,
        every: flags.every,
        affect,
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
    Ok(Some(HttpRule { selection, fault }))
}

/// A build without the `http` feature refuses every HTTP fault.
#[cfg(not(feature = "http"))]
pub fn rule_of(
    flags: &HttpFlags,
    _: Option<f64>,
) -> Result<Option<std::convert::Infallible>, UsageError> {
    match flags.faults_given().first() {
        None => Ok(None),
        Some(flag) => Err(UsageError(format!(
            "{flag} is not in this build of shape: it was built without the `http` feature"
        ))),
    }
}

/// `text` read as a `T`, or refused naming `flag`.
#[cfg(feature = "http")]
fn read<T: std::str::FromStr<Err = String>>(text: &str, flag: &str) -> Result<T, UsageError> {
    text.parse().map_err(|why| invalid(text, flag, why))
}

/// The error of `text`, refused as `flag`'s value for `why`.
#[cfg(feature = "http")]
fn invalid(text: &str, flag: &str, why: String) -> UsageError {
    UsageError(format!("invalid value '{text}' for '{flag}': {why}"))
}

/// A method's name, which is a token.
#[cfg(feature = "http")]
fn method(text: &str) -> Result<String, UsageError> {
    shape_http::select::method(text).map_err(|why| invalid(text, "--method <NAME>", why))
}
