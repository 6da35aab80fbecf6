//! One archive of a snapshot opened to read single paths (a stored one through
//! [`crate::remote`]): what is at a path, and a file's bytes. backhand reads the archive's
//! inode and directory tables when it opens; a file's data blocks only when it is copied.

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use backhand::{BufReadSeek, FilesystemReader, InnerNode};

use crate::BackupError;
use crate::index::IndexEntry;
use crate::remote::RangedReader;

/// What an archive holds at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Dir {
        mode: u32,
    },
    File {
        mode: u32,
    },
    Symlink {
        target: PathBuf,
    },
    /// A device, FIFO or socket (a whiteout is a 0/0 character device).
    Other,
}

/// An archive open for reading.
pub struct StoredArchive<'b> {
    fs: FilesystemReader<'b>,
    /// Relative path → position in the archive's node list.
    by_path: HashMap<PathBuf, usize>,
}

impl<'b> StoredArchive<'b> {
    pub fn open(reader: impl BufReadSeek + 'b) -> Result<StoredArchive<'b>, BackupError> {
        let fs = FilesystemReader::from_reader(reader)
            .map_err(|e| BackupError::Corrupt(e.to_string()))?;
        let by_path = fs
            .root
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let relative = node.fullpath.strip_prefix("/").unwrap_or(&node.fullpath);
                (relative.to_path_buf(), i)
            })
            .collect();
        Ok(StoredArchive { fs, by_path })
    }

    /// What is at `relative` (the empty path is the root), if anything.
    pub fn get(&self, relative: &Path) -> Option<Found> {
        let node = &self.fs.root.nodes[*self.by_path.get(relative)?];
        let mode = u32::from(node.header.permissions);
        Some(match &node.inner {
            InnerNode::Dir(_) => Found::Dir { mode },
            InnerNode::File(_) => Found::File { mode },
            InnerNode::Symlink(link) => Found::Symlink {
                target: link.link.clone(),
            },
            _ => Found::Other,
        })
    }

    /// Every path the archive holds (relative; the root is the empty path), parents before
    /// children, with what is there.
    pub fn entries(&self) -> Vec<(PathBuf, Found)> {
        let mut entries: Vec<(PathBuf, Found)> = self
            .by_path
            .keys()
            .filter_map(|path| Some((path.clone(), self.get(path)?)))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries
    }

    /// Writes the file at `relative` to `out`; returns its length.
    pub fn copy_file(&self, relative: &Path, out: &mut impl Write) -> Result<u64, BackupError> {
        let missing = || BackupError::Corrupt(format!("{} is not a file here", relative.display()));
        let node = &self.fs.root.nodes[*self.by_path.get(relative).ok_or_else(missing)?];
        let InnerNode::File(file) = &node.inner else {
            return Err(missing());
        };
        let mut reader = self.fs.file(file).reader();
        std::io::copy(&mut reader, out).map_err(|e| BackupError::Corrupt(e.to_string()))
    }
}

/// Where one archive of a snapshot's chain is stored.
pub struct ChainSource {
    /// Presigned GET URL.
    pub url: String,
    pub size: u64,
}

/// The archives of a snapshot's chain, read in place through ranged GETs and opened as
/// entries need them: a file is read where the index recorded it, anything else (a
/// symlink, an index without locations) from its archive's tables. What the daemon's path
/// restores and the trusted side's `cat` both read through. Blocking, like backhand.
pub struct ChainReader {
    /// By depth in the chain.
    sources: HashMap<u8, ChainSource>,
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
    readers: HashMap<u8, RangedReader>,
    opened: HashMap<u8, StoredArchive<'static>>,
    /// Every reader's counters (requests, bytes), kept after the reader moves into an archive.
    counters: Vec<(Arc<AtomicU64>, Arc<AtomicU64>)>,
}

impl ChainReader {
    pub fn new(
        sources: HashMap<u8, ChainSource>,
        client: reqwest::Client,
        runtime: tokio::runtime::Handle,
    ) -> ChainReader {
        ChainReader {
            sources,
            client,
            runtime,
            readers: HashMap::new(),
            opened: HashMap::new(),
            counters: Vec::new(),
        }
    }

    fn reader(&mut self, entry: &IndexEntry) -> Result<RangedReader, BackupError> {
        let source = self.sources.get(&entry.layer).ok_or_else(|| {
            BackupError::Index(format!(
                "{} is held at depth {}, which the chain given does not have",
                entry.path.display(),
                entry.layer
            ))
        })?;
        let reader = RangedReader::new(
            self.client.clone(),
            &source.url,
            source.size,
            self.runtime.clone(),
        );
        self.counters
            .push((reader.requests.clone(), reader.fetched.clone()));
        Ok(reader)
    }

    fn archive(&mut self, entry: &IndexEntry) -> Result<&StoredArchive<'static>, BackupError> {
        if !self.opened.contains_key(&entry.layer) {
            let reader = self.reader(entry)?;
            let archive = StoredArchive::open(BufReader::with_capacity(64 * 1024, reader))?;
            self.opened.insert(entry.layer, archive);
        }
        self.opened
            .get(&entry.layer)
            .ok_or_else(|| BackupError::Corrupt("an archive opened and lost".into()))
    }

    /// Writes the file `entry` names to `out`; returns its length.
    pub fn copy_file(
        &mut self,
        entry: &IndexEntry,
        out: &mut impl Write,
    ) -> Result<u64, BackupError> {
        if let Some(location) = &entry.location {
            // Where the file lies was recorded with the snapshot: read just that.
            if !self.readers.contains_key(&entry.layer) {
                let reader = self.reader(entry)?;
                self.readers.insert(entry.layer, reader);
            }
            let reader = self
                .readers
                .get_mut(&entry.layer)
                .ok_or_else(|| BackupError::Corrupt("a reader made and lost".into()))?;
            return location.copy_to(reader, out);
        }
        let archive = self.archive(entry)?;
        match archive.get(&entry.path) {
            Some(Found::File { .. }) => archive.copy_file(&entry.path, out),
            found => Err(mismatch(entry, found)),
        }
    }

    /// What the symlink `entry` names points to.
    pub fn symlink_target(&mut self, entry: &IndexEntry) -> Result<PathBuf, BackupError> {
        match self.archive(entry)?.get(&entry.path) {
            Some(Found::Symlink { target }) => Ok(target),
            found => Err(mismatch(entry, found)),
        }
    }

    /// Ranged GETs made so far, and the bytes they fetched.
    pub fn fetched(&self) -> (u64, u64) {
        self.counters
            .iter()
            .fold((0, 0), |(requests, bytes), (r, b)| {
                (
                    requests + r.load(Ordering::Relaxed),
                    bytes + b.load(Ordering::Relaxed),
                )
            })
    }
}

fn mismatch(entry: &IndexEntry, found: Option<Found>) -> BackupError {
    BackupError::Corrupt(format!(
        "the archive at depth {} holds {found:?} at {}, its index a {}",
        entry.layer,
        entry.path.display(),
        entry.kind.as_str()
    ))
}
