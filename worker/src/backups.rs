//! Backups to R2 from the object, as `fsctl`'s backups do them: the object starts a
//! multipart upload and presigns its part URLs, the daemon makes the archive and PUTs its
//! parts (as many as it needs), the object completes the upload with their ETags and writes
//! `backups/<id>/meta.json`; a restore reads the meta, refuses an expired backup, and hands
//! the daemon a presigned GET. The daemon answers both with a progress stream, which the
//! object reads to its last event. Keys, sizes, the meta document, the multipart documents
//! and the TTL rule are `fsd_control::backup`'s, the signing `fsd_s3::sign`'s (no runtime
//! needed), R2's S3 keys Worker secrets.

use std::time::Duration;

use chrono::{DateTime, Utc};
use fsd_control::backup::{
    BackupMeta, DEFAULT_TTL_SECS, MIN_PART_SIZE, PART_URLS, archive_path, complete_multipart_body,
    data_key, index_key, last_event_data, meta_key, upload_id,
};
use fsd_s3::Upstream;
use fsd_s3::sign::{object_url, presign, sign_headers_at};
use serde::Deserialize;
use worker::{Date, Env, Fetch, Headers, Method, Request, RequestInit, Response, Result};

use crate::daemon::Daemon;
use crate::r2::Missing;
use crate::wire::error;

/// How long presigned URLs stay valid, as `fsctl`'s.
const PRESIGN_EXPIRY: Duration = Duration::from_secs(3600);

/// The bucket backups go to (the `R2_BUCKET` var) and R2's keys for it.
struct Bucket {
    upstream: Upstream,
    name: String,
}

impl Bucket {
    fn from_env(env: &Env) -> std::result::Result<Bucket, Missing> {
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

    /// A request signed in its headers, for what the object does itself (multipart calls).
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
}

/// The last event of a daemon's progress stream: `complete` (its JSON) or `error`.
enum Outcome {
    Complete(serde_json::Value),
    Failed(Result<Response>),
}

/// Reads a daemon answer to its end: a refusal before the stream (a JSON error), or the
/// stream's last event.
async fn outcome(mut answer: Response) -> Result<Outcome> {
    if answer.status_code() != 200 {
        return Ok(Outcome::Failed(Ok(answer)));
    }
    let stream = answer.text().await?;
    let last: Option<serde_json::Value> =
        last_event_data(&stream).and_then(|data| serde_json::from_str(&data).ok());
    Ok(match last {
        Some(event) if event["type"] == "complete" => Outcome::Complete(event),
        Some(event) if event["type"] == "error" => {
            let status = event["httpStatus"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(500);
            Outcome::Failed(error(
                status,
                event["code"].as_str().unwrap_or("INTERNAL_ERROR"),
                event["message"].as_str().unwrap_or_default(),
            ))
        }
        _ => Outcome::Failed(error(
            502,
            "INTERNAL_ERROR",
            "the daemon's stream ended without a result",
        )),
    })
}

/// `POST /backups {dir, name?, ttl?}` → `{id, dir}`.
pub async fn create(env: &Env, daemon: &Daemon, mut request: Request) -> Result<Response> {
    #[derive(Deserialize)]
    struct Create {
        dir: String,
        name: Option<String>,
        ttl: Option<u64>,
    }
    let Ok(asked) = request.json::<Create>().await else {
        return error(400, "INVALID_BACKUP_CONFIG", "body: needs dir");
    };
    let bucket = match Bucket::from_env(env) {
        Ok(bucket) => bucket,
        Err(missing) => return missing.answer(),
    };
    let id = crate::random::hex::<12>()?;
    let key = data_key(&id);
    let mut started = bucket
        .send(Method::Post, &key, &[("uploads", "")], None)
        .await?;
    let started = started.text().await?;
    let Some(upload) = upload_id(&started) else {
        return error(502, "BACKUP_CREATE_FAILED", "the bucket refused the upload");
    };
    let mut part_urls = Vec::with_capacity(PART_URLS);
    for number in 1..=PART_URLS {
        let number = number.to_string();
        let query = [
            ("partNumber", number.as_str()),
            ("uploadId", upload.as_str()),
        ];
        part_urls.push(bucket.presign("PUT", &key, &query)?);
    }
    let body = serde_json::json!({
        "dir": asked.dir,
        "archivePath": archive_path(&id),
        "upload": {
            "partUrls": part_urls,
            "minPartSize": MIN_PART_SIZE,
            "indexUrl": bucket.presign("PUT", &index_key(&id), &[])?,
        },
    });
    let answer = daemon
        .call(Method::Post, "/api/backup/upload", Some(&body))
        .await?;
    let made = match outcome(answer).await? {
        Outcome::Complete(made) => made,
        Outcome::Failed(answer) => {
            bucket.abort(&key, &upload).await;
            return answer;
        }
    };
    let parts: Vec<(u32, String)> = made["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|part| {
            let number = u32::try_from(part["partNumber"].as_u64()?).ok()?;
            Some((number, part["etag"].as_str()?.to_string()))
        })
        .collect();
    let completed = bucket
        .send(
            Method::Post,
            &key,
            &[("uploadId", upload.as_str())],
            Some(complete_multipart_body(&parts)),
        )
        .await?;
    if completed.status_code() != 200 {
        bucket.abort(&key, &upload).await;
        return error(502, "BACKUP_CREATE_FAILED", "the bucket refused the parts");
    }
    let archive = &made["archive"];
    let meta = BackupMeta {
        id: id.clone(),
        dir: asked.dir.clone(),
        name: asked.name,
        size_bytes: archive["sizeBytes"].as_u64().unwrap_or(0),
        ttl: asked.ttl.unwrap_or(DEFAULT_TTL_SECS),
        created_at: now().to_rfc3339(),
        sha256: archive["sha256"].as_str().map(str::to_string),
        parent: None,
        depth: None,
        // Stored beside the archive: history reads it, and `fsctl` can build on it.
        indexed: archive["indexPath"].is_string(),
        changes: None,
        excludes: Vec::new(),
        gitignore: false,
        token: archive["token"].as_str().map(str::to_string),
    };
    let written = bucket
        .send(
            Method::Put,
            &meta_key(&id),
            &[],
            Some(serde_json::to_string(&meta)?),
        )
        .await?;
    if written.status_code() != 200 {
        return error(502, "BACKUP_CREATE_FAILED", "the bucket refused meta.json");
    }
    Response::from_json(&serde_json::json!({"id": id, "dir": asked.dir}))
}

/// `POST /restore {id, dir}` → `{success, id, dir}`: the daemon downloads the archive and
/// mounts it on `dir`.
pub async fn restore(env: &Env, daemon: &Daemon, mut request: Request) -> Result<Response> {
    #[derive(Deserialize)]
    struct Restore {
        id: String,
        dir: String,
    }
    let Ok(asked) = request.json::<Restore>().await else {
        return error(400, "INVALID_BACKUP_CONFIG", "body: needs id and dir");
    };
    let bucket = match Bucket::from_env(env) {
        Ok(bucket) => bucket,
        Err(missing) => return missing.answer(),
    };
    let mut found = bucket
        .send(Method::Get, &meta_key(&asked.id), &[], None)
        .await?;
    if found.status_code() == 404 {
        return error(404, "BACKUP_NOT_FOUND", &format!("no backup {}", asked.id));
    }
    let meta: BackupMeta = found.json().await?;
    if meta.expired(now()) {
        return error(
            400,
            "BACKUP_EXPIRED",
            &format!("backup {} has expired", meta.id),
        );
    }
    let body = serde_json::json!({
        "dir": asked.dir,
        "archives": [{
            "archivePath": archive_path(&meta.id),
            "url": bucket.presign("GET", &data_key(&meta.id), &[])?,
            "sizeBytes": meta.size_bytes,
            "sha256": meta.sha256,
        }],
    });
    let answer = daemon
        .call(Method::Post, "/api/backup/download", Some(&body))
        .await?;
    match outcome(answer).await? {
        Outcome::Complete(_) => Response::from_json(&serde_json::json!({
            "success": true, "id": meta.id, "dir": asked.dir,
        })),
        Outcome::Failed(answer) => answer,
    }
}

/// The Workers clock as the meta document and the TTL rule read time.
fn now() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(Date::now().as_millis() as i64).unwrap_or_default()
}
