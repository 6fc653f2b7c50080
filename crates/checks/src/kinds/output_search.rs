//! Looking for a pattern in a program's output while it grows, without reading it all again at
//! each arrival: a program that writes its output a byte at a time would otherwise make the
//! grader (a host process, outside every sandbox limit) search the whole output once per byte
//! — seconds of host CPU for a few of the program's.
//!
//! The first arrival is searched at once (the usual case: what was expected came in one piece).
//! After a search that found nothing, the next waits until the part to search again has grown by
//! a quarter (at least 4 KiB), or until the caller says the output went quiet
//! ([`OutputSearch::find`]'s `quiet`). The part to search again is all of it, or for a pattern
//! whose matches have a bounded length (a literal, `h{3000}x`) only from where a new match
//! could start. So a trickle costs a few searches per doubling of the output, and a pattern
//! whose search is slow (the regex crate's slower engines take time in the pattern's size for
//! each byte) a few per 4 KiB.

use regex::bytes::{Match, Regex};

pub(crate) struct OutputSearch<'r> {
    re: &'r Regex,
    /// The longest match possible, when the pattern bounds it.
    max_len: Option<usize>,
    /// How much of the output the last search (which found nothing) read.
    searched: Option<usize>,
}

impl<'r> OutputSearch<'r> {
    pub(crate) fn new(re: &'r Regex) -> Self {
        let max_len = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(re.as_str())
            .ok()
            .and_then(|hir| hir.properties().maximum_len());
        OutputSearch {
            re,
            max_len,
            searched: None,
        }
    }

    /// The first match in `out` (the same output each call, grown since), when a search is due:
    /// the first time, when the part to search again grew enough, or when `quiet` (nothing more
    /// came, or nothing more will) and anything is new.
    pub(crate) fn find<'o>(&mut self, out: &'o [u8], quiet: bool) -> Option<Match<'o>> {
        let start = match self.searched {
            None => 0,
            Some(done) if out.len() <= done => return None,
            Some(done) => {
                // A match that ends beyond `done` starts at most `max_len` before it; the byte
                // before is margin for `\b`-like assertions at the old end.
                let start = self.max_len.map_or(0, |m| done.saturating_sub(m + 1));
                if !quiet && out.len() - done < ((done - start) / 4).max(4096) {
                    return None;
                }
                start
            }
        };
        let found = self.re.find_at(out, start);
        if found.is_none() {
            self.searched = Some(out.len());
        }
        found
    }

    /// Whether `out` has output no search has read yet (the caller should come back soon even
    /// if nothing more arrives).
    pub(crate) fn behind(&self, out: &[u8]) -> bool {
        self.searched.is_some_and(|done| out.len() > done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeding the output a byte at a time finds what one search of the whole would, at the
    /// same place, for bounded and unbounded patterns alike.
    #[test]
    fn grown_output_finds_what_a_whole_search_finds() {
        let text = b"abc hello wor\nld h hhhx hhhhx end\xff\xfe tail";
        for pattern in [
            "hello",
            r"h{4}x",
            r"\bld\b",
            r"wor\nld",
            r"end(?-u:\xff)",
            r"^ld",
            "(?m)^ld",
            "o.*d",
            "tail$",
            "nowhere",
        ] {
            let re = Regex::new(pattern).unwrap();
            let whole = re.find(text).map(|m| m.range());
            let mut s = OutputSearch::new(&re);
            let mut got = None;
            for n in 0..=text.len() {
                if let Some(m) = s.find(&text[..n], n == text.len()) {
                    got = Some(m.range());
                    break;
                }
            }
            // The whole output's first match, unless a prefix already matched (a `$` at the end
            // of what had arrived then), as a search at that moment would have.
            let prefix_first =
                (0..=text.len()).find_map(|n| re.find(&text[..n]).map(|m| m.range()));
            assert_eq!(got, prefix_first.or(whole), "{pattern}");
        }
    }

    #[test]
    fn a_search_again_waits_for_the_output_to_grow_or_go_quiet() {
        let bounded = Regex::new(r"h{300}x").unwrap();
        let mut s = OutputSearch::new(&bounded);
        assert_eq!(s.max_len, Some(301));
        let mut out = vec![b'h'; 20_000];
        assert!(s.find(&out[..10_000], false).is_none());
        assert!(s.find(&out[..10_100], false).is_none());
        assert_eq!(s.searched, Some(10_000), "100 bytes more: not yet");
        out[14_500] = b'x';
        // 4 KiB more: due, and only the window a match could end in is read.
        let m = s.find(&out[..14_501], false).unwrap();
        assert_eq!(m.range(), 14_200..14_501);
        let unbounded = Regex::new("a.*b").unwrap();
        let mut s = OutputSearch::new(&unbounded);
        assert_eq!(s.max_len, None);
        let out = vec![b'a'; 10_000];
        assert!(s.find(&out[..5000], false).is_none());
        // Grown by less than a quarter: not searched yet, and the caller is told to come back.
        assert!(s.find(&out[..5001], false).is_none());
        assert!(s.behind(&out[..5001]));
        assert_eq!(s.searched, Some(5000));
        // Quiet: searched.
        assert!(s.find(&out[..5001], true).is_none());
        assert_eq!(s.searched, Some(5001));
        assert!(!s.behind(&out[..5001]));
    }
}
