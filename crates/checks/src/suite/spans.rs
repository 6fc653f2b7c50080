//! Where each key and value of a suite file is: its line and column, by path (`checks[2].depends[0]`,
//! the path serde's errors use), for errors found after parsing (an unknown dependency, a cycle, a
//! duplicate id, a limit out of bounds). serde_yaml and serde_json keep no positions in what they
//! deserialize, so the text is read a second time with saphyr-parser, a YAML 1.2 event parser that
//! does (JSON is YAML 1.2 too).

use std::collections::HashMap;

use saphyr_parser::{Event, Parser};

/// The position (1-based line and column) of every node of a document, by path. A mapping's
/// entry is where its key is (the line that says `depends:`), a list's item where it starts.
#[derive(Debug, Default)]
pub(crate) struct Spans {
    at: HashMap<String, (usize, usize)>,
}

/// One open mapping or list on the way down.
struct Frame {
    /// Its path; `None` inside a key that is itself a mapping or list (nothing there is located).
    path: Option<String>,
    kind: Kind,
}

enum Kind {
    /// A list: the index of its next item.
    List(usize),
    /// A mapping: `None` before a key, then the key (`Some(None)`: one that is not text).
    Map(Option<Option<String>>),
}

/// `parent.key`, or `key` at the top.
fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Spans {
    /// Reads `text` (its first document). Text that does not parse gives what was read before the
    /// error: the suite was parsed already, and a position is only a help.
    pub(crate) fn of(text: &str) -> Spans {
        let mut spans = Spans::default();
        let mut stack: Vec<Frame> = Vec::new();
        for item in Parser::new_from_str(text) {
            let Ok((event, span)) = item else { break };
            let at = (span.start.line(), span.start.col() + 1);
            let container = match &event {
                Event::MappingStart(..) => Some(Kind::Map(None)),
                Event::SequenceStart(..) => Some(Kind::List(0)),
                Event::Scalar(..) | Event::Alias(_) => None,
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                    continue;
                }
                Event::DocumentEnd => break,
                _ => continue,
            };
            let path = match stack.last_mut() {
                None => Some(String::new()),
                Some(Frame {
                    path,
                    kind: Kind::List(i),
                }) => {
                    let p = path.as_ref().map(|p| format!("{p}[{i}]"));
                    *i += 1;
                    p
                }
                Some(Frame {
                    path,
                    kind: Kind::Map(state @ None),
                }) => {
                    // A key: its entry is located here.
                    let key = match &event {
                        Event::Scalar(s, ..) => Some(s.to_string()),
                        _ => None,
                    };
                    if let (Some(p), Some(k)) = (path.as_ref(), key.as_ref()) {
                        spans.at.entry(child(p, k)).or_insert(at);
                    }
                    *state = Some(key);
                    if let Some(kind) = container {
                        stack.push(Frame { path: None, kind });
                    }
                    continue;
                }
                Some(Frame {
                    path,
                    kind: Kind::Map(state),
                }) => {
                    let key = state.take().flatten();
                    path.as_ref().zip(key).map(|(p, k)| child(p, &k))
                }
            };
            if let Some(p) = &path {
                spans.at.entry(p.clone()).or_insert(at);
            }
            if let Some(kind) = container {
                stack.push(Frame { path, kind });
            }
        }
        spans
    }

    /// The line and column of `path`, else of its nearest ancestor that has one.
    pub(crate) fn locate(&self, path: &str) -> Option<(usize, usize)> {
        let mut p = path;
        loop {
            if let Some(at) = self.at.get(p) {
                return Some(*at);
            }
            if p.is_empty() {
                return None;
            }
            let cut = p.rfind(['.', '[']).unwrap_or(0);
            p = &p[..cut];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Spans;

    #[test]
    fn block_yaml_is_located_by_path() {
        let text = "name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n  - id: b\n    depends:\n      - a\n      - c\n    steps:\n      - run: ls\n";
        let s = Spans::of(text);
        assert_eq!(s.locate("name"), Some((1, 1)));
        assert_eq!(s.locate("checks"), Some((2, 1)));
        assert_eq!(s.locate("checks[0].id"), Some((3, 5)));
        assert_eq!(s.locate("checks[1]").map(|l| l.0), Some(5));
        assert_eq!(s.locate("checks[1].id"), Some((5, 5)));
        assert_eq!(s.locate("checks[1].depends"), Some((6, 5)));
        assert_eq!(s.locate("checks[1].depends[1]"), Some((8, 9)));
        assert_eq!(s.locate("checks[0].steps[0].run"), Some((4, 14)));
        // Not there: the nearest ancestor that is.
        assert_eq!(s.locate("checks[1].limits.pids"), Some((5, 5)));
        assert_eq!(s.locate("checks[1].steps[7]"), Some((9, 5)));
    }

    #[test]
    fn json_and_flow_yaml_on_one_line_have_columns() {
        // The 1-based column of the first `needle` after `after`.
        let col = |text: &str, after: &str, needle: &str| {
            let from = text.find(after).unwrap();
            from + text[from..].find(needle).unwrap() + 1
        };
        let text = r#"{"name": "j", "checks": [{"id": "a"}, {"id": "b", "depends": ["a", "c"]}]}"#;
        let s = Spans::of(text);
        assert_eq!(
            s.locate("checks[1].id"),
            Some((1, col(text, r#"{"id": "b""#, r#""id""#)))
        );
        assert_eq!(
            s.locate("checks[1].depends[1]"),
            Some((1, col(text, "depends", r#""c""#)))
        );
        let text = "checks: [{id: a}, {id: b, depends: [c]}]\n";
        let s = Spans::of(text);
        assert_eq!(
            s.locate("checks[1].depends[0]"),
            Some((1, col(text, "depends", "c")))
        );
    }

    #[test]
    fn keys_that_are_not_text_and_broken_text_locate_what_they_can() {
        let s = Spans::of("? [a, b]\n: 1\nname: x\n");
        assert_eq!(s.locate("name"), Some((3, 1)));
        let s = Spans::of("name: x\nchecks: [\n");
        assert_eq!(s.locate("name"), Some((1, 1)));
        assert_eq!(Spans::of("").locate("name"), None);
    }
}
