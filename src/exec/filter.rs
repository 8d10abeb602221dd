//! The seccomp filter `--exec` puts on the command: every call that can
//! move bytes on a socket is handed to shape (which answers at once for
//! anything that is not an IP socket), io_uring is refused so that
//! programs fall back to plain calls, calls of another architecture
//! (32-bit programs) end the process rather than pass unshaped, and
//! everything else runs untouched. A few BPF instructions from `libc`'s
//! constants: no libseccomp.

use super::kernel::{jump, statement};

/// The calls handed to shape. On x86-64 and aarch64, `send` and `recv`
/// are `sendto` and `recvfrom`.
pub const HANDED: &[i64] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_sendmmsg,
    libc::SYS_recvmmsg,
    libc::SYS_sendfile,
    libc::SYS_splice,
];

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

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH_AT: u32 = 4;

/// The filter's program.
pub fn program() -> Vec<libc::sock_filter> {
    let ld = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let jeq = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let jge = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
    let ret = libc::BPF_RET | libc::BPF_K;
    let mut program = vec![
        statement(ld, ARCH_AT),
        jump(jeq, ARCH, 1, 0),
        statement(ret, libc::SECCOMP_RET_KILL_PROCESS),
        statement(ld, NR),
        jump(jge, X32_BIT, 0, 1),
        statement(ret, libc::SECCOMP_RET_KILL_PROCESS),
        jump(jeq, libc::SYS_io_uring_setup as u32, 0, 1),
        statement(
            ret,
            libc::SECCOMP_RET_ERRNO | (libc::ENOSYS as u32 & libc::SECCOMP_RET_DATA),
        ),
    ];
    // Each handed call jumps to the last instruction but one, USER_NOTIF.
    let count = HANDED.len();
    for (at, &nr) in HANDED.iter().enumerate() {
        let to_notify = (count - at) as u8;
        program.push(jump(jeq, nr as u32, to_notify, 0));
    }
    program.push(statement(ret, libc::SECCOMP_RET_ALLOW));
    program.push(statement(ret, libc::SECCOMP_RET_USER_NOTIF));
    program
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `program` on a call, as the kernel's BPF would.
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32) -> u32 {
        let mut pc = 0;
        let mut a = 0u32;
        loop {
            let ins = program[pc];
            let code = u32::from(ins.code);
            match code & 0x07 {
                0x00 => {
                    a = match ins.k {
                        NR => nr,
                        ARCH_AT => arch,
                        other => panic!("loads offset {other}"),
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

    #[test]
    fn socket_calls_are_handed_to_shape_and_the_rest_run() {
        let program = program();
        for &nr in HANDED {
            assert_eq!(
                run(&program, ARCH, nr as u32),
                libc::SECCOMP_RET_USER_NOTIF,
                "{nr}"
            );
        }
        for nr in [
            libc::SYS_openat,
            libc::SYS_close,
            libc::SYS_execve,
            libc::SYS_connect,
        ] {
            assert_eq!(run(&program, ARCH, nr as u32), libc::SECCOMP_RET_ALLOW);
        }
        assert_eq!(
            run(&program, ARCH, libc::SYS_io_uring_setup as u32),
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(
            run(&program, 0x4000_0003, libc::SYS_write as u32),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }
}
