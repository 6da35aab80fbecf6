//! Reads of an object through one open handle. Sequential readers get read-ahead: the
//! object is fetched in chunks by parallel ranged GETs, a window ahead of the reader, and
//! chunks behind it are dropped. Other reads fetch exactly the range asked for.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use fuser::Errno;
use tokio::sync::OnceCell;

use crate::client::ObjectClient;
use crate::fs::errno;

/// Bytes per ranged GET while reading ahead.
const CHUNK: u64 = 8 << 20;
/// Chunks fetched ahead of a sequential reader.
const WINDOW: u64 = 4;

type Chunk = Arc<OnceCell<Result<Bytes, Errno>>>;

#[derive(Default)]
struct Window {
    chunks: BTreeMap<u64, Chunk>,
    /// Where the last read ended: a read starting there is sequential.
    next_offset: u64,
}

pub struct Reader {
    client: ObjectClient,
    key: String,
    size: u64,
    window: Mutex<Window>,
}

impl Reader {
    pub fn new(client: ObjectClient, key: String, size: u64) -> Reader {
        Reader {
            client,
            key,
            size,
            window: Mutex::new(Window::default()),
        }
    }

    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub async fn read(self: &Arc<Self>, offset: u64, len: u64) -> Result<Bytes, Errno> {
        let end = self.size.min(offset.saturating_add(len));
        if offset >= end {
            return Ok(Bytes::new());
        }
        let first = offset / CHUNK;
        let last = (end - 1) / CHUNK;
        let Some(needed) = self.plan(offset, end) else {
            return self
                .client
                .get_range(&self.key, offset, end)
                .await
                .map_err(|error| errno(&error));
        };
        let mut out = Vec::with_capacity((end - offset) as usize);
        for (index, chunk) in (first..=last).zip(needed) {
            let bytes = self.fetch(index, &chunk).await?;
            let chunk_start = index * CHUNK;
            let from = offset.max(chunk_start) - chunk_start;
            let to = (end.min(chunk_start + bytes.len() as u64) - chunk_start).max(from);
            out.extend_from_slice(&bytes[from as usize..to as usize]);
        }
        Ok(Bytes::from(out))
    }

    /// The chunks covering `offset..end`, starting the fetches ahead of a sequential
    /// reader; `None` for a random read outside the window, which is fetched directly.
    fn plan(self: &Arc<Self>, offset: u64, end: u64) -> Option<Vec<Chunk>> {
        let first = offset / CHUNK;
        let last = (end - 1) / CHUNK;
        let mut window = self.window();
        let sequential = offset == window.next_offset;
        window.next_offset = end;
        if !sequential && !window.chunks.contains_key(&first) {
            return None;
        }
        let ahead = if sequential { WINDOW } else { 0 };
        let last_chunk = (self.size - 1) / CHUNK;
        for index in first..=(last + ahead).min(last_chunk) {
            if let std::collections::btree_map::Entry::Vacant(slot) = window.chunks.entry(index) {
                let chunk: Chunk = Arc::default();
                slot.insert(chunk.clone());
                let reader = Arc::clone(self);
                tokio::spawn(async move { reader.fetch(index, &chunk).await });
            }
        }
        window.chunks = window.chunks.split_off(&first);
        Some(
            (first..=last)
                .filter_map(|index| window.chunks.get(&index).cloned())
                .collect(),
        )
    }

    async fn fetch(&self, index: u64, chunk: &Chunk) -> Result<Bytes, Errno> {
        chunk
            .get_or_init(|| async {
                let start = index * CHUNK;
                let end = self.size.min(start + CHUNK);
                self.client
                    .get_range(&self.key, start, end)
                    .await
                    .map_err(|error| {
                        tracing::warn!(%error, "read ahead");
                        errno(&error)
                    })
            })
            .await
            .clone()
    }
}
