//! Branches merged back against the real daemon and the kernel's overlayfs: three branches
//! edited differently, two merged and one discarded, a dry run that changes nothing, a
//! directory moved in a branch arriving as a move, a true conflict kept beside its path and
//! listed, `theirs` and `ours`, a branch merged into the branch it came from, a merge racing
//! a writer that loses none of the writer's work, the refusals' codes, and a seeded
//! simulation that holds every merge equal to the merge of the whole trees.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fsd_sdk::content_hash::ContentHash;
use fsd_sdk::merge::{Entries, Entry, Mode};
use fsd_tests::{Daemon, require_mount_privilege};
use serde_json::{Value, json};

use super::{tree, unmount_all};
use crate::backup::digest;
use crate::sync::workload::{Api, Rng, Workload};

pub(super) fn branch(dir: &Path, name: &str) -> PathBuf {
    PathBuf::from(format!("{}@{name}", dir.display()))
}

async fn merge(daemon: &Daemon, request: Value) -> Value {
    let (status, merged) = daemon.post("/api/fork/merge", request).await;
    assert_eq!(status, 200, "{merged}");
    merged
}

fn has_change(merged: &Value, op: &str, path: &str) -> bool {
    merged["changes"]
        .as_array()
        .is_some_and(|changes| changes.iter().any(|c| c["op"] == op && c["path"] == path))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_branches_merged_back_carry_their_work_and_a_conflict_keeps_both() {
    if !require_mount_privilege(
        "two_branches_merged_back_carry_their_work_and_a_conflict_keeps_both",
    ) {
        return;
    }
    let daemon = Daemon::start();
    let dir = daemon.path("app");
    tree(&dir);
    let (status, forked) = daemon
        .post("/api/fork", json!({"dir": dir, "count": 3}))
        .await;
    assert_eq!(status, 200, "{forked}");
    let (one, two, three) = (branch(&dir, "1"), branch(&dir, "2"), branch(&dir, "3"));

    // The directory goes on being worked in; each branch tries something else.
    std::fs::write(dir.join("README.md"), b"edited in the directory\n").unwrap();
    std::fs::write(one.join("src/main.rs"), b"fn main() { one() }\n").unwrap();
    std::fs::write(one.join("new.txt"), b"made in one\n").unwrap();
    std::fs::rename(one.join("src/deep"), one.join("src/core")).unwrap();
    std::fs::remove_file(one.join("target/debug/app")).unwrap();
    std::fs::write(two.join("README.md"), b"edited in two\n").unwrap();
    std::fs::write(two.join("two.txt"), b"made in two\n").unwrap();
    std::fs::write(three.join("junk.txt"), b"a dead end\n").unwrap();

    // A dry run says what would change and changes nothing.
    let before = digest(&dir);
    let dry = merge(&daemon, json!({"branch": one, "dryRun": true})).await;
    assert_eq!(dry["dryRun"], true, "{dry}");
    assert!(has_change(&dry, "put", "src/main.rs"), "{dry}");
    assert_eq!(digest(&dir), before, "a dry run changes nothing");

    let merged = merge(&daemon, json!({"branch": one})).await;
    assert_eq!(merged["into"], dir.display().to_string(), "{merged}");
    assert_eq!(merged["dryRun"], false, "{merged}");
    assert_eq!(merged["conflicts"], json!([]), "{merged}");
    assert_eq!(merged["changedMeanwhile"], json!([]), "{merged}");
    assert_eq!(
        merged["changes"], dry["changes"],
        "the dry run said what was made"
    );
    let moved = merged["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["op"] == "move" && c["path"] == "src/deep" && c["to"] == "src/core");
    assert!(moved, "a directory moved in the branch is moved: {merged}");
    assert_eq!(
        std::fs::read(dir.join("src/main.rs")).unwrap(),
        b"fn main() { one() }\n"
    );
    assert_eq!(
        std::fs::read(dir.join("new.txt")).unwrap(),
        b"made in one\n"
    );
    assert_eq!(
        std::fs::read(dir.join("src/core/lib.rs")).unwrap(),
        b"pub fn f() {}\n"
    );
    assert!(!dir.join("src/deep").exists());
    assert!(!dir.join("target/debug/app").exists());
    assert!(dir.join("target/debug").is_dir(), "only the file went");
    assert_eq!(
        std::fs::read(dir.join("README.md")).unwrap(),
        b"edited in the directory\n",
        "the directory's own work stays"
    );

    // Branch two changed README.md too, otherwise: both versions kept, the conflict listed.
    let merged = merge(&daemon, json!({"branch": two})).await;
    let aside = "README.md.sync-conflict-remote";
    assert_eq!(
        merged["conflicts"],
        json!([{"path": "README.md", "resolution": "keptBoth", "aside": aside}]),
        "{merged}"
    );
    assert_eq!(
        std::fs::read(dir.join("README.md")).unwrap(),
        b"edited in the directory\n"
    );
    assert_eq!(std::fs::read(dir.join(aside)).unwrap(), b"edited in two\n");
    assert_eq!(
        std::fs::read(dir.join("two.txt")).unwrap(),
        b"made in two\n"
    );
    assert_eq!(
        std::fs::read(dir.join("src/main.rs")).unwrap(),
        b"fn main() { one() }\n",
        "what one merged stays: two did not change it"
    );
    // A merged branch is kept until discarded, and unchanged by the merge.
    assert_eq!(
        std::fs::read(two.join("README.md")).unwrap(),
        b"edited in two\n"
    );
    assert!(!two.join("new.txt").exists());

    let (status, discarded) = daemon
        .post("/api/fork/discard", json!({"path": three}))
        .await;
    assert_eq!(status, 200, "{discarded}");
    assert!(!dir.join("junk.txt").exists());
    let (status, gone) = daemon
        .post("/api/fork/merge", json!({"branch": three}))
        .await;
    assert_eq!(
        (status.as_u16(), &gone["code"]),
        (404, &json!("BRANCH_NOT_FOUND")),
        "{gone}"
    );
    unmount_all(&daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn theirs_and_ours_settle_a_conflict_and_a_branch_merges_into_its_parent_branch() {
    if !require_mount_privilege(
        "theirs_and_ours_settle_a_conflict_and_a_branch_merges_into_its_parent_branch",
    ) {
        return;
    }
    let daemon = Daemon::start();
    let dir = daemon.path("app");
    tree(&dir);
    let (status, forked) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["a", "b"]}))
        .await;
    assert_eq!(status, 200, "{forked}");
    let (a, b) = (branch(&dir, "a"), branch(&dir, "b"));
    std::fs::write(dir.join("src/main.rs"), b"// ours\n").unwrap();
    std::fs::write(a.join("src/main.rs"), b"// a's\n").unwrap();
    std::fs::write(b.join("src/main.rs"), b"// b's\n").unwrap();
    std::fs::remove_file(b.join("README.md")).unwrap();

    let merged = merge(&daemon, json!({"branch": a, "mode": "theirs"})).await;
    assert_eq!(
        merged["conflicts"],
        json!([{"path": "src/main.rs", "resolution": "theirs"}]),
        "{merged}"
    );
    assert_eq!(std::fs::read(dir.join("src/main.rs")).unwrap(), b"// a's\n");

    let merged = merge(&daemon, json!({"branch": b, "mode": "ours"})).await;
    assert_eq!(
        merged["conflicts"],
        json!([{"path": "src/main.rs", "resolution": "ours"}]),
        "{merged}"
    );
    assert_eq!(std::fs::read(dir.join("src/main.rs")).unwrap(), b"// a's\n");
    assert!(!dir.join("README.md").exists(), "b's deletion carried");

    // A branch of a branch merges into the branch it came from, against their own fork
    // point: what `a` did before is no change of `a/x`'s.
    let (status, forked) = daemon
        .post("/api/fork", json!({"dir": a, "names": ["x"]}))
        .await;
    assert_eq!(status, 200, "{forked}");
    let x = branch(&a, "x");
    std::fs::write(x.join("x.txt"), b"made in x\n").unwrap();
    let merged = merge(&daemon, json!({"branch": x, "into": a})).await;
    assert_eq!(merged["into"], a.display().to_string(), "{merged}");
    assert_eq!(
        merged["changes"],
        json!([{"op": "put", "path": "x.txt"}]),
        "{merged}"
    );
    assert_eq!(std::fs::read(a.join("x.txt")).unwrap(), b"made in x\n");
    assert!(!dir.join("x.txt").exists());

    // Refusals, each with its code and field.
    let other = daemon.path("other");
    std::fs::create_dir_all(&other).unwrap();
    let (status, _) = daemon
        .post("/api/fork", json!({"dir": other, "names": ["o"]}))
        .await;
    assert_eq!(status, 200);
    let cases = [
        (
            json!({"branch": x, "mode": "mine"}),
            400,
            "VALIDATION_FAILED",
            "mode",
        ),
        (
            json!({"branch": x, "into": x}),
            400,
            "VALIDATION_FAILED",
            "into",
        ),
        (
            json!({"branch": x, "into": other}),
            400,
            "VALIDATION_FAILED",
            "into",
        ),
        (
            json!({"branch": x, "into": daemon.path("plain")}),
            404,
            "BRANCH_NOT_FOUND",
            "into",
        ),
        (json!({"branch": dir}), 404, "BRANCH_NOT_FOUND", ""),
        (json!({"into": a}), 400, "VALIDATION_FAILED", "branch"),
    ];
    for (request, status, code, field) in cases {
        let (got, refused) = daemon.post("/api/fork/merge", request.clone()).await;
        assert_eq!(
            (got.as_u16(), refused["code"].as_str()),
            (status, Some(code)),
            "{request}: {refused}"
        );
        if !field.is_empty() {
            assert!(refused.to_string().contains(field), "{request}: {refused}");
        }
    }
    unmount_all(&daemon);
}

/// What `git ARGS` prints in `repo` (it must succeed).
fn git_output(repo: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=fsd", "-c", "user.email=fsd@localhost"])
        .args(args)
        .current_dir(repo)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A real repository forked with a build's output and untracked work in it (what a git
/// worktree would not carry), three branches trying different things with git (each a
/// commit on a git branch of its own), two merged back and one discarded: the directory
/// ends with both branches' work and its own, both commits reachable by their branches, and
/// git working in it. `.git` merges as files do: what only one side changed (new objects,
/// a new ref) arrives; what both changed (`HEAD`, the index) keeps the directory's and is
/// listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_repository_with_its_build_output_takes_two_of_three_branches_back() {
    if !require_mount_privilege(
        "a_real_repository_with_its_build_output_takes_two_of_three_branches_back",
    ) {
        return;
    }
    two_of_three_branches_back(false).await;
}

/// As above with a build running in the repository all along (a process working in it,
/// writing its log): the fork point is a copy of the repository, which stays as it is
/// under the build; the build's writes go on through the fork and both merges, and stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_repository_with_a_build_running_takes_two_of_three_branches_back() {
    if !require_mount_privilege(
        "a_real_repository_with_a_build_running_takes_two_of_three_branches_back",
    ) {
        return;
    }
    two_of_three_branches_back(true).await;
}

async fn two_of_three_branches_back(build_running: bool) {
    let daemon = Daemon::start();
    let repo = daemon.path("project");
    crate::mirror::make_repository(&repo);
    std::fs::create_dir_all(repo.join("target/debug")).unwrap();
    std::fs::write(repo.join("target/debug/app"), vec![1u8; 300_000]).unwrap();
    std::fs::write(repo.join("notes.txt"), "untracked notes\n").unwrap();
    let log = repo.join("target/debug/build.log");
    let lines = || {
        std::fs::read_to_string(&log)
            .map(|text| text.lines().count())
            .unwrap_or(0)
    };
    let mut build = build_running.then(|| {
        let build = std::process::Command::new("sh")
            .args([
                "-c",
                "while :; do echo step >> target/debug/build.log; sleep 0.01; done",
            ])
            .current_dir(&repo)
            .spawn()
            .unwrap();
        while lines() < 3 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        build
    });
    let (status, forked) = daemon
        .post(
            "/api/fork",
            json!({"dir": repo, "names": ["one", "two", "three"]}),
        )
        .await;
    assert_eq!(status, 200, "{forked}");
    assert_eq!(
        forked["copiedBecause"].is_string(),
        build_running,
        "a copy exactly while the build runs: {forked}"
    );
    let at_fork = lines();
    let (one, two, three) = (
        branch(&repo, "one"),
        branch(&repo, "two"),
        branch(&repo, "three"),
    );
    git_output(&one, &["checkout", "-q", "-b", "one"]);
    std::fs::write(
        one.join("packages/cli/src/m1.ts"),
        "export const v1 = 'one';\n",
    )
    .unwrap();
    std::fs::write(
        one.join("packages/cli/src/added.ts"),
        "export const added = 1;\n",
    )
    .unwrap();
    git_output(&one, &["add", "-A"]);
    git_output(&one, &["commit", "-q", "-m", "try one"]);
    std::fs::write(one.join("target/debug/app"), vec![2u8; 300_000]).unwrap();
    git_output(&two, &["checkout", "-q", "-b", "two"]);
    std::fs::write(
        two.join("packages/sandbox/src/m2.ts"),
        "export const v2 = 'two';\n",
    )
    .unwrap();
    git_output(
        &two,
        &[
            "mv",
            "packages/sandbox/src/m3.ts",
            "packages/sandbox/src/three.ts",
        ],
    );
    git_output(&two, &["commit", "-q", "-am", "try two"]);
    git_output(&three, &["rm", "-q", "-r", "packages"]);
    git_output(&three, &["commit", "-q", "-m", "a dead end"]);
    std::fs::write(repo.join("notes.txt"), "notes taken meanwhile\n").unwrap();

    let merged = merge(&daemon, json!({"branch": one})).await;
    assert_eq!(
        merged["conflicts"],
        json!([]),
        "only one side changed: {merged}"
    );
    let merged = merge(&daemon, json!({"branch": two})).await;
    let conflicted: Vec<&str> = merged["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["path"].as_str())
        .collect();
    assert!(conflicted.contains(&".git/HEAD"), "{merged}");
    assert!(
        conflicted.iter().all(|path| path.starts_with(".git/")),
        "the work itself merged cleanly: {merged}"
    );
    let (status, body) = daemon
        .post("/api/fork/discard", json!({"path": three}))
        .await;
    assert_eq!(status, 200, "{body}");

    let read = |path: &str| std::fs::read_to_string(repo.join(path)).unwrap();
    assert_eq!(read("packages/cli/src/m1.ts"), "export const v1 = 'one';\n");
    assert_eq!(
        read("packages/cli/src/added.ts"),
        "export const added = 1;\n"
    );
    assert_eq!(
        read("packages/sandbox/src/m2.ts"),
        "export const v2 = 'two';\n"
    );
    assert!(repo.join("packages/sandbox/src/three.ts").is_file());
    assert!(!repo.join("packages/sandbox/src/m3.ts").exists());
    assert_eq!(
        std::fs::read(repo.join("target/debug/app")).unwrap(),
        vec![2u8; 300_000]
    );
    assert_eq!(read("notes.txt"), "notes taken meanwhile\n");
    assert!(
        repo.join("packages/cli/src/m0.ts").is_file(),
        "three's deletion is gone with it"
    );
    // The directory is on one's branch (its HEAD, which two's did not replace); both
    // commits are there by their branches, and git works in the merged tree.
    assert_eq!(
        git_output(&repo, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "one\n"
    );
    assert_eq!(
        git_output(&repo, &["log", "-1", "--format=%s", "one"]),
        "try one\n"
    );
    assert_eq!(
        git_output(&repo, &["log", "-1", "--format=%s", "two"]),
        "try two\n"
    );
    let status = git_output(&repo, &["status", "--porcelain"]);
    assert!(
        status.contains("packages/sandbox/src/m2.ts"),
        "two's work is a change on one's: {status}"
    );
    if let Some(mut build) = build.take() {
        let before_stop = lines();
        build.kill().unwrap();
        build.wait().unwrap();
        assert!(
            before_stop > at_fork,
            "the build wrote on through the fork and the merges ({at_fork} → {before_stop} lines)"
        );
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "step\n".repeat(lines()),
            "the build's log is only the build's"
        );
    }
    unmount_all(&daemon);
}

/// A branch merged again is merged against what it held when last merged: the work
/// continued in it arrives clean, and what the directory settled since (a kept conflict
/// resolved, its copy deleted) stays; against the fork point both would be conflicts again.
/// A discard forgets the pair's base.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_merged_again_is_merged_against_what_it_held_when_last_merged() {
    if !require_mount_privilege(
        "a_branch_merged_again_is_merged_against_what_it_held_when_last_merged",
    ) {
        return;
    }
    let daemon = Daemon::start();
    let dir = daemon.path("app");
    tree(&dir);
    let (status, forked) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["b"]}))
        .await;
    assert_eq!(status, 200, "{forked}");
    let b = branch(&dir, "b");
    std::fs::write(dir.join("README.md"), b"the directory's\n").unwrap();
    std::fs::write(b.join("README.md"), b"the branch's\n").unwrap();
    std::fs::write(b.join("src/main.rs"), b"fn main() { first() }\n").unwrap();
    let merged = merge(&daemon, json!({"branch": b})).await;
    assert_eq!(merged["conflicts"][0]["path"], "README.md", "{merged}");

    // The directory settles the conflict; the branch goes on.
    let aside = dir.join("README.md.sync-conflict-remote");
    std::fs::write(dir.join("README.md"), b"settled\n").unwrap();
    std::fs::remove_file(&aside).unwrap();
    std::fs::write(b.join("src/main.rs"), b"fn main() { second() }\n").unwrap();
    std::fs::write(b.join("later.txt"), b"made after the first merge\n").unwrap();
    let merged = merge(&daemon, json!({"branch": b})).await;
    assert_eq!(merged["conflicts"], json!([]), "{merged}");
    assert_eq!(
        std::fs::read(dir.join("src/main.rs")).unwrap(),
        b"fn main() { second() }\n"
    );
    assert_eq!(std::fs::read(dir.join("README.md")).unwrap(), b"settled\n");
    assert!(!aside.exists(), "the copy deleted stays deleted");
    assert_eq!(
        std::fs::read(dir.join("later.txt")).unwrap(),
        b"made after the first merge\n"
    );

    let bases = daemon.state_dir().join("forks/merged");
    assert_eq!(std::fs::read_dir(&bases).unwrap().count(), 1);
    let (status, body) = daemon.post("/api/fork/discard", json!({"path": b})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        std::fs::read_dir(&bases).unwrap().count(),
        0,
        "forgotten with the branch"
    );
    unmount_all(&daemon);
}

/// A writer in the directory while a branch merges into it: whatever it wrote last at a
/// path is there afterwards, and the branch's version of every path is somewhere (at the
/// path, beside it as a kept conflict, or reported as changed meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_racing_a_writer_loses_none_of_the_writers_work() {
    if !require_mount_privilege("a_merge_racing_a_writer_loses_none_of_the_writers_work") {
        return;
    }
    const FILES: usize = 300;
    let daemon = Daemon::start();
    let dir = daemon.path("app");
    std::fs::create_dir_all(dir.join("work")).unwrap();
    for n in 0..FILES {
        std::fs::write(dir.join(format!("work/{n}.txt")), b"as forked\n").unwrap();
    }
    let (status, forked) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["b"]}))
        .await;
    assert_eq!(status, 200, "{forked}");
    let b = branch(&dir, "b");
    for n in 0..FILES {
        std::fs::write(b.join(format!("work/{n}.txt")), format!("branch {n}\n")).unwrap();
    }

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut last: BTreeMap<usize, String> = BTreeMap::new();
            let mut round = 0usize;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                // Every third file in turn, over and over, each write its own content, a
                // moment apart: some before the merge reads them, some while it runs.
                let n = (round * 3) % FILES;
                let content = format!("writer {n} round {round}\n");
                let path = dir.join(format!("work/{n}.txt"));
                let temp = dir.join(format!("work/.{n}.tmp"));
                std::fs::write(&temp, &content).unwrap();
                std::fs::rename(&temp, &path).unwrap();
                last.insert(n, content);
                round += 1;
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            last
        })
    };
    let merged = merge(&daemon, json!({"branch": b})).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let last = writer.join().unwrap();
    assert!(!last.is_empty());

    let paths = |key: &str| -> Vec<String> {
        let listed = merged[key].as_array().unwrap().iter();
        listed
            .map(|v| {
                v.as_str()
                    .unwrap_or_else(|| v["path"].as_str().unwrap())
                    .to_string()
            })
            .collect()
    };
    let (meanwhile, conflicts, changes) = (
        paths("changedMeanwhile"),
        paths("conflicts"),
        paths("changes"),
    );
    for n in 0..FILES {
        let path = format!("work/{n}.txt");
        let now = std::fs::read_to_string(dir.join(&path)).unwrap();
        let theirs = format!("branch {n}\n");
        match last.get(&n) {
            Some(written) => assert_eq!(&now, written, "{path}: the writer's last write stays"),
            None => assert_eq!(now, theirs, "{path}: merged"),
        }
        // Made (and maybe written over since), kept beside the writer's, or reported.
        let aside = dir.join(format!("{path}.sync-conflict-remote"));
        let kept = std::fs::read_to_string(&aside).ok() == Some(theirs.clone());
        assert!(
            changes.contains(&path)
                || (kept && conflicts.contains(&path))
                || meanwhile.contains(&path),
            "{path}: the branch's version is accounted for ({merged})"
        );
    }
    assert_eq!(merged["failed"], json!([]), "{merged}");
    unmount_all(&daemon);
}

/// A whole tree's entries as the merge holds them: a file's content hash and mode bits (the
/// permissions, set-user-ID, set-group-ID and sticky ones, as a manifest has them), a
/// directory's bits, a link's target.
pub(crate) fn entries(root: &Path) -> Entries {
    use std::os::unix::fs::PermissionsExt;
    let mut tree = Entries::new();
    let mut pending = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, relative)) = pending.pop() {
        for found in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = found.file_name().to_string_lossy().into_owned();
            let path = if relative.is_empty() {
                name
            } else {
                format!("{relative}/{name}")
            };
            let meta = std::fs::symlink_metadata(found.path()).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let entry = if meta.is_dir() {
                pending.push((found.path(), path.clone()));
                Entry::Dir { mode }
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(found.path()).unwrap();
                Entry::Link {
                    target: target.display().to_string(),
                }
            } else {
                Entry::File {
                    hash: ContentHash::of(&std::fs::read(found.path()).unwrap()),
                    mode,
                }
            };
            tree.insert(path, entry);
        }
    }
    tree
}

/// One random operation of the sync property test's workload on `side`: its writes through
/// the API are made on the disk here (the merge reads the disk either way).
pub(super) fn edit(daemon: &Daemon, side: &Workload, rng: &mut Rng) -> String {
    let (done, api) = side.step(rng);
    if let Some(Api::Json(remote, content) | Api::Raw(remote, content)) = api {
        let _ = std::fs::write(daemon.root().join(remote), content);
    }
    done
}

/// The merge of a fork proven against the merge of whole trees. For each seed a tree is
/// made and forked (a third of the seeds while a process works in it: from a copy), both
/// the directory and the branch are edited at random (the sync
/// property test's workload: writes, appends, truncates, `mkdir -p`, renames of files and
/// directories, swaps, deletes, directories removed and made again, links, modes), and the
/// branch is merged back (and, for half the seeds, edited on and merged again, against what
/// it held at the first merge): the directory must then hold exactly what `fsd_merge::merge`
/// of the three whole trees decides (two-way-safe), so the overlay layers named every path
/// either side changed and the scoped merge decided as the whole one. Seeds from the day
/// (`FSD_SEED_DAY`); `FSD_FORK_MERGE_SEED` replays one, `FSD_FORK_MERGE_SEEDS` sets how
/// many (40).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_simulation_merges_as_the_whole_trees_merge() {
    if !require_mount_privilege("a_seeded_simulation_merges_as_the_whole_trees_merge") {
        return;
    }
    let seeds: Vec<u64> = match std::env::var("FSD_FORK_MERGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => {
            let count = std::env::var("FSD_FORK_MERGE_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(40u64);
            let base = fsd_tests::seed_base("fork merge");
            (0..count).map(|i| base.wrapping_add(i)).collect()
        }
    };
    let daemon = Daemon::start();
    for seed in seeds {
        let mut rng = Rng::new(seed);
        let name = format!("sim{seed:x}");
        let dir = daemon.path(&name);
        std::fs::create_dir(&dir).unwrap();
        let side = |root: PathBuf, remote: String| Workload { root, remote };
        let into = side(dir.clone(), name.clone());
        let mut done = Vec::new();
        for _ in 0..30 {
            done.push(edit(&daemon, &into, &mut rng));
        }
        let ancestor = entries(&dir);
        // A third of the seeds fork while a process works in the directory: the fork point
        // is a copy, and what the directory changed since is read from the copy's index
        // (a fork of it later, with the process gone, freezes it by a mount as usual).
        let mut sitting = (seed % 3 == 0).then(|| {
            done.push("a process sits in the directory".into());
            std::process::Command::new("sleep")
                .arg("60")
                .current_dir(&dir)
                .spawn()
                .unwrap()
        });
        fork(&daemon, &dir, "b", &mut done).await;
        let b = side(branch(&dir, "b"), format!("{name}@b"));
        edit_both(&daemon, [&into, &b], 20, &mut rng, &mut done);
        if let Some(mut process) = sitting.take() {
            let _ = process.kill();
            let _ = process.wait();
            done.push("the process in the directory ended".into());
        }
        // Forks in between freeze what each side wrote so far beneath a new upper layer:
        // a side's changes then span layers. A branch of the branch is merged back later.
        if rng.percent(50) {
            fork(&daemon, &dir, "c", &mut done).await;
        }
        let x = if rng.percent(50) {
            let forked_at = entries(&b.root);
            fork(&daemon, &b.root, "x", &mut done).await;
            Some((side(branch(&b.root, "x"), format!("{name}@b@x")), forked_at))
        } else {
            None
        };
        edit_both(&daemon, [&into, &b], 20, &mut rng, &mut done);
        let merged_at = merged_as_whole(&daemon, seed, &ancestor, &into, &b, &mut done).await;
        if rng.percent(50) {
            // Work goes on on both sides and the branch is merged again: against what it
            // held when last merged (everything else of it is still the fork point's).
            edit_both(&daemon, [&into, &b], 20, &mut rng, &mut done);
            merged_as_whole(&daemon, seed, &merged_at, &into, &b, &mut done).await;
        }
        if let Some((x, forked_at)) = x {
            // Into the branch it came from, against the tree they share: a fork point of
            // two frozen layers, shown by an overlay of its own.
            edit_both(&daemon, [&b, &x], 30, &mut rng, &mut done);
            merged_as_whole(&daemon, seed, &forked_at, &b, &x, &mut done).await;
        }
    }
    unmount_all(&daemon);
}

async fn fork(daemon: &Daemon, dir: &Path, name: &str, done: &mut Vec<String>) {
    let (status, forked) = daemon
        .post("/api/fork", json!({"dir": dir, "names": [name]}))
        .await;
    assert_eq!(status, 200, "{forked}\nafter:\n  {}", done.join("\n  "));
    done.push(format!("fork {} into {name}", dir.display()));
}

/// `count` random operations, each on one of `sides` at random.
fn edit_both(
    daemon: &Daemon,
    sides: [&Workload; 2],
    count: usize,
    rng: &mut Rng,
    done: &mut Vec<String>,
) {
    for _ in 0..count {
        let side = sides[rng.below(2)];
        let what = edit(daemon, side, rng);
        done.push(format!("{}: {what}", side.remote));
    }
}

/// Merges `branch` into `into` and holds what `into` then has equal to what the merge of
/// the three whole trees decides (`ancestor`: the tree at their fork point, or what the
/// branch held when last merged into `into`); answers what the branch held.
pub(super) async fn merged_as_whole(
    daemon: &Daemon,
    seed: u64,
    ancestor: &Entries,
    into: &Workload,
    branch: &Workload,
    done: &mut Vec<String>,
) -> Entries {
    let (into_now, branch_now) = (entries(&into.root), entries(&branch.root));
    let whole = fsd_sdk::merge::merge(ancestor, &into_now, &branch_now, Mode::TwoWaySafe);
    let merged = merge(daemon, json!({"branch": branch.root, "into": into.root})).await;
    let replay = format!(
        "seed {seed} (FSD_FORK_MERGE_SEED={seed} replays it) after:\n  {}\nthe merge answered {merged}",
        done.join("\n  ")
    );
    assert_eq!(merged["changedMeanwhile"], json!([]), "{replay}");
    assert_eq!(merged["failed"], json!([]), "{replay}");
    let now = entries(&into.root);
    if now != whole.agreed {
        let paths: std::collections::BTreeSet<&String> =
            now.keys().chain(whole.agreed.keys()).collect();
        let differ: Vec<String> = paths
            .into_iter()
            .filter(|path| now.get(*path) != whole.agreed.get(*path))
            .map(|path| {
                let (merged, whole) = (now.get(path), whole.agreed.get(path));
                format!("{path}: merged {merged:?}, whole trees {whole:?}")
            })
            .collect();
        panic!("{}\n{replay}", differ.join("\n"));
    }
    assert_eq!(
        merged["conflicts"].as_array().map(Vec::len),
        Some(whole.conflicts.len()),
        "{replay}"
    );
    done.push(format!("merge {} into {}", branch.remote, into.remote));
    branch_now
}
