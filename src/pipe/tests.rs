//! The pump against a fake clock and real descriptors: every byte once,
//! at exactly the rate, on every path (spliced, buffered, refused).

use super::*;
use shape_bucket::{FakeClock, Fill, Limit};
use std::io::Seek;
use std::os::fd::AsFd;
use std::sync::Arc;

fn unlimited() -> TokenBucket<FakeClock> {
    TokenBucket::with_clock(Limit::Unlimited, 10, Fill::Full, FakeClock::new(0)).unwrap()
}

fn data(len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    fastrand::Rng::with_seed(len as u64).fill(&mut bytes);
    bytes
}

/// Hands out its data seven bytes at a time, failing with EINTR in
/// between.
struct Jerky {
    data: Vec<u8>,
    at: usize,
    interrupt: bool,
}

impl Read for Jerky {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.interrupt = !self.interrupt;
        if self.interrupt {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(self.data.len() - self.at).min(7);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[test]
fn buffered_every_byte_arrives_once_at_exactly_the_rate() {
    let clock = Arc::new(FakeClock::new(0));
    let bucket =
        TokenBucket::with_clock(Limit::per_second(1000), 10, Fill::Empty, clock.clone()).unwrap();
    let forwarded = Throughput::default();
    let data = data(5000);
    let mut input = Jerky {
        data: data.clone(),
        at: 0,
        interrupt: false,
    };
    let mut output = Vec::new();
    let ended = Pump::new(&bucket, &forwarded, None)
        .forward_buffered(&mut input, &mut output)
        .unwrap();
    assert_eq!(ended, Ended::InputDone);
    assert_eq!(output, data);
    assert_eq!(forwarded.total(), 5000);
    assert_eq!(clock.now(), 5_000_000_000);
}

#[test]
fn stop_after_ends_mid_input_and_stays_ended() {
    let bucket = unlimited();
    let forwarded = Throughput::default();
    let mut pump = Pump::new(&bucket, &forwarded, Some(300_000));
    let zero = File::open("/dev/zero").unwrap();
    let (read, write) = rustix::pipe::pipe().unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        File::from(read).read_to_end(&mut got).unwrap();
        got.len()
    });
    let output = File::from(write);
    assert_eq!(pump.forward(&zero, &output).unwrap(), Ended::LimitReached);
    assert_eq!(pump.forward(&zero, &output).unwrap(), Ended::LimitReached);
    drop(output);
    assert_eq!(reader.join().unwrap(), 300_000);
}

/// Copies `data` from a file to a file and returns what the output
/// got, and whether the pump still splices.
fn through(data: &[u8]) -> (Vec<u8>, bool) {
    let dir = tempfile::tempdir().unwrap();
    let input_path = dir.path().join("in");
    std::fs::write(&input_path, data).unwrap();
    let output_path = dir.path().join("out");
    let out = File::create(&output_path).unwrap();
    let bucket = unlimited();
    let forwarded = Throughput::default();
    let mut pump = Pump::new(&bucket, &forwarded, None);
    let ended = pump
        .forward(&File::open(&input_path).unwrap(), &out)
        .unwrap();
    assert_eq!(ended, Ended::InputDone);
    assert_eq!(forwarded.total(), data.len() as u64);
    let got = std::fs::read(&output_path).unwrap();
    (got, pump.hand.is_some())
}

#[test]
fn a_file_splices_into_a_file() {
    let data = data(1_000_003);
    let (got, spliced) = through(&data);
    assert!(got == data);
    assert!(spliced);
}

#[test]
fn an_input_that_refuses_splice_is_read_instead() {
    // procfs files like this one cannot be spliced from.
    let expected = std::fs::read("/proc/self/cmdline").unwrap();
    let bucket = unlimited();
    let forwarded = Throughput::default();
    let mut pump = Pump::new(&bucket, &forwarded, None);
    let (read, write) = rustix::pipe::pipe().unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        File::from(read).read_to_end(&mut got).unwrap();
        got
    });
    let output = File::from(write);
    let input = File::open("/proc/self/cmdline").unwrap();
    assert_eq!(pump.forward(&input, &output).unwrap(), Ended::InputDone);
    drop(output);
    assert_eq!(reader.join().unwrap(), expected);
    assert!(pump.hand.is_some(), "the output can still be spliced to");
}

#[test]
fn bytes_in_the_hand_reach_an_output_that_refused_splice() {
    // Old kernels refuse to splice to terminals and appending files;
    // what is in the hand then goes out by write.
    let bucket = unlimited();
    let forwarded = Throughput::default();
    let mut pump = Pump::new(&bucket, &forwarded, None);
    let hand = hand().unwrap();
    let data = data(50_000);
    File::from(hand.write.try_clone().unwrap())
        .write_all(&data)
        .unwrap();
    let mut output = tempfile::tempfile().unwrap();
    pump.write_from_hand(hand, data.len(), &output).unwrap();
    let mut got = Vec::new();
    output.seek(std::io::SeekFrom::Start(0)).unwrap();
    output.read_to_end(&mut got).unwrap();
    assert!(got == data);
}

#[test]
fn bytes_written_after_splice_is_refused_are_counted() {
    // Splice to a file opened for appending fails with EINVAL; the
    // chunk in hand then goes out by write and must still count.
    let dir = tempfile::tempdir().unwrap();
    let data = data(1_000_003);
    std::fs::write(dir.path().join("in"), &data).unwrap();
    let output = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("out"))
        .unwrap();
    let bucket = unlimited();
    let forwarded = Throughput::default();
    let mut pump = Pump::new(&bucket, &forwarded, None);
    let input = File::open(dir.path().join("in")).unwrap();
    assert_eq!(pump.forward(&input, &output).unwrap(), Ended::InputDone);
    assert!(std::fs::read(dir.path().join("out")).unwrap() == data);
    assert_eq!(forwarded.total(), data.len() as u64);
}

#[test]
fn a_non_blocking_output_is_waited_for_not_failed() {
    let bucket = unlimited();
    let forwarded = Throughput::default();
    let mut pump = Pump::new(&bucket, &forwarded, Some(2_000_000));
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::NONBLOCK).unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut read = File::from(read);
        let mut buf = vec![0; 1 << 16];
        loop {
            match read.read(&mut buf) {
                Ok(0) => return got.len(),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_micros(200))
                }
                Err(e) => panic!("{e}"),
            }
        }
    });
    let output = File::from(write);
    let ended = pump
        .forward(&File::open("/dev/zero").unwrap(), &output)
        .unwrap();
    assert_eq!(ended, Ended::LimitReached);
    drop(output);
    assert_eq!(reader.join().unwrap(), 2_000_000);
}

#[test]
fn pipes_on_either_side_grow_to_hold_a_whole_chunk() {
    // With the default 64 KiB a chunk of MAX_CHUNK crosses each pipe in
    // two splices and two wake-ups; grown, in one.
    let data = data(MAX_CHUNK * 3 + 5);
    let (input_read, input_write) = rustix::pipe::pipe().unwrap();
    let (output_read, output_write) = rustix::pipe::pipe().unwrap();
    for end in [&input_write, &output_write] {
        rustix::pipe::fcntl_setpipe_size(end, 65_536).unwrap();
    }
    let writer = {
        let data = data.clone();
        std::thread::spawn(move || File::from(input_write).write_all(&data).unwrap())
    };
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        File::from(output_read).read_to_end(&mut got).unwrap();
        got
    });
    let bucket = unlimited();
    let forwarded = Throughput::default();
    let mut pump = Pump::new(&bucket, &forwarded, None);
    let (input, output) = (File::from(input_read), File::from(output_write));
    assert_eq!(pump.forward(&input, &output).unwrap(), Ended::InputDone);
    for end in [input.as_fd(), output.as_fd()] {
        assert!(rustix::pipe::fcntl_getpipe_size(end).unwrap() >= MAX_CHUNK);
    }
    drop(output);
    writer.join().unwrap();
    assert!(reader.join().unwrap() == data);
}
