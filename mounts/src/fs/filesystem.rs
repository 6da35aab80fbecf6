//! fuser's entry points: cheap, local answers inline; anything that needs the store as a
//! task on the runtime that replies when it is done.

use std::ffi::OsStr;
use std::sync::Arc;

use fsd_s3::ObjectStore;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::fs::bucket::{BucketFs, DirEntry, Handle, Inner};
use crate::fs::files::Content;
use crate::fs::kernel::name_of;
use crate::fs::lock::lock;
use crate::fs::tree::{Entry, Kind};

const GENERATION: Generation = Generation(0);

/// `.` and `..` come first; entries follow at offsets from 3.
fn dot_entries(
    ino: INodeNo,
    attr: Option<FileAttr>,
) -> [(INodeNo, &'static str, Option<FileAttr>); 2] {
    [(ino, ".", attr), (ino, "..", attr)]
}

impl<S: ObjectStore> Filesystem for BucketFs<S> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Ask for readdirplus (`ls -l` then needs no lookup per entry), for the kernel to
        // drop cached pages when a file's size or mtime changes, and for O_TRUNC to come
        // with the open (else the kernel truncates first, which would upload an empty
        // object before the real one).
        let _ = config.add_capabilities(
            InitFlags::FUSE_DO_READDIRPLUS
                | InitFlags::FUSE_READDIRPLUS_AUTO
                | InitFlags::FUSE_AUTO_INVAL_DATA
                | InitFlags::FUSE_ATOMIC_O_TRUNC,
        );

        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_readahead(1 << 20);
        Ok(())
    }

    fn destroy(&mut self) {
        let unsaved = lock(&self.inner.spills)
            .values()
            .filter(|spill| spill.pending().is_some())
            .count();
        if unsaved > 0 {
            tracing::error!(unsaved, "unmounted with files whose upload never succeeded");
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let mut tree = lock(&self.inner.tree);
        tree.forget(ino.0, nlookup);
        tracing::trace!(ino = ino.0, nlookup, known = tree.known(), "forget");
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = match name_of(name) {
            Ok(name) => name.to_string(),
            // A name no key can have does not exist.
            Err(_) => return reply.error(Errno::ENOENT),
        };
        self.spawn(move |inner| async move {
            let result = inner.lookup(parent.0, &name).await;
            answer_entry(&inner, result, reply, "lookup");
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.spawn(move |inner| async move { answer_attr(&inner, ino, reply, "getattr").await });
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Modes, owners and times are not stored in the bucket: only a size change acts.
        self.spawn(move |inner| async move {
            if let Some(size) = size
                && let Err(error) = inner.truncate(ino.0, fh.map(|fh| fh.0), size).await
            {
                return reply.refuse("truncate", error);
            }
            answer_attr(&inner, ino, reply, "setattr").await
        });
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let name = match name_of(name) {
            Ok(name) => name.to_string(),
            Err(error) => return reply.error(error),
        };
        self.spawn(move |inner| async move {
            let result = inner.mkdir(parent.0, &name).await;
            answer_entry(&inner, result, reply, "mkdir");
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.name_op(
            "unlink",
            parent,
            name,
            reply,
            |inner, parent, name| async move { inner.unlink(parent, &name).await },
        );
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.name_op(
            "rmdir",
            parent,
            name,
            reply,
            |inner, parent, name| async move { inner.rmdir(parent, &name).await },
        );
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            return reply.error(Errno::EINVAL);
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        let new_name = match name_of(newname) {
            Ok(name) => name.to_string(),
            Err(error) => return reply.error(error),
        };
        self.name_op(
            "rename",
            parent,
            name,
            reply,
            move |inner, parent, name| async move {
                inner
                    .rename(parent, &name, newparent.0, &new_name, no_replace)
                    .await
            },
        );
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let truncate = flags.0 & libc::O_TRUNC != 0;
        self.spawn(move |inner| async move {
            match inner.open(ino.0, write, truncate).await {
                Ok((fh, keep_cache)) => {
                    // An unchanged object is read from the kernel's cache again.
                    let flags = if keep_cache {
                        FopenFlags::FOPEN_KEEP_CACHE
                    } else {
                        FopenFlags::empty()
                    };
                    reply.opened(FileHandle(fh), flags)
                }

                Err(error) => reply.refuse("open", error),
            }
        });
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let result = name_of(name).and_then(|name| self.inner.create(parent.0, name));
        match result {
            Ok((ino, attr, fh)) => {
                self.inner.handed_out(ino);
                reply.created(
                    &self.inner.ttl(),
                    &attr,
                    GENERATION,
                    FileHandle(fh),
                    FopenFlags::empty(),
                )
            }
            Err(error) => reply.refuse("create", error),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.inner.content(fh.0) {
            Err(error) => reply.refuse("read", error),
            Ok(Content::Local(spill)) => match Inner::<S>::read_spill(&spill, offset, size) {
                Ok(bytes) => reply.data(&bytes),
                Err(error) => reply.refuse("read", error),
            },
            Ok(Content::Remote(reader)) => {
                self.runtime.spawn(async move {
                    match reader.read(offset, u64::from(size)).await {
                        Ok(bytes) => reply.data(&bytes),
                        Err(error) => reply.refuse("read", error),
                    }
                });
            }
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.inner.write(fh.0, offset, data) {
            Ok(written) => reply.written(written),
            Err(error) => reply.refuse("write", error),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.spawn(move |inner| async move { empty(reply, "flush", inner.flush(fh.0).await) });
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(move |inner| async move { empty(reply, "fsync", inner.flush(fh.0).await) });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.spawn(move |inner| async move { empty(reply, "release", inner.release(fh.0).await) });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.spawn(move |inner| async move {
            match inner.list_dir(ino.0).await {
                Ok(entries) => {
                    let fh = inner.add_handle(Handle::Dir(Arc::new(entries)));
                    reply.opened(FileHandle(fh), FopenFlags::empty());
                }
                Err(error) => reply.refuse("opendir", error),
            }
        });
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(entries) = self.inner.dir_handle(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let dots = dot_entries(ino, None);
        let all = dots
            .iter()
            .map(|(ino, name, _)| (*ino, *name, FileType::Directory))
            .chain(
                entries
                    .iter()
                    .map(|entry| (INodeNo(entry.ino), entry.name.as_str(), entry.attr.kind)),
            );
        for (index, (ino, name, kind)) in all.enumerate().skip(offset as usize) {
            if reply.add(ino, index as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let Some(entries) = self.inner.dir_handle(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let ttl = self.inner.ttl();
        let dir_attr = self.inner.cached_attr(ino.0);
        let Some(dir_attr) = dir_attr else {
            return reply.error(Errno::ENOENT);
        };
        let dots = dot_entries(ino, Some(dir_attr));
        let all = dots
            .iter()
            .map(|(ino, name, attr)| (*ino, *name, attr.unwrap_or(dir_attr)))
            .chain(
                entries
                    .iter()
                    .map(|entry| (INodeNo(entry.ino), entry.name.as_str(), entry.attr)),
            );
        // The kernel makes a name from every entry handed here, for the TTL: the listing
        // is the handle's, read when the directory was opened, so a name known gone since
        // (a `rm -r` racing a reader of the directory) is left out, or a file deleted would
        // be found again by its name. Answered under the tree's lock, which a removal takes.
        let mut tree = lock(&self.inner.tree);
        for (index, (entry_ino, name, attr)) in all.enumerate().skip(offset as usize) {
            let is_dot = index < dots.len();
            if !is_dot && tree.known_absent(ino.0, name) {
                continue;
            }
            // Replaced since (a rename onto the name) or let go by the tree (the kernel
            // forgot it): the name's inode now, never one nothing answers for, which the
            // kernel would put in place of the name's (a restore's next step on it failed
            // with ENOENT).
            let now_at_name = if is_dot {
                None
            } else {
                match tree.child(ino.0, name) {
                    Some(current) => (current != entry_ino.0).then_some(current),
                    // As the kernel would have it for the TTL from the handle's listing.
                    None => Some(tree.upsert(
                        ino.0,
                        &Entry {
                            name: name.to_string(),
                            kind: match attr.kind {
                                FileType::Directory => Kind::Dir,
                                _ => Kind::File,
                            },
                            size: attr.size,
                            mtime: attr.mtime,
                            etag: String::new(),
                        },
                        std::time::Instant::now(),
                    )),
                }
            };
            let (entry_ino, attr) = match now_at_name {
                None => (entry_ino, attr),
                Some(current) => match tree.get(current) {
                    Some(node) => (INodeNo(current), self.inner.attr(current, node)),
                    None => continue,
                },
            };
            if reply.add(entry_ino, index as u64 + 1, name, &ttl, &attr, GENERATION) {
                break;
            }
            // The kernel takes a reference to every entry but `.` and `..`.
            if !is_dot {
                tree.note_lookup(entry_ino.0);
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.inner.handles).remove(&fh.0);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // A bucket has no fixed size: report plenty, so tools that check free space go on.
        const BLOCKS: u64 = 1 << 40;
        reply.statfs(BLOCKS, BLOCKS, BLOCKS, 1 << 32, 1 << 32, 4096, 1024, 4096);
    }
}

/// An entry as the answer; the kernel takes a reference to it, which `forget` gives back.
fn answer_entry(
    inner: &Inner<impl ObjectStore>,
    result: Result<(u64, FileAttr), Errno>,
    reply: ReplyEntry,
    op: &'static str,
) {
    match result {
        Ok((ino, attr)) => {
            inner.handed_out(ino);
            reply.entry(&inner.ttl(), &attr, GENERATION)
        }
        Err(error) => reply.refuse(op, error),
    }
}

/// The attributes of `ino`, fresh enough to trust, as the answer.
async fn answer_attr(
    inner: &Inner<impl ObjectStore>,
    ino: INodeNo,
    reply: ReplyAttr,
    op: &'static str,
) {
    match inner.getattr(ino.0).await {
        Ok(attr) => reply.attr(&inner.ttl(), &attr),
        Err(error) => reply.refuse(op, error),
    }
}

fn empty(reply: ReplyEmpty, op: &'static str, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(error) => reply.refuse(op, error),
    }
}

/// Every fuser reply answers an error the same way; a refusal is logged at debug with the
/// operation it answers.
trait Refuse {
    fn refuse(self, op: &'static str, error: Errno);
}

macro_rules! refuse_with_error {
    ($($reply:ty),*) => {
        $(impl Refuse for $reply {
            fn refuse(self, op: &'static str, error: Errno) {
                tracing::debug!(op, ?error, "refused");
                self.error(error);
            }
        })*
    };
}

refuse_with_error!(
    ReplyEntry,
    ReplyAttr,
    ReplyOpen,
    ReplyCreate,
    ReplyData,
    ReplyWrite,
    ReplyEmpty
);

impl<S: ObjectStore> BucketFs<S> {
    /// An operation on `parent/name` that answers with nothing but success or an errno.
    fn name_op<F>(
        &self,
        label: &'static str,
        parent: INodeNo,
        name: &OsStr,
        reply: ReplyEmpty,
        op: impl FnOnce(Arc<Inner<S>>, u64, String) -> F + Send + 'static,
    ) where
        F: Future<Output = Result<(), Errno>> + Send + 'static,
    {
        let name = match name_of(name) {
            Ok(name) => name.to_string(),
            Err(_) => return reply.error(Errno::ENOENT),
        };
        self.spawn(
            move |inner| async move { empty(reply, label, op(inner, parent.0, name).await) },
        );
    }
}

impl<S: ObjectStore> Inner<S> {
    /// An entry reply is about to give the kernel a reference to `ino`.
    fn handed_out(&self, ino: u64) {
        lock(&self.tree).note_lookup(ino);
    }

    fn dir_handle(&self, fh: u64) -> Option<Arc<Vec<DirEntry>>> {
        match lock(&self.handles).get(&fh) {
            Some(Handle::Dir(entries)) => Some(Arc::clone(entries)),
            _ => None,
        }
    }
}
