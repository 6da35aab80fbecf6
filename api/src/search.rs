//! Search (fsd's own routes): file names by glob and contents by regex or literal under a
//! directory, as `rg` finds them. `POST /api/search` answers once with everything found
//! (sorted by path and line); `POST /api/search/stream` sends each result as it is found.

use serde::{Deserialize, Serialize};

/// Results a search returns unless told otherwise.
pub const DEFAULT_MAX_RESULTS: u64 = 1000;
/// The most results one search may ask for.
pub const MAX_RESULTS_LIMIT: u64 = 1_000_000;
/// Bytes of a matching line returned unless told otherwise (the rest is cut, and said).
pub const DEFAULT_MAX_LINE_BYTES: u32 = 500;
pub const MAX_LINE_BYTES_LIMIT: u32 = 65_536;
/// Context lines one search may ask for around each match.
pub const MAX_CONTEXT: u32 = 100;
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const MAX_TIMEOUT_MS: u64 = 600_000;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchRequest {
    /// The directory (or file) to search; relative paths from the session's directory.
    pub path: String,
    /// What to find in contents (a regex unless `literal`); absent: list file names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literal: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_insensitive: Option<bool>,
    /// Globs a file's path must match; `!glob` excludes (as `rg -g`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub globs: Option<Vec<String>>,
    /// Search hidden files and directories too (`rg --hidden`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
    /// Search what `.gitignore`, `.ignore` and git's excludes skip (`rg --no-ignore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_ignore: Option<bool>,
    /// Follow symlinks (`rg -L`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_links: Option<bool>,
    /// Context lines before and after each match (at most [`MAX_CONTEXT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_line_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchMatch {
    pub path: String,
    pub line_number: u64,
    /// 1-based byte column of the first match on the line.
    pub column: u64,
    pub line: String,
    /// The line was cut at `maxLineBytes`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

/// What a search under `--confine` left out (fsd): links out of the allowed roots, and
/// files that moved out while being opened; never read or named.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub outside: u64,
}

impl Skipped {
    pub fn is_empty(&self) -> bool {
        self.outside == 0
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResponse {
    pub success: bool,
    pub path: String,
    /// The files found, without a pattern.
    pub files: Vec<String>,
    /// The matching lines, with a pattern.
    pub matches: Vec<SearchMatch>,
    pub files_searched: u64,
    /// The search stopped before looking everywhere (see `stopped`).
    pub truncated: bool,
    /// `max_results` or `timeout`, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    #[serde(default, skip_serializing_if = "Skipped::is_empty")]
    pub skipped: Skipped,
    pub timestamp: String,
}

/// One event of `POST /api/search/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SearchEvent {
    File {
        path: String,
    },
    Match(SearchMatch),
    #[serde(rename_all = "camelCase")]
    Complete {
        files_searched: u64,
        results: u64,
        truncated: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stopped: Option<String>,
        #[serde(default, skip_serializing_if = "Skipped::is_empty")]
        skipped: Skipped,
        timestamp: String,
    },
}

/// Files one replace may rewrite unless told otherwise.
pub const DEFAULT_MAX_FILES: u64 = 1000;
pub const MAX_FILES_LIMIT: u64 = 100_000;

/// `POST /api/replace`: what the search's `pattern` (required) matches becomes
/// `replacement`, line by line as `rg --replace` (`$1`, `${name}`, `$$`), in every file the
/// same search would find (its `path`, `literal`, `caseInsensitive`, `globs`, `hidden`,
/// `noIgnore` and `sessionId`; its result bounds do not apply).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplaceRequest {
    #[serde(flatten)]
    pub search: SearchRequest,
    pub replacement: String,
    /// Change nothing; answer each file's diff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Files rewritten at most (the rest are left alone, and `truncated` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_files: Option<u64>,
}

/// One file a replace changed (or would change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplacedFile {
    pub path: String,
    pub replacements: u64,
    /// A unified diff of the changed lines, on a dry run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplaceResponse {
    pub success: bool,
    pub dry_run: bool,
    pub files: Vec<ReplacedFile>,
    pub replacements: u64,
    /// More files matched than `maxFiles`; those were left alone.
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Skipped::is_empty")]
    pub skipped: Skipped,
    pub timestamp: String,
}
