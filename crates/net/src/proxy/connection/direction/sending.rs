//! How a direction sends what is due: each chunk in its turn, in the
//! pieces and pauses its faults allow, from memory or from its pipes, the
//! tail a fault cut off thrown away after it; and, once all is out, the
//! end passed on to the other side.

use super::*;

impl Direction {
    /// Ends the direction once all its data is out: the other side's
    /// writing is shut when the held close (if any) is over, or left open
    /// if the direction stalled. Returns when to step again if the close
    /// is held.
    pub(super) fn finish(&mut self, to: &mut impl Side, now: u64) -> io::Result<Option<u64>> {
        if self.done {
            return Ok(None);
        }
        if let Some(direction_faults) = &mut self.direction_faults {
            if direction_faults.stalled() {
                self.done = true;
                return Ok(None);
            }
            if let Err(at) = direction_faults.close_due(now) {
                return Ok(Some(at));
            }
        }
        to.shutdown_write()?;
        self.done = true;
        Ok(None)
    }

    /// Writes what is due at `now` until the output would block or a
    /// pause between slices begins. Returns whether anything went out,
    /// and when the pause ends if one began.
    pub(super) fn send_due(
        &mut self,
        to: &mut impl Side,
        now: u64,
        forwarded: &Throughput,
        scratch: &mut [u8],
    ) -> io::Result<(bool, Option<u64>)> {
        let mut progress = false;
        loop {
            if self.sending.is_none() {
                self.sending = self.line.pop_due(now).map(|chunk| (chunk, 0));
            }
            let Some((chunk, out)) = &mut self.sending else {
                return Ok((progress, None));
            };
            if let Chunk::Reset = chunk {
                return Err(io::Error::other(ResetByRule));
            }
            let due = chunk.len() - *out;
            if due > 0 {
                let piece = match &mut self.direction_faults {
                    Some(direction_faults) => match direction_faults.writable(due, now) {
                        Ok(piece) => piece,
                        Err(until) => return Ok((progress, Some(until))),
                    },
                    None => due,
                };
                let written = match chunk {
                    Chunk::Bytes(bytes) => to.write(&bytes[*out..*out + piece]),
                    Chunk::Piped(_) => to.splice_from(&mut self.pipes, piece),
                    Chunk::Reset => Ok(0),
                };
                match written {
                    Ok(n) => {
                        *out += n;
                        self.wrote_any |= n > 0;
                        forwarded.add(n as u64);
                        progress = true;
                        if let Some(direction_faults) = &mut self.direction_faults {
                            direction_faults.wrote(n, now);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        return Ok((progress, None));
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if *out == chunk.len() {
                let (chunk, _) = self.sending.take().expect("just written from");
                self.line.done_with(&chunk);
                match chunk {
                    Chunk::Bytes(bytes) => self.spares.recycle(bytes),
                    // What a fault cut off after it came in goes now, in
                    // its turn.
                    Chunk::Piped(piped) => self.pipes.discard(piped.discard, scratch)?,
                    Chunk::Reset => {}
                }
            }
        }
    }
}
