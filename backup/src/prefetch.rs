//! Reading small files ahead, in parallel, in the order the archive writer will ask for them.
//!
//! A workspace is mostly small files; opening and reading them one by one on the writing
//! thread would leave the other cores idle. The prefetcher reads batches of them on a
//! thread pool into a bounded channel; the writer takes them in order.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::reader::Reader;

/// Files up to this size are read ahead whole.
pub(crate) const SMALL_FILE: u64 = 256 * 1024;
const BATCH: usize = 512;
/// Batches waiting at most: bounds memory to BATCH × SMALL_FILE × this.
const BATCHES_AHEAD: usize = 4;

type Item = (PathBuf, io::Result<Vec<u8>>);

/// The receiving end, shared by every small file's reader.
pub(crate) struct Prefetched {
    rx: Receiver<Vec<Item>>,
    ready: VecDeque<Item>,
}

impl Prefetched {
    /// Starts reading `paths` (in writer order) on `pool`.
    pub(crate) fn start(
        paths: Vec<PathBuf>,
        reader: Reader,
        pool: Arc<rayon::ThreadPool>,
    ) -> Arc<Mutex<Prefetched>> {
        let (tx, rx) = sync_channel(BATCHES_AHEAD);
        std::thread::Builder::new()
            .name("fsd-prefetch".into())
            .spawn(move || {
                for batch in paths.chunks(BATCH) {
                    let items: Vec<Item> = pool.install(|| {
                        batch
                            .par_iter()
                            .map(|path| (path.clone(), reader.read(path)))
                            .collect()
                    });
                    if tx.send(items).is_err() {
                        return; // the writer gave up
                    }
                }
            })
            .ok();
        Arc::new(Mutex::new(Prefetched {
            rx,
            ready: VecDeque::new(),
        }))
    }

    /// The contents of `path`, which must be the next file in order; `None` when the
    /// prefetcher has nothing for it (the caller then reads the file itself).
    pub(crate) fn take(&mut self, path: &PathBuf) -> Option<io::Result<Vec<u8>>> {
        loop {
            if self.ready.is_empty() {
                self.ready.extend(self.rx.recv().ok()?);
            }
            let (next, contents) = self.ready.pop_front()?;
            if &next == path {
                return Some(contents);
            }
        }
    }
}
