//! A delayed output for the copy loop: `--delay` and `--jitter` outside
//! proxy mode.
//!
//! The copy loop writes each paid chunk into a [`Line`] instead of the
//! output, and a thread of its own passes every chunk on when it is due.
//! Writing into a full line blocks, so shape stops reading while the buffer
//! is full: the line never grows past its capacity. A failure of the output
//! is handed back to the copy loop at its next write, so it ends the run as
//! a direct write failure would.

use super::Descriptor;
use shape_bucket::{AtomicU32, Clock};
use shape_impair::slowlink::{Line, Spares};
use shape_leaves::lock::{lock, wait};
use shape_leaves::throughput::Throughput;
use std::fs::File;
use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// The line's capacity in bytes, asked at each write: it may follow a rate
/// that changes while running.
pub type Capacity = Box<dyn Fn() -> u64 + Send + Sync>;

/// What a chunk written counts for: its bytes, or the records it ends.
pub type UnitsOf = Box<dyn Fn(&[u8]) -> u64 + Send>;

/// The output behind a delay line. Write to `&DelayedOutput`; call
/// [`DelayedOutput::finish`] at the end to pass on what is still held.
pub struct DelayedOutput<C: Clock + Send + Sync + 'static> {
    shared: Arc<LineShared<C>>,
    writer: JoinHandle<(File, io::Result<()>)>,
}

struct LineShared<C> {
    state: Mutex<State>,
    /// Signalled when a chunk enters or leaves, the line closes or the
    /// output fails.
    changed: Condvar,
    capacity: Capacity,
    clock: C,
}

struct State {
    line: Line,
    /// Buffers reused for the chunks.
    spares: Spares,
    /// No more chunks will come.
    closed: bool,
    /// The output failed: how, for the copy loop's next write.
    failed: Option<io::Error>,
}

impl<C: Clock + Send + Sync + 'static> DelayedOutput<C> {
    /// Starts the thread that passes chunks from `line` on to `output`
    /// when due, adding what each counts for (`tally`) to `forwarded` once
    /// written.
    pub fn start(
        output: File,
        line: Line,
        capacity: Capacity,
        clock: C,
        (forwarded, tally): (Arc<Throughput>, UnitsOf),
    ) -> io::Result<Self> {
        let shared = Arc::new(LineShared {
            state: Mutex::new(State {
                line,
                spares: Spares::default(),
                closed: false,
                failed: None,
            }),
            changed: Condvar::new(),
            capacity,
            clock,
        });
        let writer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("delay".into())
                .spawn(move || {
                    let result = shared.pass_on(&output, &forwarded, &tally);
                    (output, result)
                })?
        };
        Ok(DelayedOutput { shared, writer })
    }

    /// Holds chunks written from now on for `delay`, varied by `jitter`.
    pub fn set_delay(&self, delay: Duration, jitter: Duration) {
        self.shared.lock().line.set_delay(delay, jitter);
        self.shared.changed.notify_all();
    }

    /// Waits until every chunk still held has been passed on, and gives
    /// the output back; or says how the output failed.
    pub fn finish(self) -> io::Result<File> {
        self.shared.lock().closed = true;
        self.shared.changed.notify_all();
        let (output, result) = self
            .writer
            .join()
            .map_err(|_| io::Error::other("the delay thread failed"))?;
        result.map(|()| output)
    }
}

impl<C: Clock + Send + Sync + 'static> Write for &DelayedOutput<C> {
    /// Puts as much of `buf` in the line as it has room for, waiting while
    /// it is full.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let shared = &self.shared;
        let mut state = shared.lock();
        loop {
            if let Some(err) = &state.failed {
                return Err(copy_of(err));
            }
            let room = (shared.capacity)().saturating_sub(state.line.held());
            if room > 0 {
                let n = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
                let chunk = state.spares.copy(&buf[..n]);
                state.line.push(chunk, shared.clock.now());
                shared.changed.notify_all();
                return Ok(n);
            }
            state = shared.wait(state);
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<C: Clock> LineShared<C> {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        wait(&self.changed, state)
    }

    /// The writer thread: passes each chunk on when due, until the line is
    /// closed and empty, or the output fails.
    fn pass_on(&self, output: &File, forwarded: &Throughput, tally: &UnitsOf) -> io::Result<()> {
        // Nothing wakes this sleep early: the chunk at the head, the only
        // one waited for, cannot become due any sooner.
        let never = AtomicU32::new(0);
        loop {
            let due = {
                let mut state = self.lock();
                loop {
                    match state.line.next_release() {
                        Some(due) => break due,
                        None if state.closed => return Ok(()),
                        None => state = self.wait(state),
                    }
                }
            };
            while self.clock.now() < due {
                self.clock.sleep_until(due, &never, 0);
            }
            // Only this thread takes chunks out, so the head is still the
            // one that is due.
            let Some(chunk) = self.lock().line.pop_due(due) else {
                continue;
            };
            let written = Descriptor(output).write_all(&chunk);
            let counts = tally(&chunk);
            let mut state = self.lock();
            state.line.done_with(&chunk);
            state.spares.recycle(chunk);
            if let Err(err) = written {
                state.failed = Some(copy_of(&err));
                self.changed.notify_all();
                return Err(err);
            }
            forwarded.add(counts);
            self.changed.notify_all();
        }
    }
}

/// The same error again: io::Error is not Clone, but its OS code or kind
/// and message are all that matter to the copy loop.
fn copy_of(err: &io::Error) -> io::Error {
    match err.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(err.kind(), err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_bucket::MonotonicClock;
    use std::io::Read;
    use std::time::{Duration, Instant};

    fn delayed(
        output: File,
        delay_ms: u64,
        capacity: u64,
    ) -> (DelayedOutput<MonotonicClock>, Arc<Throughput>) {
        let forwarded = Arc::new(Throughput::default());
        let line = Line::new(
            Duration::from_millis(delay_ms),
            Duration::ZERO,
            fastrand::Rng::with_seed(1),
        );
        let output = DelayedOutput::start(
            output,
            line,
            Box::new(move || capacity),
            MonotonicClock,
            (
                forwarded.clone(),
                Box::new(|chunk: &[u8]| chunk.len() as u64),
            ),
        )
        .unwrap();
        (output, forwarded)
    }

    fn pipe() -> (File, File) {
        let (read, write) = rustix::pipe::pipe().unwrap();
        (File::from(read), File::from(write))
    }

    /// Loose real-time check: each chunk arrives no sooner than the delay
    /// after it was written, in order and whole.
    #[test]
    fn chunks_arrive_in_order_after_the_delay() {
        let (mut read, write) = pipe();
        let (output, forwarded) = delayed(write, 60, 1 << 20);
        let sent = Instant::now();
        let reader = std::thread::spawn(move || {
            let mut first = [0; 3];
            read.read_exact(&mut first).unwrap();
            let waited = sent.elapsed();
            let mut rest = Vec::new();
            read.read_to_end(&mut rest).unwrap();
            (first, waited, rest)
        });
        (&output).write_all(b"abc").unwrap();
        (&output).write_all(b"defgh").unwrap();
        output.finish().unwrap();
        let (first, waited, rest) = reader.join().unwrap();
        assert_eq!(&first, b"abc");
        assert_eq!(rest, b"defgh");
        assert!(waited >= Duration::from_millis(60), "{waited:?}");
        assert_eq!(forwarded.total(), 8);
    }

    #[test]
    fn a_full_line_holds_the_writer_back() {
        let (mut read, write) = pipe();
        let (output, _) = delayed(write, 150, 100);
        let started = Instant::now();
        assert_eq!((&output).write(&[1; 300]).unwrap(), 100, "only what fits");
        (&output).write_all(&[2; 50]).unwrap();
        let held_back = started.elapsed();
        output.finish().unwrap();
        let mut got = Vec::new();
        read.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), 150);
        assert!(
            held_back >= Duration::from_millis(150),
            "the second write went in after {held_back:?}, before room was made"
        );
    }

    #[test]
    fn an_output_failure_reaches_the_writer() {
        let (read, write) = pipe();
        drop(read);
        let (output, _) = delayed(write, 1, 1 << 20);
        (&output).write_all(b"lost").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match (&output).write(b"more") {
                Err(err) => break err,
                Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Ok(_) => panic!("the failure never came back"),
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        assert_eq!(
            output.finish().unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
    }
}
