//! How shape reaches the Redis that holds a share: one server, or a Redis
//! Cluster found out on connecting; over TCP, TLS or a Unix socket.
//!
//! A cluster is found by asking the server (`INFO cluster`), not by a
//! scheme of its own: an operator points shape at any node as at a single
//! server, and a managed service in cluster mode keeps its usual address.
//! The redis crate's cluster connection then follows MOVED and ASK and
//! learns where slots went; a share's keys carry one hash tag, so every
//! call lands on one node. Its retries are kept few and short: a member
//! has a fallback and a backoff of its own, and is better off told soon.
//! A member remembers the cluster's nodes, so that it can connect again
//! through any of them when the node of its address is the one that
//! failed.
//!
//! TLS is rustls with the ring provider, so the package needs no OpenSSL.
//! The server is verified against the system's roots, or against the PEM
//! bundle named by `SHAPE_REDIS_CA_FILE`; a client certificate comes from
//! `SHAPE_REDIS_CERT_FILE` and `SHAPE_REDIS_KEY_FILE`, as a server with
//! `tls-auth-clients yes` (Redis's default) requires.

use super::url::{Endpoint, RedisShare, Tls};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{Cmd, Connection, ConnectionInfo, ConnectionLike, RedisResult, Value};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::time::Duration;

/// The PEM bundle of authorities to verify servers against, instead of
/// the system's.
pub const CA_VARIABLE: &str = "SHAPE_REDIS_CA_FILE";
/// The client certificate (PEM) to present.
pub const CERT_VARIABLE: &str = "SHAPE_REDIS_CERT_FILE";
/// The client certificate's private key (PEM).
pub const KEY_VARIABLE: &str = "SHAPE_REDIS_KEY_FILE";

/// Redirections and retries the cluster connection makes by itself before
/// a call fails: enough for a slot in migration, while its nodes learn
/// of the move one by one and send a caller back and forth (ASK, MOVED,
/// a MOVED back to the old master).
const CLUSTER_RETRIES: u32 = 5;
/// Its waits between retries, in milliseconds.
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (10, 100);

/// A node of a cluster, as it gives its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub host: String,
    pub port: u16,
}

/// A connection to one server or to a cluster.
pub enum RedisConnection {
    One(Connection),
    Cluster(Box<ClusterConnection>),
}

/// Why a connection could not even be tried.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Redis(#[from] redis::RedisError),
    /// A certificate file named in the environment cannot be used.
    #[error("{0}")]
    Certificates(String),
    #[error("Redis Cluster has database 0 only: leave /{0} out of the address")]
    ClusterDatabase(i64),
}

impl RedisConnection {
    /// Connects to `share`'s server within `patience`, and to its cluster
    /// if the server is one of a cluster; if the server cannot be reached
    /// and `known` names nodes of its cluster, through them. Every call
    /// waits at most `patience` for its answer.
    pub fn open(
        share: &RedisShare,
        patience: Duration,
        known: &[Node],
    ) -> Result<RedisConnection, ConnectError> {
        let certificates = certificates(share)?;
        let info = share.connection_info();
        let client = match &certificates {
            Some(certificates) => {
                redis::Client::build_with_tls(info.clone(), certificates.clone())?
            }
            None => redis::Client::open(info.clone())?,
        };
        let one = client
            .get_connection_with_timeout(patience)
            .map_err(|err| match err.detail() {
                // Selecting a database is the first thing a connection does,
                // and a cluster's node refuses it.
                Some(detail) if detail.contains("not allowed in cluster mode") => {
                    ConnectError::ClusterDatabase(share.db)
                }
                _ => ConnectError::Redis(err),
            });
        let mut one = match one {
            Ok(one) => one,
            Err(ConnectError::Redis(err)) if !known.is_empty() && err.is_connection_refusal() => {
                let seeds = known
                    .iter()
                    .map(|node| share.connection_info_at(&node.host, node.port))
                    .collect();
                return cluster(seeds, certificates, patience);
            }
            Err(err) => return Err(err),
        };
        one.set_read_timeout(Some(patience))?;
        one.set_write_timeout(Some(patience))?;
        if !matches!(share.server, Endpoint::Tcp { .. }) || !in_a_cluster(&mut one)? {
            return Ok(RedisConnection::One(one));
        }
        if share.db != 0 {
            return Err(ConnectError::ClusterDatabase(share.db));
        }
        cluster(vec![info], certificates, patience)
    }

    /// The nodes of the cluster, as it says now; none for one server.
    pub fn nodes(&mut self) -> Vec<Node> {
        let RedisConnection::Cluster(cluster) = self else {
            return Vec::new();
        };
        let said: RedisResult<String> = redis::cmd("CLUSTER").arg("NODES").query(cluster.as_mut());
        said.map(|text| nodes_in(&text)).unwrap_or_default()
    }

    /// True for a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConnection::Cluster(_))
    }

    fn inner(&mut self) -> &mut dyn ConnectionLike {
        match self {
            RedisConnection::One(one) => one,
            RedisConnection::Cluster(cluster) => cluster.as_mut(),
        }
    }
}

/// A cluster connection from `seeds`.
fn cluster(
    seeds: Vec<ConnectionInfo>,
    certificates: Option<redis::TlsCertificates>,
    patience: Duration,
) -> Result<RedisConnection, ConnectError> {
    let (least, most) = CLUSTER_RETRY_WAIT_MS;
    let mut cluster = ClusterClient::builder(seeds)
        .connection_timeout(patience)
        .response_timeout(patience)
        .retries(CLUSTER_RETRIES)
        .min_retry_wait(least)
        .max_retry_wait(most);
    if let Some(certificates) = certificates {
        cluster = cluster.certs(certificates);
    }
    let connection = cluster.build()?.get_connection()?;
    connection.set_write_timeout(Some(patience))?;
    Ok(RedisConnection::Cluster(Box::new(connection)))
}

/// The nodes `CLUSTER NODES` lists: `ID HOST:PORT@BUS[,HOSTNAME] FLAGS ...`.
fn nodes_in(text: &str) -> Vec<Node> {
    text.lines()
        .filter_map(|line| {
            let address = line.split_whitespace().nth(1)?.split('@').next()?;
            let (host, port) = address.rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Some(Node {
                host: host.to_string(),
                port: port.parse().ok().filter(|&port| port != 0)?,
            })
        })
        .filter(|node| !node.host.is_empty())
        .collect()
}

/// Whether the server says it is a node of a cluster.
fn in_a_cluster(connection: &mut Connection) -> RedisResult<bool> {
    let info: String = redis::cmd("INFO").arg("cluster").query(connection)?;
    Ok(info.lines().any(|line| line.trim() == "cluster_enabled:1"))
}

/// The certificates the environment names, for a TLS address; `None` for
/// the system's roots and no client certificate.
fn certificates(share: &RedisShare) -> Result<Option<redis::TlsCertificates>, ConnectError> {
    if share.tls == Tls::Off {
        return Ok(None);
    }
    // rustls needs its provider of cryptography named once per process;
    // ring is the one built in. A second call finds it there.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let read = |variable: &str| -> Result<Option<Vec<u8>>, ConnectError> {
        let Some(path) = std::env::var_os(variable).filter(|path| !path.is_empty()) else {
            return Ok(None);
        };
        std::fs::read(&path).map(Some).map_err(|err| {
            ConnectError::Certificates(format!(
                "{variable}={}: {}",
                std::path::Path::new(&path).display(),
                shape_leaves::message::one_line(&err)
            ))
        })
    };
    let root_cert = read(CA_VARIABLE)?;
    if let Some(pem) = &root_cert {
        certificates_in(CA_VARIABLE, pem)?;
    }
    let client_tls = match (read(CERT_VARIABLE)?, read(KEY_VARIABLE)?) {
        (Some(client_cert), Some(client_key)) => {
            let chain = certificates_in(CERT_VARIABLE, &client_cert)?;
            presentable(&chain[0])?;
            if PrivateKeyDer::from_pem_slice(&client_key).is_err() {
                return Err(ConnectError::Certificates(format!(
                    "{KEY_VARIABLE} holds no private key shape can read (PEM)"
                )));
            }
            Some(redis::ClientTlsConfig {
                client_cert,
                client_key,
            })
        }
        (None, None) => None,
        (Some(_), None) => {
            return Err(ConnectError::Certificates(format!(
                "{CERT_VARIABLE} is set without {KEY_VARIABLE}"
            )));
        }
        (None, Some(_)) => {
            return Err(ConnectError::Certificates(format!(
                "{KEY_VARIABLE} is set without {CERT_VARIABLE}"
            )));
        }
    };
    if root_cert.is_none() && client_tls.is_none() {
        return Ok(None);
    }
    Ok(Some(redis::TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// The certificates in `pem`, the file `variable` names: at least one, or
/// the error that says there is none shape can read.
fn certificates_in(
    variable: &str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, ConnectError> {
    let chain: Vec<CertificateDer> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .unwrap_or_default();
    match chain.is_empty() {
        true => Err(ConnectError::Certificates(format!(
            "{variable} holds no certificate shape can read (PEM)"
        ))),
        false => Ok(chain),
    }
}

/// Fails unless `certificate` can be presented as a client's: TLS here
/// (rustls, through the redis crate) checks the client's own certificate
/// before it presents it, and takes X.509 version 3 only.
fn presentable(certificate: &CertificateDer) -> Result<(), ConnectError> {
    let why = match webpki::EndEntityCert::try_from(certificate) {
        Ok(_) => return Ok(()),
        Err(webpki::Error::UnsupportedCertVersion) => {
            "it is an X.509 version 1 certificate (as openssl x509 -req makes without -extfile), \
             and TLS here presents version 3 only: sign it again with -extfile naming a file \
             that holds 'basicConstraints = CA:FALSE'"
        }
        Err(_) => "it cannot be read as an X.509 certificate",
    };
    Err(ConnectError::Certificates(format!(
        "the client certificate ({CERT_VARIABLE}) cannot be used: {why}"
    )))
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.inner().req_packed_command(cmd)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.inner().req_packed_commands(cmd, offset, count)
    }

    // A cluster routes a command by its keys, which it reads from the
    // command itself: hand it on whole.
    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        self.inner().req_command(cmd)
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::One(one) => one.get_db(),
            RedisConnection::Cluster(cluster) => cluster.get_db(),
        }
    }

    fn supports_pipelining(&self) -> bool {
        match self {
            RedisConnection::One(one) => one.supports_pipelining(),
            RedisConnection::Cluster(cluster) => cluster.supports_pipelining(),
        }
    }

    fn check_connection(&mut self) -> bool {
        self.inner().check_connection()
    }

    fn is_open(&self) -> bool {
        match self {
            RedisConnection::One(one) => one.is_open(),
            RedisConnection::Cluster(cluster) => cluster.is_open(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nodes_of_a_cluster_are_read_from_its_own_words() {
        let said = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host-4 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f [::1]:30003@31003 master - 0 1426238318243 3 connected 10923-16383
6ec23923021cf3ffec47632106199cb7f496ce01 :0@0 master,noaddr - 0 0 0 disconnected
";
        assert_eq!(
            nodes_in(said),
            vec![
                Node {
                    host: "127.0.0.1".into(),
                    port: 30004
                },
                Node {
                    host: "127.0.0.1".into(),
                    port: 30001
                },
                Node {
                    host: "::1".into(),
                    port: 30003
                },
            ]
        );
    }
}
