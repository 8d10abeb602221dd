//! The command's child, between the reaper's clone and the exec: it puts
//! back the signals as shape's caller left them, dies with the reaper,
//! installs the seccomp filter whose listener the reaper sends to shape,
//! and execs the command, saying why on a pipe if any step fails. What it
//! is handed ([`KeptDescriptors`], [`Program`]) is made before any fork.

use std::ffi::CStr;
use std::os::fd::RawFd;

/// The descriptors the reaper keeps from shape's table; every other one
/// that shape closes on exec (its sockets, its epolls) it closes, so that
/// a socket shape closes is closed.
pub(super) struct KeptDescriptors {
    /// The read end of the pipe of shape's life.
    pub life: RawFd,
    /// The reaper's end of the socket to shape.
    pub to_shape: RawFd,
    /// The command's child writes why it could not start here.
    pub ready: RawFd,
    /// The command's child writes why its exec failed here.
    pub failed: RawFd,
}

/// What the command's child needs, made before the fork.
pub(super) struct Program<'a> {
    pub program: &'a libc::sock_fprog,
    pub path: &'a CStr,
    pub argv: &'a [*const libc::c_char],
    pub envp: &'a [*const libc::c_char],
}

/// The child's side of [`super::spawn`], cloned by the reaper `reaper`. Only
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
