//! The `--remote` protocol: requests a running shape reads from its
//! control directory, and the answers a remote reads back.

use crate::control::protocol::{decode_answer, decode_request, encode_request};
use shape_leaves::counting::Counting;

/// A request read is sent on as it was read (a share's member passes it
/// on): written out and read again, it is the same request. Its change
/// is worked out for each kind of count, and an answer of any bytes is
/// read or refused in one line.
pub fn messages(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(request) = decode_request(&text) {
        let sent = encode_request(&request);
        let again = decode_request(&sent)
            .unwrap_or_else(|why| panic!("{text:?} is sent as {sent:?}, refused: {why}"));
        assert_eq!(again, request, "{text:?} is sent as {sent:?}");
        for counting in [Counting::Bytes, Counting::Lines, Counting::Datagrams] {
            let _ = request.adjustment(counting);
        }
    }
    if let Err(refused) = decode_answer(&text) {
        let _ = refused.to_string();
    }
}
