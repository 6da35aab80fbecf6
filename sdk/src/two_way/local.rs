//! The local side's checked changes: each operation first checks that its path holds what
//! the merge saw (kind, a link's target, a file's hash: taken from the scan's records when
//! size, mtime and inode are unchanged, else read), then changes it. New content goes
//! through a temp file beside its target, renamed over it after a last check.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::content_hash::ContentHash;
use crate::merge::Entry;
use crate::scan::{ScanCache, hash_file};

use super::ops::Op;

/// Why an operation was not made.
#[derive(Debug)]
pub enum Refused {
    /// The path holds something else than the merge saw (changed while the sync ran).
    Changed,
    /// It could not be made (its content is not here, an I/O error).
    Failed(String),
}

impl From<std::io::Error> for Refused {
    fn from(err: std::io::Error) -> Self {
        Refused::Failed(err.to_string())
    }
}

/// Where a file's content is, by hash, for a put.
pub trait Contents {
    /// A local file holding the content `hash` (checked when copied).
    fn source(&self, hash: &ContentHash) -> Option<PathBuf>;

    /// The size of the content `hash`, where it is known without a `stat` (a first upload
    /// of 20,000 files spent a fifth of its own time on one a file).
    fn size(&self, _hash: &ContentHash) -> Option<u64> {
        None
    }

    /// Writes the content `hash` into `temp` (made new), checked against its hash, when
    /// it comes from elsewhere than a file (a stream); `None`: take it from [`source`].
    ///
    /// [`source`]: Contents::source
    fn write(&self, _hash: &ContentHash, _temp: &Path, _mode: u32) -> Option<Result<(), Refused>> {
        None
    }

    /// The content `hash` in memory, when it comes from a stream and is at most `limit`
    /// bytes (taken: the stream moves on to the next), so that a writer thread places it
    /// while the next is read; `None`: [`write`] or [`source`] gives it.
    ///
    /// [`write`]: Contents::write
    /// [`source`]: Contents::source
    fn take(&self, _hash: &ContentHash, _limit: u64) -> Option<Result<Vec<u8>, Refused>> {
        None
    }
}

/// Threads that write files handed to them (a pass's puts, a first download's files): a
/// few, as many as the cores up to 4.
pub(super) fn writer_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4))
}

/// Content a put hands to a writer thread at most (larger content is written as it comes).
const HANDED_AT_MOST: u64 = 1 << 20;
/// Files queued for one writer thread at most.
const QUEUED_A_WRITER: usize = 64;

/// The local tree at `root`.
pub struct LocalTree<'a> {
    pub root: &'a Path,
    pub cache: &'a ScanCache,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The suffix of the sync's temp files (left out of scans).
pub const TEMP_SUFFIX: &str = ".fsd-sync.tmp";

pub(super) fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The process's id once (a system call each time it is asked).
    static PID: std::sync::LazyLock<u32> = std::sync::LazyLock::new(std::process::id);
    path.with_file_name(format!(
        ".{name}.{}-{}{TEMP_SUFFIX}",
        *PID,
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

impl LocalTree<'_> {
    fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// What `relative` holds now, as the merge would see it (`None`: nothing, or what
    /// the merge does not hold).
    pub fn held(&self, relative: &str) -> std::io::Result<Option<Entry>> {
        let path = self.path(relative);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        let mode = crate::scan::permissions(&meta);
        let kind = meta.file_type();
        Ok(if kind.is_dir() {
            Some(Entry::Dir { mode })
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&path)?;
            target.to_str().map(|target| Entry::Link {
                target: target.to_string(),
            })
        } else if kind.is_file() {
            let hash = match self.cache.get(relative) {
                Some(seen) if crate::scan::unchanged(seen, &meta) => seen.hash,
                _ => match hash_file(&path) {
                    Ok(hash) => hash,
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(err) => return Err(err),
                },
            };
            Some(Entry::File { hash, mode })
        } else {
            None
        })
    }

    /// Checks that `relative` holds `expect` (modes aside).
    fn check(&self, relative: &str, expect: Option<&Entry>) -> Result<Option<Entry>, Refused> {
        let found = self.held(relative)?;
        let same = match (&found, expect) {
            (None, None) => true,
            (Some(Entry::Dir { .. }), Some(Entry::Dir { .. })) => true,
            (Some(Entry::File { hash: a, .. }), Some(Entry::File { hash: b, .. })) => a == b,
            (Some(Entry::Link { target: a }), Some(Entry::Link { target: b })) => a == b,
            _ => false,
        };
        if !same {
            return Err(Refused::Changed);
        }
        // Something the merge cannot hold (a FIFO, a device) reads as nothing: never
        // replaced.
        if found.is_none() && std::fs::symlink_metadata(self.path(relative)).is_ok() {
            return Err(Refused::Changed);
        }
        Ok(found)
    }

    /// Makes `ops` in order, answering each one's result; `done` is told how many have
    /// been made or handed on. A file whose content the stream brings (small) is handed to
    /// one of a few writer threads, which write it, check its hash and place it while the
    /// next is read (on one thread, writing 10,000 files was most of a pass's time); any
    /// other operation first waits for the writers, so it is made on the tree the ones
    /// before it left.
    pub fn apply_all(
        &self,
        ops: &[Op],
        contents: &dyn Contents,
        done: &dyn Fn(usize),
    ) -> Vec<Result<(), Refused>> {
        let mut results: Vec<Option<Result<(), Refused>>> =
            std::iter::repeat_with(|| None).take(ops.len()).collect();
        let writers = writer_threads();
        std::thread::scope(|scope| {
            let (made, finished) = std::sync::mpsc::channel::<(usize, Result<(), Refused>)>();
            let queues: Vec<_> = (0..writers)
                .map(|_| {
                    let (queue, handed) =
                        std::sync::mpsc::sync_channel::<(usize, Vec<u8>)>(QUEUED_A_WRITER);
                    let made = made.clone();
                    scope.spawn(move || {
                        for (index, content) in handed {
                            let result = self.put_content(&ops[index], &content);
                            if made.send((index, result)).is_err() {
                                return;
                            }
                        }
                    });
                    queue
                })
                .collect();
            drop(made);
            let mut record = |(index, result): (usize, Result<(), Refused>)| {
                results[index] = Some(result);
            };
            let mut handed = 0usize;
            for (index, op) in ops.iter().enumerate() {
                if let Op::Put {
                    entry: Entry::File { hash, .. },
                    ..
                } = op
                {
                    match contents.take(hash, HANDED_AT_MOST) {
                        Some(Ok(content)) => {
                            let queue = &queues[handed % writers];
                            match queue.send((index, content)) {
                                Ok(()) => handed += 1,
                                Err(_) => record((
                                    index,
                                    Err(Refused::Failed("a file writer stopped".into())),
                                )),
                            }
                            while let Ok(made) = finished.try_recv() {
                                handed -= 1;
                                record(made);
                            }
                            done(index + 1);
                            continue;
                        }
                        Some(Err(refused)) => {
                            record((index, Err(refused)));
                            done(index + 1);
                            continue;
                        }
                        None => {}
                    }
                }
                while handed > 0 {
                    match finished.recv() {
                        Ok(made) => {
                            handed -= 1;
                            record(made);
                        }
                        Err(_) => break,
                    }
                }
                record((index, self.apply(op, contents)));
                done(index + 1);
            }
            drop(queues);
            for made in finished {
                record(made);
            }
        });
        results
            .into_iter()
            .map(|result| result.unwrap_or_else(|| Err(Refused::Failed("not made".into()))))
            .collect()
    }

    /// A put of a file whose content is here in memory (see [`LocalTree::apply_all`]).
    fn put_content(&self, op: &Op, content: &[u8]) -> Result<(), Refused> {
        let Op::Put {
            path,
            expect,
            entry: Entry::File { hash, mode },
        } = op
        else {
            return Err(Refused::Failed("not a file's put".into()));
        };
        let temp = temp_beside(&self.path(path));
        if let Err(refused) = write_checked(&mut &content[..], &temp, hash, *mode) {
            let _ = std::fs::remove_file(&temp);
            return Err(refused);
        }
        self.place(path, expect.as_ref(), &temp)
    }

    /// Makes `op`, taking new files' content from `contents`.
    pub fn apply(&self, op: &Op, contents: &dyn Contents) -> Result<(), Refused> {
        match op {
            Op::Rename { from, to, expect } => {
                self.check(from, Some(expect))?;
                if std::fs::symlink_metadata(self.path(to)).is_ok() {
                    return Err(Refused::Changed);
                }
                std::fs::rename(self.path(from), self.path(to))?;
            }
            Op::Remove { path, expect } => {
                self.check(path, Some(expect))?;
                let at = self.path(path);
                if expect.is_dir() {
                    std::fs::remove_dir(&at).map_err(|err| not_empty(err, Refused::Changed))?;
                } else {
                    std::fs::remove_file(&at)?;
                }
            }
            Op::Chmod { path, expect, mode } => {
                self.check(path, Some(expect))?;
                set_mode(&self.path(path), *mode)?;
            }
            Op::Put {
                path,
                expect,
                entry,
            } => self.put(path, expect.as_ref(), entry, contents)?,
        }
        Ok(())
    }

    fn put(
        &self,
        relative: &str,
        expect: Option<&Entry>,
        entry: &Entry,
        contents: &dyn Contents,
    ) -> Result<(), Refused> {
        let at = self.path(relative);
        match entry {
            Entry::Dir { mode } => {
                let found = self.check(relative, expect)?;
                if found.is_some() {
                    std::fs::remove_file(&at)?;
                }
                std::fs::create_dir(&at)?;
                set_mode(&at, *mode)?;
            }
            Entry::Link { target } => {
                let temp = temp_beside(&at);
                make_link(target, &temp)?;
                self.place(relative, expect, &temp)?;
            }
            Entry::File { hash, mode } => {
                let temp = temp_beside(&at);
                let copied = match contents.write(hash, &temp, *mode) {
                    Some(written) => written,
                    None => contents
                        .source(hash)
                        .ok_or_else(|| {
                            Refused::Failed(format!("{relative}: its content is not here"))
                        })
                        .and_then(|source| copy_checked(&source, &temp, hash, *mode)),
                };
                if let Err(refused) = copied {
                    let _ = std::fs::remove_file(&temp);
                    return Err(refused);
                }
                self.place(relative, expect, &temp)?;
            }
        }
        Ok(())
    }

    /// Renames `temp` over `relative` if it still holds `expect` (an empty directory is
    /// removed first); else `temp` goes.
    fn place(&self, relative: &str, expect: Option<&Entry>, temp: &Path) -> Result<(), Refused> {
        let at = self.path(relative);
        let placed = self.check(relative, expect).and_then(|found| {
            if found.as_ref().is_some_and(Entry::is_dir) {
                std::fs::remove_dir(&at).map_err(|err| not_empty(err, Refused::Changed))?;
            }
            std::fs::rename(temp, &at)?;
            Ok(())
        });
        if placed.is_err() {
            let _ = std::fs::remove_file(temp);
        }
        placed
    }
}

/// Copies `source` to `temp`, refusing content whose hash is not `hash`.
pub(super) fn copy_checked(
    source: &Path,
    temp: &Path,
    hash: &ContentHash,
    mode: u32,
) -> Result<(), Refused> {
    write_checked(&mut std::fs::File::open(source)?, temp, hash, mode)
}

/// Writes `content` into `path` (made new), refusing content whose hash is not `hash`.
pub(super) fn write_checked(
    content: &mut impl std::io::Read,
    path: &Path,
    hash: &ContentHash,
    mode: u32,
) -> Result<(), Refused> {
    use sha2::{Digest, Sha256};
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode & 0o777);
    let mut output = options.open(path)?;
    let mut hasher = Sha256::new();
    let mut tee = Tee {
        out: &mut output,
        hasher: &mut hasher,
    };
    std::io::copy(content, &mut tee)?;
    if ContentHash::from(hasher) != *hash {
        // Changed since it was looked at: the change waits for the next pass.
        return Err(Refused::Changed);
    }
    // Made with its mode unless the umask cut it (or it has bits above the permissions):
    // a `chmod` then, on the open file (a `chmod` a file is an event for every watch).
    if !fsd_api::scratch::made_with_mode(mode) {
        set_file_mode(&output, mode)?;
    }
    Ok(())
}

/// Writes through to `out`, hashing what was written.
pub(crate) struct Tee<'a, W: Write> {
    pub out: &'a mut W,
    pub hasher: &'a mut sha2::Sha256,
}

impl<W: Write> Write for Tee<'_, W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let written = self.out.write(bytes)?;
        self.hasher.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

fn not_empty(err: std::io::Error, refused: Refused) -> Refused {
    if err.kind() == std::io::ErrorKind::DirectoryNotEmpty {
        refused
    } else {
        Refused::Failed(err.to_string())
    }
}

#[cfg(unix)]
pub(super) fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o7777))
}

#[cfg(not(unix))]
pub(super) fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// [`set_mode`] on a file already open (no lookup of its path again).
#[cfg(unix)]
pub(super) fn set_file_mode(file: &std::fs::File, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))
}

#[cfg(not(unix))]
pub(super) fn set_file_mode(_file: &std::fs::File, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(unix)]
pub(super) fn make_link(target: &str, path: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, path)
}

#[cfg(not(unix))]
pub(super) fn make_link(_target: &str, _path: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "symlinks are not made on this system",
    ))
}

#[cfg(all(test, unix))]
mod tests {
    use std::path::PathBuf;

    use crate::content_hash::ContentHash;
    use crate::merge::Entry;
    use crate::scan::{ScanCache, hash_file};
    use crate::two_way::local::{Contents, LocalTree, Refused, TEMP_SUFFIX};
    use crate::two_way::ops::Op;

    /// Content for a put, read from `source`; the user saves `target` while it is copied.
    struct EditedWhileCopied {
        source: PathBuf,
        target: PathBuf,
    }

    impl Contents for EditedWhileCopied {
        fn source(&self, _hash: &ContentHash) -> Option<PathBuf> {
            std::fs::write(&self.target, "the user's edit\n").unwrap();
            Some(self.source.clone())
        }
    }

    /// The sync's temp files in `root`.
    fn temps_left(root: &std::path::Path) -> Vec<String> {
        std::fs::read_dir(root)
            .unwrap()
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(TEMP_SUFFIX))
            .collect()
    }

    /// Content from a stream, in memory: taken once each, the large ones left to
    /// `source` (as the stream leaves them to be written as they come).
    struct Streamed {
        taken: std::cell::RefCell<std::collections::HashMap<ContentHash, Vec<u8>>>,
        large: PathBuf,
    }

    impl Contents for Streamed {
        fn source(&self, _hash: &ContentHash) -> Option<PathBuf> {
            Some(self.large.clone())
        }

        fn take(&self, hash: &ContentHash, limit: u64) -> Option<Result<Vec<u8>, Refused>> {
            let content = self.taken.borrow_mut().remove(hash)?;
            (content.len() as u64 <= limit).then_some(Ok(content))
        }
    }

    /// Puts handed to the writer threads and changes made in order between them end as
    /// the operations say: files inside a directory made by an earlier operation, content
    /// too large to hand written as it comes, and a put over a file edited meanwhile
    /// refused with the edit kept.
    #[test]
    fn many_puts_on_writer_threads_end_as_made_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("edited"), "the user's\n").unwrap();
        let large = vec![7u8; 3 << 20];
        std::fs::write(root.join("large.src"), &large).unwrap();
        let tree = LocalTree {
            root,
            cache: &ScanCache::new(),
        };
        let file = |path: &str, content: &[u8]| Op::Put {
            path: path.into(),
            expect: None,
            entry: Entry::File {
                hash: ContentHash::of(content),
                mode: 0o640,
            },
        };
        let mut ops = Vec::new();
        let mut taken = std::collections::HashMap::new();
        for i in 0..300 {
            let content = format!("file {i}\n").into_bytes();
            ops.push(file(&format!("f{i}"), &content));
            taken.insert(ContentHash::of(&content), content);
        }
        ops.push(Op::Put {
            path: "d".into(),
            expect: None,
            entry: Entry::Dir { mode: 0o755 },
        });
        for i in 0..300 {
            let content = format!("inside {i}\n").into_bytes();
            ops.push(file(&format!("d/g{i}"), &content));
            taken.insert(ContentHash::of(&content), content);
        }
        ops.push(file("large", &large));
        taken.insert(ContentHash::of(&large), large.clone());
        // Over "edited" as if it held nothing: it holds the user's edit now.
        let incoming = b"from the sandbox\n".to_vec();
        ops.push(file("edited", &incoming));
        taken.insert(ContentHash::of(&incoming), incoming);
        let contents = Streamed {
            taken: std::cell::RefCell::new(taken),
            large: root.join("large.src"),
        };
        let told = std::cell::Cell::new(0);
        let results = tree.apply_all(&ops, &contents, &|done| told.set(done));
        assert_eq!(told.get(), ops.len());
        let (last, made) = results.split_last().unwrap();
        assert!(matches!(last, Err(Refused::Changed)), "{last:?}");
        for (op, result) in ops.iter().zip(made) {
            assert!(result.is_ok(), "{op:?}: {result:?}");
        }
        for i in 0..300 {
            let read = |path: String| std::fs::read_to_string(root.join(path)).unwrap();
            assert_eq!(read(format!("f{i}")), format!("file {i}\n"));
            assert_eq!(read(format!("d/g{i}")), format!("inside {i}\n"));
        }
        assert_eq!(std::fs::read(root.join("large")).unwrap(), large);
        assert_eq!(
            std::fs::read_to_string(root.join("edited")).unwrap(),
            "the user's\n"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(root.join("d/g7"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o640);
        let left = temps_left(root);
        assert!(left.is_empty(), "no temp file left: {left:?}");
    }

    #[test]
    fn an_edit_made_while_the_sync_writes_the_same_file_is_kept_and_the_write_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("main.rs"), "old\n").unwrap();
        std::fs::write(root.join("incoming"), "from the sandbox\n").unwrap();
        let tree = LocalTree {
            root,
            cache: &ScanCache::new(),
        };
        // The sandbox's content put at main.rs, over what it holds now.
        let put = |mode| Op::Put {
            path: "main.rs".into(),
            expect: tree.held("main.rs").unwrap(),
            entry: Entry::File {
                hash: hash_file(&root.join("incoming")).unwrap(),
                mode,
            },
        };
        let op = put(0o644);
        let contents = EditedWhileCopied {
            source: root.join("incoming"),
            target: root.join("main.rs"),
        };
        assert!(matches!(tree.apply(&op, &contents), Err(Refused::Changed)));
        assert_eq!(
            std::fs::read_to_string(root.join("main.rs")).unwrap(),
            "the user's edit\n"
        );
        let left = temps_left(root);
        assert!(left.is_empty(), "no temp file left: {left:?}");
        // Nothing in the way: the same put is made.
        let op = put(0o600);
        let plain = EditedWhileCopied {
            source: root.join("incoming"),
            target: root.join("elsewhere"),
        };
        tree.apply(&op, &plain).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("main.rs")).unwrap(),
            "from the sandbox\n"
        );
    }
}
