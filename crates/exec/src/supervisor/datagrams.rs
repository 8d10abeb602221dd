//! Datagrams through a link: where a link relays the command's traffic,
//! each destination of its UDP sockets gets a datagram link of its own
//! (the UDP link's proxy, made by whoever gave the relay), which delays,
//! loses, duplicates, reorders and paces datagrams each way as the flags
//! say. The command's socket sends to the link's loopback address in
//! place of the destination, and receives from it only what the link lets
//! through, when it is due: its readiness is true. The addresses the
//! command gives and is given are turned from one to the other, so that
//! it sees only its destinations (a resolver checks where its answer came
//! from). A socket the command connects is connected to the link: its
//! sends and receives without an address need shape for nothing.

use super::{Supervisor, errno};
use crate::call;
use crate::kernel::{Notification, Response};
use crate::waiting_port::{mapped, unmapped};
use rustix::net::AddressFamily;
use shape_net::udp::FlowEnds;
use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::BorrowedFd;

/// The most destinations with a link of their own; datagrams to more go
/// unimpaired, said once.
const MOST_PROXIES: usize = 256;

/// Makes a datagram link that listens on the first address (port 0) and
/// carries to the second; returns where it listens.
pub type MakeNetem = Box<dyn Fn(SocketAddr, SocketAddr) -> io::Result<SocketAddr>>;

/// The datagram links made, each way.
pub(super) struct DatagramProxies {
    make: MakeNetem,
    /// By destination, and whether the link listens on IPv6.
    by_destination: HashMap<(SocketAddr, bool), SocketAddr>,
    /// Each link's destination, by where it listens.
    destinations: HashMap<SocketAddr, SocketAddr>,
    /// Where the links' flows send from.
    flow_ends: FlowEnds,
}

impl DatagramProxies {
    pub(super) fn new(make: MakeNetem, flow_ends: FlowEnds) -> DatagramProxies {
        DatagramProxies {
            make,
            by_destination: HashMap::new(),
            destinations: HashMap::new(),
            flow_ends,
        }
    }
}

impl Supervisor<'_> {
    /// Whether datagrams go through links (and are paid for there).
    pub(super) fn datagrams_linked(&self) -> bool {
        self.datagram_proxies.is_some()
    }

    /// Where a socket of `family` sends datagrams for `destination`: its
    /// link's address, the link made on first use; `None` if there is no
    /// link for it.
    fn proxy_to(&mut self, destination: SocketAddr, family: AddressFamily) -> Option<SocketAddr> {
        let v6_loopback = self
            .waiting_ports
            .as_ref()
            .is_some_and(|waiting_ports| waiting_ports.has_v6());
        let v6 = family == AddressFamily::INET6 && v6_loopback;
        let destination = unmapped(destination);
        let proxies = self.datagram_proxies.as_mut()?;
        if let Some(link) = proxies.by_destination.get(&(destination, v6)) {
            return Some(*link);
        }
        if proxies.flow_ends.contains(&destination) {
            // An answer to a datagram of the command's own that crossed
            // a link: it goes back through that link.
            return None;
        }
        if proxies.by_destination.len() >= MOST_PROXIES {
            self.say_once(
                "links",
                &format!(
                    "shape: the command sent datagrams to more than {MOST_PROXIES} destinations: \
                     those to the others are not delayed nor impaired"
                ),
            );
            return None;
        }
        let listen = match v6 {
            true => SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
            false => SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        };
        match (proxies.make)(listen, destination) {
            Ok(link) => {
                proxies.by_destination.insert((destination, v6), link);
                proxies.destinations.insert(link, destination);
                Some(link)
            }
            Err(err) => {
                let why = shape_leaves::message::one_line(&err);
                self.say_once(
                    "link failed",
                    &format!("shape: a datagram link to {destination} failed: {why}"),
                );
                None
            }
        }
    }

    /// `name`, the address held call `key` sends a datagram to, as the
    /// address of its link.
    pub(super) fn sent_through_link(&mut self, key: usize, name: Vec<u8>) -> Vec<u8> {
        let Some(destination) = call::ip_address(&name) else {
            return name;
        };
        let family = self.family_of(key);
        match self.proxy_to(destination, family) {
            Some(link) => call::ip_address_bytes(link, family == AddressFamily::INET6),
            None => name,
        }
    }

    /// `name`, where the datagram held call `key` receives came from, as
    /// the destination whose link it came through.
    pub(super) fn received_through_proxy(&self, key: usize, name: Vec<u8>) -> Vec<u8> {
        let Some(proxies) = &self.datagram_proxies else {
            return name;
        };
        let Some(from) = call::ip_address(&name) else {
            return name;
        };
        let through = proxies
            .destinations
            .get(&from)
            .or_else(|| proxies.destinations.get(&unmapped(from)));
        let Some(destination) = through else {
            return name;
        };
        let family = self.family_of(key);
        call::ip_address_bytes(*destination, family == AddressFamily::INET6)
    }

    /// The address family of held call `key`'s socket.
    fn family_of(&self, key: usize) -> AddressFamily {
        rustix::net::sockopt::socket_domain(&self.held[key].socket).unwrap_or(AddressFamily::INET)
    }

    /// A `connect` of a UDP socket to `destination`: the command's socket
    /// is connected to its link instead.
    pub(super) fn connect_datagrams(
        &mut self,
        notification: &Notification,
        socket: BorrowedFd<'_>,
        destination: SocketAddr,
    ) {
        let family = rustix::net::sockopt::socket_domain(socket).unwrap_or(AddressFamily::INET);
        let Some(link) = self.proxy_to(destination, family) else {
            return self.respond(notification, Response::Continue);
        };
        let link = match (family == AddressFamily::INET6, link) {
            (true, SocketAddr::V4(_)) => mapped(link),
            _ => link,
        };
        let answer = match rustix::net::connect(socket, &link) {
            Ok(()) => Response::Value(0),
            Err(err) => Response::Error(errno(&err.into())),
        };
        self.respond(notification, answer);
    }
}
