//! How another thread reaches a running datagram proxy (`--serve`'s API,
//! whose toxics change while it runs): new impairments for both ways, or
//! an end, each taken at the proxy's next turn, which the asking wakes.

use super::netem::Impairment;
use mio::Waker;
use std::sync::{Arc, Mutex};

/// What was asked of the proxy since its last turn.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Client to upstream, then back.
    pub(super) ways: Option<[Impairment; 2]>,
    pub(super) stop: bool,
}

/// A running proxy, as another thread reaches it.
#[derive(Clone)]
pub struct Handle {
    pub(super) waker: Arc<Waker>,
    pub(super) asked: Arc<Mutex<Pending>>,
}

impl Handle {
    /// Impairs both ways as `ways` says from now on (client to upstream,
    /// then back); what is queued and held stays.
    pub fn retune(&self, ways: [Impairment; 2]) {
        shape_leaves::lock::lock(&self.asked).ways = Some(ways);
        let _ = self.waker.wake();
    }

    /// Wakes the proxy, to look at its buckets' settings again.
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// Ends the proxy: its `serve` returns at its next turn, and its
    /// sockets close when it is dropped.
    pub fn stop(&self) {
        shape_leaves::lock::lock(&self.asked).stop = true;
        let _ = self.waker.wake();
    }
}
