//! A stored archive read where it lies: ranged GETs of its presigned URL behind `Read + Seek`,
//! so backhand reads the archive's tables and one file's blocks, not the whole object.
//!
//! Blocking, like backhand: use it on a thread that may block (`spawn_blocking`), never on
//! an async worker; each read that misses the cache waits for one ranged GET.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Seek, SeekFrom};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::runtime::Handle;

/// Bytes fetched per ranged GET: squashfs metadata sits in a few contiguous runs, so one
/// chunk usually holds a whole table.
const CHUNK: u64 = 256 * 1024;
/// Chunks kept (16 MiB).
const CACHED_CHUNKS: usize = 64;

/// `Read + Seek` over an object at a presigned GET URL.
pub struct RangedReader {
    client: reqwest::Client,
    url: String,
    size: u64,
    position: u64,
    runtime: Handle,
    cache: HashMap<u64, Arc<Vec<u8>>>,
    /// Chunk numbers, least recently fetched first.
    order: VecDeque<u64>,
    /// Bytes fetched so far (shared, so a caller can report it after the reader is gone).
    pub fetched: Arc<AtomicU64>,
    /// Ranged GETs made so far.
    pub requests: Arc<AtomicU64>,
}

impl RangedReader {
    /// A reader of the `size` bytes at `url`; requests run on `runtime`.
    pub fn new(client: reqwest::Client, url: &str, size: u64, runtime: Handle) -> RangedReader {
        RangedReader {
            client,
            url: url.to_string(),
            size,
            position: 0,
            runtime,
            cache: HashMap::new(),
            order: VecDeque::new(),
            fetched: Arc::new(AtomicU64::new(0)),
            requests: Arc::new(AtomicU64::new(0)),
        }
    }

    fn chunk(&mut self, number: u64) -> io::Result<Arc<Vec<u8>>> {
        if let Some(bytes) = self.cache.get(&number) {
            return Ok(Arc::clone(bytes));
        }
        let start = number * CHUNK;
        let end = (start + CHUNK).min(self.size) - 1;
        let request = self
            .client
            .get(&self.url)
            .header("range", format!("bytes={start}-{end}"));
        let bytes = self.runtime.block_on(async move {
            let response = request.send().await.map_err(io::Error::other)?;
            let status = response.status();
            if status != reqwest::StatusCode::PARTIAL_CONTENT && status != reqwest::StatusCode::OK {
                return Err(io::Error::other(format!("ranged GET answered {status}")));
            }
            let whole = status == reqwest::StatusCode::OK;
            let body = response.bytes().await.map_err(io::Error::other)?;
            // A server that ignores Range sends the whole object: keep the asked part.
            Ok(if whole {
                body.get(start as usize..=end as usize)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default()
            } else {
                body.to_vec()
            })
        })?;
        if bytes.len() as u64 != end - start + 1 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("ranged GET of {start}-{end} returned {} bytes", bytes.len()),
            ));
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.fetched
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let bytes = Arc::new(bytes);
        if self.order.len() >= CACHED_CHUNKS
            && let Some(oldest) = self.order.pop_front()
        {
            self.cache.remove(&oldest);
        }
        self.order.push_back(number);
        self.cache.insert(number, Arc::clone(&bytes));
        Ok(bytes)
    }
}

impl Read for RangedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.position >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let number = self.position / CHUNK;
        let chunk = self.chunk(number)?;
        let offset = (self.position - number * CHUNK) as usize;
        let n = buf.len().min(chunk.len() - offset);
        buf[..n].copy_from_slice(&chunk[offset..offset + n]);
        self.position += n as u64;
        Ok(n)
    }
}

impl Seek for RangedReader {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let position = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(n) => self.size.checked_add_signed(n),
            SeekFrom::Current(n) => self.position.checked_add_signed(n),
        };
        self.position = position
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.position)
    }
}
