//! History without restoring: a directory's snapshots as a timeline, a snapshot's tree and
//! what differs between two snapshots (or a snapshot and the live tree), read from the
//! stored indexes; one file read from the archive that holds it through ranged GETs,
//! without the daemon; paths brought back into a live directory by the daemon, which reads
//! the archives in place the same way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use fsd_api::ErrorCode;
use fsd_api::backup::{
    ChainArchive, ExtractBackupRequest, ExtractBackupResponse, TreeIndexRequest,
};
use fsd_backup::incremental::{self, Difference};
use fsd_backup::index::{Index, IndexEntry, Kind};
use fsd_backup::stored::{ChainReader, ChainSource};
use fsd_control::backup::{data_key, index_key};
use fsd_sdk::{Sandbox, SdkError};
use serde_json::json;

use super::backups::{BackupMeta, Backups, invalid, storage};

/// Largest index read (about 3 million paths).
const MAX_INDEX_BYTES: usize = 256 * 1024 * 1024;

impl Backups {
    /// The snapshots of `dir` (every directory's when `None`), newest first.
    pub async fn log(&self, dir: Option<&str>) -> Result<Vec<BackupMeta>, SdkError> {
        let mut metas = self.list_backups().await?;
        if let Some(dir) = dir {
            metas.retain(|meta| meta.dir == dir);
        }
        Ok(metas)
    }

    /// The stored index of snapshot `id`: its whole tree.
    pub async fn index(&self, id: &str) -> Result<Index, SdkError> {
        let meta = self.meta(id).await?;
        if !meta.indexed {
            return Err(no_index(id));
        }
        let Some(bytes) = self.object(&index_key(id)).await? else {
            return Err(no_index(id));
        };
        if bytes.len() > MAX_INDEX_BYTES {
            return Err(SdkError::Storage(format!("the index of {id} is too large")));
        }
        Index::decode(&bytes).map_err(|e| SdkError::Storage(format!("{id}: {e}")))
    }

    /// What snapshot `id` held at `path` and under it (everything when `None`), in tree
    /// order; BACKUP_NOT_FOUND naming the path when it held nothing there.
    pub async fn list_snapshot(
        &self,
        id: &str,
        path: Option<&str>,
    ) -> Result<Vec<IndexEntry>, SdkError> {
        let index = self.index(id).await?;
        let Some(path) = path.map(relative).filter(|p| !p.as_os_str().is_empty()) else {
            return Ok(index.entries);
        };
        let entries: Vec<IndexEntry> = index
            .entries
            .into_iter()
            .filter(|entry| entry.path.starts_with(&path))
            .collect();
        if entries.is_empty() {
            return Err(not_in_snapshot(id, &path));
        }
        Ok(entries)
    }

    /// What differs from snapshot `from` to snapshot `to`, or to the live directory the
    /// snapshot was taken of when `to` is `None` (the daemon indexes it the way the snapshot
    /// was taken: same excludes, same gitignore rule).
    pub async fn diff(
        &self,
        from: &str,
        to: Option<&str>,
        sandbox: &Sandbox,
    ) -> Result<Vec<Difference>, SdkError> {
        let before = self.index(from).await?;
        let after = match to {
            Some(to) => self.index(to).await?,
            None => {
                let meta = self.meta(from).await?;
                let request = TreeIndexRequest {
                    dir: meta.dir.clone(),
                    excludes: Some(meta.excludes.clone()),
                    gitignore: Some(meta.gitignore),
                };
                let bytes = sandbox.tree_index(&request).await?;
                Index::decode(&bytes).map_err(|e| SdkError::Storage(e.to_string()))?
            }
        };
        Ok(incremental::difference(&before, &after))
    }

    /// The bytes of the file at `path` in snapshot `id`, read from the archive of its chain
    /// that holds it through ranged GETs: the file's blocks and fragment where the index
    /// recorded them, else the archive's tables first.
    pub async fn read_file(&self, id: &str, path: &str) -> Result<Vec<u8>, SdkError> {
        let chain = self.chain(id).await?;
        let index = self.index(id).await?;
        let path = relative(path);
        let entry = index
            .entries
            .iter()
            .find(|entry| entry.path == path)
            .ok_or_else(|| not_in_snapshot(id, &path))?;
        if entry.kind != Kind::File {
            return Err(invalid(
                "path",
                &format!("is a {}, not a file", entry.kind.as_str()),
            ));
        }
        let holder = chain
            .iter()
            .find(|meta| meta.depth.unwrap_or(0) == entry.layer)
            .ok_or_else(|| {
                SdkError::Storage(format!("no snapshot at depth {} in the chain", entry.layer))
            })?;
        let source = ChainSource {
            url: self
                .store
                .presign("GET", &data_key(&holder.id), &[])
                .map_err(storage)?,
            size: holder.size_bytes,
        };
        let sources = HashMap::from([(entry.layer, source)]);
        let mut reader = ChainReader::new(
            sources,
            reqwest::Client::new(),
            tokio::runtime::Handle::current(),
        );
        let entry = entry.clone();
        tokio::task::spawn_blocking(move || {
            let mut bytes = Vec::new();
            reader.copy_file(&entry, &mut bytes).map(|_| bytes)
        })
        .await
        .map_err(|e| SdkError::Storage(e.to_string()))?
        .map_err(|e| SdkError::Storage(e.to_string()))
    }

    /// Brings `paths` (files, or directories with what they held) of snapshot `id` back
    /// into the live directory `dir`, written as API writes are; the daemon reads only the
    /// parts of the archives that hold them. A whole-directory restore is `restore_backup`.
    pub async fn restore_paths(
        &self,
        sandbox: &Sandbox,
        id: &str,
        dir: &str,
        paths: &[String],
    ) -> Result<ExtractBackupResponse, SdkError> {
        let chain = self.chain(id).await?;
        if !chain[0].indexed {
            return Err(no_index(id));
        }
        let mut archives = Vec::with_capacity(chain.len());
        for meta in &chain {
            archives.push(ChainArchive {
                depth: meta.depth.unwrap_or(0),
                url: self
                    .store
                    .presign("GET", &data_key(&meta.id), &[])
                    .map_err(storage)?,
                size_bytes: meta.size_bytes,
            });
        }
        let request = ExtractBackupRequest {
            dir: dir.to_string(),
            index_url: self
                .store
                .presign("GET", &index_key(id), &[])
                .map_err(storage)?,
            archives,
            paths: paths.to_vec(),
            session_id: None,
        };
        sandbox.extract_backup(&request).await
    }
}

/// A path as given on the command line, relative to the snapshot's directory.
fn relative(path: &str) -> PathBuf {
    Path::new(path.trim_start_matches("./").trim_matches('/')).to_path_buf()
}

fn no_index(id: &str) -> SdkError {
    SdkError::coded(
        ErrorCode::BackupNotFound,
        format!("backup {id} has no stored index (taken before indexes were kept)"),
        json!({ "backupId": id }),
    )
}

fn not_in_snapshot(id: &str, path: &Path) -> SdkError {
    SdkError::coded(
        ErrorCode::FileNotFound,
        format!("{} is not in backup {id}", path.display()),
        json!({ "backupId": id, "path": path }),
    )
}

/// What the daemon's differences name, for callers that print them.
pub fn describe(difference: &Difference) -> (String, Option<String>) {
    match difference {
        Difference::Renamed { from, to } => {
            (to.display().to_string(), Some(from.display().to_string()))
        }
        other => (other.path().display().to_string(), None),
    }
}
