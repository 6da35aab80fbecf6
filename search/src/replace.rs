//! Replacing what a pattern matches, line by line as `rg --replace` does (`$1`, `${name}`
//! and `$$` in the replacement), with the changed lines kept for a diff.

use grep_matcher::{Captures, Matcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};

use crate::error::SearchError;

/// A pattern and what its matches become.
pub struct Replacer {
    matcher: RegexMatcher,
    replacement: Vec<u8>,
}

/// A file's content with its matches replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replaced {
    pub content: Vec<u8>,
    /// Matches replaced.
    pub count: u64,
    /// The lines that changed, in order.
    pub changes: Vec<Change>,
}

/// One changed line: its number, and its text before and after (which may hold new lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub line_number: u64,
    pub old: String,
    pub new: String,
}

impl Replacer {
    pub fn new(
        pattern: &str,
        literal: bool,
        case_insensitive: bool,
        replacement: &str,
    ) -> Result<Replacer, SearchError> {
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(case_insensitive)
            .fixed_strings(literal)
            .build(pattern)
            .map_err(|error| SearchError::Pattern(error.to_string()))?;
        // A literal's replacement is literal too.
        let replacement = if literal {
            replacement.replace('$', "$$")
        } else {
            replacement.to_string()
        };
        Ok(Replacer {
            matcher,
            replacement: replacement.into_bytes(),
        })
    }

    /// `content` with every match replaced, line by line; `None` when nothing matched.
    pub fn apply(&self, content: &[u8]) -> Option<Replaced> {
        let mut out = Vec::with_capacity(content.len());
        let mut changes = Vec::new();
        let mut count = 0;
        let mut captures = self.matcher.new_captures().ok()?;
        for (index, line) in content.split_inclusive(|&byte| byte == b'\n').enumerate() {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            let mut replaced = Vec::with_capacity(body.len());
            let mut matched = 0;
            let result = self.matcher.replace_with_captures(
                body,
                &mut captures,
                &mut replaced,
                |caps, dst| {
                    matched += 1;
                    caps.interpolate(
                        |name| self.matcher.capture_index(name),
                        body,
                        &self.replacement,
                        dst,
                    );
                    true
                },
            );
            if result.is_err() || matched == 0 {
                out.extend_from_slice(line);
                continue;
            }
            count += matched;
            changes.push(Change {
                line_number: index as u64 + 1,
                old: String::from_utf8_lossy(body).into_owned(),
                new: String::from_utf8_lossy(&replaced).into_owned(),
            });
            out.extend_from_slice(&replaced);
            if line.ends_with(b"\n") {
                out.push(b'\n');
            }
        }
        (count > 0).then_some(Replaced {
            content: out,
            count,
            changes,
        })
    }
}

/// The changes to `path` as a unified diff of the changed lines (hunks without context).
pub fn unified_diff(path: &str, changes: &[Change]) -> String {
    let mut diff = format!("--- a{path}\n+++ b{path}\n");
    let mut shift: i64 = 0;
    for change in changes {
        let new_lines: Vec<&str> = change.new.split('\n').collect();
        let new_start = change.line_number as i64 + shift;
        diff.push_str(&format!(
            "@@ -{},1 +{},{} @@\n-{}\n",
            change.line_number,
            new_start,
            new_lines.len(),
            change.old
        ));
        for line in &new_lines {
            diff.push_str(&format!("+{line}\n"));
        }
        shift += new_lines.len() as i64 - 1;
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_per_line_with_captures_and_says_what_changed() {
        let replacer = Replacer::new(r"(\w+)_v1", false, false, "${1}_v2").unwrap();
        let text = b"use foo_v1;\nkeep\nbar_v1(baz_v1)\nlast";
        let replaced = replacer.apply(text).unwrap();
        assert_eq!(replaced.content, b"use foo_v2;\nkeep\nbar_v2(baz_v2)\nlast");
        assert_eq!(replaced.count, 3);
        assert_eq!(replaced.changes.len(), 2);
        assert_eq!(replaced.changes[1].line_number, 3);
        assert!(replacer.apply(b"nothing here\n").is_none());
        let literal = Replacer::new("a.b", true, false, "$1").unwrap();
        assert_eq!(literal.apply(b"a.b axb\n").unwrap().content, b"$1 axb\n");
        let diff = unified_diff("/w/f.rs", &replaced.changes);
        assert_eq!(
            diff,
            "--- a/w/f.rs\n+++ b/w/f.rs\n@@ -1,1 +1,1 @@\n-use foo_v1;\n+use foo_v2;\n@@ -3,1 +3,1 @@\n-bar_v1(baz_v1)\n+bar_v2(baz_v2)\n"
        );
    }
}
