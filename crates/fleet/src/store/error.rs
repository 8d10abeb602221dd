//! Why Redis could not serve a share, told apart (out of reach, or
//! refusing) for the member's fallback, and said in plain words: a
//! timeout, a cluster moving its slot, a password refused, a TLS
//! certificate that does not verify, with the way out where there is one.

use super::super::connection::ConnectError;
use super::super::plan::RedisFailure;
use super::super::url::{Endpoint, RedisShare, Tls};
use super::PATIENCE;

/// Why Redis could not serve a share.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}", describe(.0))]
    Redis(#[from] redis::RedisError),
    #[error("it counts {theirs}, and this shape counts {ours}: a share counts one thing")]
    Counts {
        theirs: &'static str,
        ours: &'static str,
    },
    #[error("no such share")]
    Missing,
    #[error("key {0} holds settings shape cannot read; remove it with --reset")]
    Unreadable(String),
    /// The connection cannot be made as asked (a certificate file, a
    /// database a cluster does not have).
    #[error("{0}")]
    Setup(String),
    /// A connection without TLS that the server cut at once.
    #[error("{}; if the server speaks TLS, write rediss://", describe(.0))]
    CutAtOnce(redis::RedisError),
}

impl From<ConnectError> for StoreError {
    fn from(err: ConnectError) -> StoreError {
        match err {
            ConnectError::Redis(err) => StoreError::Redis(err),
            other => StoreError::Setup(other.to_string()),
        }
    }
}

impl StoreError {
    /// What the trouble is to a member: Redis out of reach, or Redis
    /// refusing.
    pub fn failure(&self) -> RedisFailure {
        match self {
            StoreError::Redis(err) | StoreError::CutAtOnce(err) if unreachable(err) => {
                RedisFailure::Unreachable(self.to_string())
            }
            _ => RedisFailure::Refused(self.to_string()),
        }
    }

    /// True if the connection can no longer be used.
    pub fn broke(&self) -> bool {
        matches!(self, StoreError::Redis(err) | StoreError::CutAtOnce(err)
            if unreachable(err) || err.kind() == redis::ErrorKind::Parse)
    }
}

/// True for errors of the way to Redis rather than of Redis: a cluster
/// that still moves the share's slot after the redirections the
/// connection follows by itself is one too, as it passes.
fn unreachable(err: &redis::RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_cluster_error()
}

/// A connection without TLS that the server cut at once, as a server
/// that speaks only TLS does: said with what may be wrong, since "reset
/// by peer" says little by itself.
pub(super) fn plain_to_tls(share: &RedisShare, err: ConnectError) -> StoreError {
    match err {
        ConnectError::Redis(err)
            if share.tls == Tls::Off
                && matches!(share.server, Endpoint::Tcp { .. })
                && !err.is_connection_refusal()
                && (err.is_connection_dropped() || err.kind() == redis::ErrorKind::Io) =>
        {
            StoreError::CutAtOnce(err)
        }
        err => err.into(),
    }
}

/// A Redis error as one plain line.
fn describe(err: &redis::RedisError) -> String {
    use redis::ErrorKind;
    if err.is_timeout() {
        return format!("no answer within {} s", PATIENCE.as_secs_f64());
    }
    if err.is_cluster_error() {
        let code = err.code().unwrap_or("CLUSTERDOWN");
        return format!("the cluster is moving the share's slot or has no master for it ({code})");
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed => {
            "Redis refused the password (or the user name): authentication failed".into()
        }
        ErrorKind::Parse => "the server does not answer as Redis does".into(),
        _ if err.code() == Some("WRONGTYPE") => {
            "a key of the share holds something else (WRONGTYPE); remove it with --reset or name another share".into()
        }
        _ if err.code() == Some("NOPERM") => format!(
            "the Redis user may not do what a share needs (NOPERM: {})",
            err.detail().unwrap_or("no permission")
        ),
        ErrorKind::InvalidClientConfig => format!(
            "the client certificate ({}) cannot be used: {}",
            super::super::connection::CERT_VARIABLE,
            err.detail().unwrap_or("TLS refused it")
        ),
        _ => tls_in_words(err).unwrap_or_else(|| shape_leaves::message::one_line(&err.to_string())),
    }
}

/// What a TLS error means to whoever runs shape, with the way out, if
/// `err` is one: told by rustls's own error, which reaches here inside
/// the redis crate's, as the I/O error of a handshake or by itself.
fn tls_in_words(err: &redis::RedisError) -> Option<String> {
    use super::super::connection::{CA_VARIABLE, CERT_VARIABLE, KEY_VARIABLE};
    use rustls::{AlertDescription, CertificateError, Error};
    let tls = rustls_error_in(err)?;
    Some(match tls {
        Error::InvalidCertificate(why) => {
            let why = match why {
                CertificateError::UnknownIssuer => "UnknownIssuer (its authority is not trusted)",
                CertificateError::Expired => "Expired",
                CertificateError::NotValidYet => "NotValidYet",
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => {
                    "NotValidForName (it names another host)"
                }
                CertificateError::BadSignature => "BadSignature",
                CertificateError::BadEncoding => "BadEncoding",
                _ => "it is not one rustls accepts",
            };
            format!(
                "the server's certificate does not verify: {why} (trust its authority with \
                 {CA_VARIABLE}, or add #insecure to the address to skip verifying)"
            )
        }
        Error::AlertReceived(AlertDescription::CertificateRequired) => format!(
            "the server asks for a client certificate: set {CERT_VARIABLE} and {KEY_VARIABLE}"
        ),
        Error::AlertReceived(AlertDescription::BadCertificate | AlertDescription::UnknownCA) => {
            format!("the server refused the client certificate ({CERT_VARIABLE})")
        }
        other => format!("TLS failed: {other}"),
    })
}

/// The rustls error inside `err`, if there is one: the redis crate keeps
/// its cause behind an `Arc`, and a handshake's failure is an I/O error
/// whose inner error is rustls's.
fn rustls_error_in(err: &redis::RedisError) -> Option<&rustls::Error> {
    use std::error::Error;
    type Shared = std::sync::Arc<dyn Error + Send + Sync>;
    let mut next: Option<&(dyn Error + 'static)> = err.source();
    while let Some(cause) = next {
        let cause: &(dyn Error + 'static) = match cause.downcast_ref::<Shared>() {
            Some(shared) => &**shared,
            None => cause,
        };
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        let inner = cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if inner.is_some() {
            return inner;
        }
        next = cause.source();
    }
    None
}
