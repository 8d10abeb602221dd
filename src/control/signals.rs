//! The signals a running shape answers. SIGHUP reloads the rate file,
//! SIGUSR1 prints a status line, SIGUSR2 serves control messages, and
//! SIGINT and SIGTERM end shape with the signal's own status after it has
//! tidied up. They are received on a thread of their own through
//! signal-hook: nothing but signal-hook's own safe handler runs in signal
//! context, and the copy loop never sees a handler (interrupted system
//! calls are restarted or retried, so no byte is lost or repeated).

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;
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
}

/// Starts answering signals with `handlers`.
pub fn answer(handlers: Handlers) -> io::Result<()> {
    let mut signals = Signals::new([SIGUSR1, SIGUSR2, SIGINT, SIGTERM])?;
    if handlers.reload.is_some() {
        signals.add_signal(SIGHUP)?;
    }
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
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
                        // Ends the process as the signal would have: status 130
                        // for SIGINT, 143 for SIGTERM in the shell.
                        let _ = signal_hook::low_level::emulate_default_handler(signal);
                        std::process::exit(128 + signal);
                    }
                }
            }
        })?;
    Ok(())
}
