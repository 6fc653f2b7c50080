//! How a report's numbers and values are written: JSON numbers without a needless `.0`, values
//! for people, and text cut to a size on a character boundary.

use serde_json::{json, Value};

pub fn num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// `s` when it is at most `max` bytes; else its longest prefix of at most `max` bytes that ends on
/// a character boundary, then `marker` (which says the text was cut).
pub fn cut_text(s: &str, max: usize, marker: &str) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{marker}", &s[..end])
}

/// A value for a human: strings quoted with escapes (so newlines show), at most `max` characters.
pub fn show(v: &Value, max: usize) -> String {
    match v {
        Value::String(s) => {
            let mut q = format!("{s:?}");
            if q.chars().count() > max {
                q = q.chars().take(max).collect::<String>() + "...\"";
            }
            q
        }
        Value::Null => "nothing".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_character_boundary_and_marked() {
        assert_eq!(cut_text("short", 5, "…"), "short");
        assert_eq!(cut_text("abcdef", 3, "..."), "abc...");
        // "é" is two bytes: a cut inside it moves back before it.
        assert_eq!(cut_text("aé", 2, "!"), "a!");
    }
}
