//! The proxies' event loops, as the API reaches them: one per core, each
//! on a thread of its own. A proxy is a route on every loop, each
//! accepting from the one listening socket, so every change is sent to
//! each loop and waited for from all; counts are added up.

use shape_leaves::message::one_line;
use shape_leaves::say::Printer;
use shape_net::proxy::{Command, ProxyLoops, run_by_commands};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the API waits for the loops to carry a change out. A loop
/// answers in well under a millisecond; only a loop that has ended (the
/// server is stopping) takes longer.
const PATIENCE: Duration = Duration::from_secs(5);

/// One event loop, as the API reaches it.
#[derive(Clone)]
struct Loop {
    commands: Sender<Command>,
    waker: Arc<mio::Waker>,
    /// Steps every waiting connection again: a shared bucket changed.
    changed: Arc<dyn Fn() + Send + Sync>,
}

impl Loop {
    /// Sends the command `make` builds around a reply channel; the reply
    /// is waited for on what is returned.
    fn send<T>(&self, make: impl FnOnce(SyncSender<T>) -> Command) -> Option<Receiver<T>> {
        let (reply, replied) = sync_channel(1);
        self.commands.send(make(reply)).ok()?;
        self.waker.wake().ok()?;
        Some(replied)
    }
}

/// Every event loop of the server, in the order a route's keys are kept.
#[derive(Clone)]
pub struct Loops(Vec<Loop>);

/// What a running loop's thread returns: how it ended.
pub type LoopThread = JoinHandle<std::io::Result<()>>;

impl Loops {
    /// Starts `count` loops (at least one), each on a thread of its own,
    /// sharing the draws of chance of `seed`. If one fails later,
    /// `failing` is told why: without it, its proxies' clients would go
    /// unserved, so the server ends.
    pub fn start(
        count: usize,
        report: Option<Printer>,
        seed: u64,
        failing: impl Fn(String) + Clone + Send + 'static,
    ) -> Result<(Loops, Vec<LoopThread>), String> {
        let count = count.max(1);
        let proxy_loops = Arc::new(ProxyLoops::new(seed, count));
        let (mut loops, mut threads) = (Vec::new(), Vec::new());
        for index in 0..count {
            let (commands, taken) = channel();
            let (ready, reach) = channel();
            let (report, proxy_loops, failing) =
                (report.clone(), proxy_loops.clone(), failing.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("proxies-{index}"))
                .spawn(move || {
                    let served = run_by_commands(report, proxy_loops, taken, ready);
                    // A loop ends on its own only if poll itself fails.
                    if let Err(err) = &served {
                        failing(format!("the proxies' event loop failed: {}", one_line(err)));
                    }
                    served
                });
            let started =
                spawned
                    .map_err(|err| err.to_string())
                    .and_then(|thread| match reach.recv() {
                        Ok(reach) => Ok((reach, thread)),
                        Err(_) => Err(match thread.join() {
                            Ok(Err(err)) => err.to_string(),
                            _ => "the event loop did not start".into(),
                        }),
                    });
            match started {
                Ok((reach, thread)) => {
                    loops.push(Loop {
                        commands,
                        waker: reach.waker,
                        changed: reach.changed,
                    });
                    threads.push(thread);
                }
                Err(why) => {
                    Loops(loops).stop();
                    return Err(why);
                }
            }
        }
        Ok((Loops(loops), threads))
    }

    /// How many loops there are: how many descriptors of its listening
    /// socket a proxy needs.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// Closes every proxy and ends the loops.
    pub fn stop(&self) {
        for one in &self.0 {
            if one.commands.send(Command::Stop).is_ok() {
                let _ = one.waker.wake();
            }
        }
    }

    /// Sends each loop the command `make` builds for it (given its place)
    /// around a reply channel, then waits for every reply. None if any
    /// loop did not answer.
    pub fn ask_each<T>(
        &self,
        mut make: impl FnMut(usize, SyncSender<T>) -> Command,
    ) -> Option<Vec<T>> {
        let waiting: Vec<Option<Receiver<T>>> = (self.0.iter().enumerate())
            .map(|(place, one)| one.send(|reply| make(place, reply)))
            .collect();
        waiting
            .into_iter()
            .map(|replied| replied?.recv_timeout(PATIENCE).ok())
            .collect()
    }

    /// Sends the loop at `place` the command `make` builds around a reply
    /// channel, and waits for the reply.
    pub fn ask_at<T>(
        &self,
        place: usize,
        make: impl FnOnce(SyncSender<T>) -> Command,
    ) -> Option<T> {
        let replied = self.0.get(place)?.send(make)?;
        replied.recv_timeout(PATIENCE).ok()
    }

    /// How many connections are open, over every proxy and loop.
    pub fn connections(&self) -> Option<usize> {
        let counts = self.ask_each(|_, counted| Command::Count { counted })?;
        Some(counts.into_iter().sum())
    }

    /// What steps every waiting connection of every loop again.
    pub fn changed(&self) -> Arc<dyn Fn() + Send + Sync> {
        let each: Vec<_> = self.0.iter().map(|one| one.changed.clone()).collect();
        Arc::new(move || each.iter().for_each(|changed| changed()))
    }
}
