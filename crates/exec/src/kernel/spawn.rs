//! Starting the command under the filter: a clone of the reaper's that
//! shares its table of descriptors until its exec, so that the filter's
//! listener, made in the child, reaches shape; and shape's side of the
//! reaper, the command's parent.

use super::child::{KeptDescriptors, Program};
use super::reaper::{Said, reaper_runs};
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
