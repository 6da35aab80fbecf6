//! The archives each test daemon writes in /var/backups, so that it leaves none of them
//! behind. The daemon writes every archive (and index, and download) under a scratch name
//! that carries its pid, then renames it into place: one inotify watch on the directory,
//! shared by the test process, pairs each rename's two halves and files the final name
//! under the writer's pid. [`crate::Daemon`] removes what its pids wrote when it is dropped.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

const ROOT: &str = "/var/backups";

/// Final names written by each daemon pid.
fn written() -> &'static Mutex<HashMap<u32, Vec<String>>> {
    static WRITTEN: OnceLock<Mutex<HashMap<u32, Vec<String>>>> = OnceLock::new();
    WRITTEN.get_or_init(|| {
        start();
        Mutex::default()
    })
}

/// Starts watching (once); without root, or without the directory, nothing is recorded.
pub fn watch() {
    let _ = written();
}

fn start() {
    if !crate::is_root() || std::fs::create_dir_all(ROOT).is_err() {
        return;
    }
    let Ok(inotify) = Inotify::init(InitFlags::IN_CLOEXEC) else {
        return;
    };
    if inotify
        .add_watch(
            ROOT,
            AddWatchFlags::IN_MOVED_FROM | AddWatchFlags::IN_MOVED_TO,
        )
        .is_err()
    {
        return;
    }
    std::thread::spawn(move || {
        // A rename's two halves share a cookie: the scratch name (with the pid) comes first.
        let mut moving: HashMap<u32, u32> = HashMap::new();
        while let Ok(events) = inotify.read_events() {
            for event in events {
                let name = event
                    .name
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if event.mask.contains(AddWatchFlags::IN_MOVED_FROM) {
                    if let Some(scratch) = fsd_api::scratch::parse(&name) {
                        moving.insert(event.cookie, scratch.pid);
                    }
                } else if let Some(pid) = moving.remove(&event.cookie)
                    && let Ok(mut written) = written().lock()
                {
                    written.entry(pid).or_default().push(name);
                }
            }
        }
    });
}

/// Removes what daemon `pid` wrote in /var/backups (and what is kept beside each archive).
pub fn remove_written_by(pid: u32) {
    let names = written()
        .lock()
        .ok()
        .and_then(|mut written| written.remove(&pid))
        .unwrap_or_default();
    for name in names {
        crate::remove_archive(format!("{ROOT}/{name}"));
    }
}
