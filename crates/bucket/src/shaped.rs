//! Shaping any reader or writer: [`Shaped`] pays for every byte that
//! passes through it from a bucket, so a `std::io::copy` through it runs at
//! the bucket's rate.

use crate::bucket::{BucketCell, TokenBucket};
use crate::clock::Clock;
use std::io::{self, Read, Write};
use std::ops::Deref;

/// A reader or writer whose bytes are paid for, one token each, from a
/// bucket (`&TokenBucket`, `Arc<TokenBucket>` or anything else that derefs
/// to one, so several can share it).
///
/// Reads pass on what the inner reader gave once it is paid for; writes
/// are paid for first, and tokens for bytes the inner writer did not take
/// are given back. One call moves at most a burst, so that no call waits
/// for more tokens than the bucket can ever hold.
///
/// ```
/// use shape_bucket::{Limit, Shaped, TokenBucket};
/// use std::io::Write;
/// use std::time::Instant;
///
/// // 1 MiB/s with a 64 KiB burst: 320 KiB take a quarter of a second.
/// let bucket = TokenBucket::new(Limit::per_second(1 << 20), 64 << 10).unwrap();
/// let mut out = Shaped::new(Vec::new(), &bucket);
/// let started = Instant::now();
/// out.write_all(&[7; 320 << 10]).unwrap();
/// assert!(started.elapsed().as_secs_f64() >= 0.24);
/// assert_eq!(out.into_inner().len(), 320 << 10);
///
/// // The same for a reader: `std::io::copy` through a shaped one.
/// let mut shaped = Shaped::new(&[1u8; 1000][..], &bucket);
/// let mut sink = Vec::new();
/// std::io::copy(&mut shaped, &mut sink).unwrap();
/// assert_eq!(sink, [1u8; 1000]);
/// ```
#[derive(Debug)]
pub struct Shaped<T, B> {
    inner: T,
    payer: B,
}

impl<T, B> Shaped<T, B> {
    /// `inner`, paying for its bytes from `bucket`.
    pub fn new(inner: T, bucket: B) -> Self {
        Shaped {
            inner,
            payer: bucket,
        }
    }

    /// The reader or writer within.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The reader or writer within; bytes moved through it directly are
    /// not paid for.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// The reader or writer within, unshaped.
    pub fn into_inner(self) -> T {
        self.inner
    }
}

/// What a [`Shaped`] pays from: anything that leads to a bucket, such as
/// `&TokenBucket` or `Arc<TokenBucket>`.
pub trait Payer {
    /// The bucket's clock.
    type Clock: Clock;
    /// Where the bucket's cell lives.
    type Cell: Deref<Target = BucketCell>;
    /// The bucket.
    fn bucket(&self) -> &TokenBucket<Self::Clock, Self::Cell>;
}

impl<B, C, S> Payer for B
where
    B: Deref<Target = TokenBucket<C, S>>,
    C: Clock,
    S: Deref<Target = BucketCell>,
{
    type Clock = C;
    type Cell = S;

    fn bucket(&self) -> &TokenBucket<C, S> {
        self
    }
}

impl<T, B: Payer> Shaped<T, B> {
    /// The most one call moves: `wanted`, at most a burst, at least one
    /// byte.
    fn piece(&self, wanted: usize) -> usize {
        let burst = usize::try_from(self.payer.bucket().burst()).unwrap_or(usize::MAX);
        wanted.min(burst).max(1)
    }
}

impl<T: Read, B: Payer> Read for Shaped<T, B> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let piece = self.piece(buf.len());
        let n = self.inner.read(&mut buf[..piece])?;
        self.payer
            .bucket()
            .acquire(n as u64)
            .map_err(io::Error::other)?;
        Ok(n)
    }
}

impl<T: Write, B: Payer> Write for Shaped<T, B> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return self.inner.write(buf);
        }
        let piece = self.piece(buf.len());
        let bucket = self.payer.bucket();
        let mut paid = bucket.reserve(piece as u64);
        bucket.wait(&paid).map_err(io::Error::other)?;
        let written = self.inner.write(&buf[..piece]);
        let unused = written.as_ref().map_or(piece, |&n| piece - n.min(piece));
        bucket.give_back(&mut paid, unused as u64);
        written
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::Fill;
    use crate::clock::FakeClock;
    use crate::rate::Limit;
    use std::sync::Arc;

    fn bucket(fill: Fill) -> TokenBucket<Arc<FakeClock>> {
        TokenBucket::with_clock(
            Limit::per_second(1000),
            100,
            fill,
            Arc::new(FakeClock::new(0)),
        )
        .unwrap()
    }

    #[test]
    fn a_writer_is_paid_exactly_for_what_it_takes() {
        let bucket = bucket(Fill::Empty);
        let mut shaped = Shaped::new(Vec::new(), &bucket);
        shaped.write_all(&[5; 5000]).unwrap();
        assert_eq!(
            bucket.clock().now(),
            5_000_000_000,
            "5000 bytes at 1000 B/s"
        );
        assert_eq!(shaped.get_ref().len(), 5000);
    }

    /// Takes at most three bytes a call.
    struct Slow(Vec<u8>);

    impl Write for Slow {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(3);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn tokens_for_bytes_a_writer_refused_are_given_back() {
        let bucket = bucket(Fill::Empty);
        let mut shaped = Shaped::new(Slow(Vec::new()), &bucket);
        shaped.write_all(&[1; 30]).unwrap();
        // Paid for 30 bytes in pieces, and for nothing more.
        assert_eq!(bucket.clock().now(), 30_000_000);
        assert_eq!(shaped.into_inner().0, [1; 30]);
    }

    #[test]
    fn a_reader_pays_for_what_it_read_in_pieces_of_at_most_a_burst() {
        let bucket = bucket(Fill::Full);
        let mut shaped = Shaped::new(&[9u8; 1100][..], &bucket);
        let mut buf = [0; 4096];
        assert_eq!(shaped.read(&mut buf).unwrap(), 100, "one burst at most");
        assert_eq!(bucket.clock().now(), 0, "the full bucket paid for it");
        let mut rest = Vec::new();
        shaped.read_to_end(&mut rest).unwrap();
        assert_eq!(rest.len(), 1000);
        assert_eq!(bucket.clock().now(), 1_000_000_000);
    }
}
