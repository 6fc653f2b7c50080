//! Quoting untrusted text (names from an archive) in error messages, bounded.

/// A bounded, printable excerpt of untrusted text for error messages.
pub fn excerpt(s: &str) -> String {
    const MAX: usize = 120;
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if clean.chars().count() <= MAX {
        clean
    } else {
        format!("{}…", clean.chars().take(MAX).collect::<String>())
    }
}
