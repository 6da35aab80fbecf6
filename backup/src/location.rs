//! Where a file's bytes lie in the archive that holds it: its data blocks (start, stored
//! sizes) and its tail in a fragment block. Recorded in the snapshot's index when the
//! archive is written, so one file of a stored snapshot is read with a ranged GET or two,
//! without opening the archive (which reads every inode and directory of it).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use backhand::compression::{CompressionAction, Compressor, DefaultCompressor};
use backhand::{FilesystemReader, InnerNode};

use crate::BackupError;
use crate::cursor::Cursor;

/// A stored block's size word: the size, and this bit when the block is stored as is.
const UNCOMPRESSED: u32 = 1 << 24;
/// No fragment (squashfs's marker in a file inode).
const NO_FRAGMENT: u32 = u32::MAX;

/// One file's data in its archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataLocation {
    /// The archive's compressor (squashfs id: 1 gzip, 5 lz4, 6 zstd).
    pub codec: u8,
    pub block_size: u32,
    /// Bytes of the file in the archive.
    pub file_size: u64,
    /// Offset of the first data block.
    pub blocks_start: u64,
    /// Each full block's stored size word (0: a hole).
    pub blocks: Vec<u32>,
    /// The tail: the fragment block's offset and size word, and the tail's offset in it.
    pub fragment: Option<(u64, u32, u32)>,
}

impl DataLocation {
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(self.codec);
        out.extend_from_slice(&self.block_size.to_le_bytes());
        out.extend_from_slice(&self.file_size.to_le_bytes());
        out.extend_from_slice(&self.blocks_start.to_le_bytes());
        out.extend_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        for block in &self.blocks {
            out.extend_from_slice(&block.to_le_bytes());
        }
        match self.fragment {
            None => out.push(0),
            Some((start, size, offset)) => {
                out.push(1);
                out.extend_from_slice(&start.to_le_bytes());
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
            }
        }
    }

    /// Reads what [`DataLocation::encode_into`] wrote.
    pub(crate) fn decode_from(cursor: &mut Cursor<'_>) -> Result<DataLocation, BackupError> {
        let codec = cursor.u8()?;
        let block_size = cursor.u32()?;
        let file_size = cursor.u64()?;
        let blocks_start = cursor.u64()?;
        let count = cursor.u32()? as usize;
        if count as u64 > file_size / u64::from(block_size.max(1)) + 1 {
            return Err(BackupError::Index("more blocks than the file has".into()));
        }
        let mut blocks = Vec::with_capacity(count);
        for _ in 0..count {
            blocks.push(cursor.u32()?);
        }
        let fragment = match cursor.u8()? {
            0 => None,
            _ => Some((cursor.u64()?, cursor.u32()?, cursor.u32()?)),
        };
        Ok(DataLocation {
            codec,
            block_size,
            file_size,
            blocks_start,
            blocks,
            fragment,
        })
    }

    /// The file's bytes, read from `archive` (a stored one through ranged GETs).
    pub fn read(&self, archive: &mut (impl Read + Seek)) -> Result<Vec<u8>, BackupError> {
        let mut out = Vec::with_capacity(self.file_size as usize);
        self.copy_to(archive, &mut out)?;
        Ok(out)
    }

    /// Writes the file's bytes to `out` a block at a time (a large file is never held
    /// whole); returns how many.
    pub fn copy_to(
        &self,
        archive: &mut (impl Read + Seek),
        out: &mut impl Write,
    ) -> Result<u64, BackupError> {
        let corrupt = |why: String| BackupError::Corrupt(why);
        let compressor = match self.codec {
            0 => Compressor::Uncompressed,
            1 => Compressor::Gzip,
            5 => Compressor::Lz4,
            6 => Compressor::Zstd,
            other => return Err(corrupt(format!("compressor {other} is not read here"))),
        };
        let written_to = |e: std::io::Error| corrupt(format!("writing the file: {e}"));
        let mut stored = Vec::with_capacity(self.block_size as usize);
        let mut block = Vec::with_capacity(self.block_size as usize);
        let mut written = 0u64;
        // The blocks lie one after the other from `blocks_start` (holes take no space).
        archive
            .seek(SeekFrom::Start(self.blocks_start))
            .map_err(|e| corrupt(format!("data blocks: {e}")))?;
        for word in &self.blocks {
            let size = (word & !UNCOMPRESSED) as usize;
            let full = (self.file_size - written).min(u64::from(self.block_size)) as usize;
            if size == 0 {
                block.clear();
                block.resize(full, 0);
            } else {
                stored.resize(size, 0);
                archive
                    .read_exact(&mut stored)
                    .map_err(|e| corrupt(format!("data blocks: {e}")))?;
                self.unpack(&stored, word & UNCOMPRESSED != 0, compressor, &mut block)?;
            }
            out.write_all(&block).map_err(written_to)?;
            written += block.len() as u64;
        }
        if let Some((start, word, offset)) = self.fragment {
            stored.resize((word & !UNCOMPRESSED) as usize, 0);
            archive
                .seek(SeekFrom::Start(start))
                .and_then(|_| archive.read_exact(&mut stored))
                .map_err(|e| corrupt(format!("fragment: {e}")))?;
            self.unpack(&stored, word & UNCOMPRESSED != 0, compressor, &mut block)?;
            let tail = self.file_size.saturating_sub(written) as usize;
            let piece = block
                .get(offset as usize..offset as usize + tail)
                .ok_or_else(|| corrupt("the fragment is shorter than the tail".into()))?;
            out.write_all(piece).map_err(written_to)?;
            written += piece.len() as u64;
        }
        if written != self.file_size {
            return Err(corrupt(format!(
                "read {written} bytes of a {}-byte file",
                self.file_size
            )));
        }
        Ok(written)
    }

    /// `stored` as it is on disk into `block` (replacing what `block` held).
    fn unpack(
        &self,
        stored: &[u8],
        raw: bool,
        compressor: Compressor,
        block: &mut Vec<u8>,
    ) -> Result<(), BackupError> {
        block.clear();
        if raw {
            block.extend_from_slice(stored);
            return Ok(());
        }
        DefaultCompressor
            .decompress(stored, block, compressor)
            .map_err(|e| BackupError::Corrupt(format!("a data block: {e}")))
    }
}

/// Every file's location in the archive at `archive` (a local one, just written), by path
/// relative to its root.
pub fn locations(archive: &Path) -> Result<HashMap<PathBuf, DataLocation>, BackupError> {
    let file = File::open(archive).map_err(|e| BackupError::io(archive, e))?;
    let fs = FilesystemReader::from_reader(BufReader::with_capacity(1 << 20, file))
        .map_err(|e| BackupError::Corrupt(e.to_string()))?;
    let codec = fs.compressor.map(|c| c as u8).unwrap_or(0);
    let fragments = fs.fragments.as_deref().unwrap_or(&[]);
    let mut out = HashMap::new();
    for node in fs.files() {
        let InnerNode::File(file) = &node.inner else {
            continue;
        };
        let fragment = match file.frag_index() as u32 {
            NO_FRAGMENT => None,
            index => {
                let fragment = fragments.get(index as usize).ok_or_else(|| {
                    BackupError::Corrupt(format!("fragment {index} is not in the table"))
                })?;
                let word = fragment.size.size()
                    | if fragment.size.uncompressed() {
                        UNCOMPRESSED
                    } else {
                        0
                    };
                Some((fragment.start, word, file.block_offset()))
            }
        };
        let blocks = file
            .block_sizes()
            .iter()
            .map(|size| size.size() | if size.uncompressed() { UNCOMPRESSED } else { 0 })
            .collect();
        let relative = node.fullpath.strip_prefix("/").unwrap_or(&node.fullpath);
        out.insert(
            relative.to_path_buf(),
            DataLocation {
                codec,
                block_size: fs.block_size,
                file_size: file.file_len() as u64,
                blocks_start: file.blocks_start(),
                blocks,
                fragment,
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{self, ArchiveOptions};
    use crate::{Codec, Progress};

    /// Every file read back through its location equals the file: small ones (in a
    /// fragment), one over several blocks with a tail, an empty one, one of zeros, one that
    /// does not compress, under each codec.
    #[test]
    fn files_read_through_their_locations_are_whole() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("tree");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let mut noise = Vec::with_capacity(400_000);
        let mut x = 88172645463325252u64;
        while noise.len() < 400_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            noise.extend_from_slice(&x.to_le_bytes());
        }
        let files: Vec<(&str, Vec<u8>)> = vec![
            ("small.txt", b"hello".to_vec()),
            ("sub/text.rs", b"fn main() {}\n".repeat(30_000)),
            ("empty", Vec::new()),
            ("zeros.bin", vec![0u8; 300_000]),
            ("noise.bin", noise),
        ];
        for (name, bytes) in &files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        for codec in [Codec::Zstd, Codec::Lz4, Codec::Gzip] {
            let path = temp.path().join(format!("{codec:?}.sqsh"));
            let options = ArchiveOptions {
                codec,
                threads: 1,
                ..ArchiveOptions::default()
            };
            archive::create(&dir, &path, &options, Progress::none()).unwrap();
            let found = locations(&path).unwrap();
            let mut file = File::open(&path).unwrap();
            for (name, bytes) in &files {
                let location = &found[Path::new(name)];
                assert_eq!(
                    &location.read(&mut file).unwrap(),
                    bytes,
                    "{name} under {codec:?}"
                );
            }
        }
    }
}
