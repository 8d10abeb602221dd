//! Where the pump's chunks go: straight to the output file, or into a
//! delay line that passes them on when due (`--delay`, `--jitter`); and on
//! the way, the faults asked for (`--slice`, `--drop`, `--corrupt`).

use super::{CopyError, DelayedOutput, Descriptor, Ended, Forward};
use shape_bucket::{Clock, MonotonicClock};
use shape_impair::conditions::{Conditions, Watch};
use shape_impair::faults::{ResetStruck, Schedule, StreamFaults, Struck, Tally, Way};
use shape_leaves::lock::lock;
use shape_leaves::throughput::Throughput;
use std::fs::File;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The output of a copy.
pub struct Output {
    to: To,
    /// Faults to carry out on every chunk, if any are asked for, with the
    /// change of the conditions taken last, and where changes to them (and
    /// to the delay) come from.
    stream_faults: Option<(Mutex<Retuned>, Arc<Conditions>)>,
}

/// The faults of a stream, which change of the conditions they are at,
/// and when those that count time are due.
type Retuned = (StreamFaults, Watch, Schedule);

/// Where chunks go.
enum To {
    /// Written as soon as they are paid for.
    Direct(File),
    /// Into a delay line; `put_in` counts what the pump put there, which
    /// is not out yet: the line counts what it passes on.
    Delayed {
        line: DelayedOutput<MonotonicClock>,
        put_in: Box<Throughput>,
    },
}

impl Output {
    /// The output file itself.
    pub fn direct(file: File) -> Output {
        Output {
            to: To::Direct(file),
            stream_faults: None,
        }
    }

    /// The output behind `line`.
    pub fn delayed(line: DelayedOutput<MonotonicClock>) -> Output {
        Output {
            to: To::Delayed {
                line,
                put_in: Box::default(),
            },
            stream_faults: None,
        }
    }

    /// The same output, with `faults` done to every chunk, retuned
    /// (with the delay) when `conditions` change.
    pub fn with_faults(
        mut self,
        stream_faults: StreamFaults,
        conditions: Arc<Conditions>,
    ) -> Output {
        let retuned = (stream_faults, Watch::default(), Schedule::default());
        self.stream_faults = Some((Mutex::new(retuned), conditions));
        self
    }

    /// Where the pump counts its chunks: `forwarded`, the run's count of
    /// bytes out, for a direct output; for a delay line, which adds to
    /// `forwarded` itself as chunks leave, a count of its own.
    pub fn pump_count<'a>(&'a self, forwarded: &'a Throughput) -> &'a Throughput {
        match &self.to {
            To::Direct(_) => forwarded,
            To::Delayed { put_in, .. } => put_in,
        }
    }

    /// Pumps `input` to this output.
    pub fn forward(&self, pump: &mut dyn Forward, input: &File) -> Result<Ended, CopyError> {
        let Some((stream_faults, conditions)) = &self.stream_faults else {
            return match &self.to {
                To::Direct(file) => pump.to_file(input, file),
                To::Delayed { line, .. } => pump.to_writer(input, &mut &*line),
            };
        };
        let mut guard = lock(stream_faults);
        let (stream_faults, watch, schedule) = &mut *guard;
        let retune = Some(Retuning { conditions, watch });
        match &self.to {
            To::Direct(file) => pump.to_writer(
                input,
                &mut Faulty::new(&mut Descriptor(file), stream_faults, schedule, retune, None),
            ),
            To::Delayed { line, .. } => pump.to_writer(
                input,
                &mut Faulty::new(&mut &*line, stream_faults, schedule, retune, Some(line)),
            ),
        }
    }

    /// Whether a stall or reset has struck, to be set by timers too.
    pub fn struck(&self) -> Option<Arc<Struck>> {
        self.stream_faults
            .as_ref()
            .map(|(stream_faults, _)| lock(stream_faults).0.struck.clone())
    }

    /// A handle that can make closing the output a reset later (see
    /// [`reset_on_close`]), if the output is written directly.
    pub fn resetter(&self) -> Option<File> {
        match &self.to {
            To::Direct(file) => file.try_clone().ok(),
            To::Delayed { .. } => None,
        }
    }

    /// What the faults did so far.
    pub fn tally(&self) -> Option<Tally> {
        self.stream_faults
            .as_ref()
            .map(|(stream_faults, _)| lock(stream_faults).0.tally)
    }

    /// What the faults did so far, if nobody is copying through them at
    /// this moment: for a copy ended from outside, which must not wait for
    /// a write that may never end.
    pub fn tally_if_free(&self) -> Option<Tally> {
        let (stream_faults, _) = self.stream_faults.as_ref()?;
        let held = stream_faults.try_lock().ok()?;
        Some(held.0.tally)
    }

    /// Waits until every byte is out, and gives the output file back.
    /// `forwarded` then holds everything the pump put in: for records, the
    /// last one may have had no terminator for the line to count.
    pub fn finish(self, forwarded: &Throughput) -> io::Result<File> {
        match self.to {
            To::Direct(file) => Ok(file),
            To::Delayed { line, put_in } => {
                let file = line.finish()?;
                forwarded.settle(put_in.total());
                Ok(file)
            }
        }
    }
}

/// A writer that does `faults` to every write: loses it, flips bits in
/// it, or writes it in pieces with a pause between them; and takes changes
/// of the faults and of the delay as they come.
struct Faulty<'a, W: Write + ?Sized> {
    inner: &'a mut W,
    stream_faults: &'a mut StreamFaults,
    /// When the pause after a slice ends.
    schedule: &'a mut Schedule,
    retune: Option<Retuning<'a>>,
    /// The delay line written to, if the output delays.
    line: Option<&'a DelayedOutput<MonotonicClock>>,
    /// The chunk, copied so that corruption never touches the input.
    scratch: Vec<u8>,
}

/// Where changes come from, and which has been taken.
struct Retuning<'a> {
    conditions: &'a Conditions,
    watch: &'a mut Watch,
}

impl<'a, W: Write + ?Sized> Faulty<'a, W> {
    fn new(
        inner: &'a mut W,
        stream_faults: &'a mut StreamFaults,
        schedule: &'a mut Schedule,
        retune: Option<Retuning<'a>>,
        line: Option<&'a DelayedOutput<MonotonicClock>>,
    ) -> Self {
        Faulty {
            inner,
            stream_faults,
            schedule,
            retune,
            line,
            scratch: Vec::new(),
        }
    }

    /// Takes the faults and delay now in force, if they changed.
    fn retune(&mut self) {
        let Some(Retuning { conditions, watch }) = &mut self.retune else {
            return;
        };
        let Some(now) = watch.changed(conditions) else {
            return;
        };
        self.stream_faults.set_faults(now.faults(Way::Down));
        if let Some(line) = self.line {
            line.set_delay(now.delay(shape_impair::faults::Way::Down), now.jitter);
        }
    }

    /// Writes the first `passing` bytes of the scratch, in slices with the
    /// pause after each if slicing was asked for: a slice waits until the
    /// schedule says the pause after the last one has ended.
    fn write_in_slices(&mut self, passing: usize) -> io::Result<()> {
        let pause: Duration = self.stream_faults.faults().slice_pause;
        // Without a pause, no clock is read: this is every faulty write.
        let clock = (!pause.is_zero()).then_some(MonotonicClock);
        let mut at = 0;
        while at < passing {
            let (piece, ends_slice) = self.stream_faults.piece(passing - at);
            if let Some(clock) = &clock {
                let now = clock.now();
                if let Some(until) = self.schedule.paused(now) {
                    std::thread::sleep(Duration::from_nanos(until - now));
                }
            }
            self.inner.write_all(&self.scratch[at..at + piece])?;
            self.inner.flush()?;
            at += piece;
            if ends_slice && let Some(clock) = &clock {
                self.schedule.sliced(pause, clock.now());
            }
        }
        Ok(())
    }
}

impl<W: Write + ?Sized> Write for Faulty<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.retune();
        self.scratch.clear();
        self.scratch.extend_from_slice(buf);
        // What a seed does depends on where bytes are in the stream, not
        // on how they were read; what passes is gathered at the front, to
        // be sliced as one.
        let (kept, reset) = self.stream_faults.pass_through(&mut self.scratch);
        self.write_in_slices(kept)?;
        if reset {
            return Err(io::Error::other(ResetStruck));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Makes closing `output` a reset (RST), if it is a socket.
pub fn reset_on_close(output: &File) {
    let _ = rustix::net::sockopt::set_socket_linger(output, Some(Duration::ZERO));
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_impair::faults::{Faults, Slice};

    /// Keeps each write apart.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// What `data` becomes through a faulty output of `faults`, write by
    /// write.
    fn written(stream_faults: &mut StreamFaults, data: &[u8]) -> Vec<Vec<u8>> {
        let mut writes = Writes::default();
        Faulty::new(
            &mut writes,
            stream_faults,
            &mut Schedule::default(),
            None,
            None,
        )
        .write_all(data)
        .unwrap();
        writes.0
    }

    #[test]
    fn every_write_goes_out_in_slices_each_on_its_own() {
        let faults = Faults {
            slice: Some(Slice {
                size: 7,
                variation: 0,
            }),
            ..Faults::default()
        };
        let mut stream_faults = StreamFaults::new(faults, 1, 1000);
        let data: Vec<u8> = (0..100).collect();
        let writes = written(&mut stream_faults, &data);
        assert_eq!(writes.len(), 15);
        assert!(writes[..14].iter().all(|piece| piece.len() == 7));
        assert_eq!(writes.concat(), data);
    }

    #[test]
    fn a_seed_does_the_same_to_the_same_bytes_however_they_are_written() {
        let faults = Faults {
            slice: Some(Slice {
                size: 50,
                variation: 20,
            }),
            drop: shape_impair::faults::Loss::Random(0.2),
            corrupt: 0.01,
            ..Faults::default()
        };
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let written_in = |sizes: &[usize]| {
            let mut stream_faults = StreamFaults::new(faults, 9, 1000);
            let mut writes = Writes::default();
            let mut schedule = Schedule::default();
            let mut faulty =
                Faulty::new(&mut writes, &mut stream_faults, &mut schedule, None, None);
            let mut at = 0;
            for &size in sizes.iter().cycle() {
                if at == data.len() {
                    break;
                }
                let size = size.min(data.len() - at);
                faulty.write_all(&data[at..at + size]).unwrap();
                at += size;
            }
            (writes.0, stream_faults.tally)
        };
        let (pieces, tally) = written_in(&[100_000]);
        assert!(tally.dropped_blocks > 0 && tally.corrupted_bytes > 0);
        assert_eq!(tally.dropped_bytes, tally.dropped_blocks * 1000);
        assert!(
            pieces[..pieces.len() - 1]
                .iter()
                .all(|p| (30..=70).contains(&p.len()))
        );
        for sizes in [&[1][..], &[7, 993, 4096], &[65_536, 3]] {
            let (other, other_tally) = written_in(sizes);
            assert_eq!(other_tally, tally, "{sizes:?}");
            assert_eq!(other.concat(), pieces.concat(), "{sizes:?}");
        }
    }

    #[test]
    fn a_lost_chunk_is_consumed_and_never_written() {
        let faults = Faults {
            drop: shape_impair::faults::Loss::Random(1.0),
            ..Faults::default()
        };
        let mut stream_faults = StreamFaults::new(faults, 1, 1000);
        assert!(written(&mut stream_faults, &[1; 50]).is_empty());
        assert_eq!(stream_faults.tally.dropped_bytes, 50);
    }
}
