//! What reading any grader's `results.json` shares: the size cap, the JSON object check, error
//! messages that name the key, and how long texts are cut in rows.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// The largest `results.json` read.
pub const MAX_RESULTS_BYTES: usize = 4 << 20;
/// The most tests one file may list.
pub const MAX_TESTS: usize = 5000;
/// The longest text kept from one `output` or `message` in a row.
pub const MAX_OUTPUT: usize = 16 * 1024;

/// Why a `results.json` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultsError {
    #[error("results.json is larger than {MAX_RESULTS_BYTES} bytes")]
    TooLarge,
    /// Not JSON, not an object, or a known key of the wrong type (the key is named).
    #[error("results.json is not valid JSON of {contract}'s shape: {why}")]
    Malformed { contract: &'static str, why: String },
    /// The right types, an impossible meaning (a score outside its range, …).
    #[error("results.json: {0}")]
    Invalid(String),
}

/// Parses `bytes` as a JSON object of shape `T` (`contract` names the shape in errors).
pub fn parse<T: DeserializeOwned>(bytes: &[u8], contract: &'static str) -> Result<T, ResultsError> {
    if bytes.len() > MAX_RESULTS_BYTES {
        return Err(ResultsError::TooLarge);
    }
    let malformed = |why: String| ResultsError::Malformed { contract, why };
    // Parsed as a value first: serde would also take an array for a struct.
    let value: Value = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
    if !value.is_object() {
        return Err(malformed("the file is not a JSON object".into()));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        malformed(if path == "." {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        })
    })
}

/// Reads and validates the bytes of a `results.json` of shape `T`: `contract` names the shape in
/// errors, `tests` counts its tests (at most [`MAX_TESTS`]), `check` applies the contract's own
/// rules over the values and says why they are impossible.
pub fn read<T: DeserializeOwned>(
    bytes: &[u8],
    contract: &'static str,
    tests: impl Fn(&T) -> usize,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<T, ResultsError> {
    let r: T = parse(bytes, contract)?;
    if tests(&r) > MAX_TESTS {
        return Err(ResultsError::Invalid(format!(
            "more than {MAX_TESTS} tests"
        )));
    }
    check(&r).map_err(ResultsError::Invalid)?;
    Ok(r)
}

/// The id of a grader's test row, `CHECK/KEY`: the first usable of the test's `keys`
/// (Gradescope's `number`, then its `name`; PrairieLearn's `name`) — one line without `/`, at
/// most 120 characters — else its `place` (from 1). A test so keeps its row, and its column in a
/// batch's gradebook, whichever tests ran before it (a submission that does not import makes
/// unittest report other tests). A key taken already gets `~2`, `~3`.
pub fn row_id(
    check_id: &str,
    keys: &[Option<&str>],
    place: usize,
    taken: &mut Vec<String>,
) -> String {
    let base = keys
        .iter()
        .flatten()
        .map(|k| k.trim())
        .find(|k| !k.is_empty() && !k.contains(['/', '\n', '\r']) && k.chars().count() <= 120)
        .map(str::to_string)
        .unwrap_or_else(|| place.to_string());
    let mut id = format!("{check_id}/{base}");
    let mut k = 2;
    while taken.contains(&id) {
        id = format!("{check_id}/{base}~{k}");
        k += 1;
    }
    taken.push(id.clone());
    id
}

/// `s` without its colours (SGR: ESC `[` digits and `;` then `m`), which a grader writes where
/// its platform renders them (PrairieLearn's Python grader highlights the student's code); every
/// other control character stays, for the views to show as they do.
pub fn without_colours(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let params = after
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b';')
            .count();
        if after.as_bytes().get(params) == Some(&b'm') {
            rest = &after[params + 1..];
        } else {
            out.push_str("\x1b[");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Cuts `s` to at most [`MAX_OUTPUT`] bytes (on a character boundary), saying so.
pub fn cap(s: &str) -> String {
    crate::report::cut_text(s, MAX_OUTPUT, &format!("\n[… cut at {MAX_OUTPUT} bytes]"))
}

/// A number as people write it: `3`, `2.5`.
pub fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_id_is_the_tests_own_key_else_its_place() {
        let mut taken = Vec::new();
        let mut id = |keys: &[Option<&str>], place| row_id("ag", keys, place, &mut taken);
        assert_eq!(id(&[Some("1.2"), Some("adds")], 1), "ag/1.2");
        assert_eq!(
            id(&[None, Some(" Check submitted files ")], 2),
            "ag/Check submitted files"
        );
        assert_eq!(id(&[None, Some("a/b")], 3), "ag/3");
        assert_eq!(id(&[Some(""), None], 4), "ag/4");
        assert_eq!(
            id(&[None, Some("Check submitted files")], 5),
            "ag/Check submitted files~2"
        );
        assert_eq!(id(&[Some("1.2")], 6), "ag/1.2~2");
    }

    #[test]
    fn colours_go_and_other_escapes_stay() {
        assert_eq!(
            without_colours("\x1b[38;5;15mx_sq\x1b[39m = \x1b[1mbold\x1b[0m"),
            "x_sq = bold"
        );
        assert_eq!(without_colours("a\x1b[2Kb\x1b[c"), "a\x1b[2Kb\x1b[c");
        assert_eq!(without_colours("\x1b["), "\x1b[");
    }
}
