//! One connection's HTTP/1.x exchange as a proxy passes it: the requests
//! its client sends, framed and put to the rule, and the responses its
//! server sends, framed so that shape's own answers, resets and cuts take
//! their place in the requests' order.
//!
//! The proxy hands each way's bytes over as they come ([`Exchange::requests`],
//! [`Exchange::responses`]) and gets [`Cut`]s back: which bytes pass, in
//! order, and what comes between them. Bytes a framer must see whole (a
//! head, a chunk's size line) and that have not all come are kept here
//! until they have, at most [`MOST_HEAD`] of them. Bytes it need not see
//! (a body of known length, a stream it follows no further) may go by
//! unseen, spliced ([`Exchange::unseen`], [`Exchange::went_by`]).
//!
//! Each request is one turn, answered in order: sent on (its answer is
//! the server's), answered by shape, or a reset. An answer of shape's goes
//! out when the answers before it are out, never inside one.
//!
//! [`MOST_HEAD`]: crate::framing::MOST_HEAD

use crate::framing::{Opaque, RequestFramer, ResponseFramer};
use crate::rule::LiveRule;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

mod requests;
mod responses;

/// Which messages of the exchange: one direction of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Messages {
    /// The client's requests.
    Requests,
    /// The server's responses.
    Responses,
}

/// What becomes of the bytes handed over, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// These bytes of the buffer handed back pass on.
    Pass(Range<usize>),
    /// These bytes of shape's pass on here (an answer).
    Insert(Vec<u8>),
    /// What follows goes on no sooner than this moment.
    Hold(u64),
    /// The connection is reset here, once what came before is out.
    Reset,
    /// Nothing more passes this way: the other side's writing is shut
    /// once what came before is out, and nothing more is read.
    End,
    /// The client speaks HTTP/2 (its first bytes are the connection
    /// preface): the whole connection goes to an HTTP/2 relay, with the
    /// buffer handed back (all the client sent so far) and the server's
    /// first bytes ([`Exchange::held_from_server`]).
    Handoff,
}

/// What an HTTP/2 client sends first (RFC 9113, 3.4).
pub const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// One request's turn to be answered.
#[derive(Debug)]
enum Turn {
    /// Sent on: the server answers it, its body cut after so many bytes
    /// if a rule says so.
    Sent { cut_after: Option<u64> },
    /// Answered by shape with these bytes, and the connection closed after
    /// them if `close`.
    Answer { bytes: Vec<u8>, close: bool },
    /// The connection is reset in its turn.
    Reset,
}

/// One connection's HTTP exchange.
#[derive(Debug)]
pub struct Exchange {
    rule: Arc<LiveRule>,
    requests: RequestFramer,
    responses: ResponseFramer,
    turns: VecDeque<Turn>,
    /// Bytes of each side not yet whole enough to frame: requests, then
    /// responses.
    kept: [Vec<u8>; 2],
    /// Whether the current request's body is sent on (else dropped: shape
    /// answered it).
    sending_body: bool,
    /// Nothing more of the client's is sent on: a request stalled, was
    /// reset, or was answered with a close.
    dropping: bool,
    /// How many more bytes of the current response's body pass before it
    /// is cut.
    cut_left: Option<u64>,
    /// Nothing more of the server's passes: a cut, or a close after an
    /// answer.
    ended: bool,
    /// Why a side is followed no further, once it is: requests, responses.
    opaque: [Option<Opaque>; 2],
    /// Whether the client's first bytes said what it speaks: until they
    /// do, what the server sends first is held if it could be HTTP/2's
    /// preface, which must not reach a client that is handed over.
    classified: bool,
    /// Whether an HTTP/2 client is handed over, rather than passed
    /// untouched.
    http2: bool,
}

impl Exchange {
    /// The exchange of a connection under `rule`; with `http2`, an
    /// HTTP/2 client is handed over ([`Cut::Handoff`]), else it passes
    /// untouched.
    pub fn new(rule: Arc<LiveRule>, http2: bool) -> Exchange {
        Exchange {
            rule,
            requests: RequestFramer::default(),
            responses: ResponseFramer::default(),
            turns: VecDeque::new(),
            kept: [Vec::new(), Vec::new()],
            sending_body: true,
            dropping: false,
            cut_left: None,
            ended: false,
            opaque: [None, None],
            classified: false,
            http2,
        }
    }

    /// What the server sent before the client was found to speak HTTP/2,
    /// held back: for the relay the connection is handed to.
    pub fn held_from_server(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.kept[Messages::Responses as usize])
    }

    /// How many of the bytes to come on `side` may go by unseen, spliced:
    /// they pass untouched whatever they are. Nothing may while bytes are
    /// kept, or while they might be dropped or cut.
    pub fn unseen(&self, side: Messages) -> u64 {
        match side {
            Messages::Requests if self.opaque[0].is_some() => u64::MAX,
            Messages::Requests
                if self.kept[0].is_empty() && self.sending_body && !self.dropping =>
            {
                self.requests.unseen()
            }
            Messages::Responses if self.kept[1].is_empty() && self.cut_left.is_none() => {
                match self.ended {
                    true => 0,
                    false => self.responses.unseen(),
                }
            }
            _ => 0,
        }
    }

    /// Notes that `len` bytes on `side`, of those [`Exchange::unseen`]
    /// allowed, went by.
    pub fn went_by(&mut self, side: Messages, len: u64) {
        match side {
            Messages::Requests => self.requests.went_by(len),
            Messages::Responses => self.responses.went_by(len),
        }
    }

    /// The bytes of `side` kept to be framed, now that no more will come
    /// (the stream ended): they pass as they are, unless that side drops
    /// what comes. Without it, a stream that is not HTTP and ends in
    /// what could begin a head would lose its last bytes.
    pub fn flush(&mut self, side: Messages) -> (Vec<u8>, Vec<Cut>) {
        let kept = std::mem::take(&mut self.kept[side as usize]);
        let passes = match side {
            Messages::Requests => self.sending_body && !self.dropping,
            Messages::Responses => !self.ended,
        };
        match passes && !kept.is_empty() {
            true => {
                let len = kept.len();
                (kept, vec![Cut::Pass(0..len)])
            }
            false => (Vec::new(), Vec::new()),
        }
    }

    /// How many bytes both sides keep, waiting to be framed.
    pub fn kept_len(&self) -> usize {
        self.kept.iter().map(Vec::len).sum()
    }

    /// Why `side` is followed no further, if it is not.
    pub fn opaque(&self, side: Messages) -> Option<Opaque> {
        self.opaque[side as usize]
    }

    /// `bytes`, with any kept before them in front: the buffer the cuts
    /// of this call's name.
    fn with_kept(&mut self, side: Messages, bytes: Vec<u8>) -> Vec<u8> {
        let kept = &mut self.kept[side as usize];
        if kept.is_empty() {
            return bytes;
        }
        kept.extend_from_slice(&bytes);
        std::mem::take(kept)
    }

    /// Keeps `buffer[from..]` for the next call, and cuts it off.
    fn keep(&mut self, side: Messages, buffer: &mut Vec<u8>, from: usize) {
        self.kept[side as usize] = buffer[from..].to_vec();
        buffer.truncate(from);
    }
}

/// Adds `range` to `cuts`, joined to the pass before it if they meet.
fn pass(cuts: &mut Vec<Cut>, range: Range<usize>) {
    if range.is_empty() {
        return;
    }
    if let Some(Cut::Pass(last)) = cuts.last_mut() {
        if last.end == range.start {
            last.end = range.end;
            return;
        }
    }
    cuts.push(Cut::Pass(range));
}

#[cfg(test)]
mod tests;
