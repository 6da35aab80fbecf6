//! The file service: every file operation, over plain paths, with [`FileError`]s.
//!
//! Blocking filesystem calls run on tokio's blocking pool. Paths are resolved through
//! [`Paths`] first (a session's directory, then the policy); what they name is what error
//! messages quote.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64_simd::STANDARD as BASE64;
use fsd_api::MAX_ENCODED_READ_BYTES;
use fsd_api::files::{ApplyStep, Encoding, FileInfo, FileStat, StepOutcome};

use super::across;
use super::atomic::{AtomicWriteError, Destination};
use super::error::FileError;
use super::listing::{self, ListOptions};
use super::mime;
use super::permissions::ModeSpec;
use super::scratch_log::ScratchLog;
use super::special::{self, Patient, Special};
use crate::paths::{Follow, PathError, PathPolicy, Paths};
use fsd_search::{Refused, Within};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

/// A file read whole, encoded for JSON.
#[derive(Debug)]
pub struct EncodedFile {
    pub content: String,
    pub encoding: Encoding,
    pub mime_type: String,
    pub size: u64,
}

/// A file opened for streaming, with what its metadata event says.
pub struct OpenedFile {
    pub file: fs::File,
    /// Bytes already read for sniffing; the stream starts with them, then reads `file` on
    /// (devices and procfs files cannot always seek back).
    pub head: Vec<u8>,
    pub mime_type: String,
    pub size: u64,
    /// Whether `size` is what reads will give (a regular file outside procfs and sysfs).
    pub size_known: bool,
    pub binary: bool,
}

/// A file opened for the raw download route.
pub enum Download {
    /// A regular file: served with its length and Range support.
    Sized { file: fs::File, path: PathBuf },
    /// A device or procfs file: streamed as reads give it, without a length.
    Stream(Patient),
}

pub struct FileService {
    paths: Paths,
    policy: PathPolicy,
    /// Where temp files go, for the sweep after a crash.
    scratch: Arc<ScratchLog>,
    /// Files' hashes from earlier manifests.
    hashes: Arc<super::manifest::HashCache>,
}

impl FileService {
    /// What a path in a request means here (a session's directory, the policy).
    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    pub fn new(paths: Paths, scratch: ScratchLog) -> Self {
        Self {
            policy: paths.policy().clone(),
            paths,
            scratch: Arc::new(scratch),
            hashes: Arc::default(),
        }
    }

    /// Reads a whole file for the JSON route. `encoding` `None` picks base64 for binary
    /// content and for text that is not valid UTF-8, so nothing is lost in transit.
    pub async fn read(
        &self,
        session: Option<&str>,
        raw: &str,
        encoding: Option<Encoding>,
    ) -> Result<EncodedFile, FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        let beneath = self.policy.beneath().cloned();
        if read_here(&path) {
            let (file, meta) = open_readable(&path, &raw, beneath.as_deref())?;
            if meta.is_file() && meta.len() <= READ_HERE_BYTES && open_on_local_filesystem(&file) {
                return read_opened(file, &meta, &path, raw, encoding);
            }
            // Swapped for something else since it was looked at (another kind of file, a
            // larger one, one in a bucket): not on this thread.
            return blocking(move || read_opened(file, &meta, &path, raw, encoding)).await;
        }
        blocking(move || {
            let (file, meta) = open_readable(&path, &raw, beneath.as_deref())?;
            read_opened(file, &meta, &path, raw, encoding)
        })
        .await
    }

    /// Opens a file for `/api/read/stream`, sniffing its type from the first bytes (those
    /// that are there at once, for a file whose size stat cannot tell).
    pub async fn open_for_stream(
        &self,
        session: Option<&str>,
        raw: &str,
    ) -> Result<OpenedFile, FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        let beneath = self.policy.beneath().cloned();
        blocking(move || {
            let (mut file, meta) = open_readable(&path, &raw, beneath.as_deref())?;
            let unknown = special::size_unknown(&file, &meta);
            let mut head = vec![0; mime::SNIFF_BYTES];
            let read = if unknown {
                // Only what is there at once: a device may never give more.
                special::read_ready(&mut file, &mut head)
            } else {
                read_full(&mut file, &mut head)
            }
            .map_err(FileError::io("read", &path))?;
            head.truncate(read);
            let mime_type = mime::detect(&path, &head);
            let binary = !(mime::is_text(&mime_type) && mime::looks_like_utf8_text(&head));
            Ok(OpenedFile {
                file,
                head,
                mime_type,
                size: meta.len(),
                size_known: !unknown,
                binary,
            })
        })
        .await
    }

    /// The directory at `raw` (in `session`'s directory when relative), for the archive
    /// route.
    pub async fn directory(
        &self,
        session: Option<&str>,
        raw: &str,
    ) -> Result<std::path::PathBuf, FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        blocking(move || match fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => Ok(path),
            Ok(_) => Err(FileError::NotDirectory { path: raw }),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                Err(FileError::not_found("Directory", &raw))
            }
            Err(err) => Err(FileError::Io {
                op: "stat",
                path: raw,
                source: err,
            }),
        })
        .await
    }

    /// Opens a file for the raw download route: a regular file of known size, or a file
    /// (a device, procfs) that must be streamed as reads give it.
    pub async fn open_for_download(&self, raw: &str) -> Result<Download, FileError> {
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        let beneath = self.policy.beneath().cloned();
        blocking(move || {
            let (file, meta) = open_readable(&path, &raw, beneath.as_deref())?;
            Ok(if special::size_unknown(&file, &meta) {
                Download::Stream(Patient::bounded(file))
            } else {
                Download::Sized { file, path }
            })
        })
        .await
    }

    /// Replaces the file at `raw` with `bytes`, atomically, with `mode` applied to the
    /// mode it would have had (the file appears with it); answers the bytes written and the
    /// mode set.
    pub async fn write(
        &self,
        session: Option<&str>,
        raw: &str,
        bytes: bytes::Bytes,
        mode: Option<ModeSpec>,
    ) -> Result<(u64, Option<u32>), FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        let len = bytes.len() as u64;
        let scratch = self.scratch.clone();
        let beneath = self.policy.beneath().cloned();
        let open = move |path: &Path, raw: &str| {
            Destination::open(path, Some(&scratch), beneath.as_deref())
                .map_err(|err| write_error(err, path, raw))
        };
        let mode = if write_here(&path, len) {
            let destination = open(&path, &raw)?;
            if let Destination::Replace(_) = destination {
                fill(destination, &bytes, mode, &path, &raw)?
            } else {
                // A device or FIFO may keep its writer waiting: not on this thread.
                blocking(move || fill(destination, &bytes, mode, &path, &raw)).await?
            }
        } else {
            blocking(move || fill(open(&path, &raw)?, &bytes, mode, &path, &raw)).await?
        };
        Ok((len, mode))
    }

    /// Starts a write of `raw` that the caller streams into (see [`Destination`]).
    pub async fn open_destination(&self, raw: &str) -> Result<Destination, FileError> {
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        let scratch = self.scratch.clone();
        let beneath = self.policy.beneath().cloned();
        blocking(move || {
            Destination::open(&path, Some(&scratch), beneath.as_deref())
                .map_err(|err| write_error(err, &path, &raw))
        })
        .await
    }

    /// The temp file of an atomic replacement of `raw`, for a write that may be abandoned
    /// (see `json_write`); `None` when the write cannot start or the target is not a regular
    /// file, so that the ordinary path reports it. Blocking.
    pub fn open_replacement(&self, raw: &str) -> Option<Destination> {
        let path = self.policy.resolve("path", raw, Follow::Final).ok()?;
        Destination::open_replacement(
            &path,
            Some(&self.scratch),
            self.policy.beneath().map(|b| &**b),
        )
        .ok()
        .flatten()
    }

    /// Deletes a file or symlink; directories are refused, as in the reference.
    pub async fn delete(&self, session: Option<&str>, raw: &str) -> Result<(), FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let path = self.policy.resolve("path", raw, Follow::Parent)?;
        let raw = raw.to_string();
        let beneath = self.policy.beneath().cloned();
        blocking(move || {
            if let Some(within) = beneath.as_deref() {
                return delete_beneath(within, &path, &raw);
            }
            let meta = lstat(&path, "File", &raw)?;
            if meta.is_dir() {
                return Err(FileError::IsDirectory {
                    message: format!(
                        "Cannot delete directory with deleteFile() at '{raw}'. \
                         Use exec('rm -rf {raw}') instead."
                    ),
                    path: raw,
                });
            }
            fs::remove_file(&path).map_err(FileError::io("delete", &path))
        })
        .await
    }

    /// Moves `source` to `destination` with `mv`'s rules: into an existing directory if the
    /// destination is one, replacing an existing file, copying across filesystems.
    pub async fn rename(
        &self,
        session: Option<&str>,
        (source_field, source_raw): (&'static str, &str),
        (dest_field, dest_raw): (&'static str, &str),
    ) -> Result<(), FileError> {
        let source_raw = &self
            .paths
            .in_session(session, source_field, source_raw)
            .await;
        let dest_raw = &self.paths.in_session(session, dest_field, dest_raw).await;
        let source = self
            .policy
            .resolve(source_field, source_raw, Follow::Parent)?;
        let mut destination = self.policy.resolve(dest_field, dest_raw, Follow::Final)?;
        let source_raw = source_raw.to_string();
        let dest_raw = dest_raw.to_string();
        let policy = self.policy.clone();
        blocking(move || {
            // Confined, even the looks that choose the answer are taken beneath the roots:
            // a link swapped in tells nothing of what is outside.
            let within = policy.beneath().map(|within| &**within);
            let refused = |raw: &str| {
                FileError::Path(PathError::OutsideRoots {
                    path: raw.to_string(),
                })
            };
            match within {
                Some(within) => match within.symlink_metadata(&source) {
                    Ok(_) => {}
                    Err(Refused::Outside) => return Err(refused(&source_raw)),
                    Err(Refused::Io(err)) if err.kind() == io::ErrorKind::NotFound => {
                        return Err(FileError::not_found("Source file", &source_raw));
                    }
                    Err(Refused::Io(err)) => return Err(FileError::io("stat", &source)(err)),
                },
                None => {
                    lstat(&source, "Source file", &source_raw)?;
                }
            }
            let metadata = |path: &Path| match within {
                Some(within) => within.metadata(path).map_err(io::Error::from),
                None => fs::metadata(path),
            };
            if metadata(&destination).is_ok_and(|meta| meta.is_dir())
                && let Some(name) = source.file_name()
            {
                destination.push(name);
                // The final name is new; check it like any other path.
                let joined = destination.display().to_string();
                policy.resolve(dest_field, &joined, Follow::Parent)?;
            }
            if destination.starts_with(&source) && destination != source {
                return Err(FileError::InvalidMove {
                    field: dest_field,
                    reason: format!("cannot move '{source_raw}' into itself ('{dest_raw}')"),
                });
            }
            match destination.parent().map(metadata) {
                Some(Err(err)) if fsd_search::is_outside(&err) => {
                    return Err(refused(&dest_raw));
                }
                Some(Ok(meta)) if meta.is_dir() => {}
                Some(Ok(_)) => return Err(FileError::NotDirectory { path: dest_raw }),
                _ => return Err(FileError::not_found("Destination directory", &dest_raw)),
            }
            // Confined, the move is made relative to the two directories opened beneath
            // the roots, so a link swapped in on either side since the checks leads nowhere.
            let moved = match policy.beneath() {
                Some(within) => rename_beneath(within, &source, &destination),
                None => fs::rename(&source, &destination).map_err(Refused::Io),
            };
            let moved = match moved {
                Err(Refused::Outside) => {
                    return Err(FileError::Path(PathError::OutsideRoots { path: dest_raw }));
                }
                Err(Refused::Io(err)) => Err(err),
                Ok(()) => Ok(()),
            };
            match moved {
                Err(err) if err.raw_os_error() == Some(nix::errno::Errno::EXDEV as i32) => {
                    match across::move_across(&source, &destination, policy.beneath().map(|w| &**w))
                    {
                        Ok(()) => Ok(()),
                        Err(Refused::Outside) => {
                            Err(FileError::Path(PathError::OutsideRoots { path: dest_raw }))
                        }
                        Err(Refused::Io(err)) => Err(FileError::io("move", &destination)(err)),
                    }
                }
                // The kernel's word that a directory would move into itself, seen through
                // `..` or links where the check above could not.
                Err(err) if err.raw_os_error() == Some(nix::errno::Errno::EINVAL as i32) => {
                    Err(FileError::InvalidMove {
                        field: dest_field,
                        reason: format!("cannot move '{source_raw}' into itself ('{dest_raw}')"),
                    })
                }
                other => other.map_err(FileError::io("move", &destination)),
            }
        })
        .await
    }

    /// Makes a directory; with `mode`, the directory this call made gets it (as
    /// `mkdir -m`: parents made on the way and a directory already there keep theirs, and
    /// the umask does not apply). Answers the mode set.
    pub async fn mkdir(
        &self,
        session: Option<&str>,
        raw: &str,
        recursive: bool,
        mode: Option<ModeSpec>,
    ) -> Result<Option<u32>, FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        let beneath = self.policy.beneath().cloned();
        blocking(move || {
            if let Some(within) = beneath.as_deref() {
                return mkdir_beneath(within, &path, &raw, recursive, mode);
            }
            let existed = recursive && path.is_dir();
            let result = if recursive {
                fs::create_dir_all(&path)
            } else {
                fs::create_dir(&path)
            };
            result.map_err(|err| match err.kind() {
                io::ErrorKind::AlreadyExists => FileError::AlreadyExists { path: raw.clone() },
                io::ErrorKind::NotFound => FileError::not_found("Parent directory", &raw),
                io::ErrorKind::NotADirectory => FileError::NotDirectory { path: raw.clone() },
                _ => FileError::io("mkdir", &path)(err),
            })?;
            let Some(spec) = mode.filter(|_| !existed) else {
                return Ok(None);
            };
            let current = fs::symlink_metadata(&path)
                .map_err(FileError::io("mkdir", &path))?
                .permissions()
                .mode();
            let wanted = spec.apply(current, true);
            fs::set_permissions(&path, fs::Permissions::from_mode(wanted))
                .map_err(FileError::io("chmod", &path))?;
            Ok(Some(wanted))
        })
        .await
    }

    pub async fn list(
        &self,
        session: Option<&str>,
        raw: &str,
        options: ListOptions,
    ) -> Result<Vec<FileInfo>, FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        let beneath = self.policy.beneath().cloned();
        blocking(move || {
            if let Some(within) = beneath.as_deref() {
                let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
                let opened = open_beneath(within, &path, &raw, flags, "Directory")?;
                return Ok(listing::list_beneath(opened.into(), &path, options));
            }
            match fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return Err(FileError::NotDirectory { path: raw }),
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    return Err(FileError::not_found("Directory", &raw));
                }
                Err(err) => return Err(FileError::io("list", &path)(err)),
            }
            Ok(listing::list(&path, options))
        })
        .await
    }

    /// Every entry below the directory `raw` with its hash or target (see `manifest`),
    /// leaving out what the `.gitignore`-style lines of `exclude` match; with `paths`, only
    /// the entries at those relative paths and below them.
    pub async fn manifest(
        &self,
        session: Option<&str>,
        raw: &str,
        exclude: &[String],
        paths: Option<Vec<String>>,
    ) -> Result<super::manifest::Manifest, FileError> {
        for (index, path) in paths.iter().flatten().enumerate() {
            super::apply::relative(path).map_err(|reason| FileError::InvalidStep {
                field: format!("paths[{index}]"),
                reason,
            })?;
        }
        let mut patterns = ignore::gitignore::GitignoreBuilder::new("");
        for line in exclude {
            patterns
                .add_line(None, line)
                .map_err(|error| FileError::InvalidExclude(error.to_string()))?;
        }
        let patterns = patterns
            .build()
            .map_err(|error| FileError::InvalidExclude(error.to_string()))?;
        let (root, path) = self.tree_root(session, raw).await?;
        let hashes = Arc::clone(&self.hashes);
        blocking(move || {
            match paths {
                Some(paths) if !paths.is_empty() => {
                    super::manifest::walk_paths(root, &paths, &patterns, &hashes)
                }
                _ => super::manifest::walk(root, &patterns, &hashes),
            }
            .map_err(FileError::io("manifest", &path))
        })
        .await
    }

    /// The entries at `paths` and below them in the directory `dir`, one the daemon chose
    /// itself (a merge's views; its fork point lies beneath the state directory), so not
    /// checked against `--confine`; hashes kept as manifests keep them. Blocking.
    pub fn entries_at(
        &self,
        dir: &Path,
        paths: &[String],
    ) -> io::Result<super::manifest::Manifest> {
        let root: OwnedFd = fs::File::open(dir)?.into();
        super::manifest::walk_paths(
            root,
            paths,
            &ignore::gitignore::Gitignore::empty(),
            &self.hashes,
        )
    }

    /// The directory `raw` opened as the root of a tree walked or changed relative to it
    /// (beneath the roots when confined), and where it is.
    async fn tree_root(
        &self,
        session: Option<&str>,
        raw: &str,
    ) -> Result<(OwnedFd, PathBuf), FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        let beneath = self.policy.beneath().cloned();
        blocking(move || {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
            let opened: OwnedFd = match beneath.as_deref() {
                Some(within) => open_beneath(within, &path, &raw, flags, "Directory")?.into(),
                None => match fs::metadata(&path) {
                    Ok(meta) if meta.is_dir() => fs::File::open(&path)
                        .map_err(FileError::io("open", &path))?
                        .into(),
                    Ok(_) => return Err(FileError::NotDirectory { path: raw }),
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {
                        return Err(FileError::not_found("Directory", &raw));
                    }
                    Err(err) => return Err(FileError::io("open", &path)(err)),
                },
            };
            Ok((opened, path))
        })
        .await
    }

    /// Applies a batch of checked changes below the directory `raw` (see
    /// `super::apply`), the files' content read from `body`.
    pub async fn apply(
        &self,
        session: Option<&str>,
        raw: &str,
        steps: Vec<ApplyStep>,
        mut body: impl Read + Send + 'static,
    ) -> Result<Vec<StepOutcome>, FileError> {
        if let Some((field, reason)) = super::apply::invalid_step(&steps, 0) {
            return Err(FileError::InvalidStep { field, reason });
        }
        let (root, path) = self.tree_root(session, raw).await?;
        let hashes = Arc::clone(&self.hashes);
        let scratch = self.scratch.clone();
        blocking(move || {
            Ok(super::apply::apply(
                &root, &path, steps, &mut body, &hashes, &scratch,
            )?)
        })
        .await
    }

    /// Whether the path exists, following symlinks (a dangling link does not exist).
    pub async fn exists(&self, session: Option<&str>, raw: &str) -> Result<bool, FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let path = self.policy.resolve("path", raw, Follow::Final)?;
        let raw = raw.to_string();
        let beneath = self.policy.beneath().cloned();
        blocking(move || match beneath.as_deref() {
            Some(within) => match open_beneath(within, &path, &raw, OFlag::O_PATH, "File") {
                Ok(_) => Ok(true),
                Err(FileError::NotFound { .. }) => Ok(false),
                Err(err) => Err(err),
            },
            None => Ok(fs::exists(&path).unwrap_or(false)),
        })
        .await
    }

    pub async fn stat(
        &self,
        session: Option<&str>,
        raw: &str,
        follow: bool,
    ) -> Result<FileStat, FileError> {
        let raw = &self.paths.in_session(session, "path", raw).await;
        let follow = if follow {
            Follow::Final
        } else {
            Follow::Parent
        };
        let path = self.policy.resolve("path", raw, follow)?;
        let raw = raw.to_string();
        let beneath = self.policy.beneath().cloned();
        blocking(move || {
            if let Some(within) = beneath.as_deref() {
                return stat_beneath(within, &path, &raw, follow);
            }
            let meta = match follow {
                Follow::Final => fs::metadata(&path),
                Follow::Parent => fs::symlink_metadata(&path),
            }
            .map_err(|err| match err.kind() {
                io::ErrorKind::NotFound => FileError::not_found("File", &raw),
                _ => FileError::io("stat", &path)(err),
            })?;
            let target = meta
                .file_type()
                .is_symlink()
                .then(|| fs::read_link(&path).ok())
                .flatten()
                .map(|target| target.display().to_string());
            Ok(listing::stat(&meta, target))
        })
        .await
    }
}

/// The directory that holds `path`'s last name, opened beneath the roots, and the name;
/// `what` names the path in a not-found answer.
fn parent_beneath(
    within: &Within,
    path: &Path,
    raw: &str,
    what: &'static str,
) -> Result<(OwnedFd, OsString), FileError> {
    within
        .parent_of(path)
        .map_err(|refused| refused_error(refused, path, raw, what))
}

/// What a confined open that failed answers; `what` names the path when it is missing.
fn refused_error(refused: Refused, path: &Path, raw: &str, what: &'static str) -> FileError {
    match refused {
        Refused::Outside => FileError::Path(PathError::OutsideRoots {
            path: raw.to_string(),
        }),
        Refused::Io(err) if err.kind() == io::ErrorKind::NotFound => {
            FileError::not_found(what, raw)
        }
        Refused::Io(err) if err.kind() == io::ErrorKind::NotADirectory => FileError::NotDirectory {
            path: raw.to_string(),
        },
        Refused::Io(err) => FileError::io("open", path)(err),
    }
}

/// Opens `path` (links followed) beneath the roots with `flags`; `what` names it in a
/// not-found answer.
fn open_beneath(
    within: &Within,
    path: &Path,
    raw: &str,
    flags: OFlag,
    what: &'static str,
) -> Result<fs::File, FileError> {
    within
        .open_with(path, flags)
        .map_err(|refused| refused_error(refused, path, raw, what))
}

/// A confined stat: of the object itself (`O_PATH`, the last name not followed unless
/// asked), opened beneath the roots; a link's target read relative to its directory.
fn stat_beneath(
    within: &Within,
    path: &Path,
    raw: &str,
    follow: Follow,
) -> Result<FileStat, FileError> {
    let (meta, target) = match follow {
        Follow::Final => {
            let file = open_beneath(within, path, raw, OFlag::O_PATH, "File")?;
            (file.metadata().map_err(FileError::io("stat", path))?, None)
        }
        Follow::Parent => {
            let (dir, name) = parent_beneath(within, path, raw, "File")?;
            let object = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let file = openat(&dir, name.as_os_str(), object, Mode::empty())
                .map(fs::File::from)
                .map_err(|errno| match errno {
                    Errno::ENOENT => FileError::not_found("File", raw),
                    other => FileError::io("stat", path)(other.into()),
                })?;
            let meta = file.metadata().map_err(FileError::io("stat", path))?;
            let target = meta
                .file_type()
                .is_symlink()
                .then(|| readlinkat(&dir, name.as_os_str()).ok())
                .flatten()
                .map(|target| PathBuf::from(target).display().to_string());
            (meta, target)
        }
    };
    Ok(listing::stat(&meta, target))
}

/// A confined delete: the name unlinked relative to its directory opened beneath the roots.
fn delete_beneath(within: &Within, path: &Path, raw: &str) -> Result<(), FileError> {
    let (dir, name) = parent_beneath(within, path, raw, "File")?;
    let failed = |errno: Errno| match errno {
        Errno::ENOENT => FileError::not_found("File", raw),
        other => FileError::io("delete", path)(io::Error::from(other)),
    };
    let stat = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).map_err(failed)?;
    if listing::kind_of(&stat) == SFlag::S_IFDIR {
        return Err(FileError::IsDirectory {
            message: format!(
                "Cannot delete directory with deleteFile() at '{raw}'. \
                 Use exec('rm -rf {raw}') instead."
            ),
            path: raw.to_string(),
        });
    }
    unlinkat(&dir, name.as_os_str(), UnlinkatFlags::NoRemoveDir).map_err(failed)
}

/// A confined move: renamed relative to both directories opened beneath the roots.
fn rename_beneath(within: &Within, source: &Path, destination: &Path) -> Result<(), Refused> {
    let (from_dir, from) = within.parent_of(source)?;
    let (to_dir, to) = within.parent_of(destination)?;
    Ok(renameat(
        &from_dir,
        from.as_os_str(),
        &to_dir,
        to.as_os_str(),
    )?)
}

/// A confined mkdir: each directory made relative to its parent opened beneath the roots,
/// the mode set through the made directory's own descriptor.
fn mkdir_beneath(
    within: &Within,
    path: &Path,
    raw: &str,
    recursive: bool,
    mode: Option<ModeSpec>,
) -> Result<Option<u32>, FileError> {
    let failed = |err: io::Error| match err.kind() {
        io::ErrorKind::AlreadyExists => FileError::AlreadyExists {
            path: raw.to_string(),
        },
        io::ErrorKind::NotFound => FileError::not_found("Parent directory", raw),
        io::ErrorKind::NotADirectory => FileError::NotDirectory {
            path: raw.to_string(),
        },
        _ => FileError::io("mkdir", path)(err),
    };
    let refused = |refused: Refused| match refused {
        Refused::Outside => FileError::Path(PathError::OutsideRoots {
            path: raw.to_string(),
        }),
        Refused::Io(err) => failed(err),
    };
    let (made, existed) = if recursive {
        let existed = path.is_dir();
        (within.create_dir_all(path).map_err(refused)?, existed)
    } else {
        let (dir, name) = parent_beneath(within, path, raw, "Parent directory")?;
        mkdirat(&dir, name.as_os_str(), Mode::from_bits_truncate(0o777))
            .map_err(|errno| failed(errno.into()))?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let made = openat(&dir, name.as_os_str(), flags, Mode::empty())
            .map_err(|errno| failed(errno.into()))?;
        (fs::File::from(made), false)
    };
    let Some(spec) = mode.filter(|_| !existed) else {
        return Ok(None);
    };
    let current = made
        .metadata()
        .map_err(FileError::io("mkdir", path))?
        .permissions()
        .mode();
    let wanted = spec.apply(current, true);
    made.set_permissions(fs::Permissions::from_mode(wanted))
        .map_err(FileError::io("chmod", path))?;
    Ok(Some(wanted))
}

/// Writes `bytes` into `destination` and commits it with `mode`. Blocking.
fn fill(
    mut destination: Destination,
    bytes: &[u8],
    mode: Option<ModeSpec>,
    path: &Path,
    raw: &str,
) -> Result<Option<u32>, FileError> {
    let failed = |err: io::Error| write_error(err.into(), path, raw);
    destination.reserve(bytes.len() as u64);
    destination.write_all(bytes).map_err(failed)?;
    destination.commit_with_mode(mode).map_err(failed)
}

/// A whole file opened for the JSON route, read and encoded (see [`FileService::read`]).
fn read_opened(
    file: fs::File,
    meta: &fs::Metadata,
    path: &Path,
    raw: String,
    encoding: Option<Encoding>,
) -> Result<EncodedFile, FileError> {
    let unknown = special::size_unknown(&file, meta);
    if !unknown && meta.len() > MAX_ENCODED_READ_BYTES {
        return Err(FileError::TooLarge {
            path: raw,
            actual: Some(meta.len()),
            max: MAX_ENCODED_READ_BYTES,
            operation: "read",
        });
    }
    let capacity = if unknown { 0 } else { meta.len() };
    let mut bytes = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    // A device or procfs file may trickle forever: it gets a total time too (a
    // regular file, on a slow mount say, takes what it takes).
    if unknown {
        Patient::whole(file)
    } else {
        Patient::bounded(file)
    }
    .take(MAX_ENCODED_READ_BYTES + 1)
    .read_to_end(&mut bytes)
    .map_err(FileError::io("read", path))?;
    // A file that grew past the limit, or whose size stat cannot tell (/dev/zero),
    // is refused whole rather than answered cut.
    if bytes.len() as u64 > MAX_ENCODED_READ_BYTES {
        return Err(FileError::TooLarge {
            path: raw,
            actual: None,
            max: MAX_ENCODED_READ_BYTES,
            operation: "read",
        });
    }
    let size = bytes.len() as u64;
    let mime_type = mime::detect(path, &bytes[..bytes.len().min(mime::SNIFF_BYTES)]);
    let encoding = encoding.unwrap_or(
        if mime::is_text(&mime_type) && std::str::from_utf8(&bytes).is_ok() {
            Encoding::Utf8
        } else {
            Encoding::Base64
        },
    );
    let content = match encoding {
        Encoding::Base64 => BASE64.encode_to_string(&bytes),
        Encoding::Utf8 => String::from_utf8(bytes)
            .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned()),
    };
    Ok(EncodedFile {
        content,
        encoding,
        mime_type,
        size,
    })
}

/// The largest whole-file read made on the calling thread (see [`read_here`]).
const READ_HERE_BYTES: u64 = 64 * 1024;

/// Whether a read of the file at `path` is made on the calling (async) thread: a regular
/// file of at most [`READ_HERE_BYTES`] on a filesystem the kernel serves from memory or a
/// local disk is an open, a read and a close, and handing them to a blocking thread and
/// waking the parked caller again cost more than they do on a small machine (as a small
/// write's, see [`write_here`]). The file is opened without blocking and looked at again
/// once open (`fstat`, `fstatfs`), so one swapped in meanwhile is not read here; anything
/// else (a bucket, a device, a larger file) is read on a blocking thread. A path on a
/// bucket's or a network filesystem's mount is not even looked at here: a lookup there
/// waits on its server.
fn read_here(path: &Path) -> bool {
    !crate::paths::on_remote_mount(path)
        && fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.len() <= READ_HERE_BYTES)
        && on_local_filesystem(path)
}

/// The largest write made on the calling thread (see [`write_here`]).
const WRITE_HERE_BYTES: u64 = 64 * 1024;

/// Whether a write of `len` bytes to `path` is made on the calling (async) thread instead
/// of a blocking one: a small replacement that waits for no disk (`--durability atomic`),
/// on a filesystem the kernel serves from memory or a local disk, is a few system calls
/// (about 40 µs for 1 KiB), and on a small machine handing them to a blocking thread and
/// waking the parked caller again cost more than they do (a 1 KiB `writeFile` over the
/// next line's `/rpc`, p50: 0.42–0.54 ms handed off, 0.32–0.40 ms here). A bucket (FUSE),
/// a network filesystem or a flush under `fsync` may wait long, and go to a blocking
/// thread as every write did; so does a write into a device or FIFO.
fn write_here(path: &Path, len: u64) -> bool {
    len <= WRITE_HERE_BYTES
        && !super::durability::flushing()
        && !crate::paths::on_remote_mount(path)
        && on_local_filesystem(path)
}

/// Whether `path` (followed, as a write follows it), or its directory when nothing is there
/// yet, is on a filesystem the kernel serves from memory or a local disk. A dangling link
/// may point anywhere: not known to be local.
fn on_local_filesystem(path: &Path) -> bool {
    use nix::sys::statfs::statfs;
    let fs = match statfs(path) {
        Ok(fs) => fs,
        Err(Errno::ENOENT) if path.symlink_metadata().is_err() => match path.parent().map(statfs) {
            Some(Ok(fs)) => fs,
            _ => return false,
        },
        Err(_) => return false,
    };
    LOCAL_FILESYSTEMS.contains(&fs.filesystem_type())
}

/// Whether an open file is on a filesystem the kernel serves from memory or a local disk.
fn open_on_local_filesystem(file: &fs::File) -> bool {
    nix::sys::statfs::fstatfs(file)
        .is_ok_and(|fs| LOCAL_FILESYSTEMS.contains(&fs.filesystem_type()))
}

/// Filesystems the kernel serves from memory or a local disk (ext2 and ext3 share ext4's
/// magic).
const LOCAL_FILESYSTEMS: [nix::sys::statfs::FsType; 6] = [
    nix::sys::statfs::EXT4_SUPER_MAGIC,
    nix::sys::statfs::XFS_SUPER_MAGIC,
    nix::sys::statfs::BTRFS_SUPER_MAGIC,
    nix::sys::statfs::F2FS_SUPER_MAGIC,
    nix::sys::statfs::TMPFS_MAGIC,
    nix::sys::statfs::OVERLAYFS_SUPER_MAGIC,
];

/// Runs blocking filesystem work off the async threads. The work starts at once, not when
/// the returned future is first polled, so it can run alongside the caller (raw uploads).
pub fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, FileError> + Send + 'static,
) -> impl std::future::Future<Output = Result<T, FileError>> {
    let handle = tokio::task::spawn_blocking(work);
    async move {
        handle.await.unwrap_or_else(|join| {
            Err(FileError::Io {
                op: "run",
                path: String::new(),
                source: io::Error::other(join.to_string()),
            })
        })
    }
}

/// Opens a file to read (following symlinks) without blocking in `open`; directories,
/// FIFOs and sockets are refused with their own errors.
fn open_readable(
    path: &Path,
    raw: &str,
    beneath: Option<&Within>,
) -> Result<(fs::File, fs::Metadata), FileError> {
    // Confined: opened beneath a root by the kernel, whatever link was swapped in since
    // the policy looked.
    let opened = match beneath {
        None => special::open_for_read(path),
        Some(within) => match within.open(path) {
            Ok(file) => Ok(file),
            Err(Refused::Outside) => {
                return Err(FileError::Path(PathError::OutsideRoots {
                    path: raw.to_string(),
                }));
            }
            Err(Refused::Io(err)) => Err(err),
        },
    };
    let file = opened.map_err(|err| {
        if err.kind() == io::ErrorKind::NotFound {
            return FileError::not_found("File", raw);
        }
        // A socket cannot be opened at all (ENXIO); say what it is.
        if let Ok(meta) = fs::metadata(path)
            && let Some(kind) = Special::of(meta.file_type())
            && !kind.writable_into()
        {
            return FileError::Special {
                path: raw.to_string(),
                kind,
                operation: "read",
            };
        }
        FileError::io("open", path)(err)
    })?;
    let meta = file.metadata().map_err(FileError::io("stat", path))?;
    if meta.is_dir() {
        return Err(FileError::IsDirectory {
            path: raw.to_string(),
            message: format!("Path is a directory: {raw}"),
        });
    }
    if let Some(kind @ (Special::Fifo | Special::Socket)) = Special::of(meta.file_type()) {
        return Err(FileError::Special {
            path: raw.to_string(),
            kind,
            operation: "read",
        });
    }
    Ok((file, meta))
}

fn lstat(path: &Path, what: &'static str, raw: &str) -> Result<fs::Metadata, FileError> {
    fs::symlink_metadata(path).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => FileError::not_found(what, raw),
        _ => FileError::io("stat", path)(err),
    })
}

fn write_error(err: AtomicWriteError, path: &Path, raw: &str) -> FileError {
    match err {
        AtomicWriteError::IsDirectory => FileError::IsDirectory {
            path: raw.to_string(),
            message: format!("Path is a directory: {raw}"),
        },
        AtomicWriteError::ParentNotDirectory => FileError::NotDirectory {
            path: raw.to_string(),
        },
        AtomicWriteError::Special(kind) => FileError::Special {
            path: raw.to_string(),
            kind,
            operation: "write to",
        },
        AtomicWriteError::NoReader => FileError::NoReader {
            path: raw.to_string(),
        },
        AtomicWriteError::Outside => FileError::Path(PathError::OutsideRoots {
            path: raw.to_string(),
        }),
        AtomicWriteError::Io(err) => FileError::io("write", path)(err),
    }
}

/// Reads until `buf` is full or the file ends; returns the count.
pub fn read_full(file: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_here_only_on_a_local_filesystem_and_not_through_a_dangling_link() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "x").unwrap();
        assert!(on_local_filesystem(&file));
        assert!(on_local_filesystem(&dir.path().join("new")));
        assert!(!on_local_filesystem(&dir.path().join("missing/new")));
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink("/nowhere/at/all", &dangling).unwrap();
        assert!(!on_local_filesystem(&dangling));
        assert!(!on_local_filesystem(Path::new("/proc/self/comm")));
        assert!(write_here(&file, 1024) != crate::files::durability::flushing());
        assert!(!write_here(&file, WRITE_HERE_BYTES + 1));
    }

    #[test]
    fn reads_here_only_a_small_regular_file_on_a_local_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        fs::write(&small, vec![b'x'; 1024]).unwrap();
        let large = dir.path().join("large");
        fs::write(&large, vec![b'x'; READ_HERE_BYTES as usize + 1]).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&small, &link).unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read_here(&small));
        assert!(open_on_local_filesystem(&fs::File::open(&small).unwrap()));
        assert!(!open_on_local_filesystem(
            &fs::File::open("/proc/self/status").unwrap()
        ));
        assert!(
            read_here(&link),
            "a link to a small file is read as the file"
        );
        assert!(!read_here(&large));
        assert!(!read_here(&fifo), "a FIFO may keep its reader waiting");
        assert!(!read_here(dir.path()));
        assert!(!read_here(&dir.path().join("missing")));
        assert!(
            !read_here(Path::new("/proc/self/status")),
            "procfs is not a local disk"
        );
    }
}
