//! Directory listings and stat results in the reference's `FileInfo` shape.

use std::ffi::{OsStr, OsString};
use std::fs::{File, FileType as FsFileType, Metadata};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use fsd_api::files::{FileInfo, FileStat, FileType, Permissions};
use walkdir::WalkDir;

use crate::time::unix_rfc3339;

/// What to list.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListOptions {
    pub recursive: bool,
    /// Without it, entries whose name starts with `.` are skipped, and hidden directories are
    /// not descended into (the reference still lists their contents; fsd does not).
    pub include_hidden: bool,
}

/// Lists `dir`, sorted by path. Entries that vanish or cannot be read mid-walk are skipped
/// and logged; the listing of what can be read is still returned. fsd's own scratch files
/// (writes in flight, see `fsd_api::scratch`) are never listed.
pub fn list(dir: &Path, options: ListOptions) -> Vec<FileInfo> {
    let walker = WalkDir::new(dir)
        .min_depth(1)
        .max_depth(if options.recursive { usize::MAX } else { 1 })
        .follow_links(false)
        .sort_by_file_name();
    let mut files = Vec::new();
    for entry in walker.into_iter().filter_entry(|entry| {
        (options.include_hidden || !is_hidden(entry.file_name()))
            && !fsd_api::scratch::is_scratch(entry.path())
    }) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                tracing::warn!(error = %err, "skipping unreadable entry while listing");
                continue;
            }
        };
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(err) => {
                tracing::warn!(error = %err, "skipping entry that vanished while listing");
                continue;
            }
        };
        let relative = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        files.push(info(entry.path(), relative, &meta));
    }
    files
}

fn info(path: &Path, relative: &Path, meta: &Metadata) -> FileInfo {
    FileInfo {
        name: path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        absolute_path: path.display().to_string(),
        relative_path: relative.display().to_string(),
        file_type: file_type(meta.file_type()),
        size: meta.len(),
        modified_at: unix_rfc3339(meta.mtime(), meta.mtime_nsec()),
        mode: mode_string(meta.permissions().mode()),
        permissions: owner_permissions(meta.permissions().mode()),
    }
}

/// Lists the directory `opened` (its descriptor, opened beneath an allowed root; `dir` is
/// its path for the answer) as [`list`] does, every entry looked at relative to its
/// directory's descriptor and never through a link, so a directory swapped for a link out
/// during the walk leads nowhere (what vanishes or turns into a link is skipped).
pub fn list_beneath(opened: OwnedFd, dir: &Path, options: ListOptions) -> Vec<FileInfo> {
    let mut files = Vec::new();
    list_at(opened, dir, Path::new(""), options, &mut files);
    files
}

/// The names in the open directory `dir` (`.` and `..` left out), read from a duplicate of
/// its descriptor so `dir` stays usable for `*at` calls.
pub(super) fn names_at(dir: &OwnedFd) -> nix::Result<Vec<OsString>> {
    let duplicate = dir.try_clone().map_err(|_| Errno::EBADF)?;
    Ok(Dir::from_fd(duplicate)?
        .iter()
        .filter_map(Result::ok)
        .map(|entry| OsStr::from_bytes(entry.file_name().to_bytes()).to_os_string())
        .filter(|name| name != "." && name != "..")
        .collect())
}

/// The file type bits of what `fstatat` said.
pub(super) fn kind_of(stat: &nix::sys::stat::FileStat) -> nix::sys::stat::SFlag {
    use nix::sys::stat::SFlag;
    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT
}

fn list_at(
    opened: OwnedFd,
    dir: &Path,
    relative: &Path,
    options: ListOptions,
    files: &mut Vec<FileInfo>,
) {
    let mut names = match names_at(&opened) {
        Ok(names) => names,
        Err(err) => {
            tracing::warn!(error = %err, "skipping unreadable directory while listing");
            return;
        }
    };
    names.retain(|name| options.include_hidden || !is_hidden(name));
    names.sort();
    for name in names {
        let path = dir.join(&name);
        if fsd_api::scratch::is_scratch(&path) {
            continue;
        }
        let object = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let Ok(meta) = openat(&opened, name.as_os_str(), object, Mode::empty())
            .map(File::from)
            .and_then(|file| file.metadata().map_err(|_| Errno::EIO))
        else {
            continue;
        };
        let inner = relative.join(&name);
        files.push(info(&path, &inner, &meta));
        if options.recursive && meta.is_dir() {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            if let Ok(below) = openat(&opened, name.as_os_str(), flags, Mode::empty()) {
                list_at(below, &path, &inner, options, files);
            }
        }
    }
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

pub fn stat(meta: &Metadata, symlink_target: Option<String>) -> FileStat {
    let mode = meta.permissions().mode();
    FileStat {
        file_type: file_type(meta.file_type()),
        size: meta.len(),
        mode: mode_string(mode),
        mode_octal: format!("{:04o}", mode & 0o7777),
        permissions: owner_permissions(mode),
        modified_at: unix_rfc3339(meta.mtime(), meta.mtime_nsec()),
        accessed_at: unix_rfc3339(meta.atime(), meta.atime_nsec()),
        changed_at: unix_rfc3339(meta.ctime(), meta.ctime_nsec()),
        inode: meta.ino(),
        nlink: meta.nlink(),
        uid: meta.uid(),
        gid: meta.gid(),
        symlink_target,
    }
}

pub fn file_type(kind: FsFileType) -> FileType {
    if kind.is_symlink() {
        FileType::Symlink
    } else if kind.is_dir() {
        FileType::Directory
    } else if kind.is_file() {
        FileType::File
    } else {
        debug_assert!(
            kind.is_fifo() || kind.is_socket() || kind.is_block_device() || kind.is_char_device()
        );
        FileType::Other
    }
}

/// `0o755` → `rwxr-xr-x`.
pub fn mode_string(mode: u32) -> String {
    (0..9)
        .map(|bit| {
            let set = mode & (0o400 >> bit) != 0;
            match (set, bit % 3) {
                (false, _) => '-',
                (true, 0) => 'r',
                (true, 1) => 'w',
                (true, _) => 'x',
            }
        })
        .collect()
}

fn owner_permissions(mode: u32) -> Permissions {
    Permissions {
        readable: mode & 0o400 != 0,
        writable: mode & 0o200 != 0,
        executable: mode & 0o100 != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_strings() {
        assert_eq!(mode_string(0o755), "rwxr-xr-x");
        assert_eq!(mode_string(0o100644), "rw-r--r--");
        assert_eq!(mode_string(0), "---------");
    }

    #[test]
    fn hidden_entries_and_their_contents_are_skipped_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".hidden")).unwrap();
        std::fs::write(dir.path().join(".hidden/foo"), "x").unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.txt"), "x").unwrap();
        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        let names = |opts| -> Vec<String> {
            list(dir.path(), opts)
                .into_iter()
                .map(|f| f.relative_path)
                .collect()
        };
        assert_eq!(names(ListOptions::default()), ["a.txt", "sub"]);
        assert_eq!(
            names(ListOptions {
                recursive: true,
                include_hidden: false
            }),
            ["a.txt", "sub", "sub/b.txt"]
        );
        assert_eq!(
            names(ListOptions {
                recursive: true,
                include_hidden: true
            }),
            [".hidden", ".hidden/foo", "a.txt", "sub", "sub/b.txt"]
        );
        // By descriptor, as a confined daemon lists: the same entries in the same order.
        for options in [
            ListOptions::default(),
            ListOptions {
                recursive: true,
                include_hidden: true,
            },
        ] {
            let opened: OwnedFd = File::open(dir.path()).unwrap().into();
            assert_eq!(
                list_beneath(opened, dir.path(), options),
                list(dir.path(), options)
            );
        }
    }
}
