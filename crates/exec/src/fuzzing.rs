//! A traced program's calls, as a fuzz target: a call number, its six
//! arguments and the program's memory, all arbitrary, decoded as the
//! supervisor decodes a call it was told of. The program is not trusted:
//! a vector of four billion buffers, a header that points anywhere, or a
//! length that wraps must be read or refused without a panic and without
//! taking memory in proportion to what it claims.

use crate::call::{self, decode};

use std::io;

/// Decodes the call `data` describes: a byte that picks the call (past
/// the list: the next eight bytes are its number), six arguments of
/// eight bytes each, then the program's memory. An address with its top
/// bit set cannot be read; any other reads the memory from its offset,
/// round and round.
pub fn calls(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let mut words = rest
        .chunks(8)
        .map(|b| b.iter().rev().fold(0u64, |n, &b| n << 8 | u64::from(b)));
    // The calls the filter hands to shape, for most inputs to pick from.
    let nr = match crate::filter::handed().nth(usize::from(pick)) {
        Some(nr) => nr,
        None => words.next().unwrap_or(0) as i64,
    };
    let mut args = [0u64; 6];
    for arg in &mut args {
        *arg = words.next().unwrap_or(0);
    }
    let memory = rest.get(56..).unwrap_or_default();
    let mut read = |at: u64, into: &mut [u8]| -> io::Result<()> {
        if at >> 63 == 1 || memory.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        for (n, byte) in into.iter_mut().enumerate() {
            *byte = memory[(at as usize).wrapping_add(n) % memory.len()];
        }
        Ok(())
    };
    if let Ok(call::Call::Transfer(transfer)) = decode(nr, &args, &mut read) {
        let _ = transfer.length();
    }
    let _ = call::descriptor(nr, &args);
}
