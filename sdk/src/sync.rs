//! `sync`: keep a local directory a byte-identical mirror of a sandbox subtree, incrementally.
//!
//! The first call (no version) copies everything and takes a change token first, so nothing
//! that happens during the copy is missed. Later calls ask what changed since the token and
//! apply just that (downloads through temp files, deletes, renames); a `resync` answer falls
//! back to a full copy. The paths the watch never reports (.git, node_modules, .DS_Store)
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
                    return self.apply(&root, local, changes, answer.version).await;
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
                FileType::Directory => std::fs::create_dir_all(local.join(&relative))?,
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

    async fn apply(
        &self,
        root: &Path,
        local: &Path,
        changes: Vec<PathChange>,
        version: String,
    ) -> Result<SyncReport, SdkError> {
        let (mut deleted, mut renamed) = (0, 0);
        let mut downloads = Vec::new();
        for change in changes {
            let Some(relative) = relative_to(root, &change.path) else {
                continue;
            };
            if skipped(&relative) {
                continue;
            }
            let target = local.join(&relative);
            match change.change.as_str() {
                "deleted" => {
                    remove(&target)?;
                    deleted += 1;
                }
                "renamed" => {
                    let from = change
                        .from
                        .as_deref()
                        .and_then(|f| relative_to(root, f))
                        .map(|f| local.join(f));
                    match from.filter(|f| f.exists()) {
                        Some(from) => {
                            if let Some(parent) = target.parent() {
                                std::fs::create_dir_all(parent)?;
                            }
                            std::fs::rename(from, &target)?;
                            renamed += 1;
                        }
                        None if change.is_directory => std::fs::create_dir_all(&target)?,
                        None => downloads.push(relative),
                    }
                }
                _ if change.is_directory => std::fs::create_dir_all(&target)?,
                _ => downloads.push(relative),
            }
        }
        let downloaded = self.download_all(root, local, downloads).await?;
        Ok(SyncReport {
            mode: "incremental",
            downloaded,
            deleted,
            renamed,
            version,
        })
    }

    /// Downloads files, several at a time; a file that vanished meanwhile is skipped (its
    /// deletion comes with the next sync).
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
                let remote = root.join(&relative).display().to_string();
                match self.download_to(&remote, &target).await {
                    Ok(_) => Ok(true),
                    Err(err) if err.code() == Some(&fsd_api::ErrorCode::FileNotFound) => Ok(false),
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
