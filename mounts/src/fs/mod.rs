//! The FUSE filesystem over a bucket. The kernel's requests arrive on fuser's threads;
//! whatever needs the store runs as a task on the tokio runtime and replies when done, so
//! a slow GET never holds up a `stat` of a cached name.

mod eager;
mod files;
mod filesystem;
pub mod keys;
mod names;
mod reader;
mod spill;
pub mod tree;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fsd_s3::{ClientError, ObjectClient, ObjectStore};
use fuser::{Errno, FileAttr, FileType, INodeNo};
use tokio::runtime::Handle as Runtime;

use reader::Reader;
use spill::Spill;
use tree::{Ino, Kind, Node, Tree};

/// What a mount is and how it behaves.
#[derive(Debug, Clone)]
pub struct FsOptions {
    /// Key prefix the mount shows (normalized: empty or ending in `/`).
    pub prefix: String,
    pub read_only: bool,
    /// How long attributes, listings and absent names are trusted.
    pub cache_ttl: Duration,
    pub uid: u32,
    pub gid: u32,
    /// Where files open for writing are buffered.
    pub spill_dir: PathBuf,
}

/// An entry of an open directory, fixed when it was opened.
pub(crate) struct DirEntry {
    name: String,
    ino: Ino,
    attr: FileAttr,
}

pub(crate) enum Handle<S: ObjectStore> {
    Dir(Arc<Vec<DirEntry>>),
    File {
        ino: Ino,
        /// Set when opened for writing.
        spill: Option<Arc<Spill>>,
        reader: Arc<Reader<S>>,
    },
}

pub(crate) struct Inner<S: ObjectStore> {
    client: S,
    options: FsOptions,
    tree: Mutex<Tree>,
    handles: Mutex<HashMap<u64, Handle<S>>>,
    /// Files with local content, by inode: every handle of the inode reads and writes it.
    spills: Mutex<HashMap<Ino, Arc<Spill>>>,
    next_handle: AtomicU64,
    /// Where part uploads of files being written run.
    runtime: Runtime,
    /// Part uploads in flight across the mount.
    part_slots: Arc<tokio::sync::Semaphore>,
}

/// The filesystem handed to fuser, over any [`ObjectStore`] (the HTTP client when mounted;
/// the in-memory store in unit tests).
pub struct BucketFs<S: ObjectStore = ObjectClient> {
    inner: Arc<Inner<S>>,
    runtime: Runtime,
}

/// The errno a failed store call becomes. This is the FUSE boundary: what the store said
/// (status, S3 code, message) is logged here, since the errno cannot carry it.
pub(crate) fn errno(error: &ClientError) -> Errno {
    if error.status() == Some(404) {
        tracing::debug!(%error, "store call: not found");
    } else {
        tracing::warn!(%error, "store call failed");
    }
    match error.status() {
        Some(404) => Errno::ENOENT,
        Some(403) => Errno::EACCES,
        _ => Errno::EIO,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<S: ObjectStore> BucketFs<S> {
    pub fn new(client: S, options: FsOptions, runtime: Runtime) -> BucketFs<S> {
        let tree = Tree::new(options.cache_ttl);
        BucketFs {
            inner: Arc::new(Inner {
                client,
                options,
                tree: Mutex::new(tree),
                handles: Mutex::new(HashMap::new()),
                spills: Mutex::new(HashMap::new()),
                next_handle: AtomicU64::new(1),
                runtime: runtime.clone(),
                part_slots: Arc::new(tokio::sync::Semaphore::new(files::PARTS_IN_FLIGHT)),
            }),
            runtime,
        }
    }

    /// Runs `work` on the runtime; fuser's thread goes back to the kernel at once.
    fn spawn<F>(&self, work: impl FnOnce(Arc<Inner<S>>) -> F + Send + 'static)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        self.runtime.spawn(work(inner));
    }
}

impl<S: ObjectStore> Inner<S> {
    fn ttl(&self) -> Duration {
        self.options.cache_ttl
    }

    fn attr(&self, ino: Ino, node: &Node) -> FileAttr {
        let size = match node.kind {
            Kind::File => lock(&self.spills)
                .get(&ino)
                .map_or(node.size, |spill| spill.size()),
            Kind::Dir => 0,
        };
        let (kind, perm, nlink) = match node.kind {
            Kind::File => (FileType::RegularFile, 0o644, 1),
            Kind::Dir => (FileType::Directory, 0o755, 2),
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: node.mtime,
            mtime: node.mtime,
            ctime: node.mtime,
            crtime: node.mtime,
            kind,
            perm,
            nlink,
            uid: self.options.uid,
            gid: self.options.gid,
            rdev: 0,
            // Large, so `cp` and friends move data in big requests.
            blksize: 1 << 20,
            flags: 0,
        }
    }

    fn cached_attr(&self, ino: Ino) -> Option<FileAttr> {
        let tree = lock(&self.tree);
        tree.get(ino).map(|node| self.attr(ino, node))
    }

    fn add_handle(&self, handle: Handle<S>) -> u64 {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, handle);
        fh
    }

    fn writable(&self) -> Result<(), Errno> {
        if self.options.read_only {
            Err(Errno::EROFS)
        } else {
            Ok(())
        }
    }
}

fn name_of(name: &OsStr) -> Result<&str, Errno> {
    let name = name.to_str().ok_or(Errno::EINVAL)?;
    if keys::usable_name(name) {
        Ok(name)
    } else {
        Err(Errno::EINVAL)
    }
}

fn now() -> SystemTime {
    SystemTime::now()
}
