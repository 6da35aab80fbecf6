//! An archive written out as a plain directory tree (the SDK next line's
//! `backup.extractArchive`, which the reference does with `unsquashfs -f -d`): directories,
//! files and links with the archive's modes, over what is there (`-f`). Nothing is written
//! through a link: one standing where an entry goes is replaced. Devices, FIFOs and
//! whiteouts are not carried.

use std::fs::{self, File};
use std::io::BufReader;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path};

use crate::BackupError;
use crate::stored::{Found, StoredArchive};

/// What an unpack wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Unpacked {
    pub directories: u64,
    pub files: u64,
    pub links: u64,
    pub bytes: u64,
}

/// Writes every entry of `archive` under `dir` (made if missing). Blocking.
pub fn unpack(archive: &Path, dir: &Path) -> Result<Unpacked, BackupError> {
    let file = File::open(archive).map_err(|e| BackupError::io(archive, e))?;
    let stored = StoredArchive::open(BufReader::with_capacity(1 << 20, file))?;
    fs::create_dir_all(dir).map_err(|e| BackupError::io(dir, e))?;
    let mut done = Unpacked::default();
    for (relative, found) in stored.entries() {
        if relative.as_os_str().is_empty() {
            continue;
        }
        if !relative
            .components()
            .all(|part| matches!(part, Component::Normal(_)))
        {
            return Err(BackupError::Corrupt(format!(
                "{} is not a plain relative path",
                relative.display()
            )));
        }
        let target = dir.join(&relative);
        let existing = fs::symlink_metadata(&target).ok();
        let io = |e| BackupError::io(&target, e);
        match found {
            Found::Dir { mode } => {
                match existing {
                    Some(meta) if meta.is_dir() => {}
                    Some(_) => {
                        fs::remove_file(&target).map_err(io)?;
                        fs::create_dir(&target).map_err(io)?;
                    }
                    None => fs::create_dir(&target).map_err(io)?,
                }
                fs::set_permissions(&target, fs::Permissions::from_mode(mode)).map_err(io)?;
                done.directories += 1;
            }
            Found::File { mode } => {
                clear(&target, existing.as_ref())?;
                let mut out = File::create(&target).map_err(io)?;
                done.bytes += stored.copy_file(&relative, &mut out)?;
                out.set_permissions(fs::Permissions::from_mode(mode))
                    .map_err(io)?;
                done.files += 1;
            }
            Found::Symlink { target: points_to } => {
                clear(&target, existing.as_ref())?;
                std::os::unix::fs::symlink(&points_to, &target).map_err(io)?;
                done.links += 1;
            }
            Found::Other => {}
        }
    }
    Ok(done)
}

/// Removes what stands where a file or link goes (a link is removed, never followed; a
/// directory in the way is removed with what it holds, as `unsquashfs -f` replaces it).
fn clear(target: &Path, existing: Option<&fs::Metadata>) -> Result<(), BackupError> {
    let removed = match existing {
        None => Ok(()),
        Some(meta) if meta.is_dir() => fs::remove_dir_all(target),
        Some(_) => fs::remove_file(target),
    };
    removed.map_err(|e| BackupError::io(target, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArchiveOptions, Progress};

    #[test]
    fn writes_the_tree_back_with_modes_and_links_over_what_is_there() {
        let work = tempfile::tempdir().unwrap();
        let source = work.path().join("source");
        fs::create_dir_all(source.join("sub")).unwrap();
        fs::write(source.join("sub/a.txt"), "alpha").unwrap();
        fs::set_permissions(source.join("sub/a.txt"), fs::Permissions::from_mode(0o750)).unwrap();
        std::os::unix::fs::symlink("sub/a.txt", source.join("link")).unwrap();
        let archive = work.path().join("a.sqsh");
        crate::archive::create(
            &source,
            &archive,
            &ArchiveOptions::default(),
            Progress::none(),
        )
        .unwrap();
        let dir = work.path().join("out");
        fs::create_dir_all(&dir).unwrap();
        // A link where a file goes is replaced, not followed.
        let outside = work.path().join("outside.txt");
        fs::write(&outside, "untouched").unwrap();
        fs::create_dir_all(dir.join("sub")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("sub/a.txt")).unwrap();
        let done = unpack(&archive, &dir).unwrap();
        assert_eq!((done.files, done.links, done.bytes), (1, 1, 5));
        assert_eq!(fs::read_to_string(dir.join("sub/a.txt")).unwrap(), "alpha");
        assert_eq!(
            fs::metadata(dir.join("sub/a.txt"))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            0o750
        );
        assert_eq!(
            fs::read_link(dir.join("link")).unwrap(),
            Path::new("sub/a.txt")
        );
        assert_eq!(fs::read_to_string(&outside).unwrap(), "untouched");
    }
}
