//! Starting the command under the filter: a clone that shares shape's
//! table of descriptors until its exec, so that the filter's listener,
//! made in the child, is shape's too.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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
