//! The directories the daemon has put temp files in, so that a start after a crash can
//! remove what the crash left there.
//!
//! Atomic writes go through a temp file beside their target (`fsd_api::scratch`), in any
//! directory a caller names; a SIGKILL mid-write leaves it. Before the first temp file in a
//! directory, the directory is appended to `<state dir>/scratch-dirs` (NUL-separated, one
//! write per directory per run). At start the daemon empties those directories of scratch
//! files whose writer is gone, then clears the log.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fsd_api::scratch::{self, ScratchKind};

/// How many directories are remembered in memory as already logged; past it the set starts
/// over (a directory may then be logged twice, which costs one line).
const REMEMBERED_DIRS: usize = 100_000;

pub struct ScratchLog {
    path: Option<PathBuf>,
    state: Mutex<LogState>,
}

struct LogState {
    file: Option<File>,
    logged: HashSet<PathBuf>,
}

/// What a start-up sweep removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    pub dirs: usize,
    pub files: usize,
}

impl ScratchLog {
    /// A log at `path`, after removing what the last run's crash left in the directories
    /// it names. `None` keeps no log (tests of the file service alone).
    pub fn open(path: Option<PathBuf>) -> (Self, Swept) {
        let swept = path.as_deref().map(sweep).unwrap_or_default();
        let log = Self {
            path,
            state: Mutex::new(LogState {
                file: None,
                logged: HashSet::new(),
            }),
        };
        (log, swept)
    }

    /// Records that a temp file is about to be made in `dir`. A log that cannot be written
    /// does not stop the write (the temp file is still removed on every path but a crash).
    pub fn record(&self, dir: &Path) {
        let Some(path) = &self.path else {
            return;
        };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.logged.contains(dir) {
            return;
        }
        if state.file.is_none() {
            state.file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .inspect_err(|error| {
                    tracing::warn!(%error, log = %path.display(), "cannot keep the scratch log")
                })
                .ok();
        }
        let mut line = dir.as_os_str().as_bytes().to_vec();
        line.push(0);
        let written = state
            .file
            .as_mut()
            .is_some_and(|file| file.write_all(&line).is_ok());
        if written {
            if state.logged.len() >= REMEMBERED_DIRS {
                state.logged.clear();
            }
            state.logged.insert(dir.to_path_buf());
        }
    }
}

/// Removes, in every directory the log names, the atomic-write temp files whose writer is
/// gone; then clears the log.
fn sweep(log: &Path) -> Swept {
    let mut bytes = Vec::new();
    match File::open(log) {
        Ok(mut file) => {
            if file.read_to_end(&mut bytes).is_err() {
                return Swept::default();
            }
        }
        Err(_) => return Swept::default(),
    }
    let dirs: HashSet<PathBuf> = bytes
        .split(|&b| b == 0)
        .filter(|line| !line.is_empty())
        .map(|line| PathBuf::from(std::ffi::OsString::from_vec(line.to_vec())))
        .collect();
    let mut swept = Swept::default();
    for dir in &dirs {
        let removed = remove_orphans(dir);
        if removed > 0 {
            swept.dirs += 1;
            swept.files += removed;
        }
    }
    if let Err(error) = fs::remove_file(log)
        && error.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(%error, "cannot clear the scratch log");
    }
    swept
}

/// Removes the atomic-write temp files in `dir` whose writer is not running (or is this
/// process, which has written nothing yet: a daemon restarted under the same pid).
fn remove_orphans(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let own = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(found) = name.to_str().and_then(scratch::parse) else {
            continue;
        };
        if !matches!(found.kind, ScratchKind::New | ScratchKind::Replace) {
            continue;
        }
        let writer_gone = found.pid == own || !Path::new(&format!("/proc/{}", found.pid)).exists();
        if !writer_gone {
            continue;
        }
        // A new directory of an apply batch that never ended goes with what it holds.
        let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        let gone = match is_dir {
            true => fs::remove_dir_all(entry.path()),
            false => fs::remove_file(entry.path()),
        };
        if gone.is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_removes_what_a_crash_left_in_logged_directories() {
        let state = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let log_path = state.path().join("scratch-dirs");
        let (log, swept) = ScratchLog::open(Some(log_path.clone()));
        assert_eq!(swept, Swept::default());
        let dir = work.path().join("odd\nname");
        fs::create_dir(&dir).unwrap();
        log.record(&dir);
        log.record(&dir);
        drop(log);
        // What a crashed writer left (a pid that cannot be running), a live writer's file,
        // and user files that only look alike.
        let dead = ".a.txt.fsd-4194305-0.new.tmp";
        let live = format!(
            ".b.txt.fsd-{}-1.rpl.tmp",
            std::os::unix::process::parent_id()
        );
        for name in [
            dead,
            &live,
            "a.txt",
            ".a.txt.tmp",
            ".c.fsd-4194305-0.part.tmp",
        ] {
            fs::write(dir.join(name), "x").unwrap();
        }
        // A new directory of an apply batch that never ended, with what it held.
        let staged = dir.join(".new.fsd-4194305-2.new.tmp");
        fs::create_dir_all(staged.join("sub")).unwrap();
        fs::write(staged.join("sub/f"), "x").unwrap();
        let (_log, swept) = ScratchLog::open(Some(log_path.clone()));
        assert_eq!(swept, Swept { dirs: 1, files: 2 });
        let mut left: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [".a.txt.tmp", &live, ".c.fsd-4194305-0.part.tmp", "a.txt"]
        );
        assert!(!log_path.exists(), "the log is cleared after the sweep");
    }
}
