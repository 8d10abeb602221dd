//! HTTP rules on a proxy's connections: a route with an HTTP rule gives
//! each connection an [`HttpGate`], through which both its directions
//! pass what they take in (the requests up, the responses down). The gate
//! is [`shape_http::exchange`]'s: this module turns what it decides into
//! [`Piece`]s a direction puts in its line. Without the `http` feature
//! `left_out_http_gate.rs` stands in, and no route has a rule.

use super::connection::Piece;
use super::handoff::Handoff;
use shape_http::exchange::{Cut, Exchange, Messages};
use shape_http::rule::LiveRule;
use shape_impair::faults::Way;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The HTTP rule of a route, which each of its connections is put to.
#[derive(Clone)]
pub struct HttpRules {
    rule: Arc<LiveRule>,
    /// Whether a connection that is not HTTP was said yet: once a proxy.
    said_opaque: Arc<AtomicBool>,
    /// Where a connection whose client speaks HTTP/2 goes, if anywhere:
    /// without it, such a connection passes untouched.
    http2: Option<Arc<dyn Handoff>>,
}

impl HttpRules {
    pub fn new(rule: Arc<LiveRule>) -> HttpRules {
        HttpRules {
            rule,
            said_opaque: Arc::default(),
            http2: None,
        }
    }

    /// The same rules, which hand a connection whose client speaks HTTP/2
    /// to `relay`.
    pub fn handing_http2_to(mut self, relay: Arc<dyn Handoff>) -> HttpRules {
        self.http2 = Some(relay);
        self
    }

    /// The rule in force and its counts, in words.
    pub fn describe(&self) -> String {
        self.rule.describe()
    }

    /// A gate for a new connection; one whose client is a TCP socket
    /// (`tcp`) may be handed over if it speaks HTTP/2.
    pub(super) fn gate(&self, tcp: bool) -> HttpGate {
        let http2 = self.http2.clone().filter(|_| tcp);
        HttpGate {
            exchange: Exchange::new(self.rule.clone(), http2.is_some()),
            said_opaque: self.said_opaque.clone(),
            http2,
        }
    }
}

/// One connection's HTTP exchange, as its directions meet it.
pub(in crate::proxy) struct HttpGate {
    exchange: Exchange,
    said_opaque: Arc<AtomicBool>,
    http2: Option<Arc<dyn Handoff>>,
}

/// The side of the exchange a direction carries.
fn side(way: Way) -> Messages {
    match way {
        Way::Up => Messages::Requests,
        Way::Down => Messages::Responses,
    }
}

impl HttpGate {
    /// How many of the bytes to come `way` may splice, untouched.
    pub(in crate::proxy) fn unseen(&self, way: Way) -> u64 {
        self.exchange.unseen(side(way))
    }

    /// Notes that `len` bytes went by `way` spliced.
    pub(in crate::proxy) fn went_by(&mut self, way: Way, len: usize) {
        self.exchange.went_by(side(way), len as u64)
    }

    /// What becomes of `bytes` taken in `way` at `now`, in order.
    pub(in crate::proxy) fn take(&mut self, way: Way, bytes: Vec<u8>, now: u64) -> Vec<Piece> {
        let (buffer, cuts) = match way {
            Way::Up => self.exchange.requests(bytes, now),
            Way::Down => self.exchange.responses(bytes),
        };
        pieces(buffer, cuts)
    }

    /// What `way` kept to frame, now that its input ended.
    pub(in crate::proxy) fn flush(&mut self, way: Way) -> Vec<Piece> {
        let (buffer, cuts) = self.exchange.flush(side(way));
        pieces(buffer, cuts)
    }

    /// Shape's answers and resets whose turn has come, to go down after
    /// all that went before.
    pub(in crate::proxy) fn due(&mut self) -> Vec<Piece> {
        pieces(Vec::new(), self.exchange.due())
    }

    /// Where the connection goes now that its client spoke HTTP/2, and
    /// what the server sent first, held back.
    pub(in crate::proxy) fn http2(&mut self) -> Option<(Arc<dyn Handoff>, Vec<u8>)> {
        let relay = self.http2.clone()?;
        Some((relay, self.exchange.held_from_server()))
    }

    /// Why the connection is not followed as HTTP, the first time any of
    /// the proxy's connections is not: said once a proxy.
    pub(in crate::proxy) fn first_opaque(&self) -> Option<String> {
        let why = [Messages::Requests, Messages::Responses]
            .into_iter()
            .find_map(|side| self.exchange.opaque(side))
            .filter(|why| *why != shape_http::framing::Opaque::Tunnel)
            .filter(|_| !self.said_opaque.load(Ordering::Relaxed))?;
        (!self.said_opaque.swap(true, Ordering::Relaxed)).then(|| {
            format!(
                "{why}: passed untouched, as is any other connection of this proxy that HTTP \
                 rules cannot follow (said once)"
            )
        })
    }
}

/// `cuts` of `buffer` as pieces: a pass of the whole buffer keeps it.
fn pieces(mut buffer: Vec<u8>, cuts: Vec<Cut>) -> Vec<Piece> {
    match &cuts[..] {
        // The whole connection goes: nothing else is cut.
        [Cut::Handoff] => return vec![Piece::Handoff(buffer)],
        [Cut::Pass(range)] => {
            if range.start == 0 && range.end == buffer.len() {
                return vec![Piece::Bytes(buffer)];
            }
            buffer.truncate(range.end);
            buffer.drain(..range.start);
            return vec![Piece::Bytes(buffer)];
        }
        _ => {}
    }
    cuts.into_iter()
        .map(|cut| match cut {
            Cut::Pass(range) => Piece::Bytes(buffer[range].to_vec()),
            Cut::Insert(bytes) => Piece::Bytes(bytes),
            Cut::Hold(until) => Piece::Hold(until),
            Cut::Reset => Piece::Reset,
            Cut::End => Piece::End,
            // Comes alone, taken above.
            Cut::Handoff => Piece::Handoff(Vec::new()),
        })
        .collect()
}
