//! Who may drive the API: what keeps a web page from doing it.
//!
//! A server on a developer's laptop is reachable by every page that
//! developer opens. A page cannot read the answers of another origin, but
//! it can send "simple" requests that need no preflight (a form, or a
//! POST of `text/plain`), and through DNS rebinding it can make its own
//! name point at 127.0.0.1 and talk to the API as if it were its origin.
//! Either way a page could open a proxy from the LAN to a local database
//! or socket. So a request is refused, with 403, when:
//! - its User-Agent is a browser's (toxiproxy's own rule: it begins with
//!   `Mozilla/`), unless the browser says the request is the dashboard's
//!   own (`Sec-Fetch-Site: same-origin`, and a change carries the API's
//!   own `Origin`);
//! - it carries an `Origin` other than the API's own;
//! - a browser says it comes from another site (`Sec-Fetch-Site`
//!   `cross-site` or `same-site`);
//! - the API listens on loopback and its `Host` names something else than
//!   loopback, `localhost` or the address the API was given (rebinding).
//!
//! An origin allowed on purpose (`--serve-allow-origin`, for a browser UI)
//! passes the first three, and gets the CORS headers it needs; the Host
//! rule holds for everyone. The dashboard's page and files (`GET /`,
//! `/ui/app.js`, `/ui/style.css`) are the same for everyone and hold
//! nothing of the server's: they pass all but the Host rule, and no other
//! page may frame them (the answers' Content-Security-Policy). Plain HTTP
//! clients (curl, toxiproxy's clients) send none of these headers and are
//! not affected.

use std::net::{IpAddr, SocketAddr};

/// The facts about a request that the guard looks at.
#[derive(Debug, Default)]
pub struct Asking<'a> {
    pub user_agent: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub fetch_site: Option<&'a str>,
    pub host: Option<&'a str>,
    /// GET or HEAD: a request that changes nothing.
    pub reads: bool,
    /// One of the dashboard's own files.
    pub page: bool,
}

/// Why a request was refused: the body of the 403.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// toxiproxy's answer to a browser, word for word.
    Browser,
    Origin,
    CrossSite,
    Host,
}

impl Refusal {
    /// The answer's body, plain text with a newline, as Go's `http.Error`
    /// writes it.
    pub fn body(&self) -> &'static str {
        match self {
            Refusal::Browser => "User agent not allowed\n",
            Refusal::Origin => {
                "Origin not allowed: start shape with --serve-allow-origin ORIGIN to let a \
                 browser UI in\n"
            }
            Refusal::CrossSite => "Cross-site requests not allowed\n",
            Refusal::Host => "Host not allowed: the API answers to loopback names only\n",
        }
    }
}

/// The rules for one API.
#[derive(Debug, Clone)]
pub struct Guard {
    /// Where the API listens.
    bound: SocketAddr,
    /// The host the API was given (`--serve NAME:PORT`), lower case.
    given_host: String,
    /// Origins let in on purpose, without a trailing slash.
    allowed: Vec<String>,
}

impl Guard {
    /// The rules for an API that was given `given_host`, listens on
    /// `bound` and lets in the `allowed` origins.
    pub fn new(bound: SocketAddr, given_host: &str, allowed: &[String]) -> Guard {
        Guard {
            bound,
            given_host: given_host.trim_matches(['[', ']']).to_ascii_lowercase(),
            allowed: allowed
                .iter()
                .map(|origin| origin.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether `asking` may be answered, and if not, why. `Ok(true)` if
    /// it comes from an origin let in on purpose, which then gets CORS
    /// headers.
    pub fn check(&self, asking: &Asking) -> Result<bool, Refusal> {
        if let Some(host) = asking.host {
            if self.bound.ip().is_loopback() && !self.host_is_ours(host) {
                return Err(Refusal::Host);
            }
        }
        let origin = asking
            .origin
            .map(|origin| origin.trim_end_matches('/').to_ascii_lowercase());
        if origin.as_ref().is_some_and(|o| self.allowed.contains(o)) {
            return Ok(true);
        }
        if asking.page && asking.reads {
            return Ok(false);
        }
        // A browser gets toxiproxy's answer, unless it says the request is
        // the dashboard's own: a browser sends Origin with every change,
        // and a page of another origin cannot make it lie about either.
        if asking
            .user_agent
            .is_some_and(|ua| ua.starts_with("Mozilla/"))
        {
            let same_origin = asking.fetch_site.map(str::trim) == Some("same-origin");
            let own = match &origin {
                Some(origin) => self.is_own_origin(origin, asking.host),
                None => asking.reads,
            };
            // Beyond loopback any Host is answered, and a page rebound to
            // the server would be "same-origin": a browser must name the
            // server by an address or a name of its own.
            let named = asking.host.is_some_and(|host| {
                self.host_is_ours(host) || host_without_port(host).parse::<IpAddr>().is_ok()
            });
            return match same_origin && own && named {
                true => Ok(false),
                false => Err(Refusal::Browser),
            };
        }
        if origin.is_some_and(|origin| !self.is_own_origin(&origin, asking.host)) {
            return Err(Refusal::Origin);
        }
        if asking
            .fetch_site
            .is_some_and(|site| matches!(site.trim(), "cross-site" | "same-site"))
        {
            return Err(Refusal::CrossSite);
        }
        Ok(false)
    }

    /// True if and only if `host` (a Host header: a name or address, with
    /// a port or without) names loopback, localhost or the host the API
    /// was given.
    fn host_is_ours(&self, host: &str) -> bool {
        let name = host_without_port(host).to_ascii_lowercase();
        let name = name.trim_end_matches('.');
        name == "localhost"
            || name.ends_with(".localhost")
            || name == self.given_host
            || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// True if and only if `origin` is the API's own: `http://` and the
    /// request's own `host`, or on loopback any name of its own on its
    /// port.
    fn is_own_origin(&self, origin: &str, host: Option<&str>) -> bool {
        let Some(authority) = origin.strip_prefix("http://") else {
            return false;
        };
        if host.is_some_and(|host| host.eq_ignore_ascii_case(authority)) {
            return true;
        }
        if !self.bound.ip().is_loopback() {
            return false;
        }
        let port = authority
            .rsplit_once(':')
            .filter(|(_, port)| !port.contains(']'))
            .and_then(|(_, port)| port.parse::<u16>().ok())
            .unwrap_or(80);
        port == self.bound.port() && self.host_is_ours(authority)
    }
}

/// `host` without its `:port`, and an IPv6 address without its brackets.
fn host_without_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        // A bare IPv6 address has more than one colon: no port.
        Some((name, _)) if !name.contains(':') => name,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(allowed: &[&str]) -> Guard {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        Guard::new("127.0.0.1:8474".parse().unwrap(), "devbox", &allowed)
    }

    fn asking<'a>(pairs: &[(&str, &'a str)]) -> Asking<'a> {
        let mut asking = Asking::default();
        for (name, value) in pairs {
            match *name {
                "ua" => asking.user_agent = Some(value),
                "origin" => asking.origin = Some(value),
                "site" => asking.fetch_site = Some(value),
                "host" => asking.host = Some(value),
                "method" => asking.reads = matches!(*value, "GET" | "HEAD"),
                "page" => asking.page = true,
                _ => unreachable!(),
            }
        }
        asking
    }

    #[test]
    fn plain_clients_pass() {
        let g = guard(&[]);
        for pairs in [
            &[][..],
            &[("ua", "curl/8.5.0"), ("host", "127.0.0.1:8474")],
            &[("ua", "Go-http-client/1.1"), ("host", "localhost:8474")],
            &[("ua", "toxiproxy-ruby"), ("host", "[::1]:8474")],
            &[("host", "devbox:8474")],
            &[("host", "LOCALHOST.")],
            &[("host", "api.localhost:8474")],
            &[("host", "127.9.9.9")],
            &[("site", "same-origin"), ("host", "localhost")],
            &[("site", "none")],
            &[("origin", "http://localhost:8474")],
            &[("origin", "http://127.0.0.1:8474/")],
        ] {
            assert_eq!(g.check(&asking(pairs)), Ok(false), "{pairs:?}");
        }
    }

    #[test]
    fn browsers_foreign_origins_other_sites_and_foreign_hosts_are_refused() {
        let g = guard(&[]);
        for (pairs, why) in [
            (&[("ua", "Mozilla/5.0 (X11)")][..], Refusal::Browser),
            (
                &[("ua", "Mozilla/5.0"), ("origin", "http://evil.example")],
                Refusal::Browser,
            ),
            (&[("origin", "http://evil.example")], Refusal::Origin),
            (&[("origin", "null")], Refusal::Origin),
            (&[("origin", "http://localhost:3000")], Refusal::Origin),
            (&[("origin", "https://localhost:8474")], Refusal::Origin),
            (&[("site", "cross-site")], Refusal::CrossSite),
            (&[("site", "same-site")], Refusal::CrossSite),
            (&[("host", "evil.example")], Refusal::Host),
            (&[("host", "evil.example:8474")], Refusal::Host),
            (&[("host", "localhost.evil.example")], Refusal::Host),
            (&[("host", "10.0.0.1:8474")], Refusal::Host),
            (
                &[("host", "evil.example"), ("origin", "http://evil.example")],
                Refusal::Host,
            ),
        ] {
            assert_eq!(g.check(&asking(pairs)), Err(why), "{pairs:?}");
        }
    }

    #[test]
    fn an_origin_let_in_on_purpose_passes_as_a_browser_but_not_from_a_foreign_host() {
        let g = guard(&["http://localhost:3000/"]);
        let ui = [
            ("ua", "Mozilla/5.0"),
            ("origin", "http://localhost:3000"),
            ("site", "same-site"),
            ("host", "localhost:8474"),
        ];
        assert_eq!(g.check(&asking(&ui)), Ok(true));
        let rebound = [
            ("origin", "http://localhost:3000"),
            ("host", "evil.example"),
        ];
        assert_eq!(g.check(&asking(&rebound)), Err(Refusal::Host));
        let other = [("ua", "Mozilla/5.0"), ("origin", "http://localhost:3001")];
        assert_eq!(g.check(&asking(&other)), Err(Refusal::Browser));
        let scripted = [("origin", "http://localhost:3001")];
        assert_eq!(g.check(&asking(&scripted)), Err(Refusal::Origin));
    }

    #[test]
    fn the_dashboard_s_own_requests_pass_and_no_other_page_s_do() {
        let g = guard(&[]);
        let browser = [("ua", "Mozilla/5.0"), ("host", "127.0.0.1:8474")];
        let with = |more: &[(&str, &'static str)]| {
            let mut pairs = browser.to_vec();
            pairs.extend_from_slice(more);
            g.check(&asking(&pairs))
        };
        // The page and its files, from anywhere: typed, linked or its own.
        for site in ["none", "cross-site", "same-origin"] {
            assert_eq!(
                with(&[("page", ""), ("method", "GET"), ("site", site)]),
                Ok(false)
            );
        }
        // The page's own reads and changes.
        assert_eq!(
            with(&[("method", "GET"), ("site", "same-origin")]),
            Ok(false)
        );
        let change = [
            ("method", "POST"),
            ("site", "same-origin"),
            ("origin", "http://127.0.0.1:8474"),
        ];
        assert_eq!(with(&change), Ok(false));
        // Refused: a change without its origin; any other page's request,
        // on another port too; a browser that does not say; a POST to a
        // page's path.
        for refused in [
            &[("method", "POST"), ("site", "same-origin")][..],
            &[
                ("method", "POST"),
                ("site", "same-site"),
                ("origin", "http://127.0.0.1:9000"),
            ],
            &[("method", "GET"), ("site", "same-site")],
            &[("method", "GET"), ("site", "cross-site")],
            &[("method", "GET")],
            &[("method", "POST"), ("page", ""), ("site", "cross-site")],
        ] {
            assert_eq!(with(refused), Err(Refusal::Browser), "{refused:?}");
        }
    }

    #[test]
    fn beyond_loopback_the_dashboard_is_driven_by_address_or_own_name_only() {
        let g = Guard::new("0.0.0.0:8474".parse().unwrap(), "0.0.0.0", &[]);
        let from = |host: &'static str, origin: &'static str| {
            let pairs = [
                ("ua", "Mozilla/5.0"),
                ("method", "POST"),
                ("site", "same-origin"),
                ("host", host),
                ("origin", origin),
            ];
            g.check(&asking(&pairs))
        };
        assert_eq!(
            from("192.168.1.5:8474", "http://192.168.1.5:8474"),
            Ok(false)
        );
        assert_eq!(from("localhost:8474", "http://localhost:8474"), Ok(false));
        // A name could be a page's own, rebound to this server.
        assert_eq!(
            from("rebound.example:8474", "http://rebound.example:8474"),
            Err(Refusal::Browser)
        );
    }

    #[test]
    fn any_host_is_answered_when_the_api_listens_beyond_loopback() {
        let g = Guard::new("0.0.0.0:8474".parse().unwrap(), "0.0.0.0", &[]);
        let pairs = [("host", "toxiproxy:8474")];
        assert_eq!(g.check(&asking(&pairs)), Ok(false));
        let browser = [("host", "toxiproxy:8474"), ("ua", "Mozilla/5.0")];
        assert_eq!(g.check(&asking(&browser)), Err(Refusal::Browser));
        let own = [
            ("host", "toxiproxy:8474"),
            ("origin", "http://toxiproxy:8474"),
        ];
        assert_eq!(g.check(&asking(&own)), Ok(false));
        let other = [
            ("host", "toxiproxy:8474"),
            ("origin", "http://localhost:8474"),
        ];
        assert_eq!(g.check(&asking(&other)), Err(Refusal::Origin));
    }
}
