//! Who a datagram proxy's clients are: each client address is a flow,
//! with a socket of its own toward the upstream (so that replies find
//! their way back), made when its first datagram comes and forgotten once
//! it has been idle for the route's idle time. A flow's tag names it in
//! the links: its slab key and the generation it was made in, so that
//! datagrams of a flow forgotten never reach one that took its key.

use super::netem::Netem;
use mio::net::UdpSocket;
use mio::{Interest, Registry, Token};
use shape_leaves::bucket::Bucket;
use slab::Slab;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// Flows are looked over for idleness this often at most.
const IDLE_LOOK: u64 = 1_000_000_000;

/// One client's flow.
pub(super) struct Flow {
    pub(super) client: SocketAddr,
    pub(super) socket: UdpSocket,
    pub(super) tag: u64,
    /// When it last sent or received, in nanoseconds.
    pub(super) last: u64,
    /// Bytes it sent, then received, for a limit per flow.
    pub(super) carried: [u64; 2],
    /// Its own links and buckets each way (`--per-connection`), if it
    /// does not share the proxy's.
    pub(super) own: Option<Box<Own>>,
}

/// A flow's own links and the buckets they pay from, client to upstream
/// then back.
pub(super) struct Own {
    pub(super) netems: [Netem; 2],
    pub(super) buckets: [Arc<Bucket>; 2],
}

/// Where the flows of datagram links send from, while they live: shared
/// with whoever must know a datagram that came from one (`--exec`, whose
/// command may answer one, and whose answer has crossed no link yet).
#[derive(Debug, Default, Clone)]
pub struct FlowEnds(Arc<Mutex<HashSet<SocketAddr>>>);

impl FlowEnds {
    /// Whether a flow sends from `at`.
    pub fn contains(&self, at: &SocketAddr) -> bool {
        shape_leaves::lock::lock(&self.0).contains(at)
    }

    /// How many flows live: one for each client heard from lately.
    pub fn len(&self) -> usize {
        shape_leaves::lock::lock(&self.0).len()
    }

    /// Whether no flow lives.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Every client's flow; flow `key`'s socket is poll's `Token(key)`.
#[derive(Default)]
pub(super) struct Flows {
    flows: Slab<Flow>,
    by_client: HashMap<SocketAddr, usize>,
    made: u64,
    idle_looked: u64,
    /// Where the flows send from, if someone asked to know.
    pub(super) ends: Option<FlowEnds>,
}

impl Flows {
    /// The key of `client`'s flow, made if it is new (its socket toward
    /// `upstream` registered with `registry`), and noted as active at
    /// `now`, with whether it is new; an error if no socket can be had
    /// for it now (out of descriptors, most likely).
    pub(super) fn of_client(
        &mut self,
        client: SocketAddr,
        upstream: SocketAddr,
        registry: &Registry,
        now: u64,
    ) -> io::Result<(usize, bool)> {
        if let Some(&key) = self.by_client.get(&client) {
            self.flows[key].last = now;
            return Ok((key, false));
        }
        let any: SocketAddr = match upstream {
            SocketAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let mut socket = UdpSocket::bind(any)?;
        socket.connect(upstream)?;
        if let (Some(ends), Ok(at)) = (&self.ends, socket.local_addr()) {
            shape_leaves::lock::lock(&ends.0).insert(at);
        }
        let entry = self.flows.vacant_entry();
        let key = entry.key();
        registry.register(&mut socket, Token(key), Interest::READABLE)?;
        self.made += 1;
        entry.insert(Flow {
            client,
            socket,
            tag: (self.made << 32) | key as u64,
            last: now,
            carried: [0; 2],
            own: None,
        });
        self.by_client.insert(client, key);
        Ok((key, true))
    }

    pub(super) fn get_mut(&mut self, key: usize) -> Option<&mut Flow> {
        self.flows.get_mut(key)
    }

    /// Every flow, to look at or change.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Flow> {
        self.flows.iter_mut().map(|(_, flow)| flow)
    }

    /// The flow tagged `tag`, unless it was forgotten.
    pub(super) fn tagged(&self, tag: u64) -> Option<&Flow> {
        self.flows
            .get(Flows::key_of(tag))
            .filter(|flow| flow.tag == tag)
    }

    /// The key of the flow tagged `tag` (or of the one that took its key).
    pub(super) fn key_of(tag: u64) -> usize {
        (tag & u64::from(u32::MAX)) as usize
    }

    /// When idle flows are next looked for, if there are flows.
    pub(super) fn next_look(&self) -> Option<u64> {
        (!self.flows.is_empty()).then_some(self.idle_looked + IDLE_LOOK)
    }

    /// Forgets the flows idle for `idle` nanoseconds or more by `now`,
    /// looking at most once a second; their sockets leave `registry`.
    /// Returns them, for what they did.
    pub(super) fn forget_idle(&mut self, now: u64, idle: u64, registry: &Registry) -> Vec<Flow> {
        if now < self.idle_looked + IDLE_LOOK {
            return Vec::new();
        }
        self.idle_looked = now;
        let gone: Vec<usize> = self
            .flows
            .iter()
            .filter(|(_, flow)| now.saturating_sub(flow.last) >= idle)
            .map(|(key, _)| key)
            .collect();
        gone.into_iter()
            .map(|key| {
                let mut flow = self.flows.remove(key);
                let _ = registry.deregister(&mut flow.socket);
                if let (Some(ends), Ok(at)) = (&self.ends, flow.socket.local_addr()) {
                    shape_leaves::lock::lock(&ends.0).remove(&at);
                }
                self.by_client.remove(&flow.client);
                flow
            })
            .collect()
    }
}
