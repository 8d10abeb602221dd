//! Starting the command under the filter: a clone of the reaper's that
//! shares its table of descriptors until its exec, so that the filter's
//! listener, made in the child, reaches shape; and shape's side of the
//! reaper, the command's parent.

use super::reaper::{KeptDescriptors, Program, Said, reaper_runs};
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use std::ffi::{CStr, CString};
use std::io;
use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A child started under the filter: its pid, the filter's listener,
/// the read end of the pipe on which the child writes the errno of a
/// failed `execve` (it closes on success), and the reaper, its parent.
pub struct Spawned {
    pub pid: i32,
    pub listener: OwnedFd,
    pub exec_failed: OwnedFd,
    pub reaper: Reaper,
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

/// A pair of connected sockets that keep messages apart, closed on exec.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    let kind = libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC;
    // SAFETY: `fds` is two ints, as socketpair writes; on success both
    // are new descriptors that nothing else owns.
    if unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just made, owned by no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Starts `path` with `argv` and `envp` under `filter`, whose calls that
/// return USER_NOTIF are handed to the listener returned.
///
/// Shape forks the reaper (`reaper.rs`), which clones the command: the
/// command shares the reaper's table of descriptors until it runs (clone
/// with CLONE_FILES and CLONE_VFORK), so the listener the filter makes
/// in the child is the reaper's, which sends it to shape on a socket;
/// taking it needs no `pidfd_getfd`, which Docker's default seccomp
/// profile refuses. The child sets `no_new_privs` (which needs no
/// privilege) and dies with the reaper, installs the filter and runs the
/// command; `execve` gives it a table of its own, without the listener
/// and the pipes, all closed on exec.
pub fn spawn(
    path: &CStr,
    argv: &[CString],
    envp: &[CString],
    filter: &[libc::sock_filter],
) -> Result<Spawned, SetupFailed> {
    let fail = |step| move |err| SetupFailed { step, err };
    let (ready_r, ready_w) = pipe().map_err(fail("pipe"))?;
    let (failed_r, failed_w) = pipe().map_err(fail("pipe"))?;
    let (life_r, life_w) = pipe().map_err(fail("pipe"))?;
    let (said_by_reaper, to_shape) = socket_pair().map_err(fail("socketpair"))?;
    // Everything the reaper and the child need is made before the fork:
    // after it, they may only make async-signal-safe calls.
    let (argv_ptrs, envp_ptrs) = (null_ended(argv), null_ended(envp));
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    let kept = KeptDescriptors {
        life: life_r.as_raw_fd(),
        to_shape: to_shape.as_raw_fd(),
        ready: ready_w.as_raw_fd(),
        failed: failed_w.as_raw_fd(),
    };
    let command = Program {
        program: &program,
        path,
        argv: &argv_ptrs,
        envp: &envp_ptrs,
    };
    // SAFETY: clone without CLONE_VM or CLONE_FILES, as fork, with a copy
    // of this process's memory and table: the reaper runs only the
    // async-signal-safe calls of `reaper_runs`, on memory made before,
    // and never returns.
    let reaper = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) } as i32;
    if reaper < 0 {
        return Err(SetupFailed {
            step: "clone",
            err: io::Error::last_os_error(),
        });
    }
    if reaper == 0 {
        // SAFETY: in the reaper, see above.
        unsafe { reaper_runs(kept, command) }
    }
    // The reaper's ends; shape keeps the write end of its life alone.
    drop((ready_w, failed_w, life_r, to_shape));
    let reaper = Reaper {
        pid: reaper,
        said: said_by_reaper,
        life: Some(life_w),
    };
    // The child has run the command (its copies of the write ends closed
    // on exec) or ended, and the reaper closed its: reading meets the
    // end, or what the child said.
    let installed = filter_installed(&ready_r);
    let started = reaper.started();
    let (pid, listener) = match (installed, started) {
        (Err((err, step)), _) | (Ok(()), Err((err, step))) => {
            reaper.kill();
            return Err(SetupFailed { step, err });
        }
        (Ok(()), Ok((_, None))) => {
            reaper.kill();
            let err = io::Error::other("its listener is not in the table it shared");
            return Err(SetupFailed {
                step: "seccomp(SECCOMP_SET_MODE_FILTER)",
                err,
            });
        }
        (Ok(()), Ok((pid, Some(listener)))) => (pid, listener),
    };
    Ok(Spawned {
        pid,
        listener,
        exec_failed: failed_r,
        reaper,
    })
}

/// Shape's side of the reaper (`reaper.rs`): the command's parent, which
/// says how the command ended, leaves when shape says goodbye, and kills
/// every process below it when shape dies without one.
pub struct Reaper {
    pid: i32,
    /// What the reaper says (`Said`): the command started, and ended.
    said: OwnedFd,
    /// Shape's life: closed without a goodbye, the reaper kills all.
    life: Option<OwnedFd>,
}

impl Reaper {
    /// Its process id: every process of the command's is below it.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The socket on which the reaper says the command ended: readable
    /// then.
    pub fn said(&self) -> BorrowedFd<'_> {
        self.said.as_fd()
    }

    /// The reaper's first word: the command's pid and the filter's
    /// listener, if the child made one.
    fn started(&self) -> Result<(i32, Option<OwnedFd>), (io::Error, &'static str)> {
        let (said, value, mut fds) = self
            .hear(RecvFlags::empty())
            .map_err(|err| (err, "recvmsg"))?;
        match said {
            Some(Said::Started) => Ok((value, fds.pop())),
            Some(Said::NotStarted) => Err((io::Error::from_raw_os_error(value), "clone")),
            _ => Err((io::Error::other("the reaper ended first"), "clone")),
        }
    }

    /// The command's wait status, as the shell reads it (the exit code,
    /// or 128+N for signal N), once the reaper has said it: `None` while
    /// it has not. A reaper gone without a word took the command with it
    /// (SIGKILL).
    pub fn ended(&self) -> io::Result<Option<i32>> {
        match self.hear(RecvFlags::DONTWAIT) {
            Ok((Some(Said::Ended), status, _)) => Ok(Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            })),
            Ok((None, _, _)) => Ok(Some(128 + libc::SIGKILL)),
            Ok(_) => Ok(None),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Says goodbye: the reaper leaves, and what the command started and
    /// left still runs, as under a shell. Waits for the reaper.
    pub fn leave(mut self) {
        if let Some(life) = self.life.take() {
            let _ = rustix::io::write(&life, b"x");
        }
        self.wait();
    }

    /// Ends every process below the reaper, as when shape dies (no
    /// goodbye: the reaper kills them all, then leaves), and waits for it.
    pub fn end_all(mut self) {
        self.life = None;
        self.wait();
    }

    /// Ends the reaper now, and with it the command.
    fn kill(mut self) {
        // SAFETY: kill on our own child, reaped below.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        self.life = None;
        self.wait();
    }

    /// Reaps the reaper.
    fn wait(&self) {
        // SAFETY: waitpid on our own child.
        while unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) } < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
    }

    /// One message of the reaper's (`None` for its end), its value and
    /// the descriptors it carried.
    fn hear(&self, flags: RecvFlags) -> io::Result<(Option<Said>, i32, Vec<OwnedFd>)> {
        let mut words = [0u8; 8];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let flags = flags | RecvFlags::CMSG_CLOEXEC;
        let received = loop {
            let mut iov = [IoSliceMut::new(&mut words)];
            match rustix::net::recvmsg(&self.said, &mut iov, &mut control, flags) {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other?,
            }
        };
        let mut fds = Vec::new();
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(given) = message {
                fds.extend(given);
            }
        }
        if received.bytes < 8 {
            return Ok((None, 0, fds));
        }
        let word = u32::from_ne_bytes(words[..4].try_into().unwrap_or_default());
        let value = i32::from_ne_bytes(words[4..].try_into().unwrap_or_default());
        Ok((Said::from_u32(word), value, fds))
    }
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

/// The child's side of [`spawn`], cloned by the reaper `reaper`. Only
/// async-signal-safe calls: it runs between clone and exec in a copy of
/// a process that has threads, and shares the reaper's table of
/// descriptors, so closes nothing.
///
/// # Safety
///
/// Only in the child of the reaper's clone; the pointers must stay valid
/// (they do: the child's copy of the parent's memory is never freed).
pub(super) unsafe fn child_runs(
    kept: &KeptDescriptors,
    command: &Program<'_>,
    reaper: i32,
    caller_ignored: &[bool; 32],
) -> ! {
    // SAFETY (the whole body): plain system calls on descriptors and memory
    // of this process, all async-signal-safe.
    unsafe {
        // What shape's own runtime and the reaper changed is put back as
        // a command expects it: no signal blocked, and each signal as
        // shape's caller left it (a handler's is the default after exec),
        // but SIGPIPE, which the runtime ignores, not ignored.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        for (signal, ignored) in caller_ignored.iter().enumerate().skip(1) {
            let signal = signal as i32;
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let keep_ignored = *ignored && signal != libc::SIGPIPE;
            libc::signal(
                signal,
                if keep_ignored {
                    libc::SIG_IGN
                } else {
                    libc::SIG_DFL
                },
            );
        }
        let tell = |step: u8| {
            let errno = *libc::__errno_location();
            let mut said = [0u8; 8];
            said[..4].copy_from_slice(&errno.to_ne_bytes());
            said[4] = step;
            libc::write(kept.ready, said.as_ptr().cast(), said.len());
            libc::_exit(127);
        };
        // The command dies with the reaper: with shape, whatever kills it.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != reaper {
            libc::_exit(128 + libc::SIGKILL);
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            tell(0);
        }
        let flags =
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
        let listener = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            command.program as *const libc::sock_fprog,
        );
        if listener < 0 {
            tell(1);
        }
        // From here, the filter's calls wait for shape, which gets the
        // listener from the reaper after this exec: none is made before
        // it. The listener, closed on exec, stays in the reaper's table,
        // which sends it to shape and closes it.
        libc::execve(
            command.path.as_ptr(),
            command.argv.as_ptr(),
            command.envp.as_ptr(),
        );
        // A pipe of a low descriptor: the filter lets this write through.
        let errno = *libc::__errno_location();
        libc::write(kept.failed, errno.to_ne_bytes().as_ptr().cast(), 4);
        libc::_exit(if errno == libc::ENOENT { 127 } else { 126 });
    }
}
