//! One message's body, framed as its head declared it: so many bytes,
//! chunks (each size line read by httparse), or everything until the
//! close. Only where the body ends is found; nothing is decoded or kept.

use super::{Framed, Framing, MOST_LINE, Opaque};

/// Where a body stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    /// This many bytes are left.
    Left(u64),
    /// A chunked body, at this place in it.
    Chunked(Chunk),
    /// Everything until the close.
    UntilClose,
    /// It ended.
    Done,
}

/// A place in a chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunk {
    /// A chunk's size line comes next.
    Size,
    /// This many bytes of a chunk's data are left.
    Data(u64),
    /// The CRLF after a chunk's data, of which this many bytes are left.
    DataEnd(usize),
    /// The trailer lines, ended by an empty one.
    Trailers,
}

impl Body {
    pub(super) fn new(framing: Framing) -> Body {
        match framing {
            Framing::Empty => Body::Done,
            Framing::Length(length) => Body::Left(length),
            Framing::Chunked => Body::Chunked(Chunk::Size),
            Framing::UntilClose => Body::UntilClose,
        }
    }

    /// What the first bytes of `buf` are; the caller takes exactly the
    /// bytes the step names before it asks again.
    pub(super) fn step<H>(&mut self, buf: &[u8]) -> Framed<H> {
        match *self {
            Body::Done => Framed::End,
            Body::Left(0) => {
                *self = Body::Done;
                Framed::End
            }
            _ if buf.is_empty() => Framed::NeedMore,
            Body::Left(left) => {
                let taken = left.min(buf.len() as u64);
                *self = Body::Left(left - taken);
                Framed::Body(taken as usize)
            }
            Body::UntilClose => Framed::Body(buf.len()),
            Body::Chunked(chunk) => match chunked(chunk, buf) {
                Ok((next, len)) => {
                    *self = next;
                    Framed::Body(len)
                }
                Err(step) => step,
            },
        }
    }
}

/// The next piece of a chunked body at `chunk`, from `buf` (not empty):
/// where the body stands after it, and its length; or, where no piece can
/// be taken yet, the step that says why.
fn chunked<H>(chunk: Chunk, buf: &[u8]) -> Result<(Body, usize), Framed<H>> {
    match chunk {
        Chunk::Size => match httparse::parse_chunk_size(buf) {
            Ok(httparse::Status::Complete((len, 0))) => Ok((Body::Chunked(Chunk::Trailers), len)),
            Ok(httparse::Status::Complete((len, size))) => {
                Ok((Body::Chunked(Chunk::Data(size)), len))
            }
            Ok(httparse::Status::Partial) if buf.len() >= MOST_LINE => {
                Err(Framed::Opaque(Opaque::TooLarge))
            }
            Ok(httparse::Status::Partial) => Err(Framed::NeedMore),
            Err(_) => Err(Framed::Opaque(Opaque::Malformed)),
        },
        Chunk::Data(left) => {
            let taken = left.min(buf.len() as u64);
            let next = match left - taken {
                0 => Chunk::DataEnd(2),
                left => Chunk::Data(left),
            };
            Ok((Body::Chunked(next), taken as usize))
        }
        Chunk::DataEnd(left) => {
            let expected = &b"\r\n"[2 - left..];
            let taken = left.min(buf.len());
            if buf[..taken] != expected[..taken] {
                return Err(Framed::Opaque(Opaque::Malformed));
            }
            let next = match left - taken {
                0 => Chunk::Size,
                left => Chunk::DataEnd(left),
            };
            Ok((Body::Chunked(next), taken))
        }
        Chunk::Trailers => {
            let searched = &buf[..buf.len().min(MOST_LINE)];
            match searched.iter().position(|&byte| byte == b'\n') {
                // An empty line ends the trailers, and the body.
                Some(at) if buf[..at] == *b"" || buf[..at] == *b"\r" => Ok((Body::Done, at + 1)),
                Some(at) => Ok((Body::Chunked(Chunk::Trailers), at + 1)),
                None if buf.len() >= MOST_LINE => Err(Framed::Opaque(Opaque::TooLarge)),
                None => Err(Framed::NeedMore),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps through `body` fed `wire` in pieces of `piece` bytes; the
    /// body's length and what followed it, or the step it stopped at.
    fn walk(framing: Framing, wire: &[u8], piece: usize) -> Result<(usize, usize), Framed<()>> {
        let mut body = Body::new(framing);
        let (mut at, mut had) = (0, 0);
        loop {
            match body.step::<()>(&wire[at..had]) {
                Framed::Body(len) => at += len,
                Framed::End => return Ok((at, wire.len() - at)),
                Framed::NeedMore if had < wire.len() => had = (had + piece).min(wire.len()),
                step => return Err(step),
            }
        }
    }

    #[test]
    fn a_chunked_body_ends_after_its_trailers_however_it_is_cut() {
        let body = b"5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nExpires: never\r\n\r\n";
        let wire = [&body[..], b"GET / HTTP/1.1\r\n"].concat();
        for piece in [1, 2, 3, 7, wire.len()] {
            assert_eq!(
                walk(Framing::Chunked, &wire, piece),
                Ok((body.len(), 16)),
                "{piece}"
            );
        }
    }

    #[test]
    fn a_length_ends_where_it_says_and_an_empty_body_at_once() {
        assert_eq!(walk(Framing::Length(4), b"abcdefg", 3), Ok((4, 3)));
        assert_eq!(walk(Framing::Empty, b"abc", 1), Ok((0, 3)));
    }

    #[test]
    fn a_chunk_that_lies_or_a_size_line_without_end_is_followed_no_further() {
        assert_eq!(
            walk(Framing::Chunked, b"zz\r\n", 4),
            Err(Framed::Opaque(Opaque::Malformed))
        );
        assert_eq!(
            walk(Framing::Chunked, b"3\r\nabcXY", 8),
            Err(Framed::Opaque(Opaque::Malformed))
        );
        // A size line whose extension never ends.
        let endless = [&b"1;"[..], &vec![b'a'; MOST_LINE]].concat();
        assert_eq!(
            walk(Framing::Chunked, &endless, endless.len()),
            Err(Framed::Opaque(Opaque::TooLarge))
        );
    }

    #[test]
    fn a_body_until_the_close_takes_all_that_comes() {
        let mut body = Body::new(Framing::UntilClose);
        assert_eq!(body.step::<()>(b"abc"), Framed::Body(3));
        assert_eq!(body.step::<()>(b""), Framed::NeedMore);
    }
}
