//! Targets whose parsers live in the crates of the jobs, each of which
//! offers its own: the toxiproxy API (and config files), Redis' replies
//! to a fleet, and the calls of a program under `--exec`.

/// A run of requests to the toxiproxy API.
#[cfg(feature = "serve")]
pub fn toxiproxy_api(data: &[u8]) {
    shape_toxiproxy::fuzzing::requests(data);
}

/// Redis' replies to a share's lease and settings.
#[cfg(feature = "fleet")]
pub fn redis_replies(data: &[u8]) {
    crate::control::fleet::fuzzing::replies(data);
}

/// A traced program's call, decoded.
#[cfg(feature = "exec")]
pub fn traced_calls(data: &[u8]) {
    shape_exec::fuzzing::calls(data);
}

/// HTTP/1.x requests and responses, framed as they come.
#[cfg(feature = "http")]
pub fn http_framing(data: &[u8]) {
    shape_http::fuzzing::framing(data);
}

/// One connection's HTTP exchange under a rule, both sides in pieces.
#[cfg(feature = "http")]
pub fn http_exchange(data: &[u8]) {
    shape_http::fuzzing::exchange(data);
}

/// A client's HTTP/2 frames through the relay, under a rule.
#[cfg(feature = "http")]
pub fn http2_relay(data: &[u8]) {
    shape_h2::fuzzing::relay_frames(data);
}
