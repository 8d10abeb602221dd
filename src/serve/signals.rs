//! The server's signals: SIGINT and SIGTERM end it; SIGUSR1 says how its
//! proxies are doing, as it does for a copy or a proxy; SIGHUP reads
//! `--config` again (and is otherwise ignored, so that a closed terminal
//! does not end a server started in it with nohup's habits in mind).

use crate::progress::Printer;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};

/// What the server does on each signal that does not end it.
pub struct Handlers<'a> {
    /// The SIGUSR1 line.
    pub status: &'a dyn Fn() -> String,
    /// Reads the config again, if there is one: the line that says how it
    /// went.
    pub reload: &'a dyn Fn() -> Option<String>,
    /// Where lines go; `None` when quiet (SIGUSR1 still answers: asked
    /// for, it is said).
    pub report: Option<&'a Printer>,
}

/// Serves SIGUSR1 and SIGHUP until SIGINT or SIGTERM.
pub fn wait_for_the_end(handlers: &Handlers) {
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGHUP])
    else {
        // Without the handlers the signals end the process as they would.
        loop {
            std::thread::park();
        }
    };
    let say = |line: String| match handlers.report {
        Some(report) => report.line(&line),
        None => eprintln!("{}", crate::message::escape_controls(&line)),
    };
    for signal in signals.forever() {
        match signal {
            SIGUSR1 => say((handlers.status)()),
            SIGHUP => {
                if let Some(line) = (handlers.reload)() {
                    if handlers.report.is_some() {
                        say(line);
                    }
                }
            }
            _ => return,
        }
    }
}
