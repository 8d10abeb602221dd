//! The requests on a stream from a client: each head, as the rules read
//! it, then its body, framed as the head declares.

use super::body::Body;
use super::{
    Declared, Framed, FramerAt, Framing, MOST_HEAD, MOST_HEADERS, Opaque, declared, has_token,
};

/// A request's head, as the rules read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    /// The request target, as sent: `/pay/42?x=1`.
    pub target: String,
    /// HTTP/1.`minor`.
    pub minor: u8,
    /// Each field's name as sent, and its value.
    pub headers: Vec<(String, Vec<u8>)>,
    pub framing: Framing,
    /// True if the client asked for the connection to close after the
    /// answer: `Connection: close`, or HTTP/1.0 without keep-alive.
    pub close: bool,
    /// True if the client waits for `100 Continue` before its body.
    pub expects_continue: bool,
}

impl RequestHead {
    /// The value of the first field called `name`, whatever its case.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(given, _)| given.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_slice())
    }

    /// The target's path, without its query; of a target in absolute
    /// form (`http://host/pay/1`, as sent to a forward proxy), the path
    /// alone.
    pub fn path(&self) -> &str {
        let target = match self.target.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("/", |at| &rest[at..]),
            None => &self.target,
        };
        target.split(['?', '#']).next().unwrap_or("")
    }

    /// True for a request whose answer has no body (`HEAD`).
    pub fn is_head(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }

    /// True for `CONNECT`, which a 2xx answer turns into a tunnel.
    pub fn is_connect(&self) -> bool {
        self.method.eq_ignore_ascii_case("CONNECT")
    }

    /// True if it asks to leave HTTP/1.1 for another protocol (`Upgrade`)
    /// or for a tunnel (`CONNECT`): the server's 101, or its 2xx to a
    /// CONNECT, switches; any other answer keeps the connection HTTP.
    pub fn switches(&self) -> bool {
        self.is_connect() || upgrades(self)
    }

    /// True if it asks to leave HTTP/1.1 for HTTP/2 over cleartext
    /// (`Upgrade: h2c`).
    pub fn asks_h2c(&self) -> bool {
        self.headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("upgrade"))
            .filter_map(|(_, value)| std::str::from_utf8(value).ok())
            .flat_map(|value| value.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("h2c"))
    }

    /// The head as sent, but without the upgrade to HTTP/2 over
    /// cleartext: no `Upgrade` or `HTTP2-Settings` fields, and `Connection`
    /// without their tokens (RFC 9110, 7.8: a server may ignore an
    /// upgrade, and the exchange goes on in HTTP/1.1).
    pub fn without_upgrade(&self) -> Vec<u8> {
        let mut head = format!("{} {} HTTP/1.{}\r\n", self.method, self.target, self.minor);
        for (name, value) in &self.headers {
            if ["upgrade", "http2-settings"]
                .iter()
                .any(|gone| name.eq_ignore_ascii_case(gone))
            {
                continue;
            }
            let value = String::from_utf8_lossy(value);
            if name.eq_ignore_ascii_case("connection") {
                let kept: Vec<&str> = (value.split(','))
                    .map(str::trim)
                    .filter(|token| {
                        !["upgrade", "http2-settings"]
                            .iter()
                            .any(|gone| token.eq_ignore_ascii_case(gone))
                    })
                    .collect();
                if !kept.is_empty() {
                    head.push_str(&format!("{name}: {}\r\n", kept.join(", ")));
                }
                continue;
            }
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        head.into_bytes()
    }
}

/// Follows the requests a client sends on one connection.
#[derive(Debug)]
pub struct RequestFramer {
    state: FramerAt,
}

impl Default for RequestFramer {
    fn default() -> Self {
        RequestFramer {
            state: FramerAt::Head,
        }
    }
}

impl RequestFramer {
    /// How many of the bytes to come need not be shown to the framer
    /// (see [`RequestFramer::went_by`]): what is left of a body of known length, or
    /// everything once the stream is followed no further.
    pub fn unseen(&self) -> u64 {
        self.state.unseen()
    }

    /// Notes that `len` bytes of those [`RequestFramer::unseen`] allowed went by
    /// unseen (spliced).
    pub fn went_by(&mut self, len: u64) {
        self.state.went_by(len)
    }

    /// Takes `head`, just framed, as one that does not switch (yet): its
    /// body follows, not a tunnel. For a request sent without its upgrade
    /// (see [`RequestHead::without_upgrade`]), answered in the server's
    /// place, or whose server has not said it switches.
    pub fn declined_upgrade(&mut self, head: &RequestHead) {
        self.state = FramerAt::Body(Body::new(head.framing));
    }

    /// What the first bytes of `buf` (those not yet taken) are; the caller
    /// takes exactly the bytes the step names before it asks again.
    pub fn step(&mut self, buf: &[u8]) -> Framed<RequestHead> {
        self.state.step(buf, head, |head| {
            match head.is_connect() || upgrades(head) {
                true => FramerAt::Tunnel,
                false => FramerAt::Body(Body::new(head.framing)),
            }
        })
    }
}

/// True if `head` asks to leave HTTP/1.1 for another protocol (a
/// WebSocket): the server's 101 turns the connection into a tunnel.
fn upgrades(head: &RequestHead) -> bool {
    head.header("upgrade").is_some()
        && head
            .header("connection")
            .and_then(|value| std::str::from_utf8(value).ok())
            .is_some_and(|value| {
                value
                    .split(',')
                    .any(|part| part.trim().eq_ignore_ascii_case("upgrade"))
            })
}

/// The request head at the start of `buf`, read by httparse.
fn head(buf: &[u8]) -> Framed<RequestHead> {
    let mut fields = [httparse::EMPTY_HEADER; MOST_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    let len = match request.parse(&buf[..buf.len().min(MOST_HEAD)]) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return super::unfinished(buf, None),
        Err(err) => return super::unfinished(buf, Some(err)),
    };
    let framing = match declared(request.headers) {
        Declared::Framed(framing) => framing,
        Declared::Unstated => Framing::Empty,
        Declared::OtherCoding | Declared::Malformed => return Framed::Opaque(Opaque::Malformed),
    };
    let minor = request.version.unwrap_or(1);
    let close = match minor {
        0 => !has_token(request.headers, "connection", "keep-alive"),
        _ => has_token(request.headers, "connection", "close"),
    };
    let head = RequestHead {
        method: request.method.unwrap_or("").to_string(),
        target: request.path.unwrap_or("").to_string(),
        minor,
        expects_continue: has_token(request.headers, "expect", "100-continue"),
        headers: request
            .headers
            .iter()
            .map(|field| (field.name.to_string(), field.value.to_vec()))
            .collect(),
        framing,
        close,
    };
    Framed::Head(head, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every step a framer takes over `wire` given whole, bodies summed.
    fn steps(wire: &[u8]) -> Vec<String> {
        let mut framer = RequestFramer::default();
        let mut at = 0;
        let mut said = Vec::new();
        loop {
            match framer.step(&wire[at..]) {
                Framed::Head(head, len) => {
                    said.push(format!("{} {}", head.method, head.target));
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

    #[test]
    fn pipelined_requests_are_each_a_head_a_body_and_an_end() {
        let wire = b"POST /pay HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello\
GET /x?y=1 HTTP/1.1\r\nHost: a\r\n\r\n\
PUT /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
GET /half HTTP/1.1\r\nHo";
        assert_eq!(
            steps(wire),
            [
                "POST /pay",
                "body 5",
                "end",
                "GET /x?y=1",
                "end",
                "PUT /up",
                "body 3",
                "body 3",
                "body 2",
                "body 3",
                "body 2",
                "end"
            ]
        );
    }

    #[test]
    fn what_is_not_http_or_cannot_be_framed_passes_untouched() {
        assert_eq!(
            steps(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
            ["opaque: not HTTP/1.x"]
        );
        assert_eq!(
            steps(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            ["opaque: not HTTP/1.x"]
        );
        assert_eq!(
            steps(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            ["opaque: a message framed in a way that cannot be trusted"]
        );
        let many: String = (0..=MOST_HEADERS)
            .map(|n| format!("X-{n}: 1\r\n"))
            .collect();
        assert_eq!(
            steps(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()),
            ["opaque: a head or line past the bounds"]
        );
    }

    #[test]
    fn a_tunnel_is_followed_no_further_after_its_head() {
        let wire =
            b"GET /chat HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello";
        assert_eq!(
            steps(wire),
            ["GET /chat", "opaque: a tunnel (CONNECT or Upgrade)"]
        );
        assert_eq!(
            steps(b"CONNECT a:443 HTTP/1.1\r\n\r\n\x16\x03"),
            ["CONNECT a:443", "opaque: a tunnel (CONNECT or Upgrade)"]
        );
    }

    #[test]
    fn a_head_says_what_the_rules_read() {
        let mut framer = RequestFramer::default();
        let Framed::Head(head, _) = framer
            .step(b"GET /pay/42?x=1 HTTP/1.0\r\nX-Chaos: hang\r\nExpect: 100-continue\r\n\r\n")
        else {
            panic!("no head");
        };
        assert_eq!(head.path(), "/pay/42");
        assert_eq!(head.header("x-chaos"), Some(&b"hang"[..]));
        assert!(head.close && head.expects_continue && !head.is_head());
    }

    /// Requests with random bodies, each framed by a length or in chunks.
    fn wire_of(bodies: &[(Vec<u8>, bool)]) -> Vec<u8> {
        let mut wire = Vec::new();
        for (n, (body, chunked)) in bodies.iter().enumerate() {
            match chunked {
                false => wire.extend(
                    format!(
                        "POST /{n} HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    )
                    .as_bytes(),
                ),
                true => wire.extend(
                    format!("POST /{n} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").as_bytes(),
                ),
            }
            match chunked {
                false => wire.extend(body),
                true => {
                    for piece in body.chunks(7) {
                        wire.extend(format!("{:x}\r\n", piece.len()).as_bytes());
                        wire.extend(piece);
                        wire.extend(b"\r\n");
                    }
                    wire.extend(b"0\r\n\r\n");
                }
            }
        }
        wire
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_stepped_through_without_a_panic_or_an_overreach(
            wire in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            cut in 1usize..64,
        ) {
            let mut framer = RequestFramer::default();
            let (mut at, mut had) = (0, 0);
            for _ in 0..10_000 {
                match framer.step(&wire[at..had]) {
                    Framed::Head(_, len) | Framed::Body(len) => {
                        proptest::prop_assert!(len <= had - at);
                        at += len;
                    }
                    Framed::End => {}
                    Framed::NeedMore if had < wire.len() => had = (had + cut).min(wire.len()),
                    Framed::NeedMore | Framed::Opaque(_) => break,
                }
            }
        }

        #[test]
        fn requests_cut_anywhere_are_found_whole_and_in_order(
            bodies in proptest::collection::vec(
                (proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), proptest::prelude::any::<bool>()),
                1..6,
            ),
            cut in 1usize..50,
        ) {
            let wire = wire_of(&bodies);
            let mut framer = RequestFramer::default();
            let (mut at, mut had) = (0, 0);
            let mut found: Vec<String> = Vec::new();
            loop {
                match framer.step(&wire[at..had]) {
                    Framed::Head(head, len) => {
                        found.push(head.target);
                        at += len;
                    }
                    Framed::Body(len) => at += len,
                    Framed::End => {}
                    Framed::NeedMore if had < wire.len() => had = (had + cut).min(wire.len()),
                    step => {
                        proptest::prop_assert_eq!(step, Framed::NeedMore);
                        break;
                    }
                }
            }
            proptest::prop_assert_eq!(at, wire.len());
            let targets: Vec<String> = (0..bodies.len()).map(|n| format!("/{n}")).collect();
            proptest::prop_assert_eq!(found, targets);
        }
    }
}
