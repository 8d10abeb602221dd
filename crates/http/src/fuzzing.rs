//! HTTP/1.x framing, and one connection's exchange, as fuzz targets.
//!
//! Framing: any bytes, fed to a request framer
//! and a response framer in pieces of a size the first byte picks, as a
//! client or a server might send them. Neither may take a byte it was not
//! given, stall on bytes it was given, or panic; whatever it follows, it
//! follows to the end of what came.

use crate::framing::{Framed, RequestFramer, ResponseFramer};

/// Frames `data` both ways.
pub fn framing(data: &[u8]) {
    let Some((&cut, wire)) = data.split_first() else {
        return;
    };
    let piece = usize::from(cut).max(1);
    let mut requests = RequestFramer::default();
    walk(wire, piece, |buf| requests.step(buf).map_head(|_| ()));
    let mut responses = ResponseFramer::default();
    // Answers no request was seen for are framed as a GET's.
    walk(wire, piece, |buf| responses.step(buf).map_head(|_| ()));
}

/// Steps through `wire`, given `piece` bytes more each time more is
/// needed, checking that no step takes more than it was given.
fn walk(wire: &[u8], piece: usize, mut step: impl FnMut(&[u8]) -> Framed<()>) {
    let (mut at, mut had) = (0, 0);
    // Each step takes a byte or more, or ends a message (at most one end
    // per byte and per piece), or asks for more: this bounds a walk.
    for _ in 0..4 * wire.len() + 16 {
        match step(&wire[at..had]) {
            Framed::Head(_, len) | Framed::Body(len) => {
                assert!(len <= had - at, "took {len} of {} bytes", had - at);
                assert!(len > 0 || had == at, "took nothing of {} bytes", had - at);
                at += len;
            }
            Framed::End => {}
            Framed::NeedMore if had < wire.len() => had = (had + piece).min(wire.len()),
            Framed::NeedMore | Framed::Opaque(_) => return,
        }
    }
    panic!("{} bytes were not stepped through", wire.len());
}

/// One connection's exchange as a fuzz target: the first byte picks the
/// size of the pieces and the rule (an answer, a cut, a reset, a stall or
/// a delay to every other request); the rest is handed over in pieces,
/// to the client's side and the server's in turn, as a proxy would. No
/// input may panic, name bytes it was not given, or keep more than the
/// bounds allow.
pub fn exchange(data: &[u8]) {
    use crate::exchange::{Cut, Exchange, Messages};
    use std::sync::Arc;
    let Some((&choice, wire)) = data.split_first() else {
        return;
    };
    let mut exchange = Exchange::new(Arc::new(rule_of_choice(choice)), choice & 0x80 != 0);
    let piece = usize::from(choice % 61) + 1;
    for (turn, bytes) in wire.chunks(piece).enumerate() {
        let side = [Messages::Requests, Messages::Responses][turn % 2];
        let (buffer, cuts) = match side {
            Messages::Requests => exchange.requests(bytes.to_vec(), turn as u64),
            Messages::Responses => exchange.responses(bytes.to_vec()),
        };
        for cut in cuts.iter().chain(&exchange.due()) {
            if let Cut::Pass(range) = cut {
                assert!(range.end <= buffer.len(), "{range:?} of {}", buffer.len());
            }
        }
        // Bytes wait for a head or a line, never more than its bound.
        let most = crate::framing::MOST_HEAD + piece;
        assert!(
            exchange.kept_len() <= 2 * most,
            "{} kept",
            exchange.kept_len()
        );
    }
    let _ = exchange.flush(Messages::Requests);
    let _ = exchange.flush(Messages::Responses);
}

/// The rule a fuzz target's `choice` byte picks: one fault of each kind
/// (an answer, a gRPC status, a cut, a reset, a stall, a delay), done to
/// every other request.
pub fn rule_of_choice(choice: u8) -> crate::rule::LiveRule {
    use crate::answer::{AnswerStatus, GrpcStatus, InjectedAnswer};
    use crate::rule::{HttpFault, HttpRule, LiveRule};
    use crate::select::Selection;
    let fault = match choice % 6 {
        0 => HttpFault::Answer(InjectedAnswer {
            status: AnswerStatus {
                code: 503,
                body: b"busy".to_vec(),
            },
            fields: Vec::new(),
        }),
        1 => HttpFault::Grpc(GrpcStatus {
            code: 14,
            message: "down".into(),
        }),
        2 => HttpFault::CutAfter(u64::from(choice)),
        3 => HttpFault::Reset,
        4 => HttpFault::Stall,
        _ => HttpFault::Delay(std::time::Duration::from_millis(20)),
    };
    let selection = Selection {
        every: Some(2),
        ..Selection::default()
    };
    LiveRule::new(Some(HttpRule { selection, fault }), 7, 0)
}
