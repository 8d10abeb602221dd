//! What a server does about the system's limits: a listen backlog as deep
//! as the system allows, as many descriptors as it may have, as many
//! loops as cores, and telling a shortage (of descriptors, memory or
//! buffers), which only time mends, from a failure.

use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

/// How long accepting rests after the system refused to accept for want
/// of resources: long enough not to spin, short enough that a client
/// hardly notices.
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// How many descriptors each loop should leave to connections at least:
/// a loop takes four of its own (poll, waker, spare, listener), and an
/// alarm where the kernel is older than 5.11.
const DESCRIPTORS_PER_LOOP: u64 = 64;

/// Raises the soft limit on open files to the hard one: each connection
/// takes two descriptors, and the usual soft limit of 1024 would cap the
/// proxy near 500 connections.
pub(crate) fn raise_file_limit() {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let raised = rustix::process::Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    let _ = rustix::process::setrlimit(rustix::process::Resource::Nofile, raised);
}

/// How many event loops a proxy runs unless told: one per core this
/// process may use, but no more than one per [`DESCRIPTORS_PER_LOOP`]
/// descriptors it may open, so that under a low limit the loops' own
/// descriptors do not crowd out the connections they serve.
pub fn loops_per_core() -> usize {
    raise_file_limit();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let descriptors = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let room = usize::try_from(descriptors / DESCRIPTORS_PER_LOOP).unwrap_or(usize::MAX);
    cores.min(room).max(1)
}

/// Makes `listener`'s backlog as deep as the system allows, as Go's
/// servers do: Linux takes `listen` again on a listening socket as a new
/// backlog, and cuts any larger one down to `net.core.somaxconn`. Rust's
/// own is 128, which a burst of connects fills (2,000 quick connects
/// then wait for SYN retries, seconds each).
pub fn deepen_backlog(listener: &impl AsFd) -> io::Result<()> {
    rustix::net::listen(listener, i32::MAX).map_err(io::Error::from)
}

/// True if `err` says the process or the system ran out of descriptors,
/// memory or buffers, which only time (connections ending) can mend.
pub fn out_of_resources(err: &io::Error) -> bool {
    use rustix::io::Errno;
    err.raw_os_error().is_some_and(|code| {
        [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM]
            .iter()
            .any(|errno| errno.raw_os_error() == code)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_is_deepened_to_what_the_system_allows() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        deepen_backlog(&listener).unwrap();
        // ss shows a listener's backlog as its Send-Q; /proc has no word
        // of it, so this checks only that listen is taken again.
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap());
        assert!(client.is_ok());
    }

    #[test]
    fn shortages_are_told_from_failures() {
        assert!(out_of_resources(&io::Error::from_raw_os_error(24)));
        assert!(out_of_resources(&io::Error::from_raw_os_error(23)));
        assert!(!out_of_resources(&io::Error::from_raw_os_error(111)));
    }
}
