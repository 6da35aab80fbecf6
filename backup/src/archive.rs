//! Building squashfs archives of a directory, in-process.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::reader::Reader;
use backhand::{FilesystemWriter, NodeHeader};

use crate::codec::{self, BLOCK_SIZE, BlockReader, Codec};
use crate::index::{Index, IndexEntry};
use crate::prefetch::{Prefetched, SMALL_FILE};
use crate::progress::Progress;
use crate::{BackupError, select};
use fsd_api::scratch::{self, ScratchKind};

/// How to build an archive.
#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    pub codec: Codec,
    /// Compression threads; 0 means one per core.
    pub threads: usize,
    pub excludes: Vec<String>,
    pub gitignore: bool,
    pub reader: Reader,
}

impl Default for ArchiveOptions {
    fn default() -> Self {
        ArchiveOptions {
            codec: Codec::Zstd,
            threads: 0,
            excludes: Vec::new(),
            gitignore: false,
            reader: Reader::default(),
        }
    }
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveSummary {
    pub size_bytes: u64,
    pub entries: u64,
    /// Bytes of file data read (before compression).
    pub data_bytes: u64,
}

/// One entry to add, in the order backhand wants them (sorted, parents first).
pub(crate) enum Entry {
    Dir,
    File { source: PathBuf },
    Symlink { target: PathBuf },
    CharDevice { rdev: u32 },
    BlockDevice { rdev: u32 },
    Fifo,
    Socket,
}

/// The archive under construction; `layer.rs` adds entries of its own (whiteouts).
pub(crate) struct Builder<'a> {
    writer: FilesystemWriter<'a, 'a, 'a>,
    codec: Codec,
    pool: Arc<rayon::ThreadPool>,
    read_bytes: Arc<AtomicU64>,
    progress: Progress,
    reader: Reader,
    /// Small files in writer order, read ahead once the write starts.
    small_files: Vec<PathBuf>,
    prefetched: Arc<Mutex<Option<Arc<Mutex<Prefetched>>>>>,
    pub(crate) entries: u64,
    pub(crate) data_bytes: u64,
}

impl<'a> Builder<'a> {
    pub(crate) fn new(
        codec: Codec,
        threads: usize,
        progress: Progress,
        reader: Reader,
    ) -> Result<Self, BackupError> {
        let mut writer = FilesystemWriter::default();
        writer.set_kind(codec::kind(codec));
        writer.set_compressor(
            codec
                .filesystem_compressor()
                .map_err(BackupError::archive)?,
        );
        writer.set_block_size(BLOCK_SIZE);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("fsd-compress-{i}"))
            .build()
            .map_err(|e| BackupError::Archive(e.to_string()))?;
        Ok(Builder {
            writer,
            codec,
            pool: Arc::new(pool),
            read_bytes: Arc::new(AtomicU64::new(0)),
            progress,
            reader,
            small_files: Vec::new(),
            prefetched: Arc::new(Mutex::new(None)),
            entries: 0,
            data_bytes: 0,
        })
    }

    /// Sets the root directory's mode, owner and mtime from `meta`.
    pub(crate) fn set_root(&mut self, meta: &fs::Metadata) {
        self.writer.set_root_mode((meta.mode() & 0o7777) as u16);
        self.writer.set_root_uid(meta.uid());
        self.writer.set_root_gid(meta.gid());
        self.writer.set_time(mtime(meta));
    }

    /// Adds `entry` at `path` (relative to the archive root) with `meta`'s mode and owner.
    pub(crate) fn push(
        &mut self,
        path: &Path,
        entry: Entry,
        meta: &fs::Metadata,
    ) -> Result<(), BackupError> {
        let header = NodeHeader::new(
            (meta.mode() & 0o7777) as u16,
            meta.uid(),
            meta.gid(),
            mtime(meta),
        );
        let target = Path::new("/").join(path);
        let result = match entry {
            Entry::Dir => self.writer.push_dir(&target, header),
            Entry::File { source } => {
                self.data_bytes += meta.len();
                let read_bytes = Arc::clone(&self.read_bytes);
                let progress = self.progress.clone();
                let on_read = Arc::new(move |n: u64| {
                    let done = read_bytes.fetch_add(n, Ordering::Relaxed) + n;
                    progress.report(done);
                });
                let compressor = self
                    .codec
                    .filesystem_compressor()
                    .map_err(BackupError::archive)?;
                let small = meta.len() <= SMALL_FILE;
                if small {
                    self.small_files.push(source.clone());
                }
                let reader = BlockReader::new(
                    source,
                    self.reader.clone(),
                    self.codec,
                    compressor,
                    Arc::clone(&self.pool),
                    on_read,
                );
                let reader = LazyPrefetch {
                    reader: Some(reader),
                    small,
                    slot: Arc::clone(&self.prefetched),
                    ready: None,
                };
                self.writer.push_file(reader, &target, header)
            }
            Entry::Symlink { target: link } => self.writer.push_symlink(link, &target, header),
            Entry::CharDevice { rdev } => self.writer.push_char_device(rdev, &target, header),
            Entry::BlockDevice { rdev } => self.writer.push_block_device(rdev, &target, header),
            Entry::Fifo => self.writer.push_fifo(&target, header),
            Entry::Socket => self.writer.push_socket(&target, header),
        };
        result.map_err(|e| BackupError::Archive(format!("{}: {e}", path.display())))?;
        self.entries += 1;
        Ok(())
    }

    /// Writes the image to `archive` atomically (temp file, fsync, rename).
    pub(crate) fn finish(mut self, archive: &Path) -> Result<ArchiveSummary, BackupError> {
        self.progress.set_total(self.data_bytes);
        let files = std::mem::take(&mut self.small_files);
        if let Ok(mut slot) = self.prefetched.lock() {
            *slot = Some(Prefetched::start(
                files,
                self.reader.clone(),
                Arc::clone(&self.pool),
            ));
        }
        let temp = temp_path(archive);
        let result = (|| {
            // Created only now: a caller's mistake (no source directory, no restore for a
            // layer) is found before anything is written.
            if let Some(parent) = archive.parent() {
                fs::create_dir_all(parent)?;
            }
            let file = File::create(&temp)?;
            let mut out = BufWriter::with_capacity(1 << 20, file);
            // The reader's own error (a file refused as outside the roots among them).
            let (_, size) = self.writer.write(&mut out).map_err(std::io::Error::from)?;
            out.flush()?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            // Data of a duplicate file is written, then written over: the file can be longer
            // than the image, with the leftover past its end.
            file.set_len(size)?;
            file.sync_all()?;
            fs::rename(&temp, archive)?;
            if let Some(parent) = archive.parent() {
                File::open(parent)?.sync_all()?;
            }
            Ok::<u64, std::io::Error>(size)
        })();
        match result {
            Ok(size_bytes) => Ok(ArchiveSummary {
                size_bytes,
                entries: self.entries,
                data_bytes: self.data_bytes,
            }),
            Err(error) => {
                let _ = fs::remove_file(&temp);
                match BackupError::io(archive, error) {
                    outside @ BackupError::Outside(_) => Err(outside),
                    BackupError::Io { source, .. } => Err(BackupError::Archive(source.to_string())),
                    other => Err(other),
                }
            }
        }
    }
}

/// A file's reader that picks up the prefetcher once the write has started it.
struct LazyPrefetch {
    reader: Option<BlockReader>,
    small: bool,
    slot: Arc<Mutex<Option<Arc<Mutex<Prefetched>>>>>,
    ready: Option<BlockReader>,
}

impl Read for LazyPrefetch {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(reader) = self.reader.take() {
            let prefetched = if self.small {
                self.slot.lock().ok().and_then(|slot| slot.clone())
            } else {
                None
            };
            self.ready = Some(match prefetched {
                Some(prefetched) => reader.prefetched(prefetched),
                None => reader,
            });
        }
        match self.ready.as_mut() {
            Some(reader) => reader.read(buf),
            None => Ok(0),
        }
    }
}

/// Classifies a directory entry for the archive.
pub(crate) fn entry_for(
    path: &Path,
    meta: &fs::Metadata,
    reader: &Reader,
) -> Result<Entry, BackupError> {
    let kind = meta.file_type();
    Ok(if kind.is_dir() {
        Entry::Dir
    } else if kind.is_file() {
        Entry::File {
            source: path.to_path_buf(),
        }
    } else if kind.is_symlink() {
        Entry::Symlink {
            target: reader
                .read_link(path)
                .map_err(|e| BackupError::io(path, e))?,
        }
    } else if kind.is_char_device() {
        Entry::CharDevice {
            rdev: meta.rdev() as u32,
        }
    } else if kind.is_block_device() {
        Entry::BlockDevice {
            rdev: meta.rdev() as u32,
        }
    } else if kind.is_fifo() {
        Entry::Fifo
    } else {
        Entry::Socket
    })
}

/// Builds a squashfs archive of `dir` at `archive`.
pub fn create(
    dir: &Path,
    archive: &Path,
    options: &ArchiveOptions,
    progress: Progress,
) -> Result<ArchiveSummary, BackupError> {
    Ok(create_indexed(dir, archive, options, progress)?.0)
}

/// Builds a squashfs archive of `dir` at `archive`, and the index of what it holds (each
/// entry as it was stat'ed, before its content was read: a file written meanwhile shows
/// as changed to the next snapshot).
pub fn create_indexed(
    dir: &Path,
    archive: &Path,
    options: &ArchiveOptions,
    progress: Progress,
) -> Result<(ArchiveSummary, Index), BackupError> {
    let root_meta = root_of(dir, &options.reader)?;
    let mut builder = Builder::new(
        options.codec,
        threads(options),
        progress,
        options.reader.clone(),
    )?;
    builder.set_root(&root_meta);
    let mut index = Index::default();
    for scanned in scan(dir, archive, options)? {
        let Scanned {
            relative,
            path,
            meta,
        } = scanned?;
        index.entries.push(IndexEntry::new(&relative, &meta, 0));
        let kind = entry_for(&path, &meta, &options.reader)?;
        builder.push(&relative, kind, &meta)?;
    }
    Ok((builder.finish(archive)?, index))
}

/// The metadata of the directory to archive; an error when it is not one.
pub(crate) fn root_of(dir: &Path, reader: &Reader) -> Result<fs::Metadata, BackupError> {
    let root_meta = reader.metadata(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => BackupError::NotADirectory(dir.to_path_buf()),
        _ => BackupError::io(dir, e),
    })?;
    if !root_meta.is_dir() {
        return Err(BackupError::NotADirectory(dir.to_path_buf()));
    }
    Ok(root_meta)
}

/// Compression threads: as asked, or one per core.
pub(crate) fn threads(options: &ArchiveOptions) -> usize {
    if options.threads == 0 {
        available_threads()
    } else {
        options.threads
    }
}

/// One entry of the tree that goes into an archive.
pub(crate) struct Scanned {
    pub relative: PathBuf,
    pub path: PathBuf,
    pub meta: fs::Metadata,
}

/// What of `dir` goes into `archive` (excludes and gitignore applied, the archive and its
/// temp files left out), parents first; entries gone while the walk runs are skipped.
pub(crate) fn scan<'a>(
    dir: &'a Path,
    archive: &'a Path,
    options: &'a ArchiveOptions,
) -> Result<impl Iterator<Item = Result<Scanned, BackupError>> + 'a, BackupError> {
    let walk = select::walk(dir, &options.excludes, options.gitignore, archive)?;
    Ok(walk.filter_map(move |entry| {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => return Some(Err(error)),
        };
        scanned(dir, entry.path(), archive, &options.reader)
    }))
}

/// `path` (under `dir`) as a scan records it; `None` for the root, the archive being
/// written and its temp files, and what is gone.
fn scanned(
    dir: &Path,
    path: &Path,
    archive: &Path,
    reader: &Reader,
) -> Option<Result<Scanned, BackupError>> {
    let relative = path.strip_prefix(dir).ok()?;
    if relative.as_os_str().is_empty() || path == archive || is_temp_of(archive, path) {
        return None;
    }
    match reader.lstat(path) {
        Ok(meta) => Some(Ok(Scanned {
            relative: relative.to_path_buf(),
            path: path.to_path_buf(),
            meta,
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(BackupError::io(path, e))),
    }
}

/// What of `dir/top` (itself, and all it holds when it is a directory) goes into
/// `archive`, chosen as [`scan`] chooses (excludes; not gitignore); nothing when it is gone.
pub(crate) fn scan_under<'a>(
    dir: &'a Path,
    top: &Path,
    archive: &'a Path,
    options: &'a ArchiveOptions,
) -> Result<impl Iterator<Item = Result<Scanned, BackupError>> + 'a, BackupError> {
    let start = dir.join(top);
    // Only a directory is walked: walkdir follows a symlink it is started on (and loses a
    // dangling one).
    let is_dir = options.reader.lstat(&start).is_ok_and(|meta| meta.is_dir());
    let excluded = move |path: &Path| {
        path.strip_prefix(dir)
            .is_ok_and(|relative| select::matches_exclude(&options.excludes, relative))
    };
    let walk = walkdir::WalkDir::new(&start)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(move |entry| !excluded(entry.path()))
        .take_while(move |_| is_dir);
    let single = (!is_dir && !excluded(&start)).then(|| start.clone());
    let single = single
        .into_iter()
        .filter_map(move |path| scanned(dir, &path, archive, &options.reader));
    Ok(single.chain(walk.filter_map(move |entry| {
        let entry = match entry {
            Ok(entry) => entry,
            // Gone since the change was listed: not in the snapshot.
            Err(error)
                if error
                    .io_error()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound) =>
            {
                return None;
            }
            Err(error) => return Some(Err(BackupError::Walk(error.to_string()))),
        };
        scanned(dir, entry.path(), archive, &options.reader)
    })))
}

/// The temp file an archive is written to before it is renamed into place; unique per
/// writer, so two creates of the same archive never write one file.
pub fn temp_path(archive: &Path) -> PathBuf {
    scratch::scratch_path(archive, ScratchKind::Partial)
}

/// Removes archive and download temp files in `dir` and below whose writer process is gone
/// (a crash mid-create or mid-download); returns how many. Temp files of live processes are
/// left alone.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let mut removed = 0;
    for entry in walkdir::WalkDir::new(dir)
        .min_depth(1)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        if !entry.file_type().is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy();
        let Some(scratch) = scratch::parse(&name) else {
            continue;
        };
        if !Path::new(&format!("/proc/{}", scratch.pid)).exists()
            && fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Whether `path` is a temp file of `archive` (one being written, or left by a crash).
fn is_temp_of(archive: &Path, path: &Path) -> bool {
    let (Some(name), Some(candidate)) = (archive.file_name(), path.file_name()) else {
        return false;
    };
    path.parent() == archive.parent()
        && candidate
            .to_str()
            .and_then(scratch::parse)
            .is_some_and(|scratch| std::ffi::OsStr::new(scratch.target) == name)
}

pub(crate) fn available_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn mtime(meta: &fs::Metadata) -> u32 {
    meta.mtime().clamp(0, u32::MAX as i64) as u32
}
