//! Reading and writing a descriptor that may be non-blocking.

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use std::fs::File;
use std::io::{self, Read, Write};

/// A file descriptor read and written directly, waiting (instead of
/// failing) when it is non-blocking and not ready; a shell may hand shape
/// such a descriptor.
pub struct Descriptor<'f>(pub &'f File);

impl Descriptor<'_> {
    fn when_ready<T>(
        &self,
        flags: PollFlags,
        mut call: impl FnMut() -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            match call() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut fds = [PollFd::new(self.0, flags)];
                    match rustix::event::poll(&mut fds, None) {
                        Ok(_) | Err(Errno::INTR) => {}
                        Err(err) => return Err(err.into()),
                    }
                }
                done => return done,
            }
        }
    }
}

impl Read for Descriptor<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let file = self.0;
        self.when_ready(PollFlags::IN, || (&*file).read(buf))
    }
}

impl Write for Descriptor<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let file = self.0;
        self.when_ready(PollFlags::OUT, || (&*file).write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
