//! Turning "argument is *not* one of these few values" into seccomp rules.
//!
//! libseccomp rules are conjunctions of at most one comparison per argument,
//! and a syscall's rules are OR-ed together. With a default action of ALLOW
//! we cannot add "allow if arg == x" exceptions, so a set like "every value
//! except {0, 0x40000, 0xffffffff}" has to be written as a union of
//! masked-equality patterns (`arg & mask == value`), each of which avoids the
//! allowed values. The helpers here build such unions; the unit tests check
//! them exhaustively on smaller widths and on the real parameters.

/// One `arg & mask == value` comparison on the low 32 bits of an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pattern {
    pub mask: u32,
    pub value: u32,
}

impl Pattern {
    #[cfg(test)]
    pub fn matches(self, v: u32) -> bool {
        v & self.mask == self.value
    }
}

/// Patterns matching exactly the values `v` of the low `bits` bits
/// (`v & (2^bits - 1)`) that are not in `allowed`.
///
/// Built as a binary trie over the bits from the most significant one down:
/// a subtree with no allowed value becomes one pattern (its prefix), a
/// subtree holding only allowed values is dropped, anything else is split.
/// That gives at most `allowed.len() * bits` patterns.
pub(crate) fn low_bits_except(bits: u32, allowed: &[u32]) -> Vec<Pattern> {
    assert!((1..=32).contains(&bits));
    let full: u32 = if bits == 32 {
        u32::MAX
    } else {
        (1 << bits) - 1
    };
    let allowed: Vec<u32> = allowed.iter().map(|v| v & full).collect();
    let mut out = Vec::new();
    // (number of fixed high bits, prefix value)
    let mut stack = vec![(0u32, 0u32)];
    while let Some((fixed, prefix)) = stack.pop() {
        let free = bits - fixed;
        let mask = if fixed == 0 {
            0
        } else {
            full & !(low_mask(free))
        };
        let inside = allowed.iter().filter(|&&a| a & mask == prefix).count();
        if inside == 0 {
            out.push(Pattern {
                mask,
                value: prefix,
            });
        } else if free == 0 {
            // A single allowed value: nothing to block here.
        } else {
            let bit = 1u32 << (free - 1);
            stack.push((fixed + 1, prefix | bit));
            stack.push((fixed + 1, prefix));
        }
    }
    out
}

/// The `n` lowest bits set (all 32 from `n` = 32 on).
pub(crate) fn low_mask(n: u32) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// Patterns matching every 32-bit value except `0`, `1 << keep_bit` and
/// `0xffff_ffff` — exactly the personality() filter (`keep_bit` = 18, i.e.
/// `ADDR_NO_RANDOMIZE`).
///
/// The cover uses "bit i set and bit i+1 (mod 32) clear" for every i except
/// `keep_bit`, plus "bit keep_bit-1 set and bit keep_bit+1 clear". Proof that
/// it blocks everything else: a value that is neither 0 nor all ones has, in
/// its cyclic bit string, at least one run of ones, and each run ends at some
/// bit i with bit i+1 clear. If some run ends at i != keep_bit, pattern i
/// matches. Otherwise there is exactly one run and it ends at keep_bit; if the
/// run is one bit long the value is `1 << keep_bit` (allowed), if it is longer
/// bit keep_bit-1 is set and the extra pattern matches. No pattern matches an
/// allowed value: each requires a set bit other than keep_bit and a clear bit.
///
/// 32 patterns is also the minimum: each value with exactly one clear bit j
/// must be matched by a pattern whose only fixed-zero bit is j.
pub(crate) fn all_but_zero_bit_and_ones(keep_bit: u32) -> Vec<Pattern> {
    cyclic_cover(32, keep_bit)
}

/// The width-generic version of [`all_but_zero_bit_and_ones`] (tested
/// exhaustively on small widths).
fn cyclic_cover(width: u32, keep_bit: u32) -> Vec<Pattern> {
    assert!((3..=32).contains(&width) && keep_bit < width);
    let next = |i: u32| (i + 1) % width;
    let prev = |i: u32| (i + width - 1) % width;
    let mut out: Vec<Pattern> = (0..width)
        .filter(|&i| i != keep_bit)
        .map(|i| Pattern {
            mask: (1 << i) | (1 << next(i)),
            value: 1 << i,
        })
        .collect();
    out.push(Pattern {
        mask: (1 << prev(keep_bit)) | (1 << next(keep_bit)),
        value: 1 << prev(keep_bit),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(p: &[Pattern], v: u32) -> bool {
        p.iter().any(|p| p.matches(v))
    }

    #[test]
    fn low_bits_except_is_exact_on_8_bits() {
        for allowed in [
            &[1u32, 2, 10][..],
            &[1, 2, 10, 16],
            &[0],
            &[255],
            &[0, 255],
            &[],
        ] {
            let p = low_bits_except(8, allowed);
            assert!(p.len() <= (allowed.len().max(1)) * 8, "{allowed:?}: {p:?}");
            for v in 0..=u32::from(u16::MAX) {
                let expect = !allowed.contains(&(v & 0xff));
                assert_eq!(any(&p, v), expect, "allowed {allowed:?}, value {v:#x}");
            }
        }
    }

    #[test]
    fn low_bits_except_32_bits_spot_checks() {
        let allowed = [1u32, 2, 10];
        let p = low_bits_except(32, &allowed);
        for v in [0u32, 3, 9, 11, 16, 0x102, 0x1_0001, 0x8000_0001, u32::MAX] {
            assert!(any(&p, v), "{v:#x}");
        }
        for v in allowed {
            assert!(!any(&p, v));
        }
    }

    #[test]
    fn cyclic_cover_exhaustive_small_widths() {
        for width in 3..=14u32 {
            let all = (1u32 << width) - 1;
            for keep in 0..width {
                let p = cyclic_cover(width, keep);
                assert_eq!(p.len(), width as usize);
                for v in 0..=all {
                    let expect = !(v == 0 || v == all || v == 1 << keep);
                    assert_eq!(any(&p, v), expect, "width {width} keep {keep} v {v:#x}");
                }
            }
        }
    }

    #[test]
    fn personality_cover_spot_checks() {
        let p = all_but_zero_bit_and_ones(18);
        assert_eq!(p.len(), 32);
        for v in [0u32, 0x40000, u32::MAX] {
            assert!(!any(&p, v), "{v:#x}");
        }
        // Every value with at most two bits set or at most two bits clear.
        for i in 0..32 {
            for j in 0..32 {
                let v = (1u32 << i) | (1u32 << j);
                assert_eq!(any(&p, v), v != 0x40000, "{v:#x}");
                assert!(any(&p, !v), "{:#x}", !v);
            }
        }
        // Contiguous runs (the tricky case of the proof), all rotations.
        for len in 1..32u32 {
            for rot in 0..32 {
                let v = ((1u64 << len) - 1) as u32;
                let v = v.rotate_left(rot);
                assert_eq!(any(&p, v), v != 0x40000, "{v:#x}");
            }
        }
        // A pseudo-random sample.
        let mut x: u32 = 0x1234_5678;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            assert_eq!(any(&p, x), !(x == 0 || x == 0x40000 || x == u32::MAX));
        }
    }
}
