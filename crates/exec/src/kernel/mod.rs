//! The kernel calls of `--exec` that no safe wrapper offers, each in the
//! file of its idea: starting the command under a seccomp filter whose
//! listener shape holds (`spawn.rs`), below a reaper of shape's that
//! leaves nothing behind when shape dies (`reaper.rs`), the command's
//! child between clone and exec (`child.rs`), the listener's ioctls
//! (`listener.rs`), the command's processes by pidfd (`pidfds.rs`), its
//! memory (`memory.rs`), and the socket calls shape makes for it with raw
//! addresses (`sockets.rs`); here, the filter's BPF instructions. Every
//! `unsafe` of `--exec` is in this module, each with why it is sound.

mod child;
mod listener;
mod memory;
mod pidfds;
mod reaper;
mod sockets;
mod spawn;

pub use listener::*;
pub use memory::*;
pub use pidfds::*;
pub use sockets::*;
pub use spawn::*;

use std::io;

/// Whether `err` is a call refused by a seccomp profile (ENOSYS or EPERM,
/// as it is written).
pub fn refused(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOSYS | libc::EPERM))
}

/// The BPF instruction `code` with constant `k`.
pub fn statement(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// The BPF jump `code` on `k`, `jt` instructions on if true, `jf` if false.
pub fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}
