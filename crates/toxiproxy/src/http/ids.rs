//! The id each answer carries in `X-Toxiproxy-Request-Id`, made as
//! toxiproxy makes its own.

use std::sync::atomic::{AtomicU64, Ordering};

/// Request ids as toxiproxy's are made (xid): 20 characters of base32hex
/// over the time in seconds, the process and a counter, unique within a
/// machine and in the order they were made.
pub(super) struct RequestIds {
    process: u32,
    count: AtomicU64,
}

impl RequestIds {
    pub(super) fn new() -> RequestIds {
        RequestIds {
            process: std::process::id(),
            count: AtomicU64::new(fastrand::u64(..)),
        }
    }

    pub(super) fn next(&self) -> String {
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()) as u32;
        let count = self.count.fetch_add(1, Ordering::Relaxed);
        let mut raw = [0u8; 12];
        raw[..4].copy_from_slice(&seconds.to_be_bytes());
        raw[4..8].copy_from_slice(&self.process.to_be_bytes());
        raw[8..].copy_from_slice(&(count as u32).to_be_bytes());
        base32hex(&raw)
    }
}

/// `raw` in lower-case base32hex without padding (12 bytes: 20 characters).
fn base32hex(raw: &[u8; 12]) -> String {
    const DIGITS: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    let mut bits = 0u32;
    let mut held = 0u32;
    let mut text = String::with_capacity(20);
    for &byte in raw {
        bits = (bits << 8) | u32::from(byte);
        held += 8;
        while held >= 5 {
            held -= 5;
            text.push(DIGITS[((bits >> held) & 31) as usize] as char);
        }
    }
    if held > 0 {
        text.push(DIGITS[((bits << (5 - held)) & 31) as usize] as char);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_xids_in_order() {
        let ids = RequestIds::new();
        let (a, b) = (ids.next(), ids.next());
        assert_eq!(a.len(), 20);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'v').contains(&c))
        );
        assert_ne!(a, b);
        assert_eq!(base32hex(&[0; 12]), "0".repeat(20));
        assert_eq!(base32hex(&[0xff; 12]), "vvvvvvvvvvvvvvvvvvvg");
    }
}
