//! The first sync into an empty local directory: nothing to merge, so the sandbox's tree
//! comes as one tar stream (no manifest first, no hash read in the sandbox) and each file
//! is hashed as it is written here. What was written is the ancestor: the sandbox held it
//! when the stream read it, and anything the sandbox changed since is a change of its side
//! that the next pass carries (a following sync's change token was taken before).
//!
//! Each top-level directory is filled under a temp name and renamed to its own once the
//! stream ended, so nothing half written is ever seen under a synced name, and the files
//! inside are created where they go, one create each (no temp file and rename a file:
//! creating a file is most of a small file's cost, and rsync pays two). The files are
//! written by a few threads while the stream goes on (creates in different directories run
//! side by side), each relative to its directory opened once. A name made here meanwhile
//! keeps what was made: the sandbox's version under it is left to the next pass's merge.

use std::io::Read;
use std::path::{Component, Path};
use std::sync::Arc;

use crate::content_hash::ContentHash;
use crate::merge::{Entries, Entry};
use crate::scan::{DEFAULT_EXCLUDES, Ignores, STATE_DIR};
use crate::{Sandbox, SdkError};

use super::Changes;
use super::local::{Tee, set_file_mode, set_mode, temp_beside};

/// What the first sync brought.
pub struct Brought {
    pub tree: Entries,
    pub changes: Changes,
    /// What a sync cannot carry (devices, FIFOs, sockets, names or targets not UTF-8).
    pub skipped: Vec<String>,
}

/// Whether `local` holds nothing but the sync's own state.
pub fn is_empty(local: &Path) -> std::io::Result<bool> {
    for entry in std::fs::read_dir(local)? {
        if entry?.file_name() != STATE_DIR {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Brings the sandbox's tree at `remote` into the empty directory `local`, leaving out what
/// `ignores` matches (and the default names, when `defaults`, in the sandbox already).
pub async fn bring(
    sandbox: &Sandbox,
    remote: &str,
    local: &Path,
    ignores: &Ignores,
    defaults: bool,
) -> Result<Brought, SdkError> {
    let names: Vec<&str> = if defaults {
        DEFAULT_EXCLUDES
            .iter()
            .copied()
            .chain([STATE_DIR])
            .collect()
    } else {
        vec![STATE_DIR]
    };
    let stream = sandbox.download_archive(remote, &names).await?;
    let root = local.to_path_buf();
    let ignores = ignores.clone();
    let unpacked =
        crate::sync::read_on_a_thread(stream, move |reader| unpack(reader, &root, &ignores))
            .await?;
    Ok(unpacked?)
}

fn unpack(reader: impl Read, root: &Path, ignores: &Ignores) -> std::io::Result<Brought> {
    let mut brought = Brought {
        tree: Entries::new(),
        changes: Changes::default(),
        skipped: Vec::new(),
    };
    let mut opened = Opened::new(root)?;
    let mut dir_modes: Vec<(String, u32)> = Vec::new();
    let mut placers = Placers::start();
    let mut archive = tar::Archive::new(reader);
    let read = (|| {
        for entry in archive.entries()? {
            let mut entry = entry?;
            let path = entry.path()?.into_owned();
            let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
            let Some(relative) = path.to_str().filter(|_| plain).map(str::to_string) else {
                brought.skipped.push(path.display().to_string());
                continue;
            };
            if relative.is_empty() {
                continue;
            }
            let kind = entry.header().entry_type();
            if ignores.ignored(&relative, kind == tar::EntryType::Directory) {
                continue;
            }
            // What lies under something not made here (left out, or not a directory) is
            // not placed. A file a placer still writes is not in the tree yet: what the
            // stream has under it is not placed either.
            if !crate::merge::placed(&brought.tree, &relative) {
                continue;
            }
            let mode = entry.header().mode().map_or(0o644, |mode| mode & 0o7777);
            let (parent, name) = relative.rsplit_once('/').unwrap_or(("", &relative));
            let at = opened.dir(parent)?;
            // Only a top-level name is seen while the stream goes on.
            let seen = parent.is_empty();
            match kind {
                tar::EntryType::Directory => {
                    let made = if seen {
                        let staged = temp_name(name);
                        at.mkdir(&staged)?;
                        opened.staged.push((name.to_string(), staged.clone()));
                        staged
                    } else {
                        // Beneath a temp name: only the stream makes names here.
                        match at.mkdir(name) {
                            Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => {
                                return Err(err);
                            }
                            _ => name.to_string(),
                        }
                    };
                    opened.enter(&relative, at.child(&made)?);
                    dir_modes.push((relative.clone(), mode));
                    brought.tree.insert(relative, Entry::Dir { mode });
                }
                tar::EntryType::Symlink => {
                    let Some(target) = entry
                        .link_name()?
                        .and_then(|target| target.to_str().map(str::to_string))
                    else {
                        brought.skipped.push(relative);
                        continue;
                    };
                    match at.symlink(&target, name) {
                        Ok(()) => {
                            brought.tree.insert(relative, Entry::Link { target });
                        }
                        // Made here meanwhile: the next pass merges it.
                        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                        Err(err) => return Err(err),
                    }
                }
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    let placing = Placing {
                        relative: relative.clone(),
                        dir: at,
                        name: name.to_string(),
                        seen,
                        mode,
                    };
                    if entry.size() <= HANDED_BYTES {
                        let mut content = Vec::with_capacity(entry.size() as usize);
                        entry.read_to_end(&mut content)?;
                        placers.hand(placing, content)?;
                    } else if let Some(hash) = placing.write(&mut entry)? {
                        brought.tree.insert(relative, Entry::File { hash, mode });
                    }
                }
                _ => brought.skipped.push(relative),
            }
        }
        Ok(())
    })();
    // Every placer finishes what it was handed, even when the stream failed. A placer's
    // own error first: the stream stopped on it (a full disk, not "a writer stopped").
    let placed = placers.finish().and_then(|placed| read.map(|()| placed));
    let staged = std::mem::take(&mut opened.staged);
    let root_dir = opened.root();
    let placed = match placed {
        Ok(placed) => placed,
        Err(err) => {
            for (_, temp) in &staged {
                let _ = std::fs::remove_dir_all(root.join(temp));
            }
            return Err(err);
        }
    };
    for (relative, hash, mode) in placed {
        brought.tree.insert(relative, Entry::File { hash, mode });
    }
    // Each directory under its own name, whole; one made here meanwhile keeps what it
    // holds, and the sandbox's is not brought.
    for (name, temp) in staged {
        if !root_dir.rename_new(&temp, &name)? {
            let _ = std::fs::remove_dir_all(root.join(&temp));
            let below = format!("{name}/");
            brought
                .tree
                .retain(|path, _| *path != name && !path.starts_with(&below));
        }
    }
    // Directories' modes last, deepest first: a read-only one does not stop its filling.
    for (relative, mode) in dir_modes.iter().rev() {
        if brought.tree.contains_key(relative) {
            set_mode(&root.join(relative), *mode)?;
        }
    }
    for entry in brought.tree.values() {
        match entry {
            Entry::Dir { .. } => brought.changes.dirs += 1,
            Entry::File { .. } => brought.changes.files += 1,
            Entry::Link { .. } => brought.changes.links += 1,
        }
    }
    Ok(brought)
}

/// A temp name beside `name`, which scans leave out.
fn temp_name(name: &str) -> String {
    temp_beside(Path::new(name)).to_string_lossy().into_owned()
}

/// The directories the stream is in, opened: the root and the path down to the directory
/// it wrote last (the stream gives a directory, then what it holds), and the top-level
/// directories filled under temp names.
struct Opened {
    /// Each directory's path (relative, as the stream names it) and its opened handle,
    /// the root first.
    path: Vec<(String, Arc<DirHandle>)>,
    /// Top-level directories: their names and the temp names they are filled under.
    staged: Vec<(String, String)>,
}

impl Opened {
    fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Opened {
            path: vec![(String::new(), Arc::new(DirHandle::open(root)?))],
            staged: Vec::new(),
        })
    }

    fn root(&self) -> Arc<DirHandle> {
        self.path[0].1.clone()
    }

    /// The directory `relative` (one this stream made), opened.
    fn dir(&mut self, relative: &str) -> std::io::Result<Arc<DirHandle>> {
        while let Some((last, _)) = self.path.last() {
            if last.is_empty() || relative == last || relative.starts_with(&format!("{last}/")) {
                break;
            }
            self.path.pop();
        }
        let (last, handle) = self
            .path
            .last()
            .cloned()
            .unwrap_or_else(|| (String::new(), self.root()));
        if *last == *relative {
            return Ok(handle);
        }
        // Out of the stream's order: down from the nearest open one.
        let rest = if last.is_empty() {
            relative
        } else {
            &relative[last.len() + 1..]
        };
        let mut handle = handle;
        let mut walked = last;
        for name in rest.split('/') {
            let staged = walked.is_empty().then(|| {
                self.staged
                    .iter()
                    .find(|(top, _)| top == name)
                    .map(|(_, temp)| temp.as_str())
            });
            handle = Arc::new(handle.child(staged.flatten().unwrap_or(name))?);
            walked = if walked.is_empty() {
                name.to_string()
            } else {
                format!("{walked}/{name}")
            };
            self.path.push((walked.clone(), handle.clone()));
        }
        Ok(handle)
    }

    fn enter(&mut self, relative: &str, handle: DirHandle) {
        self.path.push((relative.to_string(), Arc::new(handle)));
    }
}

/// Files at most this large are read whole from the stream and written by a placer while
/// the stream goes on; larger ones are written as they stream, on the stream's thread.
const HANDED_BYTES: u64 = 1024 * 1024;

/// Runs handed to one placer and not yet written, at most (with [`RUN_BYTES`], the memory
/// a slow disk can make the stream hold).
const QUEUED_A_PLACER: usize = 4;
/// A run: files of one directory handed to a placer at once, up to this many or this
/// many bytes.
const RUN_FILES: usize = 64;
const RUN_BYTES: usize = 1024 * 1024;

/// A file to write: its path, the directory it goes in (opened), its name there, and
/// whether that name is seen as the stream goes on (a top-level file, written under a temp
/// name and renamed: nothing half written is seen under its name).
struct Placing {
    relative: String,
    dir: Arc<DirHandle>,
    name: String,
    seen: bool,
    mode: u32,
}

impl Placing {
    /// Writes `content` at its place, hashing it; `None` when the name was taken here
    /// meanwhile (what was made there stays).
    fn write(&self, content: &mut impl Read) -> std::io::Result<Option<ContentHash>> {
        use sha2::{Digest, Sha256};
        let temp = self.seen.then(|| temp_name(&self.name));
        let written_at = temp.as_deref().unwrap_or(&self.name);
        let mut file = match self.dir.create(written_at, self.mode) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && !self.seen => {
                return Ok(None);
            }
            Err(err) => return Err(err),
        };
        let written = (|| {
            let mut hasher = Sha256::new();
            std::io::copy(
                content,
                &mut Tee {
                    out: &mut file,
                    hasher: &mut hasher,
                },
            )?;
            // Made with its mode unless the umask cut it: a `chmod` then.
            if !fsd_api::scratch::made_with_mode(self.mode) {
                set_file_mode(&file, self.mode)?;
            }
            Ok::<_, std::io::Error>(ContentHash::from(hasher))
        })();
        drop(file);
        let hash = match written {
            Ok(hash) => hash,
            Err(err) => {
                let _ = self.dir.remove_file(written_at);
                return Err(err);
            }
        };
        let Some(temp) = temp else {
            return Ok(Some(hash));
        };
        match self.dir.rename_new(&temp, &self.name) {
            Ok(true) => Ok(Some(hash)),
            Ok(false) => {
                let _ = self.dir.remove_file(&temp);
                Ok(None)
            }
            Err(err) => {
                let _ = self.dir.remove_file(&temp);
                Err(err)
            }
        }
    }
}

/// Files of one directory and their content, handed to a placer at once.
type Run = Vec<(Placing, Vec<u8>)>;

/// What the placers made: each file's path, hash and mode.
type Placed = std::io::Result<Vec<(String, ContentHash, u32)>>;

/// Threads that write the small files the stream hands them. Files come in runs of one
/// directory (up to [`RUN_FILES`] or [`RUN_BYTES`]), a directory's runs to the same placer
/// (a new directory to the placer with the least to do): two placers creating in one
/// directory wait for each other on its lock, and a hand-off of each file woke a thread
/// each time (78,000 futex calls for a 50,000-file download).
struct Placers {
    queues: Vec<std::sync::mpsc::SyncSender<Run>>,
    threads: Vec<std::thread::JoinHandle<Placed>>,
    /// Each placer's runs handed and not yet written.
    loads: Vec<Arc<std::sync::atomic::AtomicUsize>>,
    /// The run being gathered, and its bytes.
    run: Run,
    run_bytes: usize,
    /// The directory of the last run handed and its placer, which takes the next run of
    /// the same directory.
    last: Option<(Arc<DirHandle>, usize)>,
}

impl Placers {
    fn start() -> Self {
        use std::sync::atomic::Ordering;
        let count = super::local::writer_threads();
        let loads: Vec<Arc<std::sync::atomic::AtomicUsize>> =
            (0..count).map(|_| Arc::default()).collect();
        let (queues, threads) = loads
            .iter()
            .map(|load| {
                let (queue, runs) = std::sync::mpsc::sync_channel::<Run>(QUEUED_A_PLACER);
                let load = load.clone();
                let thread = std::thread::spawn(move || {
                    let mut placed = Vec::new();
                    for run in runs {
                        for (placing, content) in run {
                            if let Some(hash) = placing.write(&mut content.as_slice())? {
                                placed.push((placing.relative, hash, placing.mode));
                            }
                        }
                        load.fetch_sub(1, Ordering::Relaxed);
                    }
                    Ok(placed)
                });
                (queue, thread)
            })
            .unzip();
        Placers {
            queues,
            threads,
            loads,
            run: Vec::new(),
            run_bytes: 0,
            last: None,
        }
    }

    /// Adds a file to the run, handing the run first if the file is of another directory
    /// or the run is full; an error if the placer handed to stopped on one (which
    /// [`Placers::finish`] answers).
    fn hand(&mut self, placing: Placing, content: Vec<u8>) -> std::io::Result<()> {
        if self.run.last().is_some_and(|(last, _)| {
            !Arc::ptr_eq(&last.dir, &placing.dir)
                || self.run.len() >= RUN_FILES
                || self.run_bytes >= RUN_BYTES
        }) {
            self.send_run()?;
        }
        self.run_bytes += content.len();
        self.run.push((placing, content));
        Ok(())
    }

    /// Hands the run gathered to the placer of its directory.
    fn send_run(&mut self) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        let run = std::mem::take(&mut self.run);
        self.run_bytes = 0;
        let Some((first, _)) = run.first() else {
            return Ok(());
        };
        let placer = match &self.last {
            Some((dir, placer)) if Arc::ptr_eq(dir, &first.dir) => *placer,
            _ => (0..self.loads.len())
                .min_by_key(|placer| self.loads[*placer].load(Ordering::Relaxed))
                .unwrap_or(0),
        };
        self.last = Some((first.dir.clone(), placer));
        self.loads[placer].fetch_add(1, Ordering::Relaxed);
        self.queues[placer]
            .send(run)
            .map_err(|_| std::io::Error::other("a file writer stopped"))
    }

    /// Waits for every placer; answers all they made, or the first error one met.
    fn finish(mut self) -> Placed {
        // A placer that stopped answers its own error below.
        let _ = self.send_run();
        drop(self.queues);
        let mut all = Vec::new();
        let mut failed = None;
        for thread in self.threads {
            match thread.join() {
                Ok(Ok(placed)) => all.extend(placed),
                Ok(Err(err)) => failed = failed.or(Some(err)),
                Err(_) => failed = failed.or(Some(std::io::Error::other("a file writer panicked"))),
            }
        }
        match failed {
            Some(err) => Err(err),
            None => Ok(all),
        }
    }
}

/// A directory opened once, that names inside it are made relative to.
#[cfg(unix)]
struct DirHandle(rustix::fd::OwnedFd);

#[cfg(unix)]
impl DirHandle {
    fn open(path: &Path) -> std::io::Result<Self> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(DirHandle(rustix::fs::open(path, flags, Mode::empty())?))
    }

    /// The directory `name` in this one, not through a symlink.
    fn child(&self, name: &str) -> std::io::Result<Self> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(DirHandle(rustix::fs::openat(
            &self.0,
            name,
            flags,
            Mode::empty(),
        )?))
    }

    /// A directory only its owner can use until its mode is set at the end.
    fn mkdir(&self, name: &str) -> std::io::Result<()> {
        Ok(rustix::fs::mkdirat(&self.0, name, rustix::fs::Mode::RWXU)?)
    }

    /// A new file `name` made with `mode` (as the umask leaves it); an error of kind
    /// `AlreadyExists` if the name is taken.
    fn create(&self, name: &str, mode: u32) -> std::io::Result<std::fs::File> {
        use rustix::fs::{Mode, OFlags};
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.0, name, flags, Mode::from_raw_mode(mode & 0o777))?;
        Ok(std::fs::File::from(fd))
    }

    fn symlink(&self, target: &str, name: &str) -> std::io::Result<()> {
        Ok(rustix::fs::symlinkat(target, &self.0, name)?)
    }

    fn remove_file(&self, name: &str) -> std::io::Result<()> {
        Ok(rustix::fs::unlinkat(
            &self.0,
            name,
            rustix::fs::AtFlags::empty(),
        )?)
    }

    /// Renames `from` to `to` if `to` is free; `false` if it is taken.
    fn rename_new(&self, from: &str, to: &str) -> std::io::Result<bool> {
        use rustix::fs::{AtFlags, RenameFlags};
        use rustix::io::Errno;
        match rustix::fs::renameat_with(&self.0, from, &self.0, to, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            // A file system that cannot refuse to replace: look first.
            Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP) => {
                match rustix::fs::statat(&self.0, to, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(_) => Ok(false),
                    Err(Errno::NOENT) => {
                        rustix::fs::renameat(&self.0, from, &self.0, to)?;
                        Ok(true)
                    }
                    Err(errno) => Err(errno.into()),
                }
            }
            Err(errno) => Err(errno.into()),
        }
    }
}

/// A directory, by its path where names cannot be made relative to an open one.
#[cfg(not(unix))]
struct DirHandle(std::path::PathBuf);

#[cfg(not(unix))]
impl DirHandle {
    fn open(path: &Path) -> std::io::Result<Self> {
        Ok(DirHandle(path.to_path_buf()))
    }

    fn child(&self, name: &str) -> std::io::Result<Self> {
        Ok(DirHandle(self.0.join(name)))
    }

    fn mkdir(&self, name: &str) -> std::io::Result<()> {
        std::fs::create_dir(self.0.join(name))
    }

    fn create(&self, name: &str, _mode: u32) -> std::io::Result<std::fs::File> {
        std::fs::File::create_new(self.0.join(name))
    }

    fn symlink(&self, target: &str, name: &str) -> std::io::Result<()> {
        super::local::make_link(target, &self.0.join(name))
    }

    fn remove_file(&self, name: &str) -> std::io::Result<()> {
        std::fs::remove_file(self.0.join(name))
    }

    fn rename_new(&self, from: &str, to: &str) -> std::io::Result<bool> {
        if std::fs::symlink_metadata(self.0.join(to)).is_ok() {
            return Ok(false);
        }
        std::fs::rename(self.0.join(from), self.0.join(to))?;
        Ok(true)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A tar stream as the daemon sends one: directories before what they hold.
    fn stream(entries: &[(&str, Option<&[u8]>, u32)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, content, mode) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_mode(*mode);
            match content {
                Some(content) => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_size(content.len() as u64);
                    builder.append_data(&mut header, path, *content).unwrap();
                }
                None => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_size(0);
                    builder
                        .append_data(&mut header, path, std::io::empty())
                        .unwrap();
                }
            }
        }
        builder.into_inner().unwrap()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_tree_is_placed_whole_with_its_modes_and_hashes() {
        let local = tempfile::tempdir().unwrap();
        let large = vec![7u8; HANDED_BYTES as usize + 5];
        let mut entries: Vec<(String, Option<Vec<u8>>, u32)> = vec![
            ("a".into(), None, 0o755),
            ("a/b".into(), None, 0o555),
            ("a/b/large.bin".into(), Some(large.clone()), 0o600),
            ("top.txt".into(), Some(b"top".to_vec()), 0o640),
        ];
        for i in 0..100 {
            entries.push((
                format!("a/f{i}.txt"),
                Some(format!("{i}").into_bytes()),
                0o644,
            ));
        }
        // Out of the stream's usual order: back into a directory left before.
        entries.push(("a/b/late.txt".into(), Some(b"late".to_vec()), 0o644));
        let borrowed: Vec<(&str, Option<&[u8]>, u32)> = entries
            .iter()
            .map(|(path, content, mode)| (path.as_str(), content.as_deref(), *mode))
            .collect();
        let tar = stream(&borrowed);
        let ignores = Ignores::new(&[], false).unwrap();
        let brought = unpack(tar.as_slice(), local.path(), &ignores).unwrap();
        assert_eq!(brought.changes.dirs, 2);
        assert_eq!(brought.changes.files, 103);
        assert_eq!(
            names(local.path()),
            ["a", "top.txt"],
            "no temp name is left"
        );
        for (path, content, mode) in &entries {
            let at = local.path().join(path);
            let meta = std::fs::symlink_metadata(&at).unwrap();
            assert_eq!(meta.permissions().mode() & 0o7777, *mode, "{path}");
            match content {
                Some(content) => {
                    assert_eq!(&std::fs::read(&at).unwrap(), content, "{path}");
                    let hash = crate::scan::hash_file(&at).unwrap();
                    assert_eq!(
                        brought.tree.get(path.as_str()),
                        Some(&Entry::File { hash, mode: *mode })
                    );
                }
                None => assert!(meta.is_dir(), "{path}"),
            }
        }
        std::fs::set_permissions(
            local.path().join("a/b"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }

    #[test]
    fn a_stream_cut_short_is_an_error_and_leaves_no_temp_name() {
        let local = tempfile::tempdir().unwrap();
        let big = vec![1u8; 4096];
        let tar = stream(&[
            ("a", None, 0o755),
            ("a/one.txt", Some(b"one"), 0o644),
            ("a/big.bin", Some(&big), 0o644),
        ]);
        // Cut inside the large file's content.
        let cut = &tar[..tar.len() - 3000];
        let ignores = Ignores::new(&[], false).unwrap();
        assert!(unpack(cut, local.path(), &ignores).is_err());
        assert!(names(local.path()).is_empty(), "{:?}", names(local.path()));
    }

    #[test]
    fn a_name_made_here_meanwhile_keeps_what_was_made() {
        let local = tempfile::tempdir().unwrap();
        let tar = stream(&[
            ("mine", None, 0o755),
            ("mine/theirs.txt", Some(b"theirs"), 0o644),
            ("note.txt", Some(b"theirs"), 0o644),
            ("other", None, 0o755),
            ("other/x.txt", Some(b"x"), 0o644),
        ]);
        // Made here while the stream went on (before it ends, as the renames come last).
        std::fs::create_dir(local.path().join("mine")).unwrap();
        std::fs::write(local.path().join("mine/own.txt"), "own").unwrap();
        std::fs::write(local.path().join("note.txt"), "own").unwrap();
        let ignores = Ignores::new(&[], false).unwrap();
        let brought = unpack(tar.as_slice(), local.path(), &ignores).unwrap();
        assert_eq!(names(local.path()), ["mine", "note.txt", "other"]);
        assert_eq!(names(&local.path().join("mine")), ["own.txt"]);
        assert_eq!(
            std::fs::read_to_string(local.path().join("note.txt")).unwrap(),
            "own"
        );
        let brought: Vec<&String> = brought.tree.keys().collect();
        assert_eq!(brought, ["other", "other/x.txt"], "only what was placed");
    }
}
