//! `sync`: keep a local directory an exact mirror of a sandbox subtree, incrementally.
//!
//! The first call (no version) copies everything and takes a change token first, so nothing
//! that happens during the copy is missed. Later calls ask what changed since the token and
//! apply just that, in the daemon's four steps (moved origins aside, deletes, moves and new
//! directories, fetches); a `resync` answer falls back to a full copy. The paths the watch
//! never reports (.git, node_modules, .DS_Store) are not mirrored.
//!
//! What a mirror carries: file contents (a file replaced goes through a temp file), directories (empty
//! ones too), symlinks as links with their targets verbatim (never followed, whether they
//! point into the tree or out of it), and permission bits (`rwx` for owner, group and
//! others) of files and directories. What it cannot carry it reports, never silently:
//! devices, FIFOs and sockets are left out and named in [`SyncReport::skipped`], and so is
//! a name that is not UTF-8 met by an incremental sync (a change list is JSON; the first
//! copy, a tar stream, carries such names exactly); hard links arrive as separate files;
//! owners are the local user's.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use bytes::Bytes;
use fsd_api::files::FileType;
use fsd_api::watch::PathChange;
use futures_util::{StreamExt, stream};

use crate::{Sandbox, SdkError};

/// Downloads in flight at once.
const PARALLEL_DOWNLOADS: usize = 16;
/// Names the watch excludes by default, so the mirror leaves them out too.
pub const MIRROR_SKIPS: &[&str] = &[".git", "node_modules", ".DS_Store"];

/// What one `sync` call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// `full`, `incremental` or `unchanged`.
    pub mode: &'static str,
    pub downloaded: usize,
    pub deleted: usize,
    pub renamed: usize,
    /// Symlinks made or remade.
    pub links: usize,
    /// Paths left out because a mirror cannot hold them (devices, FIFOs, sockets).
    pub skipped: Vec<String>,
    /// Pass this to the next call.
    pub version: String,
}

/// How a mirror treats what it meets.
#[derive(Debug, Clone, Copy, Default)]
pub struct MirrorOptions {
    /// Let a full copy of a sandbox directory that holds nothing empty a mirror that holds
    /// something: by default it halts (`SYNC_HALTED`) and removes nothing.
    pub accept_emptied: bool,
}

impl Sandbox {
    /// Brings `local` up to date with `remote` (a directory in the sandbox) since `version`
    /// (from the previous report; `None` the first time).
    pub async fn sync(
        &self,
        remote: &str,
        local: &Path,
        version: Option<&str>,
    ) -> Result<SyncReport, SdkError> {
        self.sync_with(remote, local, version, MirrorOptions::default())
            .await
    }

    /// [`Sandbox::sync`], with `options`.
    pub async fn sync_with(
        &self,
        remote: &str,
        local: &Path,
        version: Option<&str>,
        options: MirrorOptions,
    ) -> Result<SyncReport, SdkError> {
        std::fs::create_dir_all(local)?;
        let root = self.remote_root(remote).await?;
        if let Some(version) = version {
            let answer = self.check_changes(remote, Some(version), true).await?;
            match (answer.status.as_str(), answer.changes) {
                ("unchanged", _) => {
                    return Ok(SyncReport {
                        mode: "unchanged",
                        downloaded: 0,
                        deleted: 0,
                        renamed: 0,
                        links: 0,
                        skipped: Vec::new(),
                        version: answer.version,
                    });
                }
                ("changed", Some(changes)) => {
                    if let Some(report) = self.apply(&root, local, changes, answer.version).await? {
                        return Ok(report);
                    }
                }
                _ => {} // resync: copy everything again
            }
        }
        let baseline = self.check_changes(remote, None, false).await?;
        self.copy_all(remote, local, baseline.version, options)
            .await
    }

    /// The absolute path the daemon reports changes under.
    pub(crate) async fn remote_root(&self, remote: &str) -> Result<PathBuf, SdkError> {
        let workspace = PathBuf::from(self.capabilities().await?.workspace);
        let mut root = PathBuf::new();
        for component in workspace.join(remote).components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => {
                    root.pop();
                }
                other => root.push(other),
            }
        }
        Ok(root)
    }

    /// The first copy (or one after a `resync`): the whole tree as one archive stream,
    /// unpacked as it arrives; then what the mirror holds beyond it is removed, unless the
    /// sandbox's directory held nothing at all (see [`halt_on_emptied`]).
    async fn copy_all(
        &self,
        remote: &str,
        local: &Path,
        version: String,
        options: MirrorOptions,
    ) -> Result<SyncReport, SdkError> {
        let stream = self.download_archive(remote, MIRROR_SKIPS).await?;
        let mirror = local.to_path_buf();
        let unpacked = read_on_a_thread(stream, move |reader| unpack(reader, &mirror)).await??;
        if unpacked.wanted.is_empty() && !options.accept_emptied {
            halt_on_emptied(remote, local)?;
        }
        let deleted = remove_unwanted(local, &unpacked.wanted)?;
        set_dir_modes(local, &unpacked.dir_modes)?;
        Ok(SyncReport {
            mode: "full",
            downloaded: unpacked.downloaded,
            deleted,
            renamed: 0,
            links: unpacked.links,
            skipped: unpacked.skipped,
            version,
        })
    }

    /// Applies a change list in the order its lines need (see docs/api.md, "Watches and change tokens": moved
    /// origins aside deepest first, deletions, moves and new directories in path order, then
    /// downloads). `None` when the mirror lacks a moved origin, so only a full copy helps.
    async fn apply(
        &self,
        root: &Path,
        local: &Path,
        changes: Vec<PathChange>,
        version: String,
    ) -> Result<Option<SyncReport>, SdkError> {
        let plan = Plan::of(root, changes);
        let stage = local.join(format!(".fsd-sync-{}.stage", std::process::id()));
        remove(&stage)?;
        std::fs::create_dir(&stage)?;
        // 1. Every moved origin aside, deepest first, so moving a directory leaves behind
        //    what moved out of it.
        let mut moves = plan.moves;
        moves.sort_by_key(|(from, _)| std::cmp::Reverse(from.components().count()));
        let mut staged: Vec<(PathBuf, PathBuf, PathBuf)> = Vec::new();
        for (index, (from, to)) in moves.into_iter().enumerate() {
            let aside = stage.join(index.to_string());
            match std::fs::rename(local.join(&from), &aside) {
                Ok(()) => staged.push((from, to, aside)),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    remove(&stage)?;
                    return Ok(None);
                }
                Err(err) => return Err(err.into()),
            }
        }
        // 2. Deletions name paths of the old tree; one under a moved origin is where that
        //    origin now waits.
        for gone in &plan.deletes {
            let target = staged
                .iter()
                .filter(|(from, _, _)| gone.starts_with(from) && gone != from)
                .max_by_key(|(from, _, _)| from.components().count())
                .and_then(|(from, _, aside)| gone.strip_prefix(from).ok().map(|r| aside.join(r)))
                .unwrap_or_else(|| local.join(gone));
            remove(&target)?;
        }
        // 3. Moves and new directories, parents first, each replacing what is there.
        let mut placed: Vec<(PathBuf, Option<PathBuf>)> = staged
            .into_iter()
            .map(|(_, to, aside)| (to, Some(aside)))
            .chain(plan.new_dirs.iter().cloned().map(|dir| (dir, None)))
            .collect();
        placed.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, aside) in &placed {
            if through_link(local, path) {
                continue;
            }
            let target = local.join(path);
            remove(&target)?;
            match aside {
                Some(aside) => {
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::rename(aside, &target)?;
                }
                None => std::fs::create_dir_all(&target)?,
            }
        }
        remove(&stage)?;
        // 4. Contents, links and modes of what was made or changed (what each path is now
        //    is asked: a change list says only whether it is a directory), then the modes
        //    of directories, last, so that a read-only one does not stop its own filling.
        let fetches: Vec<PathBuf> = plan
            .downloads
            .into_iter()
            .chain(plan.new_dirs)
            .chain(plan.kept_dirs)
            .collect();
        let fetched = self.fetch_all(root, local, fetches).await?;
        set_dir_modes(local, &fetched.dir_modes)?;
        Ok(Some(SyncReport {
            mode: "incremental",
            downloaded: fetched.downloaded,
            deleted: plan.deletes.len(),
            renamed: placed.iter().filter(|(_, aside)| aside.is_some()).count(),
            links: fetched.links,
            skipped: fetched.skipped,
            version,
        }))
    }

    /// Brings each path over as what it is in the sandbox (a file, a directory, a link, or
    /// something a mirror cannot hold), several at a time. A path gone meanwhile is left
    /// to the next sync, which hears of it.
    async fn fetch_all(
        &self,
        root: &Path,
        local: &Path,
        fetches: Vec<PathBuf>,
    ) -> Result<Fetched, SdkError> {
        let results: Vec<Result<Option<Outcome>, SdkError>> = stream::iter(fetches)
            .map(|relative| self.fetch(root, local, relative))
            .buffer_unordered(PARALLEL_DOWNLOADS)
            .collect()
            .await;
        let mut fetched = Fetched::default();
        for result in results {
            match result? {
                Some(Outcome::Downloaded) => fetched.downloaded += 1,
                Some(Outcome::Linked) => fetched.links += 1,
                Some(Outcome::Dir(path, mode)) => fetched.dir_modes.push((path, mode)),
                Some(Outcome::Skipped(path)) => fetched.skipped.push(path),
                None => {}
            }
        }
        fetched.skipped.sort();
        Ok(fetched)
    }

    async fn fetch(
        &self,
        root: &Path,
        local: &Path,
        relative: PathBuf,
    ) -> Result<Option<Outcome>, SdkError> {
        if through_link(local, &relative) {
            // The mirror holds a link where the path needs a directory: a change list that
            // asks for this (from a daemon that lies, or a race) would write outside it.
            return Ok(Some(Outcome::Skipped(relative.display().to_string())));
        }
        let target = local.join(&relative);
        let remote = root.join(&relative).display().to_string();
        let gone = |err: &SdkError| {
            matches!(
                err.code(),
                Some(fsd_api::ErrorCode::FileNotFound | fsd_api::ErrorCode::IsDirectory)
            )
        };
        let stat = match self.stat(&remote, false).await {
            Ok(stat) => stat,
            // A name that is not UTF-8 reaches a change list with U+FFFD in place of its
            // bytes (JSON cannot carry it) and cannot be asked for by that name: said, not
            // skipped silently (a full copy, which is tar, carries it).
            Err(err) if gone(&err) && remote.contains('\u{FFFD}') => {
                return Ok(Some(Outcome::Skipped(relative.display().to_string())));
            }
            Err(err) if gone(&err) => return Ok(None),
            Err(err) => return Err(err),
        };
        let (kind, link) = (stat.file_type, stat.symlink_target);
        let mode = u32::from_str_radix(&stat.mode_octal, 8)
            .ok()
            .map(|mode| mode & 0o7777);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match kind {
            FileType::Directory => {
                ensure_dir(&target)?;
                Ok(Some(Outcome::Dir(relative, mode)))
            }
            FileType::Symlink => match link {
                Some(link) => {
                    make_link(&target, Path::new(&link))?;
                    Ok(Some(Outcome::Linked))
                }
                None => Ok(None),
            },
            FileType::File => {
                if std::fs::symlink_metadata(&target).is_ok_and(|meta| meta.is_dir()) {
                    std::fs::remove_dir_all(&target)?;
                }
                match self.download_to(&remote, &target).await {
                    Ok(_) => {
                        if let Some(mode) = mode {
                            set_mode(&target, mode)?;
                        }
                        Ok(Some(Outcome::Downloaded))
                    }
                    Err(err) if gone(&err) => Ok(None),
                    Err(err) => Err(err),
                }
            }
            FileType::Other => {
                remove(&target)?;
                Ok(Some(Outcome::Skipped(relative.display().to_string())))
            }
        }
    }
}

enum Outcome {
    Downloaded,
    Linked,
    /// A directory, with the mode to give it once it is filled.
    Dir(PathBuf, Option<u32>),
    Skipped(String),
}

#[derive(Default)]
struct Fetched {
    downloaded: usize,
    links: usize,
    dir_modes: Vec<(PathBuf, Option<u32>)>,
    skipped: Vec<String>,
}

/// Whether a directory above `relative` in the mirror is a symlink (never written through).
fn through_link(local: &Path, relative: &Path) -> bool {
    let mut at = local.to_path_buf();
    let mut components = relative.components().peekable();
    while let Some(component) = components.next() {
        if components.peek().is_none() {
            break;
        }
        at.push(component);
        if std::fs::symlink_metadata(&at).is_ok_and(|meta| meta.file_type().is_symlink()) {
            return true;
        }
    }
    false
}

/// What unpacking an archive into the mirror did.
struct Unpacked {
    wanted: HashSet<PathBuf>,
    downloaded: usize,
    links: usize,
    dir_modes: Vec<(PathBuf, Option<u32>)>,
    skipped: Vec<String>,
}

/// Unpacks the daemon's archive into the mirror, entry by entry: nothing outside it (only
/// plain relative paths, never through a link), files through temp names, links made as
/// links, directories' modes given last.
fn unpack(reader: impl std::io::Read, local: &Path) -> Result<Unpacked, SdkError> {
    let mut archive = tar::Archive::new(reader);
    // Directories made by this unpacking (parents come first): what is below them needs no
    // check for links on the way.
    let mut made: HashSet<PathBuf> = HashSet::from([PathBuf::new()]);
    let mut unpacked = Unpacked {
        wanted: HashSet::new(),
        downloaded: 0,
        links: 0,
        dir_modes: Vec::new(),
        skipped: Vec::new(),
    };
    for entry in archive.entries()? {
        let mut entry = entry?;
        let relative = entry.path()?.into_owned();
        let plain = relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        if !plain || relative.as_os_str().is_empty() || skipped(&relative) {
            continue;
        }
        let parent_made = relative
            .parent()
            .is_some_and(|parent| made.contains(parent));
        if !parent_made && through_link(local, &relative) {
            unpacked.skipped.push(relative.display().to_string());
            continue;
        }
        let target = local.join(&relative);
        let mode = entry.header().mode().ok().map(|mode| mode & 0o7777);
        unpacked.wanted.insert(relative.clone());
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                ensure_dir(&target)?;
                made.insert(relative.clone());
                unpacked.dir_modes.push((relative, mode));
            }
            tar::EntryType::Symlink => {
                let Some(link) = entry.link_name()? else {
                    continue;
                };
                make_link(&target, &link)?;
                unpacked.links += 1;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if std::fs::symlink_metadata(&target).is_ok_and(|meta| meta.is_dir()) {
                    std::fs::remove_dir_all(&target)?;
                }
                let name = target
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let temp =
                    target.with_file_name(format!(".{name}.fsd-sync-{}.tmp", std::process::id()));
                let written = (|| {
                    use std::os::unix::fs::PermissionsExt;
                    // Nothing there (a first copy, mostly): written in place; else through
                    // a temp file renamed over what is there.
                    let fresh = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&target);
                    let (mut file, path) = match fresh {
                        Ok(file) => (file, None),
                        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                            (std::fs::File::create(&temp)?, Some(&temp))
                        }
                        Err(err) => return Err(err),
                    };
                    std::io::copy(&mut entry, &mut file)?;
                    if let Some(mode) = mode {
                        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
                    }
                    match path {
                        Some(temp) => std::fs::rename(temp, &target),
                        None => Ok(()),
                    }
                })();
                if let Err(err) = written {
                    let _ = std::fs::remove_file(&temp);
                    return Err(err.into());
                }
                unpacked.downloaded += 1;
            }
            _ => {
                unpacked.wanted.remove(&relative);
                remove(&target)?;
                unpacked.skipped.push(relative.display().to_string());
            }
        }
    }
    unpacked.skipped.sort();
    Ok(unpacked)
}

/// A blocking reader over the chunks an async task receives.
/// Feeds `stream` to `read` on a blocking thread (a tar unpacker, say), through a bounded
/// channel; a stream error reaches `read` as a read error, and `read`'s answer is returned
/// (when it stops early, its error is the one to answer).
pub(crate) async fn read_on_a_thread<T, E>(
    stream: impl futures_util::Stream<Item = Result<Bytes, SdkError>>,
    read: impl FnOnce(ChannelReader) -> Result<T, E> + Send + 'static,
) -> Result<Result<T, E>, SdkError>
where
    T: Send + 'static,
    E: Send + 'static,
{
    let mut stream = Box::pin(stream);
    let (sender, receiver) = std::sync::mpsc::sync_channel::<std::io::Result<Bytes>>(8);
    let reading = tokio::task::spawn_blocking(move || read(ChannelReader::new(receiver)));
    while let Some(chunk) = stream.next().await {
        let item = chunk.map_err(|err| std::io::Error::other(err.to_string()));
        let failed = item.is_err();
        if sender.send(item).is_err() || failed {
            break;
        }
    }
    drop(sender);
    reading
        .await
        .map_err(|err| SdkError::Io(std::io::Error::other(err.to_string())))
}

pub(crate) struct ChannelReader {
    receiver: std::sync::mpsc::Receiver<std::io::Result<Bytes>>,
    current: Bytes,
}

impl ChannelReader {
    pub(crate) fn new(receiver: std::sync::mpsc::Receiver<std::io::Result<Bytes>>) -> Self {
        Self {
            receiver,
            current: Bytes::new(),
        }
    }
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.receiver.recv() {
                Ok(chunk) => self.current = chunk?,
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        let _ = self.current.split_to(n);
        Ok(n)
    }
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Gives directories their modes, deepest first (a parent closed to writes last).
fn set_dir_modes(local: &Path, modes: &[(PathBuf, Option<u32>)]) -> std::io::Result<()> {
    let mut modes: Vec<&(PathBuf, Option<u32>)> = modes.iter().collect();
    modes.sort_by_key(|(path, _)| std::cmp::Reverse(path.components().count()));
    for (path, mode) in modes {
        if let Some(mode) = mode {
            let target = local.join(path);
            if std::fs::symlink_metadata(&target).is_ok_and(|meta| meta.is_dir()) {
                set_mode(&target, *mode)?;
            }
        }
    }
    Ok(())
}

/// Makes `path` a symlink to `target` (verbatim), replacing what is there: made under a
/// temporary name and renamed over a file or link; a directory in the way is removed first.
fn make_link(path: &Path, target: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir()) {
        std::fs::remove_dir_all(path)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.fsd-link-{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    std::os::unix::fs::symlink(target, &temp)?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// A change list sorted into the steps that apply it (paths relative to the mirror).
#[derive(Default)]
struct Plan {
    /// (origin in the old tree, where it is now).
    moves: Vec<(PathBuf, PathBuf)>,
    deletes: Vec<PathBuf>,
    /// New directories: whatever is at the path is replaced.
    new_dirs: Vec<PathBuf>,
    /// Directories that were there and still are.
    kept_dirs: Vec<PathBuf>,
    downloads: Vec<PathBuf>,
}

impl Plan {
    fn of(root: &Path, changes: Vec<PathChange>) -> Self {
        let mut plan = Plan::default();
        for change in changes {
            let Some(path) = relative_to(root, &change.path) else {
                continue;
            };
            if skipped(&path) {
                continue;
            }
            match change.change.as_str() {
                "deleted" => plan.deletes.push(path),
                "renamed" => {
                    let from = change.from.as_deref().and_then(|f| relative_to(root, f));
                    match from.filter(|f| !skipped(f)) {
                        Some(from) => plan.moves.push((from, path)),
                        // Moved in from what the mirror leaves out: new here.
                        None if change.is_directory => plan.new_dirs.push(path),
                        None => plan.downloads.push(path),
                    }
                }
                "created" if change.is_directory => plan.new_dirs.push(path),
                _ if change.is_directory => plan.kept_dirs.push(path),
                _ => plan.downloads.push(path),
            }
        }
        plan
    }
}

fn relative_to(root: &Path, path: &str) -> Option<PathBuf> {
    Path::new(path)
        .strip_prefix(root)
        .ok()
        .map(Path::to_path_buf)
        .filter(|p| !p.as_os_str().is_empty())
}

fn skipped(relative: &Path) -> bool {
    relative
        .components()
        .any(|c| MIRROR_SKIPS.iter().any(|s| c.as_os_str() == *s))
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

/// Makes `path` a directory, replacing a file (or link) that is there.
fn ensure_dir(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => {
            std::fs::remove_file(path)?;
            std::fs::create_dir_all(path)
        }
        Err(_) => std::fs::create_dir_all(path),
    }
}

/// Refuses a full copy of a sandbox directory that holds nothing into a mirror that holds
/// something: a sandbox that lost its disk (a container's is ephemeral, and its daemon's
/// change list with it, so the mirror copies whole) would otherwise empty the mirror, the
/// only copy of the work left; so would a mirror pointed at the wrong directory. The
/// two-way sync halts the same way (`TwoWayOptions::accept_emptied`).
fn halt_on_emptied(remote: &str, local: &Path) -> Result<(), SdkError> {
    let held = std::fs::read_dir(local)?
        .flatten()
        .filter(|entry| !MIRROR_SKIPS.iter().any(|skip| entry.file_name() == *skip))
        .count();
    if held == 0 {
        return Ok(());
    }
    Err(SdkError::coded(
        fsd_api::ErrorCode::SyncHalted,
        format!(
            "halted, nothing removed: the sandbox directory {remote} holds nothing, and a \
             full copy would empty the mirror {}, which holds {held} entries; if that is \
             what you want, run again with --accept-emptied",
            local.display()
        ),
        serde_json::json!({ "emptied": remote, "entries": held }),
    ))
}

/// Removes local entries the remote no longer has; returns how many.
fn remove_unwanted(local: &Path, wanted: &HashSet<PathBuf>) -> std::io::Result<usize> {
    let mut removed = 0;
    let mut pending = vec![local.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let relative = path.strip_prefix(local).unwrap_or(&path).to_path_buf();
            if skipped(&relative) {
                continue;
            }
            if !wanted.contains(&relative) {
                remove(&path)?;
                removed += 1;
            } else if std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir()) {
                // Never through a link: it may point anywhere.
                pending.push(path);
            }
        }
    }
    Ok(removed)
}
