//! The datagram proxy (`--listen udp:ADDR --connect udp:ADDR`): each
//! client address is a flow, with a socket of its own toward the
//! upstream, so that replies find their way back to it. Datagrams each
//! way go through that way's [`Netem`], paid for from that way's bucket.
//! One thread and one poll: it sleeps until a datagram comes, one is due
//! to leave, or a flow's idle time may have run out.

use super::flows::{FlowEnds, Flows, Own};
use super::handle::{Handle, Pending};
use super::netem::{Impairment, Netem, Tally};
use crate::deadlines::Deadlines;
use crate::waiting::Waiting;
use mio::net::UdpSocket;
use mio::{Interest, Poll, Token, Waker};
use shape_bucket::{Clock, MonotonicClock};
use shape_impair::conditions::{Conditions, Watch};
use shape_leaves::bucket::Bucket;
use shape_leaves::say::Printer;
use shape_leaves::throughput::Throughput;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest datagram UDP carries over IPv4.
const LARGEST: usize = shape_impair::faults::LARGEST_DATAGRAM;
/// How long a flow that sends and receives nothing is kept when not told:
/// as long as Linux's conntrack keeps a UDP flow that has seen replies.
pub const IDLE: Duration = Duration::from_secs(120);
const LISTEN: Token = Token(usize::MAX);
/// A change of the buckets' settings, or a [`Handle`]'s asking: deadlines
/// and what was asked are looked at again.
const CHANGED: Token = Token(usize::MAX - 1);
/// Left to the [`Waiting`], for an alarm where it needs one.
const ALARM: Token = Token(usize::MAX - 2);

/// Makes a bucket of a flow's own for a way (client to upstream, then
/// back), following the shared one's settings.
pub type OwnBuckets = dyn Fn(usize) -> io::Result<Arc<Bucket>> + Send;

/// What a datagram proxy is asked to do.
#[derive(Debug, Clone)]
pub struct Route {
    pub listen: SocketAddr,
    pub upstream: SocketAddr,
    /// A flow that sends and receives nothing for this long is forgotten.
    pub idle: Duration,
    /// Client to upstream, then upstream to client.
    pub ways: [Impairment; 2],
    pub seed: u64,
}

/// A datagram proxy, bound and ready to serve.
pub struct DatagramProxy {
    route: Route,
    poll: Poll,
    listen: UdpSocket,
    flows: Flows,
    ways: [Netem; 2],
    buckets: [Arc<Bucket>; 2],
    /// Bytes that left each way, for progress and SIGUSR1.
    passed: [Arc<Throughput>; 2],
    /// What each way did, as of the last turn of the loop.
    tallies: Arc<Mutex<[Tally; 2]>>,
    /// The delay, jitter and faults in force, which `--remote` changes.
    conditions: Option<(Arc<Conditions>, Watch)>,
    /// What wakes poll when a datagram is due, to the microsecond (poll's
    /// own timeout counts milliseconds); `None` if the system gave none,
    /// and then poll's timeout serves.
    waiting: Waiting,
    /// Where lines for the user go; `None` when quiet.
    say: Option<Printer>,
    /// How many times the upstream refused a datagram (ICMP port
    /// unreachable, one for each), and whether that was said.
    refused: u64,
    refused_said: bool,
    /// Datagrams (and their bytes) of new clients dropped because no
    /// socket could be had for their flow.
    unflowed: (u64, u64),
    /// Whether that shortage was said, since a flow was last made.
    unflowed_said: bool,
    /// Datagrams (and bytes) each way dropped past their flow's limit.
    over_limit: [(u64, u64); 2],
    /// What another thread asked of it, through a [`Handle`].
    asked: Arc<Mutex<Pending>>,
    /// Makes each flow's own buckets, up then down, when each flow has
    /// links of its own (`--per-connection`).
    per_flow: Option<Box<OwnBuckets>>,
    /// What the flows' own links did: taken from each link whenever its
    /// flow is met, so that publishing it looks at no flow (summed over
    /// a thousand flows at every turn, it was a third of the loop's CPU).
    owned: [Tally; 2],
    /// When each flow's own links are next due, by its key: the loop
    /// meets those due without looking at every flow (a thousand flows
    /// looked at each turn cost four times an unshaped relay's CPU).
    flows_due: Deadlines,
    /// Flows whose own links took a datagram since the last turn.
    stirred: Vec<usize>,
    buffer: Vec<u8>,
}

impl DatagramProxy {
    /// Binds the listening socket; what leaves each way is counted in
    /// `passed`.
    pub fn bind(
        route: Route,
        buckets: [Arc<Bucket>; 2],
        passed: [Arc<Throughput>; 2],
    ) -> io::Result<DatagramProxy> {
        let poll = Poll::new()?;
        let mut listen = UdpSocket::bind(route.listen)?;
        poll.registry()
            .register(&mut listen, LISTEN, Interest::READABLE)?;
        let ways = [0, 1].map(|way| Netem::new(route.ways[way].clone(), route.seed ^ way as u64));
        Ok(DatagramProxy {
            route,
            waiting: Waiting::new(&poll, ALARM),
            poll,
            listen,
            flows: Flows::default(),
            ways,
            buckets,
            passed,
            tallies: Arc::default(),
            conditions: None,
            say: None,
            refused: 0,
            refused_said: false,
            unflowed: (0, 0),
            unflowed_said: false,
            over_limit: [(0, 0); 2],
            asked: Arc::default(),
            per_flow: None,
            owned: [Tally::default(); 2],
            flows_due: Deadlines::default(),
            stirred: Vec::new(),
            buffer: vec![0; LARGEST + 1],
        })
    }

    /// What reaches the proxy from another thread: to wake it when the
    /// buckets' settings change (so that a datagram waiting for tokens is
    /// timed at the new rate), to retune it, or to end it. Made once.
    pub fn handle(&self) -> io::Result<Handle> {
        Ok(Handle {
            waker: Arc::new(Waker::new(self.poll.registry(), CHANGED)?),
            asked: self.asked.clone(),
        })
    }

    /// Says what it has to say (a server refusing datagrams) through
    /// `say`; without it, it says nothing.
    pub fn saying(&mut self, say: Printer) {
        self.say = Some(say);
    }

    /// Gives each flow links of its own, paying from buckets that
    /// `buckets` makes (`--per-connection`): flows do not share a queue or
    /// a rate.
    pub fn per_flow(&mut self, buckets: Box<OwnBuckets>) {
        self.per_flow = Some(buckets);
    }

    /// Notes where each of its flows sends from in `ends`, while it lives.
    pub fn noting_ends(&mut self, ends: FlowEnds) {
        self.flows.ends = Some(ends);
    }

    /// Follows `conditions` from now on: a change reaches both ways at
    /// the next turn of the loop (the change wakes it).
    pub fn follow(&mut self, conditions: Arc<Conditions>) {
        let mut watch = Watch::default();
        watch.now(&conditions);
        self.conditions = Some((conditions, watch));
    }

    /// Where it listens.
    pub fn local(&self) -> io::Result<SocketAddr> {
        self.listen.local_addr()
    }

    /// What each way did (client to upstream, then back), kept up to
    /// date as it serves.
    pub fn tallies(&self) -> Arc<Mutex<[Tally; 2]>> {
        self.tallies.clone()
    }

    /// Serves until an error that ends it, or until asked to stop.
    pub fn serve(&mut self) -> io::Result<()> {
        let clock = MonotonicClock;
        let mut tokens = Vec::new();
        // Woken by a change (of the rates, the impairments or the
        // conditions), which moves when each flow's datagrams are due.
        let mut woken = false;
        loop {
            let now = clock.now();
            self.retune();
            self.deliver(now, std::mem::take(&mut woken));
            self.forget_idle(now);
            self.publish_tallies();
            let wake = self.ways[0]
                .wake()
                .into_iter()
                .chain(self.ways[1].wake())
                .chain(self.flows_due.wake_at())
                .chain(self.flows.next_look())
                .min();
            self.waiting.wait(&mut self.poll, wake, now, &mut tokens)?;
            let now = clock.now();
            // A bucket's settings or a handle's asking: what was asked is
            // taken here, never looked for otherwise, and before the
            // datagrams that came with it. Asked before they were sent
            // (an API call answered, then a datagram), it is in force for
            // them: taken after, a datagram sent once a loss was removed
            // could still be lost to it.
            woken = tokens.contains(&CHANGED);
            if woken && self.obey() {
                return Ok(());
            }
            for &token in &tokens {
                match token {
                    LISTEN => self.take_from_clients(now)?,
                    CHANGED => {}
                    Token(key) => self.take_from_upstream(key, now),
                }
            }
        }
    }

    /// Puts what every link did where SIGUSR1's line reads it: the shared
    /// links, the flows' own (taken as each is met, forgotten flows'
    /// too), and what the proxy itself dropped or was refused.
    fn publish_tallies(&self) {
        let mut tallies = self.owned;
        for (way, tally) in tallies.iter_mut().enumerate() {
            *tally += self.ways[way].tally();
        }
        tallies[0].unflowed = self.unflowed;
        tallies[0].refused = self.refused;
        for (tally, over) in tallies.iter_mut().zip(self.over_limit) {
            tally.over_limit = over;
        }
        *shape_leaves::lock::lock(&self.tallies) = tallies;
    }

    /// Takes what was asked through a [`Handle`]: new impairments, from
    /// now on. Returns true if it was asked to stop.
    fn obey(&mut self) -> bool {
        let asked = std::mem::take(&mut *shape_leaves::lock::lock(&self.asked));
        if let Some(ways) = asked.ways {
            self.route.ways = ways;
            self.retune_netems();
        }
        asked.stop
    }

    /// Puts the route's impairments in force on every direction, the shared
    /// ones and the flows' own.
    fn retune_netems(&mut self) {
        for (netem, impairment) in self.ways.iter_mut().zip(&self.route.ways) {
            netem.retune_to(impairment.clone());
        }
        for own in self.flows.iter_mut().filter_map(|flow| flow.own.as_mut()) {
            for (netem, impairment) in own.netems.iter_mut().zip(&self.route.ways) {
                netem.retune_to(impairment.clone());
            }
        }
    }

    /// Takes the conditions in force, if they changed.
    fn retune(&mut self) {
        let Some((conditions, watch)) = &mut self.conditions else {
            return;
        };
        let Some(now) = watch.changed(conditions) else {
            return;
        };
        let ways = self.route.ways.iter_mut().zip(now.faults).zip(now.delay);
        for ((impairment, faults), delay) in ways {
            *impairment = impairment.under(delay, now.jitter, &faults);
        }
        self.retune_netems();
    }

    /// Sends every datagram due by `now` on its way: the shared links',
    /// then the flows' own that took a datagram or are due, or all those
    /// waiting if `changed`.
    fn deliver(&mut self, now: u64, changed: bool) {
        // What a datagram counts for in progress: one, counting
        // datagrams, else its bytes.
        let packets = self.route.ways.each_ref().map(|way| way.packets);
        let counted = |way: usize, datagram: &[u8]| match packets[way] {
            true => 1,
            false => datagram.len() as u64,
        };
        let mut due = std::mem::take(&mut self.stirred);
        match changed {
            true => self.flows_due.waiting(&mut due),
            false => self.flows_due.due(now, &mut due),
        }
        due.sort_unstable();
        due.dedup();
        for &key in &due {
            let Some(flow) = self.flows.get_mut(key) else {
                continue;
            };
            let Some(own) = &mut flow.own else {
                continue;
            };
            for (_, datagram) in own.netems[0].leave(&own.buckets[0], now) {
                if flow.socket.send(&datagram).is_ok() {
                    self.passed[0].add(counted(0, &datagram));
                }
            }
            for (_, datagram) in own.netems[1].leave(&own.buckets[1], now) {
                if self.listen.send_to(&datagram, flow.client).is_ok() {
                    self.passed[1].add(counted(1, &datagram));
                }
            }
            for (owned, link) in self.owned.iter_mut().zip(&mut own.netems) {
                *owned += link.take_tally();
            }
            let wake = own.netems.iter().filter_map(Netem::wake).min();
            self.flows_due.file(key, wake);
        }
        due.clear();
        self.stirred = due;
        for (tag, datagram) in self.ways[0].leave(&self.buckets[0], now) {
            if let Some(flow) = self.flows.tagged(tag)
                && flow.socket.send(&datagram).is_ok()
            {
                self.passed[0].add(counted(0, &datagram));
            }
        }
        for (tag, datagram) in self.ways[1].leave(&self.buckets[1], now) {
            if let Some(flow) = self.flows.tagged(tag)
                && self.listen.send_to(&datagram, flow.client).is_ok()
            {
                self.passed[1].add(counted(1, &datagram));
            }
        }
    }

    /// Forgets the flows idle for longer than the route allows, keeping
    /// what their own links did.
    fn forget_idle(&mut self, now: u64) {
        let idle = self.route.idle.as_nanos() as u64;
        for flow in self.flows.forget_idle(now, idle, self.poll.registry()) {
            self.flows_due.file(Flows::key_of(flow.tag), None);
            if let Some(own) = flow.own {
                for (owned, link) in self.owned.iter_mut().zip(&own.netems) {
                    *owned += link.tally();
                }
            }
        }
    }
}

mod intake;

#[cfg(test)]
mod tests {
    use super::*;
    use shape_bucket::Limit;
    use shape_leaves::bucket::own_empty;
    use std::net::UdpSocket as StdSocket;
    use std::time::Instant;

    /// An upstream on loopback that echoes every datagram back.
    fn echo() -> SocketAddr {
        let socket = StdSocket::bind("127.0.0.1:0").unwrap();
        let address = socket.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut buffer = [0u8; LARGEST];
            while let Ok((n, from)) = socket.recv_from(&mut buffer) {
                let _ = socket.send_to(&buffer[..n], from);
            }
        });
        address
    }

    fn proxy(ways: [Impairment; 2], limit: Limit) -> SocketAddr {
        serving(ways, limit, false)
    }

    /// A proxy to an echo server; with `own`, each flow has links and
    /// buckets of its own.
    fn serving(ways: [Impairment; 2], limit: Limit, own: bool) -> SocketAddr {
        let route = Route {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: echo(),
            idle: Duration::from_secs(120),
            ways,
            seed: 1,
        };
        let buckets = [0, 1].map(|_| Arc::new(own_empty(limit, 1000).unwrap()));
        let passed = [0, 1].map(|_| Arc::new(Throughput::since(Instant::now())));
        let mut proxy = DatagramProxy::bind(route, buckets, passed).unwrap();
        if own {
            proxy.per_flow(Box::new(move |_| {
                own_empty(limit, 1000)
                    .map(Arc::new)
                    .map_err(io::Error::other)
            }));
        }
        let address = proxy.local().unwrap();
        std::thread::spawn(move || proxy.serve());
        address
    }

    #[test]
    fn each_client_is_a_flow_and_replies_find_their_way_back_after_the_delay() {
        let delayed = Impairment {
            delay: 50_000_000,
            ..Impairment::default()
        };
        let address = proxy([delayed.clone(), delayed], Limit::Unlimited);
        let clients: Vec<StdSocket> = (0..3)
            .map(|_| StdSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        for (i, client) in clients.iter().enumerate() {
            client
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let start = Instant::now();
            client.send_to(&[i as u8; 100], address).unwrap();
            let mut buffer = [0u8; 200];
            let n = client.recv(&mut buffer).unwrap();
            assert_eq!(&buffer[..n], &[i as u8; 100], "client {i}'s echo");
            // 50 ms each way, and not many times that.
            let took = start.elapsed();
            assert!(took >= Duration::from_millis(100), "{took:?}");
            assert!(took < Duration::from_secs(5), "{took:?}");
        }
    }

    #[test]
    fn flows_with_links_of_their_own_are_each_met_when_due() {
        // Fifty flows at once, each delayed 50 ms each way on links of
        // its own, filed by when each is due: every echo comes back,
        // after both delays.
        let delayed = Impairment {
            delay: 50_000_000,
            ..Impairment::default()
        };
        let address = serving([delayed.clone(), delayed], Limit::Unlimited, true);
        let clients: Vec<StdSocket> = (0..50)
            .map(|_| StdSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let start = Instant::now();
        for (i, client) in clients.iter().enumerate() {
            client.send_to(&[i as u8; 10], address).unwrap();
        }
        for (i, client) in clients.iter().enumerate() {
            client
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut buffer = [0u8; 20];
            let n = client.recv(&mut buffer).unwrap();
            assert_eq!(&buffer[..n], &[i as u8; 10], "client {i}'s echo");
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(100), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn a_rate_paces_datagrams_whole() {
        // 10,000 B/s, a queue for all: 20 datagrams of 1,000 bytes take
        // about two seconds to come back, each whole.
        let paced = Impairment {
            queue: 100_000,
            ..Impairment::default()
        };
        let address = proxy([paced, Impairment::default()], Limit::per_second(10_000));
        let client = StdSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let start = Instant::now();
        for i in 0..20u8 {
            client.send_to(&[i; 1000], address).unwrap();
        }
        let mut buffer = [0u8; 2000];
        for i in 0..20u8 {
            let n = client.recv(&mut buffer).unwrap();
            assert_eq!(&buffer[..n], &[i; 1000][..], "datagram {i}");
        }
        let took = start.elapsed().as_secs_f64();
        assert!((1.8..10.0).contains(&took), "{took:.2}s");
    }
}
