//! Sockets as input and output: `--listen ADDR` reads one accepted
//! connection instead of standard input, `--connect ADDR` writes to a
//! connection instead of standard output. Addresses are `host:port`,
//! `:port`, `[::1]:port` or `unix:PATH`. A connection becomes a plain
//! `File` on its descriptor, so the copy loop splices to and from it as
//! from any other file.

use shape_leaves::duration::{self, Accepted};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

const EXAMPLES: &str = "e.g. localhost:9000, :9000, 127.0.0.1:9000, [::1]:9000, \
                        unix:/tmp/shape.sock, udp:127.0.0.1:5353";

/// Where to listen or connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// A TCP host (name or address; empty for `:port`) and port.
    Tcp { host: String, port: u16 },
    /// A Unix socket path.
    Unix(PathBuf),
    /// A UDP host and port (`udp:HOST:PORT`), for a datagram proxy.
    Udp { host: String, port: u16 },
}

impl FromStr for Address {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if let Some(udp) = text.strip_prefix("udp:") {
            return match udp.parse()? {
                Address::Tcp { host, port } => Ok(Address::Udp { host, port }),
                _ => Err(format!("a udp address is udp:HOST:PORT ({EXAMPLES})")),
            };
        }
        if let Some(path) = text.strip_prefix("unix:") {
            return if path.is_empty() {
                Err(format!("a unix address needs a path ({EXAMPLES})"))
            } else {
                Ok(Address::Unix(PathBuf::from(path)))
            };
        }
        let Some((host, port)) = text.rsplit_once(':') else {
            return Err(format!("expected HOST:PORT or unix:PATH ({EXAMPLES})"));
        };
        let host = match host.strip_prefix('[') {
            Some(inner) => inner
                .strip_suffix(']')
                .filter(|h| h.parse::<std::net::Ipv6Addr>().is_ok())
                .ok_or_else(|| {
                    format!("'{host}' is not an IPv6 address in brackets ({EXAMPLES})")
                })?,
            None if host.contains(':') => {
                return Err(format!("an IPv6 address goes in brackets ({EXAMPLES})"));
            }
            None => host,
        };
        let valid_host = host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b));
        if !valid_host {
            return Err(format!(
                "'{host}' is not a host name or address ({EXAMPLES})"
            ));
        }
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("'{port}' is not a port from 0 to 65535 ({EXAMPLES})"))?;
        Ok(Address::Tcp {
            host: host.to_string(),
            port,
        })
    }
}

/// The error of a UDP address where a stream's is wanted.
fn datagrams_only() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a udp: address carries datagrams: --listen udp:ADDR goes with --connect udp:ADDR",
    )
}

/// Parses `--connect`: an address as for `--listen`, but port 0 (any
/// port, which only listening can ask for) is refused.
pub fn parse_connect(text: &str) -> Result<Address, String> {
    match text.parse()? {
        Address::Tcp { port: 0, .. } => Err(format!(
            "port 0 means any port, which only --listen can take ({EXAMPLES})"
        )),
        address => Ok(address),
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Address::Tcp { host, port } => write!(f, "{host}:{port}"),
            Address::Unix(path) => write!(f, "unix:{}", path.display()),
            Address::Udp { host, port } if host.contains(':') => write!(f, "udp:[{host}]:{port}"),
            Address::Udp { host, port } => write!(f, "udp:{host}:{port}"),
        }
    }
}

impl Address {
    /// The socket addresses a TCP address names. An empty host means every
    /// interface to listen on, or this machine to connect to.
    fn resolve(host: &str, port: u16, listening: bool) -> io::Result<Vec<SocketAddr>> {
        let host = match host {
            "" if listening => "0.0.0.0",
            "" => "localhost",
            host => host,
        };
        Ok((host, port).to_socket_addrs()?.collect())
    }

    /// The one socket address a host and port are listened on at, as Go's
    /// `net.Listen` (and so toxiproxy) picks it: the first IPv4 address
    /// the name resolves to, else the first. `localhost` is 127.0.0.1
    /// wherever it also resolves to ::1.
    fn listen_at(host: &str, port: u16) -> io::Result<SocketAddr> {
        let all = Self::resolve(host, port, true)?;
        all.iter()
            .find(|address| address.is_ipv4())
            .or(all.first())
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address found"))
    }

    /// Listens on this address once, and gives `count` descriptors of
    /// the one socket (at least one), one for each event loop to accept
    /// from. One socket keeps one backlog, which clients leave in the
    /// order they came whichever loop takes each, and a port that no
    /// other program can join: sockets that shared it with SO_REUSEPORT
    /// would let any later listener of the same user in, silently taking
    /// a share of the clients where it should have been refused.
    pub fn listen_shared(&self, count: usize) -> io::Result<Vec<Listening>> {
        let first = self.listen()?;
        let mut all = Vec::with_capacity(count.max(1));
        for _ in 1..count {
            all.push(first.try_clone()?);
        }
        all.insert(0, first);
        Ok(all)
    }

    /// The socket address a TCP or UDP address is listened on at (see
    /// `listen_at`).
    pub fn listen_address(&self) -> io::Result<SocketAddr> {
        match self {
            Address::Tcp { host, port } | Address::Udp { host, port } => {
                Self::listen_at(host, *port)
            }
            Address::Unix(_) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a Unix socket has no socket address",
            )),
        }
    }

    /// Listens on this address. Port 0 asks the system for a free port;
    /// [`Listening::local`] says which.
    pub fn listen(&self) -> io::Result<Listening> {
        match self {
            Address::Tcp { host, port } => {
                let listener = TcpListener::bind(Self::listen_at(host, *port)?)?;
                super::deepen_backlog(&listener)?;
                Ok(Listening::Tcp(listener))
            }
            Address::Unix(path) => {
                let listener = bind_unix(path)?;
                super::deepen_backlog(&listener)?;
                Ok(Listening::Unix(listener, path.clone()))
            }
            Address::Udp { .. } => Err(datagrams_only()),
        }
    }

    /// The socket address a UDP address names: to listen on, or the first
    /// the resolver gives to send to.
    pub fn datagram_address(&self, listening: bool) -> io::Result<SocketAddr> {
        let Address::Udp { host, port } = self else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a udp: address",
            ));
        };
        if listening {
            return Self::listen_at(host, *port);
        }
        Self::resolve(host, *port, false)?
            .into_iter()
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address found"))
    }

    /// Every socket address a TCP address names, to connect to, in the
    /// resolver's order (at least one).
    pub fn resolve_all(&self) -> io::Result<Vec<SocketAddr>> {
        let Address::Tcp { host, port } = self else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a TCP address",
            ));
        };
        let all = Self::resolve(host, *port, false)?;
        match all.is_empty() {
            true => Err(io::Error::new(io::ErrorKind::NotFound, "no address found")),
            false => Ok(all),
        }
    }

    /// Connects, giving up on each TCP address after `timeout`.
    pub fn connect(&self, timeout: Duration) -> io::Result<File> {
        match self {
            Address::Tcp { host, port } => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, "no address found");
                for address in Self::resolve(host, *port, false)? {
                    match TcpStream::connect_timeout(&address, timeout) {
                        Ok(stream) => {
                            let _ = stream.set_nodelay(true);
                            return Ok(File::from(OwnedFd::from(stream)));
                        }
                        Err(err) => last = err,
                    }
                }
                Err(last)
            }
            Address::Unix(path) => Ok(File::from(OwnedFd::from(UnixStream::connect(path)?))),
            Address::Udp { .. } => Err(datagrams_only()),
        }
    }
}

/// Binds a Unix socket at `path`. A socket left there by a listener that
/// is gone (killed, so it never removed it) is replaced; anything else at
/// the path, a file or a socket someone accepts on, is left alone and the
/// bind fails as it would.
fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    match UnixListener::bind(path) {
        Err(err) if err.kind() == io::ErrorKind::AddrInUse => {
            let is_socket =
                std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_socket());
            let nobody_listens = matches!(
                UnixStream::connect(path),
                Err(refused) if refused.kind() == io::ErrorKind::ConnectionRefused
            );
            if !(is_socket && nobody_listens) {
                return Err(err);
            }
            std::fs::remove_file(path)?;
            UnixListener::bind(path)
        }
        bound => bound,
    }
}

/// A socket listening for connections, blocking until one comes.
pub enum Listening {
    Tcp(TcpListener),
    /// A Unix socket and its path.
    Unix(UnixListener, PathBuf),
}

impl Listening {
    /// The address listened on, as `--listen` takes it, with the port the
    /// system chose if port 0 was asked for.
    pub fn local(&self) -> String {
        match self {
            Listening::Tcp(listener) => listener
                .local_addr()
                .map_or_else(|err| err.to_string(), |address| address.to_string()),
            Listening::Unix(_, path) => format!("unix:{}", path.display()),
        }
    }

    /// Another descriptor of the same listening socket.
    fn try_clone(&self) -> io::Result<Listening> {
        Ok(match self {
            Listening::Tcp(listener) => Listening::Tcp(listener.try_clone()?),
            Listening::Unix(listener, path) => Listening::Unix(listener.try_clone()?, path.clone()),
        })
    }

    /// Accepts one connection, and returns it.
    pub fn accept_one(self) -> io::Result<File> {
        match self {
            Listening::Tcp(listener) => Ok(File::from(OwnedFd::from(listener.accept()?.0))),
            Listening::Unix(listener, path) => {
                let accepted = listener.accept();
                // The path served its purpose once a peer is in.
                let _ = std::fs::remove_file(path);
                Ok(File::from(OwnedFd::from(accepted?.0)))
            }
        }
    }
}

/// Parses `--connect-timeout`: a duration from 1ms to 1h.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    duration::parse(
        text,
        &Accepted {
            least: Duration::from_millis(1),
            most: Duration::from_secs(3600),
            plain_seconds: false,
            examples: "e.g. 500ms, 10s, 1m",
        },
    )
}

/// Ends the sending side of `connection` and waits for the peer to close
/// its side, so that nothing sent is cut off by closing too early. What the
/// peer sends meanwhile is read and dropped.
pub fn finish(connection: File) -> io::Result<()> {
    rustix::net::shutdown(&connection, rustix::net::Shutdown::Write)?;
    let mut connection = connection;
    let mut sink = [0u8; 16 * 1024];
    loop {
        match connection.read(&mut sink) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_listener_is_one_socket_that_any_loop_accepts_from_and_no_other_joins() {
        let address: Address = "127.0.0.1:0".parse().unwrap();
        let shared = address.listen_shared(3).unwrap();
        let ports: Vec<String> = shared.iter().map(Listening::local).collect();
        assert_eq!(ports.len(), 3);
        assert!(ports.iter().all(|port| *port == ports[0]), "{ports:?}");
        let listeners: Vec<TcpListener> = shared
            .into_iter()
            .map(|listening| match listening {
                Listening::Tcp(listener) => listener,
                Listening::Unix(..) => unreachable!("a TCP address"),
            })
            .collect();
        // One backlog: each descriptor takes the next client, in order.
        let clients: Vec<_> = (0..3)
            .map(|_| std::net::TcpStream::connect(&ports[0]).unwrap())
            .collect();
        for (listener, client) in listeners.iter().zip(&clients) {
            let (_, peer) = listener.accept().unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
        }
        // Nobody else gets the port, shared or not.
        let taken: Address = ports[0].parse().unwrap();
        assert!(taken.listen().is_err());
        assert!(taken.listen_shared(2).is_err());
        let unix = Address::Unix(
            std::env::temp_dir().join(format!("shape-shared-{}", std::process::id())),
        );
        let both = unix.listen_shared(2).unwrap();
        assert_eq!(both.len(), 2, "a Unix socket is shared too");
        let _client =
            std::os::unix::net::UnixStream::connect(both[0].local().trim_start_matches("unix:"))
                .unwrap();
        match &both[1] {
            Listening::Unix(listener, _) => assert!(listener.accept().is_ok()),
            Listening::Tcp(_) => unreachable!("a Unix address"),
        }
        if let Address::Unix(path) = unix {
            let _ = std::fs::remove_file(path);
        }
    }

    #[test]
    fn every_address_form_parses() {
        let tcp = |host: &str, port| Address::Tcp {
            host: host.into(),
            port,
        };
        assert_eq!("localhost:9000".parse(), Ok(tcp("localhost", 9000)));
        assert_eq!(":9000".parse(), Ok(tcp("", 9000)));
        assert_eq!("127.0.0.1:1".parse(), Ok(tcp("127.0.0.1", 1)));
        assert_eq!("[::1]:65535".parse(), Ok(tcp("::1", 65535)));
        assert_eq!("127.0.0.1:0".parse(), Ok(tcp("127.0.0.1", 0)));
        assert!(
            parse_connect("127.0.0.1:0")
                .unwrap_err()
                .contains("only --listen")
        );
        assert_eq!(parse_connect(":1"), Ok(tcp("", 1)));
        assert_eq!("unix:/tmp/s".parse(), Ok(Address::Unix("/tmp/s".into())));
        assert_eq!("[::1]:8".parse::<Address>().unwrap().to_string(), "[::1]:8");
    }

    #[test]
    fn malformed_addresses_say_why() {
        for bad in [
            "",
            "9000",
            "host",
            "host:",
            "host:65536",
            "host:http",
            "::1:80",
            "[::1:80",
            "[zz]:80",
            "unix:",
            "a b:80",
            "host:-1",
        ] {
            assert!(
                bad.parse::<Address>().unwrap_err().contains("e.g."),
                "{bad}"
            );
        }
    }
}
