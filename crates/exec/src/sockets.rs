//! Which of the command's descriptors are shaped: IP sockets (TCP and
//! UDP, IPv4 and IPv6, loopback included). A descriptor is first told
//! apart by what /proc says it is, which is all a file or pipe costs; a
//! socket is asked its family and type once, remembered by its inode,
//! and given send and receive buffers that follow the rate. A TCP socket
//! connected to the relay of a link is not shaped here: the relay shapes
//! what it carries. A socket is taken from the command through a pidfd
//! of its thread (`pidfd_getfd`); where a profile refuses that call (as
//! Docker's default does), shape keeps a copy of each socket it makes for
//! the command instead, and lets it go once the command holds it no more.

use super::kernel::{open_pidfd, take_descriptor};
use rustix::event::{PollFd, PollFlags};
use rustix::net::{AddressFamily, SocketType, sockopt};
use shape_bucket::Limit;
use shape_leaves::bucket::Bucket;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// What a descriptor is, as far as shaping goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketKind {
    /// A file, pipe, Unix socket or anything else: never shaped.
    Unshaped,
    /// A TCP (or other stream) IP socket: bytes.
    Stream,
    /// A UDP (or other datagram) IP socket: whole datagrams.
    Datagram,
}

/// The most sockets and threads remembered; past it, all are forgotten
/// and learnt again (a lookup costs microseconds).
const MOST_REMEMBERED: usize = 4096;

/// The most pidfds kept open, each a descriptor: a program that starts a
/// thread per connection would otherwise leave one open for every thread
/// it ever had (the soak saw two thousand after a minute).
const MOST_PIDFDS: usize = 64;

/// Past this many pidfds, those of threads that ended are let go before
/// another is opened, so that the count follows the threads alive.
const FEW_PIDFDS: usize = 16;

/// What is known of the command's sockets and threads.
#[derive(Default)]
pub struct Sockets {
    /// By socket inode: what it is, and the buffers it was given.
    kinds: HashMap<(u64, u64), (SocketKind, Option<usize>)>,
    pidfds: HashMap<u32, OwnedFd>,
    /// The waiting ports of the relay that carries TCP connections, if any.
    waiting_ports: Vec<SocketAddr>,
    /// Shape's copies of the sockets it made, by inode, where sockets
    /// cannot be taken from the command.
    copies: Option<HashMap<(u64, u64), OwnedFd>>,
}

impl Sockets {
    /// Knows nothing yet; TCP sockets connected to one of `waiting ports` are
    /// the relay's to shape.
    pub fn relayed_by(waiting_ports: Vec<SocketAddr>) -> Sockets {
        Sockets {
            waiting_ports,
            ..Sockets::default()
        }
    }

    /// What `socket` is, a relayed one unshaped.
    fn kind_of(&self, socket: BorrowedFd<'_>) -> SocketKind {
        let kind = socket_kind(socket);
        let relayed = kind == SocketKind::Stream
            && !self.waiting_ports.is_empty()
            && rustix::net::getpeername(socket)
                .ok()
                .flatten()
                .and_then(|peer| SocketAddr::try_from(peer).ok())
                .is_some_and(|peer| self.waiting_ports.contains(&peer));
        match relayed {
            true => SocketKind::Unshaped,
            false => kind,
        }
    }

    /// What descriptor `fd` of thread `tid` is. A shaped socket is given
    /// buffers of `buffer` bytes each way, if given, when first seen and
    /// again whenever that changes by more than half (the rate changed):
    /// buffers sized for a slow rate would hold a fast one back.
    pub fn kind(&mut self, tid: u32, fd: i32, buffer: Option<usize>) -> SocketKind {
        let Ok(stat) = rustix::fs::stat(format!("/proc/{tid}/fd/{fd}")) else {
            return SocketKind::Unshaped;
        };
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Socket {
            return SocketKind::Unshaped;
        }
        let key = (stat.st_dev, stat.st_ino);
        let known = self.kinds.get(&key).copied();
        if let Some((kind, sized)) = known
            && (kind == SocketKind::Unshaped || !resize(sized, buffer))
        {
            return kind;
        }
        let Ok(socket) = self.take(tid, fd) else {
            return SocketKind::Unshaped;
        };
        let kind = known.map_or_else(|| self.kind_of(socket.as_fd()), |(kind, _)| kind);
        if let (Some(bytes), true) = (buffer, kind != SocketKind::Unshaped) {
            let _ = sockopt::set_socket_send_buffer_size(&socket, bytes);
            let _ = sockopt::set_socket_recv_buffer_size(&socket, bytes);
        }
        if self.kinds.len() >= MOST_REMEMBERED {
            self.kinds.clear();
        }
        self.kinds.insert(key, (kind, buffer));
        kind
    }

    /// Takes note of `socket`, made or accepted by shape for the command
    /// (unless noted as the relay's already), and gives it buffers of
    /// `buffer` bytes each way, if given.
    pub fn adopt(&mut self, socket: BorrowedFd<'_>, buffer: Option<usize>) -> SocketKind {
        let relayed = rustix::fs::fstat(socket).is_ok_and(|stat| {
            let known = self.kinds.get(&(stat.st_dev, stat.st_ino));
            known.is_some_and(|(kind, _)| *kind == SocketKind::Unshaped)
        });
        if relayed {
            // Noted as the relay's already, maybe before its handshake
            // ended (its peer then is not yet the waiting port).
            return SocketKind::Unshaped;
        }
        let kind = self.kind_of(socket);
        if let (Some(bytes), true) = (buffer, kind != SocketKind::Unshaped) {
            let _ = sockopt::set_socket_send_buffer_size(socket, bytes);
            let _ = sockopt::set_socket_recv_buffer_size(socket, bytes);
        }
        if let Ok(stat) = rustix::fs::fstat(socket) {
            if self.kinds.len() >= MOST_REMEMBERED {
                self.kinds.clear();
            }
            self.kinds
                .insert((stat.st_dev, stat.st_ino), (kind, buffer));
        }
        kind
    }

    /// Keeps copies of the sockets shape makes from now on, and takes
    /// them from those: the command's cannot be taken.
    pub fn keep_copies(&mut self) {
        self.copies.get_or_insert_with(HashMap::new);
    }

    /// Whether copies are kept.
    pub fn keeps_copies(&self) -> bool {
        self.copies.is_some()
    }

    /// Keeps a copy of `socket`, just made for the command, if copies are
    /// kept.
    pub fn keep(&mut self, socket: BorrowedFd<'_>) {
        let (Some(copies), Ok(stat)) = (&mut self.copies, rustix::fs::fstat(socket)) else {
            return;
        };
        if let Ok(copy) = socket.try_clone_to_owned() {
            copies.insert((stat.st_dev, stat.st_ino), copy);
        }
    }

    /// Notes that `socket` is the relay's (not shaped here), and lets its
    /// copy go: the command's close must close it.
    pub fn relayed(&mut self, socket: BorrowedFd<'_>) {
        let Ok(stat) = rustix::fs::fstat(socket) else {
            return;
        };
        let key = (stat.st_dev, stat.st_ino);
        self.kinds.insert(key, (SocketKind::Unshaped, None));
        if let Some(copies) = &mut self.copies {
            copies.remove(&key);
        }
    }

    /// Whether any socket is copied.
    pub fn has_copies(&self) -> bool {
        self.copies
            .as_ref()
            .is_some_and(|copies| !copies.is_empty())
    }

    /// Whether the socket of `inode` is copied.
    pub fn is_copied(&self, inode: &(u64, u64)) -> bool {
        self.copies
            .as_ref()
            .is_some_and(|copies| copies.contains_key(inode))
    }

    /// Lets go of the copies of sockets by inode for which `held` is
    /// false: the command holds them no more.
    pub fn let_go_unless(&mut self, held: impl Fn(&(u64, u64)) -> bool) {
        if let Some(copies) = &mut self.copies {
            copies.retain(|inode, _| held(inode));
        }
    }

    /// A copy of descriptor `fd` of thread `tid`'s process.
    pub fn take(&mut self, tid: u32, fd: i32) -> io::Result<OwnedFd> {
        if let Some(copies) = &self.copies {
            let stat = rustix::fs::stat(format!("/proc/{tid}/fd/{fd}"))?;
            let copy = copies.get(&(stat.st_dev, stat.st_ino));
            let copy = copy.ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
            return copy.try_clone();
        }
        let taken = take_descriptor(self.pidfd(tid)?, fd);
        match taken {
            // A pidfd of a thread that ended, whose number is now another's.
            Err(err) if err.raw_os_error() == Some(libc::ESRCH) => {
                self.pidfds.remove(&tid);
                take_descriptor(self.pidfd(tid)?, fd)
            }
            other => other,
        }
    }

    /// A pidfd for thread `tid`.
    pub fn pidfd(&mut self, tid: u32) -> io::Result<BorrowedFd<'_>> {
        if !self.pidfds.contains_key(&tid) {
            if self.pidfds.len() >= FEW_PIDFDS {
                // Those of threads that ended go: their pidfds say so.
                self.pidfds.retain(|_, pidfd| !ended(pidfd.as_fd()));
            }
            if self.pidfds.len() >= MOST_PIDFDS {
                self.pidfds.clear();
            }
            self.pidfds.insert(tid, open_pidfd(tid)?);
        }
        Ok(self.pidfds[&tid].as_fd())
    }

    /// How many pidfds are kept open now.
    #[cfg(test)]
    fn pidfds_open(&self) -> usize {
        self.pidfds.len()
    }
}

/// Whether the thread (or process) of `pidfd` has ended: its pidfd is
/// readable then.
fn ended(pidfd: BorrowedFd<'_>) -> bool {
    let mut look = [PollFd::new(&pidfd, PollFlags::IN)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    rustix::event::poll(&mut look, Some(&zero)).is_ok_and(|ready| ready > 0)
}

/// Whether buffers of `sized` should become `wanted`: when they differ
/// by more than half.
fn resize(sized: Option<usize>, wanted: Option<usize>) -> bool {
    match (sized, wanted) {
        (Some(sized), Some(wanted)) => wanted > sized * 3 / 2 || wanted < sized / 2,
        (None, Some(_)) => true,
        (_, None) => false,
    }
}

/// What `socket` is: an IP socket's kind, else unshaped.
pub fn socket_kind(socket: BorrowedFd<'_>) -> SocketKind {
    let ip = matches!(
        sockopt::socket_domain(socket),
        Ok(AddressFamily::INET | AddressFamily::INET6)
    );
    match sockopt::socket_type(socket) {
        Ok(SocketType::STREAM) if ip => SocketKind::Stream,
        Ok(SocketType::DGRAM) if ip => SocketKind::Datagram,
        _ => SocketKind::Unshaped,
    }
}

/// Send and receive buffers for shaped sockets: about 100 ms of the
/// slower way's rate, so that the wire follows the bucket and a download
/// is not read ahead by megabytes; none without a limit.
pub fn buffer_for(buckets: &[Arc<Bucket>; 2]) -> Option<usize> {
    let rates = buckets.iter().filter_map(|bucket| match bucket.limit() {
        Limit::Rate(rate) => Some(rate.bytes_per_sec()),
        Limit::Unlimited => None,
    });
    let slowest = rates.fold(None, |least: Option<f64>, rate| {
        Some(least.map_or(rate, |least| least.min(rate)))
    })?;
    Some((slowest * 0.1).clamp(16.0 * 1024.0, 64.0 * 1024.0 * 1024.0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pidfds_of_threads_that_ended_are_not_kept() {
        // A program that starts a thread per connection: each thread's
        // pidfd is taken while it runs, then it ends.
        let mut sockets = Sockets::default();
        for _ in 0..3 * MOST_PIDFDS {
            let (told, tid) = std::sync::mpsc::channel();
            let (end, ending) = std::sync::mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                told.send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
                    .unwrap();
                let _ = ending.recv();
            });
            sockets.pidfd(tid.recv().unwrap()).unwrap();
            drop(end);
            thread.join().unwrap();
        }
        assert!(
            sockets.pidfds_open() <= FEW_PIDFDS,
            "{}",
            sockets.pidfds_open()
        );
    }
    use std::os::fd::AsRawFd;

    #[test]
    fn buffers_follow_the_rate_when_it_changes_by_more_than_half() {
        assert!(resize(None, Some(10_000)));
        assert!(!resize(Some(10_000), Some(14_000)));
        assert!(resize(Some(10_000), Some(16_000)));
        assert!(resize(Some(10_000), Some(4_000)));
        assert!(!resize(Some(10_000), None));
    }

    #[test]
    fn ip_sockets_are_shaped_and_the_rest_are_not() {
        let tid = std::process::id();
        let mut sockets = Sockets::default();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = std::net::UdpSocket::bind("[::1]:0")
            .or_else(|_| std::net::UdpSocket::bind("127.0.0.1:0"))
            .unwrap();
        let (unix, _) = std::os::unix::net::UnixStream::pair().unwrap();
        let file = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(sockets.kind(tid, tcp.as_raw_fd(), None), SocketKind::Stream);
        assert_eq!(
            sockets.kind(tid, udp.as_raw_fd(), None),
            SocketKind::Datagram
        );
        assert_eq!(
            sockets.kind(tid, unix.as_raw_fd(), None),
            SocketKind::Unshaped
        );
        assert_eq!(
            sockets.kind(tid, file.as_raw_fd(), None),
            SocketKind::Unshaped
        );
        assert_eq!(sockets.kind(tid, 100_000, None), SocketKind::Unshaped);
        // Remembered by inode: asked again, the answer is the same.
        assert_eq!(sockets.kind(tid, tcp.as_raw_fd(), None), SocketKind::Stream);
    }

    fn bucket(limit: Limit) -> Arc<Bucket> {
        Arc::new(shape_leaves::bucket::own(limit, 1 << 20).unwrap())
    }

    #[test]
    fn buffers_hold_a_tenth_of_a_second_of_the_slower_way_within_bounds() {
        let rate = |bytes| Limit::per_second(bytes);
        assert_eq!(
            buffer_for(&[bucket(rate(1 << 20)), bucket(rate(10 << 20))]),
            Some(104_857)
        );
        assert_eq!(
            buffer_for(&[bucket(Limit::Unlimited), bucket(rate(10 << 20))]),
            Some(1_048_576)
        );
        // Never below 16 KiB, nor above 64 MiB.
        assert_eq!(
            buffer_for(&[bucket(rate(1000)), bucket(rate(1000))]),
            Some(16 * 1024)
        );
        assert_eq!(
            buffer_for(&[bucket(rate(1 << 40)), bucket(Limit::Unlimited)]),
            Some(64 << 20)
        );
        assert_eq!(
            buffer_for(&[bucket(Limit::Unlimited), bucket(Limit::Unlimited)]),
            None
        );
    }
}
