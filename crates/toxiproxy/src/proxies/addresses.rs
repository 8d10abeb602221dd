//! Where a proxy listens and connects: its addresses read and checked as
//! the API allows them, its upstream looked up for every client or not,
//! and a refused bind said in Go's words.

use crate::model::{ApiError, Proxy};
use shape_net::Address;
use shape_net::proxy::Upstream;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// `proxy`'s listen address and upstream, read; refused if either is a
/// UDP address, which a UDP proxy is given as host:port.
pub(super) fn read(proxy: &Proxy) -> Result<(Address, Address), ApiError> {
    let listen: Address = proxy
        .listen
        .parse()
        .map_err(|err: String| failed(&format!("listen {}", proxy.listen), &err))?;
    let connect: Address = shape_net::parse_connect(&proxy.upstream)
        .map_err(|err| failed(&format!("upstream {}", proxy.upstream), &err))?;
    for (field, address, given) in [
        ("listen", &listen, &proxy.listen),
        ("upstream", &connect, &proxy.upstream),
    ] {
        if matches!(address, Address::Udp { .. }) {
            return Err(ApiError::new(
                format!(
                    "{field} {given}: a UDP proxy is made with \"protocol\": \"udp\" and host:port addresses"
                ),
                400,
            ));
        }
    }
    Ok((listen, connect))
}

/// Refuses `proxy`'s `listen` or `connect` if it is a Unix socket: a
/// shape extension, off unless the server allows it.
pub(super) fn refuse_unix(
    proxy: &Proxy,
    listen: &Address,
    connect: &Address,
) -> Result<(), ApiError> {
    for (field, address, given) in [
        ("listen", listen, &proxy.listen),
        ("upstream", connect, &proxy.upstream),
    ] {
        if matches!(address, Address::Unix(_)) {
            return Err(ApiError::new(
                format!(
                    "{field} {given}: Unix sockets are a shape extension, off unless \
                     shape --serve is started with --serve-allow-unix"
                ),
                400,
            ));
        }
    }
    Ok(())
}

/// `address`, given for `field` as `given`, as the UDP address a UDP
/// proxy takes it for: only host:port is one.
pub(super) fn as_udp(address: &Address, field: &str, given: &str) -> Result<Address, ApiError> {
    match address {
        Address::Tcp { host, port } => Ok(Address::Udp {
            host: host.clone(),
            port: *port,
        }),
        _ => Err(ApiError::new(
            format!("{field} {given}: a UDP proxy takes host:port addresses"),
            400,
        )),
    }
}

/// The server's error (500) that `what` failed with `err`.
pub(super) fn failed(what: &str, err: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(format!("{what}: {err}"), 500)
}

/// Why listening on `listen` (given as `given`) failed, in Go's words
/// where the system refused the bind, as toxiproxy says it and tests
/// match it, naming the address as resolved:
/// `listen tcp 127.0.0.1:3310: bind: address already in use` for
/// `localhost:3310`.
pub(super) fn bind_failed(listen: &Address, given: &str, err: &std::io::Error) -> String {
    let network = match listen {
        Address::Tcp { .. } => "tcp",
        Address::Udp { .. } => "udp",
        Address::Unix(_) => "",
    };
    match err.raw_os_error() {
        Some(code) if !network.is_empty() => {
            let text = std::io::Error::from_raw_os_error(code).to_string();
            let at = listen
                .listen_address()
                .map_or_else(|_| given.to_string(), |at| at.to_string());
            format!("listen {network} {at}: bind: {}", go_error_text(&text))
        }
        _ => format!("listen {given}: {}", shape_leaves::message::one_line(err)),
    }
}

/// A system error's text as Go says it: the C library's, lower case first
/// and without Rust's "(os error N)".
fn go_error_text(text: &str) -> String {
    let text = text.split(" (os error").next().unwrap_or(text);
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

/// Where a proxy's connections go: an address given as numbers is
/// taken as it is; a name is looked up for every client, off the loop and
/// off the API's lock, as toxiproxy connects it every time (so that a
/// container restarted with a new address, or one not up yet when the
/// proxy was made, is reached).
pub(super) fn upstream_of(connect: &Address) -> Upstream {
    match connect {
        Address::Tcp { host, port } => match host.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => Upstream::Fixed(Arc::new([SocketAddr::new(ip, *port)])),
            Err(_) => Upstream::PerClient,
        },
        Address::Unix(_) | Address::Udp { .. } => Upstream::Fixed(Arc::new([])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_bind_is_said_in_go_s_words() {
        let listen: Address = "127.0.0.1:3310".parse().unwrap();
        let in_use = std::io::Error::from_raw_os_error(98);
        assert_eq!(
            bind_failed(&listen, "127.0.0.1:3310", &in_use),
            "listen tcp 127.0.0.1:3310: bind: address already in use"
        );
        let denied = std::io::Error::from_raw_os_error(13);
        let low: Address = "127.0.0.1:80".parse().unwrap();
        assert_eq!(
            bind_failed(&low, "127.0.0.1:80", &denied),
            "listen tcp 127.0.0.1:80: bind: permission denied"
        );
        // A name is said as resolved, IPv4 first as Go listens.
        let named: Address = "localhost:3310".parse().unwrap();
        assert_eq!(
            bind_failed(&named, "localhost:3310", &in_use),
            "listen tcp 127.0.0.1:3310: bind: address already in use"
        );
        let v6: Address = "[::1]:3310".parse().unwrap();
        assert_eq!(
            bind_failed(&v6, "[::1]:3310", &in_use),
            "listen tcp [::1]:3310: bind: address already in use"
        );
    }
}
