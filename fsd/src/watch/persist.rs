//! Retained watches saved to disk, so change tokens survive a daemon restart.
//!
//! A saved watch holds the watch's key, journal id and journal, and the watch engine's
//! record of the tree as the journal leaves it (each entry's path, kind, device and inode,
//! size, mtime and mode). After a restart the engine starts again from that record
//! (`fsd_watch::Watcher::resume_with`): its reconciler reads the tree against it and tells
//! what changed while the daemon was down as it tells any batch (a known inode under a new
//! name is a rename), so a token from before the restart gets the real changes, from the
//! one differ the live watch uses.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fsd_watch::{EntryKind, Event, EventKind, RecordedEntry};
use serde::{Deserialize, Serialize};

use super::journal::Saved;
use super::key::WatchKey;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    #[serde(with = "os_path")]
    pub path: PathBuf,
    pub is_dir: bool,
    /// What the entry is (absent in watches saved by earlier versions: a file, or a
    /// directory by `is_dir`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<SavedKind>,
    pub size: u64,
    pub mtime_ns: i128,
    pub inode: u64,
    /// The device the object's inode number is of: an overlay over several layers (a
    /// restore) reports the layers' own numbers, so two objects can share one inode number
    /// and only the pair names one (absent in watches saved by earlier versions).
    #[serde(default)]
    pub dev: Option<u64>,
    /// Permission bits (absent in watches saved by earlier versions).
    #[serde(default)]
    pub mode: Option<u32>,
    /// Recorded in the clock tick of its mtime: taken as modified after the restart (a
    /// write in that tick keeps size and mtime).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub racy: bool,
}

/// [`EntryKind`] as a saved watch spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SavedKind {
    File,
    Dir,
    Symlink,
    Other,
}

impl From<EntryKind> for SavedKind {
    fn from(kind: EntryKind) -> Self {
        match kind {
            EntryKind::File => SavedKind::File,
            EntryKind::Dir => SavedKind::Dir,
            EntryKind::Symlink => SavedKind::Symlink,
            EntryKind::Other => SavedKind::Other,
        }
    }
}

impl From<SavedKind> for EntryKind {
    fn from(kind: SavedKind) -> Self {
        match kind {
            SavedKind::File => EntryKind::File,
            SavedKind::Dir => EntryKind::Dir,
            SavedKind::Symlink => EntryKind::Symlink,
            SavedKind::Other => EntryKind::Other,
        }
    }
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

/// The watch's record (`fsd_watch::Watcher::record`) as saved: paths joined to `root`,
/// devices by names that stay when a restore is mounted again (see [`Devices`]).
pub fn index(recorded: Vec<RecordedEntry>, root: &Path) -> Vec<IndexEntry> {
    let mut devices = Devices::default();
    recorded
        .into_iter()
        .map(|entry| IndexEntry {
            path: root.join(&entry.path),
            is_dir: entry.kind == EntryKind::Dir,
            kind: Some(SavedKind::from(entry.kind)),
            size: entry.size,
            mtime_ns: i128::from(entry.mtime.0) * 1_000_000_000 + i128::from(entry.mtime.1),
            inode: entry.ino,
            dev: Some(devices.id(entry.dev)),
            mode: Some(entry.mode),
            racy: entry.racy,
        })
        .collect()
}

/// A saved index as the record a watch of `root` starts again from: devices by the
/// numbers they have now. What an older daemon's index lacks is filled in so that the
/// restart tells too much rather than too little: a non-directory of unknown kind is a
/// file (a link is then told replaced), a missing device is the root's, a missing mode
/// none (each entry's mode is then told).
pub fn recorded(index: &[IndexEntry], root: &Path) -> Vec<RecordedEntry> {
    let mut devices = Devices::default();
    let root_dev = std::fs::symlink_metadata(root).map_or(0, |meta| meta.dev());
    index
        .iter()
        .filter_map(|entry| {
            let path = entry.path.strip_prefix(root).ok()?.to_path_buf();
            let kind = match (entry.kind, entry.is_dir) {
                (Some(kind), _) => EntryKind::from(kind),
                (None, true) => EntryKind::Dir,
                (None, false) => EntryKind::File,
            };
            Some(RecordedEntry {
                path,
                kind,
                dev: entry.dev.map_or(root_dev, |dev| devices.raw(dev)),
                ino: entry.inode,
                size: entry.size,
                mtime: (
                    i64::try_from(entry.mtime_ns.div_euclid(1_000_000_000)).unwrap_or(0),
                    i64::try_from(entry.mtime_ns.rem_euclid(1_000_000_000)).unwrap_or(0),
                ),
                mode: entry.mode.unwrap_or(0),
                racy: entry.racy,
            })
        })
        .collect()
}

/// Names for devices that stay when a restore is mounted again: the kernel numbers a
/// restore's loop devices afresh at each mount (the layers of an overlay report their own
/// devices, and number their files each from 1), so a loop device is named by the archive
/// behind it; any other device by its number.
#[derive(Default)]
struct Devices {
    known: HashMap<u64, u64>,
    /// Each loop device's name and number now, read once (see [`Devices::raw`]).
    loops: Option<HashMap<u64, u64>>,
}

impl Devices {
    /// The loop devices' major number.
    const LOOP: u32 = 7;
    /// Set in a loop device's name, apart from device numbers.
    const NAMED: u64 = 1 << 63;

    fn id(&mut self, dev: u64) -> u64 {
        *self.known.entry(dev).or_insert_with(|| {
            let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
            if major != u64::from(Self::LOOP) {
                return dev;
            }
            Self::backing_file(major, minor).map_or(dev, |file| fnv1a(&file) | Self::NAMED)
        })
    }

    /// The number now of the device named `id`: a loop device's, by the archive behind it
    /// (unchanged when none is behind one now: then it names nothing here).
    fn raw(&mut self, id: u64) -> u64 {
        if id & Self::NAMED == 0 {
            return id;
        }
        let loops = self.loops.get_or_insert_with(|| {
            let mut loops = HashMap::new();
            let Ok(entries) = std::fs::read_dir("/sys/block") else {
                return loops;
            };
            for entry in entries.flatten() {
                let Ok(number) = std::fs::read_to_string(entry.path().join("dev")) else {
                    continue;
                };
                let Some((major, minor)) = number.trim().split_once(':') else {
                    continue;
                };
                let (Ok(major), Ok(minor)) = (major.parse::<u64>(), minor.parse::<u64>()) else {
                    continue;
                };
                if major != u64::from(Self::LOOP) {
                    continue;
                }
                if let Some(file) = Self::backing_file(major, minor) {
                    loops.insert(
                        fnv1a(&file) | Self::NAMED,
                        nix::sys::stat::makedev(major, minor),
                    );
                }
            }
            loops
        });
        loops.get(&id).copied().unwrap_or(id)
    }

    fn backing_file(major: u64, minor: u64) -> Option<Vec<u8>> {
        std::fs::read(format!("/sys/dev/block/{major}:{minor}/loop/backing_file")).ok()
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
            kind: Some(SavedKind::File),
            size,
            mtime_ns: 1,
            inode,
            dev: Some(1),
            mode: Some(0o644),
            racy: false,
        }
    }

    /// A record saved and loaded is the record: kinds, times (before 1970 too), modes and
    /// the racy mark kept, devices that are not loop devices by their numbers.
    #[test]
    fn a_record_is_saved_and_loaded_as_it_was() {
        let root = Path::new("/w");
        let recorded = vec![
            RecordedEntry {
                path: PathBuf::from("d"),
                kind: EntryKind::Dir,
                dev: 2049,
                ino: 10,
                size: 4096,
                mtime: (1_700_000_000, 5),
                mode: 0o755,
                racy: false,
            },
            RecordedEntry {
                path: PathBuf::from("d/l"),
                kind: EntryKind::Symlink,
                dev: 2049,
                ino: 11,
                size: 3,
                mtime: (-2, 999_999_999),
                mode: 0o777,
                racy: true,
            },
        ];
        let index = index(recorded.clone(), root);
        assert_eq!(index[1].path, PathBuf::from("/w/d/l"));
        assert!(index[0].is_dir && !index[1].is_dir);
        assert_eq!(super::recorded(&index, root), recorded);
    }

    /// An index an earlier daemon saved (no kind, no device, no mode) loads as a record
    /// that tells too much rather than too little; an entry outside the root is left out.
    #[test]
    fn an_older_index_loads_with_what_it_lacks_filled_in() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let old = IndexEntry {
            kind: None,
            dev: None,
            mode: None,
            ..entry(&root.join("f").display().to_string(), 7, 1)
        };
        let folder = IndexEntry {
            is_dir: true,
            ..old.clone()
        };
        let outside = entry("/elsewhere/f", 8, 1);
        let loaded = recorded(&[old, folder, outside], root);
        let root_dev = std::fs::metadata(root).unwrap().dev();
        assert_eq!(loaded.len(), 2);
        assert_eq!(
            (loaded[0].kind, loaded[0].dev, loaded[0].mode),
            (EntryKind::File, root_dev, 0)
        );
        assert_eq!(loaded[1].kind, EntryKind::Dir);
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
}
