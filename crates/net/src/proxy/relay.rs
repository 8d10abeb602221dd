//! The relay: a loop on a thread of its own with one route that listens
//! nowhere, carrying connections made elsewhere (`--exec` relays a
//! command's connections through it). Should its loop fail, what it
//! carries cannot go on: the failure is handed to whoever holds the
//! relay, who ends the run with it. A library never ends the process.

use super::server::Command;
use super::{Shaping, say_seed, shaped_loop};
use shape_leaves::lock::lock;
use std::fmt;
use std::io;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

/// Where connections made elsewhere are handed to be carried, shaped:
/// a loop on a thread of its own with one route that listens nowhere
/// (`--exec` relays a command's connections through it).
pub struct RelayLoop {
    commands: Sender<Command>,
    waker: Arc<mio::Waker>,
    failure: Arc<FailureSlot>,
}

impl RelayLoop {
    /// Starts a loop that carries, on a thread of its own, connections
    /// shaped by `shaping`. The loop lasts as long as the process, unless
    /// it fails (see [`RelayLoop::on_failure`]).
    pub fn start(shaping: Shaping) -> io::Result<RelayLoop> {
        let (commands, taken) = std::sync::mpsc::channel();
        let (ready, waker) = std::sync::mpsc::channel();
        let failure = Arc::new(FailureSlot::default());
        let failed = failure.clone();
        std::thread::Builder::new()
            .name("shape-relay".into())
            .spawn(move || {
                let mut event_loop = match shaped_loop(&shaping) {
                    Ok(event_loop) => event_loop,
                    Err(err) => {
                        let _ = ready.send(Err(err));
                        return;
                    }
                };
                event_loop.open_unlistened("the link", Box::new(&shaping));
                event_loop.take_commands(taken);
                say_seed(&shaping);
                let _ = ready.send(Ok(event_loop.waker()));
                if let Err(err) = event_loop.run() {
                    failed.fail(err);
                }
            })?;
        let waker = waker
            .recv()
            .map_err(|_| io::Error::other("the link's loop did not start"))??;
        Ok(RelayLoop {
            commands,
            waker,
            failure,
        })
    }

    /// Carries the connection between `client` and `server` (each way
    /// shaped as a proxy's: up is what `client` sends).
    pub fn carry(&self, client: std::net::TcpStream, server: std::net::TcpStream) {
        let carry = Command::Carry {
            route: 0,
            client,
            server,
        };
        if self.commands.send(carry).is_ok() {
            let _ = self.waker.wake();
        }
    }

    /// Calls `tell` (from the relay's thread) once its loop has failed, or
    /// at once if it has already; [`RelayLoop::failure`] then says why.
    /// A later `tell` replaces an earlier one not yet called.
    pub fn on_failure(&self, tell: impl FnOnce() + Send + 'static) {
        self.failure.on_failure(Box::new(tell));
    }

    /// Why the loop failed, if it has: what it carried cannot go on, and
    /// the run should end with it. Said once: asked again, `None`.
    pub fn failure(&self) -> Option<RelayFailed> {
        self.failure.take().map(RelayFailed)
    }
}

/// The relay's loop failed, and what it carried with it.
#[derive(Debug)]
pub struct RelayFailed(pub io::Error);

impl fmt::Display for RelayFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The loop's error is the message, with its causes: it is said
        // as one line, and has no source of its own to say twice.
        write!(f, "the link: {:#}", self.0)
    }
}

impl std::error::Error for RelayFailed {}

impl From<RelayFailed> for io::Error {
    fn from(failed: RelayFailed) -> io::Error {
        io::Error::new(failed.0.kind(), failed)
    }
}

/// Where the relay's thread leaves its loop's failure, and whom it tells:
/// one lock for both, so that a failure and a `tell` that come at the same
/// time never miss each other.
#[derive(Default)]
struct FailureSlot(Mutex<FailureHeld>);

#[derive(Default)]
struct FailureHeld {
    err: Option<io::Error>,
    tell: Option<Box<dyn FnOnce() + Send>>,
}

impl FailureSlot {
    /// Leaves `err`, and tells whoever asked to be told.
    fn fail(&self, err: io::Error) {
        let mut failing = lock(&self.0);
        failing.err = Some(err);
        if let Some(tell) = failing.tell.take() {
            tell();
        }
    }

    /// Calls `tell` once a failure is left, at once if one is.
    fn on_failure(&self, tell: Box<dyn FnOnce() + Send>) {
        let mut failing = lock(&self.0);
        match failing.err.is_some() {
            true => tell(),
            false => failing.tell = Some(tell),
        }
    }

    /// The failure left, taken.
    fn take(&self) -> Option<io::Error> {
        lock(&self.0).err.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_bucket::Damaged;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A `tell` that counts its calls in `told`.
    fn counting(told: &Arc<AtomicUsize>) -> Box<dyn FnOnce() + Send> {
        let told = told.clone();
        Box::new(move || {
            told.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[test]
    fn a_failure_is_told_whether_it_comes_before_or_after_the_ask() {
        let told = Arc::new(AtomicUsize::new(0));
        let slot = FailureSlot::default();
        slot.on_failure(counting(&told));
        assert_eq!(told.load(Ordering::SeqCst), 0, "nothing failed yet");
        slot.fail(io::Error::other("first"));
        assert_eq!(told.load(Ordering::SeqCst), 1);
        let slot = FailureSlot::default();
        slot.fail(io::Error::other("first"));
        slot.on_failure(counting(&told));
        assert_eq!(told.load(Ordering::SeqCst), 2);
        assert_eq!(slot.take().unwrap().to_string(), "first");
        assert!(slot.take().is_none(), "said once");
    }

    #[test]
    fn a_failure_of_the_relay_says_the_line_the_run_ends_with() {
        let failed = io::Error::from(RelayFailed(io::Error::other(Damaged)));
        assert_eq!(
            failed.to_string(),
            "the link: the bucket's shared state is damaged: it holds no readable settings"
        );
        assert_eq!(failed.kind(), io::ErrorKind::Other);
    }
}
