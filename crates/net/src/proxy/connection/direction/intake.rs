//! How a direction takes a chunk in: as large as the rate, the buffer's
//! room and the proxy's load allow, spliced into its pipes where no fault
//! touches its bytes and both sides are sockets, else read into memory,
//! gathered from what comes in pieces, and its tokens reserved. A read
//! into memory takes several chunks' worth at once where it can
//! ([`READ_AHEAD`]); the chunks after the first wait, unpaid, for their
//! turn.

use super::*;
use crate::proxy::http_gate::HttpGate;

/// The least chunk spliced. A smaller one is read: at a slow rate a chunk
/// is a packet or two, whose copy costs little, while pipes would take
/// four more descriptors per connection, and slow connections come by the
/// thousand.
const SPLICE_LEAST: usize = 16 * 1024;

/// How many chunks' worth one read into memory takes, within the
/// buffer's room: a connection paced 10 ms at a time then reads a tenth
/// as often as it sends, instead of once a chunk. What is read ahead
/// counts against `--max-buffer`, as the delay line does, so
/// back-pressure still holds.
const READ_AHEAD: usize = 8;

/// What a splice into the pipes brought.
enum Spliced {
    /// A chunk, now waiting for its tokens; or the end of the input.
    Some,
    /// Nothing: the socket has nothing now.
    Nothing,
    /// Nothing: the pipes are full.
    NoRoom,
}

impl Direction {
    /// Reads a chunk, if none waits for tokens and the buffer has room, and
    /// reserves its tokens; once stalled, what is read is thrown away
    /// unpaid. Returns whether anything was read.
    pub(super) fn read<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        from: &mut impl Side,
        to_splices: bool,
        bucket: &TokenBucket<C, S>,
        scratch: &mut [u8],
        gate: Option<&mut HttpGate>,
    ) -> io::Result<bool> {
        if self.unpaid.is_some() {
            return Ok(false);
        }
        let stalled = self
            .direction_faults
            .as_ref()
            .is_some_and(DirectionFaults::stalled);
        if stalled {
            // Read, never paid for: thrown away as what comes next is.
            self.ahead.clear();
        }
        let want = self.chunk_wanted(bucket, stalled);
        if want == 0 {
            return Ok(false);
        }
        // What was read ahead goes first: a whole chunk of it, or the
        // rest of it once nothing more will come.
        let last = self.ended || self.met.is_some();
        if !self.ahead.is_empty() && (self.ahead.len() >= want || last) {
            self.take_ahead(want, bucket);
            return Ok(true);
        }
        if self.ended {
            return Ok(false);
        }
        if let Some(err) = self.met.take() {
            return Err(err);
        }
        let untouched = self
            .direction_faults
            .as_ref()
            .is_none_or(|s| !s.touches_bytes());
        let gated = gate.is_some();
        // An HTTP gate lets a splice take only bytes it need not see.
        let (unseen, gate) = match gate {
            Some(gate) => (gate.unseen(self.way), Some(gate)),
            None => (u64::MAX, None),
        };
        let spliced = want.min(usize::try_from(unseen).unwrap_or(usize::MAX));
        let splices = from.splices() && to_splices && self.ahead.is_empty();
        if !stalled && untouched && spliced >= SPLICE_LEAST && splices {
            match self.splice(from, bucket, spliced)? {
                Spliced::Some => {
                    if let (Some(gate), Some((Chunk::Piped(piped), _))) = (gate, &self.unpaid) {
                        gate.went_by(self.way, piped.forward);
                    }
                    return Ok(true);
                }
                Spliced::Nothing => return Ok(false),
                // The pipes are full: this chunk waits in memory.
                Spliced::NoRoom => {}
            }
        }
        let want = want.min(scratch.len());
        // An HTTP gate sees each chunk as it is paid for, and may let the
        // next go by splice: bytes read ahead would pass it out of turn.
        let ahead = match (gated, stalled) {
            (false, false) => self.read_ahead_room(bucket, want, scratch.len()),
            _ => want,
        };
        let read = ahead.saturating_sub(self.ahead.len()).max(1);
        self.read_into_memory(from, bucket, &mut scratch[..read], want, stalled)
    }

    /// Takes the next chunk, of up to `want` bytes, from what was read
    /// ahead, and reserves its tokens.
    fn take_ahead<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        want: usize,
        bucket: &TokenBucket<C, S>,
    ) {
        let chunk = self.spares.copy(self.ahead.next(want));
        self.ahead.taken(chunk.len());
        self.more_behind |= !self.ahead.is_empty();
        let paid = bucket.reserve(chunk.len() as u64);
        self.unpaid = Some((Chunk::Bytes(chunk), paid));
    }

    /// How much one read into memory may take when a chunk of `want` is
    /// asked for: [`READ_AHEAD`] chunks, within the buffer's room and the
    /// scratch buffer.
    fn read_ahead_room<C: Clock, S: Deref<Target = BucketCell>>(
        &self,
        bucket: &TokenBucket<C, S>,
        want: usize,
        scratch: usize,
    ) -> usize {
        want.saturating_mul(READ_AHEAD)
            .min(self.room(bucket))
            .min(scratch)
            .max(want)
    }

    /// What the buffer has room for: its capacity at the bucket's rate and
    /// burst, less what the line holds.
    fn room<C: Clock, S: Deref<Target = BucketCell>>(&self, bucket: &TokenBucket<C, S>) -> usize {
        let (limit, burst) = bucket.limit_and_burst();
        let room = self
            .link
            .capacity(limit, burst)
            .saturating_sub(self.line.held());
        usize::try_from(room).unwrap_or(usize::MAX)
    }

    /// How much to take in next: a chunk of the rate's, as much as the
    /// buffer has room for; once stalled, as much as the scratch buffer
    /// holds, to be thrown away.
    fn chunk_wanted<C: Clock, S: Deref<Target = BucketCell>>(
        &self,
        bucket: &TokenBucket<C, S>,
        stalled: bool,
    ) -> usize {
        let (limit, burst) = bucket.limit_and_burst();
        // A chunk read into memory is at most the scratch buffer; one
        // spliced, the whole chunk the rate asks for: at 200 MiB/s, a wake
        // every 2.5 ms instead of every 0.3.
        match stalled {
            true => BUFFER,
            false => proxy_chunk_size(limit, burst, self.busy_in_proxy)
                .min(self.link.max_chunk())
                .min(self.room(bucket)),
        }
    }

    /// Reads up to `scratch.len()` bytes into the loop's one scratch
    /// buffer, and takes buffers of the direction's own only for what
    /// came: an idle connection then holds no buffer at all. After what
    /// was read ahead before, the first `want` bytes are the chunk whose
    /// tokens are reserved; the rest wait, read ahead. Once `stalled`,
    /// what came is thrown away unpaid.
    fn read_into_memory<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        from: &mut impl Side,
        bucket: &TokenBucket<C, S>,
        scratch: &mut [u8],
        want: usize,
        stalled: bool,
    ) -> io::Result<bool> {
        loop {
            match from.read(scratch) {
                Ok(0) => {
                    self.ended = true;
                    if !self.ahead.is_empty() {
                        self.take_ahead(want, bucket);
                    }
                    return Ok(true);
                }
                Ok(_) if stalled => {
                    self.read_any = true;
                    return Ok(true);
                }
                Ok(n) => {
                    let (n, met) = fill(from, scratch, n);
                    self.met = met;
                    self.read_any = true;
                    if let Some(received) = &self.received {
                        received.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    self.more_behind = n == scratch.len();
                    if n > want || !self.ahead.is_empty() {
                        self.ahead.keep(&scratch[..n]);
                        self.take_ahead(want, bucket);
                        return Ok(true);
                    }
                    let mut chunk = self.spares.buffer(n);
                    chunk.copy_from_slice(&scratch[..n]);
                    let paid = bucket.reserve(n as u64);
                    self.unpaid = Some((Chunk::Bytes(chunk), paid));
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // What was read ahead is all there is for now.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && !self.ahead.is_empty() => {
                    self.more_behind = false;
                    self.take_ahead(want, bucket);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }

    /// Splices a chunk of up to `want` bytes from `from` into the pipes,
    /// gathering what comes in pieces as a read does (see [`fill`]), and
    /// reserves its tokens.
    fn splice<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        from: &mut impl Side,
        bucket: &TokenBucket<C, S>,
        want: usize,
    ) -> io::Result<Spliced> {
        let first = loop {
            match from.splice_into(&mut self.pipes, want) {
                Ok(None) => return Ok(Spliced::NoRoom),
                Ok(Some(0)) => {
                    self.ended = true;
                    return Ok(Spliced::Some);
                }
                Ok(Some(n)) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Spliced::Nothing),
                Err(e) => return Err(e),
            }
        };
        // Full pipes, like a socket with nothing more, end the chunk.
        let (came, met) = gather(first, want, |came| {
            from.splice_into(&mut self.pipes, want - came)
                .map(|more| more.unwrap_or(0))
        });
        self.met = met;
        self.read_any = true;
        if let Some(received) = &self.received {
            received.fetch_add(came as u64, Ordering::Relaxed);
        }
        self.more_behind = came == want;
        let paid = bucket.reserve(came as u64);
        let piped = Piped {
            forward: came,
            discard: 0,
        };
        self.unpaid = Some((Chunk::Piped(piped), paid));
        Ok(Spliced::Some)
    }
}

/// Bytes read beyond the chunk being paid for: the next chunks, in
/// order, each taken and paid for in its turn without a read.
#[derive(Default)]
pub(super) struct ReadAhead {
    bytes: Vec<u8>,
    /// Where the bytes not yet taken start.
    from: usize,
}

impl ReadAhead {
    pub(super) fn len(&self) -> usize {
        self.bytes.len() - self.from
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets what it holds, and gives its memory back.
    pub(super) fn clear(&mut self) {
        *self = ReadAhead::default();
    }

    /// Keeps `more`, read after what it holds.
    fn keep(&mut self, more: &[u8]) {
        self.bytes.drain(..self.from);
        self.from = 0;
        self.bytes.extend_from_slice(more);
    }

    /// The next chunk: up to `want` of the bytes it holds. Tell it with
    /// [`taken`](Self::taken) once copied.
    fn next(&self, want: usize) -> &[u8] {
        let rest = &self.bytes[self.from..];
        &rest[..rest.len().min(want)]
    }

    /// Takes note that `len` bytes went on as a chunk; once none is left,
    /// an idle connection holds no memory for it.
    fn taken(&mut self, len: usize) {
        self.from += len;
        if self.is_empty() {
            self.clear();
        }
    }
}

/// Reads on into `buffer`, of which `first` bytes are filled, until it is
/// full or nothing more is there, and returns how much is filled. A read
/// brings what the socket's receive buffer held, and buffers differ, while
/// connections on one bucket take a turn per chunk: chunks cut short by a
/// small buffer gave their connection less than its share (0.88 against
/// 1.2 of it). An end is met again at the next read; an error is
/// returned, to be reported there, since the system reports it once.
fn fill(from: &mut impl Read, buffer: &mut [u8], first: usize) -> (usize, Option<io::Error>) {
    let len = buffer.len();
    gather(first, len, |filled| from.read(&mut buffer[filled..]))
}

/// Takes `more` (told how much is there already) from `first` on, until
/// `want` are there or nothing more is: the end, or a would-block. An
/// error is returned with what came before it.
fn gather(
    first: usize,
    want: usize,
    mut more: impl FnMut(usize) -> io::Result<usize>,
) -> (usize, Option<io::Error>) {
    let mut got = first;
    while got < want {
        match more(got) {
            Ok(came) if came > 0 => got += came,
            Ok(_) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                break;
            }
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives what it holds a piece at a time, then would block.
    struct WritePieces(Vec<Vec<u8>>);

    impl Read for WritePieces {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let piece = self.0.remove(0);
            let n = piece.len().min(buffer.len());
            buffer[..n].copy_from_slice(&piece[..n]);
            if n < piece.len() {
                self.0.insert(0, piece[n..].to_vec());
            }
            Ok(n)
        }
    }

    #[test]
    fn a_chunk_gathers_what_comes_in_pieces_up_to_its_size() {
        let mut buffer = [0; 100];
        let mut pieces = WritePieces(vec![vec![2; 30], vec![3; 30], vec![4; 50]]);
        buffer[..30].fill(1);
        assert_eq!(fill(&mut pieces, &mut buffer, 30).0, 100);
        assert_eq!(&buffer[..90], [[1; 30], [2; 30], [3; 30]].concat());
        assert_eq!(pieces.0, [vec![4; 40]], "the rest waits for the next chunk");
        let mut dry = WritePieces(Vec::new());
        assert_eq!(fill(&mut dry, &mut buffer, 7).0, 7, "nothing more there");
    }
}
