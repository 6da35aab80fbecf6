//! Processes that hold something under a directory (their working directory, their root,
//! an open file): what a fork or a discard must refuse, since whatever they hold would be
//! written beneath the new mounts; and what a restore leaves behind, since a mount on a
//! directory hides the directory they stand in without moving them.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fsd_api::backup::ProcessLeftBehind;

/// The first process holding something under `dir`, or a `--confine` root at or beneath it
/// (the daemon's own handle on it would reach beneath a fork's mount).
pub fn holder(dir: &Path, roots: &[PathBuf]) -> Option<(u32, String)> {
    if let Some(root) = roots.iter().find(|root| root.starts_with(dir)) {
        return Some((
            std::process::id(),
            format!("--confine root {}", root.display()),
        ));
    }
    let mut first = None;
    each_holder(dir, |pid, holds, _| {
        first = Some((pid, holds));
        false
    });
    first
}

/// The processes a restore on `dir` leaves in the directory it hides, or a release in the
/// restore it takes away (`on`: the restore's filesystem, so that those in the directory
/// the release shows again are not named): every holder but the daemon's own processes
/// (itself, its spawner and supervisors: the same program) and the programs that follow
/// their directory by name (a session's shell, a code context's interpreter: the children
/// of the supervisors in `following`).
pub fn left_behind(
    dir: &Path,
    on: Option<u64>,
    following: &HashSet<u32>,
) -> Vec<ProcessLeftBehind> {
    let program = |pid: u32| {
        std::fs::metadata(format!("/proc/{pid}/exe"))
            .ok()
            .map(|m| (m.dev(), m.ino()))
    };
    let own = program(std::process::id());
    let mut found = Vec::new();
    each_holder(dir, |pid, holds, link| {
        let follows = parent(pid).is_some_and(|parent| following.contains(&parent));
        let there = on.is_none_or(|dev| std::fs::metadata(link).is_ok_and(|m| m.dev() == dev));
        if there && !follows && (own.is_none() || program(pid) != own) {
            found.push(ProcessLeftBehind {
                pid: fsd_process::proctree::innermost_pid(pid).unwrap_or(pid),
                command: command_line(pid),
                holds,
            });
        }
        true
    });
    found
}

/// Logs the processes left in `place` on `dir`, if any.
pub fn warn(left_behind: &[ProcessLeftBehind], dir: &Path, place: &str) {
    if !left_behind.is_empty() {
        tracing::warn!(
            dir = %dir.display(),
            processes = ?left_behind.iter().map(|p| p.pid).collect::<Vec<_>>(),
            "processes left in {place}: they do not see what the directory shows"
        );
    }
}

/// Calls `found` with each process holding something under `dir`, what it holds and the
/// `/proc` link to it, until it answers false.
fn each_holder(dir: &Path, mut found: impl FnMut(u32, String, &Path) -> bool) {
    let under = |link: &Path| -> Option<PathBuf> {
        let target = std::fs::read_link(link).ok()?;
        target.starts_with(dir).then_some(target)
    };
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return;
    };
    for process in processes.flatten() {
        let Some(pid) = process
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let proc_dir = process.path();
        let (cwd, root) = (proc_dir.join("cwd"), proc_dir.join("root"));
        let held = if under(&cwd).is_some() {
            Some(("its working directory".to_string(), cwd))
        } else if under(&root).is_some() {
            Some(("its root".to_string(), root))
        } else {
            std::fs::read_dir(proc_dir.join("fd"))
                .into_iter()
                .flatten()
                .flatten()
                .find_map(|fd| {
                    let link = fd.path();
                    let target = under(&link)?;
                    // A file deleted since it was opened is in no tree: what is done
                    // through it reaches no branch (the daemon holds replaced files a
                    // moment, see `atomic`).
                    let deleted = target
                        .as_os_str()
                        .as_encoded_bytes()
                        .ends_with(b" (deleted)");
                    (!deleted).then(|| (format!("an open file, {}", target.display()), link))
                })
        };
        if let Some((holds, link)) = held
            && !found(pid, holds, &link)
        {
            return;
        }
    }
}

/// A process's parent, from `/proc/<pid>/stat` (after the command's closing parenthesis,
/// which the command itself may contain).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// A process's command line, its arguments joined by spaces, cut at 200 characters.
fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let line = raw
        .split(|b| *b == 0)
        .filter(|arg| !arg.is_empty())
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join(" ");
    line.chars().take(200).collect()
}
