//! Backups: `/api/backup/create`, `/restore` and `/upload-parts` as the reference has them,
//! plus fsd's one-call `/upload` and `/download` (SSE progress), `/mounts` and `/unmount`.

use serde::{Deserialize, Serialize};

/// Where archives live in the sandbox; `archivePath` must be under it.
pub const ARCHIVE_ROOT: &str = "/var/backups/";

/// Directories that may be backed up or restored onto, and anything under them.
pub const ALLOWED_DIR_PREFIXES: &[&str] = &["/workspace", "/home", "/tmp", "/var/tmp", "/app"];

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compression {
    /// `zstd` (fsd's default), `lz4` (the reference's default) or `gzip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Compression threads, ≥ 1; default: one per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateBackupRequest {
    pub dir: String,
    pub archive_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitignore: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excludes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    /// fsd: store only what changed since `dir` was restored (it must be an active restore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<bool>,
    /// fsd: an incremental snapshot: only what differs from the snapshot indexed here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<SnapshotBase>,
    /// fsd: a fork point to send to another sandbox: `dir` is frozen as a fork freezes it
    /// and what it froze is archived whole; a snapshot built on this one elsewhere comes
    /// back as a branch of `dir` (`POST /api/fork` with `from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The snapshot an incremental snapshot is taken over.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotBase {
    /// Presigned GET of the parent snapshot's index.
    pub index_url: String,
    /// The parent's depth in its chain (0: a full snapshot).
    pub depth: u8,
    /// The change token the parent recorded: when the daemon's journal can say what changed
    /// since, only those paths are looked at; otherwise the tree is compared whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// How a snapshot differs from its parent, in paths.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotChanges {
    pub created: u64,
    pub modified: u64,
    pub deleted: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CreateBackupResponse {
    pub success: bool,
    pub size_bytes: u64,
    pub archive_path: String,
    /// fsd: SHA-256 of the archive, lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// fsd: entries in the archive.
    #[serde(default)]
    pub entries: u64,
    /// fsd, layers only: the archives this layer stacks on, topmost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parent_archive_paths: Vec<String>,
    /// fsd: the snapshot's index (`<archivePath>.index`), for the next incremental one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_path: Option<String>,
    /// fsd: the depth of an incremental snapshot in its chain (0 or absent: a full one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u8>,
    /// fsd, incremental snapshots: how the tree differs from the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<SnapshotChanges>,
    /// fsd, incremental snapshots: `changeToken` when the parent's token said what changed,
    /// `index` when the whole tree was compared with the parent's index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared_by: Option<String>,
    /// fsd: the directory's change token, taken before anything was read (what changes
    /// during the snapshot is listed again for the next one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreBackupRequest {
    pub dir: String,
    pub archive_path: String,
    /// fsd: for a layer, the archives beneath it, topmost first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_archive_paths: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RestoreBackupResponse {
    pub success: bool,
    pub dir: String,
    /// fsd: `kernel` or `fuse`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// fsd: processes that stood in the directory (or held a file open in it) when the
    /// restore mounted over it, or, for a release, in the restore it took away: a mount
    /// hides the directory they are in (an unmount detaches it) without moving them, so
    /// what they read and write from now on is not what the directory shows until they
    /// are started again. Sessions' shells and code contexts follow the directory by name
    /// and are not named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes_left_behind: Vec<ProcessLeftBehind>,
}

/// A process a restore left in the directory it hid.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProcessLeftBehind {
    /// As the sandbox sees it.
    pub pid: u32,
    /// Its arguments, joined by spaces (cut at 200 characters).
    pub command: String,
    /// What it holds there: `its working directory`, `its root`, `an open file, <path>`.
    pub holds: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UploadPart {
    pub part_number: u32,
    pub url: String,
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadPartsRequest {
    pub archive_path: String,
    pub parts: Vec<UploadPart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PartEtag {
    pub part_number: u32,
    pub etag: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UploadPartsResponse {
    pub success: bool,
    pub parts: Vec<PartEtag>,
}

/// Where `/api/backup/upload` sends the archive: one presigned PUT, or presigned part URLs
/// (parts 1, 2, … in order) of which it uses as many as the archive needs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_urls: Option<Vec<String>>,
    /// Smallest part, default 5 MiB (S3's and R2's floor for all parts but the last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_part_size: Option<u64>,
    /// fsd: a presigned PUT for the snapshot's index, uploaded after the archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_url: Option<String>,
}

/// `POST /api/backup/upload`: create an archive and upload it in one call.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadBackupRequest {
    #[serde(flatten)]
    pub create: CreateBackupRequest,
    pub upload: UploadTarget,
}

/// One archive to fetch for `/api/backup/download`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveSource {
    pub archive_path: String,
    /// Presigned GET URL.
    pub url: String,
    pub size_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// `POST /api/backup/download`: fetch archives (kept when already present with the same
/// size) and restore them onto `dir`; `archives` is the chain, topmost first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadBackupRequest {
    pub dir: String,
    pub archives: Vec<ArchiveSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// Events of `/api/backup/upload` and `/api/backup/download`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum BackupEvent {
    #[serde(rename_all = "camelCase")]
    Progress {
        phase: String,
        bytes_done: u64,
        bytes_total: u64,
    },
    #[serde(rename_all = "camelCase")]
    Complete {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        archive: Option<Box<CreateBackupResponse>>,
        /// Upload: the ETag of a single PUT.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        etag: Option<String>,
        /// Upload: the parts used, with their ETags.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<PartEtag>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_size: Option<u64>,
        /// Download: the restored directory.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dir: Option<String>,
        /// Download: archives that were already present and not fetched again.
        #[serde(default)]
        cached: u32,
        /// Download: the processes the restore left in the directory it hid (as
        /// [`RestoreBackupResponse::processes_left_behind`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        processes_left_behind: Vec<ProcessLeftBehind>,
    },
    #[serde(rename_all = "camelCase")]
    Error {
        code: String,
        message: String,
        http_status: u16,
    },
}

/// One active restore.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RestoreMount {
    pub dir: String,
    /// Topmost first.
    pub archive_paths: Vec<String>,
    pub driver: String,
    pub mounted_at: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RestoreMountsResponse {
    pub success: bool,
    pub mounts: Vec<RestoreMount>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnmountBackupRequest {
    pub dir: String,
}

/// `POST /api/backup/index`: the index a snapshot of `dir` would record now (what `diff`
/// compares a stored snapshot with), answered as the encoded index
/// (`application/octet-stream`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeIndexRequest {
    pub dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excludes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitignore: Option<bool>,
}

/// One archive of a snapshot's chain, read in place through ranged GETs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ChainArchive {
    /// The snapshot's depth in the chain (0: the full one).
    pub depth: u8,
    /// Presigned GET URL.
    pub url: String,
    pub size_bytes: u64,
}

/// `POST /api/backup/extract`: paths of a stored snapshot written back into `dir` (files
/// atomically with their mode, directories, symlinks), reading only the parts of the
/// archives that hold them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtractBackupRequest {
    pub dir: String,
    /// Presigned GET of the snapshot's index.
    pub index_url: String,
    /// The archives of the snapshot's chain.
    pub archives: Vec<ChainArchive>,
    /// Relative to `dir`: a file, or a directory with everything under it.
    pub paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ExtractBackupResponse {
    pub success: bool,
    pub files: u64,
    pub directories: u64,
    pub symlinks: u64,
    /// File bytes written.
    pub bytes: u64,
    /// Ranged GETs made, and the bytes they fetched.
    pub requests: u64,
    pub fetched_bytes: u64,
}

/// fsd's own: `POST /api/fork`, branches of `dir` at one instant. `names` or `count`
/// (branches named `1`..`count`); each branch is `dir@NAME` beside `dir`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkRequest {
    pub dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// A snapshot made in another sandbox, brought back as the branches: its chain's
    /// archives, topmost first, down to (at least) a fork point `dir` sent
    /// (`CreateBackupRequest::fork`). Those above the fork point are fetched as
    /// `/api/backup/download` fetches them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Vec<ArchiveSource>>,
}

/// A branch of a fork.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BranchInfo {
    pub name: String,
    pub path: String,
    /// The directory it was forked from.
    pub forked_from: String,
    /// When (RFC 3339).
    pub forked_at: String,
    /// Files (and links) made or changed in it since the fork.
    pub changed: u64,
    /// Paths deleted in it since the fork.
    pub deleted: u64,
    /// Bytes its own layer holds on disk.
    pub bytes: u64,
    /// A branch received from another sandbox: the archive of the snapshot it shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_from: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ForkResponse {
    pub success: bool,
    pub dir: String,
    pub branches: Vec<BranchInfo>,
    /// Why the fork point is a copy of `dir` rather than `dir` frozen beneath an overlay:
    /// the process that was working in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_because: Option<String>,
}

/// `GET /api/fork`: every branch.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BranchesResponse {
    pub branches: Vec<BranchInfo>,
}

/// `POST /api/fork/discard`: a branch taken away with what was written in it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscardBranchRequest {
    pub path: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DiscardBranchResponse {
    pub success: bool,
    pub path: String,
}

/// fsd's own: `POST /api/fork/merge`: what the branch at `branch` changed since its fork
/// point, merged three ways into the directory it was forked from (or `into`: that
/// directory or another branch of the same tree), each change made only where the path
/// still holds what the merge read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeBranchRequest {
    pub branch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    /// `two-way-safe` (the default: a true conflict keeps both versions), `theirs` (the
    /// branch's version wins a conflict) or `ours` (what `into` holds wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Say what would change; change nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// One change a merge made (or, dry, would make) in `into`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MergeChange {
    /// `put` (a file's content), `mkdir`, `symlink`, `chmod`, `remove` or `move`.
    pub op: String,
    pub path: String,
    /// Where a `move` goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// A path both sides changed differently, and how the mode settled it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MergeConflict {
    pub path: String,
    /// `keptBoth` (the other version is at `aside`), `ours` or `theirs` (that side's
    /// version is at the path; the other's is not carried).
    pub resolution: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aside: Option<String>,
}

/// A change the merge did not make, and why.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MergeSkipped {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MergeBranchResponse {
    pub success: bool,
    pub branch: String,
    pub into: String,
    pub dry_run: bool,
    /// Paths either side changed since the fork point (what the merge read).
    pub paths_read: u64,
    /// Made (dry: would be made), in order.
    pub changes: Vec<MergeChange>,
    pub conflicts: Vec<MergeConflict>,
    /// Paths written in `into` while the merge ran: left as the writer made them, not
    /// merged (merge again to take them in).
    pub changed_meanwhile: Vec<String>,
    pub failed: Vec<MergeSkipped>,
}
