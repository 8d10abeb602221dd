//! The flags of HTTP faults: what is done to a request (`--http-status`,
//! `--http-delay`, `--http-stall`, `--http-reset`, `--http-cut-after`) and
//! which requests (`--first`, `--every`, `--path`, `--method`, `--header`,
//! `--during`; `--affect` is the common flag's). Values stay text here:
//! the step reads them with shape-http's parsers, which a build without
//! the `http` feature lacks, and `--remote` sends them as they are to the
//! running proxy, which reads them the same way.

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct HttpFlags {
    /// HTTP: answer picked requests with this status, and this body.
    ///
    /// HTTP: answer each request picked with status CODE (200 to 599) and
    /// BODY if given ('503', '429:slow down'), in the upstream's place:
    /// it never sees the request (Envoy's abort, toxy's inject,
    /// HTTPChaos's abort and replace). The answer has the status's
    /// reason, a Content-Length, and keeps the connection alive unless
    /// the request closes it. With --remote, the HTTP flags given replace
    /// a running proxy's rule, and 'off' (here, or for --http-delay or
    /// --http-cut-after) turns it off.
    #[arg(long, value_name = "CODE[:BODY]", help_heading = "HTTP faults")]
    pub http_status: Option<String>,

    /// HTTP: a header of --http-status's answer (repeatable).
    ///
    /// HTTP: a header field of the answer --http-status gives, 'Name:
    /// value' ('Retry-After: 1'); give it again for more. Content-Length,
    /// Transfer-Encoding and Connection are shape's to set.
    #[arg(
        long,
        hide_short_help = true,
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
    #[arg(long, value_name = "DURATION", help_heading = "HTTP faults")]
    pub http_delay: Option<String>,

    /// HTTP: never answer picked requests; the connection stays open.
    ///
    /// HTTP: a request picked never goes on and is never answered, nor
    /// anything after it on its connection, which stays open until the
    /// client closes it (toxy's timeout).
    #[arg(long, hide_short_help = true, help_heading = "HTTP faults")]
    pub http_stall: bool,

    /// HTTP: reset the connection of picked requests, in their turn.
    ///
    /// HTTP: a request picked never goes on; its connection is reset
    /// once the answers to the requests before it are out (toxy's abort).
    #[arg(long, hide_short_help = true, help_heading = "HTTP faults")]
    pub http_reset: bool,

    /// HTTP: cut the answers to picked requests after SIZE of their body.
    ///
    /// HTTP: a request picked goes on, and its answer passes up to SIZE
    /// bytes of its body's content (a chunked body's framing is not
    /// counted); then the client's connection is closed (its reader sees
    /// the end of the data), or on HTTP/2 the stream is reset.
    #[arg(
        long,
        hide_short_help = true,
        value_name = "SIZE",
        help_heading = "HTTP faults"
    )]
    pub http_cut_after: Option<String>,

    /// gRPC: answer picked calls with this status, trailers only.
    ///
    /// gRPC: answer each call picked with gRPC status NAME or CODE
    /// ('UNAVAILABLE', '14') and MESSAGE if given, trailers only (HTTP
    /// status 200, grpc-status and grpc-message), in the upstream's place
    /// (Envoy's abort with a gRPC status). Over HTTP/2 as gRPC speaks it;
    /// over HTTP/1.x, as gRPC-Web does.
    #[arg(
        long,
        hide_short_help = true,
        value_name = "STATUS[:MESSAGE]",
        help_heading = "HTTP faults"
    )]
    pub grpc_status: Option<String>,

    /// HTTP: pick only the first N requests that match.
    ///
    /// HTTP: pick only the first N requests that match the other filters,
    /// counted across every connection of the proxy (or of --exec's
    /// command), from when the rule was set.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "HTTP faults")]
    pub first: Option<u64>,

    /// HTTP: pick only every Nth request that matches.
    ///
    /// HTTP: pick only every Nth request that matches the other filters:
    /// the Nth, 2Nth, ... With --first or --affect too, a request is
    /// picked if all of them pick it: '--first 6 --every 2' picks the 2nd,
    /// 4th and 6th.
    #[arg(long, hide_short_help = true, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "HTTP faults")]
    pub every: Option<u64>,

    /// HTTP: only requests whose path matches GLOB.
    ///
    /// HTTP: only requests whose path (without the query) matches GLOB:
    /// '*' stays within a segment, '**' crosses them, '{a,b}' is either
    /// ('/pay/*', '/api/**', '/shop.Cart/Checkout').
    #[arg(
        long,
        hide_short_help = true,
        value_name = "GLOB",
        help_heading = "HTTP faults"
    )]
    pub path: Option<String>,

    /// HTTP: only requests of this method (any case).
    ///
    /// HTTP: only requests of method NAME ('POST'), whatever its case.
    #[arg(
        long,
        hide_short_help = true,
        value_name = "NAME",
        help_heading = "HTTP faults"
    )]
    pub method: Option<String>,

    /// HTTP: only requests with this header, and this value if given.
    ///
    /// HTTP: only requests that carry the header field NAME, whatever its
    /// case, with VALUE exactly if given ('X-Chaos: hang', 'X-Canary'); in
    /// gRPC, a call's metadata.
    #[arg(
        long,
        hide_short_help = true,
        value_name = "'NAME[: VALUE]'",
        help_heading = "HTTP faults"
    )]
    pub header: Option<String>,

    /// HTTP: only requests that come within this window after the start.
    ///
    /// HTTP: only requests that come from FROM to UNTIL after the rule was
    /// set (the proxy's start, or the --remote that changed it): '10s..20s'
    /// is an outage window.
    #[arg(
        long,
        hide_short_help = true,
        value_name = "FROM..UNTIL",
        help_heading = "HTTP faults"
    )]
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
            (self.grpc_status.is_some(), "--grpc-status"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect()
    }

    /// The flags given, each as its name (without `--`) and its value
    /// (empty for a switch): what `--remote` sends.
    pub fn given(&self) -> Vec<(String, String)> {
        let mut given = Vec::new();
        let mut add = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                given.push((name.to_string(), value));
            }
        };
        add("http-status", self.http_status.clone());
        for field in &self.http_header {
            add("http-header", Some(field.clone()));
        }
        add("http-delay", self.http_delay.clone());
        add("http-stall", self.http_stall.then(String::new));
        add("http-reset", self.http_reset.then(String::new));
        add("http-cut-after", self.http_cut_after.clone());
        add("grpc-status", self.grpc_status.clone());
        add("first", self.first.map(|n| n.to_string()));
        add("every", self.every.map(|n| n.to_string()));
        add("path", self.path.clone());
        add("method", self.method.clone());
        add("header", self.header.clone());
        add("during", self.during.clone());
        given
    }

    /// The flags [`HttpFlags::given`] gave, read back; a name it does not
    /// give, or a number that is not one, is refused.
    pub fn from_given(given: &[(String, String)]) -> Result<HttpFlags, String> {
        let mut flags = HttpFlags::default();
        let number = |value: &str| {
            value
                .parse::<u64>()
                .map_err(|_| format!("bad number '{value}'"))
        };
        for (name, value) in given {
            let text = Some(value.clone());
            match name.as_str() {
                "http-status" => flags.http_status = text,
                "http-header" => flags.http_header.push(value.clone()),
                "http-delay" => flags.http_delay = text,
                "http-stall" => flags.http_stall = true,
                "http-reset" => flags.http_reset = true,
                "http-cut-after" => flags.http_cut_after = text,
                "grpc-status" => flags.grpc_status = text,
                "first" => flags.first = Some(number(value)?),
                "every" => flags.every = Some(number(value)?.max(1)),
                "path" => flags.path = text,
                "method" => flags.method = text,
                "header" => flags.header = text,
                "during" => flags.during = text,
                other => return Err(format!("unknown HTTP flag '--{other}'")),
            }
        }
        Ok(flags)
    }

    /// True if a fault flag says `off`: with `--remote`, the rule in force
    /// is turned off.
    pub fn turned_off(&self) -> bool {
        [
            &self.http_status,
            &self.http_delay,
            &self.http_cut_after,
            &self.grpc_status,
        ]
        .into_iter()
        .any(|value| value.as_deref() == Some("off"))
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
