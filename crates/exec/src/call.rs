//! What a call handed to shape asks, read from its number and arguments
//! (and, for vectors and message headers, from the caller's memory): the
//! descriptor, which way bytes go, the caller's buffers, flags and
//! address. Pure: memory is read through a function given, so that every
//! form is tested without a process.

use shape_impair::faults::Way;
use std::io;

/// The most buffers of one vector read (the kernel's own limit, IOV_MAX).
const MOST_BUFFERS: u64 = 1024;

/// A call, as shape carries it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// Bytes between a socket and the caller's buffers.
    Transfer(Transfer),
    /// `sendfile` from a file to descriptor `out`.
    SendFile {
        out: i32,
        from: i32,
        offset_at: u64,
        count: u64,
    },
    /// A call shape shapes only by paying for it and letting the kernel
    /// carry it out: `sendmmsg`, `recvmmsg`, `splice`, and messages with
    /// control data. `length` is what it may move at most, if known.
    Coarse {
        fd: i32,
        way: Way,
        length: Option<u64>,
    },
    /// `splice` out of socket `fd` into pipe `pipe`: a receive, of at
    /// most `length`, as `flags` (SPLICE_F_*) ask.
    SpliceOut {
        fd: i32,
        pipe: i32,
        length: u64,
        flags: u32,
    },
    /// `socket` of an IP family: made by shape, placed high.
    Socket {
        domain: i32,
        kind: i32,
        protocol: i32,
    },
    /// `accept` or `accept4` on `fd`: the new socket placed high, its
    /// peer's address written where the call asks.
    Accept {
        fd: i32,
        name_at: u64,
        len_at: u64,
        flags: i32,
    },
    /// `connect` of `fd` to the address of `len` bytes at `name_at`.
    Connect { fd: i32, name_at: u64, len: u32 },
    /// `dup` or `fcntl(F_DUPFD)` of `fd`: a copy at the lowest free
    /// descriptor of `least` or more (shape keeps it high).
    Dup { fd: i32, least: i32, cloexec: bool },
    /// `dup2` or `dup3` of `fd` to descriptor `to`, as asked.
    DupTo { fd: i32, to: i32 },
    /// Not a socket call after all (a positioned `preadv2`/`pwritev2`).
    Other,
}

/// Bytes between socket `fd` and the caller's buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    pub fd: i32,
    pub way: Way,
    /// The caller's buffers, in order: (address, length).
    pub buffers: Vec<(u64, u64)>,
    /// The `MSG_*` flags given (none for read and write).
    pub flags: i32,
    pub name: Name,
    /// Where to write the flags of a received message (`recvmsg`).
    pub flags_at: Option<u64>,
}

impl Transfer {
    /// The bytes the buffers hold.
    pub fn length(&self) -> u64 {
        total(&self.buffers)
    }
}

/// What `buffers` hold in all. Their lengths are the program's: they may
/// add up past what any call moves (the kernel refuses such a call), and
/// the sum stops at the largest number rather than wrapping.
fn total(buffers: &[(u64, u64)]) -> u64 {
    buffers
        .iter()
        .fold(0u64, |sum, &(_, len)| sum.saturating_add(len))
}

/// The peer's address of a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name {
    None,
    /// Sent to this address (`sendto`, `sendmsg`): where, and its length.
    To {
        at: u64,
        len: u32,
    },
    /// Received from: where to write it, the room there, and where its
    /// length is written.
    From {
        at: u64,
        room: u32,
        len_at: u64,
    },
}

/// The descriptor a call is on, if it is one shape looks at (`socket`
/// is on none).
pub fn descriptor(nr: i64, args: &[u64; 6]) -> Option<i32> {
    match nr {
        libc::SYS_socket => None,
        // splice: the descriptor written to.
        libc::SYS_splice => Some(args[2] as i32),
        _ if super::filter::handed().any(|handed| handed == nr) => Some(args[0] as i32),
        _ => None,
    }
}

/// Reads the call `nr` with `args`, reading the caller's memory (vectors,
/// message headers, address lengths) with `read`.
pub fn decode(
    nr: i64,
    args: &[u64; 6],
    read: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<Call> {
    Ok(match transfer(nr, args, read)? {
        Some(call) => call,
        None => descriptor_call(nr, args),
    })
}

/// The calls that move bytes, each read as shape pays for it; `None` for
/// any other call.
fn transfer(
    nr: i64,
    args: &[u64; 6],
    read: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<Option<Call>> {
    let fd = args[0] as i32;
    let single = |way, flags, name| {
        Call::Transfer(Transfer {
            fd,
            way,
            buffers: vec![(args[1], args[2])],
            flags,
            name,
            flags_at: None,
        })
    };
    Ok(Some(match nr {
        libc::SYS_write => single(Way::Up, 0, Name::None),
        libc::SYS_read => single(Way::Down, 0, Name::None),
        libc::SYS_sendto => {
            let name = match args[4] {
                0 => Name::None,
                at => Name::To {
                    at,
                    len: args[5] as u32,
                },
            };
            single(Way::Up, args[3] as i32, name)
        }
        libc::SYS_recvfrom => {
            let name = match (args[4], args[5]) {
                (0, _) | (_, 0) => Name::None,
                (at, len_at) => Name::From {
                    at,
                    room: read_u32(read, len_at)?,
                    len_at,
                },
            };
            single(Way::Down, args[3] as i32, name)
        }
        libc::SYS_writev | libc::SYS_readv | libc::SYS_pwritev2 | libc::SYS_preadv2 => {
            vectored(nr, args, read)?
        }
        libc::SYS_sendmsg | libc::SYS_recvmsg => {
            let way = match nr {
                libc::SYS_sendmsg => Way::Up,
                _ => Way::Down,
            };
            message(read, fd, way, args[1], args[2] as i32)?
        }
        libc::SYS_sendfile => Call::SendFile {
            out: fd,
            from: args[1] as i32,
            offset_at: args[2],
            count: args[3],
        },
        libc::SYS_sendmmsg => Call::Coarse {
            fd,
            way: Way::Up,
            length: Some(messages_length(read, args[1], args[2])?),
        },
        libc::SYS_recvmmsg => Call::Coarse {
            fd,
            way: Way::Down,
            length: None,
        },
        libc::SYS_splice => Call::Coarse {
            fd: args[2] as i32,
            way: Way::Up,
            length: Some(args[4]),
        },
        _ => return Ok(None),
    }))
}

/// `writev`, `readv`, and `pwritev2` or `preadv2` where they act as those
/// do.
fn vectored(
    nr: i64,
    args: &[u64; 6],
    read: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<Call> {
    let positioned = matches!(nr, libc::SYS_pwritev2 | libc::SYS_preadv2);
    // preadv2/pwritev2 at offset -1 use the file position, as readv/writev
    // do; flags (RWF_*) other than none are not a socket's.
    if positioned && (args[3] as i64 != -1 || args[5] != 0) {
        return Ok(Call::Other);
    }
    let way = match nr {
        libc::SYS_writev | libc::SYS_pwritev2 => Way::Up,
        _ => Way::Down,
    };
    Ok(Call::Transfer(Transfer {
        fd: args[0] as i32,
        way,
        buffers: vector(read, args[1], args[2])?,
        flags: 0,
        name: Name::None,
        flags_at: None,
    }))
}

/// The calls that make, accept or copy descriptors, which shape follows
/// to know which descriptors are shaped sockets.
fn descriptor_call(nr: i64, args: &[u64; 6]) -> Call {
    let fd = args[0] as i32;
    match nr {
        libc::SYS_socket => Call::Socket {
            domain: args[0] as i32,
            kind: args[1] as i32,
            protocol: args[2] as i32,
        },
        libc::SYS_accept | libc::SYS_accept4 => Call::Accept {
            fd,
            name_at: args[1],
            len_at: args[2],
            flags: match nr {
                libc::SYS_accept4 => args[3] as i32,
                _ => 0,
            },
        },
        libc::SYS_connect => Call::Connect {
            fd,
            name_at: args[1],
            len: args[2] as u32,
        },
        libc::SYS_dup => Call::Dup {
            fd,
            least: 0,
            cloexec: false,
        },
        libc::SYS_fcntl => match args[1] as i32 {
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => Call::Dup {
                fd,
                least: args[2] as i32,
                cloexec: args[1] as i32 == libc::F_DUPFD_CLOEXEC,
            },
            _ => Call::Other,
        },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_dup2 => Call::DupTo {
            fd,
            to: args[1] as i32,
        },
        libc::SYS_dup3 => Call::DupTo {
            fd,
            to: args[1] as i32,
        },
        _ => Call::Other,
    }
}

/// A `splice` with `args` whose source (argument 0) is a shaped socket:
/// a receive into the pipe it writes to. Offsets are for files: given
/// one, it is no splice out of a socket.
pub fn splice_out(args: &[u64; 6]) -> Call {
    if args[1] != 0 || args[3] != 0 {
        return Call::Other;
    }
    Call::SpliceOut {
        fd: args[0] as i32,
        pipe: args[2] as i32,
        length: args[4],
        flags: args[5] as u32,
    }
}

/// The IP address and port of a `sockaddr_in` or `sockaddr_in6` as the
/// kernel reads it, if `raw` is one.
pub fn ip_address(raw: &[u8]) -> Option<std::net::SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    let family = u16::from_ne_bytes(raw.get(..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(raw.get(2..4)?.try_into().ok()?);
    match i32::from(family) {
        libc::AF_INET => {
            let ip: [u8; 4] = raw.get(4..8)?.try_into().ok()?;
            Some(SocketAddrV4::new(Ipv4Addr::from(ip), port).into())
        }
        libc::AF_INET6 if raw.len() >= 24 => {
            let flow = u32::from_be_bytes(raw[4..8].try_into().ok()?);
            let ip: [u8; 16] = raw[8..24].try_into().ok()?;
            let scope = raw
                .get(24..28)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u32::from_ne_bytes);
            Some(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope).into())
        }
        _ => None,
    }
}

/// `at` as the kernel lays out a `sockaddr_in` or `sockaddr_in6`; as
/// IPv6 (an IPv4 address mapped) for a socket of IPv6.
pub fn ip_address_bytes(at: std::net::SocketAddr, v6: bool) -> Vec<u8> {
    use std::net::SocketAddr;
    let at = match (at, v6) {
        (SocketAddr::V4(v4), true) => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
        _ => at,
    };
    match at {
        SocketAddr::V4(v4) => {
            let mut raw = (libc::AF_INET as u16).to_ne_bytes().to_vec();
            raw.extend(v4.port().to_be_bytes());
            raw.extend(v4.ip().octets());
            raw.extend([0; 8]);
            raw
        }
        SocketAddr::V6(v6) => {
            let mut raw = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
            raw.extend(v6.port().to_be_bytes());
            raw.extend(v6.flowinfo().to_be_bytes());
            raw.extend(v6.ip().octets());
            raw.extend(v6.scope_id().to_ne_bytes());
            raw
        }
    }
}

/// The u32 at `at`.
fn read_u32(read: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>, at: u64) -> io::Result<u32> {
    let mut bytes = [0; 4];
    read(at, &mut bytes)?;
    Ok(u32::from_ne_bytes(bytes))
}

/// The u64 at `at`.
fn read_u64(read: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>, at: u64) -> io::Result<u64> {
    let mut bytes = [0; 8];
    read(at, &mut bytes)?;
    Ok(u64::from_ne_bytes(bytes))
}

/// The `count` buffers of the iovec array at `at`.
fn vector(
    read: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
    at: u64,
    count: u64,
) -> io::Result<Vec<(u64, u64)>> {
    if count > MOST_BUFFERS {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut raw = vec![0u8; count as usize * 16];
    read(at, &mut raw)?;
    Ok(raw
        .chunks_exact(16)
        .map(|iov| {
            let base = u64::from_ne_bytes(iov[..8].try_into().unwrap_or_default());
            let len = u64::from_ne_bytes(iov[8..].try_into().unwrap_or_default());
            (base, len)
        })
        .collect())
}

/// Offsets in `struct msghdr` on a 64-bit machine.
const MSG_NAME: u64 = 0;
const MSG_NAMELEN: u64 = 8;
const MSG_IOV: u64 = 16;
const MSG_IOVLEN: u64 = 24;
const MSG_CONTROLLEN: u64 = 40;
const MSG_FLAGS: u64 = 48;

/// The size of `struct mmsghdr` on a 64-bit machine: a `msghdr` and the
/// length sent, padded.
const MMSGHDR: u64 = 64;

/// The bytes of the `count` messages of the `mmsghdr` array at `at`
/// (`sendmmsg`).
fn messages_length(
    read: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
    at: u64,
    count: u64,
) -> io::Result<u64> {
    let mut length: u64 = 0;
    for n in 0..count.min(MOST_BUFFERS) {
        let header = at.wrapping_add(n.wrapping_mul(MMSGHDR));
        let (iov, iov_len) = (
            read_u64(read, header.wrapping_add(MSG_IOV))?,
            read_u64(read, header.wrapping_add(MSG_IOVLEN))?,
        );
        length = length.saturating_add(total(&vector(read, iov, iov_len)?));
    }
    Ok(length)
}

/// A `sendmsg` or `recvmsg` with the header at `at`. Addresses are the
/// program's, and may be anything: one near the top of memory wraps, and
/// reading there fails as the kernel's own reading would.
fn message(
    read: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
    fd: i32,
    way: Way,
    at: u64,
    flags: i32,
) -> io::Result<Call> {
    let control = read_u64(read, at.wrapping_add(MSG_CONTROLLEN))?;
    let (iov, iov_len) = (
        read_u64(read, at.wrapping_add(MSG_IOV))?,
        read_u64(read, at.wrapping_add(MSG_IOVLEN))?,
    );
    let buffers = vector(read, iov, iov_len)?;
    if control != 0 {
        let length = total(&buffers);
        return Ok(Call::Coarse {
            fd,
            way,
            length: Some(length),
        });
    }
    let name_at = read_u64(read, at.wrapping_add(MSG_NAME))?;
    let name_len = read_u32(read, at.wrapping_add(MSG_NAMELEN))?;
    let name = match (name_at, way) {
        (0, _) => Name::None,
        (_, Way::Up) => Name::To {
            at: name_at,
            len: name_len,
        },
        (_, Way::Down) => Name::From {
            at: name_at,
            room: name_len,
            len_at: at.wrapping_add(MSG_NAMELEN),
        },
    };
    Ok(Call::Transfer(Transfer {
        fd,
        way,
        buffers,
        flags,
        name,
        flags_at: (way == Way::Down).then_some(at.wrapping_add(MSG_FLAGS)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller's memory: bytes from address 0x1000 on.
    struct CallerMemory(Vec<u8>);

    impl CallerMemory {
        const BASE: u64 = 0x1000;

        fn put(&mut self, bytes: &[u8]) -> u64 {
            let at = Self::BASE + self.0.len() as u64;
            self.0.extend_from_slice(bytes);
            at
        }

        fn reader(&self) -> impl FnMut(u64, &mut [u8]) -> io::Result<()> + '_ {
            move |at, into: &mut [u8]| {
                let fault = || io::Error::from_raw_os_error(libc::EFAULT);
                let from = at.checked_sub(Self::BASE).ok_or_else(fault)? as usize;
                let to = from.checked_add(into.len()).ok_or_else(fault)?;
                let bytes = self.0.get(from..to).ok_or_else(fault)?;
                into.copy_from_slice(bytes);
                Ok(())
            }
        }
    }

    fn iovec(base: u64, len: u64) -> Vec<u8> {
        [base.to_ne_bytes(), len.to_ne_bytes()].concat()
    }

    #[test]
    fn writes_and_reads_are_one_buffer() {
        let memory = CallerMemory(Vec::new());
        let call = decode(
            libc::SYS_write,
            &[7, 0x5000, 100, 0, 0, 0],
            &mut memory.reader(),
        )
        .unwrap();
        let Call::Transfer(transfer) = call else {
            panic!("{call:?}")
        };
        assert_eq!(
            (transfer.fd, transfer.way, transfer.buffers, transfer.name),
            (7, Way::Up, vec![(0x5000, 100)], Name::None)
        );
    }

    #[test]
    fn recvfrom_reads_the_room_for_the_address() {
        let mut memory = CallerMemory(Vec::new());
        let len_at = memory.put(&16u32.to_ne_bytes());
        let args = [3, 0x5000, 64, libc::MSG_DONTWAIT as u64, 0x6000, len_at];
        let Call::Transfer(transfer) =
            decode(libc::SYS_recvfrom, &args, &mut memory.reader()).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            transfer.name,
            Name::From {
                at: 0x6000,
                room: 16,
                len_at
            }
        );
        assert_eq!(transfer.flags, libc::MSG_DONTWAIT);
    }

    #[test]
    fn vectors_and_messages_read_their_buffers() {
        let mut memory = CallerMemory(Vec::new());
        let iov = memory.put(&[iovec(0x7000, 10), iovec(0x8000, 20)].concat());
        let Call::Transfer(transfer) = decode(
            libc::SYS_writev,
            &[4, iov, 2, 0, 0, 0],
            &mut memory.reader(),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(transfer.length(), 30);

        let header = [
            0x9000u64.to_ne_bytes().to_vec(),
            (16u64).to_ne_bytes().to_vec(),
            iov.to_ne_bytes().to_vec(),
            2u64.to_ne_bytes().to_vec(),
            0u64.to_ne_bytes().to_vec(),
            0u64.to_ne_bytes().to_vec(),
            0u64.to_ne_bytes().to_vec(),
        ]
        .concat();
        let msg = memory.put(&header);
        let Call::Transfer(received) = decode(
            libc::SYS_recvmsg,
            &[4, msg, 0, 0, 0, 0],
            &mut memory.reader(),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(received.buffers, vec![(0x7000, 10), (0x8000, 20)]);
        assert_eq!(
            received.name,
            Name::From {
                at: 0x9000,
                room: 16,
                len_at: msg.wrapping_add(8)
            }
        );
        assert_eq!(received.flags_at, Some(msg + 48));

        let mut with_control = header.clone();
        with_control[40..48].copy_from_slice(&24u64.to_ne_bytes());
        let msg = memory.put(&with_control);
        assert_eq!(
            decode(
                libc::SYS_sendmsg,
                &[4, msg, 0, 0, 0, 0],
                &mut memory.reader()
            )
            .unwrap(),
            Call::Coarse {
                fd: 4,
                way: Way::Up,
                length: Some(30)
            }
        );
    }

    #[test]
    fn sendmmsg_is_paid_for_every_message() {
        let mut memory = CallerMemory(Vec::new());
        let iov = memory.put(&[iovec(0x7000, 10), iovec(0x8000, 20)].concat());
        let header = |count: u64| {
            let mut header = vec![0u8; 64];
            header[16..24].copy_from_slice(&iov.to_ne_bytes());
            header[24..32].copy_from_slice(&count.to_ne_bytes());
            header
        };
        let messages = memory.put(&[header(2), header(1)].concat());
        assert_eq!(
            decode(
                libc::SYS_sendmmsg,
                &[4, messages, 2, 0, 0, 0],
                &mut memory.reader()
            )
            .unwrap(),
            Call::Coarse {
                fd: 4,
                way: Way::Up,
                length: Some(40)
            }
        );
    }

    #[test]
    fn a_splice_out_of_a_socket_is_a_receive_into_its_pipe() {
        assert_eq!(
            splice_out(&[600, 0, 4, 0, 65536, 2]),
            Call::SpliceOut {
                fd: 600,
                pipe: 4,
                length: 65536,
                flags: 2
            }
        );
        assert_eq!(splice_out(&[600, 0x1000, 4, 0, 65536, 0]), Call::Other);
    }

    #[test]
    fn positioned_vectors_are_not_socket_calls() {
        let memory = CallerMemory(Vec::new());
        let at_offset = [4, 0x1000, 1, 512, 0, 0];
        assert_eq!(
            decode(libc::SYS_pwritev2, &at_offset, &mut memory.reader()).unwrap(),
            Call::Other
        );
    }

    #[test]
    fn addresses_at_the_top_of_memory_and_lengths_past_any_call_are_no_panic() {
        // Both found by fuzzing: each panicked in a build that checks
        // for overflow.
        let mut memory = CallerMemory(Vec::new());
        let top = u64::MAX - 8;
        assert!(
            decode(
                libc::SYS_sendmsg,
                &[4, top, 0, 0, 0, 0],
                &mut memory.reader()
            )
            .is_err()
        );
        let iov = memory.put(&[iovec(0x7000, u64::MAX), iovec(0x8000, 20)].concat());
        let Call::Transfer(transfer) = decode(
            libc::SYS_writev,
            &[4, iov, 2, 0, 0, 0],
            &mut memory.reader(),
        )
        .unwrap() else {
            panic!("writev is a transfer");
        };
        assert_eq!(transfer.length(), u64::MAX);
    }

    #[test]
    fn a_vector_too_long_or_unreadable_fails() {
        let memory = CallerMemory(Vec::new());
        assert!(
            decode(
                libc::SYS_readv,
                &[4, 0x1000, 5000, 0, 0, 0],
                &mut memory.reader()
            )
            .is_err()
        );
        assert!(
            decode(
                libc::SYS_readv,
                &[4, 0x1000, 2, 0, 0, 0],
                &mut memory.reader()
            )
            .is_err()
        );
    }

    #[test]
    fn connects_are_read_with_their_address_as_the_kernel_lays_it_out() {
        let memory = CallerMemory(Vec::new());
        assert_eq!(
            decode(
                libc::SYS_connect,
                &[7, 0x1000, 16, 0, 0, 0],
                &mut memory.reader()
            )
            .unwrap(),
            Call::Connect {
                fd: 7,
                name_at: 0x1000,
                len: 16
            }
        );
        let mut v4 = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        v4.extend(8080u16.to_be_bytes());
        v4.extend([127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(ip_address(&v4), Some(([127, 0, 0, 1], 8080).into()));
        let mut v6 = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        v6.extend(443u16.to_be_bytes());
        v6.extend([0; 4]);
        v6.extend(std::net::Ipv6Addr::LOCALHOST.octets());
        v6.extend(3u32.to_ne_bytes());
        let expected = std::net::SocketAddrV6::new(std::net::Ipv6Addr::LOCALHOST, 443, 0, 3);
        assert_eq!(ip_address(&v6), Some(expected.into()));
        assert_eq!(ip_address_bytes(expected.into(), true), v6);
        let four: std::net::SocketAddr = ([10, 0, 0, 1], 53).into();
        assert_eq!(ip_address(&ip_address_bytes(four, false)), Some(four));
        let mapped = ip_address(&ip_address_bytes(four, true)).unwrap();
        assert_eq!(mapped.port(), 53);
        assert!(mapped.is_ipv6());
        let unix = [libc::AF_UNIX as u8, 0, b'/', b'x'];
        assert_eq!(ip_address(&unix), None);
        assert_eq!(ip_address(&[2]), None);
        assert_eq!(ip_address(&v6[..10]), None);
    }
}
