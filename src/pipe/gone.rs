//! Notices, without writing, that whoever reads an output has gone: the
//! reader of a pipe closed its end, or the peer of a socket closed the
//! connection. A stalled copy writes nothing more, so it would never meet
//! EPIPE and would keep a pipeline alive forever; this is how it learns
//! to end instead.

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;
use std::fs::File;
use std::io;

/// Calls `then` on a thread of its own once the reader of `output` has
/// gone. Never for a file or a terminal, which have no reader to lose.
///
/// A pipe's writing end reports an error once its reader is gone, and a
/// socket reports the peer's end of sending (POLLRDHUP). A peer that only
/// shut down its sending side counts as gone too: a stalled shape has
/// nothing more to say to it.
pub fn when_reader_gone(output: &File, then: impl FnOnce() + Send + 'static) -> io::Result<()> {
    let output = output.try_clone()?;
    std::thread::Builder::new()
        .name("reader-gone".into())
        .spawn(move || {
            if reader_gone(&output) {
                then();
            }
        })?;
    Ok(())
}

/// Blocks until the reader of `output` has gone (true), or polling it
/// fails (false).
fn reader_gone(output: &File) -> bool {
    let gone = PollFlags::ERR | PollFlags::HUP | PollFlags::RDHUP;
    loop {
        // Asks for nothing but the peer's end: errors and hang-ups are
        // always reported, and a pipe with room or a socket that can be
        // written to does not wake this thread.
        let mut fds = [PollFd::new(output, PollFlags::RDHUP)];
        match poll(&mut fds, None) {
            Ok(_) if fds[0].revents().intersects(gone) => return true,
            Ok(_) => {
                if fds[0].revents().contains(PollFlags::NVAL) {
                    return false;
                }
            }
            Err(Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_pipe_whose_reader_closed_is_noticed_without_writing() {
        let (reader, writer) = rustix::pipe::pipe().unwrap();
        let (told, heard) = mpsc::channel();
        when_reader_gone(&File::from(writer), move || told.send(()).unwrap()).unwrap();
        assert!(heard.recv_timeout(Duration::from_millis(100)).is_err());
        drop(reader);
        heard.recv_timeout(Duration::from_secs(10)).unwrap();
    }

    #[test]
    fn a_socket_whose_peer_closed_is_noticed() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (told, heard) = mpsc::channel();
        let ours = File::from(std::os::fd::OwnedFd::from(ours));
        when_reader_gone(&ours, move || told.send(()).unwrap()).unwrap();
        assert!(heard.recv_timeout(Duration::from_millis(100)).is_err());
        drop(theirs);
        heard.recv_timeout(Duration::from_secs(10)).unwrap();
    }
}
