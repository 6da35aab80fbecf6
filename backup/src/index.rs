//! A snapshot's index: every path of the tree as the snapshot saw it (type, mode, owner,
//! size, mtime, inode) and which archive of its chain holds its content. The next
//! snapshot of the directory compares the tree with it to know what changed; `ls` and
//! `diff` read it instead of the archives.
//!
//! Stored beside the archive (`backups/<id>/index.zst`): a magic line, then one zstd frame
//! of fixed-layout records (paths are bytes, not UTF-8).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::BackupError;
use crate::cursor::Cursor;
use crate::location::{self, DataLocation};

const MAGIC: &[u8] = b"FSDIDX2\n";
/// Longest path a record holds (Linux's PATH_MAX).
const MAX_PATH: usize = 4096;

/// What is at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    /// A device, FIFO or socket.
    Special,
}

impl Kind {
    pub fn of(meta: &fs::Metadata) -> Kind {
        let kind = meta.file_type();
        if kind.is_dir() {
            Kind::Dir
        } else if kind.is_file() {
            Kind::File
        } else if kind.is_symlink() {
            Kind::Symlink
        } else {
            Kind::Special
        }
    }

    fn code(self) -> u8 {
        match self {
            Kind::Dir => 0,
            Kind::File => 1,
            Kind::Symlink => 2,
            Kind::Special => 3,
        }
    }

    fn from_code(code: u8) -> Option<Kind> {
        Some(match code {
            0 => Kind::Dir,
            1 => Kind::File,
            2 => Kind::Symlink,
            3 => Kind::Special,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Dir => "directory",
            Kind::File => "file",
            Kind::Symlink => "symlink",
            Kind::Special => "other",
        }
    }
}

/// One path of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// Relative to the snapshot's directory.
    pub path: PathBuf,
    pub kind: Kind,
    /// Permission bits (and setuid, setgid, sticky).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Bytes (0 for a directory).
    pub size: u64,
    /// Nanoseconds since the epoch.
    pub mtime_ns: i64,
    pub inode: u64,
    /// The depth in the chain of the snapshot whose archive holds this entry (0: the full
    /// snapshot at the bottom).
    pub layer: u8,
    /// A file's bytes in that archive (recorded when the archive was written).
    pub location: Option<DataLocation>,
}

impl IndexEntry {
    /// `path` (relative) as `meta` describes it, held by the archive at depth `layer`.
    pub fn new(path: &Path, meta: &fs::Metadata, layer: u8) -> IndexEntry {
        let kind = Kind::of(meta);
        IndexEntry {
            path: path.to_path_buf(),
            kind,
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
            size: if kind == Kind::Dir { 0 } else { meta.len() },
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            inode: meta.ino(),
            layer,
            location: None,
        }
    }

    /// Whether the tree's `self` is the same file as the snapshot's `before` with the same
    /// content and metadata, as far as the metadata tells (what rsync and restic assume).
    pub fn unchanged_since(&self, before: &IndexEntry) -> bool {
        self.kind == before.kind
            && self.inode == before.inode
            && self.mode == before.mode
            && self.uid == before.uid
            && self.gid == before.gid
            && (self.kind == Kind::Dir
                || (self.size == before.size && self.mtime_ns == before.mtime_ns))
    }

    /// Whether `self` looks the same as `before` to a reader of the tree: kind, permissions,
    /// owner, and a file's size and modification time at the precision both kept (an
    /// archive keeps whole seconds). Unlike [`IndexEntry::unchanged_since`], the inode is
    /// left out: a restore gives every path a new one, and a diff must not call all of them
    /// modified.
    pub fn looks_unchanged_since(&self, before: &IndexEntry) -> bool {
        const SECOND: i64 = 1_000_000_000;
        let whole_seconds = self.mtime_ns % SECOND == 0 || before.mtime_ns % SECOND == 0;
        let same_time = if whole_seconds {
            self.mtime_ns.div_euclid(SECOND) == before.mtime_ns.div_euclid(SECOND)
        } else {
            self.mtime_ns == before.mtime_ns
        };
        self.kind == before.kind
            && self.mode == before.mode
            && self.uid == before.uid
            && self.gid == before.gid
            && (self.kind == Kind::Dir || (self.size == before.size && same_time))
    }
}

/// Every path of a snapshot, in the order the tree was walked (parents first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    pub entries: Vec<IndexEntry>,
}

/// The order of an index: a directory before what it holds, siblings by name, bytewise
/// (what a walk sorted by file name gives). Compares bytes with `/` lowest, which is that
/// order and much cheaper than comparing `Path`s component by component.
pub fn path_order(a: &Path, b: &Path) -> Ordering {
    let key = |byte: &u8| {
        if *byte == b'/' {
            0
        } else {
            u16::from(*byte) + 1
        }
    };
    a.as_os_str()
        .as_bytes()
        .iter()
        .map(key)
        .cmp(b.as_os_str().as_bytes().iter().map(key))
}

/// The entry at `path` among `entries` (in [`path_order`], as an index keeps them).
pub fn find<'a>(entries: &'a [IndexEntry], path: &Path) -> Option<&'a IndexEntry> {
    entries
        .binary_search_by(|entry| path_order(&entry.path, path))
        .ok()
        .map(|i| &entries[i])
}

/// Whether `path` is `top` or under it.
pub fn is_within(path: &Path, top: &Path) -> bool {
    let (path, top) = (path.as_os_str().as_bytes(), top.as_os_str().as_bytes());
    path.starts_with(top) && (path.len() == top.len() || path[top.len()] == b'/')
}

impl Index {
    /// Path → position, for lookups.
    pub fn by_path(&self) -> HashMap<&Path, &IndexEntry> {
        self.entries
            .iter()
            .map(|entry| (entry.path.as_path(), entry))
            .collect()
    }

    /// Records where the files held by the archive at depth `layer` (just written at
    /// `archive`) lie in it.
    pub fn attach_locations(&mut self, archive: &Path, layer: u8) -> Result<(), BackupError> {
        let mut found = location::locations(archive)?;
        for entry in &mut self.entries {
            if entry.layer == layer && entry.kind == Kind::File {
                entry.location = found.remove(&entry.path);
            }
        }
        Ok(())
    }

    /// Puts the entries in [`path_order`] (a decoded index is checked, and sorted if it is
    /// not).
    fn sort(&mut self) {
        let sorted = self
            .entries
            .windows(2)
            .all(|pair| path_order(&pair[0].path, &pair[1].path) == Ordering::Less);
        if !sorted {
            self.entries.sort_by(|a, b| path_order(&a.path, &b.path));
            self.entries.dedup_by(|a, b| a.path == b.path);
        }
    }

    /// The encoded index (magic line, one zstd frame).
    pub fn encode(&self) -> Result<Vec<u8>, BackupError> {
        let mut out = MAGIC.to_vec();
        let mut encoder =
            // Level 1: the index is written on every snapshot's critical path.
            zstd::Encoder::new(&mut out, 1).map_err(|e| BackupError::Index(e.to_string()))?;
        for entry in &self.entries {
            let path = entry.path.as_os_str().as_bytes();
            let mut record = Vec::with_capacity(path.len() + 48);
            record.extend_from_slice(&(path.len() as u32).to_le_bytes());
            record.extend_from_slice(path);
            record.push(entry.kind.code());
            record.push(entry.layer);
            for value in [entry.mode, entry.uid, entry.gid] {
                record.extend_from_slice(&value.to_le_bytes());
            }
            record.extend_from_slice(&entry.size.to_le_bytes());
            record.extend_from_slice(&entry.mtime_ns.to_le_bytes());
            record.extend_from_slice(&entry.inode.to_le_bytes());
            match &entry.location {
                None => record.push(0),
                Some(location) => {
                    record.push(1);
                    location.encode_into(&mut record);
                }
            }
            encoder
                .write_all(&record)
                .map_err(|e| BackupError::Index(e.to_string()))?;
        }
        encoder
            .finish()
            .map_err(|e| BackupError::Index(e.to_string()))?;
        Ok(out)
    }

    /// Reads an encoded index; anything malformed is an error, never a partial index.
    pub fn decode(bytes: &[u8]) -> Result<Index, BackupError> {
        let bad = |why: &str| BackupError::Index(why.to_string());
        let body = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| bad("not an index"))?;
        let mut raw = Vec::new();
        zstd::Decoder::new(body)
            .and_then(|mut decoder| decoder.read_to_end(&mut raw))
            .map_err(|e| bad(&e.to_string()))?;
        let mut entries = Vec::new();
        let mut cursor = Cursor(raw.as_slice());
        while !cursor.0.is_empty() {
            let len = cursor.u32()? as usize;
            if len == 0 || len > MAX_PATH {
                return Err(bad("bad path length"));
            }
            let path = PathBuf::from(OsStr::from_bytes(cursor.bytes(len)?));
            let kind = Kind::from_code(cursor.u8()?).ok_or_else(|| bad("bad kind"))?;
            let layer = cursor.u8()?;
            let (mode, uid, gid) = (cursor.u32()?, cursor.u32()?, cursor.u32()?);
            let (size, mtime_ns, inode) = (cursor.u64()?, cursor.u64()? as i64, cursor.u64()?);
            let location = match cursor.u8()? {
                0 => None,
                _ => Some(DataLocation::decode_from(&mut cursor)?),
            };
            entries.push(IndexEntry {
                path,
                kind,
                mode,
                uid,
                gid,
                size,
                mtime_ns,
                inode,
                layer,
                location,
            });
        }
        let mut index = Index { entries };
        index.sort();
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: Kind, layer: u8) -> IndexEntry {
        IndexEntry {
            path: PathBuf::from(path),
            kind,
            mode: 0o644,
            uid: 1000,
            gid: 1000,
            size: 12,
            mtime_ns: -5,
            inode: 77,
            layer,
            location: None,
        }
    }

    #[test]
    fn an_index_round_trips_and_refuses_damage() {
        let index = Index {
            entries: vec![
                entry("a", Kind::Dir, 0),
                IndexEntry {
                    location: Some(DataLocation {
                        codec: 6,
                        block_size: 131_072,
                        file_size: 300_000,
                        blocks_start: 96,
                        blocks: vec![40_000, 131_072 | (1 << 24)],
                        fragment: Some((9_000_000, 12_000, 512)),
                    }),
                    ..entry("a/b.txt", Kind::File, 3)
                },
                entry("a/link", Kind::Symlink, 1),
                IndexEntry {
                    path: PathBuf::from(OsStr::from_bytes(b"not-utf8-\xff")),
                    ..entry("x", Kind::Special, 2)
                },
            ],
        };
        let bytes = index.encode().unwrap();
        assert_eq!(Index::decode(&bytes).unwrap(), index);
        assert!(Index::decode(b"garbage").is_err());
        assert!(Index::decode(&bytes[..bytes.len() - 3]).is_err());
        let empty = Index::default().encode().unwrap();
        assert_eq!(Index::decode(&empty).unwrap(), Index::default());
    }

    #[test]
    fn path_order_is_a_sorted_walk() {
        let walk = ["a", "a/b", "a/b/c", "a b", "a.txt", "ab", "b"];
        let mut shuffled: Vec<&Path> = walk.iter().rev().map(Path::new).collect();
        shuffled.sort_by(|a, b| path_order(a, b));
        assert_eq!(shuffled, walk.iter().map(Path::new).collect::<Vec<_>>());
        assert!(is_within(Path::new("a/b"), Path::new("a")));
        assert!(is_within(Path::new("a"), Path::new("a")));
        assert!(!is_within(Path::new("a.txt"), Path::new("a")));
        assert!(!is_within(Path::new("ab"), Path::new("a")));
    }

    #[test]
    fn unchanged_means_same_file_same_metadata() {
        let before = entry("f", Kind::File, 0);
        assert!(before.clone().unchanged_since(&before));
        for changed in [
            IndexEntry {
                size: 13,
                ..before.clone()
            },
            IndexEntry {
                mtime_ns: 1,
                ..before.clone()
            },
            IndexEntry {
                inode: 78,
                ..before.clone()
            },
            IndexEntry {
                mode: 0o600,
                ..before.clone()
            },
            IndexEntry {
                kind: Kind::Dir,
                ..before.clone()
            },
        ] {
            assert!(!changed.unchanged_since(&before), "{changed:?}");
        }
        // Restored: a new inode, the time to the second. It looks the same; not otherwise.
        let before = IndexEntry {
            mtime_ns: 1_700_000_000_123_456_789,
            ..before
        };
        let restored = IndexEntry {
            inode: 900,
            mtime_ns: before.mtime_ns - before.mtime_ns % 1_000_000_000,
            ..before.clone()
        };
        assert!(restored.looks_unchanged_since(&before));
        assert!(before.looks_unchanged_since(&restored));
        for changed in [
            IndexEntry {
                size: 13,
                ..restored.clone()
            },
            IndexEntry {
                mtime_ns: restored.mtime_ns + 1_000_000_000,
                ..restored.clone()
            },
            IndexEntry {
                mode: 0o600,
                ..restored.clone()
            },
        ] {
            assert!(!changed.looks_unchanged_since(&before), "{changed:?}");
        }
        // A directory's size and mtime change with what it holds; they do not make it new.
        let dir = entry("d", Kind::Dir, 0);
        assert!(
            IndexEntry {
                mtime_ns: 9,
                ..dir.clone()
            }
            .unchanged_since(&dir)
        );
    }
}
