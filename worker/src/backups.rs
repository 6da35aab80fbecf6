//! Backups and the time machine in R2 from the object, as `fsctl`'s backups do them:
//!
//! - `POST /backups {dir, name?, ttl?, excludes?, gitignore?, full?}`: a snapshot. The object
//!   starts a multipart upload and presigns its part URLs, the daemon makes the archive and
//!   PUTs its parts (as many as it needs) and the index; the object completes the upload with
//!   their ETags, checks the stored size, and writes `backups/<id>/meta.json`. Unless `full`,
//!   it builds on the newest usable snapshot of `dir` (`incremental_parent`): the daemon gets
//!   the parent's index and change token and archives only what differs.
//! - `GET /backups[?dir=D]`: the snapshots, newest first (the time machine's log).
//! - `POST /restore {id, dir, paths?}`: the snapshot's chain, its TTL checked; the whole
//!   directory is mounted by the daemon from the chain's archives, or with `paths` only those
//!   paths are written back, read in place from the stored archives (no mount needed).
//! - `POST /backups/forget {dir, policy, dryRun?}` applies a retention policy
//!   (`fsd_control::retention`, restic's meanings; what a kept snapshot stacks on is kept);
//!   `DELETE /backups/<id>` removes one.
//!
//! The daemon answers uploads and downloads with a progress stream, which the object reads
//! to its last event. Keys, sizes, the meta document, the listing and multipart documents,
//! the TTL and chain rules are `fsd_control`'s, the signing `fsd_s3::sign`'s (no runtime
//! needed), R2's S3 keys Worker secrets.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use fsd_api::backup::{
    ArchiveSource, BackupEvent, ChainArchive, CreateBackupRequest, DownloadBackupRequest,
    ExtractBackupRequest, SnapshotBase, UploadBackupRequest, UploadTarget,
};
use fsd_control::backup::{
    self, BackupMeta, DEFAULT_TTL_SECS, MIN_PART_SIZE, PART_URLS, archive_path,
    complete_multipart_body, data_key, incremental_parent, index_key, last_event_data,
    listed_backups, meta_key, upload_id,
};
use fsd_control::retention::{self, Decision, SnapshotPolicy};
use fsd_s3::Upstream;
use fsd_s3::sign::{object_url, presign, sign_headers_at};
use serde::Deserialize;
use worker::{Date, Env, Fetch, Headers, Method, Request, RequestInit, Response, Result};

use crate::daemon::Daemon;
use crate::r2::Missing;
use crate::wire::error;

/// How long presigned URLs stay valid, as `fsctl`'s.
const PRESIGN_EXPIRY: Duration = Duration::from_secs(3600);
/// Longest chain followed (chains end at depth 16; layers of restores may add some).
const MAX_CHAIN: usize = 64;
/// meta.json documents read at once when listing.
const META_READS: usize = 16;

/// An answer already made (a refusal, a storage failure) in place of a result.
type Answered<T> = std::result::Result<T, Response>;

/// The bucket backups go to (the `R2_BUCKET` var) and R2's keys for it.
pub struct Bucket {
    upstream: Upstream,
    name: String,
}

impl Bucket {
    pub fn from_env(env: &Env) -> std::result::Result<Bucket, Missing> {
        Ok(Bucket {
            upstream: crate::r2::upstream(env)?,
            name: crate::r2::bucket(env)?,
        })
    }

    /// A presigned URL for `method` on `key` (with `query`), signed at the Workers clock's
    /// time.
    fn presign(&self, method: &str, key: &str, query: &[(&str, &str)]) -> Result<String> {
        let url = object_url(&self.upstream.endpoint, &self.name, key, query);
        presign(
            &self.upstream,
            method,
            &url,
            PRESIGN_EXPIRY,
            crate::r2::now(),
        )
        .map_err(worker::Error::RustError)
    }

    /// A request signed in its headers, for what the object does itself.
    async fn send(
        &self,
        method: Method,
        key: &str,
        query: &[(&str, &str)],
        body: Option<String>,
    ) -> Result<Response> {
        let url = object_url(&self.upstream.endpoint, &self.name, key, query);
        let signed = sign_headers_at(&self.upstream, method.as_ref(), &url, &[], crate::r2::now())
            .map_err(worker::Error::RustError)?;
        let headers = Headers::new();
        for (name, value) in &signed {
            headers.set(name, value)?;
        }
        let mut init = RequestInit::new();
        init.with_method(method).with_headers(headers);
        if let Some(body) = body {
            init.with_body(Some(body.into()));
        }
        Fetch::Request(Request::new_with_init(&url, &init)?)
            .send()
            .await
    }

    /// Gives up a multipart upload (its parts are deleted); best effort.
    async fn abort(&self, key: &str, upload: &str) {
        let _ = self
            .send(Method::Delete, key, &[("uploadId", upload)], None)
            .await;
    }

    /// Backup `id`'s meta.json; `None` when there is none.
    async fn meta(&self, id: &str) -> Result<Answered<Option<BackupMeta>>> {
        let mut found = self.send(Method::Get, &meta_key(id), &[], None).await?;
        match found.status_code() {
            200 => Ok(Ok(found.json().await.ok())),
            404 => Ok(Ok(None)),
            status => Ok(Err(storage_error(status, "reading a meta.json")?)),
        }
    }

    /// Every backup with a meta.json, newest first (equal times by id).
    async fn metas(&self) -> Result<Answered<Vec<BackupMeta>>> {
        let mut ids = Vec::new();
        let mut continuation: Option<String> = None;
        loop {
            let mut query = vec![
                ("list-type", "2"),
                ("prefix", "backups/"),
                ("delimiter", "/"),
            ];
            if let Some(token) = &continuation {
                query.push(("continuation-token", token));
            }
            let mut page = self.send(Method::Get, "", &query, None).await?;
            if page.status_code() != 200 {
                return Ok(Err(storage_error(page.status_code(), "listing backups")?));
            }
            let (listed, next) = listed_backups(&page.text().await?);
            ids.extend(listed);
            match next {
                Some(next) => continuation = Some(next),
                None => break,
            }
        }
        let mut metas = Vec::with_capacity(ids.len());
        for batch in ids.chunks(META_READS) {
            let reads = futures_util::future::join_all(batch.iter().map(|id| self.meta(id))).await;
            for read in reads {
                match read? {
                    Ok(Some(meta)) => metas.push(meta),
                    Ok(None) => {} // an upload that never completed
                    Err(refused) => return Ok(Err(refused)),
                }
            }
        }
        metas.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(Ok(metas))
    }

    /// Backup `id` and the snapshots it stacks on, topmost first; BACKUP_NOT_FOUND when one
    /// of them is gone.
    async fn chain(&self, id: &str) -> Result<Answered<Vec<BackupMeta>>> {
        let mut chain: Vec<BackupMeta> = Vec::new();
        let mut next = Some(id.to_string());
        while let Some(current) = next {
            if chain.len() >= MAX_CHAIN {
                return Ok(Err(error(
                    400,
                    "INVALID_BACKUP_CONFIG",
                    "id: layer chain is too long",
                )?));
            }
            let meta = match self.meta(&current).await? {
                Ok(Some(meta)) => meta,
                Ok(None) => return Ok(Err(not_found(&current)?)),
                Err(refused) => return Ok(Err(refused)),
            };
            next = meta.parent.clone();
            chain.push(meta);
        }
        Ok(Ok(chain))
    }

    /// Deletes a backup's archive, index and meta.json.
    async fn delete(&self, id: &str) -> Result<Answered<()>> {
        for key in [meta_key(id), data_key(id), index_key(id)] {
            let answer = self.send(Method::Delete, &key, &[], None).await?;
            if !matches!(answer.status_code(), 200 | 204 | 404) {
                return Ok(Err(storage_error(
                    answer.status_code(),
                    "deleting a backup",
                )?));
            }
        }
        Ok(Ok(()))
    }
}

/// What a snapshot is asked to be.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotOptions {
    pub dir: String,
    #[serde(default)]
    pub name: Option<String>,
    /// Seconds; default three days.
    #[serde(default)]
    pub ttl: Option<u64>,
    #[serde(default)]
    pub excludes: Vec<String>,
    #[serde(default)]
    pub gitignore: bool,
    /// A full snapshot even when an incremental one could be taken.
    #[serde(default)]
    pub full: bool,
}

/// `POST /backups` → the new snapshot's meta (`{id, dir, sizeBytes, parent?, depth?,
/// changes?, …}`).
pub async fn create(env: &Env, daemon: &Daemon, mut request: Request) -> Result<Response> {
    let Ok(asked) = request.json::<SnapshotOptions>().await else {
        return error(400, "INVALID_BACKUP_CONFIG", "body: needs dir");
    };
    let bucket = match Bucket::from_env(env) {
        Ok(bucket) => bucket,
        Err(missing) => return missing.answer(),
    };
    match take(&bucket, daemon, &asked).await? {
        Ok(meta) => Response::from_json(&meta),
        Err(refused) => Ok(refused),
    }
}

/// Takes a snapshot (the route's and the schedule's): incremental over the newest usable
/// snapshot of the directory unless `full`; on failure the upload is aborted and nothing is
/// left that a restore would accept.
pub async fn take(
    bucket: &Bucket,
    daemon: &Daemon,
    asked: &SnapshotOptions,
) -> Result<Answered<BackupMeta>> {
    let ttl = asked.ttl.unwrap_or(DEFAULT_TTL_SECS);
    if ttl == 0 {
        return Ok(Err(error(
            400,
            "INVALID_BACKUP_CONFIG",
            "ttl: must be greater than 0",
        )?));
    }
    let parent = if asked.full {
        None
    } else {
        match bucket.metas().await? {
            Ok(metas) => incremental_parent(&metas, &asked.dir, now()).cloned(),
            Err(refused) => return Ok(Err(refused)),
        }
    };
    let id = crate::random::uuid()?;
    let key = data_key(&id);
    let mut started = bucket
        .send(Method::Post, &key, &[("uploads", "")], None)
        .await?;
    let started = started.text().await?;
    let Some(upload) = upload_id(&started) else {
        return Ok(Err(error(
            502,
            "BACKUP_CREATE_FAILED",
            "the bucket refused the upload",
        )?));
    };
    let made = upload_and_complete(bucket, daemon, asked, &id, &upload, parent.as_ref()).await?;
    if made.is_err() {
        bucket.abort(&key, &upload).await;
        let _ = bucket.delete(&id).await;
    }
    Ok(made)
}

async fn upload_and_complete(
    bucket: &Bucket,
    daemon: &Daemon,
    asked: &SnapshotOptions,
    id: &str,
    upload: &str,
    parent: Option<&BackupMeta>,
) -> Result<Answered<BackupMeta>> {
    let key = data_key(id);
    let mut part_urls = Vec::with_capacity(PART_URLS);
    for number in 1..=PART_URLS {
        let number = number.to_string();
        let query = [("partNumber", number.as_str()), ("uploadId", upload)];
        part_urls.push(bucket.presign("PUT", &key, &query)?);
    }
    let base = match parent {
        Some(parent) => Some(SnapshotBase {
            index_url: bucket.presign("GET", &index_key(&parent.id), &[])?,
            depth: parent.depth.unwrap_or(0),
            token: parent.token.clone(),
        }),
        None => None,
    };
    let body = UploadBackupRequest {
        create: CreateBackupRequest {
            dir: asked.dir.clone(),
            archive_path: archive_path(id),
            gitignore: Some(asked.gitignore),
            excludes: Some(asked.excludes.clone()),
            base,
            ..CreateBackupRequest::default()
        },
        upload: UploadTarget {
            part_urls: Some(part_urls),
            min_part_size: Some(MIN_PART_SIZE),
            index_url: Some(bucket.presign("PUT", &index_key(id), &[])?),
            ..UploadTarget::default()
        },
    };
    let answer = daemon
        .call(
            Method::Post,
            "/api/backup/upload",
            Some(&serde_json::to_value(&body)?),
        )
        .await?;
    let (archive, parts) = match outcome(answer).await? {
        Ok(BackupEvent::Complete {
            archive: Some(archive),
            parts,
            ..
        }) => (archive, parts),
        Ok(_) => {
            return Ok(Err(error(
                502,
                "BACKUP_CREATE_FAILED",
                "the daemon's stream ended without an archive",
            )?));
        }
        Err(refused) => return Ok(Err(refused)),
    };
    let parts: Vec<(u32, String)> = parts
        .iter()
        .map(|part| (part.part_number, part.etag.clone()))
        .collect();
    let completed = bucket
        .send(
            Method::Post,
            &key,
            &[("uploadId", upload)],
            Some(complete_multipart_body(&parts)),
        )
        .await?;
    if completed.status_code() != 200 {
        return Ok(Err(error(
            502,
            "BACKUP_CREATE_FAILED",
            "the bucket refused the parts",
        )?));
    }
    let head = bucket.send(Method::Head, &key, &[], None).await?;
    let stored: Option<u64> = head
        .headers()
        .get("content-length")?
        .and_then(|length| length.parse().ok());
    if stored != Some(archive.size_bytes) {
        return Ok(Err(error(
            502,
            "BACKUP_CREATE_FAILED",
            &format!(
                "the stored object has {stored:?} bytes, the archive {}",
                archive.size_bytes
            ),
        )?));
    }
    let meta = BackupMeta {
        id: id.to_string(),
        dir: asked.dir.clone(),
        name: asked.name.clone(),
        size_bytes: archive.size_bytes,
        ttl: asked.ttl.unwrap_or(DEFAULT_TTL_SECS),
        created_at: now().to_rfc3339_opts(SecondsFormat::Millis, true),
        sha256: archive.sha256.clone(),
        parent: parent.map(|parent| parent.id.clone()),
        depth: archive.depth,
        indexed: archive.index_path.is_some(),
        changes: archive.changes,
        excludes: asked.excludes.clone(),
        gitignore: asked.gitignore,
        token: archive.token.clone(),
    };
    let written = bucket
        .send(
            Method::Put,
            &meta_key(id),
            &[],
            Some(serde_json::to_string(&meta)?),
        )
        .await?;
    if written.status_code() != 200 {
        return Ok(Err(error(
            502,
            "BACKUP_CREATE_FAILED",
            "the bucket refused meta.json",
        )?));
    }
    Ok(Ok(meta))
}

/// `GET /backups[?dir=D]` → `{backups: [meta…]}`, newest first.
pub async fn list(env: &Env, request: &Request) -> Result<Response> {
    let bucket = match Bucket::from_env(env) {
        Ok(bucket) => bucket,
        Err(missing) => return missing.answer(),
    };
    let dir = request
        .url()?
        .query_pairs()
        .find(|(key, _)| key == "dir")
        .map(|(_, value)| value.to_string());
    match bucket.metas().await? {
        Ok(mut metas) => {
            if let Some(dir) = dir {
                metas.retain(|meta| meta.dir == dir);
            }
            Response::from_json(&serde_json::json!({"backups": metas}))
        }
        Err(refused) => Ok(refused),
    }
}

/// `POST /restore {id, dir, paths?}` → `{success, id, dir}` (with `paths`, what the daemon
/// wrote back too).
pub async fn restore(env: &Env, daemon: &Daemon, mut request: Request) -> Result<Response> {
    #[derive(Deserialize)]
    struct Restore {
        id: String,
        dir: String,
        #[serde(default)]
        paths: Vec<String>,
    }
    let Ok(asked) = request.json::<Restore>().await else {
        return error(400, "INVALID_BACKUP_CONFIG", "body: needs id and dir");
    };
    let bucket = match Bucket::from_env(env) {
        Ok(bucket) => bucket,
        Err(missing) => return missing.answer(),
    };
    let chain = match bucket.chain(&asked.id).await? {
        Ok(chain) => chain,
        Err(refused) => return Ok(refused),
    };
    // The TTL of the snapshot asked for; those below it are its data.
    if chain[0].expired(now()) {
        return error(
            400,
            "BACKUP_EXPIRED",
            &format!("backup {} has expired", asked.id),
        );
    }
    if !asked.paths.is_empty() {
        return restore_paths(&bucket, daemon, &chain, &asked.dir, asked.paths).await;
    }
    let mut archives = Vec::with_capacity(chain.len());
    for meta in &chain {
        archives.push(ArchiveSource {
            archive_path: archive_path(&meta.id),
            url: bucket.presign("GET", &data_key(&meta.id), &[])?,
            size_bytes: meta.size_bytes,
            sha256: meta.sha256.clone(),
        });
    }
    let body = DownloadBackupRequest {
        dir: asked.dir.clone(),
        archives,
        session_id: None,
    };
    let answer = daemon
        .call(
            Method::Post,
            "/api/backup/download",
            Some(&serde_json::to_value(&body)?),
        )
        .await?;
    match outcome(answer).await? {
        Ok(_) => Response::from_json(&serde_json::json!({
            "success": true, "id": asked.id, "dir": asked.dir,
        })),
        Err(refused) => Ok(refused),
    }
}

/// Paths of a snapshot written back into `dir` by the daemon, which reads them from the
/// stored archives in place (ranged GETs of presigned URLs).
async fn restore_paths(
    bucket: &Bucket,
    daemon: &Daemon,
    chain: &[BackupMeta],
    dir: &str,
    paths: Vec<String>,
) -> Result<Response> {
    let top = &chain[0];
    if !top.indexed {
        return not_found(&top.id);
    }
    let mut archives = Vec::with_capacity(chain.len());
    for meta in chain {
        archives.push(ChainArchive {
            depth: meta.depth.unwrap_or(0),
            url: bucket.presign("GET", &data_key(&meta.id), &[])?,
            size_bytes: meta.size_bytes,
        });
    }
    let body = ExtractBackupRequest {
        dir: dir.to_string(),
        index_url: bucket.presign("GET", &index_key(&top.id), &[])?,
        archives,
        paths,
        session_id: None,
    };
    let mut answer = daemon
        .call(
            Method::Post,
            "/api/backup/extract",
            Some(&serde_json::to_value(&body)?),
        )
        .await?;
    if answer.status_code() != 200 {
        return Ok(answer);
    }
    let mut extracted: serde_json::Value = answer.json().await?;
    extracted["id"] = top.id.clone().into();
    extracted["dir"] = dir.into();
    Response::from_json(&extracted)
}

/// `POST /backups/forget {dir, policy, dryRun?}` → the decision (`{keep: [{id, reasons}],
/// remove: [id]}`); what it removes is deleted unless `dryRun`.
pub async fn forget(env: &Env, mut request: Request) -> Result<Response> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Forget {
        dir: String,
        policy: SnapshotPolicy,
        #[serde(default)]
        dry_run: bool,
    }
    let Ok(asked) = request.json::<Forget>().await else {
        return error(
            400,
            "INVALID_BACKUP_CONFIG",
            "body: needs dir and policy ({keepLast, keepHourly, keepDaily, …})",
        );
    };
    let bucket = match Bucket::from_env(env) {
        Ok(bucket) => bucket,
        Err(missing) => return missing.answer(),
    };
    match apply_policy(&bucket, &asked.dir, &asked.policy, asked.dry_run).await? {
        Ok(decision) => Response::from_json(&decision),
        Err(refused) => Ok(refused),
    }
}

/// Applies `policy` to the snapshots of `dir`, deleting what it removes unless `dry_run`.
/// A policy with no rule removes nothing.
pub async fn apply_policy(
    bucket: &Bucket,
    dir: &str,
    policy: &SnapshotPolicy,
    dry_run: bool,
) -> Result<Answered<Decision>> {
    let metas = match bucket.metas().await? {
        Ok(metas) => metas,
        Err(refused) => return Ok(Err(refused)),
    };
    let decision = retention::apply(policy, &retention::snapshots_of(&metas, dir), now());
    if !dry_run {
        // A removed snapshot's dependents are removed too: each goes before its parent.
        for id in &backup::deletion_order(&metas, &decision.remove) {
            if let Err(refused) = bucket.delete(id).await? {
                return Ok(Err(refused));
            }
        }
    }
    Ok(Ok(decision))
}

/// `DELETE /backups/<id>`.
pub async fn delete(env: &Env, id: &str) -> Result<Response> {
    let bucket = match Bucket::from_env(env) {
        Ok(bucket) => bucket,
        Err(missing) => return missing.answer(),
    };
    match bucket.meta(id).await? {
        Ok(Some(_)) => {}
        Ok(None) => return not_found(id),
        Err(refused) => return Ok(refused),
    }
    let metas = match bucket.metas().await? {
        Ok(metas) => metas,
        Err(refused) => return Ok(refused),
    };
    let dependents = backup::dependents(&metas, id);
    if !dependents.is_empty() {
        let ids: Vec<&str> = dependents.iter().map(|meta| meta.id.as_str()).collect();
        let body = serde_json::json!({
            "code": "BACKUP_HAS_DEPENDENTS",
            "message": backup::dependents_refusal(id, &dependents),
            "context": {"id": id, "dependents": ids},
        });
        return Ok(Response::from_json(&body)?.with_status(409));
    }
    match bucket.delete(id).await? {
        Ok(()) => Response::from_json(&serde_json::json!({"success": true, "id": id})),
        Err(refused) => Ok(refused),
    }
}

/// Reads a daemon answer to its end: a refusal before the stream (its JSON error, passed
/// on), or the stream's last event (`complete`, or `error` as the daemon coded it).
async fn outcome(mut answer: Response) -> Result<Answered<BackupEvent>> {
    if answer.status_code() != 200 {
        return Ok(Err(answer));
    }
    let stream = answer.text().await?;
    let last: Option<BackupEvent> =
        last_event_data(&stream).and_then(|data| serde_json::from_str(&data).ok());
    Ok(match last {
        Some(BackupEvent::Error {
            code,
            message,
            http_status,
        }) => Err(error(http_status, &code, &message)?),
        Some(complete @ BackupEvent::Complete { .. }) => Ok(complete),
        _ => Err(error(
            502,
            "INTERNAL_ERROR",
            "the daemon's stream ended without a result",
        )?),
    })
}

fn not_found(id: &str) -> Result<Response> {
    error(404, "BACKUP_NOT_FOUND", &format!("no backup {id}"))
}

fn storage_error(status: u16, doing: &str) -> Result<Response> {
    error(
        502,
        "BACKUP_STORAGE_ERROR",
        &format!("the bucket answered {status} {doing}"),
    )
}

/// The Workers clock as the meta document and the TTL rule read time.
pub fn now() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(Date::now().as_millis() as i64).unwrap_or_default()
}
