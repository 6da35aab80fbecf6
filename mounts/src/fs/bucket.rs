//! The filesystem fuser is handed: a mount's options, its state (the cached tree, open
//! handles, files with local content) and the helpers every request handler shares.

use std::collections::HashMap;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsd_s3::{ObjectClient, ObjectStore};
use fuser::{Errno, FileAttr, FileType, INodeNo};
use tokio::runtime::Handle as Runtime;

use super::lock::lock;
use super::reader::Reader;
use super::spill::Spill;
use super::tree::{Ino, Kind, Node, Tree};

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
    pub(super) name: String,
    pub(super) ino: Ino,
    pub(super) attr: FileAttr,
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
    pub(super) client: S,
    pub(super) options: FsOptions,
    pub(super) tree: Mutex<Tree>,
    pub(super) handles: Mutex<HashMap<u64, Handle<S>>>,
    /// Files with local content, by inode: every handle of the inode reads and writes it.
    pub(super) spills: Mutex<HashMap<Ino, Arc<Spill>>>,
    pub(super) next_handle: AtomicU64,
    /// Where part uploads of files being written run.
    pub(super) runtime: Runtime,
    /// Part uploads in flight across the mount.
    pub(super) part_slots: Arc<tokio::sync::Semaphore>,
}

/// Parts in flight per upload (and across a mount's files being written).
pub(super) const PARTS_IN_FLIGHT: usize = 8;

/// The filesystem handed to fuser, over any [`ObjectStore`] (the HTTP client when mounted;
/// the in-memory store in unit tests).
pub struct BucketFs<S: ObjectStore = ObjectClient> {
    pub(super) inner: Arc<Inner<S>>,
    pub(super) runtime: Runtime,
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
                part_slots: Arc::new(tokio::sync::Semaphore::new(PARTS_IN_FLIGHT)),
            }),
            runtime,
        }
    }

    /// Runs `work` on the runtime; fuser's thread goes back to the kernel at once.
    pub(super) fn spawn<F>(&self, work: impl FnOnce(Arc<Inner<S>>) -> F + Send + 'static)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        self.runtime.spawn(work(inner));
    }
}

impl<S: ObjectStore> Inner<S> {
    pub(super) fn ttl(&self) -> Duration {
        self.options.cache_ttl
    }

    pub(super) fn attr(&self, ino: Ino, node: &Node) -> FileAttr {
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

    pub(super) fn cached_attr(&self, ino: Ino) -> Option<FileAttr> {
        let tree = lock(&self.tree);
        tree.get(ino).map(|node| self.attr(ino, node))
    }

    pub(super) fn add_handle(&self, handle: Handle<S>) -> u64 {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, handle);
        fh
    }

    pub(super) fn writable(&self) -> Result<(), Errno> {
        if self.options.read_only {
            Err(Errno::EROFS)
        } else {
            Ok(())
        }
    }
}
