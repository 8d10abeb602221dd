//! How shape ends: its exit statuses, in one place.
//!
//! Three are shape's own ([`Exit`]); the others are the shell's way of
//! saying a signal ended it, as for cat and pv: 141 when the reader
//! downstream went away (SIGPIPE, [`die_of_sigpipe`]), 130 on Ctrl-C and
//! 143 on SIGTERM (see `control::signals`).

use std::io::Write;
use std::process::ExitCode;

/// shape's own exit statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: everything was copied (or `--stop-after` was reached), or a
    /// one-off command did what it was asked.
    Success,
    /// 1: an input could not be read, the output failed, or a one-off
    /// command could not do its work (no such shape, no answer, a share
    /// that cannot be used).
    Failure,
    /// 2: bad usage; one line names the flag and the value.
    Usage,
    /// 3: `--reset-after` struck: the output was reset, as asked.
    Reset,
    /// `--exec`'s command's own status (128+N if signal N ended it, 127
    /// or 126 if it could not be run).
    Command(u8),
}

impl Exit {
    /// The number the shell sees.
    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Reset => 3,
            Exit::Command(code) => i32::from(code),
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code() as u8)
    }
}

/// Ends the process the way cat and pv end when the reader downstream has
/// gone: killed by SIGPIPE, which the shell reports as status 141. Rust
/// ignores SIGPIPE, which is why a write returned EPIPE instead.
pub fn die_of_sigpipe() -> ! {
    die_of(signal_hook::consts::SIGPIPE)
}

/// Ends the process as `signal` would have: by the signal itself, which
/// the shell reports as 128 + its number (130 for SIGINT, 143 for
/// SIGTERM), or with that status if it could not be raised.
pub fn die_of(signal: i32) -> ! {
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    // Only reached if the signal could not be raised.
    std::process::exit(128 + signal)
}

/// Writes `bytes` to standard output, whole and flushed, for the one-off
/// outputs (help, version, man page, completions): a reader that went away
/// ends shape as SIGPIPE does, any other failure is one line and status 1.
pub fn print_whole(bytes: &[u8]) -> Exit {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Exit::Success,
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => die_of_sigpipe(),
        Err(err) => {
            eprintln!("shape: write to stdout: {}", crate::message::one_line(&err));
            Exit::Failure
        }
    }
}
