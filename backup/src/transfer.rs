//! Moving archives through presigned URLs: single PUT, parallel multipart parts, parallel
//! ranged GETs into a preallocated file. Retries with backoff on 5xx and dropped
//! connections; memory is bounded by parts in flight × part size.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

pub use fsd_s3::retry::RetryPolicy;
use fsd_s3::retry::transient_status;

use crate::BackupError;
use crate::progress::Progress;
use fsd_api::scratch::{ScratchKind, scratch_path};

/// The temp file a download of `dest` fills, its directory made.
async fn download_temp(dest: &Path) -> Result<PathBuf, BackupError> {
    if let Some(parent) = dest.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| BackupError::io(parent, e))?;
    }
    Ok(scratch_path(dest, ScratchKind::Download))
}

/// A finished download's temp file renamed onto `dest`, or removed when it failed.
async fn into_place(
    temp: &Path,
    dest: &Path,
    result: Result<(), BackupError>,
) -> Result<(), BackupError> {
    match result {
        Ok(()) => tokio::fs::rename(temp, dest)
            .await
            .map_err(|e| BackupError::io(dest, e)),
        Err(error) => {
            let _ = tokio::fs::remove_file(temp).await;
            Err(error)
        }
    }
}

/// One part of a download: the URL that serves it and the bytes `[start, end)` it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangedPart {
    pub url: String,
    pub start: u64,
    pub end: u64,
}

/// One part of a multipart upload: a presigned URL for `size` bytes at `offset`.
#[derive(Debug, Clone)]
pub struct PartSpec {
    pub part_number: u32,
    pub url: String,
    pub offset: u64,
    pub size: u64,
}

/// Moves bytes between local archives and presigned URLs.
#[derive(Clone)]
pub struct Transfer {
    /// Built at the first transfer, not at daemon start: building it loads the system's
    /// CA certificates (a file read per certificate), which is most of what the daemon
    /// would otherwise do before it listens.
    client: Arc<OnceLock<reqwest::Client>>,
    stall: Duration,
    pub retry: RetryPolicy,
    /// Requests in flight at once.
    pub concurrency: usize,
}

/// The outcome of one attempt: done, worth another try, or final.
enum Attempt<T> {
    Done(T),
    Retry(BackupError),
    Fail(BackupError),
}

impl<T> Attempt<T> {
    /// Goes on with a done attempt; a retry or a failure passes through.
    fn and_then<U>(self, next: impl FnOnce(T) -> Attempt<U>) -> Attempt<U> {
        match self {
            Attempt::Done(value) => next(value),
            Attempt::Retry(error) => Attempt::Retry(error),
            Attempt::Fail(error) => Attempt::Fail(error),
        }
    }
}

impl Transfer {
    /// `stall`: how long a request may go without progress before it is retried.
    pub fn new(stall: Duration) -> Result<Transfer, BackupError> {
        Ok(Transfer {
            client: Arc::new(OnceLock::new()),
            stall,
            retry: RetryPolicy::default(),
            concurrency: 8,
        })
    }

    /// The HTTP client, built on first use.
    fn http(&self) -> Result<&reqwest::Client, BackupError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let built = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(self.stall)
            .build()
            .map_err(|e| BackupError::Transfer(e.to_string()))?;
        Ok(self.client.get_or_init(|| built))
    }

    async fn with_retries<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T, BackupError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Attempt<T>>,
    {
        let mut n = 1;
        loop {
            match attempt().await {
                Attempt::Done(value) => return Ok(value),
                Attempt::Fail(error) => return Err(error),
                Attempt::Retry(error) => {
                    tracing::warn!(what, attempt = n, %error, "transfer attempt failed");
                    let Some(delay) = self.retry.delay_after(n) else {
                        return Err(error);
                    };
                    tokio::time::sleep(delay).await;
                    n += 1;
                }
            }
        }
    }

    /// The HTTP client, for readers that make their own requests (ranged reads).
    pub fn client(&self) -> Result<reqwest::Client, BackupError> {
        self.http().cloned()
    }

    /// GETs a small object (a snapshot's index) whole; more than `limit` bytes is an error.
    pub async fn get_bytes(&self, url: &str, limit: u64) -> Result<Vec<u8>, BackupError> {
        let too_large = || BackupError::Transfer(format!("GET: more than {limit} bytes"));
        self.with_retries("GET", || async move {
            let client = match self.http() {
                Ok(client) => client,
                Err(error) => return Attempt::Fail(error),
            };
            classify(client.get(url).send().await, "GET")
                .await
                .and_then(|response| {
                    if response.content_length().is_some_and(|n| n > limit) {
                        return Attempt::Fail(too_large());
                    }
                    Attempt::Done(response)
                })
        })
        .await?
        .bytes()
        .await
        .map_err(|e| BackupError::Transfer(format!("GET: {e}")))
        .and_then(|bytes| {
            if bytes.len() as u64 > limit {
                return Err(too_large());
            }
            Ok(bytes.to_vec())
        })
    }

    /// PUTs the whole archive to one presigned URL; returns the ETag if the server sent one.
    pub async fn put(
        &self,
        archive: &Path,
        url: &str,
        progress: Progress,
    ) -> Result<Option<String>, BackupError> {
        let size = std::fs::metadata(archive)
            .map_err(|e| BackupError::io(archive, e))?
            .len();
        progress.set_total(size);
        let sent = Arc::new(AtomicU64::new(0));
        self.with_retries("PUT", || {
            let sent = Arc::clone(&sent);
            let progress = progress.clone();
            async move {
                sent.store(0, Ordering::Relaxed);
                let file = match tokio::fs::File::open(archive).await {
                    Ok(file) => file,
                    Err(e) => return Attempt::Fail(BackupError::io(archive, e)),
                };
                let body = tokio_util::io::ReaderStream::with_capacity(file, 1 << 20).inspect_ok(
                    move |chunk| {
                        let done = sent.fetch_add(chunk.len() as u64, Ordering::Relaxed)
                            + chunk.len() as u64;
                        progress.report(done);
                    },
                );
                let client = match self.http() {
                    Ok(client) => client,
                    Err(error) => return Attempt::Fail(error),
                };
                let request = client
                    .put(url)
                    .header("content-type", "application/octet-stream")
                    .header("content-length", size)
                    .body(reqwest::Body::wrap_stream(body));
                classify(request.send().await, "PUT")
                    .await
                    .and_then(|response| Attempt::Done(etag(&response)))
            }
        })
        .await
    }

    /// Uploads `parts` of the archive in parallel; returns `(partNumber, etag)` sorted by part.
    /// Each part streams from the file, so memory stays small whatever the part size.
    pub async fn put_parts(
        &self,
        archive: &Path,
        parts: Vec<PartSpec>,
        progress: Progress,
    ) -> Result<Vec<(u32, String)>, BackupError> {
        let size = std::fs::metadata(archive)
            .map_err(|e| BackupError::io(archive, e))?
            .len();
        if let Some(part) = parts.iter().find(|p| p.offset + p.size > size) {
            return Err(BackupError::Transfer(format!(
                "part {} ends at byte {} but the archive has {size}",
                part.part_number,
                part.offset + part.size
            )));
        }
        progress.set_total(parts.iter().map(|p| p.size).sum());
        let done = Arc::new(AtomicU64::new(0));
        let mut etags: Vec<(u32, String)> = stream::iter(parts)
            .map(|part| {
                let done = Arc::clone(&done);
                let progress = progress.clone();
                async move {
                    let etag = self.put_part(archive, &part, &done, &progress).await?;
                    Ok::<_, BackupError>((part.part_number, etag))
                }
            })
            .buffer_unordered(self.concurrency.max(1))
            .try_collect()
            .await?;
        etags.sort_by_key(|(number, _)| *number);
        Ok(etags)
    }

    async fn put_part(
        &self,
        archive: &Path,
        part: &PartSpec,
        done: &Arc<AtomicU64>,
        progress: &Progress,
    ) -> Result<String, BackupError> {
        let what = format!("part {}", part.part_number);
        self.with_retries(&what, || {
            let what = what.clone();
            let done = Arc::clone(done);
            let progress = progress.clone();
            async move {
                let body = match slice_stream(archive, part.offset, part.size).await {
                    Ok(body) => body,
                    Err(e) => return Attempt::Fail(e),
                };
                // Progress counts bytes sent; a retried part's bytes are counted again.
                let body = body.inspect_ok(move |chunk| {
                    progress.report(
                        done.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64,
                    );
                });
                let client = match self.http() {
                    Ok(client) => client,
                    Err(error) => return Attempt::Fail(error),
                };
                let request = client
                    .put(&part.url)
                    .header("content-type", "application/octet-stream")
                    .header("content-length", part.size)
                    .body(reqwest::Body::wrap_stream(body));
                classify(request.send().await, &what)
                    .await
                    .and_then(|response| match etag(&response) {
                        Some(etag) => Attempt::Done(etag),
                        None => Attempt::Fail(BackupError::Transfer(format!(
                            "{what}: no ETag in the response"
                        ))),
                    })
            }
        })
        .await
    }

    /// Downloads `size` bytes from `url` into `dest` with parallel ranged GETs, through a
    /// preallocated temp file renamed into place once size (and `sha256`, when given) match.
    pub async fn get(
        &self,
        url: &str,
        dest: &Path,
        size: u64,
        sha256: Option<&str>,
        chunk_size: u64,
        progress: Progress,
    ) -> Result<(), BackupError> {
        let temp = download_temp(dest).await?;
        let result = self
            .get_into(url, &temp, size, sha256, chunk_size, progress)
            .await;
        into_place(&temp, dest, result).await
    }

    /// Downloads `size` bytes into `dest` from parts that each name their own URL and the
    /// byte range `[start, end)` of the file they hold, all at once, through a preallocated
    /// temp file renamed into place once every part landed and the size matches.
    pub async fn get_parts(
        &self,
        parts: Vec<RangedPart>,
        dest: &Path,
        size: u64,
    ) -> Result<(), BackupError> {
        let temp = download_temp(dest).await?;
        let result = async {
            let file = File::create(&temp).map_err(|e| BackupError::io(&temp, e))?;
            file.set_len(size).map_err(|e| BackupError::io(&temp, e))?;
            drop(file);
            stream::iter(parts)
                .map(|part| {
                    let temp = temp.clone();
                    async move { self.get_range(&part.url, &temp, part.start, part.end).await }
                })
                .buffer_unordered(self.concurrency.max(1))
                .try_collect::<()>()
                .await?;
            let path = temp.clone();
            tokio::task::spawn_blocking(move || {
                let file = File::open(&path).map_err(|e| BackupError::io(&path, e))?;
                file.sync_all().map_err(|e| BackupError::io(&path, e))
            })
            .await
            .map_err(|e| BackupError::Transfer(e.to_string()))?
        }
        .await;
        into_place(&temp, dest, result).await
    }

    async fn get_into(
        &self,
        url: &str,
        temp: &Path,
        size: u64,
        sha256: Option<&str>,
        chunk_size: u64,
        progress: Progress,
    ) -> Result<(), BackupError> {
        let file = File::create(temp).map_err(|e| BackupError::io(temp, e))?;
        file.set_len(size).map_err(|e| BackupError::io(temp, e))?;
        progress.set_total(size);
        let chunk_size = chunk_size.max(1 << 20);
        let ranges: Vec<(u64, u64)> = (0..size)
            .step_by(chunk_size as usize)
            .map(|start| (start, (start + chunk_size).min(size)))
            .collect();
        let done = Arc::new(AtomicU64::new(0));
        stream::iter(ranges)
            .map(|(start, end)| {
                let done = Arc::clone(&done);
                let progress = progress.clone();
                async move {
                    self.get_range(url, temp, start, end).await?;
                    progress.report(done.fetch_add(end - start, Ordering::Relaxed) + end - start);
                    Ok::<(), BackupError>(())
                }
            })
            .buffer_unordered(self.concurrency.max(1))
            .try_collect::<()>()
            .await?;
        drop(file);
        let expected = sha256.map(str::to_owned);
        let path = temp.to_path_buf();
        tokio::task::spawn_blocking(move || {
            let file = File::open(&path).map_err(|e| BackupError::io(&path, e))?;
            file.sync_all().map_err(|e| BackupError::io(&path, e))?;
            let actual = file
                .metadata()
                .map_err(|e| BackupError::io(&path, e))?
                .len();
            if actual != size {
                return Err(BackupError::Verify {
                    what: "size",
                    expected: size.to_string(),
                    actual: actual.to_string(),
                });
            }
            if let Some(expected) = expected {
                let actual = sha256_file(&path)?;
                if !actual.eq_ignore_ascii_case(&expected) {
                    return Err(BackupError::Verify {
                        what: "sha256",
                        expected,
                        actual,
                    });
                }
            }
            Ok(())
        })
        .await
        .map_err(|e| BackupError::Transfer(e.to_string()))?
    }

    /// GETs bytes `start..end` and writes them at `start` in `path` as they arrive.
    async fn get_range(
        &self,
        url: &str,
        path: &Path,
        start: u64,
        end: u64,
    ) -> Result<(), BackupError> {
        let what = format!("bytes {start}-{}", end - 1);
        self.with_retries(&what, || {
            let what = what.clone();
            async move {
                let client = match self.http() {
                    Ok(client) => client,
                    Err(error) => return Attempt::Fail(error),
                };
                let request = client
                    .get(url)
                    .header("range", format!("bytes={start}-{}", end - 1));
                let mut response = match classify(request.send().await, &what).await {
                    Attempt::Done(response) => response,
                    Attempt::Retry(e) => return Attempt::Retry(e),
                    Attempt::Fail(e) => return Attempt::Fail(e),
                };
                if response.status() != reqwest::StatusCode::PARTIAL_CONTENT
                    && !(start == 0 && end == response.content_length().unwrap_or(0))
                {
                    return Attempt::Fail(BackupError::Transfer(format!(
                        "{what}: the server ignored the Range header"
                    )));
                }
                let mut file = match tokio::fs::OpenOptions::new().write(true).open(path).await {
                    Ok(file) => file,
                    Err(e) => return Attempt::Fail(BackupError::io(path, e)),
                };
                if let Err(e) = file.seek(std::io::SeekFrom::Start(start)).await {
                    return Attempt::Fail(BackupError::io(path, e));
                }
                let mut written = 0u64;
                loop {
                    match response.chunk().await {
                        Ok(Some(chunk)) => {
                            written += chunk.len() as u64;
                            if written > end - start {
                                return Attempt::Retry(BackupError::Transfer(format!(
                                    "{what}: more bytes than asked for"
                                )));
                            }
                            if let Err(e) = file.write_all(&chunk).await {
                                return Attempt::Fail(BackupError::io(path, e));
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            return Attempt::Retry(BackupError::Transfer(format!("{what}: {e}")));
                        }
                    }
                }
                if written != end - start {
                    return Attempt::Retry(BackupError::Verify {
                        what: "range length",
                        expected: (end - start).to_string(),
                        actual: written.to_string(),
                    });
                }
                match file.flush().await {
                    Ok(()) => Attempt::Done(()),
                    Err(e) => Attempt::Fail(BackupError::io(path, e)),
                }
            }
        })
        .await
    }
}

/// Sorts a response into done, retry (5xx, 408, 429, connection trouble) or fail (4xx).
async fn classify(
    result: reqwest::Result<reqwest::Response>,
    what: &str,
) -> Attempt<reqwest::Response> {
    let response = match result {
        Ok(response) => response,
        Err(e) => return Attempt::Retry(BackupError::Transfer(format!("{what}: {e}"))),
    };
    let status = response.status();
    if status.is_success() {
        return Attempt::Done(response);
    }
    let body = response.text().await.unwrap_or_default();
    let error = BackupError::TransferStatus {
        status: status.as_u16(),
        what: what.to_string(),
        body: truncate(body),
    };
    if transient_status(status.as_u16()) {
        Attempt::Retry(error)
    } else {
        Attempt::Fail(error)
    }
}

fn etag(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A stream of `size` bytes of `path` from `offset`.
async fn slice_stream(
    path: &Path,
    offset: u64,
    size: u64,
) -> Result<impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static, BackupError>
{
    let mut file = tokio::fs::File::open(path)
        .await
        .map_err(|e| BackupError::io(path, e))?;
    file.seek(std::io::SeekFrom::Start(offset))
        .await
        .map_err(|e| BackupError::io(path, e))?;
    Ok(tokio_util::io::ReaderStream::with_capacity(
        file.take(size),
        256 * 1024,
    ))
}

/// The SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, BackupError> {
    let mut file = File::open(path).map_err(|e| BackupError::io(path, e))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|e| BackupError::io(path, e))?;
    Ok(fsd_api::hex::lower(&hasher.finalize()))
}

fn truncate(mut body: String) -> String {
    if body.len() > 512 {
        let mut cut = 512;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
    }
    body
}
