//! `sync`: keep a local directory a byte-identical mirror of a sandbox subtree, incrementally.
//!
//! The first call (no version) copies everything and takes a change token first, so nothing
//! that happens during the copy is missed. Later calls ask what changed since the token and
//! apply just that, in the daemon's four steps (moved origins aside, deletes, moves and new
//! directories, downloads through temp files); a `resync` answer falls back to a full copy. The paths the watch never reports (.git, node_modules, .DS_Store)
//! are not mirrored.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use fsd_api::files::FileType;
use fsd_api::watch::PathChange;
use futures_util::{StreamExt, stream};

use crate::{ListOptions, Sandbox, SdkError};

/// Downloads in flight at once.
const PARALLEL_DOWNLOADS: usize = 16;
/// Names the watch excludes by default, so the mirror leaves them out too.
const SKIPPED: &[&str] = &[".git", "node_modules", ".DS_Store"];

/// What one `sync` call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// `full`, `incremental` or `unchanged`.
    pub mode: &'static str,
    pub downloaded: usize,
    pub deleted: usize,
    pub renamed: usize,
    /// Pass this to the next call.
    pub version: String,
}

impl Sandbox {
    /// Brings `local` up to date with `remote` (a directory in the sandbox) since `version`
    /// (from the previous report; `None` the first time).
    pub async fn sync(
        &self,
        remote: &str,
        local: &Path,
        version: Option<&str>,
    ) -> Result<SyncReport, SdkError> {
        std::fs::create_dir_all(local)?;
        let root = self.remote_root(remote).await?;
        if let Some(version) = version {
            let answer = self.check_changes(remote, Some(version), true).await?;
            match (answer.status.as_str(), answer.changes) {
                ("unchanged", _) => {
                    return Ok(SyncReport {
                        mode: "unchanged",
                        downloaded: 0,
                        deleted: 0,
                        renamed: 0,
                        version: answer.version,
                    });
                }
                ("changed", Some(changes)) => {
                    if let Some(report) = self.apply(&root, local, changes, answer.version).await? {
                        return Ok(report);
                    }
                }
                _ => {} // resync: copy everything again
            }
        }
        let baseline = self.check_changes(remote, None, false).await?;
        self.copy_all(remote, &root, local, baseline.version).await
    }

    /// The absolute path the daemon reports changes under.
    async fn remote_root(&self, remote: &str) -> Result<PathBuf, SdkError> {
        let workspace = PathBuf::from(self.capabilities().await?.workspace);
        let mut root = PathBuf::new();
        for component in workspace.join(remote).components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => {
                    root.pop();
                }
                other => root.push(other),
            }
        }
        Ok(root)
    }

    async fn copy_all(
        &self,
        remote: &str,
        root: &Path,
        local: &Path,
        version: String,
    ) -> Result<SyncReport, SdkError> {
        let files = self
            .list_files(
                remote,
                ListOptions {
                    recursive: true,
                    include_hidden: true,
                },
            )
            .await?;
        let mut wanted: HashSet<PathBuf> = HashSet::new();
        let mut downloads = Vec::new();
        for file in files {
            let relative = PathBuf::from(&file.relative_path);
            if skipped(&relative) {
                continue;
            }
            wanted.insert(relative.clone());
            match file.file_type {
                FileType::Directory => ensure_dir(&local.join(&relative))?,
                FileType::File => downloads.push(relative),
                FileType::Symlink | FileType::Other => {}
            }
        }
        let downloaded = self.download_all(root, local, downloads).await?;
        let deleted = remove_unwanted(local, &wanted)?;
        Ok(SyncReport {
            mode: "full",
            downloaded,
            deleted,
            renamed: 0,
            version,
        })
    }

    /// Applies a change list in the order its lines need (see docs/api.md, "Watches and change tokens": moved
    /// origins aside deepest first, deletions, moves and new directories in path order, then
    /// downloads). `None` when the mirror lacks a moved origin, so only a full copy helps.
    async fn apply(
        &self,
        root: &Path,
        local: &Path,
        changes: Vec<PathChange>,
        version: String,
    ) -> Result<Option<SyncReport>, SdkError> {
        let plan = Plan::of(root, changes);
        let stage = local.join(format!(".fsd-sync-{}.stage", std::process::id()));
        remove(&stage)?;
        std::fs::create_dir(&stage)?;
        // 1. Every moved origin aside, deepest first, so moving a directory leaves behind
        //    what moved out of it.
        let mut moves = plan.moves;
        moves.sort_by_key(|(from, _)| std::cmp::Reverse(from.components().count()));
        let mut staged: Vec<(PathBuf, PathBuf, PathBuf)> = Vec::new();
        for (index, (from, to)) in moves.into_iter().enumerate() {
            let aside = stage.join(index.to_string());
            match std::fs::rename(local.join(&from), &aside) {
                Ok(()) => staged.push((from, to, aside)),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    remove(&stage)?;
                    return Ok(None);
                }
                Err(err) => return Err(err.into()),
            }
        }
        // 2. Deletions name paths of the old tree; one under a moved origin is where that
        //    origin now waits.
        for gone in &plan.deletes {
            let target = staged
                .iter()
                .filter(|(from, _, _)| gone.starts_with(from) && gone != from)
                .max_by_key(|(from, _, _)| from.components().count())
                .and_then(|(from, _, aside)| gone.strip_prefix(from).ok().map(|r| aside.join(r)))
                .unwrap_or_else(|| local.join(gone));
            remove(&target)?;
        }
        // 3. Moves and new directories, parents first, each replacing what is there.
        let mut placed: Vec<(PathBuf, Option<PathBuf>)> = staged
            .into_iter()
            .map(|(_, to, aside)| (to, Some(aside)))
            .chain(plan.new_dirs.into_iter().map(|dir| (dir, None)))
            .collect();
        placed.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, aside) in &placed {
            let target = local.join(path);
            remove(&target)?;
            match aside {
                Some(aside) => {
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::rename(aside, &target)?;
                }
                None => std::fs::create_dir_all(&target)?,
            }
        }
        remove(&stage)?;
        // 4. Directories that stayed, and file contents.
        for dir in &plan.kept_dirs {
            ensure_dir(&local.join(dir))?;
        }
        let downloaded = self.download_all(root, local, plan.downloads).await?;
        Ok(Some(SyncReport {
            mode: "incremental",
            downloaded,
            deleted: plan.deletes.len(),
            renamed: placed.iter().filter(|(_, aside)| aside.is_some()).count(),
            version,
        }))
    }

    /// Downloads files, several at a time; a file that vanished or became a directory
    /// meanwhile is skipped (the next sync brings that change). A directory in the way is
    /// replaced.
    async fn download_all(
        &self,
        root: &Path,
        local: &Path,
        files: Vec<PathBuf>,
    ) -> Result<usize, SdkError> {
        let results: Vec<Result<bool, SdkError>> = stream::iter(files)
            .map(|relative| async move {
                let target = local.join(&relative);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                if target.is_dir() {
                    std::fs::remove_dir_all(&target)?;
                }
                let remote = root.join(&relative).display().to_string();
                match self.download_to(&remote, &target).await {
                    Ok(_) => Ok(true),
                    Err(err)
                        if matches!(
                            err.code(),
                            Some(
                                fsd_api::ErrorCode::FileNotFound | fsd_api::ErrorCode::IsDirectory
                            )
                        ) =>
                    {
                        Ok(false)
                    }
                    Err(err) => Err(err),
                }
            })
            .buffer_unordered(PARALLEL_DOWNLOADS)
            .collect()
            .await;
        let mut count = 0;
        for result in results {
            if result? {
                count += 1;
            }
        }
        Ok(count)
    }
}

/// A change list sorted into the steps that apply it (paths relative to the mirror).
#[derive(Default)]
struct Plan {
    /// (origin in the old tree, where it is now).
    moves: Vec<(PathBuf, PathBuf)>,
    deletes: Vec<PathBuf>,
    /// New directories: whatever is at the path is replaced.
    new_dirs: Vec<PathBuf>,
    /// Directories that were there and still are.
    kept_dirs: Vec<PathBuf>,
    downloads: Vec<PathBuf>,
}

impl Plan {
    fn of(root: &Path, changes: Vec<PathChange>) -> Self {
        let mut plan = Plan::default();
        for change in changes {
            let Some(path) = relative_to(root, &change.path) else {
                continue;
            };
            if skipped(&path) {
                continue;
            }
            match change.change.as_str() {
                "deleted" => plan.deletes.push(path),
                "renamed" => {
                    let from = change.from.as_deref().and_then(|f| relative_to(root, f));
                    match from.filter(|f| !skipped(f)) {
                        Some(from) => plan.moves.push((from, path)),
                        // Moved in from what the mirror leaves out: new here.
                        None if change.is_directory => plan.new_dirs.push(path),
                        None => plan.downloads.push(path),
                    }
                }
                "created" if change.is_directory => plan.new_dirs.push(path),
                _ if change.is_directory => plan.kept_dirs.push(path),
                _ => plan.downloads.push(path),
            }
        }
        plan
    }
}

fn relative_to(root: &Path, path: &str) -> Option<PathBuf> {
    Path::new(path)
        .strip_prefix(root)
        .ok()
        .map(Path::to_path_buf)
        .filter(|p| !p.as_os_str().is_empty())
}

fn skipped(relative: &Path) -> bool {
    relative
        .components()
        .any(|c| SKIPPED.iter().any(|s| c.as_os_str() == *s))
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

/// Makes `path` a directory, replacing a file (or link) that is there.
fn ensure_dir(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => {
            std::fs::remove_file(path)?;
            std::fs::create_dir_all(path)
        }
        Err(_) => std::fs::create_dir_all(path),
    }
}

/// Removes local entries the remote no longer has; returns how many.
fn remove_unwanted(local: &Path, wanted: &HashSet<PathBuf>) -> std::io::Result<usize> {
    let mut removed = 0;
    let mut pending = vec![local.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let relative = path.strip_prefix(local).unwrap_or(&path).to_path_buf();
            if skipped(&relative) {
                continue;
            }
            if !wanted.contains(&relative) {
                remove(&path)?;
                removed += 1;
            } else if path.is_dir() {
                pending.push(path);
            }
        }
    }
    Ok(removed)
}
