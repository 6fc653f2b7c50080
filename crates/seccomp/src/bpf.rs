//! A small classic-BPF interpreter for the instruction subset the kernel
//! accepts in seccomp filters, used to check compiled programs without
//! installing them.

/// Outcome of running the filter on one syscall (see
/// [`CompiledFilter::evaluate`](crate::CompiledFilter::evaluate)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// `SECCOMP_RET_ALLOW`.
    Allow,
    /// `SECCOMP_RET_USER_NOTIF` ([`Action::KillAndReport`](crate::Action::KillAndReport)).
    Notify,
    /// `SECCOMP_RET_ERRNO` with this errno.
    Errno(i32),
    /// `SECCOMP_RET_KILL_PROCESS`.
    KillProcess,
    /// `SECCOMP_RET_KILL_THREAD`.
    KillThread,
    /// `SECCOMP_RET_TRAP`.
    Trap,
    /// `SECCOMP_RET_TRACE` (the gVisor runtime's stand-in for a notification).
    Trace,
    /// Any other return value (log, ...), raw.
    Other(u32),
    /// The program is not one the kernel would accept (bad instruction,
    /// out-of-bounds jump or load, running off the end).
    Invalid,
}

const SECCOMP_DATA_SIZE: u32 = 64;

// Instruction classes and fields (linux/bpf_common.h).
const BPF_LD: u16 = 0x00;
const BPF_LDX: u16 = 0x01;
const BPF_ST: u16 = 0x02;
const BPF_STX: u16 = 0x03;
const BPF_ALU: u16 = 0x04;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_MISC: u16 = 0x07;

const BPF_W: u16 = 0x00;
const BPF_IMM: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_MEM: u16 = 0x60;
const BPF_LEN: u16 = 0x80;

const BPF_K: u16 = 0x00;
const BPF_X: u16 = 0x08;
const BPF_A: u16 = 0x10;

const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_KILL_THREAD: u32 = 0x0000_0000;
const SECCOMP_RET_TRAP: u32 = 0x0003_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ACTION_FULL: u32 = 0xffff_0000;
const SECCOMP_RET_DATA: u32 = 0x0000_ffff;

/// The instructions and return values the crate's hand-written pieces are built of.
pub(crate) mod op {
    pub const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    pub const AND_K: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
    pub const JA: u16 = 0x05; // BPF_JMP | BPF_JA
    pub const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    pub const JGT_K: u16 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
    pub const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    pub const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    pub const RET_ALLOW: u32 = super::SECCOMP_RET_ALLOW;
    pub const RET_ERRNO: u32 = super::SECCOMP_RET_ERRNO;
    pub const RET_USER_NOTIF: u32 = super::SECCOMP_RET_USER_NOTIF;
    pub const RET_ACTION: u32 = super::SECCOMP_RET_ACTION_FULL;
    pub const RET_DATA: u32 = super::SECCOMP_RET_DATA;
}

fn seccomp_data(arch: u32, nr: i32, ip: u64, args: [u64; 6]) -> [u8; 64] {
    let mut d = [0u8; 64];
    d[0..4].copy_from_slice(&nr.to_ne_bytes());
    d[4..8].copy_from_slice(&arch.to_ne_bytes());
    d[8..16].copy_from_slice(&ip.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        d[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
    }
    d
}

pub(crate) fn run(
    prog: &[libc::sock_filter],
    arch: u32,
    nr: i32,
    ip: u64,
    args: [u64; 6],
) -> Verdict {
    match exec(prog, &seccomp_data(arch, nr, ip, args)) {
        Some(ret) => verdict(ret),
        None => Verdict::Invalid,
    }
}

fn verdict(ret: u32) -> Verdict {
    match ret & SECCOMP_RET_ACTION_FULL {
        SECCOMP_RET_ALLOW => Verdict::Allow,
        SECCOMP_RET_USER_NOTIF => Verdict::Notify,
        SECCOMP_RET_ERRNO => Verdict::Errno((ret & SECCOMP_RET_DATA) as i32),
        SECCOMP_RET_KILL_PROCESS => Verdict::KillProcess,
        SECCOMP_RET_KILL_THREAD => Verdict::KillThread,
        SECCOMP_RET_TRAP => Verdict::Trap,
        SECCOMP_RET_TRACE => Verdict::Trace,
        _ => Verdict::Other(ret),
    }
}

fn exec(prog: &[libc::sock_filter], data: &[u8; 64]) -> Option<u32> {
    let mut a: u32 = 0;
    let mut x: u32 = 0;
    let mut mem = [0u32; 16];
    let mut pc = 0usize;
    loop {
        let ins = prog.get(pc)?;
        let k = ins.k;
        pc += 1;
        let class = ins.code & 0x07;
        match class {
            BPF_LD | BPF_LDX => {
                let mode = ins.code & 0xe0;
                let size = ins.code & 0x18;
                let v = match mode {
                    BPF_ABS if class == BPF_LD && size == BPF_W => {
                        if k >= SECCOMP_DATA_SIZE || k % 4 != 0 {
                            return None;
                        }
                        let k = k as usize;
                        u32::from_ne_bytes(data[k..k + 4].try_into().ok()?)
                    }
                    BPF_IMM => k,
                    BPF_MEM => *mem.get(k as usize)?,
                    BPF_LEN if size == BPF_W => SECCOMP_DATA_SIZE,
                    _ => return None,
                };
                if class == BPF_LD {
                    a = v;
                } else {
                    x = v;
                }
            }
            BPF_ST => *mem.get_mut(k as usize)? = a,
            BPF_STX => *mem.get_mut(k as usize)? = x,
            BPF_ALU => {
                let src = if ins.code & BPF_X != 0 { x } else { k };
                a = match ins.code & 0xf0 {
                    0x00 => a.wrapping_add(src),
                    0x10 => a.wrapping_sub(src),
                    0x20 => a.wrapping_mul(src),
                    0x30 => match a.checked_div(src) {
                        Some(v) => v,
                        None => return Some(0),
                    },
                    0x40 => a | src,
                    0x50 => a & src,
                    0x60 => a.checked_shl(src).unwrap_or(0),
                    0x70 => a.checked_shr(src).unwrap_or(0),
                    0x80 => a.wrapping_neg(),
                    0x90 => match a.checked_rem(src) {
                        Some(v) => v,
                        None => return Some(0),
                    },
                    0xa0 => a ^ src,
                    _ => return None,
                };
            }
            BPF_JMP => {
                let op = ins.code & 0xf0;
                if op == 0x00 {
                    pc = pc.checked_add(k as usize)?;
                    continue;
                }
                let src = if ins.code & BPF_X != 0 { x } else { k };
                let taken = match op {
                    0x10 => a == src,
                    0x20 => a > src,
                    0x30 => a >= src,
                    0x40 => a & src != 0,
                    _ => return None,
                };
                pc += usize::from(if taken { ins.jt } else { ins.jf });
            }
            BPF_RET => {
                return match ins.code & 0x18 {
                    BPF_K => Some(k),
                    BPF_A => Some(a),
                    _ => None,
                };
            }
            BPF_MISC => match ins.code & 0xf8 {
                0x00 => x = a,
                0x80 => a = x,
                _ => return None,
            },
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
        libc::sock_filter { code, jt, jf, k }
    }

    #[test]
    fn interpreter_basics() {
        // if nr == 39 { errno 1 } else if arg0 & 0x10 { trap } else allow
        let prog = [
            ins(BPF_LD | BPF_W | BPF_ABS, 0, 0, 0),
            ins(BPF_JMP | 0x10 | BPF_K, 0, 1, 39),
            ins(BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | 1),
            ins(BPF_LD | BPF_W | BPF_ABS, 0, 0, 16),
            ins(BPF_JMP | 0x40 | BPF_K, 0, 1, 0x10),
            ins(BPF_RET | BPF_K, 0, 0, SECCOMP_RET_TRAP),
            ins(BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW),
        ];
        assert_eq!(run(&prog, 0, 39, 0, [0; 6]), Verdict::Errno(1));
        assert_eq!(run(&prog, 0, 1, 0, [0x11, 0, 0, 0, 0, 0]), Verdict::Trap);
        assert_eq!(run(&prog, 0, 1, 0, [0x1, 0, 0, 0, 0, 0]), Verdict::Allow);
        // Out-of-bounds load and running off the end are invalid.
        assert_eq!(
            run(&[ins(BPF_LD | BPF_W | BPF_ABS, 0, 0, 64)], 0, 0, 0, [0; 6]),
            Verdict::Invalid
        );
        assert_eq!(
            run(&[ins(BPF_LD | BPF_W | BPF_ABS, 0, 0, 0)], 0, 0, 0, [0; 6]),
            Verdict::Invalid
        );
    }
}
