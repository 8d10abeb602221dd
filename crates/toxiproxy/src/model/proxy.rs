//! A proxy as the API shows it and as a request gives it, and what it
//! carries: streams, or datagrams.

use super::{ApiError, Toxic};
use crate::toxics::On;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a proxy listens unless told.
pub const DEFAULT_LISTEN: &str = "localhost:0";

/// What a proxy carries: streams (TCP, toxiproxy's only kind), or
/// datagrams through a UDP link (a shape extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
}

impl Protocol {
    /// As the API names it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }

    fn is_tcp(&self) -> bool {
        *self == Protocol::Tcp
    }

    /// True if toxics that apply `on` those proxies apply to this one.
    pub(super) fn takes(self, on: On) -> bool {
        matches!(
            (on, self),
            (On::Both, _) | (On::Streams, Protocol::Tcp) | (On::Datagrams, Protocol::Udp)
        )
    }

    /// The protocol a request names, if it names one.
    pub(super) fn given(given: Option<&str>) -> Result<Option<Protocol>, ApiError> {
        match given {
            None => Ok(None),
            Some("tcp") => Ok(Some(Protocol::Tcp)),
            Some("udp") => Ok(Some(Protocol::Udp)),
            Some(other) => Err(ApiError::bad_body(format!(
                "protocol must be tcp or udp, not {other:?}"
            ))),
        }
    }
}

/// A proxy as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Proxy {
    pub name: String,
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
    pub toxics: Vec<Toxic>,
    /// Shown only for a UDP proxy, so that a TCP proxy's JSON is
    /// toxiproxy's own.
    #[serde(skip_serializing_if = "Protocol::is_tcp")]
    pub protocol: Protocol,
}

/// A proxy as a request gives it; unknown fields are ignored.
#[derive(Debug, Default, Deserialize)]
pub struct ProxyGiven {
    pub name: Option<String>,
    pub listen: Option<String>,
    pub upstream: Option<String>,
    pub enabled: Option<bool>,
    /// shape's own: toxics created with the proxy, before its first
    /// connection.
    pub toxics: Option<Vec<Map<String, Value>>>,
    /// shape's own: `udp` for a UDP link; `tcp`, the default, otherwise.
    pub protocol: Option<String>,
}
