//! Reads of an object through one open handle. A sequential reader gets one streaming GET
//! from its offset to the end of the object, read ahead of it into a bounded window (the
//! stream waits while the reader is far behind): one request per file instead of one per
//! range, which is cheaper on S3 and far faster on stores that re-read the object for every
//! range. The kernel's parallel read-ahead requests may arrive out of order; they are
//! served from the window as long as they fall inside it. Other reads fetch exactly the
//! range asked for.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use fsd_s3::ObjectStore;
use fuser::Errno;
use futures_util::StreamExt;
use tokio::sync::Notify;

use crate::fs::kernel::errno;
use crate::fs::lock::lock;

/// How far the stream may run ahead of the furthest read.
const AHEAD: u64 = 64 << 20;
/// How much already-read data is kept, for reads that arrive late.
const BEHIND: u64 = 8 << 20;
/// How far past the received data a read may start and still wait for the stream (the
/// kernel's read-ahead requests arrive a little out of order; a long seek does not wait).
const GAP: u64 = 8 << 20;

/// The window of a streaming GET.
#[derive(Default)]
struct Window {
    /// Received segments, in order, starting at `base`.
    segments: VecDeque<Bytes>,
    base: u64,
    /// One past the last byte received.
    end: u64,
    /// The furthest any read has reached.
    furthest: u64,
    /// The furthest end a waiting read needs.
    wanted: u64,
    /// The stream ended early, or failed.
    failed: bool,
    /// Bumped per stream, so a replaced stream's task stops feeding the window.
    generation: u64,
    active: bool,
}

impl Window {
    fn covers(&self, offset: u64) -> bool {
        self.active && offset >= self.base && offset <= self.end + GAP
    }

    fn copy(&self, offset: u64, end: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity((end - offset) as usize);
        let mut at = self.base;
        for segment in &self.segments {
            let segment_end = at + segment.len() as u64;
            if segment_end > offset && at < end {
                let from = offset.saturating_sub(at) as usize;
                let to = (end.min(segment_end) - at) as usize;
                out.extend_from_slice(&segment[from..to]);
            }
            at = segment_end;
        }
        out
    }

    fn trim(&mut self) {
        let keep_from = self.furthest.saturating_sub(BEHIND);
        while let Some(first) = self.segments.front() {
            let first_end = self.base + first.len() as u64;
            if first_end > keep_from {
                break;
            }
            self.base = first_end;
            self.segments.pop_front();
        }
    }
}

pub struct Reader<S: ObjectStore> {
    client: S,
    key: String,
    size: u64,
    window: Mutex<Window>,
    /// New data arrived (or the stream ended).
    arrived: Notify,
    /// A reader moved on: the stream may fetch more.
    consumed: Notify,
    /// Where the last read ended: a read starting there is sequential.
    last_end: Mutex<u64>,
}

impl<S: ObjectStore> Reader<S> {
    pub fn new(client: S, key: String, size: u64) -> Reader<S> {
        Reader {
            client,
            key,
            size,
            window: Mutex::new(Window::default()),
            arrived: Notify::new(),
            consumed: Notify::new(),
            last_end: Mutex::new(0),
        }
    }

    fn window(&self) -> MutexGuard<'_, Window> {
        lock(&self.window)
    }

    pub async fn read(self: &Arc<Self>, offset: u64, len: u64) -> Result<Bytes, Errno> {
        let end = self.size.min(offset.saturating_add(len));
        if offset >= end {
            return Ok(Bytes::new());
        }
        let sequential = {
            let mut last_end = lock(&self.last_end);
            let sequential = offset == *last_end;
            *last_end = end;
            sequential
        };
        let covered = self.window().covers(offset);
        if !covered {
            if !sequential {
                return self
                    .client
                    .get_range(&self.key, offset, end)
                    .await
                    .map_err(|error| errno(&error));
            }
            self.start_stream(offset);
        }
        match self.wait_for(offset, end).await {
            Some(result) => result,
            // The stream failed under this read: once more from here, then give up.
            None => {
                self.start_stream(offset);
                self.wait_for(offset, end).await.unwrap_or(Err(Errno::EIO))
            }
        }
    }

    /// Waits until the window holds `offset..end`; `None` if the stream failed first.
    async fn wait_for(&self, offset: u64, end: u64) -> Option<Result<Bytes, Errno>> {
        loop {
            let arrived = self.arrived.notified();
            {
                let mut window = self.window();
                if offset < window.base {
                    // Trimmed meanwhile: a new stream from here.
                    return None;
                }
                if window.end >= end {
                    let bytes = window.copy(offset, end);
                    if end > window.furthest {
                        window.furthest = end;
                        window.trim();
                        self.consumed.notify_waiters();
                    }
                    return Some(Ok(Bytes::from(bytes)));
                }
                if window.failed || !window.active {
                    return None;
                }
                if end > window.wanted {
                    window.wanted = end;
                    self.consumed.notify_waiters();
                }
            }
            arrived.await;
        }
    }

    /// Replaces the window with a stream from `offset` to the end of the object.
    fn start_stream(self: &Arc<Self>, offset: u64) {
        let generation = {
            let mut window = self.window();
            let generation = window.generation + 1;
            *window = Window {
                base: offset,
                end: offset,
                furthest: offset,
                generation,
                active: true,
                ..Window::default()
            };
            generation
        };
        self.consumed.notify_waiters();
        let reader = Arc::clone(self);
        tokio::spawn(async move { reader.feed(offset, generation).await });
    }

    /// The stream's task: appends what arrives, waiting while the reader is far behind.
    async fn feed(&self, offset: u64, generation: u64) {
        let result = self.client.get_stream(&self.key, offset, self.size).await;
        let mut body = match result {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%error, "read stream");
                return self.fail(generation);
            }
        };
        while let Some(chunk) = body.next().await {
            let Ok(chunk) = chunk else {
                return self.fail(generation);
            };
            loop {
                let consumed = self.consumed.notified();
                {
                    let mut window = self.window();
                    if window.generation != generation {
                        return;
                    }
                    if window.end < window.furthest + AHEAD || window.end < window.wanted {
                        window.end += chunk.len() as u64;
                        window.segments.push_back(chunk);
                        break;
                    }
                }
                consumed.await;
            }
            self.arrived.notify_waiters();
        }
        let short = {
            let window = self.window();
            window.generation == generation && window.end < self.size
        };
        if short {
            self.fail(generation);
        }
    }

    fn fail(&self, generation: u64) {
        {
            let mut window = self.window();
            if window.generation == generation {
                window.failed = true;
            }
        }
        self.arrived.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_copies_across_segments_and_trims_behind_the_reader() {
        let mut window = Window {
            base: 100,
            end: 100,
            furthest: 100,
            active: true,
            ..Window::default()
        };
        for part in [&b"abcd"[..], b"efgh", b"ij"] {
            window.end += part.len() as u64;
            window.segments.push_back(Bytes::copy_from_slice(part));
        }
        assert_eq!(window.copy(102, 107), b"cdefg");
        assert_eq!(window.copy(100, 110), b"abcdefghij");
        assert!(window.covers(105) && !window.covers(99));
        window.furthest = 100 + BEHIND + 9;
        window.trim();
        assert_eq!(window.base, 108);
        assert_eq!(window.copy(108, 110), b"ij");
    }
}
