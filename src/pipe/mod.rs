//! The copy loop: take a chunk from the input, pay for it from the bucket,
//! pass it on.
//!
//! shape holds at most one chunk: it takes more from the input only after
//! the previous chunk is written, so the producer upstream feels the limit
//! as back-pressure instead of shape reading ahead. The chunk size follows
//! the rate, so that writes are small enough to flow evenly at low rates and
//! large enough to be cheap at high ones.
//!
//! The chunk waits in a pipe of shape's own (the "hand"), so that both moves
//! are splice(2) and the bytes never enter user space. Where an input or
//! the output cannot splice (a terminal, a file opened for appending), the
//! copy goes through a buffer instead, with read(2) and write(2).

mod delayed;
mod descriptor;
mod gone;
mod output;
mod records;

pub use delayed::{DelayedOutput, UnitsOf};
pub use descriptor::Descriptor;
pub use gone::when_reader_gone;
pub use output::{Output, reset_on_close};
pub use records::RecordPump;

use rustix::io::Errno;
use shape_bucket::{BucketCell, Clock, Damaged, Reservation, TokenBucket};
use shape_leaves::chunk::{MAX_CHUNK, chunk_size};
use shape_leaves::throughput::Throughput;
use shape_net::splice::{self, Pipe, splice_waiting};
use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Deref;

/// How a [`Pump::forward`] ended without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The input reached its end.
    InputDone,
    /// `--stop-after` bytes have been forwarded.
    LimitReached,
}

/// A failed read or write, kept apart because they end a run differently:
/// a read fails one input, a write the whole run.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// Reading the input failed.
    #[error("read: {0}")]
    Read(#[source] io::Error),
    /// Writing the output failed.
    #[error("write: {0}")]
    Write(#[source] io::Error),
    /// The bucket's shared state was found damaged: nothing more is paid
    /// for, so nothing more is written.
    #[error("{0}")]
    Damaged(#[from] Damaged),
}

/// A copy loop that forwards one input at a time: [`Pump`] for bytes,
/// [`RecordPump`] for records.
pub trait Forward {
    /// Copies `input` to `output`, a file (which a byte pump may splice
    /// to), until the input ends or the stop-after budget is spent.
    fn to_file(&mut self, input: &File, output: &File) -> Result<Ended, CopyError>;

    /// Copies `input` into `output`, which is not a file (a delay line).
    fn to_writer(&mut self, input: &File, output: &mut dyn Write) -> Result<Ended, CopyError>;
}

impl<C: Clock, S: Deref<Target = BucketCell>> Forward for Pump<'_, C, S> {
    fn to_file(&mut self, input: &File, output: &File) -> Result<Ended, CopyError> {
        self.forward(input, output)
    }

    fn to_writer(&mut self, input: &File, output: &mut dyn Write) -> Result<Ended, CopyError> {
        self.forward_into(input, output)
    }
}

/// shape's own pipe (the "hand"), where a chunk waits between two
/// splices: of a chunk's size, as the default 64 KiB would cap chunks
/// below MAX_CHUNK.
fn hand() -> io::Result<Pipe> {
    Pipe::new(MAX_CHUNK)
}

/// Tokens paid for a chunk not yet taken from the input.
struct Paid {
    reservation: Reservation,
    bytes: usize,
}

/// Forwards inputs through a bucket, counting what passed.
pub struct Pump<'a, C: Clock, S: Deref<Target = BucketCell> = Box<BucketCell>> {
    bucket: &'a TokenBucket<C, S>,
    forwarded: &'a Throughput,
    remaining: Option<u64>,
    /// `None` once the output has refused splice, or if no pipe could be
    /// made.
    hand: Option<Pipe>,
    /// For the buffered path; allocated on first use.
    buffer: Vec<u8>,
    /// Tokens already paid for the next chunk.
    prepaid: Option<Paid>,
    /// The largest chunk to take, below [`MAX_CHUNK`] to keep within a
    /// buffer limit.
    max_chunk: usize,
}

impl<'a, C: Clock, S: Deref<Target = BucketCell>> Pump<'a, C, S> {
    /// A pump paying from `bucket`, adding each chunk to `forwarded`, and
    /// stopping for good after `stop_after` bytes if given.
    pub fn new(
        bucket: &'a TokenBucket<C, S>,
        forwarded: &'a Throughput,
        stop_after: Option<u64>,
    ) -> Self {
        Pump {
            bucket,
            forwarded,
            remaining: stop_after,
            hand: hand().ok(),
            buffer: Vec::new(),
            prepaid: None,
            max_chunk: MAX_CHUNK,
        }
    }

    /// Takes chunks of at most `bytes` (at least one).
    pub fn with_max_chunk(mut self, bytes: usize) -> Self {
        self.max_chunk = bytes.clamp(1, MAX_CHUNK);
        self
    }

    /// Copies `input` to `output` until the input ends or the stop-after
    /// budget is spent. Interrupted calls are retried and partial ones
    /// continued, so no byte is lost or repeated.
    pub fn forward(&mut self, input: &File, output: &File) -> Result<Ended, CopyError> {
        if self.hand.is_some() {
            // A pipe on either side that is smaller than a chunk (the
            // default is 64 KiB) would cut every chunk in two: grown, a
            // chunk crosses it in one splice and one wake-up rather than
            // two, which at 200 MiB/s halves the splices and timed waits.
            splice::grow(input, MAX_CHUNK);
            splice::grow(output, MAX_CHUNK);
            if let Some(ended) = self.forward_spliced(input, output)? {
                return Ok(ended);
            }
        }
        self.forward_buffered(&mut Descriptor(input), &mut Descriptor(output))
    }

    /// Copies `input` into `output`, which is not a file (a delay line), as
    /// [`Pump::forward`] does.
    pub fn forward_into(
        &mut self,
        input: &File,
        output: &mut (impl Write + ?Sized),
    ) -> Result<Ended, CopyError> {
        self.forward_buffered(&mut Descriptor(input), output)
    }

    /// The size of the next chunk, or `None` once the stop-after budget is
    /// spent. Follows the limit in force, which may change while running.
    fn next_chunk(&self) -> Option<usize> {
        let budget = self.remaining.unwrap_or(u64::MAX);
        let (limit, burst) = self.bucket.limit_and_burst();
        let chunk = chunk_size(limit, burst).min(self.max_chunk);
        (budget > 0).then(|| chunk.min(usize::try_from(budget).unwrap_or(usize::MAX)))
    }

    /// How much to take from the input next: what is paid ahead, or a
    /// fresh chunk. `None` once the stop-after budget is spent.
    fn chunk_to_take(&self) -> Option<usize> {
        match &self.prepaid {
            Some(paid) => Some(paid.bytes),
            None => self.next_chunk(),
        }
    }

    /// Waits until `taken` bytes just taken from the input are paid for,
    /// then pays ahead for the next chunk.
    ///
    /// Paying ahead, before this chunk is written, keeps the bucket filling
    /// towards the next chunk while the write blocks: otherwise a write
    /// slower than the burst lasts would let tokens overflow and be lost,
    /// and a small burst at a high rate would fall short of the rate. The
    /// price: after the input stalls, the chunk paid ahead can go out on top
    /// of a full burst, so the most that passes at once is the burst plus
    /// one chunk ([`chunk_size`]: 2.5 ms worth, or a packet below 150 KB/s).
    /// Fails, before anything of the chunk is written, if the bucket is
    /// found damaged.
    fn pay_for(&mut self, taken: usize) -> Result<(), Damaged> {
        let reservation = match self.prepaid.take() {
            Some(mut paid) => {
                self.bucket
                    .give_back(&mut paid.reservation, (paid.bytes - taken) as u64);
                paid.reservation
            }
            None => self.bucket.reserve(taken as u64),
        };
        self.bucket.wait(&reservation)?;
        if let Some(left) = &mut self.remaining {
            *left -= taken as u64;
        }
        self.prepaid = self.next_chunk().map(|bytes| Paid {
            reservation: self.bucket.reserve(bytes as u64),
            bytes,
        });
        Ok(())
    }

    /// Gives back every token of `paid`, unused.
    fn unpay(&self, mut paid: Paid) {
        self.bucket
            .give_back(&mut paid.reservation, paid.bytes as u64);
    }

    /// Gives back what was paid ahead: the input has ended.
    fn unpay_ahead(&mut self) {
        if let Some(paid) = self.prepaid.take() {
            self.unpay(paid);
        }
    }

    /// Input to hand to output by splice. `None` when the input cannot be
    /// spliced from, or the output has just refused to be spliced to: the
    /// copy then goes on through the buffer.
    fn forward_spliced(&mut self, input: &File, output: &File) -> Result<Option<Ended>, CopyError> {
        loop {
            let Some(want) = self.chunk_to_take() else {
                return Ok(Some(Ended::LimitReached));
            };
            let hand = self.hand.as_ref().expect("only called with a hand");
            let n = match splice_waiting(input, &hand.write, want.min(hand.size)) {
                Ok(0) => {
                    self.unpay_ahead();
                    return Ok(Some(Ended::InputDone));
                }
                Ok(n) => n,
                Err(Errno::INVAL) => return Ok(None),
                Err(err) => return Err(CopyError::Read(err.into())),
            };
            self.pay_for(n)?;
            let still_splicing = self.pass_on(n, output)?;
            // Counted whichever way the bytes went out.
            self.forwarded.add(n as u64);
            if !still_splicing {
                return Ok(None);
            }
        }
    }

    /// Moves the `n` bytes in the hand to `output`. If the output refuses
    /// splice, writes them from the buffer, gives up the hand and returns
    /// false.
    fn pass_on(&mut self, mut n: usize, output: &File) -> Result<bool, CopyError> {
        let hand = self.hand.as_ref().expect("only called with a hand");
        while n > 0 {
            match splice_waiting(&hand.read, output, n) {
                Ok(moved) => n -= moved,
                Err(Errno::INVAL) => break,
                Err(err) => return Err(CopyError::Write(err.into())),
            }
        }
        if n == 0 {
            return Ok(true);
        }
        let hand = self.hand.take().expect("checked above");
        self.write_from_hand(hand, n, output)?;
        Ok(false)
    }

    /// Writes the `n` bytes waiting in `hand` to `output` through the
    /// buffer.
    fn write_from_hand(&mut self, hand: Pipe, n: usize, output: &File) -> Result<(), CopyError> {
        let buffer = self.buffer(n);
        let held = File::from(hand.read);
        Descriptor(&held)
            .read_exact(buffer)
            .map_err(CopyError::Read)?;
        Descriptor(output)
            .write_all(buffer)
            .map_err(CopyError::Write)
    }

    /// Input to buffer to output by read and write.
    fn forward_buffered(
        &mut self,
        input: &mut impl Read,
        output: &mut (impl Write + ?Sized),
    ) -> Result<Ended, CopyError> {
        loop {
            let Some(want) = self.chunk_to_take() else {
                return Ok(Ended::LimitReached);
            };
            let n = match input.read(self.buffer(want)) {
                Ok(0) => {
                    self.unpay_ahead();
                    return Ok(Ended::InputDone);
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(CopyError::Read(e)),
            };
            self.pay_for(n)?;
            output
                .write_all(&self.buffer[..n])
                .map_err(CopyError::Write)?;
            self.forwarded.add(n as u64);
        }
    }

    /// The first `len` bytes of the buffer, allocating it on first use.
    fn buffer(&mut self, len: usize) -> &mut [u8] {
        if self.buffer.is_empty() {
            self.buffer = vec![0; MAX_CHUNK];
        }
        &mut self.buffer[..len]
    }
}

#[cfg(test)]
mod tests;
