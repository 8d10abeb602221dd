//! How much moves at once: the chunk every mode takes from its input, pays
//! for and passes on, sized by the rate; and how much may go at once, the
//! burst a bucket has when none is set (a run's, a bandwidth toxic's).

use crate::counting::{Counting, TOKENS_PER_RECORD};
use shape_bucket::Limit;

/// The largest chunk: big enough that per-chunk costs vanish at any rate
/// (at 200 MiB/s it is one chunk every 2.5 ms), small enough that a chunk
/// never lingers and that a pipe grown to hold one stays within the usual
/// /proc/sys/fs/pipe-max-size of 1 MiB.
pub const MAX_CHUNK: usize = 512 * 1024;

/// How much time one chunk of bytes is worth, so that the pump wakes at
/// most 400 times a second: each wake-up costs a timed wait and two
/// splices, which 1,600 times a second (128 KiB chunks at 200 MiB/s) cost
/// twice pv's CPU, while four chunks in every 10 ms keep the flow even in
/// any 10 ms window.
const CHUNK_SECONDS: f64 = 0.0025;

/// A packet: no real link moves less at a time (tc's tbf asks a burst of
/// at least one MTU), and below [`PACKET_RATE`] a chunk is one.
pub const PACKET: f64 = 1500.0;

/// The rate below which 10 ms holds less than a [`PACKET`]: there a chunk
/// of 2.5 ms is a sliver (51 bytes at 20 KiB/s, 400 wake-ups a second
/// for each connection at any rate), and a packet's worth at a time is as
/// smooth as a real link of that rate.
pub const PACKET_RATE: f64 = PACKET * 100.0;

/// The longest a chunk of a packet may take at its rate, as pv writes every
/// 100 ms: what a reader waits for at most, a keystroke included.
const PACKET_SECONDS: f64 = 0.1;

/// The bytes of one chunk at `limit`: about 2.5 ms worth, or below
/// [`PACKET_RATE`] a packet (at most 100 ms worth), within [`bounded`]'s
/// bounds. Without a limit the burst bounds nothing, and the chunk is the
/// largest.
pub fn chunk_size(limit: Limit, burst: u64) -> usize {
    match limit {
        Limit::Unlimited => MAX_CHUNK,
        Limit::Rate(rate) => {
            let per_second = rate.bytes_per_sec();
            let worth = if per_second < PACKET_RATE {
                packet_worth(per_second)
            } else {
                per_second * CHUNK_SECONDS
            };
            bounded(worth, burst)
        }
    }
}

/// The least burst that holds two chunks of a packet (or, below 15 KB/s,
/// of 100 ms): one paid ahead while the one before it is written. A
/// burst of 100 ms would halve them below [`PACKET_RATE`] (twice pv's
/// wake-ups at 4 KiB/s), and tc's tbf, too, asks at least a packet.
pub fn packet_burst(per_second: f64) -> u64 {
    (2.0 * packet_worth(per_second)) as u64
}

/// The bytes of a chunk below [`PACKET_RATE`]: a packet, or 100 ms of the
/// rate if that is less.
fn packet_worth(per_second: f64) -> f64 {
    PACKET.min(per_second * PACKET_SECONDS)
}

/// `worth` bytes as a chunk: at least one byte, at most [`MAX_CHUNK`] and
/// at most half the burst. Half, so that the chunk paid ahead and the one
/// being written fit in the burst together and a small burst at a high
/// rate is not exceeded downstream.
fn bounded(worth: f64, burst: u64) -> usize {
    (worth.clamp(1.0, MAX_CHUNK as f64) as usize)
        .min(usize::try_from(burst / 2).unwrap_or(usize::MAX).max(1))
}

/// How much time a proxy's chunk is worth from [`PACKET_RATE`] on (a
/// packet, there): a connection's evenness is judged per 100 ms, which ten
/// chunks keep within a CV of 0.05, and a chunk of 2.5 ms made 200
/// connections at 200 kB/s ask the one loop for 160,000 steps a second.
const PROXY_CHUNK_SECONDS: f64 = 0.01;

/// The most chunks a second a proxy hands on over all its busy
/// directions, whichever of its loops carries them, before their chunks
/// grow: each is a wake-up of a program downstream too, on whichever
/// core. 400 streams at 200 kB/s in chunks of 10 ms woke a
/// Python echo server and its Python clients 40,000 times a second, and
/// a probe's round trip through `--delay 25ms` took 52 ms at the median
/// and 85 at the 90th percentile; in chunks of 20 ms, 51 and 52. Counted
/// per loop, two loops on two cores sent 200 streams of 200 kB/s in
/// chunks of 10 ms, 20,000 a second, for 1.5 times toxiproxy's CPU.
pub const PROXY_CHUNKS_A_SECOND: f64 = 10_000.0;

/// The bytes of one chunk of a proxy's direction at `limit`, while the
/// proxy has `busy` directions with bytes on their way: as [`chunk_size`]
/// below [`PACKET_RATE`]; from there on 10 ms of the rate, or more where
/// `busy` directions would hand on more than [`PROXY_CHUNKS_A_SECOND`] (at
/// most ten times more), within the same bounds.
pub fn proxy_chunk_size(limit: Limit, burst: u64, busy: usize) -> usize {
    match limit {
        Limit::Rate(rate) if rate.bytes_per_sec() >= PACKET_RATE => {
            let seconds = (busy as f64 / PROXY_CHUNKS_A_SECOND)
                .clamp(PROXY_CHUNK_SECONDS, 10.0 * PROXY_CHUNK_SECONDS);
            bounded(rate.bytes_per_sec() * seconds, burst)
        }
        _ => chunk_size(limit, burst),
    }
}

/// The most chunks a second a copy or a proxy's direction can be counted
/// on to wake for: past it the rate may not be reached.
pub const MOST_CHUNKS_A_SECOND: f64 = 10_000.0;

/// If `burst` is too small for `limit` (its chunks, at most half of it,
/// come more often than [`MOST_CHUNKS_A_SECOND`]), the line that says so
/// and the least burst that holds the rate.
pub fn burst_too_small(limit: Limit, burst: u64) -> Option<String> {
    let Limit::Rate(rate) = limit else {
        return None;
    };
    let per_second = rate.bytes_per_sec();
    let chunk = chunk_size(limit, burst) as f64;
    let chunks = per_second / chunk;
    (chunks > MOST_CHUNKS_A_SECOND).then(|| {
        let least = (2.0 * per_second / MOST_CHUNKS_A_SECOND).ceil() as u64;
        format!(
            "chunks of at most {} at {} are {} a second, more than shape can wake \
             for: the rate may not be reached (a burst of {} or more holds it)",
            shape_bucket::units::human_bytes(chunk as u64),
            crate::counting::Counting::Bytes.show_rate(per_second),
            chunks.round(),
            shape_bucket::units::human_bytes(least)
        )
    })
}

/// The most records paid for at once: a few writes per buffer of short
/// lines when unlimited.
pub const MAX_RECORDS: u64 = 1 << 16;

/// How much time one chunk of records is worth: records are few and
/// their writes small, so fewer wake-ups matter more than evenness within
/// a few milliseconds.
const RECORD_CHUNK_SECONDS: f64 = 0.005;

/// The records of one chunk at `limit` and `burst` (in tokens): about
/// five milliseconds' worth, at least one, at most [`MAX_RECORDS`] and at
/// most half the burst, as [`chunk_size`] for bytes.
pub fn chunk_records(limit: Limit, burst: u64) -> u64 {
    match limit {
        // Without a limit the burst bounds nothing.
        Limit::Unlimited => MAX_RECORDS,
        Limit::Rate(rate) => {
            let per_second = rate.bytes_per_sec() / TOKENS_PER_RECORD as f64;
            ((per_second * RECORD_CHUNK_SECONDS) as u64)
                .clamp(1, MAX_RECORDS)
                .min((burst / TOKENS_PER_RECORD / 2).max(1))
        }
    }
}

/// The burst when none was set: a tenth of a second at the rate, at least
/// two chunks of a packet ([`packet_burst`](packet_burst):
/// 3,000 bytes up to 30 KB/s, 200 ms below 15 KB/s) and one byte, and
/// 128 KiB unlimited (what a later limit would start with).
/// Records: one record, so that a crawl does not fire a volley at start;
/// above 100 records a second, ten milliseconds' worth, since a bucket of
/// one record cannot hold such a rate through the least delay in waking
/// (tokens that arrive while it is full are lost).
pub fn default_burst(limit: Limit, counting: Counting) -> u64 {
    match (counting, limit) {
        (Counting::Lines | Counting::Nul | Counting::Datagrams, Limit::Rate(rate)) => {
            let ten_ms = (rate.bytes_per_sec() / 100.0) as u64;
            let one = counting.tokens(1);
            one.max(ten_ms / one * one)
        }
        (Counting::Lines | Counting::Nul | Counting::Datagrams, Limit::Unlimited) => {
            counting.tokens(1)
        }
        (Counting::Bytes, Limit::Unlimited) => 128 * 1024,
        (Counting::Bytes, Limit::Rate(rate)) => {
            let per_second = rate.bytes_per_sec();
            ((per_second / 10.0) as u64)
                .max(packet_burst(per_second))
                .max(1)
        }
    }
}

/// How long a bandwidth toxic's bucket may run ahead: the tokens of this
/// much time (at 1000 KB/s, 40 KB), and below 75 KB/s two packets (a
/// chunk of 2.5 ms there is a sliver, and a thousand connections of them
/// cost more than toxiproxy, whose steps are 100 ms). Chunks are at most
/// half the burst, so this lets a loop's chunks grow to 20 ms when it
/// carries many busy directions ([`proxy_chunk_size`]): with 5 ms, 200
/// streams at 205 KB/s each way in chunks of a packet held a probe's
/// round trip through 25 ms each way at 88 to 168 ms (median) under a
/// Python load; with 40 ms, at 51.
const BURST_TIME: f64 = 0.04;

/// The burst of a bandwidth of `limit` unless told: two small chunks'
/// worth.
pub fn bandwidth_burst(limit: Limit) -> u64 {
    match limit {
        Limit::Unlimited => 1,
        Limit::Rate(rate) => ((rate.bytes_per_sec() * BURST_TIME) as u64)
            .max(packet_burst(rate.bytes_per_sec()))
            .max(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_too_small_for_its_rate_is_told_with_the_least_that_holds_it() {
        let fast = Limit::per_second(100 << 20);
        let said = burst_too_small(fast, 1024).expect("too small");
        assert!(said.contains("chunks of at most 512 B"), "{said}");
        assert!(said.contains("204800 a second"), "{said}");
        assert!(said.contains("a burst of 20.48 KiB or more"), "{said}");
        assert_eq!(burst_too_small(fast, 1 << 20), None);
        assert_eq!(
            burst_too_small(fast, 21_000),
            None,
            "the least it names holds"
        );
        assert_eq!(burst_too_small(Limit::Unlimited, 1), None);
        assert_eq!(burst_too_small(Limit::per_second(1000), 2), None);
    }

    #[test]
    fn chunks_follow_the_rate_within_bounds() {
        assert_eq!(chunk_size(Limit::Unlimited, 1 << 30), MAX_CHUNK);
        assert_eq!(chunk_size(Limit::Unlimited, 1000), MAX_CHUNK);
        // Below 150 KB/s a packet, at most 100 ms of the rate, and at
        // most half the burst (the default burst is 100 ms).
        assert_eq!(chunk_size(Limit::per_second(4096), 1 << 20), 409);
        assert_eq!(chunk_size(Limit::per_second(4096), 409), 204);
        assert_eq!(chunk_size(Limit::per_second(20_480), 1 << 20), 1500);
        assert_eq!(chunk_size(Limit::per_second(20_480), 2048), 1024);
        assert_eq!(chunk_size(Limit::per_second(149_999), 1 << 20), 1500);
        // From 150 KB/s, where 10 ms holds a packet, 2.5 ms.
        assert_eq!(chunk_size(Limit::per_second(150_000), 1 << 20), 375);
        assert_eq!(chunk_size(Limit::per_second(1), 1 << 20), 1);
        assert_eq!(chunk_size(Limit::per_second(1 << 20), 1 << 20), 2621);
        assert_eq!(chunk_size(Limit::per_second(200 << 20), 1 << 30), MAX_CHUNK);
        assert_eq!(chunk_size(Limit::per_second(200 << 20), 1000), 500);
        assert_eq!(chunk_size(Limit::per_second(200 << 20), 1), 1);
    }

    #[test]
    fn a_proxys_chunks_are_10_ms_from_where_10_ms_holds_a_packet() {
        let chunk = |per_second, burst| proxy_chunk_size(Limit::per_second(per_second), burst, 0);
        // Below 150 KB/s as everywhere else: a packet.
        assert_eq!(chunk(100_000, 1 << 20), 1500);
        // From there, 10 ms of the rate: a packet at 150 KB/s, so no step.
        assert_eq!(chunk(150_000, 1 << 20), 1500);
        assert_eq!(chunk(200_000, 1 << 20), 2000);
        assert_eq!(chunk(200_000, 2000), 1000);
        assert_eq!(chunk(200 << 20, 1 << 30), MAX_CHUNK);
        assert_eq!(proxy_chunk_size(Limit::Unlimited, 1, 0), MAX_CHUNK);
    }

    #[test]
    fn a_loop_with_many_busy_directions_hands_on_larger_chunks() {
        let at = |busy| proxy_chunk_size(Limit::per_second(200_000), 1 << 20, busy);
        // Up to 100 busy directions, 10 ms: 10,000 chunks a second.
        assert_eq!(at(1), 2000);
        assert_eq!(at(100), 2000);
        // Then the loop's chunks a second stay at 10,000.
        assert_eq!(at(200), 4000);
        assert_eq!(at(400), 8000);
        // At most 100 ms, and within the burst.
        assert_eq!(at(5000), 20_000);
        assert_eq!(
            proxy_chunk_size(Limit::per_second(200_000), 6000, 400),
            3000
        );
        // Below 150 KB/s, a packet however many.
        assert_eq!(
            proxy_chunk_size(Limit::per_second(20_000), 1 << 20, 5000),
            1500
        );
    }

    #[test]
    fn record_chunks_follow_the_rate_within_the_burst() {
        let records = |per_second: u64| Limit::per_second(per_second * TOKENS_PER_RECORD);
        let burst = |records: u64| records * TOKENS_PER_RECORD;
        assert_eq!(chunk_records(records(5), burst(1)), 1);
        assert_eq!(
            chunk_records(records(100_000), burst(1)),
            1,
            "a burst of one"
        );
        assert_eq!(chunk_records(records(100_000), burst(1000)), 500);
        assert_eq!(chunk_records(records(100_000), burst(400)), 200);
        assert_eq!(chunk_records(Limit::Unlimited, burst(1 << 20)), MAX_RECORDS);
        assert_eq!(chunk_records(Limit::Unlimited, burst(1)), MAX_RECORDS);
    }

    #[test]
    fn the_default_burst_is_a_tenth_of_a_second_two_packets_or_one_record() {
        let bytes = Counting::Bytes;
        assert_eq!(default_burst(Limit::per_second(5 << 20), bytes), 524_288);
        assert_eq!(default_burst(Limit::per_second(4), bytes), 1);
        assert_eq!(default_burst(Limit::per_second(4096), bytes), 819);
        assert_eq!(default_burst(Limit::per_second(20_000), bytes), 3000);
        assert_eq!(default_burst(Limit::per_second(40_000), bytes), 4000);
        assert_eq!(default_burst(Limit::Unlimited, bytes), 131_072);
        let lines = Counting::Lines;
        let per_second = |records: u64| Limit::per_second(records << 20);
        assert_eq!(default_burst(per_second(5), lines), 1 << 20);
        assert_eq!(default_burst(per_second(100), lines), 1 << 20);
        assert_eq!(default_burst(per_second(1000), lines), 10 << 20);
        assert_eq!(default_burst(per_second(100_000), lines), 1000 << 20);
        assert_eq!(default_burst(Limit::Unlimited, lines), 1 << 20);
    }

    #[test]
    fn a_bandwidth_runs_ahead_by_40_ms_or_two_packets() {
        assert_eq!(bandwidth_burst(Limit::per_second(1_000_000)), 40_000);
        assert_eq!(bandwidth_burst(Limit::per_second(205_000)), 8200);
        assert_eq!(bandwidth_burst(Limit::per_second(20_000)), 3000);
        assert_eq!(bandwidth_burst(Limit::per_second(10)), 2);
    }
}
