//! The copy loop for records (`--lines`, `--null`): a record is paid for
//! before any of it leaves, and leaves whole.
//!
//! Records are read into a buffer and found by their terminator. At a
//! record boundary the pump pays for the complete records waiting (as
//! many as a chunk of the rate allows) and writes up to and including the
//! last terminator paid for: never a part of a record ahead of its tokens.
//! A record still arriving is read on, so that it leaves whole; only a
//! record longer than the buffer leaves in pieces, paid for once, before
//! its first piece, and counted when its terminator passes. A last record
//! without a terminator is paid for, written and counted when its input
//! ends. Memory stays one buffer, whatever the input.

use super::{CopyError, Descriptor, Ended, Forward};
use shape_bucket::{BucketCell, Clock, Damaged, Reservation, TokenBucket};
use shape_leaves::chunk::chunk_records;
use shape_leaves::counting::TOKENS_PER_RECORD;
use shape_leaves::throughput::Throughput;
use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Deref;

/// The buffer records are read into: a record longer than this passes in
/// pieces.
pub const RECORD_BUFFER: usize = 256 * 1024;

/// Forwards inputs record by record through a bucket whose tokens are
/// [`TOKENS_PER_RECORD`] a record, counting the records that passed.
pub struct RecordPump<'a, C: Clock, S: Deref<Target = BucketCell>> {
    bucket: &'a TokenBucket<C, S>,
    counted: &'a Throughput,
    terminator: u8,
    /// Records still to forward under `--stop-after`.
    remaining: Option<u64>,
    buffer: Vec<u8>,
    /// True while the record at the front of the buffer has been paid for
    /// and its start has left: the rest follows without paying.
    open: bool,
    /// Tokens reserved ahead for the next records, and for how many.
    prepaid: Option<(Reservation, u64)>,
}

impl<'a, C: Clock, S: Deref<Target = BucketCell>> RecordPump<'a, C, S> {
    /// A pump of records ending in `terminator`, paying from `bucket`,
    /// adding each record to `counted`, and stopping for good after
    /// `stop_after` records if given.
    pub fn new(
        bucket: &'a TokenBucket<C, S>,
        counted: &'a Throughput,
        terminator: u8,
        stop_after: Option<u64>,
    ) -> Self {
        RecordPump {
            bucket,
            counted,
            terminator,
            remaining: stop_after,
            buffer: Vec::new(),
            open: false,
            prepaid: None,
        }
    }

    /// Copies `input` to `output` record by record until the input ends or
    /// the stop-after budget is spent. Interrupted calls are retried and
    /// partial ones continued, so no byte is lost or repeated.
    pub fn forward_records(
        &mut self,
        input: &mut impl Read,
        output: &mut (impl Write + ?Sized),
    ) -> Result<Ended, CopyError> {
        if self.buffer.is_empty() {
            self.buffer = vec![0; RECORD_BUFFER];
        }
        // Bytes read and not yet written: buffer[start..end].
        let (mut start, mut end) = (0, 0);
        loop {
            let pending = &self.buffer[start..end];
            if self.open {
                // The rest of a record paid for: on to its terminator.
                let (through, ends) = match self.find(pending, 1) {
                    (1, through) => (through, true),
                    _ => (pending.len(), false),
                };
                write(output, &pending[..through])?;
                start += through;
                if ends {
                    self.open = false;
                    self.passed(1);
                }
            } else if self.remaining == Some(0) {
                self.unpay_ahead();
                return Ok(Ended::LimitReached);
            } else {
                let (records, through) = self.find(pending, self.records_per_chunk());
                if records > 0 {
                    self.pay(records)?;
                    write(output, &self.buffer[start..start + through])?;
                    start += through;
                    self.passed(records);
                    continue;
                }
                if end - start == self.buffer.len() {
                    // A record longer than the buffer: pay for it now, and
                    // let it through in pieces.
                    self.pay(1)?;
                    self.open = true;
                    continue;
                }
            }
            // More is needed: keep what is pending at the front, read on.
            self.buffer.copy_within(start..end, 0);
            (start, end) = (0, end - start);
            let read = loop {
                match input.read(&mut self.buffer[end..]) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    read => break read.map_err(CopyError::Read)?,
                }
            };
            if read == 0 {
                return self.end_of_input(end, output);
            }
            end += read;
        }
    }

    /// At the end of the input, a last record without its terminator (the
    /// first `rest` bytes of the buffer) is paid for, written and counted.
    fn end_of_input(
        &mut self,
        rest: usize,
        output: &mut (impl Write + ?Sized),
    ) -> Result<Ended, CopyError> {
        if rest > 0 || self.open {
            if !self.open {
                self.pay(1)?;
            }
            write(output, &self.buffer[..rest])?;
            self.open = false;
            self.passed(1);
        }
        self.unpay_ahead();
        Ok(Ended::InputDone)
    }

    /// How many of at most `most` complete records `bytes` starts with, and
    /// how many bytes they take, terminators included.
    fn find(&self, bytes: &[u8], most: u64) -> (u64, usize) {
        let mut records = 0;
        let mut through = 0;
        for at in memchr::memchr_iter(self.terminator, bytes) {
            if records == most {
                break;
            }
            records += 1;
            through = at + 1;
        }
        (records, through)
    }

    /// The most records to pay for at once: a chunk's worth at the rate in
    /// force, within the stop-after budget.
    fn records_per_chunk(&self) -> u64 {
        let (limit, burst) = self.bucket.limit_and_burst();
        chunk_records(limit, burst).min(self.remaining.unwrap_or(u64::MAX))
    }

    /// Waits until `records` records are paid for, then pays ahead for the
    /// next chunk of records.
    ///
    /// Paying ahead, before these records are written, keeps the bucket
    /// filling towards the next ones while the write blocks, as the byte
    /// pump does: with a burst of one record, tokens that come while the
    /// pump is busy would otherwise overflow and be lost, and the rate
    /// would fall short. After the input stalls, the records paid ahead
    /// can follow a full burst at once.
    ///
    /// Fails, before any of them is written, if the bucket is found
    /// damaged.
    fn pay(&mut self, records: u64) -> Result<(), Damaged> {
        let tokens = records * TOKENS_PER_RECORD;
        let reservation = match self.prepaid.take() {
            Some((mut paid, ahead)) if ahead >= records => {
                let unused = (ahead - records) * TOKENS_PER_RECORD;
                self.bucket.give_back(&mut paid, unused);
                paid
            }
            Some((paid, ahead)) => {
                self.bucket.wait(&paid)?;
                self.bucket.reserve(tokens - ahead * TOKENS_PER_RECORD)
            }
            None => self.bucket.reserve(tokens),
        };
        self.bucket.wait(&reservation)?;
        let ahead = self
            .records_per_chunk()
            .min(self.remaining.unwrap_or(u64::MAX).saturating_sub(records));
        self.prepaid = (ahead > 0).then(|| {
            let reservation = self.bucket.reserve(ahead * TOKENS_PER_RECORD);
            (reservation, ahead)
        });
        Ok(())
    }

    /// Gives back what was paid ahead: no more records come.
    fn unpay_ahead(&mut self) {
        if let Some((mut paid, ahead)) = self.prepaid.take() {
            self.bucket.give_back(&mut paid, ahead * TOKENS_PER_RECORD);
        }
    }

    /// Takes note that `records` records have passed whole.
    fn passed(&mut self, records: u64) {
        self.counted.add(records);
        if let Some(left) = &mut self.remaining {
            *left -= records.min(*left);
        }
    }
}

impl<C: Clock, S: Deref<Target = BucketCell>> Forward for RecordPump<'_, C, S> {
    fn to_file(&mut self, input: &File, output: &File) -> Result<Ended, CopyError> {
        self.forward_records(&mut Descriptor(input), &mut Descriptor(output))
    }

    fn to_writer(&mut self, input: &File, output: &mut dyn Write) -> Result<Ended, CopyError> {
        self.forward_records(&mut Descriptor(input), output)
    }
}

/// Writes all of `bytes`, or says how writing failed.
fn write(output: &mut (impl Write + ?Sized), bytes: &[u8]) -> Result<(), CopyError> {
    output.write_all(bytes).map_err(CopyError::Write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use shape_bucket::{FakeClock, Fill, Limit};
    use std::sync::Arc;

    const SEC: u64 = 1_000_000_000;

    /// A bucket of `per_second` records a second with a burst of `burst`
    /// records, empty, on a fake clock.
    fn bucket(per_second: u64, burst: u64) -> TokenBucket<Arc<FakeClock>> {
        let limit = Limit::per_second(per_second * TOKENS_PER_RECORD);
        let clock = Arc::new(FakeClock::new(0));
        TokenBucket::with_clock(limit, burst * TOKENS_PER_RECORD, Fill::Empty, clock).unwrap()
    }

    /// Hands out `data` in the pieces `cuts` gives, failing with EINTR
    /// between them.
    struct RecordPieces {
        data: Vec<u8>,
        at: usize,
        cuts: Vec<usize>,
        interrupt: bool,
    }

    impl Read for RecordPieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let cut = self.cuts.get(self.at % self.cuts.len().max(1)).copied();
            let n = buf
                .len()
                .min(self.data.len())
                .min(cut.unwrap_or(usize::MAX).max(1));
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data.drain(..n);
            self.at += 1;
            Ok(n)
        }
    }

    /// Writes down when (on `clock`) each byte arrived.
    struct Stamped<'c> {
        clock: &'c FakeClock,
        bytes: Vec<(u64, u8)>,
    }

    impl Write for Stamped<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let now = self.clock.now();
            self.bytes.extend(buf.iter().map(|&b| (now, b)));
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn pieces(data: &[u8], cuts: Vec<usize>) -> RecordPieces {
        RecordPieces {
            data: data.to_vec(),
            at: 0,
            cuts,
            interrupt: false,
        }
    }

    #[test]
    fn each_line_leaves_whole_exactly_when_its_token_comes() {
        let bucket = bucket(5, 1);
        let counted = Throughput::default();
        let mut out = Stamped {
            clock: bucket.clock(),
            bytes: Vec::new(),
        };
        let data = b"one\ntwo\nthree\nfour\n";
        let ended = RecordPump::new(&bucket, &counted, b'\n', None)
            .forward_records(&mut pieces(data, vec![3]), &mut out)
            .unwrap();
        assert_eq!(ended, Ended::InputDone);
        assert_eq!(counted.total(), 4);
        let bytes: Vec<u8> = out.bytes.iter().map(|&(_, b)| b).collect();
        assert_eq!(bytes, data);
        // Line n (from 1) ends exactly n fifths of a second in: an empty
        // bucket at 5 a second, and each line waits for its own token.
        let ends: Vec<u64> = out
            .bytes
            .iter()
            .filter(|&&(_, b)| b == b'\n')
            .map(|&(at, _)| at)
            .collect();
        assert_eq!(ends, [SEC / 5, 2 * SEC / 5, 3 * SEC / 5, 4 * SEC / 5]);
        // And no byte of a line leaves before its token.
        let starts = [0, 4, 8, 14];
        for (line, &first) in starts.iter().enumerate() {
            assert_eq!(
                out.bytes[first].0,
                (line as u64 + 1) * SEC / 5,
                "line {line}"
            );
        }
    }

    #[test]
    fn a_last_line_without_a_terminator_counts_and_stop_after_counts_lines() {
        let bucket = bucket(1000, 10);
        let counted = Throughput::default();
        let mut out = Vec::new();
        let mut pump = RecordPump::new(&bucket, &counted, 0, None);
        pump.forward_records(&mut pieces(b"a\0b\0tail", vec![100]), &mut out)
            .unwrap();
        assert_eq!(out, b"a\0b\0tail");
        assert_eq!(counted.total(), 3);

        let counted = Throughput::default();
        let mut out = Vec::new();
        let mut pump = RecordPump::new(&bucket, &counted, b'\n', Some(2));
        let ended = pump
            .forward_records(&mut pieces(b"1\n2\n3\n4\n", vec![1]), &mut out)
            .unwrap();
        assert_eq!(ended, Ended::LimitReached);
        assert_eq!(out, b"1\n2\n");
        assert_eq!(counted.total(), 2);
    }

    #[test]
    fn a_record_longer_than_the_buffer_passes_in_pieces_paid_once() {
        let bucket = bucket(1, 1);
        let counted = Throughput::default();
        let mut out = Vec::new();
        let mut long = vec![b'x'; 3 * RECORD_BUFFER + 17];
        long.push(b'\n');
        long.extend_from_slice(b"short\n");
        RecordPump::new(&bucket, &counted, b'\n', None)
            .forward_records(&mut pieces(&long, vec![RECORD_BUFFER]), &mut out)
            .unwrap();
        assert!(out == long);
        assert_eq!(counted.total(), 2);
        assert_eq!(bucket.clock().now(), 2 * SEC, "two records, paid once each");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Whatever pieces the input arrives in, the output is the input,
        /// every record is counted once, and the records cost exactly
        /// their tokens.
        #[test]
        fn records_split_across_any_reads_arrive_whole_and_once(
            records in prop::collection::vec(prop::collection::vec(1u8..=255, 0..40), 0..60),
            unterminated in prop::collection::vec(1u8..=255, 0..30),
            cuts in prop::collection::vec(1usize..50, 1..20),
        ) {
            let mut data = Vec::new();
            for record in &records {
                data.extend(record.iter().map(|&b| if b == b'\n' { b'.' } else { b }));
                data.push(b'\n');
            }
            data.extend(unterminated.iter().map(|&b| if b == b'\n' { b'.' } else { b }));
            let expected = records.len() as u64 + u64::from(!unterminated.is_empty());
            let bucket = bucket(1000, 3);
            let counted = Throughput::default();
            let mut out = Vec::new();
            RecordPump::new(&bucket, &counted, b'\n', None)
                .forward_records(&mut pieces(&data, cuts), &mut out)
                .unwrap();
            prop_assert_eq!(&out, &data);
            prop_assert_eq!(counted.total(), expected);
            // An empty bucket at 1000 a second: exactly a millisecond each.
            prop_assert_eq!(bucket.clock().now(), expected * SEC / 1000);
        }
    }
}
