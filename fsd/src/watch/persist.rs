//! Retained watches saved to disk, so change tokens survive a daemon restart.
//!
//! A saved watch holds the watch's key, journal id and journal, and an index of the tree (path,
//! type, size, mtime, inode). After a restart the tree is scanned again and compared with the
//! index; the differences (a path gone and another appeared with the same inode: a rename)
//! are journaled, so a token from before the restart gets the real changes.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fsd_watch::{Event, EventKind, Filter};
use serde::{Deserialize, Serialize};

use super::journal::Saved;
use super::key::WatchKey;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    #[serde(with = "os_path")]
    pub path: PathBuf,
    pub is_dir: bool,
    pub size: u64,
    pub mtime_ns: i128,
    pub inode: u64,
    /// The device the object's inode number is of: an overlay over several layers (a
    /// restore) reports the layers' own numbers, so two objects can share one inode number
    /// and only the pair names one (absent in watches saved by earlier versions).
    #[serde(default)]
    pub dev: Option<u64>,
    /// Permission bits (absent in watches saved by earlier versions: no mode change is told).
    #[serde(default)]
    pub mode: Option<u32>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventRecord {
    kind: String,
    #[serde(with = "os_path")]
    path: PathBuf,
    #[serde(
        serialize_with = "os_path::serialize_option",
        deserialize_with = "os_path::deserialize_option"
    )]
    from: Option<PathBuf>,
    is_dir: bool,
    cursor: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedWatchFile {
    #[serde(with = "os_path")]
    path: PathBuf,
    recursive: bool,
    include: Vec<String>,
    exclude: Vec<String>,
    id: String,
    cursor: u64,
    complete_from: u64,
    lost_at: Option<u64>,
    /// Cursor ranges of earlier restarts that may have been handed out and never saved
    /// (absent in watches saved by earlier versions).
    #[serde(default)]
    unknown: Vec<(u64, u64)>,
    events: Vec<EventRecord>,
    index: Vec<IndexEntry>,
}

/// Paths in saved watches: a string when they are UTF-8 (as every saved watch had them before),
/// else their bytes, so a tree with a name that is not UTF-8 is still saved exactly.
mod os_path {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Text(String),
        Bytes { bytes: Vec<u8> },
    }

    fn repr(path: &Path) -> Repr {
        match path.to_str() {
            Some(text) => Repr::Text(text.to_owned()),
            None => Repr::Bytes {
                bytes: path.as_os_str().as_bytes().to_vec(),
            },
        }
    }

    fn path(repr: Repr) -> PathBuf {
        match repr {
            Repr::Text(text) => PathBuf::from(text),
            Repr::Bytes { bytes } => PathBuf::from(OsString::from_vec(bytes)),
        }
    }

    pub fn serialize<S: Serializer>(value: &Path, serializer: S) -> Result<S::Ok, S::Error> {
        repr(value).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<PathBuf, D::Error> {
        Repr::deserialize(deserializer).map(path)
    }

    pub fn serialize_option<S: Serializer>(
        value: &Option<PathBuf>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        value.as_deref().map(repr).serialize(serializer)
    }

    pub fn deserialize_option<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<PathBuf>, D::Error> {
        Option::<Repr>::deserialize(deserializer).map(|repr| repr.map(path))
    }
}

/// A watch as a daemon before this one saved it.
pub struct SavedWatch {
    pub key: WatchKey,
    pub id: String,
    pub saved: Saved,
    pub index: Vec<IndexEntry>,
    pub file: PathBuf,
}

/// The file a saved watch lives in.
pub fn file_for(dir: &Path, key: &WatchKey) -> PathBuf {
    let text = format!(
        "{}\\0{}\\0{:?}\\0{:?}",
        key.path.display(),
        key.recursive,
        key.include,
        key.exclude
    );
    dir.join(format!("{:016x}.json", fnv1a(text.as_bytes())))
}

/// FNV-1a: a hash stable across runs, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub fn save(
    dir: &Path,
    key: &WatchKey,
    id: &str,
    saved: &Saved,
    index: Vec<IndexEntry>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = SavedWatchFile {
        path: key.path.clone(),
        recursive: key.recursive,
        include: key.include.clone(),
        exclude: key.exclude.clone(),
        id: id.to_string(),
        cursor: saved.cursor,
        complete_from: saved.complete_from,
        lost_at: saved.lost_at,
        unknown: saved.unknown.clone(),
        events: saved
            .events
            .iter()
            .map(|(cursor, e)| EventRecord {
                kind: kind_name(e.kind).to_string(),
                path: e.path.clone(),
                from: e.from.clone(),
                is_dir: e.is_dir,
                cursor: *cursor,
            })
            .collect(),
        index,
    };
    let target = file_for(dir, key);
    let temp = target.with_extension("json.tmp");
    std::fs::write(
        &temp,
        serde_json::to_vec(&file).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&temp, &target)
}

pub fn load_all(dir: &Path) -> Vec<SavedWatch> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
    {
        let parsed = std::fs::read(entry.path())
            .ok()
            .and_then(|bytes| serde_json::from_slice::<SavedWatchFile>(&bytes).ok());
        let Some(file) = parsed else {
            tracing::warn!(path = %entry.path().display(), "ignoring an unreadable saved watch");
            let _ = std::fs::remove_file(entry.path());
            continue;
        };
        let events = file
            .events
            .into_iter()
            .filter_map(|r| {
                Some((
                    r.cursor,
                    Event {
                        kind: kind_from(&r.kind)?,
                        path: r.path,
                        from: r.from,
                        is_dir: r.is_dir,
                    },
                ))
            })
            .collect();
        out.push(SavedWatch {
            key: WatchKey {
                path: file.path,
                recursive: file.recursive,
                include: file.include,
                exclude: file.exclude,
            },
            id: file.id,
            saved: Saved {
                cursor: file.cursor,
                events,
                complete_from: file.complete_from,
                lost_at: file.lost_at,
                unknown: file.unknown,
            },
            index: file.index,
            file: entry.path(),
        });
    }
    out
}

/// Everything the watch reports under `root`, with what identifies its content.
pub fn scan(root: &Path, filter: &Filter, recursive: bool) -> Vec<IndexEntry> {
    let mut devices = Devices::default();
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let is_dir = meta.is_dir();
            if is_dir && recursive && !filter.prunes_dir(&relative) {
                pending.push(path.clone());
            }
            if filter.allows(&relative) {
                out.push(IndexEntry {
                    path,
                    is_dir,
                    size: meta.len(),
                    mtime_ns: i128::from(meta.mtime()) * 1_000_000_000
                        + i128::from(meta.mtime_nsec()),
                    inode: meta.ino(),
                    dev: Some(devices.id(meta.dev())),
                    mode: Some(meta.mode() & 0o7777),
                });
            }
        }
    }
    out
}

/// Names for devices that stay when a restore is mounted again: the kernel numbers a
/// restore's loop devices afresh at each mount (the layers of an overlay report their own
/// devices, and number their files each from 1), so a loop device is named by the archive
/// behind it; any other device by its number.
#[derive(Default)]
struct Devices {
    known: HashMap<u64, u64>,
}

impl Devices {
    /// The loop devices' major number.
    const LOOP: u32 = 7;

    fn id(&mut self, dev: u64) -> u64 {
        *self.known.entry(dev).or_insert_with(|| {
            let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
            if major != u64::from(Self::LOOP) {
                return dev;
            }
            let backing = format!("/sys/dev/block/{major}:{minor}/loop/backing_file");
            match std::fs::read(backing) {
                // The top bit set, apart from device numbers.
                Ok(file) => fnv1a(&file) | 1 << 63,
                Err(_) => dev,
            }
        })
    }
}

/// The events that turn `before` into `after`, as a change list a mirror applies: the
/// ordered comparison below (moves told as moves) when its list, applied to `before` as a
/// mirror applies it, gives `after`; else, for the few combinations that need an order
/// path order cannot give (a directory replaced by a file while something inside it moved
/// out; a new file made where a file of a renamed directory moved away from), the plain
/// one: what went deleted, what appeared made, no move (the mirror fetches what moved).
pub fn diff(before: &[IndexEntry], after: &[IndexEntry]) -> Vec<Event> {
    let events = ordered_diff(before, after);
    let moves = events.iter().any(|e| e.kind == EventKind::Rename);
    match !moves || mirrors(before, &events, after) {
        true => events,
        false => plain_diff(before, after),
    }
}

/// What went deleted (a directory with what is under it), then what appeared made (parents
/// first), then what changed in place: a list with no move, right in any order of changes.
fn plain_diff(before: &[IndexEntry], after: &[IndexEntry]) -> Vec<Event> {
    let old: HashMap<&Path, &IndexEntry> = before.iter().map(|e| (e.path.as_path(), e)).collect();
    let new: HashMap<&Path, &IndexEntry> = after.iter().map(|e| (e.path.as_path(), e)).collect();
    let gone = not_as_in(before, &new);
    let mut events: Vec<Event> = Vec::new();
    let mut deleted: Option<&Path> = None;
    for entry in gone {
        if deleted.is_some_and(|top| entry.path.starts_with(top)) {
            continue;
        }
        events.push(event(EventKind::Delete, &entry.path, None, entry.is_dir));
        deleted = Some(&entry.path);
    }
    let appeared = not_as_in(after, &old);
    for entry in appeared {
        events.push(event(EventKind::Create, &entry.path, None, entry.is_dir));
    }
    events.extend(in_place(&old, after));
    events
}

/// The entries of `entries` the other tree has not at their path, or has as another kind, in
/// path order (parents first).
fn not_as_in<'a>(
    entries: &'a [IndexEntry],
    other: &HashMap<&Path, &IndexEntry>,
) -> Vec<&'a IndexEntry> {
    let mut found: Vec<&IndexEntry> = entries
        .iter()
        .filter(|e| {
            other
                .get(e.path.as_path())
                .is_none_or(|o| o.is_dir != e.is_dir)
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// Whether `events`' change list, applied to `before` as a mirror applies it (what moved
/// is taken aside first, then deletes, then what is placed, parents first), gives `after`:
/// the same paths and kinds, each file the same object.
fn mirrors(before: &[IndexEntry], events: &[Event], after: &[IndexEntry]) -> bool {
    let Some(listed) = fsd_watch::changes::list(events, usize::MAX) else {
        return false;
    };
    let tree = before.iter().map(|e| (e.path.clone(), e.clone())).collect();
    let now: HashMap<&Path, &IndexEntry> = after.iter().map(|e| (e.path.as_path(), e)).collect();
    let mirror = mirror_applied(tree, &listed, &now);
    let identity = |e: &IndexEntry| match e.is_dir {
        true => (true, 0, None, 0, 0),
        false => (false, e.inode, e.dev, e.size, e.mtime_ns),
    };
    mirror.len() == now.len()
        && mirror.iter().all(|(path, entry)| {
            now.get(path.as_path())
                .is_some_and(|n| identity(n) == identity(entry))
        })
}

/// `tree` with `listed` applied as `fsd-sdk`'s mirror applies a change list; what it fetches
/// (made or modified) comes from `now`.
fn mirror_applied(
    mut mirror: BTreeMap<PathBuf, IndexEntry>,
    listed: &[fsd_watch::changes::Listed],
    now: &HashMap<&Path, &IndexEntry>,
) -> BTreeMap<PathBuf, IndexEntry> {
    use fsd_watch::changes::Change;
    let subtree = |mirror: &BTreeMap<PathBuf, IndexEntry>, top: &Path| -> Vec<PathBuf> {
        mirror
            .range(top.to_path_buf()..)
            .take_while(|(p, _)| p.starts_with(top))
            .map(|(p, _)| p.clone())
            .collect()
    };
    let mut froms: Vec<&PathBuf> = listed
        .iter()
        .filter_map(|l| match &l.change {
            Change::Renamed { from } => Some(from),
            _ => None,
        })
        .collect();
    froms.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    let mut aside: Vec<(PathBuf, Vec<(PathBuf, IndexEntry)>)> = Vec::new();
    for from in froms {
        let taken = subtree(&mirror, from)
            .into_iter()
            .filter_map(|p| mirror.remove(&p).map(|e| (p, e)))
            .collect();
        aside.push((from.clone(), taken));
    }
    for l in listed.iter().filter(|l| l.change == Change::Deleted) {
        let holder = aside
            .iter_mut()
            .filter(|(from, _)| l.path.starts_with(from))
            .max_by_key(|(from, _)| from.components().count());
        match holder {
            Some((_, taken)) => taken.retain(|(p, _)| !p.starts_with(&l.path)),
            None => {
                for gone in subtree(&mirror, &l.path) {
                    mirror.remove(&gone);
                }
            }
        }
    }
    let mut placed: Vec<&fsd_watch::changes::Listed> = listed
        .iter()
        .filter(|l| matches!(l.change, Change::Renamed { .. } | Change::Created))
        .collect();
    placed.sort_by(|a, b| a.path.cmp(&b.path));
    for l in placed {
        for gone in subtree(&mirror, &l.path) {
            mirror.remove(&gone);
        }
        if let Change::Renamed { from } = &l.change
            && let Some((_, taken)) = aside.iter().find(|(f, _)| f == from)
        {
            for (path, entry) in taken {
                let Ok(rest) = path.strip_prefix(from) else {
                    continue;
                };
                let moved = l.path.join(rest);
                let entry = IndexEntry {
                    path: moved.clone(),
                    ..entry.clone()
                };
                mirror.insert(moved, entry);
            }
        }
    }
    for l in listed
        .iter()
        .filter(|l| matches!(l.change, Change::Created | Change::Modified))
    {
        if let Some(&entry) = now.get(l.path.as_path()) {
            mirror.insert(l.path.clone(), entry.clone());
        }
    }
    mirror
}

/// The events that turn `before` into `after`, in an order a replay can follow: a path that
/// changed type first (deleted, then created), then what appeared (in path order, so a
/// directory comes before what is in it; the same inode, size and mtime on a vanished path is
/// a rename), then what vanished, then content changes of files (a directory's own mtime only
/// says its entries changed, which their own events say). Paths of the old tree are carried
/// through the directory renames already emitted, as they would be named at that point.
fn ordered_diff(before: &[IndexEntry], after: &[IndexEntry]) -> Vec<Event> {
    let old: HashMap<&Path, &IndexEntry> = before.iter().map(|e| (e.path.as_path(), e)).collect();
    let new: HashMap<&Path, &IndexEntry> = after.iter().map(|e| (e.path.as_path(), e)).collect();
    let retyped: Vec<&IndexEntry> = after
        .iter()
        .filter(|e| {
            old.get(e.path.as_path())
                .is_some_and(|p| p.is_dir != e.is_dir)
        })
        .collect();
    // Objects that went, by inode number: several can share one (the layers of an
    // overlay number their objects each on its own), and each is told.
    let mut gone: HashMap<(u64, bool), Vec<&IndexEntry>> = HashMap::new();
    for entry in before
        .iter()
        .filter(|e| !new.contains_key(e.path.as_path()))
    {
        gone.entry((entry.inode, entry.is_dir))
            .or_default()
            .push(entry);
    }
    let mut events = Vec::new();
    for entry in &retyped {
        events.push(event(EventKind::Delete, &entry.path, None, !entry.is_dir));
    }
    let mut appeared: Vec<&IndexEntry> = after
        .iter()
        .filter(|e| !old.contains_key(e.path.as_path()))
        .chain(retyped.iter().copied())
        .collect();
    appeared.sort_by(|a, b| a.path.cmp(&b.path));
    let mut moved_dirs: Vec<(PathBuf, PathBuf)> = Vec::new();
    let carried = |path: &Path, moved_dirs: &[(PathBuf, PathBuf)]| {
        moved_dirs
            .iter()
            .fold(path.to_path_buf(), |path, (from, to)| {
                match path.strip_prefix(from) {
                    Ok(rest) => to.join(rest),
                    Err(_) => path,
                }
            })
    };
    for entry in appeared {
        // A rename keeps the inode, size and mtime; a reused inode (a file deleted, another
        // created) has new ones. An entry with the inode of one that went, at the very path
        // a renamed directory carried that one to, is that one, changed inside the directory.
        let candidates = gone.entry((entry.inode, entry.is_dir)).or_default();
        let found = candidates.iter().position(|previous| {
            let unchanged = previous.size == entry.size && previous.mtime_ns == entry.mtime_ns;
            let carried_here = carried(&previous.path, &moved_dirs) == entry.path;
            same_object(previous, entry) && (unchanged || carried_here)
        });
        match found.map(|at| candidates.swap_remove(at)) {
            Some(previous) => {
                let unchanged = previous.size == entry.size && previous.mtime_ns == entry.mtime_ns;
                let from = carried(&previous.path, &moved_dirs);
                if from != entry.path {
                    events.push(event(
                        EventKind::Rename,
                        &entry.path,
                        Some(&from),
                        entry.is_dir,
                    ));
                    if entry.is_dir {
                        moved_dirs.push((from, entry.path.clone()));
                    }
                }
                if !unchanged && !entry.is_dir {
                    events.push(event(EventKind::Modify, &entry.path, None, false));
                } else if previous.mode.is_some() && previous.mode != entry.mode {
                    events.push(event(EventKind::Attrib, &entry.path, None, entry.is_dir));
                }
            }
            None => events.push(event(EventKind::Create, &entry.path, None, entry.is_dir)),
        }
    }
    let mut vanished: Vec<&IndexEntry> = gone.into_values().flatten().collect();
    vanished.sort_by(|a, b| a.path.cmp(&b.path));
    for entry in vanished {
        let path = carried(&entry.path, &moved_dirs);
        // Carried by a directory's rename to a path that holds another object now: that
        // object was told there (made or moved in), which replaced this one; a delete
        // after it would take the new one away.
        if new.contains_key(path.as_path()) {
            continue;
        }
        events.push(event(EventKind::Delete, &path, None, entry.is_dir));
    }
    events.extend(in_place(&old, after));
    events
}

/// Content and mode changes of what is at the same path, of the same kind, in both trees.
fn in_place<'a>(
    old: &'a HashMap<&Path, &IndexEntry>,
    after: &'a [IndexEntry],
) -> impl Iterator<Item = Event> + 'a {
    after.iter().filter_map(move |entry| {
        let previous = old.get(entry.path.as_path())?;
        if !entry.is_dir
            && !previous.is_dir
            && (previous.size != entry.size
                || previous.mtime_ns != entry.mtime_ns
                || !same_object(previous, entry))
        {
            Some(event(EventKind::Modify, &entry.path, None, false))
        } else if previous.is_dir == entry.is_dir
            && previous.mode.is_some()
            && previous.mode != entry.mode
        {
            Some(event(EventKind::Attrib, &entry.path, None, entry.is_dir))
        } else {
            None
        }
    })
}

/// Whether two entries can be one object: the same inode number on the same device (an
/// entry saved without its device matches any).
fn same_object(a: &IndexEntry, b: &IndexEntry) -> bool {
    a.inode == b.inode && (a.dev.is_none() || b.dev.is_none() || a.dev == b.dev)
}

fn event(kind: EventKind, path: &Path, from: Option<&Path>, is_dir: bool) -> Event {
    Event {
        kind,
        path: path.to_path_buf(),
        from: from.map(Path::to_path_buf),
        is_dir,
    }
}

fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Create => "create",
        EventKind::MoveIn => "move_in",
        EventKind::Modify => "modify",
        EventKind::Delete => "delete",
        EventKind::Rename => "rename",
        EventKind::Attrib => "attrib",
        EventKind::Overflow => "overflow",
    }
}

fn kind_from(name: &str) -> Option<EventKind> {
    Some(match name {
        "create" => EventKind::Create,
        "move_in" => EventKind::MoveIn,
        "modify" => EventKind::Modify,
        "delete" => EventKind::Delete,
        "rename" => EventKind::Rename,
        "attrib" => EventKind::Attrib,
        "overflow" => EventKind::Overflow,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, inode: u64, size: u64) -> IndexEntry {
        IndexEntry {
            path: PathBuf::from(path),
            is_dir: false,
            size,
            mtime_ns: 1,
            inode,
            dev: Some(1),
            mode: Some(0o644),
        }
    }

    fn dir(path: &str, inode: u64, size: u64) -> IndexEntry {
        IndexEntry {
            is_dir: true,
            ..entry(path, inode, size)
        }
    }

    /// Each event's kind and path, to compare with what a test expects.
    fn summary(events: &[Event]) -> Vec<(EventKind, String)> {
        events
            .iter()
            .map(|e| (e.kind, e.path.display().to_string()))
            .collect()
    }

    /// A mode changed while the daemon was down is an `attrib` (a mirror sets it); a
    /// watch saved before modes were kept tells none.
    #[test]
    fn a_mode_changed_while_down_is_told() {
        let before = vec![entry("/w/a", 1, 1), entry("/w/b", 2, 1)];
        let mut after = before.clone();
        after[0].mode = Some(0o755);
        let events = diff(&before, &after);
        assert_eq!(
            events,
            [event(EventKind::Attrib, Path::new("/w/a"), None, false)]
        );
        let mut old = before.clone();
        old[0].mode = None;
        assert!(diff(&old, &after).is_empty());
    }

    /// Found by the composed simulation (seed 1795962146900893211): on a restore (an
    /// overlay over several squashfs layers) two files had one inode number, each of its own
    /// layer; both went while the daemon was down, and only one was told deleted, so the
    /// next incremental snapshot kept the other. And an object of another device with a gone
    /// one's number, size and mtime is not that one moved.
    #[test]
    fn objects_sharing_an_inode_number_on_several_devices_are_each_told() {
        let on = |dev, entry: IndexEntry| IndexEntry {
            dev: Some(dev),
            ..entry
        };
        let before = vec![
            on(7, entry("/w/e.rs", 3, 1)),
            on(8, entry("/w/readme", 3, 1)),
            on(8, entry("/w/kept", 4, 1)),
        ];
        let after = vec![on(8, entry("/w/kept", 4, 1)), on(9, entry("/w/new", 3, 1))];
        assert_eq!(
            summary(&diff(&before, &after)),
            [
                (EventKind::Create, "/w/new".to_string()),
                (EventKind::Delete, "/w/e.rs".into()),
                (EventKind::Delete, "/w/readme".into()),
            ]
        );
        let moved = vec![
            on(8, entry("/w/kept", 4, 1)),
            on(8, entry("/w/moved", 3, 1)),
        ];
        assert_eq!(
            summary(&diff(&before, &moved)),
            [
                (EventKind::Rename, "/w/moved".to_string()),
                (EventKind::Delete, "/w/e.rs".into()),
            ]
        );
        // At one path, an object of another device with the same number is another one
        // (one layer's file moved over another's): modified. A restore mounted again keeps
        // its devices' names (see `Devices`).
        let replaced = vec![
            on(7, entry("/w/e.rs", 3, 1)),
            on(9, entry("/w/readme", 3, 1)),
            on(8, entry("/w/kept", 4, 1)),
        ];
        assert_eq!(
            summary(&diff(&before, &replaced)),
            [(EventKind::Modify, "/w/readme".to_string())]
        );
    }

    /// Found by the randomized mirror test: a file appended to, in a directory renamed,
    /// while the daemon was down, came out as created and then deleted.
    #[test]
    fn a_file_changed_inside_a_renamed_directory_is_modified_there() {
        let before = vec![
            dir("/w/d", 1, 1),
            dir("/w/d/h", 2, 1),
            entry("/w/d/h/b", 3, 1),
        ];
        // `d` renamed to `e` and given a new child (its size moved, so it is not matched as a
        // rename: a directory made anew and the old one gone), `h` carried along, `b`
        // appended to.
        let after = vec![
            dir("/w/e", 1, 2),
            dir("/w/e/h", 2, 1),
            entry("/w/e/h/b", 3, 7),
            dir("/w/e/n", 4, 2),
        ];
        assert_eq!(
            summary(&diff(&before, &after)),
            [
                (EventKind::Create, "/w/e".to_string()),
                (EventKind::Rename, "/w/e/h".into()),
                (EventKind::Modify, "/w/e/h/b".into()),
                (EventKind::Create, "/w/e/n".into()),
                (EventKind::Delete, "/w/d".into()),
            ]
        );
    }

    /// Seen as a warning in the randomized mirror test: a tree with a name that is not
    /// UTF-8 could not be saved, so its tokens did not survive a restart.
    #[test]
    fn names_that_are_not_utf8_are_saved_and_loaded_exactly() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let odd = Path::new("/w").join(std::ffi::OsStr::from_bytes(b"\xff\xfe.bin"));
        let key = WatchKey {
            path: odd.clone(),
            recursive: true,
            include: Vec::new(),
            exclude: Vec::new(),
        };
        let renamed = Event {
            kind: EventKind::Rename,
            path: odd.join("b"),
            from: Some(odd.join("a")),
            is_dir: false,
        };
        let saved = Saved {
            cursor: 2,
            events: vec![(1, renamed.clone())],
            complete_from: 0,
            lost_at: None,
            unknown: vec![(0, 1)],
        };
        let index = vec![entry("/w/plain", 1, 1), {
            let mut odd_entry = entry("/w", 2, 1);
            odd_entry.path = odd.join("b");
            odd_entry
        }];
        save(dir.path(), &key, "watch-1", &saved, index.clone()).unwrap();
        let loaded = load_all(dir.path());
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].key.path, odd);
        assert_eq!(loaded[0].index, index);
        assert_eq!(loaded[0].saved.events, vec![(1, renamed)]);
        assert_eq!(loaded[0].saved.unknown, vec![(0, 1)]);
    }

    /// Found by the three loaded mirrors (seed 1795676761747868480, batch 499): while the
    /// daemon was down, `b` moved to `f g/b` and a file in it swapped with `f g/.h`. The
    /// file that left `b/.h/e.rs` was carried to `f g/b/.h/e.rs` and told deleted there,
    /// after the other file was told made at that very path.
    #[test]
    fn a_file_swapped_into_a_renamed_directory_is_not_deleted_after_it_is_made() {
        let before = vec![
            dir("/w/b", 1, 1),
            dir("/w/b/.h", 2, 1),
            entry("/w/b/.h/e.rs", 3, 3),
            dir("/w/f g", 4, 1),
            entry("/w/f g/.h", 5, 5),
        ];
        let after = vec![
            dir("/w/f g", 4, 1),
            dir("/w/f g/b", 1, 1),
            dir("/w/f g/b/.h", 2, 1),
            entry("/w/f g/b/.h/e.rs", 5, 5),
            entry("/w/f g/.h", 3, 3),
        ];
        assert_eq!(
            summary(&diff(&before, &after)),
            [
                (EventKind::Rename, "/w/f g/b".to_string()),
                (EventKind::Create, "/w/f g/b/.h/e.rs".into()),
                (EventKind::Modify, "/w/f g/.h".into()),
            ]
        );
    }

    #[test]
    fn diff_finds_creates_deletes_renames_and_edits() {
        let before = vec![
            entry("/w/a", 1, 1),
            entry("/w/b", 2, 1),
            entry("/w/c", 3, 1),
        ];
        // /w/new reuses /w/c's inode with other content: not a rename.
        let after = vec![
            entry("/w/a", 1, 9),
            entry("/w/moved", 2, 1),
            entry("/w/new", 3, 5),
        ];
        let events = diff(&before, &after);
        assert_eq!(
            summary(&events),
            [
                (EventKind::Rename, "/w/moved".to_string()),
                (EventKind::Create, "/w/new".into()),
                (EventKind::Delete, "/w/c".into()),
                (EventKind::Modify, "/w/a".into()),
            ]
        );
        assert_eq!(events[0].from, Some(PathBuf::from("/w/b")));
    }
}

/// The restart's diff, proven as the watch engine's lists are: random changes to a tree
/// while "the daemon is down" (renames of files and directories with what they hold,
/// swaps, creates, deletes, writes, inode numbers reused), then the diff's list applied to
/// the tree as it was, as a mirror applies it, must give the tree as it is.
/// `FSD_DIFF_SEED` replays one seed.
#[cfg(test)]
mod simulation {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use fsd_watch::changes;

    use super::{IndexEntry, diff, mirror_applied};

    type Tree = BTreeMap<PathBuf, IndexEntry>;

    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % n as u64) as usize
        }
    }

    const NAMES: &[&str] = &["a", "b", "c", ".h", "f g"];

    fn random_path(rng: &mut Rng, tree: &Tree) -> PathBuf {
        // Inside an existing directory, or the root.
        let dirs: Vec<&PathBuf> = tree
            .values()
            .filter(|e| e.is_dir)
            .map(|e| &e.path)
            .collect();
        let parent = match rng.below(dirs.len() + 1) {
            0 => PathBuf::from("/w"),
            n => dirs[n - 1].clone(),
        };
        parent.join(NAMES[rng.below(NAMES.len())])
    }

    fn subtree(tree: &Tree, top: &Path) -> Vec<PathBuf> {
        tree.keys()
            .filter(|p| p.starts_with(top))
            .cloned()
            .collect()
    }

    /// Moves what is at `from` (and below) to `to`, replacing what was there.
    fn rename(tree: &mut Tree, from: &Path, to: &Path) {
        if to.starts_with(from) {
            return;
        }
        for gone in subtree(tree, to) {
            tree.remove(&gone);
        }
        for path in subtree(tree, from) {
            let mut entry = tree.remove(&path).expect("listed");
            let rest = path.strip_prefix(from).expect("below");
            let moved = match rest.as_os_str().is_empty() {
                true => to.to_path_buf(),
                false => to.join(rest),
            };
            entry.path = moved.clone();
            tree.insert(moved, entry);
        }
    }

    /// One change to `tree`. Objects are on one of two devices (an overlay's layers), each
    /// numbering its inodes from 1, so numbers are shared across them (`next_inode`: each
    /// device's next number).
    fn step(rng: &mut Rng, tree: &mut Tree, next_inode: &mut [u64; 2], freed: &mut Vec<u64>) {
        let existing: Vec<PathBuf> = tree.keys().cloned().collect();
        let pick = |rng: &mut Rng| existing.get(rng.below(existing.len().max(1))).cloned();
        // New objects sometimes get an inode number just freed, as filesystems give them.
        let mut inode = |rng: &mut Rng| match (rng.below(4), freed.pop()) {
            (0, _) => {
                next_inode[1] += 1;
                (next_inode[1], 2)
            }
            (1 | 2, Some(reused)) => (reused, 1),
            _ => {
                next_inode[0] += 1;
                (next_inode[0], 1)
            }
        };
        match rng.below(6) {
            0 | 1 => {
                let path = random_path(rng, tree);
                if tree.contains_key(&path) {
                    return;
                }
                let is_dir = rng.below(3) == 0;
                let (inode, dev) = inode(rng);
                let entry = IndexEntry {
                    path: path.clone(),
                    is_dir,
                    size: rng.below(4) as u64,
                    mtime_ns: rng.below(3) as i128,
                    inode,
                    dev: Some(dev),
                    mode: Some(0o644),
                };
                tree.insert(path, entry);
            }
            2 => {
                if let (Some(from), to) = (pick(rng), random_path(rng, tree)) {
                    rename(tree, &from, &to);
                }
            }
            3 => {
                if let (Some(a), Some(b)) = (pick(rng), pick(rng))
                    && !a.starts_with(&b)
                    && !b.starts_with(&a)
                {
                    let temp = PathBuf::from("/w/swap.tmp");
                    rename(tree, &a, &temp);
                    rename(tree, &b, &a);
                    rename(tree, &temp, &b);
                }
            }
            4 => {
                if let Some(path) = pick(rng) {
                    for gone in subtree(tree, &path) {
                        if let Some(entry) = tree.remove(&gone)
                            && entry.dev == Some(1)
                        {
                            freed.push(entry.inode);
                        }
                    }
                }
            }
            _ => {
                if let Some(path) = pick(rng)
                    && let Some(entry) = tree.get_mut(&path)
                    && !entry.is_dir
                {
                    entry.size += 1;
                    entry.mtime_ns += 1;
                }
            }
        }
    }

    /// A path, whether it is a directory, and for files the object (inode, device), size
    /// and mtime.
    type Shape = (PathBuf, bool, (u64, Option<u64>), u64, i128);

    fn shape(tree: &Tree) -> Vec<Shape> {
        tree.values()
            .map(|e| match e.is_dir {
                true => (e.path.clone(), true, (0, None), 0, 0),
                false => (e.path.clone(), false, (e.inode, e.dev), e.size, e.mtime_ns),
            })
            .collect()
    }

    fn run(seed: u64) -> Result<(), String> {
        let mut rng = Rng(seed);
        let mut tree = Tree::new();
        let (mut next_inode, mut freed) = ([0, 0], Vec::new());
        for _ in 0..rng.below(12) {
            step(&mut rng, &mut tree, &mut next_inode, &mut freed);
        }
        // Inode numbers of the tree when it was saved are not reused while it is still
        // recorded: only what is freed from now on.
        freed.clear();
        let before = tree.clone();
        for _ in 0..1 + rng.below(8) {
            step(&mut rng, &mut tree, &mut next_inode, &mut freed);
        }
        let old: Vec<IndexEntry> = before.values().cloned().collect();
        let new: Vec<IndexEntry> = tree.values().cloned().collect();
        let events = diff(&old, &new);
        let listed = changes::list(&events, usize::MAX).ok_or("no list")?;
        let now = tree.iter().map(|(p, e)| (p.as_path(), e)).collect();
        let mirror = mirror_applied(before.clone(), &listed, &now);
        if shape(&mirror) != shape(&tree) {
            return Err(format!(
                "before {:?}\nafter {:?}\nevents {events:?}\nmirror {:?}",
                shape(&before),
                shape(&tree),
                shape(&mirror)
            ));
        }
        Ok(())
    }

    /// 20,000 seeds (`FSD_DIFF_SEED` replays one). Among them the combinations path order
    /// cannot give, which take the plain list: `FSD_DIFF_SEED=19720`, a directory replaced
    /// by a file while a file inside it moved out (the directory was told deleted before
    /// the move); `FSD_DIFF_SEED=11107`, in a renamed directory a file moved to another name
    /// and a new file took its old one (the new file was told made before the move out of
    /// that name); `FSD_DIFF_SEED=2183`, a file moved over another layer's file of the same
    /// inode number, size and mtime.
    #[test]
    fn a_restarts_diff_applied_gives_the_tree_as_it_is() {
        let seeds: Vec<u64> = match std::env::var("FSD_DIFF_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            Some(seed) => vec![seed],
            None => (0..20_000).collect(),
        };
        for seed in seeds {
            if let Err(failure) = run(seed) {
                panic!("FSD_DIFF_SEED={seed}: {failure}");
            }
        }
    }
}
