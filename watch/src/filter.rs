//! Include/exclude globs over paths relative to the watched root.
//!
//! A pattern matches a path when it matches any run of whole path segments, as the
//! reference's `(^|/)<glob>(/|$)` regex does: `node_modules` excludes every path with a
//! `node_modules` segment, `src/*.rs` matches `crate/src/lib.rs`. `*` and `?` stay within a
//! segment; `**` spans any number of segments.

/// The excludes that apply when a watch names no include: VCS data and dependencies.
pub const DEFAULT_EXCLUDES: &[&str] = &[".git", "node_modules", ".DS_Store"];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GlobError {
    #[error("pattern must not be empty")]
    Empty,
    #[error("pattern {0:?} uses [ ] {{ }}, which are not supported (only *, ** and ?)")]
    Unsupported(String),
    #[error("pattern contains a NUL byte")]
    Nul,
}

#[derive(Debug, Clone, Default)]
pub struct Filter {
    include: Vec<Vec<String>>,
    exclude: Vec<Vec<String>>,
}

impl Filter {
    /// Includes win: when any is given, excludes (and the defaults) are ignored, as in the
    /// reference. With neither, the default excludes apply.
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, GlobError> {
        let compile = |patterns: &[String]| -> Result<Vec<Vec<String>>, GlobError> {
            patterns.iter().map(|p| compile(p)).collect()
        };
        if !include.is_empty() {
            return Ok(Self {
                include: compile(include)?,
                exclude: Vec::new(),
            });
        }
        let exclude = if exclude.is_empty() {
            DEFAULT_EXCLUDES
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
        } else {
            exclude.to_vec()
        };
        Ok(Self {
            include: Vec::new(),
            exclude: compile(&exclude)?,
        })
    }

    /// Whether an event for `relative` (a path under the root, `/`-separated) is reported.
    pub fn allows(&self, relative: &str) -> bool {
        let segments: Vec<&str> = relative.split('/').filter(|s| !s.is_empty()).collect();
        if !self.include.is_empty() {
            return self.include.iter().any(|p| matches_anywhere(p, &segments));
        }
        !self.exclude.iter().any(|p| matches_anywhere(p, &segments))
    }

    /// Whether a directory can be skipped entirely: only excludes prune (an include such as
    /// `*.rs` must still see inside directories that do not match it).
    pub fn prunes_dir(&self, relative: &str) -> bool {
        self.include.is_empty() && !self.allows(relative)
    }

    /// Whether a directory's pruning follows from its own name alone, so a directory moved
    /// never brings a pruned one inside it into view (every exclude is one segment, or
    /// includes are given and nothing is pruned).
    pub fn prunes_by_name(&self) -> bool {
        !self.include.is_empty() || self.exclude.iter().all(|p| p.len() == 1)
    }

    /// Whether a directory moved between two names that this filter judges alike keeps
    /// the verdict of everything inside it, so the directory's own event tells the move
    /// whole: every pattern is one segment, so a path's verdict comes from its segments
    /// one by one; a reported directory carries what it holds, and an unreported one
    /// hides it unless an include may match something inside.
    pub fn moves_whole(&self, reported: bool) -> bool {
        let one_segment = |patterns: &[Vec<String>]| patterns.iter().all(|p| p.len() == 1);
        one_segment(&self.include)
            && one_segment(&self.exclude)
            && (reported || self.include.is_empty())
    }
}

fn compile(pattern: &str) -> Result<Vec<String>, GlobError> {
    if pattern.trim().is_empty() {
        return Err(GlobError::Empty);
    }
    if pattern.contains('\0') {
        return Err(GlobError::Nul);
    }
    if pattern.contains(['[', ']', '{', '}']) {
        return Err(GlobError::Unsupported(pattern.to_string()));
    }
    Ok(pattern
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect())
}

/// The pattern matches segments `i..j` of the path for some `i`, any `j`.
fn matches_anywhere(pattern: &[String], path: &[&str]) -> bool {
    (0..=path.len()).any(|start| matches_prefix(pattern, &path[start..]))
}

/// The pattern matches a prefix (of whole segments) of `path`.
fn matches_prefix(pattern: &[String], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => true,
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| matches_prefix(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((segment, tail)) => {
                segment_matches(first.as_bytes(), segment.as_bytes()) && matches_prefix(rest, tail)
            }
            None => false,
        },
    }
}

/// `*` and `?` within one segment.
fn segment_matches(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| segment_matches(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && segment_matches(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && segment_matches(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(patterns: &[&str]) -> Vec<String> {
        patterns.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn default_excludes_hide_vcs_and_dependencies_anywhere() {
        let filter = Filter::new(&[], &[]).unwrap();
        assert!(filter.allows("src/main.rs"));
        assert!(!filter.allows(".git/HEAD"));
        assert!(!filter.allows("web/node_modules/react/index.js"));
        assert!(!filter.allows("node_modules"));
        assert!(filter.allows("node_modules_backup/x"));
        assert!(filter.prunes_dir("node_modules"));
    }

    #[test]
    fn includes_win_over_excludes() {
        let filter = Filter::new(&strings(&["*.rs"]), &strings(&["src"])).unwrap();
        assert!(filter.allows("src/lib.rs"));
        assert!(!filter.allows("src/lib.ts"));
        assert!(!filter.prunes_dir("docs"));
    }

    #[test]
    fn star_question_and_double_star() {
        let filter = Filter::new(&strings(&["src/**/*.rs", "a?c"]), &[]).unwrap();
        assert!(filter.allows("src/lib.rs"));
        assert!(filter.allows("crate/src/deep/er/mod.rs"));
        assert!(!filter.allows("src/lib.rsx"));
        assert!(filter.allows("x/abc/y"));
        assert!(!filter.allows("x/abbc/y"));
    }

    #[test]
    fn a_move_is_whole_only_when_no_verdict_inside_can_change() {
        let defaults = Filter::new(&[], &[]).unwrap();
        assert!(defaults.moves_whole(true));
        assert!(defaults.moves_whole(false));
        // `mv x a`: `x/b` was reported, `a/b` is not.
        let deep = Filter::new(&[], &strings(&["a/b"])).unwrap();
        assert!(!deep.moves_whole(true));
        // `mv a x`: `a/b` was pruned, `x/b` is watched.
        assert!(!deep.prunes_by_name());
        assert!(defaults.prunes_by_name());
        // `mv src lib`: neither is reported, `src/x.rs` and `lib/x.rs` are.
        let include = Filter::new(&strings(&["*.rs"]), &[]).unwrap();
        assert!(include.moves_whole(true));
        assert!(!include.moves_whole(false));
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert_eq!(
            Filter::new(&strings(&[""]), &[]).unwrap_err(),
            GlobError::Empty
        );
        assert!(matches!(
            Filter::new(&[], &strings(&["*.{js,ts}"])),
            Err(GlobError::Unsupported(_))
        ));
        assert_eq!(
            Filter::new(&strings(&["a\0"]), &[]).unwrap_err(),
            GlobError::Nul
        );
    }
}
