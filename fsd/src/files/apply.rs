//! `POST /api/files/apply` (fsd extension): a batch of changes to a tree, each made only if
//! its path still holds what the caller saw (see [`fsd_api::files::ApplyRequest`]). Two-way
//! sync sends its plan for the sandbox side here, so an edit made in the sandbox while the
//! sync ran is never overwritten: the check and the change are a few syscalls apart, on
//! one open directory.
//!
//! Every step works relative to descriptors opened from the tree's root without following
//! a symlink, so nothing below the root leads out of it (and under `--confine` the root was
//! opened beneath the roots). Files arrive raw in the body, each into a scratch file beside
//! its target that is renamed over it once its content matched its hash and the target
//! matched its expectation; the scratch name tells a watch that the rename is the target's
//! create or modify.
//!
//! The batch's files are flushed to the disk once, by one `syncfs` before the answer, not
//! one fsync each (a first upload of 20,000 files paid 20,000): what the answer calls
//! applied is durable (under `--durability fsync`; under `atomic` nothing waits for the
//! disk, see [`super::durability`]). A machine that crashes before the flush may keep a
//! renamed file short; the sync was not answered, so its next pass takes that as a change
//! made in the sandbox, a conflict with the local version (both kept), never a loss.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use fsd_api::files::{ApplyStep, Held, StepOutcome};
use fsd_api::scratch::{ScratchKind, scratch_path};
use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, RenameFlags, openat, readlinkat, renameat, renameat2};
use nix::sys::stat::{FchmodatFlags, Mode, SFlag, fchmodat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, linkat, symlinkat, unlinkat};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicBool, Ordering};

use super::manifest::{HashCache, file_hash, open_parent};
use super::scratch_log::ScratchLog;

/// Why a batch stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The body ended before a file's content did.
    #[error("the body ended inside step {step}'s content: {source}")]
    Body {
        step: usize,
        #[source]
        source: io::Error,
    },
    /// What follows a part in the body is not a part (see [`fsd_api::files::ApplyPart`]).
    #[error("the body's part {part}: {reason}")]
    Part { part: usize, reason: String },
    /// A later part's step names no plain path below the tree (`field` counts steps
    /// across parts).
    #[error("{field}: {reason}")]
    Step { field: String, reason: String },
}

/// The largest JSON part of a body.
pub const MAX_PART_BYTES: u32 = 64 * 1024 * 1024;

/// A step's path that is not a plain relative path below the root: the field (the step
/// numbered from `first`) and why.
pub fn invalid_step(steps: &[ApplyStep], first: usize) -> Option<(String, String)> {
    for (index, step) in steps.iter().enumerate() {
        let mut paths = vec![("path", step.path())];
        if let ApplyStep::Rename { to, .. } = step {
            paths.push(("to", to));
        }
        for (field, path) in paths {
            if let Err(reason) = relative(path) {
                return Some((format!("steps[{}].{field}", first + index), reason));
            }
        }
    }
    None
}

/// Whether `path` is a plain relative path: no empty, `.` or `..` name, no NUL.
pub fn relative(path: &str) -> Result<(), String> {
    if path.is_empty() || path.starts_with('/') || path.contains('\0') {
        return Err(format!("{path:?} is not a relative path"));
    }
    if path.split('/').any(|name| matches!(name, "" | "." | "..")) {
        return Err(format!("{path:?} has an empty, `.` or `..` name"));
    }
    Ok(())
}

/// Reads the part after the last one from `body`: its steps (checked, numbered from
/// `first`), or `None` where the body ends between parts.
fn next_part(
    body: &mut impl Read,
    part: usize,
    first: usize,
) -> Result<Option<Vec<ApplyStep>>, ApplyError> {
    let failed = |reason: String| ApplyError::Part { part, reason };
    let mut length = [0u8; 4];
    let mut read = 0;
    while read < length.len() {
        match body.read(&mut length[read..]) {
            Ok(0) if read == 0 => return Ok(None),
            Ok(0) => return Err(failed("the body ended inside its 4-byte length".into())),
            Ok(more) => read += more,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(failed(format!("its length: {err}"))),
        }
    }
    let length = u32::from_be_bytes(length);
    if length > MAX_PART_BYTES {
        return Err(failed(format!(
            "a JSON part of {length} bytes is over the limit of {MAX_PART_BYTES}"
        )));
    }
    let mut json = vec![0; length as usize];
    body.read_exact(&mut json)
        .map_err(|err| failed(format!("its JSON: {err}")))?;
    let steps = serde_json::from_slice::<fsd_api::files::ApplyPart>(&json)
        .map_err(|err| failed(format!("its JSON: {err}")))?
        .steps;
    if let Some((field, reason)) = invalid_step(&steps, first) {
        return Err(ApplyError::Step { field, reason });
    }
    Ok(Some(steps))
}

/// Applies `steps` (checked by [`invalid_step`]) to the tree at `root` (`root_path` is
/// where it is, for the scratch log), reading the files' content from `body` in order,
/// then the steps of each part that follows them in the body (see
/// [`fsd_api::files::ApplyPart`]).
pub fn apply(
    root: &OwnedFd,
    root_path: &Path,
    steps: Vec<ApplyStep>,
    body: &mut impl Read,
    hashes: &HashCache,
    scratch: &ScratchLog,
) -> Result<Vec<StepOutcome>, ApplyError> {
    let tree = Tree {
        root,
        root_path,
        hashes,
        scratch,
        staged: Default::default(),
    };
    // Whether to flush along is told by the first part: a sender that streams parts sends
    // a large one first.
    let (files, bytes) = steps
        .iter()
        .fold((0usize, 0u64), |(files, bytes), step| match step {
            ApplyStep::PutFile { size, .. } => (files + 1, bytes + size),
            _ => (files, bytes),
        });
    // Which steps put a file, for the flush's verdict, and their paths (for what a new
    // directory's name taken meanwhile undoes).
    let mut puts: Vec<bool> = Vec::with_capacity(steps.len());
    let mut paths: Vec<String> = Vec::with_capacity(steps.len());
    let steps_made = || -> Result<Vec<StepOutcome>, ApplyError> {
        let mut outcomes: Vec<Option<StepOutcome>> = Vec::with_capacity(steps.len());
        let made = std::thread::scope(|scope| {
            // Started by the first part with many files; a part with few makes its steps
            // one by one (unless writers run).
            let mut writers: Option<Writers> = None;
            let made = (|| {
                let mut part = Some(steps);
                let mut parts = 0;
                while let Some(steps) = part.take() {
                    let first = outcomes.len();
                    let files = steps
                        .iter()
                        .filter(|step| matches!(step, ApplyStep::PutFile { .. }))
                        .count();
                    if writers.is_none() && files >= SIDE_BY_SIDE_FILES {
                        writers = Some(Writers::start(scope, &tree));
                    }
                    outcomes.resize(first + steps.len(), None);
                    for (offset, step) in steps.into_iter().enumerate() {
                        let index = first + offset;
                        puts.push(matches!(step, ApplyStep::PutFile { .. }));
                        paths.push(step.path().to_string());
                        match (&step, writers.as_mut()) {
                            (ApplyStep::PutFile { path, size, .. }, Some(writers))
                                if *size <= HANDED_BYTES =>
                            {
                                if writers.overlaps(path, &mut outcomes) {
                                    writers.wait(&mut outcomes);
                                }
                                let mut content = vec![0u8; *size as usize];
                                body.read_exact(&mut content).map_err(|source| {
                                    ApplyError::Body {
                                        step: index,
                                        source,
                                    }
                                })?;
                                writers.hand(index, step, content);
                            }
                            (ApplyStep::PutFile { path, .. }, writers) => {
                                if let Some(writers) = writers
                                    && writers.overlaps(path, &mut outcomes)
                                {
                                    writers.wait(&mut outcomes);
                                }
                                outcomes[index] = Some(tree.make(&step, body, index, &mut None)?);
                            }
                            // Whatever else a batch does waits for the files before it.
                            (other, writers) => {
                                if let Some(writers) = writers {
                                    writers.wait(&mut outcomes);
                                }
                                outcomes[index] = Some(tree.step(other, index));
                            }
                        }
                    }
                    parts += 1;
                    part = next_part(body, parts, outcomes.len())?;
                }
                Ok(())
            })();
            if let Some(writers) = writers.as_mut() {
                writers.wait(&mut outcomes);
            }
            made
        });
        let mut outcomes: Vec<StepOutcome> = outcomes
            .into_iter()
            .map(|outcome| {
                outcome.unwrap_or_else(|| StepOutcome::Failed {
                    reason: "not made".into(),
                })
            })
            .collect();
        // Whatever ended the batch, what it made is put in place.
        tree.publish(&mut outcomes, &paths);
        made.map(|()| outcomes)
    };
    let flushing = super::durability::flushing();
    let mut outcomes = if flushing && (files >= FLUSHED_ALONG_FILES || bytes >= FLUSHED_ALONG_BYTES)
    {
        flushed_along(root, steps_made)?
    } else {
        steps_made()?
    };
    let wrote = puts.iter().any(|put| *put);
    if wrote && let Err(err) = super::durability::sync_filesystem(root) {
        // Not known to be on the disk: the next pass makes them again.
        for (put, outcome) in puts.iter().zip(outcomes.iter_mut()) {
            if *put && matches!(outcome, StepOutcome::Applied) {
                *outcome = StepOutcome::Failed {
                    reason: format!("written but not flushed to the disk: {err}"),
                };
            }
        }
    }
    Ok(outcomes)
}

/// A batch with this many files has them written by a few threads side by side (see
/// [`Writers`]); a smaller one, one by one.
const SIDE_BY_SIDE_FILES: usize = 16;

/// Files at most this large are read whole from the body and written by a writer thread
/// while the body goes on; a larger one is written as it streams.
const HANDED_BYTES: u64 = 1024 * 1024;

/// Runs of files handed to one writer and not yet written, at most.
const QUEUED_A_WRITER: usize = 4;

/// A run of files handed to a writer at once: this many at most, or this many bytes.
const RUN_FILES: usize = 64;
const RUN_BYTES: usize = 1024 * 1024;

/// The directory part of a step's path (empty for a name at the root).
fn directory(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// A file read from the body and handed to a writer: its step's index, the step, its
/// content.
type Handed = (usize, ApplyStep, Vec<u8>);

/// Threads that write the small files of a large batch side by side: creating a file is
/// most of a small file's cost (a first upload of 20,000 files), and creates in different
/// directories run at once. Files are handed in runs of one directory, a directory's runs
/// to the same writer (a new directory to the writer with the least to do): two writers
/// creating in one directory wait for each other on its lock, and a hand-off of each file
/// woke a thread each time (the two were a fifth of an upload's time in the daemon). The
/// batch's order holds: a step that is not a file waits for the files before it, and a
/// file waits for any file handed before it at its path, above it or below it.
struct Writers {
    queues: Vec<std::sync::mpsc::SyncSender<Vec<Handed>>>,
    made: std::sync::mpsc::Receiver<Vec<(usize, StepOutcome)>>,
    /// The paths of the files handed and not yet made, by their steps' indexes, and how
    /// many of them are at each path.
    pending: std::collections::BTreeMap<usize, String>,
    pending_paths: std::collections::BTreeMap<String, usize>,
    /// The run being gathered: files of one directory, not yet handed.
    run: Vec<Handed>,
    run_bytes: usize,
    /// Each writer's runs handed and not yet made.
    loads: Vec<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    /// The directory of the last run handed and its writer, which takes the next run of
    /// the same directory.
    last: Option<(String, usize)>,
}

impl Writers {
    fn start<'scope, 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        tree: &'scope Tree<'env>,
    ) -> Self {
        let count = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
        let (done, made) = std::sync::mpsc::channel();
        let loads: Vec<_> = (0..count).map(|_| std::sync::Arc::default()).collect();
        let queues = loads
            .iter()
            .map(|load: &std::sync::Arc<std::sync::atomic::AtomicUsize>| {
                let (queue, handed) = std::sync::mpsc::sync_channel::<Vec<Handed>>(QUEUED_A_WRITER);
                let done = done.clone();
                let load = load.clone();
                scope.spawn(move || {
                    for run in handed {
                        let mut parent = None;
                        let outcomes = run
                            .into_iter()
                            .map(|(index, step, content)| {
                                let outcome = tree
                                    .make(&step, &mut content.as_slice(), index, &mut parent)
                                    .unwrap_or_else(|err| StepOutcome::Failed {
                                        reason: err.to_string(),
                                    });
                                (index, outcome)
                            })
                            .collect();
                        load.fetch_sub(1, Ordering::Relaxed);
                        if done.send(outcomes).is_err() {
                            return;
                        }
                    }
                });
                queue
            })
            .collect();
        Writers {
            queues,
            made,
            pending: std::collections::BTreeMap::new(),
            pending_paths: std::collections::BTreeMap::new(),
            run: Vec::new(),
            run_bytes: 0,
            loads,
            last: None,
        }
    }

    /// Takes the outcomes of the files made so far.
    fn take_made(&mut self, outcomes: &mut [Option<StepOutcome>]) {
        while let Ok(made) = self.made.try_recv() {
            self.record(made, outcomes);
        }
    }

    fn record(&mut self, made: Vec<(usize, StepOutcome)>, outcomes: &mut [Option<StepOutcome>]) {
        for (index, outcome) in made {
            self.made_one(index);
            outcomes[index] = Some(outcome);
        }
    }

    /// Forgets a file handed, as made.
    fn made_one(&mut self, index: usize) {
        let Some(path) = self.pending.remove(&index) else {
            return;
        };
        if let Some(count) = self.pending_paths.get_mut(&path) {
            *count -= 1;
            if *count == 0 {
                self.pending_paths.remove(&path);
            }
        }
    }

    /// Whether a file handed and not yet made is at `path`, above it or below it.
    fn overlaps(&mut self, path: &str, outcomes: &mut [Option<StepOutcome>]) -> bool {
        self.take_made(outcomes);
        if self.pending_paths.is_empty() {
            return false;
        }
        let at_or_above = path
            .match_indices('/')
            .map(|(end, _)| &path[..end])
            .chain([path])
            .any(|above| self.pending_paths.contains_key(above));
        let below = format!("{path}/");
        at_or_above
            || self
                .pending_paths
                .range(below.clone()..)
                .next()
                .is_some_and(|(pending, _)| pending.starts_with(&below))
    }

    /// Adds a file to the run, handing the run first if the file is of another directory
    /// or the run is full.
    fn hand(&mut self, index: usize, step: ApplyStep, content: Vec<u8>) {
        if let Some((_, last, _)) = self.run.last()
            && (directory(step.path()) != directory(last.path())
                || self.run.len() >= RUN_FILES
                || self.run_bytes >= RUN_BYTES)
        {
            self.send_run();
        }
        self.pending.insert(index, step.path().to_string());
        *self
            .pending_paths
            .entry(step.path().to_string())
            .or_default() += 1;
        self.run_bytes += content.len();
        self.run.push((index, step, content));
    }

    /// Hands the run gathered to the writer of its directory.
    fn send_run(&mut self) {
        let run = std::mem::take(&mut self.run);
        self.run_bytes = 0;
        let Some((_, first, _)) = run.first() else {
            return;
        };
        // The same directory's writer, or the one with the least to do.
        let at = directory(first.path());
        let writer = match &self.last {
            Some((last, writer)) if last == at => *writer,
            _ => (0..self.loads.len())
                .min_by_key(|writer| self.loads[*writer].load(Ordering::Relaxed))
                .unwrap_or(0),
        };
        self.last = Some((at.to_string(), writer));
        self.loads[writer].fetch_add(1, Ordering::Relaxed);
        let indexes: Vec<usize> = run.iter().map(|(index, _, _)| *index).collect();
        if self.queues[writer].send(run).is_err() {
            // The writer is gone (it panicked): the steps are answered as not made.
            for index in indexes {
                self.made_one(index);
            }
        }
    }

    /// Waits until every file handed is made, writing their outcomes.
    fn wait(&mut self, outcomes: &mut [Option<StepOutcome>]) {
        self.send_run();
        while !self.pending.is_empty() {
            let Ok(made) = self.made.recv() else {
                self.pending.clear();
                self.pending_paths.clear();
                return;
            };
            self.record(made, outcomes);
        }
    }
}

/// A batch this large has what it wrote flushed while it runs (see [`flushed_along`]).
const FLUSHED_ALONG_FILES: usize = 256;
const FLUSHED_ALONG_BYTES: u64 = 8 * 1024 * 1024;
/// How often a large batch's writes are flushed while it runs.
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Runs `work` while a thread flushes the file system of `root` every [`FLUSH_EVERY`]: the
/// flush before the answer then finds little left to write, where it found all of a first
/// upload (80 MB of 20,000 files took 0.6 s after the last of them was written).
fn flushed_along<T>(root: &OwnedFd, work: impl FnOnce() -> T) -> T {
    let Ok(fs) = root.try_clone() else {
        return work();
    };
    let (done, stop) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stop.recv_timeout(FLUSH_EVERY)
            {
                // Only a head start: the flush before the answer is the one that counts.
                let _ = super::durability::sync_filesystem(&fs);
            }
        });
        let result = work();
        drop(done);
        result
    })
}

struct Tree<'a> {
    root: &'a OwnedFd,
    root_path: &'a Path,
    hashes: &'a HashCache,
    scratch: &'a ScratchLog,
    /// The batch's new directories under their scratch names, by the paths they take
    /// when it ends (see [`Staged`]).
    staged: std::sync::RwLock<std::collections::HashMap<String, Staged>>,
}

/// A new directory of the batch (one whose parent is not new in it), made under a scratch
/// name beside its path and renamed into place when the batch ends. Every step of the batch
/// below its path is made in it, and a file there is created where it goes, one create
/// (no unnamed file and link each: a first upload of 20,000 files cost the daemon twice as
/// much made that way); nothing in it is seen until it is whole, and a watch reads it
/// once when it arrives instead of hearing of each file.
struct Staged {
    /// Its scratch path, relative to the tree.
    scratch: String,
    /// The step that made it.
    step: usize,
}

/// A step that could not be made, as its outcome.
enum Refusal {
    Changed(Held),
    Failed(String),
}

impl From<Errno> for Refusal {
    fn from(errno: Errno) -> Self {
        Refusal::Failed(errno.desc().to_string())
    }
}

impl From<io::Error> for Refusal {
    fn from(err: io::Error) -> Self {
        Refusal::Failed(err.to_string())
    }
}

fn outcome(result: Result<(), Refusal>) -> StepOutcome {
    match result {
        Ok(()) => StepOutcome::Applied,
        Err(Refusal::Changed(found)) => StepOutcome::Changed { found },
        Err(Refusal::Failed(reason)) => StepOutcome::Failed { reason },
    }
}

impl Tree<'_> {
    /// The directory holding `path` (opened through no symlink) and the last name.
    fn parent<'p>(&self, path: &'p str) -> Result<(OwnedFd, &'p OsStr), Refusal> {
        open_parent(self.root, path)
            .map_err(|errno| Refusal::Failed(format!("a parent of {path}: {}", errno.desc())))
    }

    /// What `name` in `dir` holds now.
    fn held(&self, dir: &OwnedFd, name: &OsStr) -> Result<Held, Refusal> {
        let stat = match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::ENOENT) => return Ok(Held::Absent),
            Err(errno) => return Err(errno.into()),
        };
        let format = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        Ok(if format == SFlag::S_IFDIR {
            Held::Directory
        } else if format == SFlag::S_IFLNK {
            Held::Symlink {
                target: readlinkat(dir, name)?.to_string_lossy().into_owned(),
            }
        } else if format == SFlag::S_IFREG {
            let opened = Dir::from_fd(dir.try_clone()?).map_err(io::Error::from)?;
            match file_hash(&opened, name, &stat, self.hashes) {
                Some(sha256) => Held::File { sha256 },
                // Gone or replaced since the stat: read again.
                None => return self.held(dir, name),
            }
        } else {
            Held::Other
        })
    }

    /// Checks that `name` holds `expect`; answers what it holds.
    fn check(&self, dir: &OwnedFd, name: &OsStr, expect: &Held) -> Result<Held, Refusal> {
        let found = self.held(dir, name)?;
        if &found != expect || found == Held::Other {
            return Err(Refusal::Changed(found));
        }
        Ok(found)
    }

    /// Clears `name` for something new of another kind: an empty directory is removed, a
    /// file or link is left to the rename that replaces it.
    fn clear_for_rename(&self, dir: &OwnedFd, name: &OsStr, found: &Held) -> Result<(), Refusal> {
        if *found == Held::Directory {
            remove_dir(dir, name)?;
        }
        Ok(())
    }

    /// Makes one step, a file's content read from `body`; `parent` is the directory the
    /// last file was made in, kept for the next file of the same directory.
    fn make(
        &self,
        step: &ApplyStep,
        body: &mut impl Read,
        index: usize,
        parent: &mut Parent,
    ) -> Result<StepOutcome, ApplyError> {
        match step {
            ApplyStep::PutFile {
                path,
                expect,
                size,
                sha256,
                mode,
            } => {
                let staged = self.staged_path(path);
                let in_staged = staged.is_some();
                let path = staged.as_deref().unwrap_or(path);
                self.put_file(
                    path, expect, *size, sha256, *mode, body, index, in_staged, parent,
                )
            }
            other => Ok(self.step(other, index)),
        }
    }

    /// Makes a step that is not a file; `index` is its place in the batch.
    fn step(&self, step: &ApplyStep, index: usize) -> StepOutcome {
        let staged = self.staged_path(step.path());
        let path = staged.as_deref().unwrap_or(step.path());
        outcome(match step {
            ApplyStep::Mkdir { expect, mode, .. }
                if staged.is_none() && *expect == Held::Absent =>
            {
                self.mkdir_staged(path, expect, *mode, index)
            }
            ApplyStep::Mkdir { expect, mode, .. } => self.mkdir(path, expect, *mode),
            ApplyStep::Symlink { expect, target, .. } => self.symlink(path, expect, target),
            ApplyStep::Chmod { expect, mode, .. } => self.chmod(path, expect, *mode),
            ApplyStep::Remove { expect, .. } => self.remove(path, expect),
            ApplyStep::Rename { expect, to, .. } => {
                let to_staged = self.staged_path(to);
                self.rename(path, expect, to_staged.as_deref().unwrap_or(to))
            }
            ApplyStep::PutFile { .. } => Err(Refusal::Failed("a file needs its content".into())),
        })
    }

    /// Where `path` is while the batch runs: in a new directory's scratch path, if it is
    /// at or below one (see [`Staged`]).
    fn staged_path(&self, path: &str) -> Option<String> {
        let staged = self.staged.read().ok()?;
        if staged.is_empty() {
            return None;
        }
        let ends = path
            .match_indices('/')
            .map(|(end, _)| end)
            .chain([path.len()]);
        for end in ends {
            if let Some(found) = staged.get(&path[..end]) {
                return Some(format!("{}{}", found.scratch, &path[end..]));
            }
        }
        None
    }

    /// A new directory at `path` (which nothing new in the batch holds), made under a
    /// scratch name until the batch ends (see [`Staged`]).
    fn mkdir_staged(
        &self,
        path: &str,
        expect: &Held,
        mode: u32,
        index: usize,
    ) -> Result<(), Refusal> {
        let (dir, name) = self.parent(path)?;
        self.check(&dir, name, expect)?;
        // A scratch path of a UTF-8 path is UTF-8: its name is the path's last one, the
        // pid and a number.
        let scratch = scratch_path(Path::new(path), ScratchKind::New)
            .to_string_lossy()
            .into_owned();
        let scratch_name = last_name(&scratch);
        if let Some(parent) = Path::new(path).parent() {
            self.scratch.record(&self.root_path.join(parent));
        }
        mkdirat(&dir, scratch_name, Mode::from_bits_truncate(mode))?;
        set_dir_mode(&dir, scratch_name, mode)?;
        if let Ok(mut staged) = self.staged.write() {
            staged.insert(
                path.to_string(),
                Staged {
                    scratch,
                    step: index,
                },
            );
        }
        Ok(())
    }

    /// Puts the batch's new directories in place. One whose name was taken meanwhile is
    /// `changed`, what the batch made in it `failed` (the next pass merges them), and it
    /// goes.
    fn publish(&self, outcomes: &mut [StepOutcome], paths: &[String]) {
        let staged = match self.staged.write() {
            Ok(mut staged) => std::mem::take(&mut *staged),
            Err(_) => return,
        };
        for (path, Staged { scratch, step }) in staged {
            let Ok((dir, name)) = self.parent(&path) else {
                continue;
            };
            let scratch_name = last_name(&scratch);
            match renameat2(
                &dir,
                scratch_name,
                &dir,
                name,
                RenameFlags::RENAME_NOREPLACE,
            ) {
                // Gone: the batch itself removed or moved it.
                Ok(()) | Err(Errno::ENOENT) => continue,
                Err(errno) => {
                    if let Some(outcome @ StepOutcome::Applied) = outcomes.get_mut(step) {
                        let found = self.held(&dir, name).unwrap_or(Held::Other);
                        *outcome = StepOutcome::Changed { found };
                    }
                    let below = format!("{path}/");
                    for (outcome, at) in outcomes.iter_mut().zip(paths) {
                        if at.starts_with(&below) && matches!(outcome, StepOutcome::Applied) {
                            *outcome = StepOutcome::Failed {
                                reason: format!(
                                    "made in the new directory {path}, whose name was taken \
                                     meanwhile ({})",
                                    errno.desc()
                                ),
                            };
                        }
                    }
                    let _ = std::fs::remove_dir_all(self.root_path.join(&scratch));
                }
            }
        }
    }

    fn mkdir(&self, path: &str, expect: &Held, mode: u32) -> Result<(), Refusal> {
        let (dir, name) = self.parent(path)?;
        let found = self.check(&dir, name, expect)?;
        match found {
            Held::Directory => {}
            Held::Absent => {}
            _ => unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir)?,
        }
        if found != Held::Directory {
            mkdirat(&dir, name, Mode::from_bits_truncate(mode))?;
        }
        set_dir_mode(&dir, name, mode)?;
        Ok(())
    }

    fn symlink(&self, path: &str, expect: &Held, target: &str) -> Result<(), Refusal> {
        let (dir, name) = self.parent(path)?;
        let found = self.held(&dir, name)?;
        let temp = self.scratch_name(name, &found);
        symlinkat(target, &dir, temp.as_os_str())?;
        let placed = self
            .check(&dir, name, expect)
            .and_then(|found| self.clear_for_rename(&dir, name, &found))
            .and_then(|()| Ok(renameat(&dir, temp.as_os_str(), &dir, name)?));
        if placed.is_err() {
            let _ = unlinkat(&dir, temp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        placed
    }

    fn chmod(&self, path: &str, expect: &Held, mode: u32) -> Result<(), Refusal> {
        let (dir, name) = self.parent(path)?;
        let found = self.check(&dir, name, expect)?;
        if !matches!(found, Held::File { .. } | Held::Directory) {
            return Err(Refusal::Failed(format!(
                "{path}: only a file or directory has a mode"
            )));
        }
        fchmodat(
            &dir,
            name,
            Mode::from_bits_truncate(mode),
            FchmodatFlags::FollowSymlink,
        )?;
        Ok(())
    }

    fn remove(&self, path: &str, expect: &Held) -> Result<(), Refusal> {
        let (dir, name) = self.parent(path)?;
        match self.check(&dir, name, expect)? {
            Held::Directory => remove_dir(&dir, name),
            _ => Ok(unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir)?),
        }
    }

    fn rename(&self, path: &str, expect: &Held, to: &str) -> Result<(), Refusal> {
        let (from_dir, from_name) = self.parent(path)?;
        let (to_dir, to_name) = self.parent(to)?;
        self.check(&from_dir, from_name, expect)?;
        match renameat2(
            &from_dir,
            from_name,
            &to_dir,
            to_name,
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => Ok(()),
            Err(Errno::EEXIST) => Err(Refusal::Changed(self.held(&to_dir, to_name)?)),
            Err(errno) => Err(errno.into()),
        }
    }

    /// A file's content from `body` into a scratch file, checked against its hash, then
    /// renamed over the path if the path still holds `expect`. The content is read whole
    /// even when the step cannot be made, so the next step's starts where it should.
    ///
    /// A new file (`expect` absent) is written unnamed (`O_TMPFILE`) and linked at its
    /// name, which fails if the name was taken meanwhile: no scratch name to make, check
    /// and rename, and a watch sees one create of a whole file. In a new directory of the
    /// batch (`in_staged`), nobody sees it yet: it is created at its name.
    #[allow(clippy::too_many_arguments)]
    fn put_file(
        &self,
        path: &str,
        expect: &Held,
        size: u64,
        sha256: &str,
        mode: u32,
        body: &mut impl Read,
        index: usize,
        in_staged: bool,
        parent: &mut Parent,
    ) -> Result<StepOutcome, ApplyError> {
        let mut content = body.take(size);
        let drained = |content: &mut io::Take<&mut _>, refusal| {
            io::copy(content, &mut io::sink())
                .map(|_| outcome(Err(refusal)))
                .map_err(|source| ApplyError::Body {
                    step: index,
                    source,
                })
        };
        let (dir_path, name) = (directory(path), last_name(path));
        if !matches!(parent, Some((opened, _)) if opened == dir_path) {
            *parent = match self.parent(path) {
                Ok((dir, _)) => Some((dir_path.to_string(), dir)),
                Err(refusal) => {
                    *parent = None;
                    return drained(&mut content, refusal);
                }
            };
        }
        let Some((_, dir)) = parent.as_ref() else {
            return drained(&mut content, Refusal::Failed("no parent".into()));
        };
        let prepared = (|| {
            // In a new directory nobody sees yet: made where it goes (see [`Staged`]).
            if *expect == Held::Absent && in_staged {
                return match openat(
                    dir,
                    name,
                    OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC,
                    Mode::from_bits_truncate(mode & 0o777),
                ) {
                    Ok(fd) => Ok((Written::InPlace, File::from(fd))),
                    Err(Errno::EEXIST) => Err(Refusal::Changed(self.held(dir, name)?)),
                    Err(errno) => Err(errno.into()),
                };
            }
            if *expect == Held::Absent
                && LINKING_WORKS.load(Ordering::Relaxed)
                && let Ok(fd) = openat(
                    dir,
                    ".",
                    OFlag::O_WRONLY | OFlag::O_TMPFILE | OFlag::O_CLOEXEC,
                    Mode::from_bits_truncate(mode & 0o777),
                )
            {
                return Ok((Written::Unnamed, File::from(fd)));
            }
            // Named for what the step expects there: if something else is there, the
            // check before the rename refuses the step and the scratch file goes.
            let (temp, file) = self.scratch_file(path, dir, name, expect)?;
            Ok((Written::Scratch(temp), file))
        })();
        let (written_to, mut file) = match prepared {
            Ok(prepared) => prepared,
            Err(refusal) => return drained(&mut content, refusal),
        };
        let discard = |dir: &OwnedFd, written_to: &Written| {
            let named = match written_to {
                Written::Unnamed => return,
                Written::Scratch(temp) => temp.as_os_str(),
                Written::InPlace => name,
            };
            let _ = unlinkat(dir, named, UnlinkatFlags::NoRemoveDir);
        };
        let mut hasher = Sha256::new();
        let mut written = 0u64;
        // No larger than the file: a buffer of 256 KiB zeroed (and mapped) for each of
        // 20,000 small files was most of an upload's time in the daemon.
        let mut buffer = vec![0u8; size.min(256 * 1024) as usize];
        let mut write_failed = None;
        loop {
            let read = match content.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(source) => {
                    discard(dir, &written_to);
                    return Err(ApplyError::Body {
                        step: index,
                        source,
                    });
                }
            };
            hasher.update(&buffer[..read]);
            written += read as u64;
            if write_failed.is_none()
                && let Err(err) = file.write_all(&buffer[..read])
            {
                write_failed = Some(err);
            }
        }
        if written < size {
            discard(dir, &written_to);
            return Err(ApplyError::Body {
                step: index,
                source: io::ErrorKind::UnexpectedEof.into(),
            });
        }
        let mut written_to = written_to;
        let placed = (|| {
            if let Some(err) = write_failed {
                return Err(err.into());
            }
            if fsd_api::hex::lower(&hasher.finalize()) != sha256 {
                return Err(Refusal::Failed(
                    "the content did not match its hash (the source changed while it was read)"
                        .into(),
                ));
            }
            // An unnamed file, or one made in place, was made with its mode, which the
            // umask may have cut; a scratch file was made private.
            if matches!(written_to, Written::Scratch(_)) || !fsd_api::scratch::made_with_mode(mode)
            {
                file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode & 0o7777))?;
            }
            if matches!(written_to, Written::InPlace) {
                return Ok(());
            }
            if matches!(written_to, Written::Unnamed) {
                match link_unnamed(&file, dir, name) {
                    Ok(()) => return Ok(()),
                    Err(Errno::EEXIST) => return Err(Refusal::Changed(self.held(dir, name)?)),
                    // Linking an unnamed file is refused here: copied to a scratch file,
                    // and never tried again.
                    Err(_) => {
                        LINKING_WORKS.store(false, Ordering::Relaxed);
                        let (named, mut copy) = self.scratch_file(path, dir, name, expect)?;
                        written_to = Written::Scratch(named);
                        let mut unnamed = &file;
                        io::Seek::seek(&mut unnamed, io::SeekFrom::Start(0))?;
                        io::copy(&mut unnamed, &mut copy)?;
                        copy.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(
                            mode & 0o7777,
                        ))?;
                    }
                }
            }
            let Written::Scratch(temp) = &written_to else {
                return Err(Refusal::Failed("no scratch file".into()));
            };
            let found = self.check(dir, name, expect)?;
            self.clear_for_rename(dir, name, &found)?;
            renameat(dir, temp.as_os_str(), dir, name)?;
            Ok(())
        })();
        if placed.is_err() {
            discard(dir, &written_to);
        }
        Ok(outcome(placed))
    }

    /// A new scratch file beside `name` in `dir` (recorded in the scratch log first).
    fn scratch_file(
        &self,
        path: &str,
        dir: &OwnedFd,
        name: &OsStr,
        expect: &Held,
    ) -> Result<(PathBuf, File), Refusal> {
        let temp = self.scratch_name(name, expect);
        if let Some(parent) = Path::new(path).parent() {
            self.scratch.record(&self.root_path.join(parent));
        }
        let fd = openat(
            dir,
            temp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        Ok((temp, File::from(fd)))
    }

    /// A scratch name beside `name` that a watch reports as its create or its modify.
    fn scratch_name(&self, name: &OsStr, found: &Held) -> PathBuf {
        let kind = match found {
            Held::File { .. } => ScratchKind::Replace,
            _ => ScratchKind::New,
        };
        scratch_path(Path::new(name), kind)
    }
}

/// A directory opened for a file and kept for the next files of the same directory (its
/// path relative to the tree, as the steps write it): an upload's files come directory by
/// directory, and an open and a close of the parent for each was a fifth of the daemon's
/// system calls. Kept for one writer's run of files only, so a step that moves a
/// directory (which waits for the files before it) never finds it stale.
type Parent = Option<(String, OwnedFd)>;

/// Where a put's content is written until it is placed.
enum Written {
    /// An unnamed file (`O_TMPFILE`), linked at its name once checked.
    Unnamed,
    /// A scratch file beside the name, renamed over it once checked.
    Scratch(PathBuf),
    /// The file at its name already, in a new directory nobody sees yet (see [`Staged`]).
    InPlace,
}

/// Whether an unnamed file can be linked at a name here (see [`Tree::put_file`]); cleared
/// the first time it cannot.
static LINKING_WORKS: AtomicBool = AtomicBool::new(true);

/// Links the unnamed file `file` as `name` in `dir`; `EEXIST` if the name is taken. By
/// the descriptor where the kernel lets this process (`CAP_DAC_READ_SEARCH`, or since
/// Linux 6.10 a file it opened), else through `/proc/self/fd`.
fn link_unnamed(file: &File, dir: &OwnedFd, name: &OsStr) -> nix::Result<()> {
    match linkat(file, "", dir, name, AtFlags::AT_EMPTY_PATH) {
        Err(Errno::ENOENT | Errno::EPERM | Errno::EINVAL) => {
            use std::os::fd::AsRawFd;
            let by_proc = format!("/proc/self/fd/{}", file.as_raw_fd());
            linkat(
                nix::fcntl::AT_FDCWD,
                by_proc.as_str(),
                dir,
                name,
                AtFlags::AT_SYMLINK_FOLLOW,
            )
        }
        other => other,
    }
}

/// The last name of the relative path `path`.
fn last_name(path: &str) -> &OsStr {
    OsStr::new(path.rsplit('/').next().unwrap_or(path))
}

/// Sets the directory `name`'s mode to `mode` (not as the umask left it).
fn set_dir_mode(dir: &OwnedFd, name: &OsStr, mode: u32) -> nix::Result<()> {
    fchmodat(
        dir,
        name,
        Mode::from_bits_truncate(mode),
        FchmodatFlags::NoFollowSymlink,
    )
    .or_else(|errno| match errno {
        Errno::EOPNOTSUPP => fchmodat(
            dir,
            name,
            Mode::from_bits_truncate(mode),
            FchmodatFlags::FollowSymlink,
        ),
        other => Err(other),
    })
}

/// Removes the empty directory `name`; one that is not empty is a change.
fn remove_dir(dir: &OwnedFd, name: &OsStr) -> Result<(), Refusal> {
    match unlinkat(dir, name, UnlinkatFlags::RemoveDir) {
        Ok(()) => Ok(()),
        Err(Errno::ENOTEMPTY | Errno::EEXIST) => Err(Refusal::Changed(Held::Directory)),
        Err(errno) => Err(errno.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_paths_must_be_plain_and_relative() {
        let remove = |path: &str| ApplyStep::Remove {
            path: path.into(),
            expect: Held::Absent,
        };
        assert_eq!(invalid_step(&[remove("a/b"), remove(".hidden")], 0), None);
        for bad in ["", "/etc", "a/../b", "a//b", "./a", "a/", "a\0b"] {
            let found = invalid_step(&[remove("ok"), remove(bad)], 0);
            assert_eq!(
                found.map(|(field, _)| field),
                Some("steps[1].path".to_string()),
                "{bad:?}"
            );
        }
        let rename = ApplyStep::Rename {
            path: "a".into(),
            expect: Held::Directory,
            to: "../b".into(),
        };
        assert_eq!(
            invalid_step(&[rename], 0).map(|(field, _)| field),
            Some("steps[0].to".to_string())
        );
    }
}
