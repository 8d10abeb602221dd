//! Where the pump's chunks go: straight to the output file, or into a
//! delay line that passes them on when due (`--delay`, `--jitter`).

use super::{CopyError, DelayedOutput, Ended, Forward};
use shape_bucket::MonotonicClock;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// The output of a copy.
pub enum Output {
    /// Chunks are written as soon as they are paid for.
    Direct(File),
    /// Chunks wait in a delay line; `put_in` counts what the pump put
    /// there, which is not out yet: the line counts what it passes on.
    Delayed {
        line: DelayedOutput<MonotonicClock>,
        put_in: AtomicU64,
    },
}

impl Output {
    /// The output behind `line`.
    pub fn delayed(line: DelayedOutput<MonotonicClock>) -> Output {
        Output::Delayed {
            line,
            put_in: AtomicU64::new(0),
        }
    }

    /// Where the pump counts its chunks: `forwarded`, the run's count of
    /// bytes out, for a direct output; for a delay line, which adds to
    /// `forwarded` itself as chunks leave, a count of its own.
    pub fn pump_count<'a>(&'a self, forwarded: &'a AtomicU64) -> &'a AtomicU64 {
        match self {
            Output::Direct(_) => forwarded,
            Output::Delayed { put_in, .. } => put_in,
        }
    }

    /// Pumps `input` to this output.
    pub fn forward(&self, pump: &mut dyn Forward, input: &File) -> Result<Ended, CopyError> {
        match self {
            Output::Direct(file) => pump.to_file(input, file),
            Output::Delayed { line, .. } => pump.to_writer(input, &mut &*line),
        }
    }

    /// Waits until every byte is out, and gives the output file back.
    /// `forwarded` then holds everything the pump put in: for records, the
    /// last one may have had no terminator for the line to count.
    pub fn finish(self, forwarded: &AtomicU64) -> io::Result<File> {
        match self {
            Output::Direct(file) => Ok(file),
            Output::Delayed { line, put_in } => {
                let file = line.finish()?;
                forwarded.store(put_in.into_inner(), Ordering::Relaxed);
                Ok(file)
            }
        }
    }
}
