//! How clients get in: accepting them, unless resources are short (then
//! `shortage.rs` says what happens), waiting for their upstream's name or
//! for a descriptor, and connecting them to their server, address by
//! address.

use super::{EventLoop, Route, Upstream};
use crate::proxy::connection::{Connection, Opening};
use crate::proxy::resolver::Resolver;
use crate::proxy::rules::RuleDraws;
use crate::proxy::stream::Stream;
use crate::{Address, out_of_resources};
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Token};
use shape_bucket::Clock;
use shape_leaves::message::one_line;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

/// The most clients that wait at once for their upstream's name to be
/// looked up; the rest wait in the listen backlog.
const MOST_AWAITING: usize = 1024;

/// A client waiting for a descriptor for its server: its route, who it
/// is, the server's addresses (already looked up, so that its wait is
/// not begun again) and since when it waits.
pub(super) struct Parked {
    pub(super) route: usize,
    pub(super) client: Stream,
    pub(super) peer: String,
    pub(super) upstream: Arc<[SocketAddr]>,
    pub(super) since: u64,
}

/// A client that waits for its upstream's name to be looked up.
pub(super) struct Awaiting {
    pub(super) route: usize,
    pub(super) serial: u64,
    pub(super) client: Stream,
    pub(super) peer: String,
}

impl EventLoop<'_> {
    /// Admits the client that waits for resources, then every client
    /// waiting to be accepted on `routes`, unless accepting rests. While
    /// descriptors are short, the loops of a proxy take turns, one client
    /// each (`shortage.rs`).
    pub(super) fn accept_all(&mut self, routes: &[usize], ready: &mut Vec<usize>) {
        if self.accept_resumes.is_some_and(|t| t > self.clock.now()) {
            return;
        }
        self.accept_resumes = None;
        if !self.may_admit() {
            // Another loop's turn: this one is woken when its own comes.
            return;
        }
        if let Some(parked) = self.parked.take() {
            let Parked {
                route,
                client,
                peer,
                upstream,
                since,
            } = parked;
            ready.extend(self.connect_client(route, client, peer, upstream, Some(since)));
            if self.parked.is_none() && self.pass_turn() {
                return;
            }
        }
        for &route in routes {
            let mut taken = 0;
            while self.accept_resumes.is_none() {
                if taken == self.proxy_loops.accept_at_once {
                    self.more_to_accept.push(route);
                    break;
                }
                let Some(Route {
                    listener: Some(listener),
                    listen,
                    upstream,
                    ..
                }) = self.routes.get_mut(route)
                else {
                    break;
                };
                if matches!(upstream, Upstream::PerClient) && self.awaiting.len() >= MOST_AWAITING {
                    break;
                }
                match listener.accept(listen) {
                    Ok((client, peer)) => {
                        taken += 1;
                        ready.extend(self.admit(route, client, peer, None));
                        if self.parked.is_none() && self.pass_turn() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // The client gave up before it was accepted.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                    // Out of descriptors, memory or buffers, or worse:
                    // trying again at once would fail the same way and spin.
                    Err(err) => {
                        let what = format!("accept on {listen}");
                        self.wait_for_resources(&what, &err);
                        if out_of_resources(&err) {
                            self.shed();
                        }
                    }
                }
            }
        }
        if self.accept_resumes.is_none() && self.parked.is_none() {
            self.shortage_over();
        }
    }

    /// Connects a client of route `key` to its server and starts serving
    /// it, or, if the route's name is looked up per client, hands the
    /// name to the resolver and keeps the client until it answers; on
    /// failure closes the client and says why. `waited_since` is when it
    /// began to wait for a descriptor, if it did. Returns its key, if it
    /// is served now.
    fn admit(
        &mut self,
        key: usize,
        client: Stream,
        peer: String,
        waited_since: Option<u64>,
    ) -> Option<usize> {
        let route = self.routes.get(key)?;
        let upstream = match &route.upstream {
            Upstream::Fixed(upstream) => upstream.clone(),
            Upstream::PerClient => {
                let (connect, serial) = (route.connect.clone(), route.serial);
                if self.resolver.is_none() {
                    let waker = self.waker.clone();
                    match Resolver::start(self.found.0.clone(), move || {
                        let _ = waker.wake();
                    }) {
                        Ok(resolver) => self.resolver = Some(resolver),
                        Err(err) => {
                            self.refuse(key, &client, &peer, &err);
                            return None;
                        }
                    }
                }
                let ticket = self.awaiting.insert(Awaiting {
                    route: key,
                    serial,
                    client,
                    peer,
                });
                if let Some(resolver) = &self.resolver {
                    resolver.ask(ticket, connect);
                }
                return None;
            }
        };
        self.connect_client(key, client, peer, upstream, waited_since)
    }

    /// Serves the clients whose names the resolver has looked up: each is
    /// connected, or closed if its name did not resolve or its route has
    /// closed. Returns true if it had been full, so that accepting,
    /// which stopped, goes on.
    pub(super) fn take_found(&mut self, ready: &mut Vec<usize>) -> bool {
        let was_full = self.awaiting.len() >= MOST_AWAITING;
        let mut took = false;
        while let Ok((ticket, found)) = self.found.1.try_recv() {
            let Some(waiting) = self.awaiting.try_remove(ticket) else {
                continue;
            };
            took = true;
            let Awaiting {
                route,
                serial,
                client,
                peer,
            } = waiting;
            if self.routes.get(route).is_none_or(|r| r.serial != serial) {
                continue;
            }
            match found {
                Ok(upstream) => {
                    ready.extend(self.connect_client(route, client, peer, upstream.into(), None))
                }
                Err(err) => {
                    let why = format!("its name does not resolve ({})", one_line(&err));
                    self.refuse(route, &client, &peer, &io::Error::new(err.kind(), why));
                }
            }
        }
        was_full && took
    }

    /// Closes `client` of route `key`, whose server cannot be reached for
    /// `err`: in good order if the route's rules say so, else by a reset;
    /// and says why.
    pub(super) fn refuse(&self, key: usize, client: &Stream, peer: &str, err: &io::Error) {
        let Some(route) = self.routes.get(key) else {
            return;
        };
        if !route.rules.closes_when_unreachable() {
            client.reset_on_close();
        }
        self.say(&format!(
            "shape: {peer}: connect to {}: {}",
            route.connect,
            one_line(err)
        ));
    }

    /// Connects a client of route `key` to the first of the `upstream`
    /// addresses that lets a connection begin, and starts serving it; on
    /// failure closes the client and says why. Out of descriptors, the
    /// client waits for one (since `waited_since`, if it waited already)
    /// up to a second in a loop, ten seconds otherwise (`shortage.rs`).
    /// Returns its key.
    fn connect_client(
        &mut self,
        key: usize,
        client: Stream,
        peer: String,
        upstream: Arc<[SocketAddr]>,
        waited_since: Option<u64>,
    ) -> Option<usize> {
        let route = self.routes.get(key)?;
        let (server, upstream_at) = match connect_upstream(&route.connect, &upstream, 0) {
            Ok(server) => server,
            Err(err) if out_of_resources(&err) => {
                // Only time (connections ending) mends this: the client
                // waits, and those behind it wait in the backlog; but not
                // for ever, since it may be what holds the rest up.
                let since = waited_since.unwrap_or(self.clock.now());
                let what = format!("connect to {}", route.connect);
                self.wait_for_resources(&what, &err);
                if self.stuck(Some(since)) {
                    self.refuse(key, &client, &peer, &err);
                    return None;
                }
                self.parked = Some(Parked {
                    route: key,
                    client,
                    peer,
                    upstream,
                    since,
                });
                return None;
            }
            Err(err) => {
                self.refuse(key, &client, &peer, &err);
                return None;
            }
        };
        self.start_serving(key, client, (server, upstream, upstream_at), peer)
    }

    /// Carries a connection of route `key` between `client` and
    /// `server`, both connected already by whoever handed them over.
    /// Returns its key.
    pub(super) fn carry(
        &mut self,
        key: usize,
        client: std::net::TcpStream,
        server: std::net::TcpStream,
    ) -> Option<usize> {
        let upstream: Arc<[SocketAddr]> = server.peer_addr().ok().into_iter().collect();
        let peer = match upstream.first() {
            Some(at) => format!("connection to {at}"),
            None => "connection".into(),
        };
        let tcp = |stream: std::net::TcpStream| {
            let _ = stream.set_nonblocking(true);
            let _ = stream.set_nodelay(true);
            Stream::tcp(TcpStream::from_std(stream))
        };
        self.start_serving(key, tcp(client), (tcp(server), upstream, 0), peer)
    }

    /// Starts serving a client of route `key` with its server, the
    /// addresses it was found at and which of them it is. Returns its key.
    fn start_serving(
        &mut self,
        key: usize,
        client: Stream,
        (server, upstream, upstream_at): (Stream, Arc<[SocketAddr]>, usize),
        peer: String,
    ) -> Option<usize> {
        let affect = self.routes.get(key)?.rules.affect();
        let (affected, seeds) = self.connection_draws(affect);
        let mut draws = RuleDraws::new(seeds[0].faults ^ seeds[1].jitter);
        let route = &self.routes[key];
        let started = route.rules.plan(&mut draws).and_then(|plan| {
            Connection::new(Opening {
                client,
                server,
                plan,
                rules: &*route.rules,
                draws,
                seeds,
                affected,
                route: key,
                upstream,
                upstream_at,
                peer: peer.clone(),
                now: self.clock.now(),
            })
        });
        match started {
            Ok(connection) => self.keep(connection),
            Err(err) => {
                self.say(&format!("shape: {peer}: {}", one_line(&err)));
                None
            }
        }
    }

    /// Watches `connection`'s sockets and keeps it, noting whether it leads
    /// back to the loop; if poll will not take them, resets it and says
    /// so. Returns its key.
    fn keep(&mut self, mut connection: Connection) -> Option<usize> {
        connection.own_end = connection.server.local_tcp();
        connection.looped = connection
            .client
            .peer_tcp()
            .is_some_and(|peer| self.own_ends.contains(&peer));
        let entry = self.connections.vacant_entry();
        let connection_key = entry.key();
        let registry = self.poll.registry();
        let both = Interest::READABLE | Interest::WRITABLE;
        let registered = registry
            .register(connection.client.source(), Token(connection_key * 2), both)
            .and_then(|()| {
                registry
                    .register(
                        connection.server.source(),
                        Token(connection_key * 2 + 1),
                        both,
                    )
                    .inspect_err(|_| {
                        let _ = registry.deregister(connection.client.source());
                    })
            });
        if let Err(err) = registered {
            connection.reset_on_close();
            self.say(&format!(
                "shape: {}: cannot be watched: {}",
                connection.peer,
                one_line(&err)
            ));
            return None;
        }
        self.own_ends.extend(connection.own_end);
        self.loops += usize::from(connection.looped);
        entry.insert(connection);
        Some(connection_key)
    }

    /// Connects connection `key` to the next address of its route's
    /// upstream, if no byte has passed to or from its server yet (a name
    /// such as localhost may name ::1 first, where nothing listens).
    /// Returns whether it did.
    pub(super) fn try_next_address(&mut self, key: usize) -> bool {
        let connection = &mut self.connections[key];
        let Some(route) = self.routes.get(connection.route) else {
            return false;
        };
        if connection.server_touched() || !matches!(route.connect, Address::Tcp { .. }) {
            return false;
        }
        let next = connect_upstream(
            &route.connect,
            &connection.upstream,
            connection.upstream_at + 1,
        );
        let Ok((server, at)) = next else {
            return false;
        };
        let registry = self.poll.registry();
        let _ = registry.deregister(connection.server.source());
        if let Some(end) = connection.own_end.take() {
            self.own_ends.remove(&end);
        }
        connection.server = server;
        connection.own_end = connection.server.local_tcp();
        self.own_ends.extend(connection.own_end);
        connection.upstream_at = at;
        let both = Interest::READABLE | Interest::WRITABLE;
        registry
            .register(connection.server.source(), Token(key * 2 + 1), both)
            .is_ok()
    }
}

/// A new connection to `connect`: for TCP, to the first of its addresses
/// `upstream` from `from` on that the system lets a connection begin to,
/// with that address's place. Completes in the background; an address
/// that then refuses is left for the next by [`EventLoop::try_next_address`].
fn connect_upstream(
    connect: &Address,
    upstream: &[SocketAddr],
    from: usize,
) -> io::Result<(Stream, usize)> {
    if let Address::Unix(path) = connect {
        return UnixStream::connect(path).map(|s| (Stream::unix(s), 0));
    }
    let mut failed = io::Error::other("its name does not resolve (yet)");
    for (at, address) in upstream.iter().enumerate().skip(from) {
        match TcpStream::connect(*address) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok((Stream::tcp(stream), at));
            }
            Err(err) if out_of_resources(&err) => return Err(err),
            Err(err) => failed = err,
        }
    }
    Err(failed)
}
