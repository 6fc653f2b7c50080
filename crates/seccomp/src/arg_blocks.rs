//! Argument tests compiled by hand and spliced into libseccomp's program.
//!
//! With a default of ALLOW, libseccomp can only say "this action when the arguments match", one
//! masked comparison per argument and rule, so "any value but these three" becomes a union of
//! masked patterns (see [`crate::patterns`]) and "any of these bits" one comparison per bit:
//! 98 instructions for `personality`, 24 for `clone`, 29 for `socket`/`socketpair` — more than
//! half of the default program. The kernel converts, checks and JITs every instruction each time
//! a process installs the filter (every run), so a short program is a cheaper run: the same
//! tests written by hand take 4 to 7 instructions each (`jeq` on the allowed values, `jset` on the
//! bits).
//!
//! How: libseccomp compiles such a rule as an unconditional "errno `SENTINEL_BASE + i`" (a value
//! no errno has); every `ret` of that value in its program becomes a `ja` to block `i`, appended
//! after the program. libseccomp's arch and x32 checks still run first, and its jumps are relative
//! and untouched. `filter.rs`'s unit tests compare every rule's verdicts with the patterns'.

use crate::bpf::op;

/// A rule's condition in the form compiled here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArgTest {
    /// The low 32 bits of argument `arg`, masked with `mask`, are none of `values`.
    NoneOf {
        arg: u8,
        mask: u32,
        values: Vec<u32>,
    },
    /// The low 32 bits of argument `arg` have any bit of `mask` set.
    AnyBit { arg: u8, mask: u32 },
}

/// Errno values from here up mark the rules whose block replaces libseccomp's `ret`: far above
/// every errno (Linux's end below 200) and below 4096, the most libseccomp accepts.
pub(crate) const SENTINEL_BASE: u32 = 4000;

/// Where the low 32 bits of argument `arg` are in `struct seccomp_data`.
pub(crate) fn arg_low(arg: u8) -> u32 {
    let at = 16 + 8 * u32::from(arg);
    if cfg!(target_endian = "little") {
        at
    } else {
        at + 4
    }
}

impl ArgTest {
    /// The block: the test, `ret on_match` when it holds, `ret ALLOW` otherwise.
    fn block(&self, on_match: u32) -> Vec<libc::sock_filter> {
        let mut out = Vec::new();
        let mut push = |code, jt, jf, k| out.push(libc::sock_filter { code, jt, jf, k });
        match self {
            ArgTest::NoneOf { arg, mask, values } => {
                push(op::LD_ABS, 0, 0, arg_low(*arg));
                if *mask != u32::MAX {
                    push(op::AND_K, 0, 0, *mask);
                }
                // Each allowed value jumps over the rest of the list and `ret on_match`.
                let n = values.len();
                for (i, &v) in values.iter().enumerate() {
                    let to_allow = u8::try_from(n - i).expect("a short list of values");
                    push(op::JEQ_K, to_allow, 0, v & mask);
                }
                push(op::RET_K, 0, 0, on_match);
                push(op::RET_K, 0, 0, op::RET_ALLOW);
            }
            ArgTest::AnyBit { arg, mask } => {
                push(op::LD_ABS, 0, 0, arg_low(*arg));
                push(op::JSET_K, 0, 1, *mask);
                push(op::RET_K, 0, 0, on_match);
                push(op::RET_K, 0, 0, op::RET_ALLOW);
            }
        }
        out
    }
}

/// `program` with every `ret ERRNO(SENTINEL_BASE + i)` turned into a jump to `blocks[i]`, the
/// blocks appended in order; each block is `(test, what its match returns)`.
pub(crate) fn splice(
    mut program: Vec<libc::sock_filter>,
    blocks: &[(ArgTest, u32)],
) -> Vec<libc::sock_filter> {
    let mut starts = Vec::with_capacity(blocks.len());
    let mut tail = Vec::new();
    for (test, on_match) in blocks {
        starts.push(program.len() + tail.len());
        tail.extend(test.block(*on_match));
    }
    for (pc, insn) in program.iter_mut().enumerate() {
        if insn.code != op::RET_K || insn.k & op::RET_ACTION != op::RET_ERRNO {
            continue;
        }
        let Some(i) = (insn.k & op::RET_DATA).checked_sub(SENTINEL_BASE) else {
            continue;
        };
        if let Some(&start) = starts.get(i as usize) {
            // Forward by construction: every block lies after the whole program.
            let k = u32::try_from(start - pc - 1).expect("a program shorter than 4096");
            *insn = libc::sock_filter {
                code: op::JA,
                jt: 0,
                jf: 0,
                k,
            };
        }
    }
    program.extend(tail);
    program
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::{run, Verdict};

    const NOTIFY: u32 = 0x7fc0_0000;

    /// Runs `test` behind a one-`ret` program that the splice sends to it.
    fn verdict(test: &ArgTest, arg0: u64) -> Verdict {
        let sentinel = libc::sock_filter {
            code: op::RET_K,
            jt: 0,
            jf: 0,
            k: op::RET_ERRNO | SENTINEL_BASE,
        };
        let prog = splice(vec![sentinel], &[(test.clone(), NOTIFY)]);
        run(&prog, 0, 0, 0, [arg0, 0, 0, 0, 0, 0])
    }

    #[test]
    fn none_of_matches_only_values_outside_the_list() {
        let t = ArgTest::NoneOf {
            arg: 0,
            mask: u32::MAX,
            values: vec![0, 0x40000, u32::MAX],
        };
        for v in [0, 0x40000, 0xffff_ffff, 7 << 32] {
            assert_eq!(verdict(&t, v), Verdict::Allow, "{v:#x}");
        }
        for v in [1, 0x40001, 0xffff_fffe, (7 << 32) | 8] {
            assert_eq!(verdict(&t, v), Verdict::Notify, "{v:#x}");
        }
        let low_byte = ArgTest::NoneOf {
            arg: 0,
            mask: 0xff,
            values: vec![1, 2, 10],
        };
        for v in [1, 2, 10, 0x101, 0x20a] {
            assert_eq!(verdict(&low_byte, v), Verdict::Allow, "{v:#x}");
        }
        for v in [0, 3, 16, 0x100] {
            assert_eq!(verdict(&low_byte, v), Verdict::Notify, "{v:#x}");
        }
    }

    #[test]
    fn any_bit_matches_a_set_bit_of_the_mask() {
        let t = ArgTest::AnyBit {
            arg: 0,
            mask: 0x7000,
        };
        for v in [0x1000, 0x6fff, 1 << 14] {
            assert_eq!(verdict(&t, v), Verdict::Notify, "{v:#x}");
        }
        for v in [0, 0xfff, 0x8000, 0x7000 << 32] {
            assert_eq!(verdict(&t, v), Verdict::Allow, "{v:#x}");
        }
    }

    #[test]
    fn other_errno_returns_are_left_alone() {
        let ret = |k| libc::sock_filter {
            code: op::RET_K,
            jt: 0,
            jf: 0,
            k,
        };
        let program = vec![
            ret(op::RET_ERRNO | 38),
            ret(op::RET_ERRNO | (SENTINEL_BASE + 1)),
        ];
        let t = ArgTest::AnyBit { arg: 0, mask: 1 };
        // Only block 0 exists: sentinel 1 is not one of ours and stays a `ret`.
        let out = splice(program, &[(t, NOTIFY)]);
        assert_eq!(out.len(), 2 + 4);
        assert_eq!((out[0].code, out[0].k), (op::RET_K, op::RET_ERRNO | 38));
        assert_eq!(out[1].code, op::RET_K);
    }
}
