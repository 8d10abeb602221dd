//! The client's side: each request framed, put to the rule, and sent on,
//! held, answered or dropped as the rule decides; its body read to its
//! end before the next request is looked at.

use super::{Cut, Exchange, HTTP2_PREFACE, Messages, Turn, pass};
use crate::framing::{Framed, RequestHead, RequestKind};
use crate::rule::Decided;

impl Exchange {
    /// What becomes of `bytes` the client sent, come at `now`: the
    /// buffer the cuts name (with bytes kept from before in front), and
    /// the cuts. Bytes not named by a cut are dropped.
    pub fn requests(&mut self, bytes: Vec<u8>, now: u64) -> (Vec<u8>, Vec<Cut>) {
        let mut buffer = self.with_kept(Messages::Requests, bytes);
        let mut cuts = Vec::new();
        if !self.classified {
            let seen = buffer.len().min(HTTP2_PREFACE.len());
            match self.http2 && buffer[..seen] == HTTP2_PREFACE[..seen] {
                true if seen < HTTP2_PREFACE.len() => {
                    self.keep(Messages::Requests, &mut buffer, 0);
                    return (buffer, cuts);
                }
                true => {
                    self.classified = true;
                    cuts.push(Cut::Handoff);
                    return (buffer, cuts);
                }
                false => self.classified = !buffer.is_empty(),
            }
        }
        if self.opaque[0].is_some() {
            // The server switched protocols: a tunnel from here on.
            let len = buffer.len();
            pass(&mut cuts, 0..len);
            return (buffer, cuts);
        }
        let mut at = 0;
        while at < buffer.len() && !self.dropping {
            match self.requests.step(&buffer[at..]) {
                Framed::NeedMore => {
                    self.keep(Messages::Requests, &mut buffer, at);
                    break;
                }
                Framed::Head(head, len) => {
                    // HTTP/2 by upgrade is declined, as a server may, so
                    // that the rules meet each request in HTTP/1.1.
                    let h2c = head.asks_h2c();
                    if head.switches() {
                        // A tunnel only once the server says so: it may
                        // decline, or shape may answer in its place.
                        self.requests.declined_upgrade(&head);
                    }
                    if self.decide(&head, now, &mut cuts) {
                        match h2c {
                            true => cuts.push(Cut::Insert(head.without_upgrade())),
                            false => pass(&mut cuts, at..at + len),
                        }
                    }
                    at += len;
                }
                Framed::Body(len) => {
                    if self.sending_body {
                        pass(&mut cuts, at..at + len);
                    }
                    at += len;
                }
                Framed::End => self.sending_body = true,
                Framed::Opaque(why) => {
                    self.opaque[0].get_or_insert(why);
                    pass(&mut cuts, at..buffer.len());
                    at = buffer.len();
                }
            }
        }
        (buffer, cuts)
    }

    /// Puts `head` to the rule at `now` and takes its turn. Returns
    /// whether the head is sent on.
    fn decide(&mut self, head: &RequestHead, now: u64, cuts: &mut Vec<Cut>) -> bool {
        let sent = |cut_after| Turn::Sent { cut_after };
        let (turn, sent_on) = match self.rule.decide(head, now) {
            None => (sent(None), true),
            Some(Decided::Hold(until)) => {
                cuts.push(Cut::Hold(until));
                (sent(None), true)
            }
            Some(Decided::CutAfter(after)) => (sent(Some(after)), true),
            Some(Decided::Answer { bytes, close }) => {
                self.dropping |= close;
                (Turn::Answer { bytes, close }, false)
            }
            Some(Decided::Reset) => {
                self.dropping = true;
                (Turn::Reset, false)
            }
            Some(Decided::Stall) => {
                // Nothing more is sent on and nothing answers it: the
                // answers before it still go out.
                self.dropping = true;
                return false;
            }
        };
        if sent_on {
            self.responses.expect(RequestKind {
                head: head.is_head(),
                connect: head.is_connect(),
            });
        }
        self.sending_body = sent_on;
        self.turns.push_back(turn);
        sent_on
    }
}
