//! Creates in progress, recorded in the state directory until they end, so that what a
//! create killed half way wrote is removed at the next start: its archive, the index beside
//! it and its checksum, when the create had put them there (temp files are swept anyway).
//! What was at the archive's path before the create (an earlier archive of that name) is
//! kept: each record says which objects were there, and only others are removed.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// The files a create writes at `archive`: the archive, its index and its checksum.
pub fn written_beside(archive: &Path) -> [PathBuf; 3] {
    [
        archive.to_path_buf(),
        fsd_backup::with_suffix(archive, ".index"),
        fsd_backup::with_suffix(archive, ".sha256"),
    ]
}

/// One record: the archive's path and which objects were at its files' paths before.
#[derive(Serialize, Deserialize)]
struct Record {
    archive: PathBuf,
    /// Device and inode of each of `written_beside`'s files before the create, if any.
    before: Vec<Option<(u64, u64)>>,
}

fn object(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|meta| (meta.dev(), meta.ino()))
}

/// The records of one daemon.
pub struct PendingCreates {
    dir: PathBuf,
    next: AtomicU64,
}

impl PendingCreates {
    /// Records under `dir`; what a killed daemon's records name is removed now (see the
    /// module). Answers how many archives were removed.
    pub fn open(dir: PathBuf) -> (Self, usize) {
        let mut removed = 0;
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let record = std::fs::read(entry.path())
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Record>(&bytes).ok());
            if let Some(record) = record {
                let files = written_beside(&record.archive);
                for (file, before) in files.iter().zip(record.before.iter()) {
                    if object(file).is_some_and(|now| Some(now) != *before)
                        && std::fs::remove_file(file).is_ok()
                        && file == &record.archive
                    {
                        removed += 1;
                    }
                }
            }
            let _ = std::fs::remove_file(entry.path());
        }
        let pending = Self {
            dir,
            next: AtomicU64::new(0),
        };
        (pending, removed)
    }

    /// Records a create of `archive` until the answer is dropped.
    pub fn begin(&self, archive: &Path) -> Pending {
        let record = Record {
            archive: archive.to_path_buf(),
            before: written_beside(archive).iter().map(|f| object(f)).collect(),
        };
        let path = self.dir.join(format!(
            "{}-{}.json",
            std::process::id(),
            self.next.fetch_add(1, Ordering::Relaxed)
        ));
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|()| std::fs::write(&path, serde_json::to_vec(&record).unwrap_or_default()));
        if let Err(error) = written {
            tracing::warn!(%error, archive = %archive.display(), "cannot record a create in progress; a crash during it may leave its archive");
        }
        Pending { record: path }
    }
}

/// A create in progress; its record goes when this is dropped (the create ended).
pub struct Pending {
    record: PathBuf,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_killed_create_wrote_goes_and_what_was_there_before_stays() {
        let root = tempfile::tempdir().unwrap();
        let records = root.path().join("pending");
        let (pending, _) = PendingCreates::open(records.clone());
        // An earlier archive at one path; nothing at the other.
        let kept = root.path().join("kept.sqsh");
        std::fs::write(&kept, b"earlier archive").unwrap();
        std::fs::write(fsd_backup::with_suffix(&kept, ".index"), b"earlier index").unwrap();
        let fresh = root.path().join("fresh.sqsh");
        let killed_early = pending.begin(&kept);
        let killed_late = pending.begin(&fresh);
        // The second create got as far as its archive and index; the first as far as
        // nothing (a temp file, swept elsewhere). Then the daemon is killed.
        std::fs::write(&fresh, b"new archive").unwrap();
        std::fs::write(fsd_backup::with_suffix(&fresh, ".index"), b"new index").unwrap();
        std::mem::forget(killed_early);
        std::mem::forget(killed_late);
        let finished = pending.begin(&root.path().join("done.sqsh"));
        std::fs::write(root.path().join("done.sqsh"), b"answered").unwrap();
        drop(finished);

        let (_, removed) = PendingCreates::open(records.clone());
        assert_eq!(removed, 1);
        assert!(!fresh.exists());
        assert!(!fsd_backup::with_suffix(&fresh, ".index").exists());
        assert_eq!(std::fs::read(&kept).unwrap(), b"earlier archive");
        assert!(fsd_backup::with_suffix(&kept, ".index").exists());
        assert!(
            root.path().join("done.sqsh").exists(),
            "a create that ended is kept"
        );
        assert_eq!(std::fs::read_dir(&records).unwrap().count(), 0);
    }
}
