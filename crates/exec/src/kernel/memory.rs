//! The caller's memory: read and written with `process_vm_readv` and
//! `process_vm_writev`, or through /proc where a profile refuses them.

use super::refused;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether `process_vm_readv` and `process_vm_writev` were refused (a
/// container's profile, as Docker's default without CAP_SYS_PTRACE): the
/// caller's memory is then read and written through /proc.
static VM_CALLS_REFUSED: AtomicBool = AtomicBool::new(false);

/// Reads `buffer.len()` bytes of thread `tid`'s memory at `address`;
/// returns how many it could.
pub fn read_memory(tid: u32, address: u64, buffer: &mut [u8]) -> io::Result<usize> {
    if !VM_CALLS_REFUSED.load(Ordering::Relaxed) {
        let local = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: buffer.len(),
        };
        match across(tid, address, local, libc::process_vm_readv) {
            Err(err) if refused(&err) => VM_CALLS_REFUSED.store(true, Ordering::Relaxed),
            done => return done,
        }
    }
    memory_file(tid, false)?.read_at(buffer, address)
}

/// Writes `data` into thread `tid`'s memory at `address`; returns how
/// many bytes it could.
pub fn write_memory(tid: u32, address: u64, data: &[u8]) -> io::Result<usize> {
    if !VM_CALLS_REFUSED.load(Ordering::Relaxed) {
        let local = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        match across(tid, address, local, libc::process_vm_writev) {
            Err(err) if refused(&err) => VM_CALLS_REFUSED.store(true, Ordering::Relaxed),
            done => return done,
        }
    }
    memory_file(tid, true)?.write_at(data, address)
}

/// Thread `tid`'s memory as a file: the kernel lets a process open its
/// child's, as it would let it trace it, with no call a profile refuses.
fn memory_file(tid: u32, write: bool) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .open(format!("/proc/{tid}/mem"))
}

/// The signature of `process_vm_readv` and `process_vm_writev`.
type ProcessVm = unsafe extern "C" fn(
    libc::pid_t,
    *const libc::iovec,
    libc::c_ulong,
    *const libc::iovec,
    libc::c_ulong,
    libc::c_ulong,
) -> isize;

/// Moves `local` to or from thread `tid`'s memory at `address` with
/// `call`, one of the two above.
fn across(tid: u32, address: u64, local: libc::iovec, call: ProcessVm) -> io::Result<usize> {
    if local.iov_len == 0 {
        return Ok(0);
    }
    let remote = libc::iovec {
        iov_base: address as *mut libc::c_void,
        iov_len: local.iov_len,
    };
    // SAFETY: `local` is memory of ours, of its length (only read when
    // writing the caller's); the remote side is checked by the kernel,
    // which fails with EFAULT if it is not the caller's.
    let n = unsafe { call(tid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
