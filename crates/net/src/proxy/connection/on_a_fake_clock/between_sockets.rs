//! A direction between real sockets, still on the fake clock: where its
//! chunks are spliced through pipes of its own, and how those pipes keep
//! their order with chunks read into memory, and are let go.

use super::*;
use crate::proxy::stream::Stream;
use std::os::unix::net::UnixStream;

/// A direction's two sockets, as the loop holds them.
struct SocketPair {
    from: Stream,
    to: Stream,
}

impl SocketPair {
    /// The sockets, and the test's ends of them: where it writes what the
    /// direction reads, and where it reads what the direction writes.
    fn new() -> (SocketPair, UnixStream, UnixStream) {
        let (writer, proxy_in) = UnixStream::pair().unwrap();
        let (proxy_out, reader) = UnixStream::pair().unwrap();
        for end in [&proxy_in, &proxy_out] {
            end.set_nonblocking(true).unwrap();
        }
        let sockets = SocketPair {
            from: Stream::unix(mio::net::UnixStream::from_std(proxy_in)),
            to: Stream::unix(mio::net::UnixStream::from_std(proxy_out)),
        };
        (sockets, writer, reader)
    }

    /// Steps `bench`'s direction once, every socket event taken as it
    /// would be from poll.
    fn step(&mut self, bench: &mut DirectionBench) -> Option<u64> {
        self.from.stirred();
        self.to.stirred();
        bench.step(&mut self.from, &mut self.to).unwrap()
    }
}

#[test]
fn spliced_chunks_and_chunks_in_memory_keep_their_order_through_the_line() {
    // With 20 ms of delay, so that the line holds many chunks: bytes are
    // spliced through pipes while no fault touches them, read into memory
    // while one does (a corruption too rare to strike), and spliced again
    // once it is gone. Both kinds wait in the one line; every byte comes
    // out once, in order.
    // 20 MiB/s: chunks of 200 KiB, each waiting for its tokens a while.
    let mut bench = DirectionBench::new(
        Limit::per_second(20 << 20),
        1 << 20,
        Duration::from_millis(20),
        Faults::default(),
    );
    let (mut sockets, mut writer, mut reader) = SocketPair::new();
    let data: Vec<u8> = (0..6_000_000u32).map(|i| (i % 241) as u8).collect();
    let sent = data.clone();
    let feeder = std::thread::spawn(move || {
        std::io::Write::write_all(&mut writer, &sent).unwrap();
    });
    let drain = std::thread::spawn(move || {
        let mut back = Vec::new();
        reader.read_to_end(&mut back).unwrap();
        back
    });
    let touching = Faults {
        corrupt: f64::MIN_POSITIVE,
        ..Faults::default()
    };
    let in_force = |faults| InForce {
        faults: [Faults::default(), faults],
        delay: [Duration::from_millis(20); 2],
        jitter: Duration::ZERO,
    };
    let mut phase = 0;
    while !bench.direction.done() {
        sockets.step(&mut bench);
        // From a third of the data out to two thirds, a fault touches the
        // bytes: whatever the threads' timing, 2 MB are read meanwhile.
        let out = bench.passed.total();
        match phase {
            0 if out > 2_000_000 => bench.conditions.set(in_force(touching)),
            1 if out > 4_000_000 => bench.conditions.set(in_force(Faults::default())),
            _ => {}
        }
        if out > 2_000_000 * (phase + 1) && phase < 2 {
            phase += 1;
        }
        bench.clock.advance(MS);
        std::thread::yield_now();
    }
    feeder.join().unwrap();
    drop(sockets);
    let back = drain.join().unwrap();
    assert!(
        back == data,
        "{} of {} bytes, in order",
        back.len(),
        data.len()
    );
    let [read, spliced] = bench.direction.chunks;
    assert!(spliced > 0, "no chunk was spliced");
    assert!(read > 0, "no chunk was read into memory");
}

#[test]
fn a_direction_holds_no_pipe_once_its_spliced_bytes_are_out() {
    // A chunk spliced, then nothing: its pipe went back to the spares the
    // moment it emptied, and nothing is left to wait for.
    let mut bench =
        DirectionBench::new(Limit::Unlimited, 1 << 20, Duration::ZERO, Faults::default());
    let (mut sockets, mut writer, mut reader) = SocketPair::new();
    std::io::Write::write_all(&mut writer, &[7; 100_000]).unwrap();
    let mut wake = sockets.step(&mut bench);
    while bench.passed.total() < 100_000 {
        wake = sockets.step(&mut bench);
    }
    let mut back = vec![0; 100_000];
    reader.read_exact(&mut back).unwrap();
    assert!(back.iter().all(|&byte| byte == 7));
    assert!(bench.direction.chunks[1] > 0, "the chunk went by a pipe");
    assert_eq!(bench.direction.pipes(), 0, "given back");
    assert_eq!(wake, None, "nothing more to wait for");
}
