//! HTTP/1.x framing as a fuzz target: any bytes, fed to a request framer
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
