//! The server's signals: SIGINT and SIGTERM end it; SIGUSR1 says how its
//! proxies are doing, as it does for a copy or a proxy; SIGHUP reads
//! `--config` again (and is otherwise ignored, so that a closed terminal
//! does not end a server started in it with nohup's habits in mind). The
//! event loop failing ends the wait too, so that the server ends through
//! `main` like any other failure.

use shape_leaves::say::Printer;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::{Handle, Signals};
use std::sync::{Arc, Mutex};

/// What the server does on each signal that does not end it.
pub struct SignalActions<'a> {
    /// The SIGUSR1 line.
    pub status: &'a dyn Fn() -> String,
    /// Reads the config again, if there is one: the line that says how it
    /// went.
    pub reload: &'a dyn Fn() -> Option<String>,
    /// Where lines go; `None` when quiet (SIGUSR1 still answers: asked
    /// for, it is said).
    pub report: Option<&'a Printer>,
}

/// The signals the server takes, caught from before it starts.
pub struct CaughtSignals {
    signals: Signals,
    failed: Arc<Mutex<Option<String>>>,
}

/// Ends the wait from another thread, saying why.
#[derive(Clone)]
pub struct Failing {
    handle: Handle,
    failed: Arc<Mutex<Option<String>>>,
}

impl Failing {
    /// Ends the server's wait: `why` is what it fails with.
    pub fn fail(&self, why: String) {
        shape_leaves::lock::lock(&self.failed).get_or_insert(why);
        self.handle.close();
    }
}

impl CaughtSignals {
    /// Catches SIGINT, SIGTERM, SIGUSR1 and SIGHUP from now on.
    pub fn catch() -> std::io::Result<CaughtSignals> {
        Ok(CaughtSignals {
            signals: Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGHUP])?,
            failed: Arc::default(),
        })
    }

    /// What another thread fails the server with.
    pub fn failing(&self) -> Failing {
        Failing {
            handle: self.signals.handle(),
            failed: self.failed.clone(),
        }
    }

    /// Serves SIGUSR1 and SIGHUP until SIGINT or SIGTERM, or until a
    /// [`Failing`] fails it: then why.
    pub fn wait(mut self, handlers: &SignalActions) -> Result<(), String> {
        let say = |line: String| match handlers.report {
            Some(report) => report.line(&line),
            None => eprintln!("{}", shape_leaves::message::escape_controls(&line)),
        };
        for signal in self.signals.forever() {
            match signal {
                SIGUSR1 => say((handlers.status)()),
                SIGHUP => {
                    if let Some(line) = (handlers.reload)() {
                        if handlers.report.is_some() {
                            say(line);
                        }
                    }
                }
                _ => break,
            }
        }
        match shape_leaves::lock::lock(&self.failed).take() {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
}
