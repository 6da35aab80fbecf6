//! File routes: `/api/read`, `/api/write`, `/api/delete`, `/api/rename`, `/api/move`,
//! `/api/mkdir`, `/api/list-files`, `/api/exists`, the SSE `/api/read/stream`, and the native
//! `/api/stat` and `/api/files/raw`.
//!
//! Every request accepts an optional `sessionId`; unknown fields are ignored, as the
//! reference's clients send extra ones.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How file content travels inside JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Text; `"utf-8"` on the wire (`"utf8"` accepted).
    Utf8,
    /// Standard base64 with padding.
    Base64,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Utf8 => "utf-8",
            Self::Base64 => "base64",
        }
    }

    /// Parses a wire value; `None` for anything else.
    pub fn from_wire(value: &str) -> Option<Self> {
        match value {
            "utf-8" | "utf8" => Some(Self::Utf8),
            "base64" => Some(Self::Base64),
            _ => None,
        }
    }
}

impl Serialize for Encoding {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Encoding {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        Self::from_wire(&value).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown encoding `{value}`, expected `utf-8`, `utf8` or `base64`"
            ))
        })
    }
}

/// A request naming one path.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathRequest {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadRequest {
    pub path: String,
    /// Absent: base64 for binary content, UTF-8 otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResponse {
    pub success: bool,
    pub path: String,
    pub content: String,
    pub timestamp: String,
    pub encoding: Encoding,
    pub is_binary: bool,
    pub mime_type: String,
    pub size: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteRequest {
    pub path: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// fsd's own: the file's mode, octal (`755`) or symbolic (`u+x`, applied to the mode
    /// it would have had: the previous file's, or 0644); the file appears with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteResponse {
    pub success: bool,
    pub path: String,
    /// Bytes that landed in the file (after base64 decoding). An fsd extension.
    pub bytes_written: u64,
    /// The mode set, four octal digits, when the request gave one. An fsd extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub timestamp: String,
}

/// A mode as answers give it: four octal digits, as `stat -c %04a`.
pub fn mode_digits(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

/// The answer of routes that act on one path: delete, and errors-free acknowledgements.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathResponse {
    pub success: bool,
    pub path: String,
    pub timestamp: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenameRequest {
    pub old_path: String,
    pub new_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveRequest {
    pub source_path: String,
    pub destination_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The answer of rename and move: `path` is the source, `newPath` the destination given.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenameResponse {
    pub success: bool,
    pub path: String,
    pub new_path: String,
    pub timestamp: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MkdirRequest {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// fsd's own: the new directory's mode, as `mkdir -m` takes it (parents made on the
    /// way and a directory already there keep theirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MkdirResponse {
    pub success: bool,
    pub path: String,
    pub recursive: bool,
    /// The mode set, when the request gave one and the directory was made. fsd's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub timestamp: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListFilesOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_hidden: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListFilesRequest {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<ListFilesOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileType {
    File,
    Directory,
    Symlink,
    Other,
}

/// Owner permission bits, as the reference reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permissions {
    pub readable: bool,
    pub writable: bool,
    pub executable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    pub name: String,
    pub absolute_path: String,
    /// Relative to the listed directory.
    pub relative_path: String,
    #[serde(rename = "type")]
    pub file_type: FileType,
    pub size: u64,
    /// RFC 3339 in UTC with milliseconds.
    pub modified_at: String,
    /// Permission bits as `rwxr-xr-x`.
    pub mode: String,
    pub permissions: Permissions,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListFilesResponse {
    pub success: bool,
    pub path: String,
    pub files: Vec<FileInfo>,
    pub count: usize,
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExistsResponse {
    pub success: bool,
    pub path: String,
    pub exists: bool,
    pub timestamp: String,
}

/// `POST /api/files/archive` (fsd extension): a directory's tree as one uncompressed tar
/// stream (`application/x-tar`), paths relative to it: directories, files and symlinks
/// (never followed: the link itself, its target verbatim) with their permission bits;
/// FIFOs, devices and sockets as entries without data. fsd's scratch files are left out.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveRequest {
    pub path: String,
    /// Names (one path segment each) left out wherever they occur, with what is under them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Only these regular files (relative to `path`, reached through no symlink), in this
    /// order; one gone or no longer a file is left out. Empty: the whole tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `POST /api/files/manifest` (fsd extension): every entry under a directory with what a
/// two-way sync compares (kind, mode, size, mtime, a file's SHA-256, a link's target), read
/// in the sandbox so no content crosses the wire to compare it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestRequest {
    pub path: String,
    /// `.gitignore`-style lines of what to leave out, matched against paths relative to
    /// `path`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Only these paths (relative to `path`) and what is below them: what a sync reads
    /// again where a change list says something changed. A path that is not there (or is
    /// under a link or a file) has no entry. Absent or empty: the whole directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// Of `paths`, those under none of the others, in their order: a manifest of chosen paths
/// reads each of these with what is below it.
pub fn topmost<'a>(paths: impl IntoIterator<Item = &'a String>) -> Vec<&'a str> {
    let paths: std::collections::BTreeSet<&str> = paths.into_iter().map(String::as_str).collect();
    paths
        .iter()
        .copied()
        .filter(|path| {
            let mut at = *path;
            while let Some((up, _)) = at.rsplit_once('/') {
                if paths.contains(up) {
                    return false;
                }
                at = up;
            }
            true
        })
        .collect()
}

/// One entry of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestEntry {
    /// Relative to the requested directory, `/` between names.
    pub path: String,
    #[serde(rename = "type")]
    pub file_type: FileType,
    /// Permission bits (`0o777` at most).
    pub mode: u32,
    pub size: u64,
    pub modified_ms: i64,
    /// A regular file's content hash, lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A symlink's target, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestResponse {
    pub success: bool,
    pub path: String,
    /// Parents before what they hold.
    pub entries: Vec<ManifestEntry>,
    /// Entries a manifest cannot carry (names that are not UTF-8), by their lossy path.
    pub skipped: Vec<String>,
    pub timestamp: String,
}

/// `POST /api/files/apply` (fsd extension): a batch of changes to a tree, each made only
/// if its path still holds what the caller last saw there (two-way sync's check before
/// change, made in the sandbox so nothing changes between the check and the change but a
/// clock tick). The body is binary: a 4-byte big-endian length, this request as JSON of that
/// length, then the content of every [`ApplyStep::PutFile`] in order, raw (no base64).
/// More parts may follow in the same body, each an [`ApplyPart`] framed the same way: a
/// sender streams a large batch as it reads it, each part's files hashed just before they
/// go, and the steps of all parts are numbered in one sequence.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyRequest {
    /// The directory the steps' paths are relative to (`/` between names). Nothing below it
    /// is followed through a symlink.
    pub path: String,
    pub steps: Vec<ApplyStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// A later part of an [`ApplyRequest`]'s body: more steps for the same directory, made
/// after those before them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyPart {
    pub steps: Vec<ApplyStep>,
}

/// What a path holds, as a step expects or finds it. Modes are not compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Held {
    Absent,
    File {
        sha256: String,
    },
    Directory,
    Symlink {
        target: String,
    },
    /// A device, FIFO or socket: never matches a step's expectation, so never replaced.
    Other,
}

/// One change of an [`ApplyRequest`], made only if `expect` is what the path holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum ApplyStep {
    /// The path becomes a regular file of `size` bytes from the body, whose SHA-256 must be
    /// `sha256` (else the source changed while it was read, and nothing is changed), with
    /// `mode`. An empty directory at the path is replaced; a non-empty one is a change.
    #[serde(rename_all = "camelCase")]
    PutFile {
        path: String,
        expect: Held,
        size: u64,
        sha256: String,
        mode: u32,
    },
    /// The path becomes a directory with `mode` (a file or link there is replaced).
    Mkdir {
        path: String,
        expect: Held,
        mode: u32,
    },
    /// The path becomes a symlink to `target`, verbatim.
    Symlink {
        path: String,
        expect: Held,
        target: String,
    },
    /// The permission bits of the file or directory at the path become `mode`.
    Chmod {
        path: String,
        expect: Held,
        mode: u32,
    },
    /// What is at the path goes (a directory only when empty).
    Remove { path: String, expect: Held },
    /// What is at `path` moves to `to`, which must be free.
    Rename {
        path: String,
        expect: Held,
        to: String,
    },
}

impl ApplyStep {
    /// The path the step changes (a rename's origin).
    pub fn path(&self) -> &str {
        match self {
            Self::PutFile { path, .. }
            | Self::Mkdir { path, .. }
            | Self::Symlink { path, .. }
            | Self::Chmod { path, .. }
            | Self::Remove { path, .. }
            | Self::Rename { path, .. } => path,
        }
    }
}

/// What became of one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum StepOutcome {
    Applied,
    /// The path did not hold what the step expected (or a rename's destination was taken,
    /// or a directory to replace was not empty): nothing was changed. `found` is what it
    /// held.
    Changed {
        found: Held,
    },
    /// The step could not be made (a parent missing, content that did not match its hash,
    /// an I/O error); nothing was changed.
    Failed {
        reason: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyResponse {
    pub success: bool,
    pub path: String,
    /// One per step, in order.
    pub outcomes: Vec<StepOutcome>,
    pub timestamp: String,
}

/// `POST /api/stat` (fsd extension). Symlinks are reported, not followed, unless asked.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatRequest {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_symlinks: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileStat {
    #[serde(rename = "type")]
    pub file_type: FileType,
    pub size: u64,
    /// Permission bits as `rwxr-xr-x`.
    pub mode: String,
    /// Permission bits (with setuid, setgid and sticky) as an octal string such as `"0755"`.
    pub mode_octal: String,
    pub permissions: Permissions,
    pub modified_at: String,
    pub accessed_at: String,
    pub changed_at: String,
    pub inode: u64,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatResponse {
    pub success: bool,
    pub path: String,
    pub stat: FileStat,
    pub timestamp: String,
}

/// The answer of `PUT /api/files/raw`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawWriteResponse {
    pub success: bool,
    pub path: String,
    pub bytes_written: u64,
    /// The mode set, when `?mode=` gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub timestamp: String,
}

/// One SSE frame of `/api/read/stream`: `metadata`, then `chunk`s, then `complete` or `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FileStreamEvent {
    #[serde(rename_all = "camelCase")]
    Metadata {
        mime_type: String,
        size: u64,
        is_binary: bool,
        encoding: Encoding,
    },
    /// Up to 65,535 raw bytes: base64 when binary, text otherwise.
    Chunk {
        data: String,
    },
    #[serde(rename_all = "camelCase")]
    Complete {
        bytes_read: u64,
    },
    Error {
        error: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_accepts_both_spellings_and_rejects_others() {
        let utf8: Encoding = serde_json::from_str("\"utf8\"").unwrap();
        assert_eq!(utf8, Encoding::Utf8);
        assert_eq!(serde_json::to_string(&utf8).unwrap(), "\"utf-8\"");
        assert!(serde_json::from_str::<Encoding>("\"latin1\"").is_err());
    }

    #[test]
    fn stream_events_are_tagged_by_type() {
        let event = FileStreamEvent::Complete { bytes_read: 3 };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"type":"complete","bytesRead":3}"#
        );
    }
}

/// `POST /api/chmod`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChmodRequest {
    pub path: String,
    /// Octal (`755`, `4755`) or symbolic (`u+x`, `go-w`, `a=rX`), as `chmod` takes it.
    pub mode: String,
    /// Everything below a directory too (symlinks neither followed nor changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `POST /api/chown`: `owner`, `group` or both, each a name or a numeric id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChownRequest {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// What `chmod` and `chown` answer: the path's resulting mode and owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsResponse {
    pub success: bool,
    pub path: String,
    /// Four octal digits, as `stat -c %04a`.
    pub mode: String,
    pub uid: u32,
    pub gid: u32,
    /// Files changed (`chmod`) or given away (`chown`).
    pub changed: u64,
    pub timestamp: String,
}
