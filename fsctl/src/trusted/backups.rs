//! Backups on the trusted side: presigned multipart uploads, `backups/<id>/meta.json`, TTLs
//! with the reference's 60 s buffer, layer chains, and restores through presigned GETs.

use std::sync::Arc;

use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use chrono::Utc;
use fsd_api::ErrorCode;
use fsd_api::backup::{
    ArchiveSource, BackupEvent, Compression, CreateBackupRequest, DownloadBackupRequest,
    ForkRequest, ForkResponse, ProcessLeftBehind, SnapshotBase, UploadBackupRequest, UploadTarget,
};
use futures_util::StreamExt;
use serde_json::json;

use super::access::BucketAccess;
use fsd_control::backup::{
    self, ARCHIVE_DIR, MIN_PART_SIZE, PART_URLS, data_key, incremental_parent, index_key, meta_key,
};
pub use fsd_control::backup::{BackupMeta, DEFAULT_TTL_SECS, SnapshotChanges};
use fsd_control::retention::{self, Decision, SnapshotPolicy};
use fsd_sdk::{Sandbox, SdkError};

/// Longest layer chain followed.
const MAX_CHAIN: usize = 64;
/// meta.json documents read at once when listing.
const META_READS: usize = 16;

/// What `create_backup` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryBackup {
    pub id: String,
    pub dir: String,
    pub size_bytes: u64,
    /// The snapshot this one stacks on (an incremental snapshot, or a restored
    /// directory's layer).
    pub parent: Option<String>,
    /// An incremental snapshot's depth in its chain.
    pub depth: Option<u8>,
    /// An incremental snapshot's differences from its parent.
    pub changes: Option<SnapshotChanges>,
    /// How an incremental snapshot knew what changed: `changeToken` (the parent's token)
    /// or `index` (the whole tree compared with the parent's index).
    pub compared_by: Option<String>,
}

/// Progress callback: `(phase, bytes done, bytes total)`.
pub type ProgressFn = Arc<dyn Fn(&str, u64, u64) + Send + Sync>;

/// Options of `create_backup`.
#[derive(Clone, Default)]
pub struct BackupOptions {
    pub name: Option<String>,
    /// Seconds; default three days.
    pub ttl: Option<u64>,
    pub excludes: Vec<String>,
    pub gitignore: bool,
    /// `zstd` (default), `lz4`, `gzip`.
    pub compression: Option<String>,
    /// Store only what changed since `dir` was restored from a backup (a layer).
    pub layer: bool,
    /// A full snapshot even when an incremental one could be taken.
    pub full: bool,
    /// A fork point to send to other sandboxes: `dir` is frozen as a fork freezes it and
    /// what it froze archived whole (see [`Backups::branch_from`]).
    pub fork: bool,
    pub progress: Option<ProgressFn>,
}

/// One backup being uploaded: its id, the multipart upload, its TTL and the snapshot it
/// builds on.
#[derive(Clone, Copy)]
struct Upload<'a> {
    id: &'a str,
    upload_id: &'a str,
    ttl: u64,
    parent: Option<&'a BackupMeta>,
}

/// Backups of one sandbox into one bucket.
/// A snapshot restored onto a directory.
#[derive(Debug, Clone)]
pub struct Restored {
    /// The snapshot and those it builds on, newest first.
    pub chain: Vec<BackupMeta>,
    /// The processes the restore left in the directory it hid (see
    /// [`fsd_api::backup::RestoreBackupResponse::processes_left_behind`]).
    pub processes_left_behind: Vec<ProcessLeftBehind>,
}

pub struct Backups {
    pub(super) store: BucketAccess,
    pub(super) s3: aws_sdk_s3::Client,
}

impl Backups {
    pub fn new(store: BucketAccess) -> Backups {
        let s3 = store.client();
        Backups { store, s3 }
    }

    /// Archives `dir` in the sandbox and uploads it through presigned part URLs; writes
    /// meta.json only once the object is complete and its size checked. On failure the
    /// multipart upload is aborted and nothing is left that a restore would accept.
    ///
    /// Unless `full` or `layer` is asked, the snapshot is incremental when the store holds
    /// a usable parent for `dir` ([`fsd_control::backup::incremental_parent`]): the daemon
    /// compares the tree with the parent's index and archives only what differs.
    pub async fn create_backup(
        &self,
        sandbox: &Sandbox,
        dir: &str,
        options: BackupOptions,
    ) -> Result<DirectoryBackup, SdkError> {
        validate_name(options.name.as_deref())?;
        let ttl = options.ttl.unwrap_or(DEFAULT_TTL_SECS);
        if ttl == 0 {
            return Err(invalid("ttl", "must be greater than 0"));
        }
        let parent = if options.full || options.layer || options.fork {
            None
        } else {
            let snapshots = self.list_backups().await?;
            incremental_parent(&snapshots, dir, Utc::now()).cloned()
        };
        let id = uuid::Uuid::new_v4().to_string();
        let key = data_key(&id);
        let upload = self
            .s3
            .create_multipart_upload()
            .bucket(&self.store.bucket)
            .key(&key)
            .content_type("application/octet-stream")
            .send()
            .await
            .map_err(storage)?;
        let upload_id = upload
            .upload_id()
            .ok_or_else(|| SdkError::Storage("no upload id".into()))?
            .to_string();
        let upload = Upload {
            id: &id,
            upload_id: &upload_id,
            ttl,
            parent: parent.as_ref(),
        };
        let result = self
            .upload_and_complete(sandbox, dir, &upload, &options)
            .await;
        if result.is_err() {
            let _ = self
                .s3
                .abort_multipart_upload()
                .bucket(&self.store.bucket)
                .key(&key)
                .upload_id(&upload_id)
                .send()
                .await;
            for key in [key, index_key(&id)] {
                let _ = self
                    .s3
                    .delete_object()
                    .bucket(&self.store.bucket)
                    .key(key)
                    .send()
                    .await;
            }
        }
        result
    }

    async fn upload_and_complete(
        &self,
        sandbox: &Sandbox,
        dir: &str,
        upload: &Upload<'_>,
        options: &BackupOptions,
    ) -> Result<DirectoryBackup, SdkError> {
        let Upload {
            id,
            upload_id,
            ttl,
            parent,
        } = *upload;
        let key = data_key(id);
        let base = match parent {
            Some(parent) => Some(SnapshotBase {
                index_url: self
                    .store
                    .presign("GET", &index_key(&parent.id), &[])
                    .map_err(storage)?,
                depth: parent.depth.unwrap_or(0),
                token: parent.token.clone(),
            }),
            None => None,
        };
        let index_url = self
            .store
            .presign("PUT", &index_key(id), &[])
            .map_err(storage)?;
        let mut part_urls = Vec::with_capacity(PART_URLS);
        for number in 1..=PART_URLS {
            let number = number.to_string();
            let query = [("partNumber", number.as_str()), ("uploadId", upload_id)];
            let presigned = self.store.presign("PUT", &key, &query).map_err(storage)?;
            part_urls.push(presigned);
        }
        let request = UploadBackupRequest {
            create: CreateBackupRequest {
                dir: dir.to_string(),
                archive_path: format!("{ARCHIVE_DIR}/{id}.sqsh"),
                gitignore: Some(options.gitignore),
                excludes: Some(options.excludes.clone()),
                compression: options.compression.clone().map(|format| Compression {
                    format: Some(format),
                    threads: None,
                }),
                layer: Some(options.layer),
                base,
                fork: options.fork.then_some(true),
                session_id: None,
            },
            upload: UploadTarget {
                url: None,
                part_urls: Some(part_urls),
                min_part_size: Some(MIN_PART_SIZE),
                index_url: Some(index_url),
            },
        };
        let events = sandbox.upload_backup(&request).await?;
        let complete = follow(events, options.progress.as_ref()).await?;
        let Some(BackupEvent::Complete {
            archive: Some(archive),
            parts,
            ..
        }) = complete
        else {
            return Err(SdkError::Storage(
                "the upload stream ended without a result".into(),
            ));
        };
        let completed: Vec<CompletedPart> = parts
            .iter()
            .map(|p| {
                CompletedPart::builder()
                    .part_number(p.part_number as i32)
                    .e_tag(&p.etag)
                    .build()
            })
            .collect();
        self.s3
            .complete_multipart_upload()
            .bucket(&self.store.bucket)
            .key(&key)
            .upload_id(upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(completed))
                    .build(),
            )
            .send()
            .await
            .map_err(storage)?;
        let head = self
            .s3
            .head_object()
            .bucket(&self.store.bucket)
            .key(&key)
            .send()
            .await
            .map_err(storage)?;
        let stored = head.content_length().unwrap_or(-1);
        if stored != archive.size_bytes as i64 {
            return Err(SdkError::Storage(format!(
                "stored object has {stored} bytes, the archive {}",
                archive.size_bytes
            )));
        }
        let parent = match parent {
            Some(parent) => Some(parent.id.clone()),
            None => archive
                .parent_archive_paths
                .first()
                .map(|path| archive_id(path)),
        };
        let changes = archive.changes;
        let meta = BackupMeta {
            id: id.to_string(),
            dir: dir.to_string(),
            name: options.name.clone(),
            size_bytes: archive.size_bytes,
            ttl,
            created_at: Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            sha256: archive.sha256.clone(),
            parent: parent.clone(),
            depth: archive.depth,
            indexed: archive.index_path.is_some(),
            changes,
            excludes: options.excludes.clone(),
            gitignore: options.gitignore,
            token: archive.token.clone(),
        };
        let body =
            serde_json::to_vec_pretty(&meta).map_err(|e| SdkError::Storage(e.to_string()))?;
        self.s3
            .put_object()
            .bucket(&self.store.bucket)
            .key(meta_key(id))
            .content_type("application/json")
            .body(body.into())
            .send()
            .await
            .map_err(storage)?;
        Ok(DirectoryBackup {
            id: id.to_string(),
            dir: dir.to_string(),
            size_bytes: archive.size_bytes,
            parent,
            depth: archive.depth,
            changes,
            compared_by: archive.compared_by.clone(),
        })
    }

    /// Reads a backup's metadata; BACKUP_NOT_FOUND when there is none.
    pub async fn meta(&self, id: &str) -> Result<BackupMeta, SdkError> {
        let Some(bytes) = self.object(&meta_key(id)).await? else {
            return Err(SdkError::coded(
                ErrorCode::BackupNotFound,
                format!("backup {id} not found"),
                json!({ "backupId": id }),
            ));
        };
        serde_json::from_slice(&bytes)
            .map_err(|e| SdkError::Storage(format!("meta.json of {id}: {e}")))
    }

    /// The object at `key`, whole; `None` when there is none.
    pub(super) async fn object(&self, key: &str) -> Result<Option<bytes::Bytes>, SdkError> {
        let object = self
            .s3
            .get_object()
            .bucket(&self.store.bucket)
            .key(key)
            .send()
            .await;
        match object {
            Ok(object) => Ok(Some(
                object.body.collect().await.map_err(storage)?.into_bytes(),
            )),
            Err(error) if error.as_service_error().is_some_and(|e| e.is_no_such_key()) => Ok(None),
            Err(error) => Err(storage(error)),
        }
    }

    /// Backup `id` and the snapshots it stacks on, topmost first.
    pub async fn chain(&self, id: &str) -> Result<Vec<BackupMeta>, SdkError> {
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(invalid("id", "must be a UUID"));
        }
        let mut chain: Vec<BackupMeta> = Vec::new();
        let mut next = Some(id.to_string());
        while let Some(current) = next {
            if chain.len() >= MAX_CHAIN {
                return Err(invalid("id", "layer chain is too long"));
            }
            let meta = self.meta(&current).await?;
            next = meta.parent.clone();
            chain.push(meta);
        }
        Ok(chain)
    }

    /// Restores backup `id` onto `dir` (any allowed directory, not only the original):
    /// checks its TTL (60 s buffer; the snapshots below it in its chain are its data and
    /// restored with it past their own), presigns GETs, and lets the daemon
    /// fetch what it does not already hold and mount the chain copy-on-write.
    pub async fn restore_backup(
        &self,
        sandbox: &Sandbox,
        id: &str,
        dir: &str,
        progress: Option<ProgressFn>,
    ) -> Result<Restored, SdkError> {
        let (chain, archives) = self.chain_sources(id).await?;
        let request = DownloadBackupRequest {
            dir: dir.to_string(),
            archives,
            session_id: None,
        };
        let events = sandbox.download_backup(&request).await?;
        match follow(events, progress.as_ref()).await? {
            Some(BackupEvent::Complete {
                processes_left_behind,
                ..
            }) => Ok(Restored {
                chain,
                processes_left_behind,
            }),
            _ => Err(SdkError::Storage(
                "the restore stream ended without a result".into(),
            )),
        }
    }

    /// Brings snapshot `id`, made in another sandbox on a fork point `dir` sent from this
    /// one (`BackupOptions::fork`), back as branches of `dir` named `names` (`dir@NAME`;
    /// one named after the snapshot when none is given), to merge with
    /// `Sandbox::merge_branch` as any branch. The sandbox fetches only the archives above
    /// the fork point; the fork point itself is the tree it froze when it sent it.
    pub async fn branch_from(
        &self,
        sandbox: &Sandbox,
        id: &str,
        dir: &str,
        names: Vec<String>,
    ) -> Result<ForkResponse, SdkError> {
        let (_, archives) = self.chain_sources(id).await?;
        let names = if names.is_empty() {
            vec![id.chars().take(8).collect()]
        } else {
            names
        };
        sandbox
            .fork(&ForkRequest {
                dir: dir.to_string(),
                names: Some(names),
                count: None,
                from: Some(archives),
            })
            .await
    }

    /// Snapshot `id`'s chain, checked restorable (its TTL, with the 60 s buffer; those
    /// below it are its data and go with it past their own; every archive stored), and
    /// the presigned GETs of its archives, topmost first.
    async fn chain_sources(
        &self,
        id: &str,
    ) -> Result<(Vec<BackupMeta>, Vec<ArchiveSource>), SdkError> {
        let chain = self.chain(id).await?;
        // The TTL of the snapshot asked for; those below it are its data.
        if let Some(meta) = chain.first()
            && meta.expired(Utc::now())
        {
            let expired_at = meta
                .expires_at()
                .map(|t| t.to_rfc3339())
                .unwrap_or_default();
            return Err(SdkError::coded(
                ErrorCode::BackupExpired,
                format!("backup {id} expired at {expired_at}"),
                json!({ "backupId": id, "expiredAt": expired_at }),
            ));
        }
        let mut archives = Vec::with_capacity(chain.len());
        for meta in &chain {
            let key = data_key(&meta.id);
            if let Err(error) = self
                .s3
                .head_object()
                .bucket(&self.store.bucket)
                .key(&key)
                .send()
                .await
            {
                if error.as_service_error().is_some_and(|e| e.is_not_found()) {
                    return Err(SdkError::coded(
                        ErrorCode::BackupNotFound,
                        format!("archive of backup {} not found", meta.id),
                        json!({ "backupId": meta.id }),
                    ));
                }
                return Err(storage(error));
            }
            let url = self.store.presign("GET", &key, &[]).map_err(storage)?;
            archives.push(ArchiveSource {
                archive_path: format!("{ARCHIVE_DIR}/{}.sqsh", meta.id),
                url,
                size_bytes: meta.size_bytes,
                sha256: meta.sha256.clone(),
            });
        }
        Ok((chain, archives))
    }

    /// Every backup with a meta.json, newest first.
    pub async fn list_backups(&self) -> Result<Vec<BackupMeta>, SdkError> {
        let mut ids = Vec::new();
        let mut pages = self
            .s3
            .list_objects_v2()
            .bucket(&self.store.bucket)
            .prefix("backups/")
            .delimiter("/")
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(storage)?;
            ids.extend(page.common_prefixes().iter().filter_map(|prefix| {
                prefix
                    .prefix()
                    .and_then(|p| p.strip_prefix("backups/"))
                    .map(|p| p.trim_end_matches('/').to_string())
            }));
        }
        // Every incremental snapshot lists the store to find its parent: the meta documents
        // are read META_READS at a time, not one after another.
        let mut reads = futures_util::stream::iter(ids)
            .map(|id| async move { self.meta(&id).await })
            .buffer_unordered(META_READS);
        let mut metas = Vec::new();
        while let Some(read) = reads.next().await {
            match read {
                Ok(meta) => metas.push(meta),
                Err(error) if error.code() == Some(&ErrorCode::BackupNotFound) => {} // incomplete
                Err(error) => return Err(error),
            }
        }
        // Newest first; equal times in the listing's order (by id), as before the reads
        // ran at once.
        metas.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(metas)
    }

    /// Applies a retention policy to the backups of `dir` (`fsd_control::retention`: restic's
    /// `forget` rules; a backup a kept layer stacks on is kept). Deletes what it removes
    /// unless `dry_run`; answers the decision with its reasons either way.
    pub async fn forget(
        &self,
        dir: &str,
        policy: &SnapshotPolicy,
        dry_run: bool,
    ) -> Result<Decision, SdkError> {
        let all = self.list_backups().await?;
        let snapshots = retention::snapshots_of(&all, dir);
        let decision = retention::apply(policy, &snapshots, chrono::Utc::now());
        if !dry_run {
            // What is built on a removed snapshot is removed too (a kept one keeps its
            // parents): each goes before its parent.
            for id in backup::deletion_order(&all, &decision.remove) {
                self.remove_backup(&id).await?;
            }
        }
        Ok(decision)
    }

    /// Deletes a backup's archive, index and metadata. Refused with
    /// `BACKUP_HAS_DEPENDENTS` (naming them, in `context.dependents`) while other snapshots
    /// are built on it: they would stop restoring.
    pub async fn delete_backup(&self, id: &str) -> Result<(), SdkError> {
        self.meta(id).await?;
        let all = self.list_backups().await?;
        let dependents = backup::dependents(&all, id);
        if !dependents.is_empty() {
            let ids: Vec<&str> = dependents.iter().map(|meta| meta.id.as_str()).collect();
            return Err(SdkError::coded(
                ErrorCode::BackupHasDependents,
                backup::dependents_refusal(id, &dependents),
                json!({ "id": id, "dependents": ids }),
            ));
        }
        self.remove_backup(id).await
    }

    /// Removes a backup's objects, the meta document first (a backup without it is none).
    async fn remove_backup(&self, id: &str) -> Result<(), SdkError> {
        for key in [meta_key(id), data_key(id), index_key(id)] {
            self.s3
                .delete_object()
                .bucket(&self.store.bucket)
                .key(key)
                .send()
                .await
                .map_err(storage)?;
        }
        Ok(())
    }
}

/// Reads an upload or download stream to its end: progress goes to `progress`, an `error`
/// event becomes the daemon's coded error, and the `complete` event is returned.
async fn follow(
    mut events: impl futures_util::Stream<Item = Result<BackupEvent, SdkError>> + Unpin,
    progress: Option<&ProgressFn>,
) -> Result<Option<BackupEvent>, SdkError> {
    while let Some(event) = events.next().await {
        match event? {
            BackupEvent::Progress {
                phase,
                bytes_done,
                bytes_total,
            } => {
                if let Some(progress) = progress {
                    progress(&phase, bytes_done, bytes_total);
                }
            }
            BackupEvent::Error {
                code,
                message,
                http_status,
            } => {
                return Err(SdkError::coded(
                    ErrorCode::from_wire(&code),
                    message,
                    json!({ "httpStatus": http_status }),
                ));
            }
            complete @ BackupEvent::Complete { .. } => return Ok(Some(complete)),
        }
    }
    Ok(None)
}

/// `/var/backups/<id>.sqsh` → `<id>`.
fn archive_id(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.strip_suffix(".sqsh").unwrap_or(name).to_string()
}

fn validate_name(name: Option<&str>) -> Result<(), SdkError> {
    match name {
        Some(name) if name.chars().count() > 256 => {
            Err(invalid("name", "must be at most 256 characters"))
        }
        Some(name) if name.chars().any(char::is_control) => {
            Err(invalid("name", "must not contain control characters"))
        }
        _ => Ok(()),
    }
}

pub(super) fn invalid(field: &str, message: &str) -> SdkError {
    SdkError::coded(
        ErrorCode::InvalidBackupConfig,
        format!("{field}: {message}"),
        json!({ "field": field }),
    )
}

pub(super) fn storage(error: impl std::fmt::Display + std::fmt::Debug) -> SdkError {
    SdkError::Storage(
        format!("{error:?}")
            .chars()
            .take(600)
            .collect::<String>()
            .replace('\n', " "),
    )
    .with_display(error)
}

trait WithDisplay {
    fn with_display(self, error: impl std::fmt::Display) -> Self;
}

impl WithDisplay for SdkError {
    fn with_display(self, error: impl std::fmt::Display) -> Self {
        match self {
            SdkError::Storage(debug) => SdkError::Storage(format!("{error}: {debug}")),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_ids_come_from_file_names() {
        assert_eq!(archive_id("/var/backups/abc.sqsh"), "abc");
    }
}
