//! The server's side: each response framed and matched to the request it
//! answers; a response a rule cuts is cut; between responses, shape's
//! own answers and resets take their turns.

use super::{Cut, Exchange, Messages, Turn, pass};
use crate::framing::{Framed, Opaque};

impl Exchange {
    /// What becomes of `bytes` the server sent: the buffer the cuts name
    /// (with bytes kept from before in front), and the cuts. Bytes not
    /// named by a cut are dropped.
    pub fn responses(&mut self, bytes: Vec<u8>) -> (Vec<u8>, Vec<Cut>) {
        let mut buffer = self.with_kept(Messages::Responses, bytes);
        let mut cuts = Vec::new();
        if !self.classified && self.http2 && http2_settings_first(&buffer) {
            self.keep(Messages::Responses, &mut buffer, 0);
            return (buffer, cuts);
        }
        let mut at = 0;
        while at < buffer.len() && !self.ended {
            let content = self.responses.at_content();
            match self.responses.step(&buffer[at..]) {
                Framed::NeedMore => {
                    self.keep(Messages::Responses, &mut buffer, at);
                    break;
                }
                Framed::Head(head, len) => {
                    if !head.interim {
                        if let Some(Turn::Sent { cut_after }) = self.turns.front() {
                            self.cut_left = *cut_after;
                            self.turns.pop_front();
                        }
                    }
                    pass(&mut cuts, at..at + len);
                    at += len;
                }
                // A cut counts the body's content, as its reader does,
                // not the framing of its chunks.
                Framed::Body(len) => {
                    let passed = match self.cut_left {
                        Some(left) if content || left == 0 => len.min(clamp(left)),
                        _ => len,
                    };
                    pass(&mut cuts, at..at + passed);
                    at += len;
                    if let Some(left) = &mut self.cut_left {
                        *left -= if content { passed as u64 } else { 0 };
                        if passed < len {
                            cuts.push(Cut::End);
                            self.ended = true;
                        }
                    }
                }
                Framed::End => {
                    self.cut_left = None;
                    self.turns_between(&mut cuts);
                }
                Framed::Opaque(why) => {
                    self.opaque[1].get_or_insert(why);
                    if why == Opaque::Tunnel {
                        // The client follows its server into the tunnel.
                        self.opaque[0].get_or_insert(why);
                    }
                    pass(&mut cuts, at..buffer.len());
                    at = buffer.len();
                }
            }
        }
        if self.kept[1].is_empty() && !self.ended {
            self.ends_seen(&mut cuts);
        }
        (buffer, cuts)
    }

    /// Shape's answers and resets whose turn has come: those before which
    /// every answer is out. The caller puts them after all it was handed
    /// before.
    pub fn due(&mut self) -> Vec<Cut> {
        let held = !self.kept[1].is_empty();
        if held && self.classified {
            // What the server sent first, held until the client spoke,
            // which it did without HTTP/2.
            let (buffer, cuts) = self.responses(Vec::new());
            return cuts
                .into_iter()
                .map(|cut| match cut {
                    Cut::Pass(range) => Cut::Insert(buffer[range].to_vec()),
                    other => other,
                })
                .collect();
        }
        let mut cuts = Vec::new();
        if !held && !self.ended {
            self.ends_seen(&mut cuts);
        }
        cuts
    }

    /// Takes the end of a response whose last byte went by (which the
    /// framer says only when asked again), then the turns between
    /// responses.
    fn ends_seen(&mut self, cuts: &mut Vec<Cut>) {
        while self.responses.step(&[]) == Framed::End {
            self.cut_left = None;
        }
        if self.responses.between() {
            self.turns_between(cuts);
        }
    }

    /// The turns at the front that are shape's to answer, each in its
    /// place: answers and resets, up to the next request sent on.
    fn turns_between(&mut self, cuts: &mut Vec<Cut>) {
        while !self.ended {
            match self.turns.pop_front() {
                Some(Turn::Answer { bytes, close }) => {
                    cuts.push(Cut::Insert(bytes));
                    if close {
                        cuts.push(Cut::End);
                        self.ended = true;
                    }
                }
                Some(Turn::Reset) => {
                    cuts.push(Cut::Reset);
                    self.ended = true;
                }
                Some(sent) => {
                    self.turns.push_front(sent);
                    return;
                }
                None => return,
            }
        }
    }
}

/// `left` as a length in memory.
fn clamp(left: u64) -> usize {
    usize::try_from(left).unwrap_or(usize::MAX)
}

/// True if `bytes`, the first a server sent, could be HTTP/2's server
/// preface: a SETTINGS frame on stream 0 (RFC 9113, 3.4, 6.5), or too
/// few bytes to tell, within the bound of what is held. A server that
/// speaks first in another protocol (SMTP, MySQL, SSH) is not held.
fn http2_settings_first(bytes: &[u8]) -> bool {
    if bytes.len() > crate::framing::MOST_HEAD {
        return false;
    }
    let header = &bytes[..bytes.len().min(9)];
    let settings = [
        None,
        None,
        None,
        Some(0x04),
        None,
        Some(0),
        Some(0),
        Some(0),
        Some(0),
    ];
    header
        .iter()
        .zip(settings)
        .all(|(byte, wanted)| wanted.is_none_or(|wanted| *byte == wanted))
        && header.get(4).is_none_or(|flags| flags & !1 == 0)
}
