//! The socket calls shape makes for the command with raw addresses, as
//! the caller gave them: sends, receives, sockets and accepts.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Sends `data` on socket `fd`, to the address of raw bytes `name` if
/// any (as the caller gave it), with `flags`.
pub fn send_to(fd: BorrowedFd<'_>, data: &[u8], name: &[u8], flags: i32) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: an all-zero msghdr is valid.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    if !name.is_empty() {
        message.msg_name = name.as_ptr() as *mut libc::c_void;
        message.msg_namelen = name.len() as libc::socklen_t;
    }
    // SAFETY: every pointer in `message` is to memory of ours, of the
    // length given; the kernel only reads it.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &message, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Receives into `buffer` from socket `fd` with `flags`, and the sender's
/// address into `name`. Returns the count the call returned (with
/// MSG_TRUNC, a datagram's whole length) and the address's length.
pub fn receive_from(
    fd: BorrowedFd<'_>,
    buffer: &mut [u8],
    name: &mut [u8],
    flags: i32,
) -> io::Result<(usize, usize)> {
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // SAFETY: an all-zero msghdr is valid.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_name = name.as_mut_ptr().cast();
    message.msg_namelen = name.len() as libc::socklen_t;
    // SAFETY: every pointer in `message` is to memory of ours, of the
    // length given.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut message, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((n as usize, message.msg_namelen as usize))
}

/// A new socket, as `socket(domain, kind, protocol)` makes it.
pub fn socket(domain: i32, kind: i32, protocol: i32) -> io::Result<OwnedFd> {
    // SAFETY: socket returns a new descriptor or -1.
    let fd = unsafe { libc::socket(domain, kind, protocol) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A connection accepted on `listener` (which must not block: see the
/// caller) with `accept4`'s `flags`, and its peer's address into `name`,
/// whose length is returned.
pub fn accept(
    listener: BorrowedFd<'_>,
    name: &mut [u8],
    flags: i32,
) -> io::Result<(OwnedFd, usize)> {
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: `name` is ours, of the length given.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            name.as_mut_ptr().cast(),
            &mut len,
            flags,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by no one else.
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, len as usize))
}
