//! Two-way sync against the real daemon: each conflict class and mode through `fsctl sync
//! --two-way`, an edit made while the sync changes the same file, and a seeded two-sided
//! property test (both sides edited at random, some edits made while a pass runs, the
//! daemon restarted and crashed, the sync reopened) after which both trees are equal and
//! every edit is on both sides, run twice per seed: with passes as single `fsctl sync
//! --two-way` runs make them (the sandbox's side from the token the last pass journaled,
//! the local side walked by stat against the records), and with the sync kept open
//! reading only what changed (the same token, the local side's fsd-watch engine), as
//! `--follow` does. `FSD_TWO_WAY_SEED` replays one seed.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use fsctl::local_watch::Watched;
use fsctl::pair_watch::PairWatcher;
use fsd_sdk::merge::Mode;
use fsd_sdk::two_way::{TwoWay, TwoWayOptions};
use fsd_tests::{Daemon, binary};

use crate::sync::workload::Rng;

/// Relative path → (kind, content or target, mode), links never followed (the sync keeps
/// nothing of its own in the tree).
pub(crate) fn tree(root: &Path) -> BTreeMap<String, (char, String, u32)> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let mode = meta.permissions().mode() & 0o7777;
            let entry = if meta.file_type().is_symlink() {
                // Read while a pass changes the tree (edits made during one pick their
                // paths here): a link gone since its stat is not there.
                let Ok(target) = std::fs::read_link(&path) else {
                    continue;
                };
                ('l', target.display().to_string(), 0)
            } else if meta.is_dir() {
                pending.push(path);
                ('d', String::new(), mode)
            } else {
                let content = std::fs::read(&path).unwrap_or_default();
                ('f', String::from_utf8_lossy(&content).into_owned(), mode)
            };
            out.insert(relative, entry);
        }
    }
    out
}

/// Where the tests' syncs of `local` keep their state: beside it, in the test's own
/// temporary directory.
pub(crate) fn state_root(local: &Path) -> PathBuf {
    local.parent().unwrap().join("sync-state")
}

/// `fsctl sync ARGS` for the local directory `local` (its state kept by `state_root`).
fn fsctl(daemon: &Daemon, local: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(binary("fsctl"))
        .args(["--url", &daemon.url(""), "sync"])
        .args(args)
        .env("FSD_SYNC_STATE_DIR", state_root(local))
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// A daemon, its workspace directory `project` (the remote side) and a local directory.
struct Pair {
    daemon: Daemon,
    local_dir: tempfile::TempDir,
}

impl Pair {
    fn new() -> Self {
        let daemon = Daemon::start();
        std::fs::create_dir_all(daemon.path("project")).unwrap();
        Self {
            daemon,
            local_dir: tempfile::tempdir().unwrap(),
        }
    }

    fn local(&self, relative: &str) -> PathBuf {
        self.local_dir.path().join("work").join(relative)
    }

    fn remote(&self, relative: &str) -> PathBuf {
        self.daemon.path("project").join(relative)
    }

    /// `fsctl sync --two-way project LOCAL` with `more` flags.
    fn sync(&self, more: &[&str]) -> (i32, String, String) {
        let local = self.local("");
        let mut args = vec!["--two-way", "project", local.to_str().unwrap()];
        args.extend_from_slice(more);
        fsctl(&self.daemon, &local, &args)
    }

    fn assert_equal(&self, when: &str) {
        let (local, remote) = (tree(&self.local("")), tree(&self.remote("")));
        assert_eq!(local, remote, "{when}: the two sides differ");
    }
}

#[test]
fn each_change_and_conflict_class_is_carried_or_kept_and_listed() {
    let pair = Pair::new();
    // A first sync of a remote tree with links, modes and an empty directory into an
    // empty local directory, and of a local file the other way.
    write(&pair.remote("src/main.rs"), "fn main() {}\n");
    write(&pair.remote("run.sh"), "#!/bin/sh\n");
    std::fs::set_permissions(
        pair.remote("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir_all(pair.remote("empty")).unwrap();
    std::os::unix::fs::symlink("src/main.rs", pair.remote("main-link")).unwrap();
    write(&pair.remote("node_modules/x/index.js"), "left out\n");
    write(&pair.local("notes.md"), "local notes\n");
    let (code, out, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("leaving out .git, node_modules"), "{err}");
    assert!(!pair.local("node_modules").exists(), "default excludes");
    std::fs::remove_dir_all(pair.remote("node_modules")).unwrap();
    pair.assert_equal("after the first sync");
    assert_eq!(read(&pair.remote("notes.md")), "local notes\n");
    assert_eq!(
        std::fs::read_link(pair.local("main-link")).unwrap(),
        Path::new("src/main.rs"),
        "a link as a link"
    );

    // One side's change goes to the other: content, mode, a move of a directory (carried as
    // a move), a delete.
    write(&pair.local("src/main.rs"), "fn main() { run() }\n");
    std::fs::set_permissions(
        pair.remote("run.sh"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    std::fs::rename(pair.remote("src"), pair.remote("lib")).unwrap();
    let (code, out, err) = pair.sync(&["--json"]);
    assert_eq!(code, 0, "{out}{err}");
    // The local edit inside src and the remote move of src: the edit comes back at src
    // (a delete loses to a change) and lib has the old content.
    let report: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(
        report["toRemote"]["files"], 1,
        "src/main.rs restored: {report}"
    );
    pair.assert_equal("after changes on both sides");
    assert_eq!(
        std::fs::symlink_metadata(pair.local("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    assert_eq!(read(&pair.local("src/main.rs")), "fn main() { run() }\n");
    assert_eq!(read(&pair.local("lib/main.rs")), "fn main() {}\n");
    // A directory moved on one side is moved on the other, not sent again.
    std::fs::rename(pair.remote("lib"), pair.remote("empty/lib")).unwrap();
    let (code, out, err) = pair.sync(&["--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(report["toLocal"]["renames"], 1, "{report}");
    assert_eq!(report["toLocal"]["files"], 0, "{report}");
    pair.assert_equal("after a move");
    std::fs::remove_dir_all(pair.local("empty/lib")).unwrap();
    std::fs::remove_file(pair.local("main-link")).unwrap();
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(!pair.remote("empty/lib").exists() && !pair.remote("main-link").exists());
    pair.assert_equal("after deletes");

    // The same change on both sides is no conflict.
    write(&pair.local("same.txt"), "same\n");
    write(&pair.remote("same.txt"), "same\n");
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("conflict"), "{err}");

    // A side that only deleted loses to a side that changed.
    std::fs::remove_file(pair.local("notes.md")).unwrap();
    write(&pair.remote("notes.md"), "remote notes\n");
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(read(&pair.local("notes.md")), "remote notes\n");

    // Both changed a file differently: two-way-safe keeps both, reports and lists it.
    write(&pair.local("notes.md"), "local edit\n");
    write(&pair.remote("notes.md"), "remote edit\n");
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 3, "a conflict kept for a person: {err}");
    assert!(err.contains("conflict: both changed notes.md"), "{err}");
    let aside = "notes.md.sync-conflict-remote";
    for side in [pair.local(""), pair.remote("")] {
        assert_eq!(read(&side.join("notes.md")), "local edit\n");
        assert_eq!(read(&side.join(aside)), "remote edit\n");
    }
    let local = pair.local("");
    let (code, out, _) = fsctl(
        &pair.daemon,
        &local,
        &["--conflicts", local.to_str().unwrap()],
    );
    assert_eq!(code, 0);
    assert!(out.contains("notes.md") && out.contains(aside), "{out}");
    // It says how a conflict is resolved (it did not).
    let (_, _, err) = fsctl(
        &pair.daemon,
        &local,
        &["--conflicts", local.to_str().unwrap()],
    );
    assert!(
        err.contains("to resolve one:") && err.contains("remove the copy"),
        "{err}"
    );
    // Removing the copy set aside resolves it (and the removal is synced).
    std::fs::remove_file(pair.local(aside)).unwrap();
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(!pair.remote(aside).exists());
    let (_, out, _) = fsctl(
        &pair.daemon,
        &local,
        &["--conflicts", local.to_str().unwrap()],
    );
    assert!(out.contains("no open conflicts"), "{out}");

    // A file one side changed, which the other replaced with a directory: the directory
    // keeps the path, the file goes beside it.
    write(&pair.local("same.txt"), "changed\n");
    std::fs::remove_file(pair.remote("same.txt")).unwrap();
    write(&pair.remote("same.txt/inside"), "in a directory\n");
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(read(&pair.local("same.txt/inside")), "in a directory\n");
    assert_eq!(
        read(&pair.remote("same.txt.sync-conflict-local")),
        "changed\n"
    );
    pair.assert_equal("after a type conflict");

    // two-way-resolved: the local version wins, reported.
    write(&pair.local("notes.md"), "local wins\n");
    write(&pair.remote("notes.md"), "remote loses\n");
    let (code, _, err) = pair.sync(&["--mode", "two-way-resolved"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("the local version won"), "{err}");
    assert_eq!(read(&pair.remote("notes.md")), "local wins\n");

    // one-way-safe: local changes go, the sandbox's own change stays, its deletion is
    // restored.
    write(&pair.local("notes.md"), "pushed\n");
    write(&pair.remote("own.txt"), "sandbox's own\n");
    std::fs::remove_file(pair.remote("run.sh")).unwrap();
    let (code, _, err) = pair.sync(&["--mode", "one-way-safe"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(read(&pair.remote("notes.md")), "pushed\n");
    assert_eq!(read(&pair.remote("own.txt")), "sandbox's own\n");
    assert!(!pair.local("own.txt").exists());
    assert!(
        pair.remote("run.sh").exists(),
        "a deletion in the sandbox restored"
    );

    // one-way-replica: the sandbox becomes what the local side holds.
    let (code, _, err) = pair.sync(&["--mode", "one-way-replica"]);
    assert_eq!(code, 0, "{err}");
    assert!(!pair.remote("own.txt").exists());
    pair.assert_equal("after a replica pass");

    // Refusals: a bad pattern, a mode that is not one.
    let (code, _, err) = pair.sync(&["--exclude", "[z-a]"]);
    assert_ne!(code, 0);
    assert!(err.contains("exclude"), "{err}");
    let (code, _, err) = pair.sync(&["--mode", "three-way"]);
    assert_ne!(code, 0);
    assert!(err.contains("unknown mode"), "{err}");
    // The same directory synced with another sandbox directory is another pair, with a
    // state of its own: its first pass infers no deletion.
    std::fs::create_dir_all(pair.daemon.path("other")).unwrap();
    let local = pair.local("");
    let before = tree(&local);
    let (code, _, err) = fsctl(
        &pair.daemon,
        &local,
        &["--two-way", "other", local.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(tree(&pair.daemon.path("other")), before);
    assert_eq!(tree(&local), before);
}

const NAMES: &[&str] = &["a", "b", "c.txt", "d"];

/// A random existing path under `root` (files, links and directories), or `None`.
fn pick(rng: &mut Rng, root: &Path) -> Option<String> {
    let paths: Vec<String> = tree(root).into_keys().collect();
    (!paths.is_empty()).then(|| paths[rng.below(paths.len())].clone())
}

fn random_path(rng: &mut Rng, root: &Path) -> String {
    let dirs: Vec<String> = std::iter::once(String::new())
        .chain(
            tree(root)
                .into_iter()
                .filter(|(_, (kind, _, _))| *kind == 'd')
                .map(|(path, _)| path),
        )
        .collect();
    let dir = &dirs[rng.below(dirs.len())];
    let name = NAMES[rng.below(NAMES.len())];
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// One random edit of the tree at `root` by `side`; a content written is unique
/// (`<side><n>`) and returned.
pub(crate) fn edit(rng: &mut Rng, root: &Path, side: char, n: &mut u64) -> Option<String> {
    *n += 1;
    let token = format!("{side}{n}\n");
    let remove = |path: &Path| {
        let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir_all(path));
    };
    match rng.below(11) {
        10 => {
            // A file and a directory swapped through a temporary name.
            let (a, b) = (pick(rng, root)?, pick(rng, root)?);
            let (a_dir, b_dir) = (root.join(&a).is_dir(), root.join(&b).is_dir());
            if a_dir == b_dir
                || a.starts_with(&format!("{b}/"))
                || b.starts_with(&format!("{a}/"))
                || root.join(&a).is_symlink()
                || root.join(&b).is_symlink()
            {
                return None;
            }
            let temp = root.join(".swap");
            std::fs::rename(root.join(&a), &temp).ok()?;
            std::fs::rename(root.join(&b), root.join(&a)).ok()?;
            std::fs::rename(&temp, root.join(&b)).ok()?;
            None
        }
        0..=2 => {
            // A create or a rewrite (what is there replaced).
            let path = root.join(random_path(rng, root));
            if path.is_dir() && !path.is_symlink() {
                return None;
            }
            remove(&path);
            std::fs::write(&path, &token).ok()?;
            Some(token)
        }
        3 => {
            // An append to a file.
            let path = root.join(pick(rng, root)?);
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if !meta.is_file() {
                return None;
            }
            let mut content = std::fs::read_to_string(&path).ok()?;
            content.push_str(&token);
            std::fs::write(&path, &content).ok()?;
            Some(content)
        }
        4 => {
            // A move of a file or directory to a free name.
            let from = pick(rng, root)?;
            let to = random_path(rng, root);
            if to == from
                || to.starts_with(&format!("{from}/"))
                || root.join(&to).symlink_metadata().is_ok()
            {
                return None;
            }
            std::fs::rename(root.join(&from), root.join(&to)).ok();
            None
        }
        5 => {
            remove(&root.join(pick(rng, root)?));
            None
        }
        6 => {
            let path = root.join(pick(rng, root)?);
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if meta.file_type().is_symlink() {
                return None;
            }
            // Now and then with a setuid, setgid or sticky bit.
            let special = [0, 0, 0o4000, 0o2000, 0o1000][rng.below(5)];
            let mode = if meta.is_dir() {
                0o700 + rng.below(2) as u32 * 0o55
            } else {
                0o600 + rng.below(2) as u32 * 0o155
            } | special;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).ok();
            None
        }
        7 => {
            // A type change: a file or link replaced by a directory holding a new file.
            let path = root.join(pick(rng, root)?);
            if path.is_dir() && !path.is_symlink() {
                return None;
            }
            remove(&path);
            std::fs::create_dir(&path).ok()?;
            std::fs::write(path.join("x"), &token).ok()?;
            Some(token)
        }
        8 => {
            let path = root.join(random_path(rng, root));
            if path.symlink_metadata().is_ok() {
                return None;
            }
            std::os::unix::fs::symlink(format!("t{n}"), &path).ok();
            None
        }
        _ => {
            let path = root.join(random_path(rng, root));
            std::fs::create_dir(&path).ok();
            None
        }
    }
}

#[test]
fn content_many_paths_share_is_sent_once_and_placed_at_each() {
    // (Checked by its effect: every path holds it, and nothing waits in the state.)
    let pair = Pair::new();
    for i in 0..5 {
        write(&pair.remote(&format!("pkg{i}/__init__.py")), "");
        write(&pair.remote(&format!("copies/same{i}.txt")), "the same\n");
    }
    write(&pair.remote("copies/other.txt"), "other\n");
    // Something here already: the first sync merges (an empty directory is filled from
    // one stream instead).
    write(&pair.local("README.md"), "local\n");
    let (code, _, stderr) = pair.sync(&[]);
    assert_eq!(code, 0, "{stderr}");
    pair.assert_equal("after the first sync");
    let mut waited = Vec::new();
    let mut dirs = vec![state_root(&pair.local(""))];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_name() == "incoming" {
                waited.push(entry.path());
            } else if entry.path().is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    assert!(
        waited.is_empty(),
        "nothing is left where content waited: {waited:?}"
    );
    // And the other way: one content at many new local paths.
    for i in 0..4 {
        write(&pair.local(&format!("more/copy{i}.txt")), "the same\n");
    }
    let (code, _, stderr) = pair.sync(&[]);
    assert_eq!(code, 0, "{stderr}");
    pair.assert_equal("after local copies");
}

/// A named step of a day's work.
type Step<'a> = (&'static str, Box<dyn Fn() + 'a>);

/// Up to ten paths where two sides' trees differ.
fn differ(
    here: &BTreeMap<String, (char, String, u32)>,
    there: &BTreeMap<String, (char, String, u32)>,
) -> Vec<String> {
    here.keys()
        .chain(there.keys())
        .filter(|k| here.get(*k) != there.get(*k))
        .take(10)
        .cloned()
        .collect()
}

/// The steps of an agent's day in the sandbox's repository `repo` (commits `first` and
/// `last`), with a person's edits in `local` among them.
fn agents_day<'a>(repo: &'a Path, local: &'a Path, first: &'a str, last: &'a str) -> Vec<Step<'a>> {
    use crate::mirror::git;
    vec![
        (
            "a checkout far back with git clean",
            Box::new(move || {
                git(repo, &["checkout", "-q", first]);
                git(repo, &["clean", "-q", "-fdx"]);
            }),
        ),
        (
            "local notes and a local rename",
            Box::new(move || {
                write(&local.join("notes/plan.md"), "# plan\n");
                write(&local.join("notes/todo.md"), "- sync\n");
                std::fs::rename(local.join("notes/todo.md"), local.join("notes/done.md")).unwrap();
            }),
        ),
        (
            "a checkout forward again",
            Box::new(move || git(repo, &["checkout", "-q", last])),
        ),
        (
            "a burst of small packages made",
            Box::new(move || {
                for package in 0..300 {
                    for file in ["index.js", "package.json", "lib/util.js"] {
                        write(
                            &repo.join(format!("burst/p{package}/{file}")),
                            &format!("{package}/{file}\n"),
                        );
                    }
                }
            }),
        ),
        (
            "the burst removed, a local edit of a tracked file",
            Box::new(move || {
                std::fs::remove_dir_all(repo.join("burst")).unwrap();
                write(
                    &local.join("packages/web/app/page3.tsx"),
                    "export default () => 33;\n",
                );
            }),
        ),
        (
            "a directory and forty files renamed",
            Box::new(move || {
                std::fs::rename(repo.join("packages/cli"), repo.join("packages/tool")).unwrap();
                for i in 0..40 {
                    std::fs::rename(
                        repo.join(format!("packages/sandbox/src/m{i}.ts")),
                        repo.join(format!("packages/sandbox/src/module{i}.ts")),
                    )
                    .unwrap();
                }
            }),
        ),
        (
            "build output written to temp names and moved into place",
            Box::new(move || {
                std::fs::create_dir_all(repo.join("dist")).unwrap();
                for i in 0..50 {
                    let temp = repo.join(format!("dist/.chunk{i}.js.tmp"));
                    std::fs::write(&temp, format!("chunk {i}\n")).unwrap();
                    std::fs::rename(&temp, repo.join(format!("dist/chunk{i}.js"))).unwrap();
                }
            }),
        ),
        (
            "a link retargeted and a script made plain",
            Box::new(move || {
                let temp = repo.join("README.md.new");
                std::os::unix::fs::symlink("packages/web/app/page1.tsx", &temp).unwrap();
                std::fs::rename(&temp, repo.join("README.md")).unwrap();
                std::fs::set_permissions(
                    repo.join("scripts/build.sh"),
                    std::fs::Permissions::from_mode(0o644),
                )
                .unwrap();
            }),
        ),
        (
            "a checkout back and a reset",
            Box::new(move || {
                git(repo, &["checkout", "-q", "-f", first]);
                git(repo, &["clean", "-q", "-fdx"]);
            }),
        ),
    ]
}

/// What a side holds, `.git` left out (two-way sync leaves it out by default).
fn worktree(root: &Path) -> BTreeMap<String, (char, String, u32)> {
    let mut held = tree(root);
    held.retain(|path, _| !path.split('/').any(|name| name == ".git"));
    held
}

/// An agent's day in the sandbox on a real repository (checkouts far apart with `git
/// clean`, a burst of packages made and removed, a directory and forty files renamed,
/// build output moved into place, a link retargeted, a mode changed) while a person edits
/// beside it locally, with the sync kept open as `--follow` keeps it (passes reading only
/// what changed): after every step both sides hold the same, link for link and mode for
/// mode, and no conflict was found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_day_on_a_real_repository_keeps_both_sides_equal_when_following() {
    use crate::mirror::make_repository;
    let daemon = Daemon::start();
    let repo = daemon.path("project");
    let (first, last) = make_repository(&repo);
    let local_dir = tempfile::tempdir().unwrap();
    let local = local_dir.path().join("work");
    std::fs::create_dir_all(&local).unwrap();
    let mut sync = open(&daemon, &local);
    let mut watch = Watched::start(&local, &sync.watch_excludes()).unwrap();
    let (_, conflicts, _) = settle(&mut sync, Told::Follow(&mut watch), "the first sync").await;
    assert_eq!(conflicts, 0);
    assert_eq!(worktree(&local), worktree(&repo), "after the first sync");
    let mut in_part = 0;
    let steps = agents_day(&repo, &local, &first, &last);
    for (name, act) in &steps {
        act();
        let (_, conflicts, partial) = settle(&mut sync, Told::Follow(&mut watch), name).await;
        in_part += partial;
        assert_eq!(conflicts, 0, "{name}: no conflict");
        let (here, there) = (worktree(&local), worktree(&repo));
        if here != there {
            panic!(
                "after {name}: the sides differ at {:?}",
                differ(&here, &there)
            );
        }
    }
    assert!(
        in_part >= steps.len(),
        "the passes read only what changed ({in_part} did)"
    );
}

/// The same day with the real `fsctl sync --two-way --follow` running beside it (passes
/// woken while git is still changing the tree): after each step both sides come to hold
/// the same, and no conflict copy is made.
#[test]
fn an_agents_day_on_a_real_repository_with_fsctl_following_ends_each_step_equal() {
    use crate::mirror::make_repository;
    let daemon = Daemon::start();
    let repo = daemon.path("project");
    let (first, last) = make_repository(&repo);
    let local_dir = tempfile::tempdir().unwrap();
    let local = local_dir.path().join("work");
    let mut child = following(&daemon, &local, std::process::Stdio::null());
    arrives("the first sync", || {
        local.exists() && worktree(&local) == worktree(&repo)
    });
    for (name, act) in agents_day(&repo, &local, &first, &last) {
        act();
        let started = std::time::Instant::now();
        while worktree(&local) != worktree(&repo) {
            if started.elapsed() > std::time::Duration::from_secs(20) {
                let _ = child.kill();
                let (here, there) = (worktree(&local), worktree(&repo));
                panic!(
                    "after {name}: the sides still differ at {:?}",
                    differ(&here, &there)
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let copies: Vec<String> = worktree(&local)
            .into_keys()
            .filter(|path| path.contains(".sync-conflict-"))
            .collect();
        assert!(
            copies.is_empty(),
            "after {name}: conflict copies {copies:?}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `fsctl sync --two-way FOLLOW project LOCAL`, its state kept by `state_root`.
fn follow_command(daemon: &Daemon, local: &Path, follow: &str) -> Command {
    let mut command = Command::new(binary("fsctl"));
    command
        .args(["--url", &daemon.url(""), "sync", "--two-way", follow])
        .args(["project", local.to_str().unwrap()])
        .env("FSD_SYNC_STATE_DIR", state_root(local));
    command
}

/// `fsctl sync --two-way --follow` of `project` into `local`, with a timer of ten minutes:
/// what arrives while it runs was carried by passes that changes woke.
fn following(daemon: &Daemon, local: &Path, stdout: std::process::Stdio) -> std::process::Child {
    follow_command(daemon, local, "--follow=600000")
        .stdout(stdout)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (20 s at most: a liveness bound, not a measure of speed) until `done` holds.
fn arrives(what: &str, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{what} never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The synopsis as `--help` and docs/api.md write it: `--follow` takes no value unless
/// written `--follow=MS`, so the directories after it are REMOTE and LOCAL (an optional
/// value once took REMOTE as its milliseconds), and a change in the sandbox comes over.
/// Ctrl-C ends it with 130, as it ends the one-way follow (it exited 0).
#[test]
fn the_follow_synopsis_runs_as_written() {
    let pair = Pair::new();
    write(&pair.remote("a.txt"), "a\n");
    let local = pair.local("");
    std::fs::create_dir_all(&local).unwrap();
    let child = follow_command(&pair.daemon, &local, "--follow")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    arrives("the first pass", || pair.local("a.txt").exists());
    write(&pair.remote("b.txt"), "b\n");
    arrives("a sandbox write", || pair.local("b.txt").exists());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{output:?}");
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("invalid value"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn following_carries_each_sides_changes_as_they_happen() {
    use std::io::BufRead;
    let pair = Pair::new();
    write(&pair.remote("src/main.rs"), "fn main() {}\n");
    std::fs::create_dir_all(pair.local("")).unwrap();
    write(&pair.local("notes.md"), "local notes\n");
    // A timer of ten minutes: what arrives below was carried by passes changes woke.
    let local = pair.local("");
    let mut child = following(&pair.daemon, &local, std::process::Stdio::piped());
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        if line.unwrap().starts_with("to remote:") {
            break;
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    assert_eq!(read(&pair.local("src/main.rs")), "fn main() {}\n");
    assert_eq!(read(&pair.remote("notes.md")), "local notes\n");

    // A save in the editor (a temp file renamed over the file) reaches the sandbox.
    write(&pair.local("src/main.rs.swp"), "fn main() { run() }\n");
    std::fs::rename(pair.local("src/main.rs.swp"), pair.local("src/main.rs")).unwrap();
    arrives("a local save", || {
        std::fs::read_to_string(pair.remote("src/main.rs")).is_ok_and(|c| c.contains("run()"))
    });
    // A write in the sandbox comes here.
    write(&pair.remote("src/lib.rs"), "pub fn run() {}\n");
    arrives("a sandbox write", || pair.local("src/lib.rs").exists());
    // A subtree made at once, before any watch of it could be in place.
    for i in 0..20 {
        write(
            &pair.local(&format!("gen/a/b/c/f{i}.txt")),
            &format!("{i}\n"),
        );
    }
    // All of it: the sandbox moving the directory while some of it is still on its way
    // would be a move against additions, after which what had arrived is at the new name
    // and the rest at the old one, on both sides.
    arrives("a local subtree", || {
        tree(&pair.local("gen")) == tree(&pair.remote("gen"))
            && pair.remote("gen/a/b/c/f19.txt").exists()
    });
    // A directory moved in the sandbox is moved here; a link and a mode come along.
    std::fs::rename(pair.remote("gen/a"), pair.remote("gen/moved")).unwrap();
    arrives("a move from the sandbox", || {
        pair.local("gen/moved/b/c/f7.txt").exists() && !pair.local("gen/a").exists()
    });
    std::os::unix::fs::symlink("../src/lib.rs", pair.remote("gen/link")).unwrap();
    std::fs::set_permissions(
        pair.remote("src/lib.rs"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    arrives("a link from the sandbox", || {
        std::fs::read_link(pair.local("gen/link")).is_ok()
    });
    arrives("a mode from the sandbox", || {
        std::fs::metadata(pair.local("src/lib.rs"))
            .is_ok_and(|meta| meta.permissions().mode() & 0o777 == 0o700)
    });
    // A local delete of a directory reaches the sandbox.
    std::fs::remove_dir_all(pair.local("gen/moved")).unwrap();
    arrives("a local delete", || !pair.remote("gen/moved").exists());
    // Quiet now: both sides the same, with nothing left for a timer pass to find.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = child.kill();
    let _ = child.wait();
    pair.assert_equal("after following");
}

/// Every file content on the side.
pub(crate) fn contents(root: &Path) -> BTreeSet<String> {
    tree(root)
        .into_values()
        .filter(|(kind, _, _)| *kind == 'f')
        .map(|(_, content, _)| content)
        .collect()
}

/// How a test's passes learn what changed on the local side.
pub(crate) enum Told<'a> {
    /// A walk of stats against the records, as a pass with no watcher makes it.
    Walk,
    /// A watcher kept open, as `--follow` keeps it.
    Follow(&'a mut Watched),
    /// The watcher a pass leaves for the next, as `fsctl sync --two-way` leaves it (the
    /// real `fsctl sync-watcher` process).
    Watcher(&'a mut PairWatcher),
}

/// The watcher `fsctl sync --two-way` leaves for `sync`'s pair.
pub(crate) fn pair_watcher(sync: &TwoWay) -> PairWatcher {
    PairWatcher::new(sync, binary("fsctl"))
}

/// One pass, the local side's changes learnt as `told` says.
pub(crate) async fn pass(
    sync: &mut TwoWay,
    told: &mut Told<'_>,
) -> Result<fsd_sdk::two_way::PassReport, fsd_sdk::SdkError> {
    use fsd_sdk::two_way::LocalWatch;
    match told {
        Told::Follow(watch) => {
            let changed = watch.take().await;
            sync.pass_changed(changed).await
        }
        Told::Watcher(watcher) => sync.pass_watched(&mut **watcher).await,
        Told::Walk => sync.pass().await,
    }
}

/// Passes until one changes nothing; answers how many changes the passes made, how many
/// conflicts they found, and how many merged only what changed.
pub(crate) async fn settle(
    sync: &mut TwoWay,
    mut told: Told<'_>,
    when: &str,
) -> (usize, usize, usize) {
    let (mut changes, mut conflicts, mut in_part) = (0, 0, 0);
    // Whether the last pass halted for a side emptied whole: the workload emptied it on
    // purpose, so the next pass carries it.
    let mut halted = false;
    for _ in 0..6 {
        sync.set_accept_emptied(std::mem::take(&mut halted));
        let result = pass(sync, &mut told).await;
        if result.as_ref().is_ok_and(|report| !report.whole) {
            in_part += 1;
        }
        if let Ok(report) = &result {
            assert!(
                report.failed.is_empty(),
                "{when}: a pass could not make a change: {:?}",
                report.failed
            );
        }
        match result {
            Ok(report) if report.settled() => {
                sync.set_accept_emptied(false);
                return (changes, conflicts, in_part);
            }
            Ok(report) => {
                conflicts += report.conflicts.len();
                for side in [&report.to_local, &report.to_remote] {
                    changes += side.files
                        + side.dirs
                        + side.links
                        + side.renames
                        + side.removals
                        + side.modes;
                }
            }
            Err(err) if err.code() == Some(&fsd_sdk::ErrorCode::SyncHalted) => halted = true,
            Err(err) => panic!("{when}: a pass failed: {err}"),
        }
    }
    panic!("{when}: six passes did not settle");
}

pub(crate) fn open(daemon: &Daemon, local: &Path) -> TwoWay {
    let options = TwoWayOptions {
        mode: Mode::TwoWaySafe,
        state_root: Some(state_root(local)),
        ..TwoWayOptions::default()
    };
    TwoWay::open(daemon.sandbox(), local, "project", options).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_edits_on_both_sides_through_restarts_end_equal_and_lose_nothing() {
    let seeds: Vec<u64> = match std::env::var("FSD_TWO_WAY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => {
            let base = fsd_tests::seed_base("two-way");
            let count: u64 = std::env::var("FSD_TWO_WAY_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(4);
            (0..count).map(|i| base.wrapping_add(i * 7919)).collect()
        }
    };
    for seed in seeds {
        for local_side in [LocalSide::Walk, LocalSide::Follow, LocalSide::Watcher] {
            println!("two-way: FSD_TWO_WAY_SEED={seed} {local_side:?}");
            run_seed(seed, local_side).await;
        }
    }
}

/// How the property test's passes learn the local side's changes (see [`Told`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LocalSide {
    Walk,
    Follow,
    Watcher,
}

async fn run_seed(seed: u64, local_side: LocalSide) {
    let following = local_side == LocalSide::Follow;
    let mut rng = Rng::new(seed);
    let mut daemon = Daemon::start();
    let remote = daemon.path("project");
    std::fs::create_dir_all(&remote).unwrap();
    let local_dir = tempfile::tempdir().unwrap();
    let local = local_dir.path().join("work");
    std::fs::create_dir_all(&local).unwrap();
    let mut n = 0u64;
    let (mut changes, mut conflicts, mut in_part) = (0, 0, 0);
    let mut sync = open(&daemon, &local);
    // Following: the local side's watcher, started before the first pass reads the tree.
    let mut watch = following.then(|| Watched::start(&local, &sync.watch_excludes()).unwrap());
    let mut watcher = (local_side == LocalSide::Watcher).then(|| pair_watcher(&sync));
    for epoch in 0..12 {
        let when = format!("FSD_TWO_WAY_SEED={seed} {local_side:?} epoch {epoch}");
        // Edits on both sides, some made while a pass runs.
        let mut written: Vec<(char, String)> = Vec::new();
        for _ in 0..1 + rng.below(6) {
            let (side, root) = if rng.below(2) == 0 {
                ('l', &local)
            } else {
                ('r', &remote)
            };
            if let Some(content) = edit(&mut rng, root, side, &mut n) {
                written.push((side, content));
            }
        }
        // What each side holds of what was written: its own later edits may have replaced
        // some, which is not a loss.
        let mut present = contents(&local);
        present.extend(contents(&remote));
        let mut expected: BTreeSet<String> = written
            .into_iter()
            .map(|(_, content)| content)
            .filter(|content| present.contains(content))
            .collect();
        if rng.below(3) == 0 {
            // New files made on one side while a pass runs (in directories the pass may be
            // removing or moving): each must survive.
            let root = if rng.below(2) == 0 {
                local.clone()
            } else {
                remote.clone()
            };
            let mut during = Rng::new(rng.next());
            let first = n;
            n += 3;
            let editing = tokio::task::spawn_blocking(move || {
                let mut made = Vec::new();
                for m in first..first + 3 {
                    std::thread::sleep(std::time::Duration::from_millis(during.below(15) as u64));
                    let at = random_path(&mut during, &root);
                    let parent = Path::new(&at).parent().unwrap_or(Path::new(""));
                    let content = format!("during{m}\n");
                    if std::fs::write(root.join(parent).join(format!("n{m}")), &content).is_ok() {
                        made.push(content);
                    }
                }
                made
            });
            let _ = pass(&mut sync, &mut told(&mut watch, &mut watcher)).await;
            expected.extend(editing.await.unwrap());
        }
        // Interruptions: the daemon restarted or killed, the sync reopened (a daemon on a
        // new port needs a new client). Following, the sync stays open otherwise, so its
        // passes read only what changed across epochs.
        let reopen = match rng.below(6) {
            0 => {
                daemon.restart();
                true
            }
            1 => {
                daemon.crash();
                daemon.resume();
                true
            }
            2 => true,
            _ => !following,
        };
        if reopen {
            drop(sync);
            sync = open(&daemon, &local);
        }
        // The watcher a pass left, killed: the next pass walks and leaves another.
        if let Some(watcher) = &watcher
            && rng.below(5) == 0
        {
            kill_watcher(watcher);
        }
        let (made, found, partial) = settle(&mut sync, told(&mut watch, &mut watcher), &when).await;
        changes += made;
        conflicts += found;
        in_part += partial;
        let (local_tree, remote_tree) = (tree(&local), tree(&remote));
        if local_tree != remote_tree {
            let differ: Vec<_> = local_tree
                .keys()
                .chain(remote_tree.keys())
                .filter(|k| local_tree.get(*k) != remote_tree.get(*k))
                .collect();
            panic!(
                "{when}: the sides differ at {differ:?}\nlocal {local_tree:#?}\nremote {remote_tree:#?}"
            );
        }
        let held = contents(&local);
        let lost: Vec<&String> = expected.iter().filter(|c| !held.contains(*c)).collect();
        assert!(
            lost.is_empty(),
            "{when}: edits lost: {lost:?}\nlocal {local_tree:#?}"
        );
    }
    println!(
        "two-way: seed {seed}: {changes} changes made, {conflicts} conflicts, \
         {in_part} passes merged only what changed"
    );
    assert!(changes > 0, "the workload changes the trees");
    // Kept open or not, a pass after the first reads only what changed: the sandbox's
    // side from the token the last pass journaled (across reopens and daemon restarts), the
    // local one from a watcher or a walk of stats.
    assert!(in_part > 0, "a pass reads only what changed");
}

/// How a pass learns the local side's changes: from the watcher kept open, the one a pass
/// left, or a walk.
fn told<'a>(watch: &'a mut Option<Watched>, watcher: &'a mut Option<PairWatcher>) -> Told<'a> {
    match (watch.as_mut(), watcher.as_mut()) {
        (Some(watch), _) => Told::Follow(watch),
        (_, Some(watcher)) => Told::Watcher(watcher),
        _ => Told::Walk,
    }
}

/// Kills the process answering on `watcher`'s socket, as a crash or an OOM kill would.
fn kill_watcher(watcher: &PairWatcher) {
    for pid in fsd_tests::host_processes_with(&watcher.socket().display().to_string()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// An apply body: the length, the request, the files' content.
fn apply_body(request: &serde_json::Value, contents: &[&[u8]]) -> Vec<u8> {
    let header = serde_json::to_vec(request).unwrap();
    let mut body = (header.len() as u32).to_be_bytes().to_vec();
    body.extend_from_slice(&header);
    for content in contents {
        body.extend_from_slice(content);
    }
    body
}

/// Each step's outcome (`applied`, `changed`, `failed`) in an apply answer.
fn outcomes_of(answer: &serde_json::Value) -> Vec<&str> {
    answer["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["outcome"].as_str().unwrap())
        .collect()
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

async fn apply(daemon: &Daemon, body: Vec<u8>) -> (reqwest::StatusCode, serde_json::Value) {
    fsd_tests::reply(
        daemon
            .request(reqwest::Method::POST, "/api/files/apply")
            .body(body),
    )
    .await
}

#[tokio::test]
async fn a_change_is_refused_where_the_path_changed_since_the_sync_looked() {
    use serde_json::json;
    let daemon = Daemon::start();
    let root = daemon.path("project");
    write(&root.join("edited.txt"), "the agent's edit\n");
    write(&root.join("keep/inside.txt"), "kept\n");
    let old = fsd_tests::sha256_hex(b"what the sync saw\n");
    let new = b"the sync's version\n";
    // The sync saw other content at edited.txt: the put is refused, the edit stays. The
    // removal of a directory that is not empty is refused too; the rest is made.
    let request = json!({"path": "project", "steps": [
        {"op": "putFile", "path": "edited.txt", "expect": {"kind": "file", "sha256": old},
         "size": new.len(), "sha256": fsd_tests::sha256_hex(new), "mode": 0o644},
        {"op": "remove", "path": "keep", "expect": {"kind": "directory"}},
        {"op": "putFile", "path": "new/file.txt", "expect": {"kind": "absent"},
         "size": new.len(), "sha256": fsd_tests::sha256_hex(new), "mode": 0o600},
        {"op": "mkdir", "path": "new", "expect": {"kind": "absent"}, "mode": 0o750},
        {"op": "putFile", "path": "new/file.txt", "expect": {"kind": "absent"},
         "size": new.len(), "sha256": fsd_tests::sha256_hex(b"not this"), "mode": 0o600},
        {"op": "putFile", "path": "new/file.txt", "expect": {"kind": "absent"},
         "size": new.len(), "sha256": fsd_tests::sha256_hex(new), "mode": 0o600},
        {"op": "symlink", "path": "new/link", "expect": {"kind": "absent"}, "target": "../x"},
        {"op": "rename", "path": "new/file.txt", "expect": {"kind": "file",
         "sha256": fsd_tests::sha256_hex(new)}, "to": "keep/inside.txt"},
    ]});
    let body = apply_body(&request, &[new, new, new, new]);
    let (status, answer) = apply(&daemon, body).await;
    assert_eq!(status, 200, "{answer}");
    let outcomes = outcomes_of(&answer);
    assert_eq!(
        outcomes,
        [
            "changed", "changed", "failed", "applied", "failed", "applied", "applied", "changed"
        ],
        "{answer}"
    );
    assert_eq!(answer["outcomes"][0]["found"]["kind"], "file");
    assert_eq!(read(&root.join("edited.txt")), "the agent's edit\n");
    assert_eq!(read(&root.join("keep/inside.txt")), "kept\n");
    assert_eq!(read(&root.join("new/file.txt")), "the sync's version\n");
    let mode = |path: &Path| {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&root.join("new")), 0o750);
    assert_eq!(mode(&root.join("new/file.txt")), 0o600);
    assert_eq!(
        std::fs::read_link(root.join("new/link")).unwrap(),
        Path::new("../x")
    );
    // Nothing left behind by the refused puts.
    let names: Vec<String> = std::fs::read_dir(root.join("new"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");

    // Refusals: a path leaving the tree, a body cut inside a file's content, no length.
    let request = json!({"path": "project", "steps": [
        {"op": "remove", "path": "../etc", "expect": {"kind": "directory"}}]});
    let (status, answer) = apply(&daemon, apply_body(&request, &[])).await;
    fsd_tests::assert_validation(status, &answer, "steps[0].path");
    let request = json!({"path": "project", "steps": [
        {"op": "putFile", "path": "cut.txt", "expect": {"kind": "absent"},
         "size": 100, "sha256": old, "mode": 0o644}]});
    let (status, answer) = apply(&daemon, apply_body(&request, &[b"short"])).await;
    fsd_tests::assert_error(status, &answer, 400, "VALIDATION_FAILED");
    assert!(!root.join("cut.txt").exists());
    let (status, answer) = apply(&daemon, vec![0, 0]).await;
    fsd_tests::assert_validation(status, &answer, "body");
}

/// `--durability` (see `fsd/src/files/durability.rs`): under `fsync` (a plain `fsd serve`)
/// a file write and a batch of files are flushed to the disk before they are answered;
/// under `atomic` (the image's default) nothing waits for the disk, and each write is
/// still whole and leaves no scratch file, a replacement exact. Either way what was
/// answered survives the daemon's SIGKILL. The figures say which and count the flushes;
/// a value that is not one is refused at start, the flag named.
#[tokio::test]
async fn writes_wait_for_the_disk_only_under_durability_fsync() {
    use serde_json::json;
    let writes = async |daemon: &Daemon| -> serde_json::Value {
        let (status, body) = daemon
            .post(
                "/api/write",
                json!({"path": "w/one.txt", "content": "one\n"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        // A file replaced (under `atomic` its blocks taken before they are written) holds
        // exactly what was written, longer or shorter than before.
        for content in ["x".repeat(1 << 20), "shorter\n".to_string()] {
            let (status, body) = daemon
                .post(
                    "/api/write",
                    json!({"path": "r/replaced.txt", "content": content}),
                )
                .await;
            assert_eq!(status, 200, "{body}");
            assert!(read(&daemon.path("r/replaced.txt")) == content);
        }
        let absent = json!({"kind": "absent"});
        let mut steps = vec![json!({"op": "mkdir", "path": "d", "expect": absent, "mode": 0o755})];
        let bodies: Vec<Vec<u8>> = (0..300)
            .map(|i| format!("file {i}\n").into_bytes())
            .collect();
        for (i, body) in bodies.iter().enumerate() {
            steps.push(json!({"op": "putFile", "path": format!("d/f{i}.txt"),
                "expect": absent, "size": body.len(),
                "sha256": fsd_tests::sha256_hex(body), "mode": 0o644}));
        }
        let borrowed: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
        let request = json!({"path": "w", "steps": steps});
        let (status, answer) = apply(daemon, apply_body(&request, &borrowed)).await;
        assert_eq!(status, 200, "{answer}");
        assert!(
            outcomes_of(&answer).iter().all(|o| *o == "applied"),
            "{answer}"
        );
        let root = daemon.path("w");
        assert_eq!(read(&root.join("one.txt")), "one\n");
        for i in [0, 150, 299] {
            assert_eq!(
                read(&root.join(format!("d/f{i}.txt"))),
                format!("file {i}\n")
            );
        }
        assert_eq!(std::fs::read_dir(root.join("d")).unwrap().count(), 300);
        assert_eq!(
            std::fs::read_dir(&root).unwrap().count(),
            2,
            "no scratch file is left"
        );
        let (status, metrics) = daemon.get("/api/metrics").await;
        assert_eq!(status, 200, "{metrics}");
        metrics["durability"].clone()
    };

    // What a write answered survives the daemon's SIGKILL under either setting (what
    // fsync adds, a power loss, is not tried here): the files whole, no scratch file left,
    // and a daemon started again serves them.
    let survives_sigkill = async |daemon: &mut Daemon| {
        daemon.crash();
        let root = daemon.path("w");
        assert_eq!(read(&root.join("one.txt")), "one\n");
        assert_eq!(std::fs::read_dir(root.join("d")).unwrap().count(), 300);
        assert_eq!(read(&root.join("d/f299.txt")), "file 299\n");
        daemon.resume();
        let (status, body) = daemon
            .post("/api/read", json!({"path": "w/d/f7.txt"}))
            .await;
        assert_eq!(
            (status.as_u16(), &body["content"]),
            (200, &json!("file 7\n"))
        );
    };

    let mut daemon = Daemon::start();
    let flushed = writes(&daemon).await;
    assert_eq!(flushed["mode"], "fsync", "{flushed}");
    // The file's fsync and its directory's, the batch's syncfs.
    assert!(flushed["flushes"].as_u64().unwrap() >= 3, "{flushed}");
    survives_sigkill(&mut daemon).await;

    let mut daemon = Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--durability".into(), "atomic".into()],
        ..Default::default()
    });
    let atomic = writes(&daemon).await;
    assert_eq!(atomic, json!({"mode": "atomic", "flushes": 0}));
    let text = daemon
        .request(reqwest::Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("fsd_disk_flushes_total{durability=\"atomic\"} 0"),
        "{text}"
    );
    survives_sigkill(&mut daemon).await;

    let refused = std::process::Command::new(fsd_tests::binary("fsd"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--durability",
            "sometimes",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("--durability") && said.contains("fsync or atomic"),
        "{said}"
    );
}

/// A batch with many files has them written side by side (see `fsd/src/files/apply.rs`,
/// `Writers`): the batch's order still holds (a directory before the files in it, a rename
/// after the file it moves, a second put at a path after the first), a name taken
/// meanwhile is refused, and a body cut inside a file leaves none of the unwritten ones.
#[tokio::test]
async fn a_batch_of_many_files_is_made_in_its_order() {
    use serde_json::json;
    let daemon = Daemon::start();
    let root = daemon.path("many");
    write(&root.join("taken/f7.txt"), "made in the sandbox\n");
    let content = |i: usize| format!("file {i}\n").into_bytes();
    let put = |path: String, expect: serde_json::Value, body: &[u8]| {
        json!({"op": "putFile", "path": path, "expect": expect, "size": body.len(),
               "sha256": fsd_tests::sha256_hex(body), "mode": 0o640})
    };
    let absent = json!({"kind": "absent"});
    let mut steps = vec![json!({"op": "mkdir", "path": "d", "expect": absent, "mode": 0o755})];
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for i in 0..40 {
        steps.push(put(format!("d/f{i}.txt"), absent.clone(), &content(i)));
        bodies.push(content(i));
        // A file where the batch is sure nothing is: the sandbox made one meanwhile.
        steps.push(put(format!("taken/f{i}.txt"), absent.clone(), &content(i)));
        bodies.push(content(i));
    }
    // A second put at a path waits for the first; a rename waits for what it moves.
    let second = b"second\n".to_vec();
    let first_hash = fsd_tests::sha256_hex(&content(3));
    steps.push(put(
        "d/f3.txt".into(),
        json!({"kind": "file", "sha256": first_hash}),
        &second,
    ));
    bodies.push(second.clone());
    steps.push(
        json!({"op": "rename", "path": "d/f5.txt", "expect": {"kind": "file",
        "sha256": fsd_tests::sha256_hex(&content(5))}, "to": "d/moved.txt"}),
    );
    let request = json!({"path": "many", "steps": steps});
    let borrowed: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    let (status, answer) = apply(&daemon, apply_body(&request, &borrowed)).await;
    assert_eq!(status, 200, "{answer}");
    let outcomes = answer["outcomes"].as_array().unwrap();
    assert_eq!(outcomes.len(), steps.len());
    for (step, outcome) in steps.iter().zip(outcomes) {
        let path = step["path"].as_str().unwrap();
        let wanted = if path == "taken/f7.txt" {
            "changed"
        } else {
            "applied"
        };
        assert_eq!(outcome["outcome"], wanted, "{path}: {outcome}");
    }
    assert_eq!(read(&root.join("taken/f7.txt")), "made in the sandbox\n");
    assert_eq!(read(&root.join("d/f3.txt")), "second\n");
    assert_eq!(read(&root.join("d/moved.txt")), "file 5\n");
    assert!(!root.join("d/f5.txt").exists());
    for i in (0..40).filter(|i| ![3, 5].contains(i)) {
        assert_eq!(
            read(&root.join(format!("d/f{i}.txt"))),
            format!("file {i}\n")
        );
        let mode = std::fs::metadata(root.join(format!("d/f{i}.txt")))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
    }
    let names = |dir: &str| std::fs::read_dir(root.join(dir)).unwrap().count();
    assert_eq!(
        (names("d"), names("taken")),
        (40, 40),
        "no scratch file is left"
    );

    // A body cut inside the 30th file: an error, and no file it did not hold is made.
    let steps: Vec<serde_json::Value> = (0..40)
        .map(|i| put(format!("cut/f{i}.txt"), absent.clone(), &content(i)))
        .collect();
    std::fs::create_dir(root.join("cut")).unwrap();
    let mut body = apply_body(&json!({"path": "many", "steps": steps}), &[]);
    for i in 0..30 {
        body.extend_from_slice(&content(i));
    }
    body.extend_from_slice(b"fi");
    let (status, answer) = apply(&daemon, body).await;
    fsd_tests::assert_error(status, &answer, 400, "VALIDATION_FAILED");
    let made: Vec<String> = std::fs::read_dir(root.join("cut"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(made.len() <= 30, "{made:?}");
    assert!(!made.iter().any(|name| name == "f30.txt"), "{made:?}");
}

/// A body of several parts (as a first upload streams it, see `sdk/src/two_way/upload.rs`):
/// the steps of all parts are one sequence, a rename in a later part moves a file an
/// earlier one made, a new directory and what the parts put in it arrive whole (no scratch
/// name left), and a later part with a bad path is 400 naming the step by its place in the
/// sequence, what came before it made.
#[tokio::test]
async fn a_body_of_parts_is_one_batch() {
    use serde_json::json;
    let daemon = Daemon::start();
    let root = daemon.path("parts");
    std::fs::create_dir_all(&root).unwrap();
    let content = |i: usize| format!("part file {i}\n").into_bytes();
    let put = |path: String, body: &[u8]| {
        json!({"op": "putFile", "path": path, "expect": {"kind": "absent"},
               "size": body.len(), "sha256": fsd_tests::sha256_hex(body), "mode": 0o644})
    };
    let part = |body: &mut Vec<u8>, json: serde_json::Value, contents: &[Vec<u8>]| {
        let json = serde_json::to_vec(&json).unwrap();
        body.extend_from_slice(&(json.len() as u32).to_be_bytes());
        body.extend_from_slice(&json);
        for content in contents {
            body.extend_from_slice(content);
        }
    };
    let mut body = Vec::new();
    let mut first = vec![
        json!({"op": "mkdir", "path": "new", "expect": {"kind": "absent"},
                                "mode": 0o750}),
    ];
    let mut first_contents = Vec::new();
    for i in 0..30 {
        first.push(put(format!("new/f{i}.txt"), &content(i)));
        first_contents.push(content(i));
    }
    part(
        &mut body,
        json!({"path": "parts", "steps": first}),
        &first_contents,
    );
    let second: Vec<serde_json::Value> = (30..60)
        .map(|i| put(format!("new/f{i}.txt"), &content(i)))
        .chain([
            json!({"op": "rename", "path": "new/f0.txt", "expect": {"kind": "file",
            "sha256": fsd_tests::sha256_hex(&content(0))}, "to": "top.txt"}),
        ])
        .collect();
    part(
        &mut body,
        json!({"steps": second}),
        &(30..60).map(content).collect::<Vec<_>>(),
    );
    let (status, answer) = apply(&daemon, body.clone()).await;
    assert_eq!(status, 200, "{answer}");
    let outcomes = answer["outcomes"].as_array().unwrap();
    assert_eq!(outcomes.len(), 1 + 30 + 31);
    assert!(
        outcomes.iter().all(|o| o["outcome"] == "applied"),
        "{answer}"
    );
    assert_eq!(read(&root.join("top.txt")), "part file 0\n");
    for i in 1..60 {
        assert_eq!(
            read(&root.join(format!("new/f{i}.txt"))),
            format!("part file {i}\n")
        );
    }
    let mode = std::fs::metadata(root.join("new"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
    assert_eq!(
        names_in(&root),
        ["new", "top.txt"],
        "no scratch name is left"
    );

    // A third part whose second step names no plain path: 400, field by its place.
    std::fs::create_dir(root.join("more")).unwrap();
    let mut body = apply_body(
        &json!({"path": "parts", "steps": [put("more/a.txt".into(), b"a")]}),
        &[b"a"],
    );
    part(
        &mut body,
        json!({"steps": [put("more/b.txt".into(), b"b")]}),
        &[b"b".to_vec()],
    );
    part(
        &mut body,
        json!({"steps": [put("more/c.txt".into(), b"c"), put("../out.txt".into(), b"x")]}),
        &[],
    );
    let (status, answer) = apply(&daemon, body).await;
    fsd_tests::assert_error(status, &answer, 400, "VALIDATION_FAILED");
    assert_eq!(
        answer["context"]["validationErrors"][0]["field"], "steps[3].path",
        "{answer}"
    );
    assert_eq!(read(&root.join("more/a.txt")), "a");
    assert_eq!(read(&root.join("more/b.txt")), "b");
    assert!(!root.join("more/c.txt").exists());

    // What follows a part but is not one: 400, what came before made.
    let mut body = apply_body(
        &json!({"path": "parts", "steps": [put("more/d.txt".into(), b"d")]}),
        &[b"d"],
    );
    body.extend_from_slice(&[0, 0]);
    let (status, answer) = apply(&daemon, body).await;
    fsd_tests::assert_error(status, &answer, 400, "VALIDATION_FAILED");
    assert_eq!(read(&root.join("more/d.txt")), "d");
}

/// A new directory of a batch is made under a scratch name and put in place when the batch
/// ends (see `fsd/src/files/apply.rs`, `Staged`). If the sandbox makes its name meanwhile,
/// what the sandbox made stays: the directory's step is `changed`, the files the batch put
/// in it `failed` (the next pass merges them), and nothing of the batch's is left.
#[tokio::test]
async fn a_new_directory_whose_name_is_taken_meanwhile_keeps_what_the_sandbox_made() {
    use serde_json::json;
    let daemon = Daemon::start();
    let root = daemon.path("taken-dir");
    std::fs::create_dir_all(&root).unwrap();
    let put = |path: &str, body: &[u8]| {
        json!({"op": "putFile", "path": path, "expect": {"kind": "absent"},
               "size": body.len(), "sha256": fsd_tests::sha256_hex(body), "mode": 0o644})
    };
    let head = apply_body(
        &json!({"path": "taken-dir", "steps": [
            {"op": "mkdir", "path": "n", "expect": {"kind": "absent"}, "mode": 0o755},
            put("n/a.txt", b"batch a"),
            put("n/b.txt", b"batch b"),
            put("elsewhere.txt", b"else"),
        ]}),
        &[b"batch a"],
    );
    // The body is held open after the first file until the sandbox has made `n`.
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
    sender.send(Ok(head)).await.unwrap();
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    let request = daemon
        .request(reqwest::Method::POST, "/api/files/apply")
        .body(reqwest::Body::wrap_stream(stream));
    let answer = tokio::spawn(fsd_tests::reply(request));
    // The batch's directory is there under its scratch name once the first file is in it.
    let started = std::time::Instant::now();
    loop {
        let staged = std::fs::read_dir(&root).unwrap().flatten().find(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.starts_with(".n.fsd-") && entry.path().join("a.txt").exists()
        });
        if staged.is_some() {
            break;
        }
        assert!(started.elapsed().as_secs() < 30, "the batch never began");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(!root.join("n").exists(), "not seen before the batch ends");
    write(
        &root.join("n/mine.txt"),
        "the sandbox's
",
    );
    sender.send(Ok(b"batch belse".to_vec())).await.unwrap();
    drop(sender);
    let (status, answer) = answer.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    let outcomes = outcomes_of(&answer);
    assert_eq!(
        outcomes,
        ["changed", "failed", "failed", "applied"],
        "{answer}"
    );
    assert_eq!(answer["outcomes"][0]["found"]["kind"], "directory");
    assert_eq!(read(&root.join("elsewhere.txt")), "else");
    assert_eq!(names_in(&root), ["elsewhere.txt", "n"]);
    assert_eq!(names_in(&root.join("n")), ["mine.txt"]);
}

/// Swaps `a` (a directory) and `c` (a file) under `root` through a temporary name, as
/// `mv -T a .sw && mv -T c a && mv -T .sw c` does.
fn swap_kinds(root: &Path) {
    std::fs::rename(root.join("a"), root.join(".sw")).unwrap();
    std::fs::rename(root.join("c"), root.join("a")).unwrap();
    std::fs::rename(root.join(".sw"), root.join("c")).unwrap();
}

/// The third failure: a directory and a file swapped on one side cross to the other
/// as made, in one pass with nothing failed and no conflict, in both two-way modes, then
/// back the other way.
#[test]
fn a_file_and_a_directory_swapped_on_either_side_cross_as_made() {
    for mode in ["two-way-safe", "two-way-resolved"] {
        let pair = Pair::new();
        write(&pair.remote("a/u"), "U\n");
        write(&pair.remote("c"), "C\n");
        let (code, _, err) = pair.sync(&["--mode", mode]);
        assert_eq!(code, 0, "{mode}: {err}");
        swap_kinds(&pair.remote(""));
        let (code, _, err) = pair.sync(&["--mode", mode]);
        assert_eq!(code, 0, "{mode}: the sandbox's swap: {err}");
        assert!(
            !err.contains("conflict") && !err.contains("not changed"),
            "{mode}: {err}"
        );
        pair.assert_equal(&format!("{mode}: after the sandbox's swap"));
        assert_eq!(read(&pair.local("a")), "C\n");
        assert_eq!(read(&pair.local("c/u")), "U\n");
        let (code, _, err) = pair.sync(&["--mode", mode]);
        assert_eq!(code, 0, "{mode}: {err}");
        assert!(
            !err.contains("conflict"),
            "{mode}: a later pass finds nothing: {err}"
        );
        // And a swap back made locally.
        swap_kinds(&pair.local(""));
        let (code, _, err) = pair.sync(&["--mode", mode]);
        assert_eq!(code, 0, "{mode}: the local swap: {err}");
        assert!(
            !err.contains("conflict") && !err.contains("not changed"),
            "{mode}: {err}"
        );
        pair.assert_equal(&format!("{mode}: after the local swap"));
        assert_eq!(read(&pair.remote("a/u")), "U\n");
        assert_eq!(read(&pair.remote("c")), "C\n");
    }
}

/// The same swap made while `fsctl sync --two-way --follow` runs: both sides end equal, with
/// nothing of the old shape left on either.
#[test]
fn a_swap_of_kinds_crosses_while_following() {
    let pair = Pair::new();
    write(&pair.remote("a/u"), "U\n");
    write(&pair.remote("c"), "C\n");
    let local = pair.local("");
    let mut child = following(&pair.daemon, &local, std::process::Stdio::null());
    let expected = tree(&pair.remote(""));
    arrives("the first sync", || tree(&local) == expected);
    swap_kinds(&pair.remote(""));
    let expected = tree(&pair.remote(""));
    arrives("the sandbox's swap", || tree(&local) == expected);
    swap_kinds(&local);
    let expected = tree(&local);
    arrives("the local swap", || tree(&pair.remote("")) == expected);
    let _ = child.kill();
    let _ = child.wait();
    pair.assert_equal("after both swaps");
}

/// Runs `chattr FLAG PATH`; whether it worked (the filesystem may not have the attribute).
fn chattr(flag: &str, path: &Path) -> bool {
    Command::new("chattr")
        .arg(flag)
        .arg(path)
        .status()
        .is_ok_and(|status| status.success())
}

/// The fourth failure: a conflict whose copy a pass could not make (here: the local
/// directory it goes in is immutable) is listed from that pass on, the pass exits 4, the
/// next pass makes the copy, and it is listed until the copy is removed.
#[test]
fn a_conflict_whose_copy_a_pass_could_not_make_stays_listed() {
    let pair = Pair::new();
    write(&pair.remote("d.txt"), "D\n");
    assert_eq!(pair.sync(&[]).0, 0);
    // Locally the file goes to u/a; in the sandbox it goes elsewhere and u/a is a tree.
    std::fs::create_dir(pair.local("u")).unwrap();
    std::fs::rename(pair.local("d.txt"), pair.local("u/a")).unwrap();
    std::fs::create_dir(pair.remote("m")).unwrap();
    std::fs::rename(pair.remote("d.txt"), pair.remote("m/e")).unwrap();
    write(&pair.remote("u/a/x/f"), "R\n");
    let immutable = chattr("+i", &pair.local("u"));
    if !fsd_tests::available_or_skip(
        immutable,
        "a_conflict_whose_copy_a_pass_could_not_make_stays_listed",
        "chattr +i (an ext4-like filesystem under the temporary directory)",
    ) {
        return;
    }
    let (code, _, err) = pair.sync(&[]);
    assert!(chattr("-i", &pair.local("u")));
    assert_eq!(code, 4, "a step could not be made: {err}");
    assert!(err.contains("conflict: both changed u/a"), "{err}");
    let local = pair.local("");
    let conflicts = || {
        fsctl(
            &pair.daemon,
            &local,
            &["--conflicts", local.to_str().unwrap()],
        )
        .1
    };
    let listed = conflicts();
    assert!(
        listed.contains("u/a.sync-conflict-local"),
        "listed before its copy is made: {listed}"
    );

    let (code, _, err) = pair.sync(&[]);
    assert!(code == 0 || code == 3, "{err}");
    pair.assert_equal("after the pass that made the copy");
    assert_eq!(read(&pair.local("u/a.sync-conflict-local")), "D\n");
    assert!(conflicts().contains("u/a.sync-conflict-local"));
    std::fs::remove_file(pair.local("u/a.sync-conflict-local")).unwrap();
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(!pair.remote("u/a.sync-conflict-local").exists());
    assert!(conflicts().contains("no open conflicts"));
}

/// The fifth failure: setuid, setgid and sticky bits go both ways.
#[test]
fn setuid_setgid_and_sticky_bits_go_both_ways() {
    let pair = Pair::new();
    let mode = |path: PathBuf, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let mode_of = |path: PathBuf| {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    write(&pair.remote("bin/tool"), "#!/bin/sh\n");
    mode(pair.remote("bin/tool"), 0o4755);
    std::fs::create_dir_all(pair.remote("shared")).unwrap();
    mode(pair.remote("shared"), 0o2775);
    std::fs::create_dir_all(pair.remote("tmp")).unwrap();
    mode(pair.remote("tmp"), 0o1777);
    let (code, out, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(mode_of(pair.local("bin/tool")), 0o4755);
    assert_eq!(mode_of(pair.local("shared")), 0o2775);
    assert_eq!(mode_of(pair.local("tmp")), 0o1777);
    // Made locally, carried to the sandbox: a new file and a mode change.
    write(&pair.local("bin/other"), "#!/bin/sh\n");
    mode(pair.local("bin/other"), 0o2755);
    mode(pair.local("bin/tool"), 0o755);
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(mode_of(pair.remote("bin/other")), 0o2755);
    assert_eq!(mode_of(pair.remote("bin/tool")), 0o755);
}

/// The sixth failure: nothing of the sync is in the local tree (git sees nothing,
/// `git clean -fdx` removes nothing of it); a state that is lost falls back to a pass that
/// infers no deletion and finds a conflict only where contents differ; a state an earlier
/// version kept in the tree is taken over.
#[test]
fn the_pairs_state_lives_outside_the_tree() {
    let pair = Pair::new();
    write(&pair.remote("kept.txt"), "kept\n");
    write(&pair.remote("gone.txt"), "to be deleted\n");
    write(&pair.remote("both.txt"), "same\n");
    let local = pair.local("");
    assert_eq!(pair.sync(&[]).0, 0);
    let git = |args: &[&str]| {
        let output = Command::new("git")
            .args(args)
            .current_dir(&local)
            .output()
            .unwrap();
        assert!(output.status.success(), "git {args:?}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&[
        "-c",
        "user.email=t@t",
        "-c",
        "user.name=t",
        "commit",
        "-qm",
        "synced",
    ]);
    assert_eq!(
        git(&["status", "--porcelain", "--ignored"]),
        "",
        "git sees nothing of the sync"
    );
    git(&["clean", "-fdx"]);
    // A delete made locally is carried, not undone; an edit is no conflict.
    std::fs::remove_file(pair.local("gone.txt")).unwrap();
    write(&pair.local("kept.txt"), "edited\n");
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !pair.remote("gone.txt").exists(),
        "the local delete is carried"
    );
    assert_eq!(read(&pair.remote("kept.txt")), "edited\n");
    // (.git is not synced: gone, so the trees compare.)
    std::fs::remove_dir_all(pair.local(".git")).unwrap();

    // The state lost: no deletion inferred (a file deleted in the sandbox comes back), a
    // conflict only where the contents differ.
    std::fs::remove_dir_all(state_root(&local)).unwrap();
    std::fs::remove_file(pair.remote("both.txt")).unwrap();
    write(&pair.remote("kept.txt"), "edited\n");
    write(&pair.local("differs.txt"), "local\n");
    write(&pair.remote("differs.txt"), "remote\n");
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("conflict: both changed differs.txt"), "{err}");
    assert!(
        !err.contains("kept.txt"),
        "equal contents are no conflict: {err}"
    );
    assert_eq!(
        read(&pair.remote("both.txt")),
        "same\n",
        "no deletion inferred"
    );
    pair.assert_equal("after a pass without a state");

    // A state in the tree, as an earlier version kept it: taken over by the next pass.
    let pairs: Vec<PathBuf> = std::fs::read_dir(state_root(&local))
        .unwrap()
        .flatten()
        .flat_map(|own| std::fs::read_dir(own.path()).unwrap().flatten())
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    std::fs::create_dir(pair.local(".fsd-sync")).unwrap();
    for file in ["state.json", "state.log"] {
        let _ = std::fs::rename(pairs[0].join(file), pair.local(".fsd-sync").join(file));
    }
    // An earlier version kept its records inside its state.
    let _ = std::fs::remove_file(pairs[0].join("cache.json"));
    std::fs::remove_file(pair.remote("both.txt")).unwrap();
    let (code, _, err) = pair.sync(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(!pair.local(".fsd-sync").exists(), "taken over");
    assert!(
        !pair.local("both.txt").exists(),
        "with what both sides agreed on"
    );
}

/// A single `fsctl sync --two-way` reads only what changed: the sandbox's side from the
/// token the last pass journaled (also across a daemon restart), the local side by a walk
/// of stats. Where the token cannot tell (the first pass, other excludes) it reads the
/// sandbox whole; the sandbox directory removed and made again is carried as it is.
#[test]
fn single_passes_read_only_what_changed_and_whole_where_the_token_cannot_tell() {
    let mut pair = Pair::new();
    write(&pair.remote("a/x.txt"), "x\n");
    write(&pair.remote("b/y.txt"), "y\n");
    let pass = |pair: &Pair, more: &[&str]| -> serde_json::Value {
        let mut args = vec!["--json"];
        args.extend_from_slice(more);
        let (code, out, err) = pair.sync(&args);
        assert_eq!(code, 0, "{out}\n{err}");
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    let read = |report: &serde_json::Value| {
        (
            report["read"]["local"].as_str().unwrap().to_string(),
            report["read"]["sandbox"].as_str().unwrap().to_string(),
        )
    };
    let whole = ("whole".to_string(), "whole".to_string());
    let changed = ("changed".to_string(), "changed".to_string());
    assert_eq!(read(&pass(&pair, &[])), whole, "the first pass");
    pair.assert_equal("after the first pass");

    // An edit on each side, and a new file: carried, reading only those.
    write(&pair.remote("a/x.txt"), "x, edited in the sandbox\n");
    write(&pair.local("b/y.txt"), "y, edited locally\n");
    write(&pair.local("b/new.txt"), "new\n");
    let report = pass(&pair, &[]);
    assert_eq!(read(&report), changed, "{report}");
    assert_eq!(report["toLocal"]["files"], 1, "{report}");
    assert_eq!(report["toRemote"]["files"], 2, "{report}");
    pair.assert_equal("after edits on both sides");
    let report = pass(&pair, &[]);
    assert_eq!(read(&report), changed, "{report}");
    assert_eq!(report["toLocal"]["files"], 0, "nothing left: {report}");
    assert_eq!(report["toRemote"]["files"], 0, "nothing left: {report}");

    // The daemon restarted: its watch, and so the token, survive.
    pair.daemon.restart();
    write(
        &pair.remote("a/after-restart.txt"),
        "made after a restart\n",
    );
    let report = pass(&pair, &[]);
    assert_eq!(read(&report).1, "changed", "{report}");
    pair.assert_equal("after a daemon restart");

    // The sandbox directory removed and made again with other content.
    std::fs::remove_dir_all(pair.remote("")).unwrap();
    write(&pair.remote("c/z.txt"), "z\n");
    pass(&pair, &[]);
    pair.assert_equal("after the sandbox directory was made again");
    assert!(!pair.local("a").exists() && pair.local("c/z.txt").exists());

    // Other excludes: the sandbox is read whole (the token's tree was read with others).
    write(&pair.remote("c/log.txt"), "a log\n");
    let report = pass(&pair, &["--exclude", "*.tmp"]);
    assert_eq!(read(&report).1, "whole", "{report}");
    pair.assert_equal("after a pass with other excludes");
}

/// A single pass leaves a watcher of the local directory (the real `fsctl sync-watcher`),
/// started once the pass is over; the next takes its first token, and the ones after ask
/// it what changed instead of walking: it sees an edit a walk of stats
/// cannot (same size, its time set back), a killed watcher leaves the next pass walking
/// and starting another, and a watcher ends with its directory.
#[test]
fn a_pass_leaves_a_watcher_that_tells_the_next_what_a_walk_cannot_see() {
    let pair = Pair::new();
    write(&pair.remote("a.txt"), "one\n");
    write(&pair.remote("sub/b.txt"), "two\n");
    let pass = |more: &[&str]| -> serde_json::Value {
        let mut args = vec!["--json"];
        args.extend_from_slice(more);
        let (code, out, err) = pair.sync(&args);
        assert_eq!(code, 0, "{out}\n{err}");
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    let found_by = |report: &serde_json::Value| report["read"]["localFoundBy"].clone();
    let local = pair.local("");
    // The watcher's command line names its socket, in the pair's state.
    let marker = state_root(&local).display().to_string();
    let watchers = || fsd_tests::host_processes_with(&marker);
    // A watcher a pass started answers once it has read the tree. A pass that finds it
    // still starting for longer than it waits (on a loaded machine) walks and takes no
    // token: the one after it then takes the first. So each pass that is to take the
    // first token waits for a watcher that answers.
    let answering = || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let mut sockets = Vec::new();
            let mut dirs = vec![state_root(&local)];
            while let Some(dir) = dirs.pop() {
                for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                    let path = entry.path();
                    match entry.file_type() {
                        Ok(kind) if kind.is_dir() => dirs.push(path),
                        _ if path.extension().is_some_and(|e| e == "sock") => sockets.push(path),
                        _ => {}
                    }
                }
            }
            if sockets
                .iter()
                .any(|socket| std::os::unix::net::UnixStream::connect(socket).is_ok())
            {
                return;
            }
            assert!(std::time::Instant::now() < until, "no watcher answers");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    pass(&[]);
    let first = watchers();
    assert_eq!(first.len(), 1, "the first pass left one watcher: {first:?}");
    // The next pass takes the watcher's first token (and walks); the one after asks it.
    answering();
    let report = pass(&[]);
    assert_eq!(found_by(&report), "walk", "{report}");
    let report = pass(&[]);
    assert_eq!(found_by(&report), "watcher", "{report}");
    assert_eq!(report["toRemote"]["files"], 0, "{report}");

    // An edit a walk cannot see: the same size, and its time set back.
    let path = pair.local("a.txt");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, "ONE\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let report = pass(&[]);
    assert_eq!(found_by(&report), "watcher", "{report}");
    assert_eq!(report["toRemote"]["files"], 1, "{report}");
    assert_eq!(read(&pair.remote("a.txt")), "ONE\n");
    assert_eq!(watchers(), first, "the same watcher answers");

    // Without one, the pass walks.
    write(&pair.local("sub/b.txt"), "two, edited\n");
    let report = pass(&["--no-watcher"]);
    assert_eq!(found_by(&report), "walk", "{report}");
    assert_eq!(read(&pair.remote("sub/b.txt")), "two, edited\n");

    // The watcher killed: the next pass walks, carries the edit, and leaves another.
    for pid in &first {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    write(&pair.local("c.txt"), "three\n");
    let report = pass(&[]);
    assert_eq!(found_by(&report), "walk", "{report}");
    assert_eq!(read(&pair.remote("c.txt")), "three\n");
    let second = watchers();
    assert!(
        second.len() == 1 && second != first,
        "another watcher: {second:?}"
    );
    write(&pair.local("d.txt"), "four\n");
    answering();
    let report = pass(&[]);
    assert_eq!(found_by(&report), "walk", "its first token: {report}");
    write(&pair.local("e.txt"), "five\n");
    let report = pass(&[]);
    assert_eq!(found_by(&report), "watcher", "{report}");
    pair.assert_equal("after the watcher was replaced");

    // Its directory gone, the watcher ends.
    std::fs::remove_dir_all(&local).unwrap();
    let started = std::time::Instant::now();
    while !watchers().is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the watcher outlived its directory"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A side emptied whole, or gone, is far more often an accident than a wish (a sandbox that
/// lost its disk: a container's is ephemeral; a directory removed to be made again; a local
/// directory moved away), and a pass would carry it: every file deleted from the other
/// side, the only copy left of the work. The pass halts (exit 1, `SYNC_HALTED` naming the
/// side), changes nothing, and halts again until the side holds something again;
/// `--accept-emptied` carries it. In `one-way-safe` the sandbox's own deletions are not
/// carried, so an emptied sandbox is refilled.
#[test]
fn a_side_emptied_or_gone_halts_the_pass_and_deletes_nothing() {
    let pair = Pair::new();
    write(&pair.remote("a.txt"), "a\n");
    write(&pair.remote("src/lib.rs"), "lib\n");
    write(&pair.local("notes.md"), "notes\n");
    assert_eq!(pair.sync(&[]).0, 0);
    pair.assert_equal("after the first pass");
    let synced = tree(&pair.local(""));

    // The sandbox's directory gone, then made again empty.
    for how in ["gone", "emptied"] {
        std::fs::remove_dir_all(pair.remote("")).unwrap();
        if how == "emptied" {
            std::fs::create_dir(pair.remote("")).unwrap();
        }
        for round in 0..2 {
            let (code, _, stderr) = pair.sync(&[]);
            assert_eq!(code, 1, "{how}, round {round}: {stderr}");
            assert!(
                stderr.contains("SYNC_HALTED")
                    && stderr.contains("the sandbox directory")
                    && stderr.contains("--accept-emptied"),
                "{how}: {stderr}"
            );
            assert_eq!(
                tree(&pair.local("")),
                synced,
                "{how}: nothing deleted locally"
            );
        }
        // Put back: the pass goes on as if nothing happened.
        for (path, content) in [
            ("a.txt", "a\n"),
            ("src/lib.rs", "lib\n"),
            ("notes.md", "notes\n"),
        ] {
            write(&pair.remote(path), content);
        }
        let (code, _, stderr) = pair.sync(&[]);
        assert_eq!(code, 0, "{how}, put back: {stderr}");
        pair.assert_equal(&format!("{how}, put back"));
        assert_eq!(tree(&pair.local("")), synced);
    }

    // The local directory emptied: the sandbox keeps its files.
    let away = pair.local_dir.path().join("away");
    std::fs::rename(pair.local(""), &away).unwrap();
    std::fs::create_dir(pair.local("")).unwrap();
    let (code, _, stderr) = pair.sync(&[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("the local directory"), "{stderr}");
    assert_eq!(
        tree(&pair.remote("")),
        synced,
        "nothing deleted in the sandbox"
    );
    std::fs::remove_dir(pair.local("")).unwrap();
    std::fs::rename(&away, pair.local("")).unwrap();
    assert_eq!(pair.sync(&[]).0, 0);
    pair.assert_equal("the local directory back");

    // One-way-safe: an emptied sandbox is refilled from the local side, no halt.
    std::fs::remove_dir_all(pair.remote("")).unwrap();
    std::fs::create_dir(pair.remote("")).unwrap();
    let (code, _, stderr) = pair.sync(&["--mode", "one-way-safe"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(tree(&pair.remote("")), synced, "refilled");

    // Asked for: the emptied side is carried.
    std::fs::remove_dir_all(pair.remote("")).unwrap();
    std::fs::create_dir(pair.remote("")).unwrap();
    let (code, _, stderr) = pair.sync(&["--accept-emptied"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(tree(&pair.local("")).is_empty(), "the deletions carried");
    write(&pair.local("fresh.txt"), "fresh\n");
    assert_eq!(
        pair.sync(&[]).0,
        0,
        "an empty ancestor: nothing to halt for"
    );
    pair.assert_equal("after the accepted pass");
}
