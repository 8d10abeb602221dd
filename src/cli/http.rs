//! The flags of HTTP faults: what is done to a request (`--http-status`,
//! `--http-delay`, `--http-stall`, `--http-reset`, `--http-cut-after`) and
//! which requests (`--first`, `--every`, `--path`, `--method`, `--header`,
//! `--during`; `--affect` is the common flag's). Values stay text here:
//! the step reads them with shape-http's parsers, which a build without
//! the `http` feature lacks.

use clap::Args;
use shape_bucket::units::Size;
use std::time::Duration;

#[derive(Debug, Clone, Default, Args)]
pub struct HttpFlags {
    /// HTTP: answer picked requests with this status, and this body.
    ///
    /// HTTP: answer each request picked with status CODE (200 to 599) and
    /// BODY if given ('503', '429:slow down'), in the upstream's place:
    /// it never sees the request (Envoy's abort, toxy's inject,
    /// HTTPChaos's abort and replace). The answer has the status's
    /// reason, a Content-Length, and keeps the connection alive unless
    /// the request closes it.
    #[arg(long, value_name = "CODE[:BODY]", help_heading = "HTTP faults")]
    pub http_status: Option<String>,

    /// HTTP: a header of --http-status's answer (repeatable).
    #[arg(
        long,
        value_name = "'NAME: VALUE'",
        requires = "http_status",
        help_heading = "HTTP faults"
    )]
    pub http_header: Vec<String>,

    /// HTTP: hold picked requests this long before they go on.
    ///
    /// HTTP: hold each request picked for DURATION before it goes on to
    /// the upstream, and what follows it on its connection behind it: the
    /// time to its first byte (Envoy's and HTTPChaos's delay).
    #[arg(long, value_name = "DURATION", value_parser = shape_impair::slowlink::parse_delay, help_heading = "HTTP faults")]
    pub http_delay: Option<Duration>,

    /// HTTP: never answer picked requests; the connection stays open.
    ///
    /// HTTP: a request picked never goes on and is never answered, nor
    /// anything after it on its connection, which stays open until the
    /// client closes it (toxy's timeout).
    #[arg(long, help_heading = "HTTP faults")]
    pub http_stall: bool,

    /// HTTP: reset the connection of picked requests, in their turn.
    ///
    /// HTTP: a request picked never goes on; its connection is reset
    /// once the answers to the requests before it are out (toxy's abort).
    #[arg(long, help_heading = "HTTP faults")]
    pub http_reset: bool,

    /// HTTP: cut the answers to picked requests after SIZE of their body.
    ///
    /// HTTP: a request picked goes on, and its answer passes up to SIZE
    /// bytes of its body as sent; then the client's connection is closed
    /// (its reader sees the end of the data).
    #[arg(long, value_name = "SIZE", help_heading = "HTTP faults")]
    pub http_cut_after: Option<Size>,

    /// HTTP: pick only the first N requests that match.
    #[arg(long, value_name = "N", help_heading = "HTTP faults")]
    pub first: Option<u64>,

    /// HTTP: pick only every Nth request that matches.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "HTTP faults")]
    pub every: Option<u64>,

    /// HTTP: only requests whose path matches GLOB.
    ///
    /// HTTP: only requests whose path (without the query) matches GLOB:
    /// '*' stays within a segment, '**' crosses them, '{a,b}' is either
    /// ('/pay/*', '/api/**', '/shop.Cart/Checkout').
    #[arg(long, value_name = "GLOB", help_heading = "HTTP faults")]
    pub path: Option<String>,

    /// HTTP: only requests of this method (any case).
    #[arg(long, value_name = "NAME", help_heading = "HTTP faults")]
    pub method: Option<String>,

    /// HTTP: only requests with this header, and this value if given.
    #[arg(long, value_name = "'NAME[: VALUE]'", help_heading = "HTTP faults")]
    pub header: Option<String>,

    /// HTTP: only requests that come within this window after the start.
    #[arg(long, value_name = "FROM..UNTIL", help_heading = "HTTP faults")]
    pub during: Option<String>,
}

impl HttpFlags {
    /// The fault flags given, by name.
    pub fn faults_given(&self) -> Vec<&'static str> {
        [
            (self.http_status.is_some(), "--http-status"),
            (self.http_delay.is_some(), "--http-delay"),
            (self.http_stall, "--http-stall"),
            (self.http_reset, "--http-reset"),
            (self.http_cut_after.is_some(), "--http-cut-after"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect()
    }

    /// The first of the flags that pick requests given, by name.
    pub fn first_selector(&self) -> Option<&'static str> {
        [
            (self.first.is_some(), "--first"),
            (self.every.is_some(), "--every"),
            (self.path.is_some(), "--path"),
            (self.method.is_some(), "--method"),
            (self.header.is_some(), "--header"),
            (self.during.is_some(), "--during"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}
