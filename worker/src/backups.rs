//! Backups to R2 from the object, as `fsctl`'s backups do them: the daemon makes the
//! archive and PUTs it to a presigned URL, the object writes `backups/<id>/meta.json`;
//! a restore reads the meta, refuses an expired backup, and hands the daemon a presigned
//! GET. Keys, the meta document and the TTL rule are `fsd_control::backup`'s, the signing
//! `fsd_s3::sign::presign` (no runtime needed), R2's S3 keys Worker secrets.

use std::time::Duration;

use chrono::{DateTime, Utc};
use fsd_control::backup::{BackupMeta, DEFAULT_TTL_SECS, data_key, meta_key};
use fsd_s3::Upstream;
use fsd_s3::sign::{object_url, presign};
use serde::Deserialize;
use worker::{Date, Env, Fetch, Fetcher, Method, Request, RequestInit, Response, Result};

use crate::daemon;
use crate::wire::error;

/// How long presigned URLs stay valid, as `fsctl`'s.
const PRESIGN_EXPIRY: Duration = Duration::from_secs(3600);
const ARCHIVE_DIR: &str = "/var/backups";

/// The bucket backups go to (the `R2_BUCKET` var) and R2's keys for it.
struct Bucket {
    upstream: Upstream,
    name: String,
}

impl Bucket {
    fn from_env(env: &Env) -> Result<Bucket> {
        Ok(Bucket {
            upstream: crate::r2::upstream(env)?,
            name: env.var("R2_BUCKET")?.to_string(),
        })
    }

    /// A presigned URL for `method` on `key`, signed at the Workers clock's time.
    fn presign(&self, method: &str, key: &str) -> Result<String> {
        let url = object_url(&self.upstream.endpoint, &self.name, key, &[]);
        presign(
            &self.upstream,
            method,
            &url,
            PRESIGN_EXPIRY,
            crate::r2::now(),
        )
        .map_err(worker::Error::RustError)
    }
}

/// `POST /backups {dir, name?, ttl?}` → `{id, dir}`.
pub async fn create(env: &Env, daemon: &Fetcher, mut request: Request) -> Result<Response> {
    #[derive(Deserialize)]
    struct Create {
        dir: String,
        name: Option<String>,
        ttl: Option<u64>,
    }
    let Ok(asked) = request.json::<Create>().await else {
        return error(400, "INVALID_BACKUP_CONFIG", "body: needs dir");
    };
    let bucket = Bucket::from_env(env)?;
    let id: String = crate::random::bytes::<12>()?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let upload = serde_json::json!({
        "dir": asked.dir,
        "archivePath": format!("{ARCHIVE_DIR}/{id}.sqsh"),
        "upload": {"url": bucket.presign("PUT", &data_key(&id))?},
    });
    let mut made = daemon::call(daemon, Method::Post, "/api/backup/upload", &upload).await?;
    if made.status_code() != 200 {
        return Ok(made);
    }
    let made: serde_json::Value = made.json().await?;
    let meta = BackupMeta {
        id: id.clone(),
        dir: asked.dir.clone(),
        name: asked.name,
        size_bytes: made["sizeBytes"].as_u64().unwrap_or(0),
        ttl: asked.ttl.unwrap_or(DEFAULT_TTL_SECS),
        created_at: now().to_rfc3339(),
        sha256: made["sha256"].as_str().map(str::to_string),
        parent: None,
    };
    let written = send(
        Method::Put,
        &bucket.presign("PUT", &meta_key(&id))?,
        Some(serde_json::to_string(&meta)?),
    )
    .await?;
    if written.status_code() != 200 {
        return error(502, "BACKUP_CREATE_FAILED", "the bucket refused meta.json");
    }
    Response::from_json(&serde_json::json!({"id": id, "dir": asked.dir}))
}

/// `POST /restore {id, dir}`: the daemon downloads the archive and mounts it on `dir`.
pub async fn restore(env: &Env, daemon: &Fetcher, mut request: Request) -> Result<Response> {
    #[derive(Deserialize)]
    struct Restore {
        id: String,
        dir: String,
    }
    let Ok(asked) = request.json::<Restore>().await else {
        return error(400, "INVALID_BACKUP_CONFIG", "body: needs id and dir");
    };
    let bucket = Bucket::from_env(env)?;
    let mut found = send(
        Method::Get,
        &bucket.presign("GET", &meta_key(&asked.id))?,
        None,
    )
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
    let download = serde_json::json!({
        "dir": asked.dir,
        "archives": [{
            "archivePath": format!("{ARCHIVE_DIR}/{}.sqsh", meta.id),
            "url": bucket.presign("GET", &data_key(&meta.id))?,
            "sizeBytes": meta.size_bytes,
            "sha256": meta.sha256,
        }],
    });
    daemon::call(daemon, Method::Post, "/api/backup/download", &download).await
}

/// The Workers clock as the meta document and the TTL rule read time.
fn now() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(Date::now().as_millis() as i64).unwrap_or_default()
}

async fn send(method: Method, url: &str, body: Option<String>) -> Result<Response> {
    let mut init = RequestInit::new();
    init.with_method(method);
    if let Some(body) = body {
        init.with_body(Some(body.into()));
    }
    Fetch::Request(Request::new_with_init(url, &init)?)
        .send()
        .await
}
