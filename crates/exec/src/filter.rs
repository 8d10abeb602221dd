//! The seccomp filter `--exec` puts on the command. IP sockets are made
//! (and accepted, and duplicated) by shape and placed at descriptors of
//! `base` or more, so that the filter can tell them by number: reads and
//! writes on lower descriptors (files, pipes, the terminal) run untouched
//! and cost nothing, those on higher ones are handed to shape, as is
//! every call that exists only for sockets (send, receive, accept).
//! Where a link relays the command's TCP connections, every `connect`
//! is handed to shape too, which connects the socket through the link,
//! and sends and receives only on high descriptors (the relayed sockets
//! are low), and so is `getsockopt(SO_ERROR)`, how a connect in progress
//! learns its end, so that one the server refused is told so;
//! where shape keeps copies of the sockets (the command's cannot be
//! taken), so is every `close` of a high descriptor, to let its copy go.
//! io_uring is refused so that programs fall back to plain calls; calls
//! of another architecture (32-bit programs) end the process rather than
//! pass unshaped. A few BPF instructions from `libc`'s constants: no
//! libseccomp.

use super::kernel::{jump, statement};

/// Calls that exist only for sockets: always handed to shape.
const SOCKET_CALLS: &[i64] = &[
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_sendmmsg,
    libc::SYS_recvmmsg,
    libc::SYS_accept,
    libc::SYS_accept4,
];

/// Calls on any descriptor: handed to shape when it is `base` or more.
const ON_A_DESCRIPTOR: &[i64] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_sendfile,
    libc::SYS_dup,
    libc::SYS_dup3,
];

/// dup2, which aarch64 does without (its C library calls dup3).
#[cfg(target_arch = "x86_64")]
const DUP2: &[i64] = &[libc::SYS_dup2];
#[cfg(target_arch = "aarch64")]
const DUP2: &[i64] = &[];

/// The calls on any descriptor, dup2 included where it exists.
fn on_a_descriptor() -> impl Iterator<Item = i64> {
    ON_A_DESCRIPTOR.iter().chain(DUP2).copied()
}

/// Every call the filter may hand to shape.
pub fn handed() -> impl Iterator<Item = i64> {
    SOCKET_CALLS
        .iter()
        .copied()
        .chain(on_a_descriptor())
        .chain([
            libc::SYS_splice,
            libc::SYS_fcntl,
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_close,
            libc::SYS_getsockopt,
        ])
}

/// The calls handed to shape beyond those it always takes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Also {
    /// Every `connect`: a link relays TCP connections.
    pub connects: bool,
    /// `close` of a high descriptor: shape keeps copies of sockets.
    pub closes: bool,
}

/// This machine's architecture, as seccomp names it.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7;

/// x86-64's x32 calls carry this bit: another ABI, refused as 32-bit
/// ones are.
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const X32_BIT: u32 = u32::MAX;

/// Offsets in `struct seccomp_data`: the call's number, the
/// architecture, and the low half of each argument (little-endian).
const NR: u32 = 0;
const ARCH_AT: u32 = 4;
const fn arg(n: u32) -> u32 {
    16 + 8 * n
}

const LD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const JGE: u32 = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
const RET: u32 = libc::BPF_RET | libc::BPF_K;

/// The filter's program, for sockets placed at `base` or more, with the
/// calls of `also` handed over as well.
pub fn program(base: u32, also: Also) -> Vec<libc::sock_filter> {
    let notify = statement(RET, libc::SECCOMP_RET_USER_NOTIF);
    let allow = statement(RET, libc::SECCOMP_RET_ALLOW);
    let mut program = vec![
        statement(LD, ARCH_AT),
        jump(JEQ, ARCH, 1, 0),
        statement(RET, libc::SECCOMP_RET_KILL_PROCESS),
        statement(LD, NR),
        jump(JGE, X32_BIT, 0, 1),
        statement(RET, libc::SECCOMP_RET_KILL_PROCESS),
    ];
    // Each rule: if the number matches, a block that returns; else past it.
    let mut rule = |nr: i64, block: Vec<libc::sock_filter>| {
        program.push(jump(JEQ, nr as u32, 0, block.len() as u8));
        program.extend(block);
    };
    rule(
        libc::SYS_io_uring_setup,
        vec![statement(
            RET,
            libc::SECCOMP_RET_ERRNO | (libc::ENOSYS as u32 & libc::SECCOMP_RET_DATA),
        )],
    );
    // The descriptor in argument 0 is `base` or more.
    let high = vec![statement(LD, arg(0)), jump(JGE, base, 0, 1), notify, allow];
    for &nr in SOCKET_CALLS {
        // Where a link relays TCP, its sockets are low, connected to the
        // relay, which shapes them: their sends and receives need shape
        // for nothing. Datagram sockets stay high; accepting is shape's.
        let accepts = matches!(nr, libc::SYS_accept | libc::SYS_accept4);
        match also.connects && !accepts {
            true => rule(nr, high.clone()),
            false => rule(nr, vec![notify]),
        }
    }
    if also.connects {
        rule(libc::SYS_connect, vec![notify]);
        // getsockopt(fd, SOL_SOCKET, SO_ERROR): a connect's end.
        rule(
            libc::SYS_getsockopt,
            vec![
                statement(LD, arg(1)),
                jump(JEQ, libc::SOL_SOCKET as u32, 0, 3),
                statement(LD, arg(2)),
                jump(JEQ, libc::SO_ERROR as u32, 0, 1),
                notify,
                allow,
            ],
        );
    }
    for nr in on_a_descriptor() {
        rule(nr, high.clone());
    }
    if also.closes {
        rule(libc::SYS_close, high.clone());
    }
    // splice: from (argument 0) or to (argument 2) a high descriptor.
    rule(
        libc::SYS_splice,
        vec![
            statement(LD, arg(0)),
            jump(JGE, base, 2, 0),
            statement(LD, arg(2)),
            jump(JGE, base, 0, 1),
            notify,
            allow,
        ],
    );
    // fcntl's F_DUPFD and F_DUPFD_CLOEXEC of a high descriptor.
    rule(
        libc::SYS_fcntl,
        vec![
            statement(LD, arg(0)),
            jump(JGE, base, 0, 4),
            statement(LD, arg(1)),
            jump(JEQ, libc::F_DUPFD as u32, 1, 0),
            jump(JEQ, libc::F_DUPFD_CLOEXEC as u32, 0, 1),
            notify,
            allow,
        ],
    );
    // socket() of an IP family, which shape makes.
    rule(
        libc::SYS_socket,
        vec![
            statement(LD, arg(0)),
            jump(JEQ, libc::AF_INET as u32, 1, 0),
            jump(JEQ, libc::AF_INET6 as u32, 0, 1),
            notify,
            allow,
        ],
    );
    program.push(allow);
    program
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` on a call, as the kernel's BPF would.
    fn run(program: &[libc::sock_filter], arch: u32, nr: i64, args: [u32; 6]) -> u32 {
        let mut pc = 0;
        let mut a = 0u32;
        loop {
            let ins = program[pc];
            let code = u32::from(ins.code);
            match code & 0x07 {
                0x00 => {
                    a = match ins.k {
                        NR => nr as u32,
                        ARCH_AT => arch,
                        at => args[((at - 16) / 8) as usize],
                    };
                    pc += 1;
                }
                0x05 => {
                    let taken = match code & 0xf0 {
                        0x10 => a == ins.k,
                        0x30 => a >= ins.k,
                        other => panic!("jump {other:#x}"),
                    };
                    pc += 1 + usize::from(if taken { ins.jt } else { ins.jf });
                }
                0x06 => return ins.k,
                other => panic!("class {other:#x}"),
            }
        }
    }

    const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

    #[test]
    fn every_call_the_program_hands_over_is_one_shape_knows() {
        let every = Also {
            connects: true,
            closes: true,
        };
        let program = program(512, every);
        let inet = libc::AF_INET as u32;
        let dupfd = libc::F_DUPFD as u32;
        for nr in 0..512 {
            let error = [600, libc::SOL_SOCKET as u32, libc::SO_ERROR as u32, 0, 0, 0];
            let handed = run(&program, ARCH, nr, [inet, dupfd, 600, 0, 0, 0]) == NOTIFY
                || run(&program, ARCH, nr, [600, dupfd, 600, 0, 0, 0]) == NOTIFY
                || run(&program, ARCH, nr, error) == NOTIFY;
            assert_eq!(handed, super::handed().any(|known| known == nr), "{nr}");
        }
    }

    #[test]
    fn high_descriptors_and_socket_calls_are_handed_to_shape_and_the_rest_run() {
        let program = program(512, Also::default());
        let on = |nr, args| run(&program, ARCH, nr, args);
        for &nr in SOCKET_CALLS {
            assert_eq!(on(nr, [3, 0, 0, 0, 0, 0]), NOTIFY, "{nr}");
        }
        for nr in on_a_descriptor() {
            assert_eq!(on(nr, [512, 0, 0, 0, 0, 0]), NOTIFY, "{nr}");
            assert_eq!(on(nr, [511, 0, 0, 0, 0, 0]), ALLOW, "{nr}");
            assert_eq!(on(nr, [1, 0, 0, 0, 0, 0]), ALLOW, "{nr}");
        }
        assert_eq!(on(libc::SYS_splice, [600, 0, 4, 0, 0, 0]), NOTIFY);
        assert_eq!(on(libc::SYS_splice, [4, 0, 600, 0, 0, 0]), NOTIFY);
        assert_eq!(on(libc::SYS_splice, [4, 0, 5, 0, 0, 0]), ALLOW);
        let dupfd = libc::F_DUPFD as u32;
        let cloexec = libc::F_DUPFD_CLOEXEC as u32;
        assert_eq!(on(libc::SYS_fcntl, [600, dupfd, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(on(libc::SYS_fcntl, [600, cloexec, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(
            on(libc::SYS_fcntl, [600, libc::F_GETFL as u32, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(on(libc::SYS_fcntl, [5, dupfd, 0, 0, 0, 0]), ALLOW);
        let inet = libc::AF_INET as u32;
        assert_eq!(on(libc::SYS_socket, [inet, 1, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(
            on(libc::SYS_socket, [libc::AF_INET6 as u32, 2, 0, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            on(libc::SYS_socket, [libc::AF_UNIX as u32, 1, 0, 0, 0, 0]),
            ALLOW
        );
        for nr in [
            libc::SYS_openat,
            libc::SYS_close,
            libc::SYS_execve,
            libc::SYS_connect,
            libc::SYS_close,
        ] {
            assert_eq!(on(nr, [600, 0, 0, 0, 0, 0]), ALLOW);
        }
        let also = Also {
            connects: true,
            closes: true,
        };
        let relaying = super::program(512, also);
        assert_eq!(
            run(&relaying, ARCH, libc::SYS_connect, [3, 0, 0, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            run(&relaying, ARCH, libc::SYS_close, [512, 0, 0, 0, 0, 0]),
            NOTIFY
        );
        assert_eq!(
            run(&relaying, ARCH, libc::SYS_close, [5, 0, 0, 0, 0, 0]),
            ALLOW
        );
        for nr in [libc::SYS_sendto, libc::SYS_recvfrom, libc::SYS_recvmmsg] {
            assert_eq!(run(&relaying, ARCH, nr, [5, 0, 0, 0, 0, 0]), ALLOW);
            assert_eq!(run(&relaying, ARCH, nr, [512, 0, 0, 0, 0, 0]), NOTIFY);
        }
        for nr in [libc::SYS_accept, libc::SYS_accept4] {
            assert_eq!(run(&relaying, ARCH, nr, [5, 0, 0, 0, 0, 0]), NOTIFY);
        }
        // A connect's end is asked of shape; other options are not.
        let (sol, error) = (libc::SOL_SOCKET as u32, libc::SO_ERROR as u32);
        let getsockopt = |args| run(&relaying, ARCH, libc::SYS_getsockopt, args);
        assert_eq!(getsockopt([5, sol, error, 0, 0, 0]), NOTIFY);
        assert_eq!(getsockopt([5, sol, libc::SO_RCVBUF as u32, 0, 0, 0]), ALLOW);
        assert_eq!(
            getsockopt([5, libc::IPPROTO_TCP as u32, error, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(on(libc::SYS_getsockopt, [5, sol, error, 0, 0, 0]), ALLOW);
        assert_eq!(
            on(libc::SYS_io_uring_setup, [0; 6]),
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(
            run(&program, 0x4000_0003, libc::SYS_write, [0; 6]),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }
}
