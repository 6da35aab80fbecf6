//! One archive of a snapshot opened to read single paths (a stored one through
//! [`crate::remote`]): what is at a path, and a file's bytes. backhand reads the archive's
//! inode and directory tables when it opens; a file's data blocks only when it is copied.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use backhand::{BufReadSeek, FilesystemReader, InnerNode};

use crate::BackupError;

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
