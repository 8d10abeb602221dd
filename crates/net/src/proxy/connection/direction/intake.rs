//! How a direction takes a chunk in: as large as the rate, the buffer's
//! room and the loop's load allow, spliced into its pipes where no fault
//! touches its bytes and both sides are sockets, else read into memory,
//! gathered from what comes in pieces, and its tokens reserved.

use super::*;
use crate::proxy::http_gate::HttpGate;

/// The least chunk spliced. A smaller one is read: at a slow rate a chunk
/// is a packet or two, whose copy costs little, while pipes would take
/// four more descriptors per connection, and slow connections come by the
/// thousand.
const SPLICE_LEAST: usize = 16 * 1024;

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
        if self.unpaid.is_some() || self.ended {
            return Ok(false);
        }
        let stalled = self
            .direction_faults
            .as_ref()
            .is_some_and(DirectionFaults::stalled);
        let want = self.chunk_wanted(bucket, stalled);
        if want == 0 {
            return Ok(false);
        }
        if let Some(err) = self.met.take() {
            return Err(err);
        }
        let untouched = self
            .direction_faults
            .as_ref()
            .is_none_or(|s| !s.touches_bytes());
        // An HTTP gate lets a splice take only bytes it need not see.
        let (unseen, gate) = match gate {
            Some(gate) => (gate.unseen(self.way), Some(gate)),
            None => (u64::MAX, None),
        };
        let spliced = want.min(usize::try_from(unseen).unwrap_or(usize::MAX));
        if !stalled && untouched && spliced >= SPLICE_LEAST && from.splices() && to_splices {
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
        self.read_into_memory(from, bucket, &mut scratch[..want], stalled)
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
        let room = self
            .link
            .capacity(limit, burst)
            .saturating_sub(self.line.held());
        // A chunk read into memory is at most the scratch buffer; one
        // spliced, the whole chunk the rate asks for: at 200 MiB/s, a wake
        // every 2.5 ms instead of every 0.3.
        match stalled {
            true => BUFFER,
            false => proxy_chunk_size(limit, burst, self.busy_in_loop)
                .min(self.link.max_chunk())
                .min(usize::try_from(room).unwrap_or(usize::MAX)),
        }
    }

    /// Reads a chunk of up to `scratch.len()` bytes into the loop's one
    /// scratch buffer, and takes a buffer of the direction's own only for
    /// what came: an idle connection then holds no buffer at all. Once
    /// `stalled`, what came is thrown away unpaid.
    fn read_into_memory<C: Clock, S: Deref<Target = BucketCell>>(
        &mut self,
        from: &mut impl Side,
        bucket: &TokenBucket<C, S>,
        scratch: &mut [u8],
        stalled: bool,
    ) -> io::Result<bool> {
        let want = scratch.len();
        loop {
            match from.read(scratch) {
                Ok(0) => {
                    self.ended = true;
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
                    let mut chunk = self.spares.buffer(n);
                    chunk.copy_from_slice(&scratch[..n]);
                    self.more_behind = n == want;
                    let paid = bucket.reserve(n as u64);
                    self.unpaid = Some((Chunk::Bytes(chunk), paid));
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
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
        self.spliced_at = bucket.clock().now();
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
