//! A local directory as the merge sees it ([`crate::merge::Entries`]): each entry's kind,
//! permission bits and content hash (SHA-256), symlinks as links with their targets
//! (never followed), and what sync leaves out skipped: the default excludes and
//! `.gitignore`-style patterns. What the merge cannot hold is named, never dropped
//! silently: devices, FIFOs, sockets and names that are not UTF-8.
//!
//! Hashing every file on every scan would read the whole tree; a [`ScanCache`] of sizes,
//! mtimes and inode numbers spares files that did not change. A record taken within two
//! seconds of the file's mtime is not trusted later (a write in the same clock tick keeps
//! size and mtime), as git does with racy entries.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::content_hash::ContentHash;
use crate::merge::{Entries, Entry};

/// What two-way sync leaves out unless told otherwise (and its own state, always).
pub const DEFAULT_EXCLUDES: &[&str] = &[".git", "node_modules", ".DS_Store"];
/// The directory beside the synced files where sync keeps its state.
pub const STATE_DIR: &str = ".fsd-sync";
/// Two-way sync's temp files (see `two_way::local`), on either side.
const TEMP_PATTERN: &str = "*.fsd-sync.tmp";
/// How recent an mtime must not be for a record of it to be trusted.
const RACY: Duration = Duration::from_secs(2);

/// `.gitignore`-style patterns, anchored at the synced directory.
#[derive(Clone)]
pub struct Ignores {
    matcher: Gitignore,
}

impl Ignores {
    /// The defaults (unless `defaults` is false), the state directory, and `patterns`.
    pub fn new(patterns: &[String], defaults: bool) -> Result<Self, ignore::Error> {
        let mut builder = GitignoreBuilder::new("");
        for line in exclude_lines(patterns, defaults) {
            builder.add_line(None, &line)?;
        }
        Ok(Self {
            matcher: builder.build()?,
        })
    }

    /// Whether `relative` (a `/`-separated path under the synced directory) is left out.
    pub fn ignored(&self, relative: &str, is_dir: bool) -> bool {
        self.matcher
            .matched_path_or_any_parents(relative, is_dir)
            .is_ignore()
    }
}

/// The `.gitignore`-style lines sync leaves out: the defaults (unless `defaults` is false),
/// its state directory and temp files, and `patterns`; the same on both sides.
pub fn exclude_lines(patterns: &[String], defaults: bool) -> Vec<String> {
    let defaults = if defaults { DEFAULT_EXCLUDES } else { &[] };
    defaults
        .iter()
        .copied()
        .chain([STATE_DIR, TEMP_PATTERN])
        .map(str::to_string)
        .chain(patterns.iter().cloned())
        .collect()
}

/// What a scan knew of a file: enough to tell it unchanged without reading it. Kept in a
/// sync's state as one string, `SIZE:MTIME_NS:INO:HASH` (as [`Entry`] is; see `kept`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub size: u64,
    pub mtime_ns: i128,
    pub ino: u64,
    pub hash: ContentHash,
}

impl Seen {
    fn parse(text: &str) -> Option<Seen> {
        let mut parts = text.splitn(4, ':');
        Some(Seen {
            size: parts.next()?.parse().ok()?,
            mtime_ns: parts.next()?.parse().ok()?,
            ino: parts.next()?.parse().ok()?,
            hash: ContentHash::parse(parts.next()?)?,
        })
    }
}

impl Serialize for Seen {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Seen {
            size,
            mtime_ns,
            ino,
            hash,
        } = self;
        serializer.collect_str(&format_args!("{size}:{mtime_ns}:{ino}:{hash}"))
    }
}

/// The map form states were written in before the string form.
#[derive(Deserialize)]
struct SeenFields {
    size: u64,
    mtime_ns: i128,
    ino: u64,
    hash: ContentHash,
}

impl From<SeenFields> for Seen {
    fn from(fields: SeenFields) -> Seen {
        let SeenFields {
            size,
            mtime_ns,
            ino,
            hash,
        } = fields;
        Seen {
            size,
            mtime_ns,
            ino,
            hash,
        }
    }
}

impl<'de> Deserialize<'de> for Seen {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::kept::string_or_map::<D, Seen, SeenFields>(
            deserializer,
            "a file's record (`SIZE:MTIME_NS:INO:HASH`)",
            Seen::parse,
        )
    }
}

/// Files' records by path, from one scan to the next.
pub type ScanCache = BTreeMap<String, Seen>;

/// One scan's result.
#[derive(Debug, Default)]
pub struct Scan {
    pub entries: Entries,
    /// Records for the next scan.
    pub cache: ScanCache,
    /// What the merge cannot hold (devices, FIFOs, sockets, names not UTF-8), by path.
    pub skipped: Vec<String>,
    /// Files read and hashed (not taken from the cache).
    pub hashed: usize,
}

/// Scans the directory `root`.
pub fn scan(root: &Path, ignores: &Ignores, cache: &ScanCache) -> std::io::Result<Scan> {
    let mut scanner = Scanner::new(ignores, cache);
    scanner.below(vec![(root.to_path_buf(), String::new())])?;
    scanner.finish()
}

/// A walk of the tree that reads no file: its directories and links, and its files to be
/// read by the caller (each once, hashed as it is read: a first upload).
#[derive(Debug)]
pub struct Walk {
    /// The directories and links.
    pub tree: Entries,
    pub files: Vec<WalkedFile>,
    /// What the merge cannot hold (devices, FIFOs, sockets, names not UTF-8), by path.
    pub skipped: Vec<String>,
    /// When the walk began: a file changed since is too recent to keep a record of.
    pub began: SystemTime,
}

/// A file a [`Walk`] found.
#[derive(Debug)]
pub struct WalkedFile {
    pub relative: String,
    pub path: PathBuf,
    pub mode: u32,
}

/// Walks the directory `root` as [`scan`] does, reading no file.
pub fn walk(root: &Path, ignores: &Ignores) -> std::io::Result<Walk> {
    let none = ScanCache::new();
    let mut scanner = Scanner::new(ignores, &none);
    scanner.below(vec![(root.to_path_buf(), String::new())])?;
    Ok(Walk {
        tree: scanner.out.entries,
        files: scanner
            .unhashed
            .into_iter()
            .map(|file| WalkedFile {
                relative: file.relative,
                path: file.path,
                mode: file.mode,
            })
            .collect(),
        skipped: scanner.out.skipped,
        began: scanner.now,
    })
}

/// The record to keep of a file read whole just now (`meta` from its open descriptor),
/// unless it changed too recently before `began` (see [`scan`]) or since.
pub fn record_of_read(
    meta: &std::fs::Metadata,
    hash: ContentHash,
    began: SystemTime,
) -> Option<Seen> {
    (!racy(meta, began)).then(|| record(meta, hash))
}

/// The entries at `paths` (relative to `root`) and below those that are directories, as
/// [`scan`] finds them: what a sync reads again where a watcher said something changed. A
/// path that is not there, or lies under something that is not a directory (a link is
/// never followed), has none.
pub fn scan_paths(
    root: &Path,
    paths: &BTreeSet<String>,
    ignores: &Ignores,
    cache: &ScanCache,
) -> std::io::Result<Scan> {
    let mut scanner = Scanner::new(ignores, cache);
    for path in tops(paths) {
        // Each directory above it a directory, not a link to one elsewhere.
        let mut at = root.to_path_buf();
        let mut names: Vec<&str> = path.split('/').collect();
        let Some(last) = names.pop() else { continue };
        let through_dirs = names.iter().all(|name| {
            at.push(name);
            std::fs::symlink_metadata(&at).is_ok_and(|meta| meta.is_dir())
        });
        if !through_dirs {
            continue;
        }
        at.push(last);
        if let Some(below) = scanner.entry(at, path.to_string())? {
            scanner.below(vec![below])?;
        }
    }
    scanner.finish()
}

/// The paths under `root` where what is there may differ from `known` (the tree the last
/// pass left) as `cache`'s records saw it: a stat of each entry, no content read, nothing
/// kept but the paths. A file differs when its stat differs from its record (or it has
/// none: new, or written too recently to trust), or its kind, mode or recorded hash
/// differs from `known`'s; a link when its target does; a directory when its kind or mode
/// does (one `known` does not hold is named, not walked: reading the path reads it whole);
/// and what `known` holds that is not there differs. Also answers the names that are not
/// UTF-8, as [`scan`] tells them.
pub fn changed_paths(
    root: &Path,
    ignores: &Ignores,
    known: &Entries,
    cache: &ScanCache,
) -> std::io::Result<(BTreeSet<String>, Vec<String>)> {
    let walk = ChangeWalk {
        ignores,
        known,
        cache,
    };
    // The top of the tree here, until there are directories enough to share, then the
    // rest on two threads (a stat walk waits on the kernel; the sandbox's side is a token).
    let mut found = Found::default();
    let mut frontier = vec![(root.to_path_buf(), String::new())];
    while !frontier.is_empty() && frontier.len() < 64 {
        let mut next = Vec::new();
        for (dir, prefix) in frontier {
            walk.dir(dir, prefix, &mut found, &mut next)?;
        }
        frontier = next;
    }
    let taken = std::sync::atomic::AtomicUsize::new(0);
    let parts: Vec<std::io::Result<Found>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut found = Found::default();
                    let mut pending = Vec::new();
                    loop {
                        let at = taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((dir, prefix)) = frontier.get(at) else {
                            return Ok(found);
                        };
                        pending.push((dir.clone(), prefix.clone()));
                        while let Some((dir, prefix)) = pending.pop() {
                            walk.dir(dir, prefix, &mut found, &mut pending)?;
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("walk failed")))
            })
            .collect()
    });
    for part in parts {
        let part = part?;
        found.changed.extend(part.changed);
        found.skipped.extend(part.skipped);
        found.known.extend(part.known);
    }
    let Found {
        mut changed,
        skipped,
        known: seen,
    } = found;
    if seen.len() != known.len() {
        let seen: std::collections::HashSet<&str> = seen.into_iter().collect();
        changed.extend(
            known
                .keys()
                .filter(|path| !seen.contains(path.as_str()))
                .cloned(),
        );
    }
    Ok((changed, skipped))
}

/// What [`changed_paths`] compares against.
struct ChangeWalk<'a> {
    ignores: &'a Ignores,
    known: &'a Entries,
    cache: &'a ScanCache,
}

/// What a walk found.
#[derive(Default)]
struct Found<'a> {
    changed: BTreeSet<String>,
    skipped: Vec<String>,
    /// `known`'s paths found; those not found are gone.
    known: Vec<&'a str>,
}

impl<'a> ChangeWalk<'a> {
    /// Compares what `dir` (`prefix` in the tree) holds; its directories `known` holds
    /// go to `pending`.
    fn dir(
        &self,
        dir: PathBuf,
        prefix: String,
        found: &mut Found<'a>,
        pending: &mut Vec<(PathBuf, String)>,
    ) -> std::io::Result<()> {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // Gone, or no longer a directory, since it was listed: read again.
            Err(error) if gone_since_listed(&prefix, &error) => {
                found.changed.insert(prefix);
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        let mut relative = prefix;
        if !relative.is_empty() {
            relative.push('/');
        }
        let base = relative.len();
        for entry in entries.flatten() {
            relative.truncate(base);
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                found.skipped.push(entry.path().display().to_string());
                continue;
            };
            relative.push_str(name);
            // A stat relative to the directory read, not a lookup of the whole path.
            let Ok(meta) = entry.metadata() else {
                found.changed.insert(relative.clone());
                continue;
            };
            let kind = meta.file_type();
            if self.ignores.ignored(&relative, kind.is_dir()) {
                continue;
            }
            let Some((path, held)) = self.known.get_key_value(relative.as_str()) else {
                found.changed.insert(relative.clone());
                continue;
            };
            found.known.push(path);
            let mode = permissions(&meta);
            let same = match held {
                Entry::Dir { mode: was } => kind.is_dir() && *was == mode,
                Entry::File { hash, mode: was } => {
                    kind.is_file()
                        && *was == mode
                        && self.cache.get(path).is_some_and(|seen| {
                            seen.hash == *hash
                                && same_file(seen, &record(&meta, ContentHash::default()))
                        })
                }
                Entry::Link { target } => {
                    kind.is_symlink()
                        && std::fs::read_link(entry.path())
                            .is_ok_and(|now| now.to_str() == Some(target.as_str()))
                }
            };
            if !same {
                found.changed.insert(relative.clone());
            }
            if kind.is_dir() && held.is_dir() {
                pending.push((entry.path(), relative.clone()));
            }
        }
        Ok(())
    }
}

/// `paths` less those under another one of them: each of these is read with what is
/// below it.
pub fn tops(paths: &BTreeSet<String>) -> Vec<&str> {
    fsd_api::files::topmost(paths)
}

/// One scan's entries as they are found.
struct Scanner<'a> {
    ignores: &'a Ignores,
    cache: &'a ScanCache,
    now: SystemTime,
    out: Scan,
    /// Files whose records did not vouch for them, hashed once the walk is done.
    unhashed: Vec<Unhashed>,
}

/// A file found by the walk that is to be read and hashed.
struct Unhashed {
    relative: String,
    path: PathBuf,
    mode: u32,
    /// Its record, but for the hash; none if it was written too recently to keep one.
    seen: Option<Seen>,
}

/// Fewest files to hash before the hashing is shared among threads.
const HASHED_ON_THREADS: usize = 64;

impl<'a> Scanner<'a> {
    fn new(ignores: &'a Ignores, cache: &'a ScanCache) -> Self {
        Self {
            ignores,
            cache,
            now: SystemTime::now(),
            out: Scan::default(),
            unhashed: Vec::new(),
        }
    }

    /// The scan, once the files the walk found unknown are hashed: on as many threads as
    /// there are cores (up to 4) where there are many (a first sync hashes every file,
    /// and one thread reading and hashing 20,000 was most of its local side).
    fn finish(mut self) -> std::io::Result<Scan> {
        let unhashed = std::mem::take(&mut self.unhashed);
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4);
        let hash_all = |files: &[Unhashed]| -> Vec<std::io::Result<ContentHash>> {
            files.iter().map(|file| hash_file(&file.path)).collect()
        };
        let hashes: Vec<std::io::Result<ContentHash>> =
            if threads == 1 || unhashed.len() < HASHED_ON_THREADS {
                hash_all(&unhashed)
            } else {
                let chunk = unhashed.len().div_ceil(threads);
                std::thread::scope(|scope| {
                    let parts: Vec<_> = unhashed
                        .chunks(chunk)
                        .map(|files| scope.spawn(move || hash_all(files)))
                        .collect();
                    parts
                        .into_iter()
                        .flat_map(|part| {
                            part.join().unwrap_or_else(|_| {
                                vec![Err(std::io::Error::other("a hashing thread panicked"))]
                            })
                        })
                        .collect()
                })
            };
        if hashes.len() != unhashed.len() {
            return Err(std::io::Error::other("a hashing thread panicked"));
        }
        for (file, hash) in unhashed.into_iter().zip(hashes) {
            let hash = match hash {
                Ok(hash) => hash,
                // Gone since the walk: not there.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            self.out.hashed += 1;
            if let Some(seen) = file.seen {
                self.out
                    .cache
                    .insert(file.relative.clone(), Seen { hash, ..seen });
            }
            self.out.entries.insert(
                file.relative,
                Entry::File {
                    hash,
                    mode: file.mode,
                },
            );
        }
        Ok(self.out)
    }

    /// What the directories `pending` hold (each with its relative path), all the way down.
    fn below(&mut self, mut pending: Vec<(PathBuf, String)>) -> std::io::Result<()> {
        while let Some((dir, prefix)) = pending.pop() {
            let mut entries: Vec<std::fs::DirEntry> = match std::fs::read_dir(&dir) {
                Ok(entries) => entries.flatten().collect(),
                // Gone, or no longer a directory, since it was found: not there (what is
                // there now is told again). Anything else fails the scan: a directory
                // read as empty would be its content deleted.
                Err(error) if gone_since_listed(&prefix, &error) => continue,
                Err(error) => return Err(error),
            };
            entries.sort_by_key(std::fs::DirEntry::file_name);
            for entry in entries {
                let path = entry.path();
                let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                    self.out.skipped.push(path.display().to_string());
                    continue;
                };
                let relative = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                if let Some(below) = self.entry(path, relative)? {
                    pending.push(below);
                }
            }
        }
        Ok(())
    }

    /// Records what is at `path` (`relative` in the tree); a directory is answered, to be
    /// scanned.
    fn entry(
        &mut self,
        path: PathBuf,
        relative: String,
    ) -> std::io::Result<Option<(PathBuf, String)>> {
        // Gone since the listing: not there.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return Ok(None);
        };
        let kind = meta.file_type();
        if self.ignores.ignored(&relative, kind.is_dir()) {
            return Ok(None);
        }
        let mode = permissions(&meta);
        if kind.is_dir() {
            self.out
                .entries
                .insert(relative.clone(), Entry::Dir { mode });
            return Ok(Some((path, relative)));
        }
        if kind.is_symlink() {
            let target = match std::fs::read_link(&path) {
                Ok(target) => target,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(error) => return Err(error),
            };
            match target.to_str() {
                Some(target) => {
                    self.out.entries.insert(
                        relative,
                        Entry::Link {
                            target: target.to_string(),
                        },
                    );
                }
                None => self.out.skipped.push(relative),
            }
        } else if kind.is_file() {
            let seen = record(&meta, ContentHash::default());
            let hash = match self.cache.get(&relative) {
                Some(known) if same_file(known, &seen) => known.hash,
                _ => {
                    let seen = (!racy(&meta, self.now)).then_some(seen);
                    self.unhashed.push(Unhashed {
                        relative,
                        path,
                        mode,
                        seen,
                    });
                    return Ok(None);
                }
            };
            if !racy(&meta, self.now) {
                self.out.cache.insert(relative.clone(), record(&meta, hash));
            }
            self.out
                .entries
                .insert(relative, Entry::File { hash, mode });
        } else {
            self.out.skipped.push(relative);
        }
        Ok(None)
    }
}

/// Whether a directory below the top (`prefix`) failed to list because it is gone, or no
/// longer a directory, since its parent listed it.
fn gone_since_listed(prefix: &str, error: &std::io::Error) -> bool {
    !prefix.is_empty()
        && matches!(
            error.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        )
}

/// The SHA-256 of a file's content.
pub fn hash_file(path: &Path) -> std::io::Result<ContentHash> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(ContentHash::from(hasher))
}

/// Whether a file whose metadata is `meta` is the one `known` recorded, unchanged.
pub fn unchanged(known: &Seen, meta: &std::fs::Metadata) -> bool {
    same_file(known, &record(meta, ContentHash::default()))
}

fn same_file(known: &Seen, now: &Seen) -> bool {
    known.size == now.size && known.mtime_ns == now.mtime_ns && known.ino == now.ino
}

fn mtime_ns(meta: &std::fs::Metadata) -> i128 {
    meta.modified()
        .ok()
        .and_then(|at| at.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |since| since.as_nanos() as i128)
}

fn racy(meta: &std::fs::Metadata, now: SystemTime) -> bool {
    meta.modified()
        .ok()
        .and_then(|at| now.duration_since(at).ok())
        .is_none_or(|age| age < RACY)
}

#[cfg(unix)]
fn record(meta: &std::fs::Metadata, hash: ContentHash) -> Seen {
    use std::os::unix::fs::MetadataExt;
    Seen {
        size: meta.len(),
        mtime_ns: mtime_ns(meta),
        ino: meta.ino(),
        hash,
    }
}

#[cfg(not(unix))]
fn record(meta: &std::fs::Metadata, hash: ContentHash) -> Seen {
    Seen {
        size: meta.len(),
        mtime_ns: mtime_ns(meta),
        ino: 0,
        hash,
    }
}

/// The mode a sync compares and carries.
#[cfg(unix)]
pub(crate) fn permissions(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    // Setuid, setgid and sticky bits included: a sync carries them.
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
pub(crate) fn permissions(meta: &std::fs::Metadata) -> u32 {
    if meta.is_dir() { 0o755 } else { 0o644 }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// More files than one thread hashes, one of them written just now: each is hashed
    /// right, each but the new one keeps a record, and a second scan reads only the new one.
    #[test]
    fn a_scan_hashes_on_threads_and_keeps_records_of_settled_files() {
        let root = tempfile::tempdir().expect("tempdir");
        let old = SystemTime::now() - std::time::Duration::from_secs(3600);
        let count = HASHED_ON_THREADS * 3;
        for i in 0..count {
            let dir = root.path().join(format!("d{}", i % 5));
            std::fs::create_dir_all(&dir).expect("mkdir");
            let path = dir.join(format!("f{i}"));
            std::fs::write(&path, format!("content {i}\n").repeat(i + 1)).expect("write");
            let file = std::fs::File::options()
                .write(true)
                .open(&path)
                .expect("open");
            file.set_modified(old).expect("mtime");
        }
        std::fs::write(root.path().join("new"), "just written\n").expect("write");
        let ignores = Ignores::new(&[], true).expect("ignores");

        let first = scan(root.path(), &ignores, &ScanCache::new()).expect("scan");
        let files: Vec<(&String, &ContentHash)> = first
            .entries
            .iter()
            .filter_map(|(path, entry)| match entry {
                Entry::File { hash, .. } => Some((path, hash)),
                _ => None,
            })
            .collect();
        assert_eq!(files.len(), count + 1);
        for (path, hash) in files {
            assert_eq!(
                hash,
                &hash_file(&root.path().join(path)).expect("hash"),
                "{path}"
            );
        }
        assert_eq!(first.hashed, count + 1);
        assert_eq!(
            first.cache.len(),
            count,
            "the file written just now keeps no record"
        );
        assert!(!first.cache.contains_key("new"));

        let second = scan(root.path(), &ignores, &first.cache).expect("scan");
        assert_eq!(
            second.hashed, 1,
            "only the file without a record is read again"
        );
        assert_eq!(second.entries, first.entries);
    }

    #[test]
    fn a_tree_is_scanned_with_links_modes_and_ignores_and_the_cache_spares_reads() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/empty")).unwrap();
        std::fs::create_dir_all(root.join("node_modules/x")).unwrap();
        std::fs::create_dir_all(root.join(STATE_DIR)).unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(root.join("build.log"), "noise").unwrap();
        std::fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::os::unix::fs::symlink("../outside", root.join("src/link")).unwrap();
        nix_fifo(&root.join("pipe"));
        let ignores = Ignores::new(&["*.log".to_string()], true).unwrap();
        let scan = scan(root, &ignores, &ScanCache::new()).unwrap();
        let paths: Vec<&str> = scan.entries.keys().map(String::as_str).collect();
        assert_eq!(
            paths,
            ["run.sh", "src", "src/empty", "src/link", "src/main.rs"],
            "defaults, the state directory and the pattern left out"
        );
        assert_eq!(
            scan.entries["src/link"],
            Entry::Link {
                target: "../outside".into()
            }
        );
        assert!(matches!(
            scan.entries["run.sh"],
            Entry::File { mode: 0o755, .. }
        ));
        assert_eq!(
            scan.entries["src/main.rs"],
            Entry::File {
                hash: hash_file(&root.join("src/main.rs")).unwrap(),
                mode: 0o644
            }
        );
        assert_eq!(
            scan.skipped,
            ["pipe"],
            "a FIFO is named, not dropped silently"
        );
        assert_eq!(scan.hashed, 2);
        // Records of files just written are not trusted: they are read again.
        assert!(scan.cache.is_empty());
        let aged = ScanCache::from([(
            "src/main.rs".to_string(),
            record(
                &std::fs::symlink_metadata(root.join("src/main.rs")).unwrap(),
                ContentHash::of(b"cached"),
            ),
        )]);
        let again = super::scan(root, &ignores, &aged).unwrap();
        assert_eq!(again.hashed, 1, "the cached file is not read");
        assert!(
            matches!(&again.entries["src/main.rs"], Entry::File { hash, .. } if *hash == ContentHash::of(b"cached"))
        );
    }

    #[test]
    fn chosen_paths_are_read_with_what_is_below_them_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), "f").unwrap();
        std::fs::write(root.join("a/g"), "g").unwrap();
        std::fs::write(root.join("h"), "h").unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/secret"), "s").unwrap();
        std::os::unix::fs::symlink("outside", root.join("link")).unwrap();
        let ignores = Ignores::new(&[], true).unwrap();
        let paths: BTreeSet<String> =
            ["a", "a/b/f", "a-z", "a/g", "gone", "link/secret", "h/under"]
                .into_iter()
                .map(str::to_string)
                .collect();
        let scan = scan_paths(root, &paths, &ignores, &ScanCache::new()).unwrap();
        let found: Vec<&str> = scan.entries.keys().map(String::as_str).collect();
        assert_eq!(found, ["a", "a/b", "a/b/f", "a/g"]);
        assert_eq!(tops(&paths), ["a", "a-z", "gone", "h/under", "link/secret"]);
    }

    fn nix_fifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn a_walk_of_stats_names_exactly_what_differs_from_the_last_scan() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let old = |path: &str| {
            // Older than the racy window, so the scan keeps a record.
            let at = std::fs::File::options()
                .write(true)
                .open(root.join(path))
                .unwrap();
            at.set_modified(SystemTime::now() - Duration::from_secs(60))
                .unwrap();
        };
        for d in ["a", "a/deep", "b", "swap", "gone", "node_modules"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "a/same",
            "a/edited",
            "a/chmod",
            "a/deep/removed",
            "b/same",
            "swap/x",
            "gone/y",
            "node_modules/z",
            "top",
        ] {
            std::fs::write(root.join(f), f).unwrap();
            old(f);
        }
        std::os::unix::fs::symlink("a/same", root.join("link")).unwrap();
        let ignores = Ignores::new(&[], true).unwrap();
        let scan = scan(root, &ignores, &ScanCache::new()).unwrap();
        let (nothing, _) = changed_paths(root, &ignores, &scan.entries, &scan.cache).unwrap();
        assert!(nothing.is_empty(), "unchanged: {nothing:?}");

        std::fs::write(root.join("a/edited"), "edited, longer").unwrap();
        std::fs::set_permissions(root.join("a/chmod"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::remove_file(root.join("a/deep/removed")).unwrap();
        std::fs::write(root.join("b/new"), "new").unwrap();
        std::fs::remove_dir_all(root.join("swap")).unwrap();
        std::fs::write(root.join("swap"), "a file now").unwrap();
        std::fs::remove_dir_all(root.join("gone")).unwrap();
        std::fs::write(root.join("node_modules/more"), "left out").unwrap();
        std::fs::remove_file(root.join("link")).unwrap();
        std::os::unix::fs::symlink("b/same", root.join("link")).unwrap();
        let (changed, _) = changed_paths(root, &ignores, &scan.entries, &scan.cache).unwrap();
        let expected = [
            "a/chmod",
            "a/deep/removed",
            "a/edited",
            "b/new",
            "gone",
            "gone/y",
            "link",
            "swap",
            "swap/x",
        ];
        assert_eq!(
            changed.iter().map(String::as_str).collect::<Vec<_>>(),
            expected
        );
        // A file with no record (written too recently to trust when scanned) is read.
        let mut cache = scan.cache.clone();
        cache.remove("b/same");
        let (unrecorded, _) = changed_paths(root, &ignores, &scan.entries, &cache).unwrap();
        assert!(unrecorded.contains("b/same"));
    }

    #[test]
    fn records_and_entries_are_kept_as_strings_and_earlier_maps_still_read() {
        let hex = "ab".repeat(32);
        let hash = ContentHash::parse(&hex).unwrap();
        assert_eq!(hash.to_string(), hex);
        assert_eq!(ContentHash::parse(&hex.to_uppercase()), Some(hash));
        for bad in [
            "h",
            &hex[1..],
            &format!("{hex}0"),
            &"g".repeat(64),
            &"é".repeat(32),
        ] {
            assert_eq!(ContentHash::parse(bad), None, "{bad}");
        }
        let seen = Seen {
            size: 12,
            mtime_ns: 1_700_000_000_123_456_789,
            ino: 42,
            hash,
        };
        let text = serde_json::to_string(&seen).unwrap();
        assert_eq!(
            text,
            format!("\"12:1700000000123456789:42:{}\"", "ab".repeat(32))
        );
        assert_eq!(serde_json::from_str::<Seen>(&text).unwrap(), seen);
        let earlier =
            format!(r#"{{"size":12,"mtime_ns":1700000000123456789,"ino":42,"hash":"{hex}"}}"#);
        assert_eq!(serde_json::from_str::<Seen>(&earlier).unwrap().hash, hash);
        assert!(serde_json::from_str::<Seen>("\"12:1:42:h\"").is_err());
        for (entry, text) in [
            (
                Entry::File { hash, mode: 0o4755 },
                format!("\"f4755:{hex}\""),
            ),
            (Entry::Dir { mode: 0o700 }, "\"d700\"".to_string()),
            (
                Entry::Link {
                    target: "a:b/../c".into(),
                },
                "\"l:a:b/../c\"".to_string(),
            ),
        ] {
            assert_eq!(serde_json::to_string(&entry).unwrap(), text);
            assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), entry);
        }
        let earlier = format!(r#"{{"kind":"file","hash":"{hex}","mode":420}}"#);
        assert_eq!(
            serde_json::from_str::<Entry>(&earlier).unwrap(),
            Entry::File { hash, mode: 0o644 }
        );
        assert!(serde_json::from_str::<Entry>("\"f644:h\"").is_err());
        assert!(serde_json::from_str::<Entry>("\"x1\"").is_err());
    }
}
