//! Tar headers written by hand, for cases the `tar` crate will not write (sizes past what the
//! format means, odd type flags).

/// One 512-byte ustar header with a correct checksum: `name` (at most 100 bytes kept), type
/// `flag`, and `size` in the 11 octal digits of the size field.
pub fn ustar_header(name: &[u8], flag: u8, size: u64) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    let n = name.len().min(100);
    h[..n].copy_from_slice(&name[..n]);
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = flag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}
