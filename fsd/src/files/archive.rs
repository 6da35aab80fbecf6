//! `POST /api/files/archive` (fsd extension): a directory's tree as one tar stream, so a
//! client copies a whole tree in one request instead of one per file (`sync`'s first copy).
//!
//! A thread walks the tree (links never followed) and writes tar into a bounded channel the
//! response body reads; memory stays flat. A file that changes while it is read is sent at
//! the size it had when its header was written (cut or padded with zeros): the client took
//! a change token before asking, so the next incremental sync brings it whole.

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use fsd_api::Operation;
use fsd_api::files::ArchiveRequest;
use tokio::sync::mpsc;

use super::FileService;
use crate::channel::receiver_stream;
use crate::error::{ApiError, OperationExt};
use crate::paths::PathError;
use crate::wire::json::JsonBody;

/// Bytes gathered before a chunk goes to the body.
const CHUNK_BYTES: usize = 256 * 1024;
/// Chunks buffered between the walking thread and the socket.
const QUEUE_CHUNKS: usize = 8;

pub async fn archive(
    State(files): State<Arc<FileService>>,
    JsonBody(request): JsonBody<ArchiveRequest>,
) -> Result<Response, ApiError> {
    for name in &request.exclude {
        if name.is_empty() || name.contains(['/', '\0']) || name == "." || name == ".." {
            return Err(PathError::Invalid {
                field: "exclude",
                reason: format!("{name:?} is not one path segment"),
            }
            .into());
        }
    }
    for (index, file) in request.files.iter().enumerate() {
        if let Err(reason) = super::apply::relative(file) {
            return Err(ApiError::validation(
                &format!("files[{index}]"),
                reason,
                "INVALID_PATH",
            ));
        }
    }
    let dir = files
        .directory(request.session_id.as_deref(), &request.path)
        .await
        .op(Operation::FileRead)?;
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(QUEUE_CHUNKS);
    let exclude = request.exclude;
    let files = request.files;
    tokio::task::spawn_blocking(move || {
        let failed = sender.clone();
        let writer = ChannelWriter {
            sender,
            buffer: Vec::with_capacity(CHUNK_BYTES),
        };
        let mut builder = tar::Builder::new(writer);
        builder.follow_symlinks(false);
        // A name excluded at any depth.
        let excluded = |relative: &Path| {
            let name = relative.file_name().unwrap_or_default();
            exclude.iter().any(|x| name == x.as_str())
        };
        let written = if files.is_empty() {
            write_tree(&mut builder, &dir, Path::new(""), &excluded)
        } else {
            write_files(&mut builder, &dir, &files)
        };
        let result = written
            .and_then(|()| builder.into_inner())
            .and_then(|mut writer| writer.flush());
        if let Err(err) = result {
            // The body ends with the error: the client sees a cut stream, not a whole tree.
            tracing::warn!(dir = %dir.display(), error = %err, "archive stream ended early");
            let _ = failed.blocking_send(Err(err));
        }
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-tar")],
        Body::from_stream(receiver_stream(receiver)),
    )
        .into_response())
}

/// Every entry under `dir`, parents before children, in name order, named `prefix/<path
/// relative to dir>`; an entry `excluded` (by its relative path) is left out with what is
/// under it, and so are fsd's scratch files. Links are never followed.
pub fn write_tree<W: Write>(
    builder: &mut tar::Builder<W>,
    dir: &Path,
    prefix: &Path,
    excluded: &dyn Fn(&Path) -> bool,
) -> std::io::Result<()> {
    let walk = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|entry| {
            let relative = entry.path().strip_prefix(dir).unwrap_or(entry.path());
            !excluded(relative) && !fsd_api::scratch::is_scratch(entry.path())
        });
    for entry in walk {
        // Gone while the walk went on: the change token tells the client.
        let Ok(entry) = entry else { continue };
        let Ok(relative) = entry.path().strip_prefix(dir) else {
            continue;
        };
        let named = prefix.join(relative);
        let relative = named.as_path();
        let mut header = tar::Header::new_gnu();
        header.set_size(0);
        // A regular file by the directory's listing is opened and its stat read through
        // the open file: one lookup of its path, not two (a 20,000-file archive spent a
        // fifth of its time in the second).
        let meta = if entry.file_type().is_file() {
            None
        } else {
            let Ok(meta) = entry.metadata() else { continue };
            Some(meta)
        };
        let Some(meta) = meta.filter(|meta| !meta.is_file()) else {
            // Opened without following a link swapped in, and without blocking on a FIFO
            // swapped in; then checked to be a regular file still.
            let Ok(file) = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
                .open(entry.path())
            else {
                continue;
            };
            let Ok(now) = file.metadata() else { continue };
            if !now.is_file() {
                continue;
            }
            let size = now.len();
            header.set_entry_type(tar::EntryType::Regular);
            header.set_size(size);
            header.set_mode(now.mode() & 0o7777);
            header.set_mtime(now.mtime().max(0) as u64);
            let exact = file.take(size).chain(std::io::repeat(0)).take(size);
            builder.append_data(&mut header, relative, exact)?;
            continue;
        };
        header.set_mode(meta.mode() & 0o7777);
        header.set_mtime(meta.mtime().max(0) as u64);
        let kind = meta.file_type();
        if kind.is_dir() {
            header.set_entry_type(tar::EntryType::Directory);
            builder.append_data(&mut header, relative, std::io::empty())?;
        } else if kind.is_symlink() {
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            header.set_entry_type(tar::EntryType::Symlink);
            builder.append_link(&mut header, relative, target)?;
        } else {
            // Told, not carried: a client reports what a copy cannot hold.
            header.set_entry_type(if kind.is_char_device() {
                tar::EntryType::Char
            } else if kind.is_block_device() {
                tar::EntryType::Block
            } else {
                tar::EntryType::Fifo
            });
            builder.append_data(&mut header, relative, std::io::empty())?;
        }
    }
    Ok(())
}

/// The regular files `files` (plain relative paths) below `dir`, each reached through no
/// symlink; one gone, or not a regular file, is left out.
fn write_files<W: Write>(
    builder: &mut tar::Builder<W>,
    dir: &Path,
    files: &[String],
) -> std::io::Result<()> {
    use nix::fcntl::{OFlag, openat};
    let root: std::os::fd::OwnedFd = std::fs::File::open(dir)?.into();
    for relative in files {
        let Ok((parent, name)) = super::manifest::open_parent(&root, relative) else {
            continue;
        };
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let Ok(fd) = openat(&parent, name, flags, nix::sys::stat::Mode::empty()) else {
            continue;
        };
        let file = std::fs::File::from(fd);
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let size = meta.len();
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(size);
        header.set_mode(meta.mode() & 0o7777);
        header.set_mtime(meta.mtime().max(0) as u64);
        let exact = file.take(size).chain(std::io::repeat(0)).take(size);
        builder.append_data(&mut header, relative, exact)?;
    }
    Ok(())
}

/// Hands what tar writes to the response body, in chunks; fails once the client is gone.
struct ChannelWriter {
    sender: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buffer: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buffer,
            Vec::with_capacity(CHUNK_BYTES),
        ));
        self.sender
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(data);
        if self.buffer.len() >= CHUNK_BYTES {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}
