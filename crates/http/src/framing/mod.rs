//! Where each HTTP/1.x message begins and ends on a byte stream, as a
//! proxy sees it pass: heads read by httparse, bodies framed by rule
//! (Content-Length, chunked, or until the close), one step at a time over
//! whatever bytes have come. A framer never copies a body and never holds
//! bytes itself: it says what the next bytes of the caller's buffer are,
//! and the caller moves them on (or answers, or holds them).
//!
//! What is not HTTP that shape can follow (TLS, a database's protocol, a
//! head past the bounds, a tunnel after `CONNECT` or `Upgrade`) is
//! [`Framed::Opaque`]: from there the stream passes untouched.

mod body;
mod request;
mod response;

pub use request::{RequestFramer, RequestHead};
pub use response::{RequestKind, ResponseFramer, ResponseHead};

/// The most bytes a head may take, as `--serve`'s API allows.
pub const MOST_HEAD: usize = 64 << 10;
/// The most header fields a head may have.
pub const MOST_HEADERS: usize = 100;
/// The longest chunk-size line or trailer line of a chunked body.
pub const MOST_LINE: usize = 8 << 10;

/// What the next bytes of a stream are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framed<H> {
    /// Nothing can be said until more bytes come: a head, or a chunk's
    /// size line, is not whole yet.
    NeedMore,
    /// The next `len` bytes are a message's head.
    Head(H, usize),
    /// The next `len` bytes belong to the current message's body (a
    /// chunked body's size lines and trailers included).
    Body(usize),
    /// The current message ended where the bytes given begin.
    End,
    /// From here on, the stream is not HTTP that shape follows: every
    /// byte passes as it is.
    Opaque(Opaque),
}

impl<H> Framed<H> {
    /// The same step, with its head made into another.
    pub fn map_head<G>(self, make: impl FnOnce(H) -> G) -> Framed<G> {
        match self {
            Framed::NeedMore => Framed::NeedMore,
            Framed::Head(head, len) => Framed::Head(make(head), len),
            Framed::Body(len) => Framed::Body(len),
            Framed::End => Framed::End,
            Framed::Opaque(why) => Framed::Opaque(why),
        }
    }
}

/// Where a framer stands on its stream; the same for requests and
/// responses but for how a head is read and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FramerAt {
    Head,
    Body(body::Body),
    /// The head asked for a tunnel: nothing after it is followed.
    Tunnel,
    Opaque(Opaque),
}

impl FramerAt {
    /// What the first bytes of `buf` are: a head read by `head`, after
    /// which the stream stands where `after` says; a body; or nothing more
    /// to follow.
    fn step<H>(
        &mut self,
        buf: &[u8],
        head: impl FnOnce(&[u8]) -> Framed<H>,
        after: impl FnOnce(&H) -> FramerAt,
    ) -> Framed<H> {
        match *self {
            FramerAt::Opaque(why) => Framed::Opaque(why),
            FramerAt::Tunnel => {
                *self = FramerAt::Opaque(Opaque::Tunnel);
                Framed::Opaque(Opaque::Tunnel)
            }
            FramerAt::Body(mut body) => {
                let step = body.step(buf);
                *self = match step {
                    Framed::End => FramerAt::Head,
                    Framed::Opaque(why) => FramerAt::Opaque(why),
                    _ => FramerAt::Body(body),
                };
                step
            }
            FramerAt::Head if buf.is_empty() => Framed::NeedMore,
            FramerAt::Head => {
                let step = head(buf);
                *self = match &step {
                    Framed::Head(read, _) => after(read),
                    Framed::Opaque(why) => FramerAt::Opaque(*why),
                    _ => FramerAt::Head,
                };
                step
            }
        }
    }
}

impl FramerAt {
    /// How many of the bytes to come the framer need not see: what is
    /// left of a body of known length, or all of a stream it follows no
    /// further.
    fn unseen(&self) -> u64 {
        match self {
            FramerAt::Body(body::Body::Left(left)) => *left,
            FramerAt::Tunnel | FramerAt::Opaque(_) => u64::MAX,
            _ => 0,
        }
    }

    /// True if the bytes to come are a body's content: not a chunk's
    /// size line, the end of its data, or the trailers.
    fn at_content(&self) -> bool {
        matches!(
            self,
            FramerAt::Body(
                body::Body::Left(_)
                    | body::Body::UntilClose
                    | body::Body::Chunked(body::Chunk::Data(_))
            )
        )
    }

    /// Notes that `len` of the bytes [`FramerAt::unseen`] allowed went by.
    fn went_by(&mut self, len: u64) {
        if let FramerAt::Body(body::Body::Left(left)) = self {
            *left = left.saturating_sub(len);
        }
    }
}

/// Why a stream is followed no further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opaque {
    /// Its first bytes are not an HTTP/1.x message (TLS, another
    /// protocol, HTTP/2's preface).
    NotHttp,
    /// A head or a line past the bounds ([`MOST_HEAD`], [`MOST_HEADERS`],
    /// [`MOST_LINE`]).
    TooLarge,
    /// A message whose framing cannot be trusted: a Content-Length that
    /// is not a number, or two that differ, or a chunk size that does not
    /// parse.
    Malformed,
    /// A tunnel: after `CONNECT`, or an `Upgrade` (a WebSocket).
    Tunnel,
}

impl std::fmt::Display for Opaque {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Opaque::NotHttp => "not HTTP/1.x",
            Opaque::TooLarge => "a head or line past the bounds",
            Opaque::Malformed => "a message framed in a way that cannot be trusted",
            Opaque::Tunnel => "a tunnel (CONNECT or Upgrade)",
        })
    }
}

/// How a message's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunks, ended by a chunk of size 0 and the trailers.
    Chunked,
    /// Until the connection closes (a response only).
    UntilClose,
}

/// What a message's header fields say of its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Declared {
    Framed(Framing),
    /// Neither a Content-Length nor a transfer coding: a request has no
    /// body; a response's runs to the close.
    Unstated,
    /// A transfer coding that is not chunked last: a response's body runs
    /// to the close; a request cannot be framed.
    OtherCoding,
    /// A Content-Length that is not a number, or two that differ (RFC
    /// 9112, 6.3): nothing can be trusted.
    Malformed,
}

/// What `headers` declare of the body: chunked if the last transfer
/// coding is chunked, else the one Content-Length, else none.
fn declared(headers: &[httparse::Header<'_>]) -> Declared {
    let mut length: Option<u64> = None;
    let mut chunked = None;
    for header in headers {
        let Ok(value) = std::str::from_utf8(header.value) else {
            continue;
        };
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            let last = value.rsplit(',').next().unwrap_or("").trim();
            chunked = Some(last.eq_ignore_ascii_case("chunked"));
        } else if header.name.eq_ignore_ascii_case("content-length") {
            for part in value.split(',').map(str::trim) {
                let digits = !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit());
                match part.parse::<u64>() {
                    Ok(value) if digits && length.is_none_or(|known| known == value) => {
                        length = Some(value);
                    }
                    _ => return Declared::Malformed,
                }
            }
        }
    }
    match (chunked, length) {
        (Some(true), _) => Declared::Framed(Framing::Chunked),
        (Some(false), _) => Declared::OtherCoding,
        (None, None) => Declared::Unstated,
        (None, Some(0)) => Declared::Framed(Framing::Empty),
        (None, Some(length)) => Declared::Framed(Framing::Length(length)),
    }
}

/// Whether header `name` of `headers` holds `token` in its comma-separated
/// list (`Connection: keep-alive, Upgrade`).
fn has_token(headers: &[httparse::Header<'_>], name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|header| header.name.eq_ignore_ascii_case(name))
        .filter_map(|header| std::str::from_utf8(header.value).ok())
        .flat_map(|value| value.split(','))
        .any(|part| part.trim().eq_ignore_ascii_case(token))
}

/// A head that httparse could not read whole from `buf`, as a step: more
/// bytes needed, or the stream is followed no further.
fn unfinished<H>(buf: &[u8], error: Option<httparse::Error>) -> Framed<H> {
    match error {
        None if buf.len() >= MOST_HEAD => Framed::Opaque(Opaque::TooLarge),
        None => Framed::NeedMore,
        Some(httparse::Error::TooManyHeaders) => Framed::Opaque(Opaque::TooLarge),
        Some(_) => Framed::Opaque(Opaque::NotHttp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared_by(fields: &[(&str, &str)]) -> Declared {
        let headers: Vec<httparse::Header<'_>> = fields
            .iter()
            .map(|(name, value)| httparse::Header {
                name,
                value: value.as_bytes(),
            })
            .collect();
        declared(&headers)
    }

    #[test]
    fn a_body_is_framed_by_rule_and_doubtful_framing_is_refused() {
        use Declared::*;
        assert_eq!(declared_by(&[]), Unstated);
        assert_eq!(
            declared_by(&[("Content-Length", "0")]),
            Framed(Framing::Empty)
        );
        assert_eq!(
            declared_by(&[("Content-Length", "12")]),
            Framed(Framing::Length(12))
        );
        assert_eq!(
            declared_by(&[("content-length", "12, 12")]),
            Framed(Framing::Length(12))
        );
        assert_eq!(
            declared_by(&[
                ("Transfer-Encoding", "gzip, chunked"),
                ("Content-Length", "3")
            ]),
            Framed(Framing::Chunked)
        );
        assert_eq!(
            declared_by(&[("Content-Length", "12"), ("Content-Length", "13")]),
            Malformed
        );
        assert_eq!(declared_by(&[("Content-Length", "-1")]), Malformed);
        assert_eq!(declared_by(&[("Content-Length", "+1")]), Malformed);
        assert_eq!(declared_by(&[("Transfer-Encoding", "gzip")]), OtherCoding);
    }

    #[test]
    fn a_token_is_found_in_a_list_whatever_its_case() {
        let headers = [httparse::Header {
            name: "Connection",
            value: b"keep-alive, Upgrade",
        }];
        assert!(has_token(&headers, "connection", "upgrade"));
        assert!(!has_token(&headers, "connection", "close"));
    }
}
