//! Looking up upstream names off the event loop: a few threads of their
//! own, however many clients and proxies wait for a name, so that a slow
//! or silent DNS server holds up only the clients of names it serves.
//!
//! toxiproxy connects its upstream by name for every client, so a container
//! restarted with a new address is reached by the next client; shape's
//! server does the same, and a name is never resolved on the loop or under
//! the API's lock. A name that does not resolve (a container not up yet)
//! fails only the clients that come meanwhile.

use crate::Address;
use std::io;
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// How many names are looked up at once. The C library's resolver blocks
/// a thread for each (up to its timeout, seconds, when a server is
/// silent); a handful keep a few slow names from holding up the rest.
const LOOKERS: usize = 4;

/// A name to look up, and the ticket its answer is handed back with.
struct Lookup {
    ticket: usize,
    connect: Address,
}

/// An answer: the ticket and every address the name has, or why none.
pub(super) type Found = (usize, io::Result<Vec<SocketAddr>>);

/// The threads that look names up.
pub(super) struct Resolver {
    jobs: Sender<Lookup>,
}

impl Resolver {
    /// Starts the threads; each answer goes to `answered`, after which
    /// `wake` is called.
    pub(super) fn start(
        answered: Sender<Found>,
        wake: impl Fn() + Send + Sync + Clone + 'static,
    ) -> io::Result<Resolver> {
        let (jobs, taken) = channel::<Lookup>();
        let taken = Arc::new(Mutex::new(taken));
        for _ in 0..LOOKERS {
            let (taken, answered, wake) = (taken.clone(), answered.clone(), wake.clone());
            std::thread::Builder::new()
                .name("resolve".into())
                .spawn(move || look_up(&taken, &answered, &wake))?;
        }
        Ok(Resolver { jobs })
    }

    /// Looks `connect` up; its answer comes with `ticket`.
    pub(super) fn ask(&self, ticket: usize, connect: Address) {
        let _ = self.jobs.send(Lookup { ticket, connect });
    }
}

/// Takes jobs in turn until the resolver is dropped.
fn look_up(taken: &Mutex<Receiver<Lookup>>, answered: &Sender<Found>, wake: &dyn Fn()) {
    loop {
        let job = match shape_leaves::lock::lock(taken).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        let found = job.connect.resolve_all();
        if answered.send((job.ticket, found)).is_err() {
            return;
        }
        wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_looked_up_on_other_threads_and_answered_by_ticket() {
        let (answered, answers) = channel();
        let resolver = Resolver::start(answered, || {}).unwrap();
        resolver.ask(7, "localhost:80".parse().unwrap());
        resolver.ask(8, "no-such-name.invalid:80".parse().unwrap());
        let mut got: Vec<Found> = (0..2).map(|_| answers.recv().unwrap()).collect();
        got.sort_by_key(|(ticket, _)| *ticket);
        let (ticket, found) = &got[0];
        assert_eq!(*ticket, 7);
        assert!(found.as_ref().unwrap().iter().all(|a| a.ip().is_loopback()));
        assert_eq!(got[1].0, 8);
        assert!(got[1].1.is_err());
    }
}
