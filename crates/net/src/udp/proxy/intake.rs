//! How datagrams come into a datagram proxy: from clients (each one's
//! flow found or made, its own links given if flows have them, a flow's
//! limit kept, a shortage of sockets counted and said once) and from the
//! upstream (a refusal counted and said once), each into its way's link.

use super::{DatagramProxy, Netem, Own};
use std::io;
use std::net::SocketAddr;

/// Errors in a row on the listening socket before it counts as broken.
const MOST_ERRORS: u32 = 1024;

impl DatagramProxy {
    /// Takes in every datagram the clients sent.
    pub(super) fn take_from_clients(&mut self, now: u64) -> io::Result<()> {
        let mut errors = 0;
        loop {
            let (n, client) = match self.listen.recv_from(&mut self.buffer) {
                Ok(received) => received,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error for a datagram sent to a client is its own
                // trouble, not the proxy's, and is gone once read; one that
                // stays is the socket's, and ends the proxy.
                Err(err) => {
                    errors += 1;
                    if errors > MOST_ERRORS {
                        return Err(err);
                    }
                    continue;
                }
            };
            let made = self
                .flows
                .of_client(client, self.route.upstream, self.poll.registry(), now);
            let key = match made {
                Ok((key, new)) => {
                    // A shortage, if there was one, is over.
                    self.unflowed_said &= !new;
                    if new {
                        self.give_own_links(key);
                    }
                    key
                }
                Err(err) => {
                    self.unflowed.0 += 1;
                    self.unflowed.1 += n as u64;
                    self.say_unflowed(client, &err);
                    continue;
                }
            };
            if self.over_limit(0, key, n) {
                continue;
            }
            let datagram = self.buffer[..n].to_vec();
            let Some(flow) = self.flows.get_mut(key) else {
                continue;
            };
            match &mut flow.own {
                Some(own) => {
                    own.netems[0].arrive(&own.buckets[0], now, flow.tag, datagram);
                    self.stirred.push(key);
                }
                None => self.ways[0].arrive(&self.buckets[0], now, flow.tag, datagram),
            }
        }
    }

    /// Gives new flow `key` links of its own, if flows have them; should
    /// its buckets not be made, it shares the proxy's.
    fn give_own_links(&mut self, key: usize) {
        let Some(make) = &self.per_flow else {
            return;
        };
        let Some(flow) = self.flows.get_mut(key) else {
            return;
        };
        let (Ok(up), Ok(down)) = (make(0), make(1)) else {
            return;
        };
        let netems = [0, 1].map(|way| {
            let seed = self.route.seed ^ flow.tag.rotate_left(17) ^ way as u64;
            Netem::new(self.route.ways[way].clone(), seed)
        });
        flow.own = Some(Box::new(Own {
            netems,
            buckets: [up, down],
        }));
    }

    /// True if `n` more bytes way `way` would take flow `key` past its
    /// limit (limit_data): then the datagram is dropped and counted, and
    /// so is every one after it. Else they are counted as carried.
    fn over_limit(&mut self, way: usize, key: usize, n: usize) -> bool {
        let Some(flow) = self.flows.get_mut(key) else {
            return true;
        };
        let carried = flow.carried[way] + n as u64;
        if self.route.ways[way]
            .flow_limit
            .is_some_and(|limit| carried > limit)
        {
            self.over_limit[way].0 += 1;
            self.over_limit[way].1 += n as u64;
            return true;
        }
        flow.carried[way] = carried;
        false
    }

    /// Says, once until a flow is made again, that the datagrams of new
    /// clients such as `client` are dropped for want of a socket: a flood
    /// from many addresses would otherwise say so for every datagram.
    fn say_unflowed(&mut self, client: SocketAddr, err: &io::Error) {
        if self.unflowed_said {
            return;
        }
        self.unflowed_said = true;
        if let Some(say) = &self.say {
            say.line(&format!(
                "shape: no socket for a new flow from {client} ({}): new clients' datagrams are dropped and counted until flows are forgotten",
                shape_leaves::message::one_line(err)
            ));
        }
    }

    /// Takes in every datagram the upstream sent to flow `key`.
    pub(super) fn take_from_upstream(&mut self, key: usize, now: u64) {
        loop {
            let Some(flow) = self.flows.get_mut(key) else {
                return;
            };
            match flow.socket.recv(&mut self.buffer) {
                Ok(n) => {
                    flow.last = now;
                    if self.over_limit(1, key, n) {
                        continue;
                    }
                    let Some(flow) = self.flows.get_mut(key) else {
                        return;
                    };
                    let (tag, datagram) = (flow.tag, self.buffer[..n].to_vec());
                    match &mut flow.own {
                        Some(own) => {
                            own.netems[1].arrive(&own.buckets[1], now, tag, datagram);
                            self.stirred.push(key);
                        }
                        None => self.ways[1].arrive(&self.buckets[1], now, tag, datagram),
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) if err.kind() == io::ErrorKind::ConnectionRefused => {
                    self.refused += 1;
                    if !self.refused_said {
                        self.refused_said = true;
                        if let Some(say) = &self.say {
                            say.line(&format!(
                                "shape: {} refused a datagram (port unreachable); not said again",
                                self.route.upstream
                            ));
                        }
                    }
                }
                Err(_) => return,
            }
        }
    }
}
