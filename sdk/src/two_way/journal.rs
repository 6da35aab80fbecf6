//! What a two-way sync keeps between passes, beside the local tree: a base written whole
//! now and then (`state.json`) and a log of what each pass changed since (`state.log`, one
//! JSON line a pass), so a pass over a large tree that changed a few paths writes a few
//! lines, not the tree.
//!
//! A base and the log lines written after it share a generation; lines of another (a log
//! left by a crash between the two writes) are not read. A line cut short by a crash ends
//! the log: that pass's changes are made again by the next, and the same change found on
//! both sides is no conflict.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::SdkError;
use crate::merge::{Entries, Entry};
use crate::scan::{ScanCache, Seen};

pub(super) const BASE_FILE: &str = "state.json";
/// The base's scan records, in a file of their own, read beside the rest on a second
/// thread: as long as the ancestor, they were half of what a pass waited to read.
pub(super) const CACHE_FILE: &str = "cache.json";
pub(super) const LOG_FILE: &str = "state.log";
pub(super) const HEAD_FILE: &str = "head.json";
/// The log is folded into a new base once it is this long and an eighth of the base's
/// size: each pass reads both, and a line, replayed path by path, reads several times
/// slower than the base, so a long log cost a pass over a large tree more than the fold.
const LOG_FOLD_BYTES: u64 = 64 << 10;

/// A conflict kept for `fsctl sync --conflicts`: both versions are there to look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenConflict {
    pub path: String,
    /// Where the other version is, on both sides.
    pub aside: String,
    /// Which side's version stayed at the path (`local` or `remote`).
    pub kept: String,
    /// When it was found (RFC 3339).
    pub found: String,
    /// Whether the copy set aside has been seen made (it is open until then, and then
    /// until it is removed). Records of earlier versions were kept only once made.
    #[serde(default = "made_before")]
    pub made: bool,
}

fn made_before() -> bool {
    true
}

/// The state: what both sides last agreed on and what the next scan may trust.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct State {
    /// The sandbox directory this local directory is synced with.
    pub remote: String,
    #[serde(deserialize_with = "crate::kept::sorted_map")]
    pub ancestor: Entries,
    #[serde(default)]
    pub conflicts: Vec<OpenConflict>,
    /// The local scan's records (size, mtime, inode, hash) by path. A base keeps them in
    /// [`CACHE_FILE`]; one an earlier version wrote holds them here.
    #[serde(
        default,
        deserialize_with = "crate::kept::sorted_map",
        skip_serializing
    )]
    pub cache: ScanCache,
    /// The base's generation (see [`Journal`]); only the base's own is read.
    #[serde(default)]
    pub generation: u64,
    /// Where the last pass left the sandbox's change list, so that a pass in a new process
    /// reads only what changed there since (none: the sandbox's side is read whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracked: Option<Tracked>,
}

impl State {
    /// Rebuilds the ancestor and the records in fresh allocations and full nodes. A whole
    /// pass builds them entry by entry among its own trees (half-full nodes, the scan's
    /// and the sandbox's listings in between); once those are freed, a sync kept open
    /// would hold their holes for as long as it runs: 75 MB for 50,000 files, 57 compacted.
    pub fn compact(&mut self) {
        fn copied<V: Clone>(map: &BTreeMap<String, V>) -> BTreeMap<String, V> {
            // A sorted collect builds full nodes (inserting one by one leaves them half full).
            map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        }
        self.ancestor = copied(&self.ancestor);
        self.cache = copied(&self.cache);
    }
}

/// The sandbox's change token after a pass, kept with the ancestor it goes with (one
/// journal line: a crash keeps both old or both new). Outside `dirty`, both sides held the
/// ancestor when the token was taken, as far as the pass could tell: the next pass takes
/// the sandbox's side as the ancestor and reads again only what changed since the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    pub version: String,
    /// Paths the next pass reads again on both sides: a change not made, a path each side
    /// left different, and what the pass wrote (an event for it may be missed).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub dirty: BTreeSet<String>,
    /// The exclude lines the sandbox's side was read with: other lines read it whole.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// The local watcher's token taken before the local side was read (see
    /// [`super::LocalSince`]); none: the next pass walks the local tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
}

/// [`CACHE_FILE`]: the scan records of the base of one generation (those of another are
/// not read: a crash between the two files' writes leaves records no base has).
#[derive(Deserialize)]
struct Records {
    generation: u64,
    #[serde(deserialize_with = "crate::kept::sorted_map")]
    cache: ScanCache,
}

#[derive(Serialize)]
struct RecordsRef<'a> {
    generation: u64,
    cache: &'a ScanCache,
}

/// The base as written: the state but for its records, of `generation`.
#[derive(Serialize)]
struct BaseRef<'a> {
    remote: &'a str,
    ancestor: &'a Entries,
    conflicts: &'a [OpenConflict],
    generation: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracked: &'a Option<Tracked>,
}

/// One pass's changes to the state.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    generation: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    remote: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    ancestor: BTreeMap<String, Option<Entry>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    cache: BTreeMap<String, Option<Seen>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conflicts: Option<Vec<OpenConflict>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracked: Option<Tracked>,
}

impl Record {
    fn is_empty(&self) -> bool {
        self.remote.is_none()
            && self.ancestor.is_empty()
            && self.cache.is_empty()
            && self.conflicts.is_none()
            && self.tracked.is_none()
    }
}

/// The state's files for one local directory.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    /// The base's generation, which the lines written after it carry.
    generation: u64,
    base_bytes: u64,
    log_bytes: u64,
    /// The head last read or written.
    head: Option<Head>,
}

/// What a pass that finds nothing changed on either side needs of the state, so that it
/// reads no more (`head.json`, written after the state): the tokens the last pass
/// journaled and whether it left anything for the next. It holds only while the base and
/// the log are the files it was written after (a pass cut short between the two writes
/// leaves a head that no longer matches them, and is not taken).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    base: FileMark,
    log_bytes: u64,
    pub tracked: Tracked,
    /// No path to read again, no conflict open.
    pub clean: bool,
}

/// Which version of a file: replaced or written, it differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct FileMark {
    size: u64,
    ino: u64,
    mtime_ns: i128,
}

impl FileMark {
    fn of(path: &Path) -> Option<FileMark> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileMark {
            size: meta.len(),
            ino: meta.ino(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        })
    }
}

impl Head {
    /// The head kept in `dir`, if it matches the state's files there.
    pub fn read(dir: &Path) -> Option<Head> {
        let head: Head = serde_json::from_slice(&std::fs::read(dir.join(HEAD_FILE)).ok()?).ok()?;
        let log_bytes = std::fs::metadata(dir.join(LOG_FILE)).map_or(0, |meta| meta.len());
        (FileMark::of(&dir.join(BASE_FILE)) == Some(head.base) && log_bytes == head.log_bytes)
            .then_some(head)
    }
}

impl Journal {
    /// Reads the state kept in `dir` (none yet: an empty one).
    pub fn read(dir: &Path) -> Result<(State, Journal), SdkError> {
        let dir = dir.to_path_buf();
        let base_path = dir.join(BASE_FILE);
        // The records on a thread of their own, beside the rest.
        let (base, records) = std::thread::scope(|scope| {
            let records = scope.spawn(|| {
                let bytes = std::fs::read(dir.join(CACHE_FILE)).ok()?;
                let records = serde_json::from_slice::<Records>(&bytes).ok()?;
                Some((records, bytes.len() as u64))
            });
            let base = std::fs::read(&base_path);
            let base = base.map(|bytes| {
                let state = serde_json::from_slice::<State>(&bytes);
                (state, bytes.len() as u64)
            });
            (base, records.join().ok().flatten())
        });
        let (mut state, mut base_bytes) = match base {
            Ok((state, bytes)) => (
                state
                    .map_err(|err| SdkError::invalid(format!("{}: {err}", base_path.display())))?,
                bytes,
            ),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => (State::default(), 0),
            Err(err) => return Err(err.into()),
        };
        // Records that are not of the base's generation are not read (a record trusted
        // wrongly would hide a change): the files they describe are hashed again.
        if let Some((records, bytes)) = records
            && records.generation == state.generation
            && base_bytes > 0
        {
            state.cache = records.cache;
            base_bytes += bytes;
        }
        let log_path = dir.join(LOG_FILE);
        let log_bytes = match std::fs::read(&log_path) {
            Ok(bytes) => {
                let mut whole = 0;
                for line in bytes.split_inclusive(|byte| *byte == b'\n') {
                    // A line cut short by a crash ends what was written.
                    let Some(json) = line.strip_suffix(b"\n") else {
                        break;
                    };
                    let Ok(record) = serde_json::from_slice::<Record>(json) else {
                        break;
                    };
                    if record.generation == state.generation {
                        replay(&mut state, record);
                    }
                    whole += line.len();
                }
                // Lines written next follow the last whole one.
                if whole < bytes.len() {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&log_path)?
                        .set_len(whole as u64)?;
                }
                whole as u64
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => 0,
            Err(err) => return Err(err.into()),
        };
        let generation = state.generation;
        let head = Head::read(&dir);
        Ok((
            state,
            Journal {
                dir,
                generation,
                base_bytes,
                log_bytes,
                head,
            },
        ))
    }

    /// Writes the head of `state` (the state as these files now hold it), unless it is
    /// the one there.
    fn keep_head(&mut self, state: &State) -> Result<(), SdkError> {
        let Some(tracked) = &state.tracked else {
            return Ok(());
        };
        let Some(base) = FileMark::of(&self.dir.join(BASE_FILE)) else {
            return Ok(());
        };
        let head = Head {
            base,
            log_bytes: self.log_bytes,
            tracked: tracked.clone(),
            clean: tracked.dirty.is_empty() && state.conflicts.is_empty(),
        };
        if self.head.as_ref() == Some(&head) {
            return Ok(());
        }
        let bytes = serde_json::to_vec(&head).map_err(std::io::Error::other)?;
        let temp = self.dir.join(format!("{HEAD_FILE}.tmp"));
        std::fs::write(&temp, bytes)?;
        std::fs::rename(&temp, self.dir.join(HEAD_FILE))?;
        self.head = Some(head);
        Ok(())
    }

    /// Keeps `new` in place of `old`. `touched`: the only paths whose ancestor entries
    /// and scan records may differ (`None`: any may).
    pub fn save(
        &mut self,
        old: &State,
        new: &State,
        touched: Option<&BTreeSet<String>>,
    ) -> Result<(), SdkError> {
        // No base yet (a first sync): the state is written whole, with no record of what
        // changed (20,000 entries compared and written as a record only to be dropped).
        if self.base_bytes == 0 {
            return self.fold(new);
        }
        let record = Record {
            generation: self.generation,
            remote: (old.remote != new.remote).then(|| new.remote.clone()),
            ancestor: diff(&old.ancestor, &new.ancestor, touched),
            cache: diff(&old.cache, &new.cache, touched),
            conflicts: (old.conflicts != new.conflicts).then(|| new.conflicts.clone()),
            // Once kept, a token is only ever replaced by a newer one.
            tracked: new.tracked.clone().filter(|_| old.tracked != new.tracked),
        };
        if record.is_empty() {
            return self.keep_head(new);
        }
        let line = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        let fold = self.log_bytes + line.len() as u64 > LOG_FOLD_BYTES.max(self.base_bytes / 8);
        if !fold {
            let mut log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join(LOG_FILE))?;
            let mut bytes = line;
            bytes.push(b'\n');
            log.write_all(&bytes)?;
            self.log_bytes += bytes.len() as u64;
            return self.keep_head(new);
        }
        self.fold(new)
    }

    /// Writes `new` as a new base and drops the log.
    fn fold(&mut self, new: &State) -> Result<(), SdkError> {
        // A new base, of the next generation: the log's lines are of the last. Its
        // records first: until the base is in place, they are of a generation no base has.
        let generation = self.generation + 1;
        let records = serde_json::to_vec(&RecordsRef {
            generation,
            cache: &new.cache,
        })
        .map_err(std::io::Error::other)?;
        let base = serde_json::to_vec(&BaseRef {
            remote: &new.remote,
            ancestor: &new.ancestor,
            conflicts: &new.conflicts,
            generation,
            tracked: &new.tracked,
        })
        .map_err(std::io::Error::other)?;
        for (file, bytes) in [(CACHE_FILE, &records), (BASE_FILE, &base)] {
            let temp = self.dir.join(format!("{file}.tmp"));
            std::fs::write(&temp, bytes)?;
            std::fs::rename(&temp, self.dir.join(file))?;
        }
        match std::fs::remove_file(self.dir.join(LOG_FILE)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err.into()),
            _ => {}
        }
        self.generation = generation;
        self.base_bytes = (base.len() + records.len()) as u64;
        self.log_bytes = 0;
        self.keep_head(new)
    }
}

/// What `new` holds otherwise than `old`, among `touched` paths (all of them: `None`).
fn diff<T: Clone + PartialEq>(
    old: &BTreeMap<String, T>,
    new: &BTreeMap<String, T>,
    touched: Option<&BTreeSet<String>>,
) -> BTreeMap<String, Option<T>> {
    let mut out = BTreeMap::new();
    let mut compare = |path: &String| {
        let (was, now) = (old.get(path), new.get(path));
        if was != now {
            out.insert(path.clone(), now.cloned());
        }
    };
    match touched {
        Some(paths) => paths.iter().for_each(&mut compare),
        None => {
            old.keys().for_each(&mut compare);
            new.keys()
                .filter(|path| !old.contains_key(*path))
                .for_each(&mut compare);
        }
    }
    out
}

fn replay(state: &mut State, record: Record) {
    if let Some(remote) = record.remote {
        state.remote = remote;
    }
    for (path, entry) in record.ancestor {
        match entry {
            Some(entry) => state.ancestor.insert(path, entry),
            None => state.ancestor.remove(&path),
        };
    }
    for (path, seen) in record.cache {
        match seen {
            Some(seen) => state.cache.insert(path, seen),
            None => state.cache.remove(&path),
        };
    }
    if let Some(conflicts) = record.conflicts {
        state.conflicts = conflicts;
    }
    if let Some(tracked) = record.tracked {
        state.tracked = Some(tracked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::two_way::sample::file;

    fn state_with(entries: &[(&str, &str)]) -> State {
        State {
            remote: "project".into(),
            ancestor: entries
                .iter()
                .map(|(path, hash)| (path.to_string(), file(hash)))
                .collect(),
            ..State::default()
        }
    }

    #[test]
    fn passes_are_lines_after_a_base_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (empty, mut journal) = Journal::read(dir.path()).unwrap();
        let first = state_with(&[("a", "1"), ("b", "2")]);
        journal.save(&empty, &first, None).unwrap();
        assert!(dir.path().join(BASE_FILE).exists());
        // Two small passes: lines, not a new base.
        let second = state_with(&[("a", "1"), ("b", "3"), ("c", "4")]);
        let touched = BTreeSet::from(["b".to_string(), "c".to_string()]);
        journal.save(&first, &second, Some(&touched)).unwrap();
        let third = state_with(&[("b", "3"), ("c", "4")]);
        journal
            .save(&second, &third, Some(&BTreeSet::from(["a".to_string()])))
            .unwrap();
        let log = std::fs::read_to_string(dir.path().join(LOG_FILE)).unwrap();
        assert_eq!(log.lines().count(), 2);
        let (read, _) = Journal::read(dir.path()).unwrap();
        assert_eq!(read.ancestor, third.ancestor);
        // A pass that changed nothing writes nothing.
        journal.save(&third, &third, None).unwrap();
        let again = std::fs::read_to_string(dir.path().join(LOG_FILE)).unwrap();
        assert_eq!(again, log);
    }

    fn seen(hash: &str) -> Seen {
        Seen {
            size: 1,
            mtime_ns: 2,
            ino: 3,
            hash: crate::content_hash::ContentHash::of(hash.as_bytes()),
        }
    }

    /// The records live beside the base, of its generation only; a base an earlier
    /// version wrote with its records inside is read with them.
    #[test]
    fn records_are_read_with_the_base_of_their_generation_only() {
        let dir = tempfile::tempdir().unwrap();
        let (empty, mut journal) = Journal::read(dir.path()).unwrap();
        let mut first = state_with(&[("a", "1")]);
        first.cache.insert("a".into(), seen("1"));
        journal.save(&empty, &first, None).unwrap();
        assert!(dir.path().join(CACHE_FILE).exists());
        let base = std::fs::read_to_string(dir.path().join(BASE_FILE)).unwrap();
        assert!(!base.contains("cache"), "{base}");
        let (read, _) = Journal::read(dir.path()).unwrap();
        assert_eq!(read.cache, first.cache);
        // A crash between the records' write and the base's: records of the next
        // generation beside this base are not taken.
        let records = std::fs::read_to_string(dir.path().join(CACHE_FILE)).unwrap();
        let next = records.replace(
            &format!("\"generation\":{}", read.generation),
            &format!("\"generation\":{}", read.generation + 1),
        );
        assert_ne!(next, records);
        std::fs::write(dir.path().join(CACHE_FILE), next).unwrap();
        let (read, _) = Journal::read(dir.path()).unwrap();
        assert!(read.cache.is_empty());
        assert_eq!(read.ancestor, first.ancestor);
        // An earlier version's base, its records inside.
        std::fs::remove_file(dir.path().join(CACHE_FILE)).unwrap();
        let old = base.replacen(
            "{",
            &format!(
                "{{\"cache\":{},",
                serde_json::to_string(&first.cache).unwrap()
            ),
            1,
        );
        std::fs::write(dir.path().join(BASE_FILE), old).unwrap();
        let (read, _) = Journal::read(dir.path()).unwrap();
        assert_eq!(read.cache, first.cache);
    }

    #[test]
    fn a_line_cut_short_ends_the_log_and_later_lines_follow_the_last_whole_one() {
        let dir = tempfile::tempdir().unwrap();
        let (empty, mut journal) = Journal::read(dir.path()).unwrap();
        let first = state_with(&[("a", "1")]);
        journal.save(&empty, &first, None).unwrap();
        let second = state_with(&[("a", "2")]);
        journal.save(&first, &second, None).unwrap();
        // A crash in the middle of the next line.
        let log_path = dir.path().join(LOG_FILE);
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(&log_path)
            .unwrap();
        log.write_all(br#"{"generation":0,"ancestor":{"a":{"ki"#)
            .unwrap();
        let (read, mut journal) = Journal::read(dir.path()).unwrap();
        assert_eq!(read.ancestor, second.ancestor, "the torn pass is not taken");
        let third = state_with(&[("a", "3")]);
        journal.save(&read, &third, None).unwrap();
        let (read, _) = Journal::read(dir.path()).unwrap();
        assert_eq!(
            read.ancestor, third.ancestor,
            "a pass after the tear is read"
        );
    }

    #[test]
    fn a_log_left_by_a_crash_during_a_fold_is_not_read_over_the_new_base() {
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().to_path_buf();
        let (empty, mut journal) = Journal::read(dir.path()).unwrap();
        let first = state_with(&[("a", "1")]);
        journal.save(&empty, &first, None).unwrap();
        let second = state_with(&[("a", "2")]);
        journal.save(&first, &second, None).unwrap();
        let stale_log = std::fs::read(state_dir.join(LOG_FILE)).unwrap();
        // A fold: a base of the next generation; then the old log put back, as a crash
        // between the base's rename and the log's removal leaves it.
        journal.base_bytes = 1;
        journal.log_bytes = LOG_FOLD_BYTES;
        let third = state_with(&[("a", "3")]);
        journal.save(&second, &third, None).unwrap();
        std::fs::write(state_dir.join(LOG_FILE), stale_log).unwrap();
        let (read, _) = Journal::read(dir.path()).unwrap();
        assert_eq!(read.ancestor, third.ancestor);
    }
}
