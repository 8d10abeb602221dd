//! The signals a running shape answers. SIGHUP reloads the rate file,
//! SIGUSR1 prints a status line, SIGUSR2 serves control messages, and
//! SIGINT and SIGTERM end shape with the signal's own status after it has
//! tidied up; under `--exec`, SIGINT, SIGTERM and SIGHUP are passed on to
//! the command instead, which ends shape by ending. They are received on
//! a thread of their own through signal-hook: nothing but signal-hook's
//! own safe handler runs in signal context, and the copy loop never sees
//! a handler (interrupted system calls are restarted or retried, so no
//! byte is lost or repeated).

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithOrigin;
use std::io;

/// What to do on each signal.
pub struct Handlers {
    /// SIGHUP; without one, SIGHUP keeps its default action (a hangup
    /// ends shape).
    pub reload: Option<Box<dyn Fn() + Send>>,
    /// SIGUSR1.
    pub status: Box<dyn Fn() + Send>,
    /// SIGUSR2.
    pub control: Box<dyn Fn() + Send>,
    /// SIGINT and SIGTERM, just before shape ends.
    pub before_exit: Box<dyn Fn() + Send>,
    /// Passes SIGINT, SIGTERM and SIGHUP on, instead of ending shape:
    /// those sent by a process, not those a terminal sends to its whole
    /// foreground group, which the command has had already.
    pub pass_on: Option<Box<dyn Fn(i32) + Send>>,
}

/// Starts answering signals with `handlers`.
pub fn answer(handlers: Handlers) -> io::Result<()> {
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGUSR1, SIGUSR2, SIGINT, SIGTERM])?;
    if handlers.reload.is_some() || handlers.pass_on.is_some() {
        signals.add_signal(SIGHUP)?;
    }
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for origin in signals.forever() {
                let signal = origin.signal;
                if let Some(pass_on) = &handlers.pass_on
                    && matches!(signal, SIGINT | SIGTERM | SIGHUP)
                {
                    if origin.process.is_some() {
                        pass_on(signal);
                    }
                    if signal != SIGHUP {
                        continue;
                    }
                }
                match signal {
                    SIGHUP => {
                        if let Some(reload) = &handlers.reload {
                            reload();
                        }
                    }
                    SIGUSR1 => (handlers.status)(),
                    SIGUSR2 => (handlers.control)(),
                    _ => {
                        (handlers.before_exit)();
                        shape_leaves::exit::die_of(signal);
                    }
                }
            }
        })?;
    Ok(())
}
