//! Where a fleet's share lives: `redis://[user[:password]@]host[:port][/db]/NAME`,
//! `rediss://...` for the same over TLS (`#insecure` at the end skips
//! verifying the server's certificate, and is warned about), or
//! `redis+unix:///path/to/redis.sock/NAME` (with `?db=N`). A password may
//! also come from `SHAPE_REDIS_PASSWORD` (for a Unix socket, only from
//! there), so that it stays out of `ps`; it is never shown: the address
//! prints with `***` in its place, and so does a malformed one in a usage
//! error (`shape_leaves::message::hide_password`). Whether the server is one of a
//! cluster is found out on connecting ([`super::connection`]), not written in
//! the address.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The environment variable a password may come from.
pub const PASSWORD_VARIABLE: &str = "SHAPE_REDIS_PASSWORD";

const EXAMPLES: &str = "e.g. redis://localhost/backup, rediss://db.example:6380/crawl, redis+unix:///run/redis.sock/crawl";

/// A share kept in Redis.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisShare {
    pub server: Endpoint,
    pub db: i64,
    pub username: Option<String>,
    pub password: Option<String>,
    /// The share's name, which keys its state.
    pub name: String,
    /// The password was written in the address, where `ps` shows it.
    pub password_in_url: bool,
    /// Whether the connection is encrypted, and the server verified.
    pub tls: Tls,
}

/// TLS, as the address asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    /// `redis://`, `redis+unix://`.
    Off,
    /// `rediss://`: the server's certificate is verified.
    Verified,
    /// `rediss://...#insecure`: encrypted, but anyone may answer.
    Insecure,
}

/// How to reach the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

impl RedisShare {
    /// True if `text` names a share in Redis rather than on this machine.
    pub fn is_redis(text: &str) -> bool {
        shape_leaves::share::REDIS_SCHEMES
            .iter()
            .any(|scheme| text.starts_with(scheme))
    }

    /// How the redis crate reaches the server.
    pub fn connection_info(&self) -> redis::ConnectionInfo {
        match &self.server {
            Endpoint::Tcp { host, port } => self.connection_info_at(host, *port),
            Endpoint::Unix(path) => self.with_settings(redis::ConnectionAddr::Unix(path.clone())),
        }
    }

    /// How the redis crate reaches another node of the same cluster, with
    /// the same credentials and TLS.
    pub fn connection_info_at(&self, host: &str, port: u16) -> redis::ConnectionInfo {
        let host = host.to_string();
        self.with_settings(match self.tls {
            Tls::Off => redis::ConnectionAddr::Tcp(host, port),
            tls => redis::ConnectionAddr::TcpTls {
                host,
                port,
                insecure: tls == Tls::Insecure,
                tls_params: None,
            },
        })
    }

    /// `addr` with the share's database and credentials.
    fn with_settings(&self, addr: redis::ConnectionAddr) -> redis::ConnectionInfo {
        use redis::IntoConnectionInfo;
        let mut settings = redis::RedisConnectionInfo::default()
            .set_db(self.db)
            .set_skip_set_lib_name();
        if let Some(username) = &self.username {
            settings = settings.set_username(username);
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        addr.into_connection_info()
            .expect("an address is a connection")
            .set_redis_settings(settings)
    }
}

/// Whether `url` asks for TLS, and whether its server is verified.
fn tls_of(url: &url::Url) -> Result<Tls, String> {
    match (url.scheme(), url.fragment()) {
        ("rediss", None) => Ok(Tls::Verified),
        ("rediss", Some("insecure")) => Ok(Tls::Insecure),
        (_, None) => Ok(Tls::Off),
        (_, Some(fragment)) => Err(format!(
            "'#{fragment}' means nothing here: only rediss:// takes #insecure ({EXAMPLES})"
        )),
    }
}

/// The server `url` names, and the database if it names one (in its
/// path, before the share's name, or as `query_db`); `segments` is its
/// path without the share's name.
fn server_of(
    url: &url::Url,
    segments: &[String],
    query_db: Option<String>,
) -> Result<(Endpoint, Option<String>), String> {
    match url.scheme() {
        "redis" | "rediss" => {
            let host = url
                .host_str()
                .filter(|host| !host.is_empty())
                .ok_or_else(|| format!("a redis address needs a host ({EXAMPLES})"))?;
            let db = match segments {
                [] => query_db,
                [db] => Some(db.clone()),
                _ => return Err(format!("too many parts in the path ({EXAMPLES})")),
            };
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = url.port().unwrap_or(6379);
            Ok((Endpoint::Tcp { host, port }, db))
        }
        "redis+unix" => {
            if segments.is_empty() {
                return Err(format!(
                    "a unix address needs the socket's path ({EXAMPLES})"
                ));
            }
            let path = PathBuf::from(format!("/{}", segments.join("/")));
            Ok((Endpoint::Unix(path), query_db))
        }
        other => Err(format!(
            "'{other}:' is not redis:, rediss: or redis+unix: ({EXAMPLES})"
        )),
    }
}

impl FromStr for RedisShare {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let url = url::Url::parse(text).map_err(|e| format!("{e} ({EXAMPLES})"))?;
        let mut segments: Vec<String> = url
            .path_segments()
            .map(|segments| segments.map(decode).collect())
            .unwrap_or_default();
        let name = segments
            .pop()
            .filter(|name| !name.is_empty())
            .ok_or_else(|| format!("the address ends in the share's name ({EXAMPLES})"))?;
        shape_leaves::share::check_name(&name)?;
        let query_db = url
            .query_pairs()
            .find(|(key, _)| key == "db")
            .map(|(_, value)| value.into_owned());
        let tls = tls_of(&url)?;
        let (server, db) = server_of(&url, &segments, query_db)?;
        let db = match db {
            None => 0,
            Some(db) => db
                .parse::<i64>()
                .ok()
                .filter(|&db| db >= 0)
                .ok_or_else(|| format!("'{db}' is not a database number ({EXAMPLES})"))?,
        };
        let username = Some(decode(url.username())).filter(|name| !name.is_empty());
        let in_url = url.password().map(decode).filter(|p| !p.is_empty());
        let password_in_url = in_url.is_some();
        let password = in_url.or_else(|| {
            std::env::var(PASSWORD_VARIABLE)
                .ok()
                .filter(|password| !password.is_empty())
        });
        Ok(RedisShare {
            server,
            db,
            username,
            password,
            name,
            password_in_url,
            tls,
        })
    }
}

/// `text` with its %-escapes decoded.
fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// The address with the password hidden: safe for messages, `--status`
/// and progress.
impl fmt::Display for RedisShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let credentials = match (&self.username, &self.password) {
            (None, None) => String::new(),
            (Some(user), None) => format!("{user}@"),
            (user, Some(_)) => format!("{}:***@", user.as_deref().unwrap_or("")),
        };
        match &self.server {
            Endpoint::Tcp { host, port } => {
                let host = if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host.clone()
                };
                let scheme = match self.tls {
                    Tls::Off => "redis",
                    Tls::Verified | Tls::Insecure => "rediss",
                };
                write!(
                    f,
                    "{scheme}://{credentials}{host}:{port}/{}/{}",
                    self.db, self.name
                )?;
                if self.tls == Tls::Insecure {
                    f.write_str("#insecure")?;
                }
                Ok(())
            }
            Endpoint::Unix(path) => {
                // A socket's credentials come from the environment only.
                write!(f, "redis+unix://{}/{}", path.display(), self.name)?;
                if self.db != 0 {
                    write!(f, "?db={}", self.db)?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Debug for RedisShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(text: &str) -> RedisShare {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn every_form_parses_and_prints_without_its_password() {
        let plain = share("redis://localhost/backup");
        assert_eq!(
            plain.server,
            Endpoint::Tcp {
                host: "localhost".into(),
                port: 6379
            }
        );
        assert_eq!((plain.db, plain.name.as_str()), (0, "backup"));
        assert_eq!(plain.to_string(), "redis://localhost:6379/0/backup");

        let full = share("redis://crawler:s%40cret@db.example:6380/2/crawl");
        assert_eq!(full.username.as_deref(), Some("crawler"));
        assert_eq!(full.password.as_deref(), Some("s@cret"));
        assert_eq!(full.db, 2);
        assert_eq!(
            full.to_string(),
            "redis://crawler:***@db.example:6380/2/crawl"
        );
        assert!(!format!("{full:?}").contains("cret"));

        let unix = share("redis+unix:///run/redis/redis.sock/jobs?db=3");
        assert_eq!(unix.server, Endpoint::Unix("/run/redis/redis.sock".into()));
        assert_eq!((unix.db, unix.name.as_str()), (3, "jobs"));
        assert_eq!(
            unix.to_string(),
            "redis+unix:///run/redis/redis.sock/jobs?db=3"
        );

        let v6 = share("redis://[::1]:7000/x");
        assert_eq!(v6.to_string(), "redis://[::1]:7000/0/x");

        let tls = share("rediss://:secret@db.example/x");
        assert_eq!(tls.tls, Tls::Verified);
        assert_eq!(tls.to_string(), "rediss://:***@db.example:6379/0/x");
        assert!(RedisShare::is_redis("rediss://db.example/x"));
        let insecure = share("rediss://db.example:6380/x#insecure");
        assert_eq!(insecure.tls, Tls::Insecure);
        assert_eq!(
            insecure.to_string(),
            "rediss://db.example:6380/0/x#insecure"
        );
        assert_eq!(plain.tls, Tls::Off);
    }

    #[test]
    fn malformed_addresses_say_why() {
        for bad in [
            "redis://localhost",
            "redis://localhost/",
            "redis://localhost/1/2/x",
            "redis://localhost/-1/x",
            "redis://localhost/x/y",
            "redis://localhost/bad name",
            "redis+unix:///x",
            "http://localhost/x",
            "redis://:6379/x",
            "redis://localhost/x#insecure",
            "rediss://localhost/x#anything",
        ] {
            assert!(bad.parse::<RedisShare>().is_err(), "{bad}");
        }
    }
}
