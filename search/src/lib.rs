//! Search under a directory the way `rg` does, with ripgrep's own crates: the walk is
//! `ignore`'s (`.gitignore`, `.ignore` and hidden files honoured as `rg` honours them, with
//! switches to include them; symlinks not followed unless asked), names are matched by
//! globs (`ignore`'s overrides, as `rg -g`), contents by `grep-regex` and `grep-searcher`
//! (a regex or a literal, binary files skipped at their first NUL, line numbers, context
//! lines). The walk runs on every core; what it finds goes to the caller as it is found,
//! until the caller stops, a bound is reached, or the time is up. No HTTP.

mod error;
mod replace;
mod within;

pub use error::SearchError;
pub use replace::{Change, Replaced, Replacer, unified_diff};
pub use within::{Attached, NotUnmounted, Refused, Within, is_outside, kernel_confines, resolved};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::{Override, OverrideBuilder};
use ignore::{WalkBuilder, WalkState};

/// What to look for and where.
#[derive(Debug, Clone)]
pub struct Query {
    pub root: PathBuf,
    /// Contents to find; `None` lists the files the walk keeps (as `rg --files`).
    pub pattern: Option<String>,
    /// `pattern` is a literal string, not a regex.
    pub literal: bool,
    pub case_insensitive: bool,
    /// Globs a file's path must match (`!glob` excludes), as `rg -g`.
    pub globs: Vec<String>,
    /// Search hidden files and directories too (`rg --hidden`).
    pub hidden: bool,
    /// Search what `.gitignore`, `.ignore` and git's excludes would skip (`rg --no-ignore`).
    pub no_ignore: bool,
    /// Follow symlinks (`rg -L`).
    pub follow_links: bool,
    /// Confined to these roots: a link followed out of them is not walked, and every file
    /// is opened beneath the root it is in, by the kernel (see [`Within`]); what lies
    /// outside is skipped, counted in [`Summary::outside`], never read or named.
    pub within: Option<Arc<Within>>,
    /// Lines of context before and after each match.
    pub context: usize,
    /// Matches (or files, without a pattern) found before the search stops.
    pub max_results: u64,
    /// A line longer than this is cut (at a character boundary) and said to be.
    pub max_line_bytes: usize,
    pub timeout: Duration,
}

/// A file the walk kept, or a matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    File(PathBuf),
    Line(Line),
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub path: PathBuf,
    /// 1-based.
    pub line_number: u64,
    /// 1-based byte column of the first match on the line.
    pub column: u64,
    pub text: String,
    /// `text` was cut at `max_line_bytes`.
    pub truncated: bool,
    pub before: Vec<String>,
    pub after: Vec<String>,
}

/// Why a search ended before it had looked everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    MaxResults,
    Timeout,
    /// The caller stopped taking results.
    Caller,
}

/// How a search went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub files_searched: u64,
    pub results: u64,
    pub stopped: Option<Stopped>,
    /// Links out of the roots, and files that moved out while being opened, skipped.
    pub outside: u64,
}

/// Checks what `query` asks for without searching: the root exists, the pattern and the
/// globs compile.
pub fn check(query: &Query) -> Result<(), SearchError> {
    prepare(query).map(|_| ())
}

/// The compiled matcher and globs of `query`.
fn prepare(query: &Query) -> Result<(Option<RegexMatcher>, Override), SearchError> {
    if !query.root.exists() {
        return Err(SearchError::Root {
            path: query.root.clone(),
        });
    }
    let matcher = match &query.pattern {
        Some(pattern) => Some(
            RegexMatcherBuilder::new()
                .case_insensitive(query.case_insensitive)
                .fixed_strings(query.literal)
                .build(pattern)
                .map_err(|error| SearchError::Pattern(error.to_string()))?,
        ),
        None => None,
    };
    Ok((matcher, overrides(&query.root, &query.globs)?))
}

/// Runs `query`, handing each result to `found` as the walk finds it (from the calling
/// thread); `found` returns `false` to stop. Blocking: the walk's threads are its own.
pub fn search(query: &Query, mut found: impl FnMut(Found) -> bool) -> Result<Summary, SearchError> {
    let (matcher, overrides) = prepare(query)?;
    let outside = Arc::new(AtomicU64::new(0));
    let mut builder = WalkBuilder::new(&query.root);
    if let Some(within) = query.within.clone()
        && query.follow_links
    {
        let outside = outside.clone();
        // A link followed out is not walked at all (a directory's whole subtree).
        builder.filter_entry(move |entry| {
            let keep = !entry.path_is_symlink() || within.contains(entry.path());
            if !keep {
                outside.fetch_add(1, Ordering::Relaxed);
            }
            keep
        });
    }
    let walk = builder
        .hidden(!query.hidden)
        .ignore(!query.no_ignore)
        .git_ignore(!query.no_ignore)
        .git_global(!query.no_ignore)
        .git_exclude(!query.no_ignore)
        .parents(!query.no_ignore)
        .follow_links(query.follow_links)
        .overrides(overrides)
        .build_parallel();
    let stop = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    let files_searched = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + query.timeout;
    let (sender, receiver) = mpsc::sync_channel::<Found>(256);
    let walker = {
        let (stop, timed_out, files_searched) =
            (stop.clone(), timed_out.clone(), files_searched.clone());
        let (context, max_line_bytes) = (query.context, query.max_line_bytes);
        let (within, outside) = (query.within.clone(), outside.clone());
        std::thread::spawn(move || {
            walk.run(|| {
                let (stop, timed_out, files) =
                    (stop.clone(), timed_out.clone(), files_searched.clone());
                let (within, outside) = (within.clone(), outside.clone());
                let (sender, matcher) = (sender.clone(), matcher.clone());
                let mut searcher = SearcherBuilder::new()
                    .line_number(true)
                    .before_context(context)
                    .after_context(context)
                    .binary_detection(BinaryDetection::quit(b'\x00'))
                    .build();
                Box::new(move |entry| {
                    if stop.load(Ordering::Relaxed) {
                        return WalkState::Quit;
                    }
                    if Instant::now() >= deadline {
                        timed_out.store(true, Ordering::Relaxed);
                        stop.store(true, Ordering::Relaxed);
                        return WalkState::Quit;
                    }
                    let Ok(entry) = entry else {
                        return WalkState::Continue;
                    };
                    if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                        return WalkState::Continue;
                    }
                    let path = entry.into_path();
                    // Confined: the file is opened beneath its root before it is named or
                    // read, so a swap after the walk looked cannot lead out.
                    let file = match within.as_deref().map(|within| within.open(&path)) {
                        None => None,
                        Some(Ok(file)) => Some(file),
                        Some(Err(Refused::Outside)) => {
                            outside.fetch_add(1, Ordering::Relaxed);
                            return WalkState::Continue;
                        }
                        // Unreadable: skipped, as `rg` skips it.
                        Some(Err(Refused::Io(_))) => return WalkState::Continue,
                    };
                    files.fetch_add(1, Ordering::Relaxed);
                    let delivered = match &matcher {
                        None => sender.send(Found::File(path)).is_ok(),
                        Some(matcher) => search_file(
                            &mut searcher,
                            matcher,
                            (&path, file.as_ref()),
                            max_line_bytes,
                            &sender,
                            &stop,
                        ),
                    };
                    if delivered {
                        WalkState::Continue
                    } else {
                        WalkState::Quit
                    }
                })
            });
        })
    };
    let mut results = 0;
    let mut stopped = None;
    for item in receiver.iter() {
        if results >= query.max_results {
            stopped = Some(Stopped::MaxResults);
            break;
        }
        results += 1;
        if !found(item) {
            stopped = Some(Stopped::Caller);
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    drop(receiver);
    let _ = walker.join();
    if stopped.is_none() && timed_out.load(Ordering::Relaxed) {
        stopped = Some(Stopped::Timeout);
    }
    Ok(Summary {
        files_searched: files_searched.load(Ordering::Relaxed),
        results,
        stopped,
        outside: outside.load(Ordering::Relaxed),
    })
}

fn overrides(root: &Path, globs: &[String]) -> Result<Override, SearchError> {
    let mut builder = OverrideBuilder::new(root);
    for glob in globs {
        builder.add(glob).map_err(|error| SearchError::Glob {
            glob: glob.clone(),
            message: error.to_string(),
        })?;
    }
    builder.build().map_err(|error| SearchError::Glob {
        glob: globs.join(","),
        message: error.to_string(),
    })
}

/// Searches one file (`path`, or the file opened for it) and sends its matching lines;
/// `false` once nobody takes them.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    (path, file): (&Path, Option<&std::fs::File>),
    max_line_bytes: usize,
    sender: &mpsc::SyncSender<Found>,
    stop: &AtomicBool,
) -> bool {
    let mut lines = Lines {
        matcher,
        path,
        max_line_bytes,
        found: Vec::new(),
        before: Vec::new(),
        sender,
        stop,
        gone: false,
    };
    // An unreadable file is skipped, as `rg` skips it (with a message on its stderr).
    let _ = match file {
        Some(file) => searcher.search_file(matcher, file, &mut lines),
        None => searcher.search_path(matcher, path, &mut lines),
    };
    lines.flush();
    !lines.gone
}

/// Collects one file's matches with their context, handing each on once its after-context
/// is complete.
struct Lines<'a> {
    matcher: &'a RegexMatcher,
    path: &'a Path,
    max_line_bytes: usize,
    found: Vec<Line>,
    before: Vec<String>,
    sender: &'a mpsc::SyncSender<Found>,
    stop: &'a AtomicBool,
    gone: bool,
}

impl Lines<'_> {
    fn flush(&mut self) {
        for line in self.found.drain(..) {
            if self.sender.send(Found::Line(line)).is_err() {
                self.gone = true;
            }
        }
    }

    fn text(&self, bytes: &[u8]) -> (String, bool) {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let text = String::from_utf8_lossy(bytes);
        if text.len() <= self.max_line_bytes {
            return (text.into_owned(), false);
        }
        let mut cut = self.max_line_bytes;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        (text[..cut].to_string(), true)
    }
}

impl Sink for Lines<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &Searcher,
        found: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        // A match closes the after-context of the ones before it.
        self.flush();
        let column = self
            .matcher
            .find(found.bytes())
            .ok()
            .flatten()
            .map_or(1, |at| at.start() as u64 + 1);
        let (text, truncated) = self.text(found.bytes());
        self.found.push(Line {
            path: self.path.to_path_buf(),
            line_number: found.line_number().unwrap_or(0),
            column,
            text,
            truncated,
            before: std::mem::take(&mut self.before),
            after: Vec::new(),
        });
        Ok(!self.gone && !self.stop.load(Ordering::Relaxed))
    }

    fn context(
        &mut self,
        _searcher: &Searcher,
        context: &SinkContext<'_>,
    ) -> Result<bool, Self::Error> {
        let (text, _) = self.text(context.bytes());
        match context.kind() {
            SinkContextKind::After => {
                if let Some(last) = self.found.last_mut() {
                    last.after.push(text);
                }
            }
            _ => self.before.push(text),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(root: &Path, pattern: Option<&str>) -> Query {
        Query {
            root: root.to_path_buf(),
            pattern: pattern.map(str::to_string),
            literal: false,
            case_insensitive: false,
            globs: Vec::new(),
            hidden: false,
            no_ignore: false,
            follow_links: false,
            within: None,
            context: 0,
            max_results: 1000,
            max_line_bytes: 500,
            timeout: Duration::from_secs(30),
        }
    }

    fn collect(query: &Query) -> (Vec<Found>, Summary) {
        let mut found = Vec::new();
        let summary = search(query, |item| {
            found.push(item);
            true
        })
        .unwrap();
        found.sort_by_key(|item| format!("{item:?}"));
        (found, summary)
    }

    #[test]
    fn matches_with_lines_columns_and_context_skipping_binaries() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo fish\nthree\nfour\n").unwrap();
        std::fs::write(dir.path().join("bin.dat"), b"fish\0\x01\x02").unwrap();
        let mut q = query(dir.path(), Some("fi.h"));
        q.context = 1;
        let (found, summary) = collect(&q);
        assert_eq!(summary.results, 1, "{found:?}");
        let Found::Line(line) = &found[0] else {
            panic!()
        };
        assert_eq!(
            (line.line_number, line.column, line.text.as_str()),
            (2, 5, "two fish")
        );
        assert_eq!(
            (line.before.clone(), line.after.clone()),
            (vec!["one".into()], vec!["three".into()])
        );
        q.literal = true;
        assert_eq!(collect(&q).1.results, 0, "a literal dot matches a dot only");
        q.literal = false;
        q.pattern = Some("(".into());
        assert!(matches!(search(&q, |_| true), Err(SearchError::Pattern(_))));
    }

    #[test]
    fn ignores_and_hidden_files_as_rg_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("node_modules/x")).unwrap();
        std::fs::write(root.join(".gitignore"), "node_modules/\n").unwrap();
        std::fs::write(root.join("node_modules/x/i.js"), "needle\n").unwrap();
        std::fs::write(root.join(".hidden.js"), "needle\n").unwrap();
        std::fs::write(root.join("main.js"), "needle\nneedle\n").unwrap();
        std::fs::write(root.join("notes.md"), "needle\n").unwrap();
        let mut q = query(root, Some("needle"));
        assert_eq!(collect(&q).1.results, 3);
        q.hidden = true;
        assert_eq!(collect(&q).1.results, 4);
        q.no_ignore = true;
        assert_eq!(collect(&q).1.results, 5);
        q.globs = vec!["*.js".into()];
        assert_eq!(collect(&q).1.results, 4);
        q.globs = vec!["*.js".into(), "!node_modules/**".into()];
        assert_eq!(collect(&q).1.results, 3);
        let mut names = query(root, None);
        names.globs = vec!["*.md".into()];
        let (found, _) = collect(&names);
        assert_eq!(found, [Found::File(root.join("notes.md"))]);
        let mut bounded = query(root, Some("needle"));
        bounded.max_results = 2;
        let (_, summary) = collect(&bounded);
        assert_eq!(
            (summary.results, summary.stopped),
            (2, Some(Stopped::MaxResults))
        );
        q.globs = vec!["[".into()];
        assert!(matches!(
            search(&q, |_| true),
            Err(SearchError::Glob { .. })
        ));
    }
}
