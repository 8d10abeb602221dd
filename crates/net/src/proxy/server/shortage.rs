//! What the loop does when descriptors run out: accepting rests (and the
//! shortage is said once, by whichever of a proxy's loops meets it
//! first), clients wait for a descriptor for a while, the loops of one
//! proxy take turns to admit them, and a chain that holds every
//! descriptor (a proxy whose upstream is itself) is cut with a spare
//! descriptor kept for the purpose.

use super::{EventLoop, Route};
use crate::ACCEPT_PAUSE;
use mio::Waker;
use shape_bucket::Clock;
use shape_leaves::lock::lock;
use shape_leaves::message::one_line;
use std::collections::{HashSet, VecDeque};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a client waits for a descriptor for its server before it is
/// closed: long enough for a passing shortage, short enough that a chain
/// that holds every descriptor (a proxy whose upstream is itself) unwinds
/// as each end is closed, as toxiproxy's does.
const MOST_PARKED: Duration = Duration::from_secs(1);

/// How long any shortage of descriptors may last before waiting clients
/// are closed one by one, whatever holds the descriptors: a chain that
/// leads back to the loop is cut after [`MOST_PARKED`], but one that
/// passes through another program (or is not recognised as a loop)
/// would hold every descriptor for ever; a client that has waited this
/// long would mostly have given up anyway.
const MOST_SHORT: Duration = Duration::from_secs(10);

/// The loops of one proxy that wait to admit clients while descriptors
/// are short, the one whose turn it is first. Descriptors are the
/// process's: a loop that admitted every client it could would take each
/// descriptor freed, while clients of another loop who came first waited
/// on until they were closed. So while any loop is short, the loops take
/// turns, one client each.
#[derive(Default)]
pub(super) struct AdmissionOrder {
    line: VecDeque<usize>,
    /// Each loop's waker, and the flag that tells it its turn came, by
    /// its place.
    wakers: Vec<(Arc<Waker>, Arc<AtomicBool>)>,
}

impl AdmissionOrder {
    /// Counts a loop in, woken by `waker` with `given` set when its turn
    /// comes; returns its place.
    pub(super) fn join(&mut self, waker: Arc<Waker>, given: Arc<AtomicBool>) -> usize {
        self.wakers.push((waker, given));
        self.wakers.len() - 1
    }

    fn get_in_line(&mut self, place: usize) {
        if !self.line.contains(&place) {
            self.line.push_back(place);
        }
    }

    /// Wakes the loop at the front of the line to take its turn.
    fn hand_to_front(&self) {
        let Some((waker, given)) = self.line.front().and_then(|&front| self.wakers.get(front))
        else {
            return;
        };
        given.store(true, Ordering::SeqCst);
        let _ = waker.wake();
    }
}

impl EventLoop<'_> {
    /// Once a shortage of descriptors has lasted [`MOST_PARKED`], closes
    /// the next client waiting on a route that leads back to the loop,
    /// accepted with the spare descriptor: the chain of a proxy whose
    /// upstream is itself ends in that route's backlog, holds every
    /// descriptor, and nothing else would free one. After [`MOST_SHORT`]
    /// the next client of any route is closed. Clients that wait briefly
    /// for ordinary connections to end are left to wait.
    ///
    /// Every route is tried, not only the one whose accept failed: out of
    /// descriptors, accept fails on any listener, even one with nobody
    /// waiting, and the first route tried is seldom the looping one.
    pub(super) fn shed(&mut self) {
        let Some(since) = self.shortage_since else {
            return;
        };
        let lasted = Duration::from_nanos(self.clock.now().saturating_sub(since));
        if lasted < MOST_PARKED {
            return;
        }
        let looping: HashSet<usize> = self
            .connections
            .iter()
            .filter(|(_, c)| c.looped)
            .map(|(_, c)| c.route)
            .collect();
        let mut candidates: Vec<usize> = self
            .routes
            .iter()
            .map(|(key, _)| key)
            .filter(|key| lasted >= MOST_SHORT || looping.contains(key))
            .collect();
        candidates.sort_by_key(|key| !looping.contains(key));
        if candidates.is_empty() {
            return;
        }
        // Without a spare (reopening it failed last time), a descriptor
        // freed since may still let one client in.
        drop(self.spare.take());
        for key in candidates {
            let Some(Route {
                listener: Some(listener),
                listen,
                ..
            }) = self.routes.get_mut(key)
            else {
                continue;
            };
            if let Ok((client, peer)) = listener.accept(listen) {
                let err = io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
                self.refuse(key, &client, &peer, &err);
                break;
            }
        }
        self.spare = std::fs::File::open("/dev/null").ok();
    }

    /// True if resources are short since `since`, and that is
    /// [`MOST_PARKED`] or longer ago while a route leads back to the
    /// loop, or [`MOST_SHORT`] or longer ago.
    pub(super) fn stuck(&self, since: Option<u64>) -> bool {
        let Some(since) = since else {
            return false;
        };
        let lasted = Duration::from_nanos(self.clock.now().saturating_sub(since));
        lasted >= MOST_SHORT || (self.loops > 0 && lasted >= MOST_PARKED)
    }

    /// Stops accepting for [`ACCEPT_PAUSE`] after `what` failed with `err`,
    /// and says so once per shortage.
    pub(super) fn wait_for_resources(&mut self, what: &str, err: &io::Error) {
        let now = self.clock.now();
        if self.shortage_since.is_none() {
            self.shortage_since = Some(now);
            let news = {
                let mut turns = lock(&self.proxy_loops.admission);
                let news = turns.line.is_empty();
                turns.get_in_line(self.place);
                news
            };
            if news {
                self.say(&format!(
                    "shape: {what}: {}; new connections wait, tried again every {ACCEPT_PAUSE:?}",
                    one_line(err)
                ));
            }
        }
        self.accept_resumes = Some(now + ACCEPT_PAUSE.as_nanos() as u64);
    }

    /// True if this loop may admit clients now: no loop of its proxy is
    /// short of descriptors, or it is this loop's turn. Otherwise the
    /// loop gets in line, and is woken when its turn comes.
    pub(super) fn may_admit(&self) -> bool {
        let mut turns = lock(&self.proxy_loops.admission);
        match turns.line.front() {
            None => true,
            Some(&front) if front == self.place => true,
            Some(_) => {
                turns.get_in_line(self.place);
                false
            }
        }
    }

    /// After this loop admitted a client while descriptors are short: if
    /// another loop is in line, it takes its turn, this one goes to the
    /// back of the line, and true is returned.
    pub(super) fn pass_turn(&self) -> bool {
        let mut turns = lock(&self.proxy_loops.admission);
        if turns.line.len() < 2 || turns.line.front() != Some(&self.place) {
            return false;
        }
        turns.line.rotate_left(1);
        turns.hand_to_front();
        true
    }

    /// Everything that waited for resources on this loop got in: it
    /// leaves the line, the next loop in it takes its turn, and once the
    /// line is empty a later shortage is news again.
    pub(super) fn shortage_over(&mut self) {
        self.shortage_since = None;
        let mut turns = lock(&self.proxy_loops.admission);
        let had_turn = turns.line.front() == Some(&self.place);
        turns.line.retain(|&place| place != self.place);
        if had_turn {
            turns.hand_to_front();
        }
    }
}
