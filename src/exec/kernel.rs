//! The kernel calls of `--exec` that no safe wrapper offers: starting the
//! command under a seccomp filter whose listener shape holds (the child
//! shares shape's table of descriptors until its exec), the listener's
//! ioctls (receiving a call, answering it, placing a socket in the
//! caller), taking a descriptor from the command (`pidfd_getfd`, where a
//! profile allows it), reading and writing its memory (`process_vm_readv`
//! and `process_vm_writev`, or /proc where a profile refuses them), and
//! the socket calls shape makes for it with raw addresses. Every `unsafe`
//! of `--exec` is in this file, each with why it is sound.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// A child started under the filter: its pid, a pidfd for it, the
/// filter's listener, and the read end of the pipe on which the child
/// writes the errno of a failed `execve` (it closes on success).
pub struct Spawned {
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub listener: OwnedFd,
    pub exec_failed: OwnedFd,
}

/// Which step of starting the command failed, and how.
#[derive(Debug)]
pub struct SetupFailed {
    pub step: &'static str,
    pub err: io::Error,
}

/// A pipe, both ends closed on exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is two ints, as pipe2 writes; on success both are new
    // descriptors that nothing else owns.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Starts `path` with `argv` and `envp` under `filter`, whose calls that
/// return USER_NOTIF are handed to the listener returned. The child
/// shares shape's table of descriptors until it runs the command (clone
/// with CLONE_FILES and CLONE_VFORK: shape waits meanwhile), so the
/// listener the filter makes in the child is shape's too, and taking it
/// needs no `pidfd_getfd`, which Docker's default seccomp profile refuses.
/// The child sets `no_new_privs` (which needs no privilege), installs the
/// filter and runs the command; `execve` gives it a table of its own,
/// without the listener and the pipes, all closed on exec.
pub fn spawn(
    path: &CStr,
    argv: &[CString],
    envp: &[CString],
    filter: &[libc::sock_filter],
) -> Result<Spawned, SetupFailed> {
    let fail = |step| move |err| SetupFailed { step, err };
    let (ready_r, ready_w) = pipe().map_err(fail("pipe"))?;
    let (failed_r, failed_w) = pipe().map_err(fail("pipe"))?;
    // Everything the child needs is made before the clone: after it, the
    // child may only make async-signal-safe calls.
    let (argv_ptrs, envp_ptrs) = (null_ended(argv), null_ended(envp));
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    let listeners_before = seccomp_listeners();
    let flags = (libc::CLONE_FILES | libc::CLONE_VFORK | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: clone without CLONE_VM, as fork, with a copy of this
    // process's memory: the child runs only the async-signal-safe calls
    // of `child_runs`, on memory made before, and never returns. Shape's
    // thread waits until the child has run the command or ended.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) } as i32;
    if pid < 0 {
        return Err(SetupFailed {
            step: "clone",
            err: io::Error::last_os_error(),
        });
    }
    if pid == 0 {
        // SAFETY: in the child, see above.
        unsafe {
            child_runs(
                ready_w.as_raw_fd(),
                failed_w.as_raw_fd(),
                &program,
                path,
                &argv_ptrs,
                &envp_ptrs,
            )
        }
    }
    // The child has run the command (its copies of the write ends closed
    // on exec) or ended: reading meets the end, or what it said.
    drop((ready_w, failed_w));
    // SAFETY: a pid of our own child, which we reap only through it.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let reap = |err: io::Error, step| {
        // SAFETY: kill and waitpid on our own child, which is then gone.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        SetupFailed { step, err }
    };
    if pidfd < 0 {
        return Err(reap(io::Error::last_os_error(), "pidfd_open"));
    }
    // SAFETY: just made, owned by no one else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    if let Err((err, step)) = filter_installed(&ready_r) {
        return Err(reap(err, step));
    }
    let made = seccomp_listeners()
        .into_iter()
        .find(|fd| !listeners_before.contains(fd));
    let Some(listener) = made else {
        let err = io::Error::other("its listener is not in the table it shared");
        return Err(reap(err, "seccomp(SECCOMP_SET_MODE_FILTER)"));
    };
    // SAFETY: made by the child in the table it shared with this process,
    // and owned by no one else: the child's own table, since its exec,
    // closed it.
    let listener = unsafe { OwnedFd::from_raw_fd(listener) };
    Ok(Spawned {
        pid,
        pidfd,
        listener,
        exec_failed: failed_r,
    })
}

/// The seccomp listeners among this process's descriptors.
fn seccomp_listeners() -> Vec<RawFd> {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let link = std::fs::read_link(entry.path()).ok()?;
            let fd: RawFd = entry.file_name().to_str()?.parse().ok()?;
            (link.as_os_str() == "anon_inode:seccomp notify").then_some(fd)
        })
        .collect()
}

/// `strings` as the pointers `execve` takes, ended by a null one.
fn null_ended(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Reads the child's word on `ready`: it writes an errno and the step
/// that failed if it could not install the filter; an end without one
/// means it is installed.
fn filter_installed(ready: &OwnedFd) -> Result<(), (io::Error, &'static str)> {
    let mut said = [0u8; 8];
    let n = loop {
        match rustix::io::read(ready, &mut said) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other.map_err(io::Error::from),
        }
    };
    match n {
        Ok(0) => Ok(()),
        Ok(_) => {
            let errno = i32::from_ne_bytes(said[..4].try_into().unwrap_or_default());
            let step = match said[4] {
                0 => "prctl(PR_SET_NO_NEW_PRIVS)",
                _ => "seccomp(SECCOMP_SET_MODE_FILTER)",
            };
            Err((io::Error::from_raw_os_error(errno), step))
        }
        Err(err) => Err((err, "read")),
    }
}

/// The child's side of [`spawn`]. Only async-signal-safe calls: it runs
/// between clone and exec in a copy of a process that has threads, and
/// shares its table of descriptors, so closes nothing.
///
/// # Safety
///
/// Only in the child of a clone; the pointers must stay valid (they do:
/// the child's copy of the parent's memory is never freed).
unsafe fn child_runs(
    ready_w: RawFd,
    failed_w: RawFd,
    program: &libc::sock_fprog,
    path: &CStr,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
) -> ! {
    // SAFETY (the whole body): plain system calls on descriptors and memory
    // of this process, all async-signal-safe.
    unsafe {
        // What shape's own runtime changed is put back as a command expects
        // it: no signal blocked, SIGPIPE not ignored.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let tell = |step: u8| {
            let errno = *libc::__errno_location();
            let mut said = [0u8; 8];
            said[..4].copy_from_slice(&errno.to_ne_bytes());
            said[4] = step;
            libc::write(ready_w, said.as_ptr().cast(), said.len());
            libc::_exit(127);
        };
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            tell(0);
        }
        let flags =
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
        let listener = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            program as *const libc::sock_fprog,
        );
        if listener < 0 {
            tell(1);
        }
        // From here, the filter's calls wait for shape, which waits for
        // this exec: none is made before it. The listener, closed on
        // exec, stays in shape's table only.
        libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        // A pipe of a low descriptor: the filter lets this write through.
        let errno = *libc::__errno_location();
        libc::write(failed_w, errno.to_ne_bytes().as_ptr().cast(), 4);
        libc::_exit(if errno == libc::ENOENT { 127 } else { 126 });
    }
}

/// A copy, in this process, of descriptor `fd` of the process of `pidfd`.
pub fn take_descriptor(pidfd: BorrowedFd<'_>, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd returns a new descriptor or -1.
    let taken = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if taken < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(taken as RawFd) })
}

/// Whether `pidfd_getfd` is refused here (a container's seccomp profile
/// refuses it as Docker's default does without CAP_SYS_PTRACE), asked of
/// shape's own process with a descriptor that is none.
pub fn taking_refused() -> bool {
    let Ok(own) = open_pidfd(std::process::id()) else {
        return false;
    };
    take_descriptor(own.as_fd(), -1).is_err_and(|err| refused(&err))
}

/// A pidfd for thread (or process) `tid`: the thread's own where the
/// kernel has them (6.9), else its process's.
pub fn open_pidfd(tid: u32) -> io::Result<OwnedFd> {
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    // SAFETY: pidfd_open returns a new descriptor or -1.
    let mut fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
    if fd < 0 {
        let tgid = thread_group(tid)?;
        // SAFETY: as above.
        fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) };
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The process that thread `tid` belongs to.
pub fn thread_group(tid: u32) -> io::Result<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Tgid"))
}

/// Sends `signal` to the process of `pidfd`.
pub fn signal_process(pidfd: BorrowedFd<'_>, signal: i32) -> io::Result<()> {
    // SAFETY: pidfd_send_signal with no siginfo.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel to run the command and shape on one CPU in turn
/// when a call is handed over and answered (Linux 6.6), as a call does
/// in one process: a handover between two CPUs cost about 80 µs on a
/// virtual machine, against 4 µs on one. Older kernels refuse; calls
/// then cost more, and work the same.
pub fn wake_on_one_cpu(listener: BorrowedFd<'_>) -> bool {
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
    // SAFETY: the ioctl takes its flags by value.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        ) == 0
    }
}

/// A call the filter handed to shape.
#[derive(Debug, Clone, Copy)]
pub struct Notification {
    pub id: u64,
    /// The thread that made it.
    pub tid: u32,
    pub nr: i64,
    pub args: [u64; 6],
}

/// How a call is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// The kernel carries it out as made.
    Continue,
    /// It returns this (a count).
    Value(i64),
    /// It fails with this errno.
    Error(i32),
}

/// Waits for the next call (the listener is readable when one waits).
pub fn receive(listener: BorrowedFd<'_>) -> io::Result<Notification> {
    // SAFETY: an all-zero seccomp_notif is valid, as the ioctl requires.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: the ioctl writes one seccomp_notif into `notif`.
        let r = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &mut notif as *mut libc::seccomp_notif,
            )
        };
        if r == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(Notification {
        id: notif.id,
        tid: notif.pid,
        nr: i64::from(notif.data.nr),
        args: notif.data.args,
    })
}

/// Answers call `id`. Fails with ENOENT if the caller is gone (killed).
pub fn respond(listener: BorrowedFd<'_>, id: u64, response: Response) -> io::Result<()> {
    let (val, error, flags) = match response {
        Response::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Response::Value(n) => (n, 0, 0),
        Response::Error(errno) => (0, -errno, 0),
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: the ioctl reads one seccomp_notif_resp.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut libc::seccomp_notif_resp,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// True if call `id` still waits for its answer: its caller has not been
/// killed. What was read from the caller's memory is only trusted after.
pub fn still_waiting(listener: BorrowedFd<'_>, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads one u64.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        ) == 0
    }
}

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

/// Whether `err` is a call refused by a seccomp profile (ENOSYS or EPERM,
/// as it is written).
pub fn refused(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOSYS | libc::EPERM))
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

/// Puts a copy of `fd` into the process of call `id`, at descriptor `at`
/// if given (which must be free), else at its lowest free one, closed on
/// exec if `cloexec`, and answers the call with its number (Linux 5.14).
pub fn place(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    at: Option<u32>,
    cloexec: bool,
) -> io::Result<i32> {
    let mut flags = libc::SECCOMP_ADDFD_FLAG_SEND as u32;
    if at.is_some() {
        flags |= libc::SECCOMP_ADDFD_FLAG_SETFD as u32;
    }
    let mut addfd = libc::seccomp_notif_addfd {
        id,
        flags,
        srcfd: fd.as_raw_fd() as u32,
        newfd: at.unwrap_or(0),
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one seccomp_notif_addfd.
    let placed = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &mut addfd as *mut libc::seccomp_notif_addfd,
        )
    };
    if placed < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(placed)
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
