//! The changes a running loop is sent: routes opened, closed and
//! retuned (`--serve`'s API calls), a count of connections, and the
//! stop, each carried out between two turns of the loop and answered
//! once done, so that the API can say so.

use super::{EventLoop, Upstream};
use crate::proxy::rules::Rules;
use crate::{Address, Listening};
use shape_bucket::Clock;
use shape_leaves::message::one_line;
use std::io;
use std::sync::mpsc::SyncSender;

/// A change of routes, sent to a running loop; each says when it is done.
pub enum Command {
    /// Listen on `listening` (bound by the sender, who can then say why
    /// it could not be) and forward to `connect`, at `upstream`; answers
    /// the route's key.
    Open {
        listening: Listening,
        connect: Address,
        upstream: Upstream,
        rules: Box<dyn Rules + Send>,
        opened: SyncSender<io::Result<usize>>,
    },
    /// Stop listening and close every connection of the route.
    Close {
        route: usize,
        closed: SyncSender<()>,
    },
    /// Shape the route's connections, open ones too, by `rules` from now on.
    Retune {
        route: usize,
        rules: Box<dyn Rules + Send>,
        retuned: SyncSender<()>,
    },
    /// Carry a connection of route `route` (one that listens nowhere)
    /// between `client` and `server`, both connected already.
    Carry {
        route: usize,
        client: std::net::TcpStream,
        server: std::net::TcpStream,
    },
    /// Say how many connections are open, over every route.
    Count { counted: SyncSender<usize> },
    /// Say how many connections each route has open, by route key.
    CountEach {
        counted: SyncSender<std::collections::HashMap<usize, usize>>,
    },
    /// Close everything and end the loop.
    Stop,
}

impl<'a> EventLoop<'a> {
    /// Stops listening on route `key` and closes its connections.
    fn close(&mut self, key: usize) {
        let Some(mut route) = self.routes.try_remove(key) else {
            return;
        };
        if let Some(listener) = &mut route.listener {
            let _ = self.poll.registry().deregister(listener.source());
        }
        if self
            .parked
            .as_ref()
            .is_some_and(|parked| parked.route == key)
        {
            self.parked = None;
        }
        self.awaiting.retain(|_, waiting| waiting.route != key);
        let gone: Vec<usize> = self
            .connections
            .iter()
            .filter(|(_, c)| c.route == key)
            .map(|(k, _)| k)
            .collect();
        for connection in gone {
            self.forget(connection);
        }
    }

    /// Shapes route `key`'s connections by `rules` from now on.
    fn retune(&mut self, key: usize, rules: Box<dyn Rules + 'a>) {
        let Some(route) = self.routes.get_mut(key) else {
            return;
        };
        route.rules = rules;
        let unstalled_closes = route.rules.closes_when_unstalled();
        let now = self.clock.now();
        let mut failed = Vec::new();
        for (k, connection) in self.connections.iter_mut() {
            if connection.route != key {
                continue;
            }
            let plan = route.rules.plan(&mut connection.draws);
            match plan.and_then(|plan| connection.take(plan, now, unstalled_closes)) {
                Ok(()) => self.retuned.push(k),
                Err(err) => failed.push((k, err)),
            }
        }
        for (k, err) in failed {
            let peer = &self.connections[k].peer;
            self.say(&format!("shape: {peer}: {}", one_line(&err)));
            self.connections[k].reset_on_close();
            self.forget(k);
        }
    }

    /// Carries out the commands sent; returns false on [`Command::Stop`].
    pub(super) fn obey(&mut self) -> bool {
        let Some(commands) = self.commands.take() else {
            return true;
        };
        let mut going = true;
        while let Ok(command) = commands.try_recv() {
            match command {
                Command::Open {
                    listening,
                    connect,
                    upstream,
                    rules,
                    opened,
                } => {
                    let opened_as = self.open(listening, connect, upstream, rules);
                    let _ = opened.send(opened_as.map(|(key, _)| key));
                }
                Command::Close { route, closed } => {
                    self.close(route);
                    let _ = closed.send(());
                }
                Command::Retune {
                    route,
                    rules,
                    retuned,
                } => {
                    self.retune(route, rules);
                    let _ = retuned.send(());
                }
                Command::Carry {
                    route,
                    client,
                    server,
                } => {
                    let carried = self.carry(route, client, server);
                    self.retuned.extend(carried);
                }
                Command::Count { counted } => {
                    let _ = counted.send(self.connections.len());
                }
                Command::CountEach { counted } => {
                    let mut each = std::collections::HashMap::new();
                    for (_, connection) in &self.connections {
                        *each.entry(connection.route).or_insert(0) += 1;
                    }
                    let _ = counted.send(each);
                }
                Command::Stop => going = false,
            }
        }
        self.commands = Some(commands);
        going
    }
}
