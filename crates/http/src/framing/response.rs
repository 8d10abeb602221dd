//! The responses on a stream from a server, each matched to the request
//! it answers, in order: what a request asked (`HEAD`, `CONNECT`) says
//! whether its answer has a body, and an interim answer (`100 Continue`)
//! comes before the final one.

use super::body::Body;
use super::{
    Declared, Framed, FramerAt, Framing, MOST_HEAD, MOST_HEADERS, Opaque, declared, has_token,
};
use std::collections::VecDeque;

/// A response's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// True for a 1xx answer other than 101: the final one follows.
    pub interim: bool,
    pub framing: Framing,
    /// True if the server closes the connection after this answer.
    pub close: bool,
}

/// What a request asked that frames its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestKind {
    /// `HEAD`: the answer has no body, whatever its fields say.
    pub head: bool,
    /// `CONNECT`: a 2xx answer turns the connection into a tunnel.
    pub connect: bool,
}

/// Follows the responses a server sends on one connection.
#[derive(Debug)]
pub struct ResponseFramer {
    /// What each request not yet answered asked, oldest first.
    asked: VecDeque<RequestKind>,
    state: FramerAt,
}

impl Default for ResponseFramer {
    fn default() -> Self {
        ResponseFramer {
            asked: VecDeque::new(),
            state: FramerAt::Head,
        }
    }
}

impl ResponseFramer {
    /// How many of the bytes to come need not be shown to the framer
    /// (see [`ResponseFramer::went_by`]): what is left of a body of known length, or
    /// everything once the stream is followed no further.
    pub fn unseen(&self) -> u64 {
        self.state.unseen()
    }

    /// Notes that `len` bytes of those [`ResponseFramer::unseen`] allowed went by
    /// unseen (spliced).
    pub fn went_by(&mut self, len: u64) {
        self.state.went_by(len)
    }

    /// Notes a request sent on to the server, whose answer comes in turn.
    pub fn expect(&mut self, asked: RequestKind) {
        self.asked.push_back(asked);
    }

    /// True between answers: where an answer of shape's may go.
    pub fn between(&self) -> bool {
        self.state == FramerAt::Head
    }

    /// True if the next bytes are an answer's content, not the framing of
    /// its chunks: what a client counts as its body.
    pub fn at_content(&self) -> bool {
        self.state.at_content()
    }

    /// How many requests sent on are not answered yet.
    pub fn waiting(&self) -> usize {
        self.asked.len()
    }

    /// What the first bytes of `buf` (those not yet taken) are; the caller
    /// takes exactly the bytes the step names before it asks again.
    pub fn step(&mut self, buf: &[u8]) -> Framed<ResponseHead> {
        // An answer no request was seen for (a 408 before a close) is
        // framed as a GET's.
        let kind = self.asked.front().copied().unwrap_or_default();
        let asked = &mut self.asked;
        self.state.step(
            buf,
            |buf| head(buf, kind),
            |head| {
                if head.interim {
                    return FramerAt::Head;
                }
                asked.pop_front();
                let connected = kind.connect && (200..300).contains(&head.status);
                match head.status == 101 || connected {
                    true => FramerAt::Tunnel,
                    false => FramerAt::Body(Body::new(head.framing)),
                }
            },
        )
    }
}

/// The response head at the start of `buf`, answering a request that
/// asked `asked`.
fn head(buf: &[u8], asked: RequestKind) -> Framed<ResponseHead> {
    let mut fields = [httparse::EMPTY_HEADER; MOST_HEADERS];
    let mut response = httparse::Response::new(&mut fields);
    let len = match response.parse(&buf[..buf.len().min(MOST_HEAD)]) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return super::unfinished(buf, None),
        Err(err) => return super::unfinished(buf, Some(err)),
    };
    let status = response.code.unwrap_or(0);
    let interim = (100..200).contains(&status) && status != 101;
    let bodiless = asked.head || interim || status == 101 || status == 204 || status == 304;
    let framing = match declared(response.headers) {
        _ if bodiless => Framing::Empty,
        Declared::Framed(framing) => framing,
        Declared::Unstated | Declared::OtherCoding => Framing::UntilClose,
        Declared::Malformed => return Framed::Opaque(Opaque::Malformed),
    };
    let close = match response.version.unwrap_or(1) {
        0 => !has_token(response.headers, "connection", "keep-alive"),
        _ => has_token(response.headers, "connection", "close"),
    } || framing == Framing::UntilClose;
    Framed::Head(
        ResponseHead {
            status,
            interim,
            framing,
            close,
        },
        len,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every step a framer expecting `asked` takes over `wire` given
    /// whole.
    fn steps(asked: &[RequestKind], wire: &[u8]) -> Vec<String> {
        let mut framer = ResponseFramer::default();
        asked.iter().for_each(|asked| framer.expect(*asked));
        let mut at = 0;
        let mut said = Vec::new();
        loop {
            match framer.step(&wire[at..]) {
                Framed::Head(head, len) => {
                    said.push(format!("{}", head.status));
                    at += len;
                }
                Framed::Body(len) => {
                    said.push(format!("body {len}"));
                    at += len;
                }
                Framed::End => said.push("end".into()),
                Framed::NeedMore => return said,
                Framed::Opaque(why) => {
                    said.push(format!("opaque: {why}"));
                    return said;
                }
            }
        }
    }

    const GET: RequestKind = RequestKind {
        head: false,
        connect: false,
    };

    #[test]
    fn answers_in_order_with_bodies_only_where_there_are_some() {
        let head = RequestKind { head: true, ..GET };
        let wire = b"HTTP/1.1 100 Continue\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\
HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n\
HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n\
HTTP/1.1 200 OK\r\n\r\nuntil the close";
        assert_eq!(
            steps(&[GET, head, GET, GET], wire),
            [
                "100", "200", "body 2", "end", "200", "end", "304", "end", "200", "body 15"
            ]
        );
    }

    #[test]
    fn a_switch_or_a_connect_is_a_tunnel() {
        assert_eq!(
            steps(
                &[GET],
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81"
            ),
            ["101", "opaque: a tunnel (CONNECT or Upgrade)"]
        );
        let connect = RequestKind {
            connect: true,
            ..GET
        };
        assert_eq!(
            steps(
                &[connect],
                b"HTTP/1.1 200 Connection established\r\n\r\n\x16\x03"
            ),
            ["200", "opaque: a tunnel (CONNECT or Upgrade)"]
        );
        assert_eq!(
            steps(
                &[connect],
                b"HTTP/1.1 407 Proxy Auth\r\nContent-Length: 0\r\n\r\n"
            ),
            ["407", "end"]
        );
    }
}
