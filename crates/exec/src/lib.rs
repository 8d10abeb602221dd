//! `--exec COMMAND`: runs a command with every byte that it and all its
//! descendants send or receive on IP sockets paid for from shape's
//! buckets, without root and for any binary (static ones, and programs
//! that call the kernel directly, included). A seccomp filter hands the
//! command's socket calls to shape (`filter.rs`); the supervisor
//! (`supervisor/`) makes the command's IP sockets, places them where the
//! filter knows them, and carries their calls out, paced, on its own
//! copies of them (`sockets.rs` tells which descriptors are shaped). The
//! kernel calls are in `kernel/`; what a call asks is read by
//! `call.rs`. Linux only.

// `unsafe` is in `kernel/` alone, each use saying why it is sound: the
// calls that no safe wrapper offers.
#![deny(unsafe_code)]

mod call;
mod filter;
pub mod fuzzing;
#[allow(unsafe_code)]
mod kernel;
mod sockets;
mod supervisor;
mod waiting_port;

pub use supervisor::{CommandWays, Exited, MakeNetem};

use shape_impair::conditions::Conditions;
use shape_net::proxy::RelayLoop;
use shape_net::udp::FlowEnds;
use std::sync::Arc;

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

// What this crate builds on, named at its root as its own
// (`shape_impair::faults`).

/// Where a link (`--delay`, `--jitter`, faults, a UDP link's options)
/// carries the command's TCP connections and datagrams, and its
/// conditions (a connect takes its round trip).
pub struct Relay {
    pub relay_loop: RelayLoop,
    pub conditions: Arc<Conditions>,
    /// What makes a datagram link to a destination of the command's UDP
    /// sockets.
    pub datagrams: MakeNetem,
    /// Where the datagram links' flows send from: a datagram the command
    /// sends there answers one that crossed the link already.
    pub flow_ends: FlowEnds,
}

/// Why a command was not run, as a shell tells it.
#[derive(Debug, thiserror::Error)]
pub enum NotRun {
    /// 127: no such command.
    #[error("{0}: command not found")]
    NotFound(String),
    /// 126: found, but it cannot be run.
    #[error("{0}: {1}")]
    CannotRun(String, String),
    /// Status 1: this system cannot shape a command.
    #[error(
        "--exec needs seccomp user notification with killable waits (Linux 5.19 or later): \
         {step} failed: {}",
        shape_leaves::message::one_line(err)
    )]
    Unsupported { step: &'static str, err: io::Error },
}

impl NotRun {
    /// The exit status a shell would give.
    pub fn status(&self) -> i32 {
        match self {
            NotRun::NotFound(_) => 127,
            NotRun::CannotRun(..) => 126,
            NotRun::Unsupported { .. } => 1,
        }
    }
}

/// A command started under the filter, not yet supervised.
pub struct Started {
    spawned: kernel::Spawned,
    /// The least descriptor of its IP sockets.
    base: u32,
    /// Shape keeps copies of the sockets it makes for the command: its
    /// own cannot be taken from it (`pidfd_getfd` is refused).
    copies: bool,
}

impl Started {
    /// The command's process id.
    pub fn pid(&self) -> i32 {
        self.spawned.pid
    }
}

/// Starts `command` (a program and its arguments) under the filter;
/// with its `connect`s handed over too if `relayed` (a link relays its
/// TCP connections).
pub fn start(command: &[OsString], relayed: bool) -> Result<Started, NotRun> {
    let name = command.first().map(OsString::as_os_str).unwrap_or_default();
    let shown = name.to_string_lossy().into_owned();
    let path = find(name).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => NotRun::NotFound(shown.clone()),
        _ => NotRun::CannotRun(shown.clone(), shape_leaves::message::one_line(&err)),
    })?;
    let c = |text: &OsStr| {
        CString::new(text.as_bytes())
            .map_err(|_| NotRun::CannotRun(shown.clone(), "contains a NUL byte".into()))
    };
    let path = c(path.as_os_str())?;
    let argv = command
        .iter()
        .map(|arg| c(arg))
        .collect::<Result<Vec<_>, _>>()?;
    let envp = std::env::vars_os()
        .map(|(key, value)| {
            let mut pair = key;
            pair.push("=");
            pair.push(value);
            c(&pair)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let base = base();
    let copies = kernel::taking_refused();
    let also = filter::Also {
        connects: relayed,
        closes: copies,
    };
    let spawned =
        kernel::spawn(&path, &argv, &envp, &filter::program(base, also)).map_err(|failed| {
            NotRun::Unsupported {
                step: failed.step,
                err: failed.err,
            }
        })?;
    Ok(Started {
        spawned,
        base,
        copies,
    })
}

/// The least descriptor of the command's IP sockets: 512, or half the
/// limit of open files if that is less, so that sockets fit below the
/// limit and below 1024 (for programs that use select).
fn base() -> u32 {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    (limit / 2).clamp(16, 512) as u32
}

/// Answers the started command's socket calls, paying from `ways`, until
/// it ends; `on_change` is given a function to call whenever the
/// buckets' settings change. Then what the command left running goes on
/// (as under a shell), unless `told_to_end` says shape was told to end,
/// when it ends too. Returns how it ended, or why it could not be run
/// after all (its exec failed). Fails if the supervisor cannot go on, or
/// the link's relay failed ([`shape_net::proxy::RelayFailed`], which says
/// `the link: ...`): the run then ends with that failure.
pub fn supervise(
    started: Started,
    ways: &CommandWays,
    relay: Option<Relay>,
    on_change: impl FnOnce(Box<dyn Fn() + Send>),
    shown: &str,
    say: Box<dyn Fn(&str)>,
    told_to_end: impl FnOnce() -> bool,
) -> io::Result<Result<Exited, NotRun>> {
    let kernel::Spawned {
        listener,
        exec_failed,
        reaper,
        ..
    } = started.spawned;
    let (mut supervisor, waker) =
        supervisor::Supervisor::new(listener, reaper, started.base, ways, relay, say)?;
    if started.copies {
        supervisor.keep_copies();
    }
    on_change(Box::new(move || {
        let _ = waker.wake();
    }));
    let ended = supervisor.run()?;
    match told_to_end() {
        true => supervisor.end_all(),
        false => supervisor.leave(),
    }
    // The child wrote execve's errno here if it failed; on success the
    // pipe closed unwritten.
    let mut said = [0u8; 4];
    if let Ok(4) = rustix::io::read(&exec_failed, &mut said) {
        let err = io::Error::from_raw_os_error(i32::from_ne_bytes(said));
        let why = shape_leaves::message::one_line(&err);
        return Ok(Err(match err.kind() {
            io::ErrorKind::NotFound => NotRun::NotFound(shown.into()),
            _ => NotRun::CannotRun(shown.into(), why),
        }));
    }
    Ok(Ok(ended))
}

/// Where `name` is run from: itself if it has a slash, else the first
/// executable of that name on PATH, as a shell looks. A name found only
/// without permission to run it fails with that.
fn find(name: &OsStr) -> io::Result<PathBuf> {
    if name.is_empty() {
        return Err(io::ErrorKind::NotFound.into());
    }
    if name.as_bytes().contains(&b'/') {
        return runnable(Path::new(name)).map(|()| name.into());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut refused = None;
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(name);
        match runnable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => refused = refused.or(Some(err)),
        }
    }
    Err(refused.unwrap_or_else(|| io::ErrorKind::NotFound.into()))
}

/// Whether `path` is a file that may be run.
fn runnable(path: &Path) -> io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(io::Error::from_raw_os_error(libc::EISDIR));
    }
    if meta.permissions().mode() & 0o111 == 0
        || rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_err()
    {
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_found_as_a_shell_finds_them() {
        assert!(find(OsStr::new("sh")).unwrap().ends_with("sh"));
        assert_eq!(
            find(OsStr::new("no-such-command-anywhere"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            find(OsStr::new("/etc/passwd")).unwrap_err().raw_os_error(),
            Some(libc::EACCES)
        );
        assert_eq!(
            find(OsStr::new("/")).unwrap_err().raw_os_error(),
            Some(libc::EISDIR)
        );
    }
}
