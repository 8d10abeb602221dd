//! One proxied connection: a client, its server, and a [`Direction`] each
//! way that reads, pays, holds and writes.

use super::Shaping;
use super::stream::Stream;
use crate::chunk::chunk_size;
use crate::control::Bucket;
use crate::slowlink::{Line, SlowLink};
use shape_bucket::{Clock, Reservation};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest chunk a direction reads at once.
const BUFFER: usize = 64 * 1024;
/// Which end of a connection something happened at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Client,
    Server,
}

/// What ended a connection: the end that failed, and how.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) end: End,
    pub(super) err: io::Error,
}

/// One direction of a connection: bytes read from one side wait for their
/// tokens, then in the delay line for their release time, then go out to
/// the other side.
pub(super) struct Direction {
    /// The end read from and the end written to.
    ends: (End, End),
    line: Line,
    /// A chunk read whose tokens are reserved but not yet covered.
    unpaid: Option<(Vec<u8>, Reservation)>,
    /// A due chunk being written, and how much of it is out.
    sending: Option<(Vec<u8>, usize)>,
    ended: bool,
    shut: bool,
}

impl Direction {
    /// A direction from `from` to `to`, its jitter drawn from `seed`.
    pub(super) fn new(link: &SlowLink, (from, to): (End, End), seed: u64) -> Direction {
        Direction {
            ends: (from, to),
            line: link.line(seed),
            unpaid: None,
            sending: None,
            ended: false,
            shut: false,
        }
    }

    pub(super) fn done(&self) -> bool {
        self.shut
    }

    /// Moves bytes from `from` to `to` until nothing more can move now:
    /// each side would block, or tokens, release times or buffer room are
    /// short. Returns when to step again if no event comes first: when
    /// tokens will be covered or a chunk is due.
    pub(super) fn step(
        &mut self,
        from: &mut Stream,
        to: &mut Stream,
        bucket: &Bucket,
        link: &SlowLink,
        forwarded: &AtomicU64,
    ) -> Result<Option<u64>, Failure> {
        let (from_end, to_end) = self.ends;
        let at = |end| move |err| Failure { end, err };
        // The deadline comes from the same look at the bucket that found
        // the tokens short: asked again later, the tokens might be covered
        // by then, and nothing would come back for the chunk.
        let tokens = loop {
            let sent = self
                .send_due(to, bucket.clock().now(), forwarded)
                .map_err(at(to_end))?;
            let (paid, tokens) = self.settle(bucket);
            let read = self.read(from, bucket, link).map_err(at(from_end))?;
            if !(sent || paid || read) {
                break tokens;
            }
        };
        if self.ended && self.unpaid.is_none() && self.sending.is_none() && self.line.is_empty() {
            if !self.shut {
                to.shutdown_write().map_err(at(to_end))?;
                self.shut = true;
            }
            return Ok(None);
        }
        // While a write is blocked, the next release waits for writability.
        let release = self
            .sending
            .is_none()
            .then(|| self.line.next_release())
            .flatten();
        Ok(earliest(tokens, release))
    }

    /// Writes what is due at `now` until the output would block. Returns
    /// whether anything went out.
    fn send_due(&mut self, to: &mut Stream, now: u64, forwarded: &AtomicU64) -> io::Result<bool> {
        let mut progress = false;
        loop {
            if self.sending.is_none() {
                self.sending = self.line.pop_due(now).map(|chunk| (chunk, 0));
            }
            let Some((chunk, out)) = &mut self.sending else {
                return Ok(progress);
            };
            match to.write(&chunk[*out..]) {
                Ok(n) => {
                    *out += n;
                    forwarded.fetch_add(n as u64, Ordering::Relaxed);
                    progress = true;
                    if *out == chunk.len() {
                        let (chunk, _) = self.sending.take().expect("just written from");
                        self.line.done_with(chunk);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(progress),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Puts the chunk read into the line once its tokens are covered.
    /// Returns whether it went in, and else when its tokens will be
    /// covered, if a chunk waits.
    fn settle(&mut self, bucket: &Bucket) -> (bool, Option<u64>) {
        let Some((_, paid)) = &self.unpaid else {
            return (false, None);
        };
        if let Some(deadline) = bucket.deadline(paid) {
            return (false, Some(deadline));
        }
        let (chunk, _) = self.unpaid.take().expect("checked above");
        self.line.push(chunk, bucket.clock().now());
        (true, None)
    }

    /// Reads a chunk, if none waits for tokens and the buffer has room, and
    /// reserves its tokens. Returns whether anything was read.
    fn read(&mut self, from: &mut Stream, bucket: &Bucket, link: &SlowLink) -> io::Result<bool> {
        if self.unpaid.is_some() || self.ended {
            return Ok(false);
        }
        let (limit, burst) = bucket.limit_and_burst();
        let room = link.capacity(limit, burst).saturating_sub(self.line.held());
        let want = chunk_size(limit, burst)
            .min(link.max_chunk())
            .min(BUFFER)
            .min(usize::try_from(room).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(false);
        }
        let mut chunk = self.line.buffer(want);
        loop {
            match from.read(&mut chunk) {
                Ok(0) => {
                    self.line.recycle(chunk);
                    self.ended = true;
                    return Ok(true);
                }
                Ok(n) => {
                    chunk.truncate(n);
                    let paid = bucket.reserve(n as u64);
                    self.unpaid = Some((chunk, paid));
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.line.recycle(chunk);
                    return match e.kind() {
                        io::ErrorKind::WouldBlock => Ok(false),
                        _ => Err(e),
                    };
                }
            }
        }
    }
}

/// The earlier of two moments, either of which may be missing.
pub(super) fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A client, its server, both directions and their buckets.
pub(super) struct Connection {
    pub(super) client: Stream,
    pub(super) server: Stream,
    pub(super) up: Direction,
    pub(super) down: Direction,
    pub(super) buckets: (Arc<Bucket>, Arc<Bucket>),
    pub(super) wake_at: Option<u64>,
    /// Who it is, for messages: `connection from 127.0.0.1:41234`.
    pub(super) peer: String,
}

impl Connection {
    /// Steps both directions.
    pub(super) fn step(&mut self, link: &SlowLink, forwarded: &AtomicU64) -> Result<(), Failure> {
        let up = self.up.step(
            &mut self.client,
            &mut self.server,
            &self.buckets.0,
            link,
            forwarded,
        )?;
        let down = self.down.step(
            &mut self.server,
            &mut self.client,
            &self.buckets.1,
            link,
            forwarded,
        )?;
        self.wake_at = earliest(up, down);
        Ok(())
    }

    pub(super) fn done(&self) -> bool {
        self.up.done() && self.down.done()
    }

    /// Makes closing both sides a reset.
    pub(super) fn reset_on_close(&self) {
        self.client.reset_on_close();
        self.server.reset_on_close();
    }
}

/// The buckets for one connection: the shared pair, or a fresh pair with
/// the settings now in force.
pub(super) fn buckets(shaping: &Shaping) -> io::Result<(Arc<Bucket>, Arc<Bucket>)> {
    let [up, down] = shaping.adjuster.buckets() else {
        return Err(io::Error::other("a proxy needs a bucket per direction"));
    };
    if !shaping.per_connection {
        return Ok((up.clone(), down.clone()));
    }
    let own = |direction| {
        shaping
            .adjuster
            .follower(direction)
            .map_err(io::Error::other)
    };
    Ok((own(0)?, own(1)?))
}
