//! Workspace forks against the real daemon and the kernel's overlayfs: branches that each
//! show the whole tree and are written on their own, the directory forked still writable,
//! branches of branches, a fork of a directory a process works in made from a copy, listing and
//! discarding, a daemon restart with branches alive, and the refusals' codes.

use std::path::{Path, PathBuf};

use fsd_tests::{Daemon, require_mount_privilege};
use serde_json::{Value, json};

use crate::backup::digest;

mod across;
pub(crate) mod merge;

/// Takes down every mount under the daemon's workspace and state directory, deepest first:
/// forks outlive the daemon (a restart keeps them), so a test takes its own away.
pub(crate) fn unmount_all(daemon: &Daemon) {
    fsd_tests::unmount_under(&daemon.root());
    fsd_tests::unmount_under(&daemon.state_dir());
}

fn tree(dir: &Path) {
    std::fs::create_dir_all(dir.join("src/deep")).unwrap();
    std::fs::create_dir_all(dir.join("target/debug")).unwrap();
    std::fs::write(dir.join("README.md"), b"the project\n").unwrap();
    std::fs::write(dir.join("src/main.rs"), b"fn main() {}\n").unwrap();
    std::fs::write(dir.join("src/deep/lib.rs"), b"pub fn f() {}\n").unwrap();
    std::fs::write(dir.join("target/debug/app"), vec![7u8; 100_000]).unwrap();
    std::os::unix::fs::symlink("src/main.rs", dir.join("main")).unwrap();
}

fn branch_named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["branches"]
        .as_array()
        .and_then(|branches| branches.iter().find(|b| b["name"] == name))
        .unwrap_or_else(|| panic!("no branch {name} in {list}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branches_show_the_whole_tree_and_are_written_on_their_own() {
    if !require_mount_privilege("branches_show_the_whole_tree_and_are_written_on_their_own") {
        return;
    }
    let mut daemon = Daemon::start();
    let dir = daemon.path("app");
    tree(&dir);
    let before = digest(&dir);
    let (status, token) = daemon.post("/api/watch/check", json!({"path": dir})).await;
    assert_eq!(status, 200, "{token}");

    let (status, forked) = daemon
        .post("/api/fork", json!({"dir": dir, "count": 3}))
        .await;
    assert_eq!(status, 200, "{forked}");
    let branch = |n: u32| PathBuf::from(format!("{}@{n}", dir.display()));
    for n in 1..=3 {
        assert_eq!(
            forked["branches"][n as usize - 1]["path"],
            branch(n).display().to_string()
        );
        assert_eq!(
            digest(&branch(n)),
            before,
            "branch {n} shows the whole tree"
        );
    }
    assert_eq!(digest(&dir), before, "the directory shows what it did");

    // A watch of the directory sees its tree unchanged by the fork: the overlay on it shows
    // the same objects.
    let (_, seen) = daemon
        .post(
            "/api/watch/check",
            json!({"path": dir, "since": token["version"], "paths": true}),
        )
        .await;
    assert_eq!(
        seen["status"], "unchanged",
        "the fork changed nothing in the watch's eyes: {seen}"
    );

    // Each is written on its own.
    std::fs::write(dir.join("README.md"), b"edited in the directory\n").unwrap();
    std::fs::write(branch(1).join("src/main.rs"), b"fn main() { one() }\n").unwrap();
    std::fs::write(branch(1).join("new.txt"), b"made in one\n").unwrap();
    std::fs::remove_dir_all(branch(2).join("target")).unwrap();
    std::fs::rename(branch(2).join("src"), branch(2).join("source")).unwrap();
    let mut expected = before.clone();
    assert_eq!(digest(&branch(3)), expected, "branch 3 untouched");
    expected.insert("README.md".into(), digest(&dir)["README.md"].clone());
    assert_eq!(
        digest(&dir),
        expected,
        "the directory has its own edit only"
    );
    assert_eq!(
        std::fs::read(branch(1).join("README.md")).unwrap(),
        b"the project\n"
    );
    assert!(!dir.join("new.txt").exists() && !branch(3).join("new.txt").exists());
    assert!(branch(2).join("source/deep/lib.rs").is_file() && !dir.join("source").exists());
    assert!(dir.join("target/debug/app").is_file());

    // The directory's own writes after the fork reach its watch.
    let (_, later) = daemon
        .post(
            "/api/watch/check",
            json!({"path": dir, "since": seen["version"], "paths": true}),
        )
        .await;
    assert!(
        later.to_string().contains("README.md"),
        "the edit after the fork is seen: {later}"
    );

    let (status, list) = daemon.get("/api/fork").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["branches"].as_array().map(Vec::len), Some(3), "{list}");
    assert_eq!(branch_named(&list, "1")["changed"], 2, "{list}");
    assert_eq!(branch_named(&list, "3")["changed"], 0, "{list}");
    assert_eq!(branch_named(&list, "3")["deleted"], 0, "{list}");
    assert!(
        branch_named(&list, "2")["deleted"].as_u64() >= Some(2),
        "{list}"
    );
    assert_eq!(
        branch_named(&list, "1")["forkedFrom"],
        dir.display().to_string()
    );

    // A branch of a branch, and the directory forked again: each from what it shows now.
    let one = digest(&branch(1));
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": branch(1), "names": ["x"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let one_x = PathBuf::from(format!("{}@x", branch(1).display()));
    assert_eq!(digest(&one_x), one);
    std::fs::write(branch(1).join("after.txt"), b"after\n").unwrap();
    assert!(!one_x.join("after.txt").exists());
    assert_eq!(
        digest(&branch(1)).len(),
        one.len() + 1,
        "branch 1 still writable"
    );
    let now = digest(&dir);
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["again"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let again = PathBuf::from(format!("{}@again", dir.display()));
    assert_eq!(digest(&again), now);
    std::fs::write(dir.join("src/main.rs"), b"fn main() { later() }\n").unwrap();
    assert_eq!(
        digest(&again),
        now,
        "the second fork froze the directory's edits"
    );
    assert_eq!(
        digest(&branch(3)),
        before,
        "and the first fork's branches are as they were"
    );

    // A restart of the daemon keeps them all.
    let all = [
        dir.clone(),
        branch(1),
        branch(2),
        branch(3),
        one_x.clone(),
        again.clone(),
    ];
    let shown: Vec<_> = all.iter().map(|path| digest(path)).collect();
    daemon.restart();
    let after: Vec<_> = all.iter().map(|path| digest(path)).collect();
    assert_eq!(after, shown, "a restart changes nothing any of them shows");
    let (_, list) = daemon.get("/api/fork").await;
    assert_eq!(list["branches"].as_array().map(Vec::len), Some(5), "{list}");

    // Discarded: gone with what was written in it, the others as they were.
    let (status, body) = daemon
        .post("/api/fork/discard", json!({"path": branch(2)}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(!branch(2).exists(), "the branch's directory is gone");
    let (_, list) = daemon.get("/api/fork").await;
    assert_eq!(list["branches"].as_array().map(Vec::len), Some(4), "{list}");
    assert_eq!(digest(&branch(3)), before);
    let (status, body) = daemon
        .post("/api/fork/discard", json!({"path": branch(1)}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        digest(&one_x),
        one,
        "a branch of a discarded branch keeps what it showed"
    );
    // The last branch standing on what branch 1 wrote goes: that layer goes with it.
    let layers_of = |name: &str| -> Vec<PathBuf> {
        std::fs::read_dir(daemon.state_dir().join("forks"))
            .unwrap()
            .flatten()
            .map(|fork| fork.path().join("branches").join(name))
            .filter(|layer| layer.exists())
            .collect()
    };
    assert_eq!(layers_of("1").len(), 1, "branch 1's writes, frozen for x");
    let (status, body) = daemon
        .post("/api/fork/discard", json!({"path": one_x}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        layers_of("1"),
        Vec::<PathBuf>::new(),
        "no branch stands on it"
    );
    assert_eq!(layers_of("x"), Vec::<PathBuf>::new());
    assert_eq!(digest(&branch(3)), before, "the others as they were");
    assert_eq!(digest(&again), now);

    unmount_all(&daemon);
}

/// The mounts at `dir` itself or beneath it (not a branch's beside it).
fn mounts_in(dir: &Path) -> Vec<String> {
    let at = dir.display().to_string();
    fsd_tests::mounts_under(dir)
        .into_iter()
        .filter(|point| *point == at || point.starts_with(&format!("{at}/")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_while_a_process_is_in_the_directory_copies_it_and_bad_calls_are_named() {
    if !require_mount_privilege(
        "a_fork_while_a_process_is_in_the_directory_copies_it_and_bad_calls_are_named",
    ) {
        return;
    }
    let daemon = Daemon::start();
    let dir = daemon.path("busy");
    tree(&dir);
    let before = digest(&dir);
    let mut sitting = std::process::Command::new("sleep")
        .arg("30")
        .current_dir(&dir)
        .spawn()
        .unwrap();
    // Binding the directory beneath an overlay would leave the process writing the frozen
    // tree: the fork point is a copy, said as such, and the directory is not mounted over.
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": dir, "count": 2}))
        .await;
    assert_eq!(status, 200, "{body}");
    let because = body["copiedBecause"].as_str().unwrap_or_default();
    assert!(
        because.contains(&format!("process {}", sitting.id())),
        "{body}"
    );
    assert!(mounts_in(&dir).is_empty(), "the directory is left as it is");
    let copied = PathBuf::from(format!("{}@1", dir.display()));
    assert_eq!(digest(&copied), before, "the branch shows the tree");
    std::fs::write(
        copied.join("branch.txt"),
        b"in the branch
",
    )
    .unwrap();
    assert!(!dir.join("branch.txt").exists());
    sitting.kill().unwrap();
    sitting.wait().unwrap();
    for n in 1..=2 {
        let (status, body) = daemon
            .post(
                "/api/fork/discard",
                json!({"path": format!("{}@{n}", dir.display())}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let copies: Vec<PathBuf> = std::fs::read_dir(daemon.state_dir().join("forks"))
        .unwrap()
        .flatten()
        .map(|entry| entry.path().join("copy"))
        .filter(|copy| copy.exists())
        .collect();
    assert!(
        copies.is_empty(),
        "the copy goes with its last branch: {copies:?}"
    );
    // A file deleted while held open is in no tree: its holder does not refuse a fork.
    let held = std::fs::File::create(dir.join("held.txt")).unwrap();
    std::fs::remove_file(dir.join("held.txt")).unwrap();
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["held"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    drop(held);
    let (status, body) = daemon
        .post(
            "/api/fork/discard",
            json!({"path": format!("{}@held", dir.display())}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    for (request, code, field) in [
        (
            json!({"dir": dir, "names": ["a/b"]}),
            "VALIDATION_FAILED",
            "names",
        ),
        (
            json!({"dir": dir, "names": ["a", "a"]}),
            "VALIDATION_FAILED",
            "names",
        ),
        (
            json!({"dir": dir, "count": 0}),
            "VALIDATION_FAILED",
            "count",
        ),
        (
            json!({"dir": dir, "count": 2, "names": ["a"]}),
            "VALIDATION_FAILED",
            "count",
        ),
    ] {
        let (status, body) = daemon.post("/api/fork", request.clone()).await;
        assert_eq!(status, 400, "{request}: {body}");
        assert_eq!(body["code"], code, "{request}: {body}");
        assert_eq!(
            body["context"]["validationErrors"][0]["field"], field,
            "{body}"
        );
    }
    // A directory named through a link is forked where it is: its branches beside it.
    let link = daemon.path("busy-link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": link, "names": ["via"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["dir"], dir.display().to_string(), "{body}");
    assert_eq!(
        body["branches"][0]["path"],
        format!("{}@via", dir.display())
    );
    assert_eq!(
        digest(Path::new(&format!("{}@via", dir.display()))),
        digest(&dir)
    );
    let (status, body) = daemon
        .post(
            "/api/fork/discard",
            json!({"path": format!("{}@via", dir.display())}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    std::fs::create_dir(format!("{}@taken", dir.display())).unwrap();
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["taken"]}))
        .await;
    assert_eq!(
        (status.as_u16(), &body["code"]),
        (409, &json!("FILE_EXISTS")),
        "{body}"
    );
    let (status, body) = daemon.post("/api/fork/discard", json!({"path": dir})).await;
    assert_eq!(
        (status.as_u16(), &body["code"]),
        (404, &json!("BRANCH_NOT_FOUND")),
        "{body}"
    );
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": daemon.path("missing")}))
        .await;
    assert_eq!(status.as_u16() / 100, 4, "{body}");

    // A mount in a directory (a restore, a bucket; a bind here) refuses its fork, and a
    // merge into it or from it: no fork layer records what the mount shows.
    let elsewhere = daemon.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let bind = |at: &Path| {
        nix::mount::mount(
            Some(&elsewhere),
            at,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND,
            None::<&str>,
        )
        .unwrap()
    };
    let mounted = daemon.path("mounted");
    tree(&mounted);
    bind(&mounted.join("src"));
    let (status, body) = daemon.post("/api/fork", json!({"dir": mounted})).await;
    assert_eq!(
        (status.as_u16(), &body["code"]),
        (409, &json!("RESOURCE_BUSY")),
        "{body}"
    );
    assert_eq!(
        body["context"]["mount"],
        mounted.join("src").display().to_string(),
        "{body}"
    );
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["m"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    bind(&dir.join("src"));
    let (status, body) = daemon
        .post(
            "/api/fork/merge",
            json!({"branch": format!("{}@m", dir.display())}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), &body["code"]),
        (409, &json!("RESOURCE_BUSY")),
        "{body}"
    );
    // And a fork again of a directory forked before: its new overlay would cover the mount.
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["n"]}))
        .await;
    assert_eq!(
        (status.as_u16(), &body["code"]),
        (409, &json!("RESOURCE_BUSY")),
        "{body}"
    );
    unmount_all(&daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsctl_forks_lists_and_discards_and_commands_run_in_a_branch() {
    if !require_mount_privilege("fsctl_forks_lists_and_discards_and_commands_run_in_a_branch") {
        return;
    }
    let daemon = Daemon::start();
    let dir = daemon.path("repo");
    tree(&dir);
    let dir_arg = dir.display().to_string();
    let out = fsd_tests::fsctl(&daemon, &["fork", &dir_arg, "a", "--name", "b"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let (a, b) = (format!("{dir_arg}@a"), format!("{dir_arg}@b"));
    assert_eq!(printed, format!("{a}\n{b}\n"));

    // A command with a branch as its directory sees the branch and writes into it alone.
    let sandbox = daemon.client().await;
    let ran = sandbox
        .exec_with(&fsd_sdk::api::exec::ExecuteRequest {
            command: "cat README.md && echo made-by-a-command > made.txt".into(),
            cwd: Some(a.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ran.stdout, "the project\n", "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(format!("{a}/made.txt")).unwrap(),
        "made-by-a-command\n"
    );
    assert!(!dir.join("made.txt").exists() && !PathBuf::from(format!("{b}/made.txt")).exists());

    // A branch's snapshot is a normal one: archived and restored elsewhere, it is the branch.
    let archive = format!("/var/backups/fork-branch-{}.sqsh", std::process::id());
    let (status, body) = daemon
        .post(
            "/api/backup/create",
            json!({"dir": a, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let restored = daemon.path("from-branch");
    std::fs::create_dir(&restored).unwrap();
    let (status, body) = daemon
        .post(
            "/api/backup/restore",
            json!({"dir": restored, "archivePath": archive}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(digest(&restored), digest(Path::new(&a)));
    let (status, body) = daemon
        .post("/api/backup/unmount", json!({"dir": restored}))
        .await;
    assert_eq!(status, 200, "{body}");
    fsd_tests::remove_archive(&archive);

    // A background process sitting in a branch holds its discard off.
    let started = sandbox
        .start_process(&fsd_sdk::api::process::StartProcessRequest {
            command: "sleep 30".into(),
            cwd: Some(b.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let out = fsd_tests::fsctl(&daemon, &["fork", "--discard", &b]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("RESOURCE_BUSY"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sandbox.kill_process(&started.id).await.unwrap();

    let out = fsd_tests::fsctl(&daemon, &["--json", "fork", "--list"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(branch_named(&listed, "a")["changed"], 1, "{listed}");
    assert_eq!(branch_named(&listed, "b")["changed"], 0, "{listed}");
    // The kill reaches the process; its discard then goes through.
    let mut discarded = fsd_tests::fsctl(&daemon, &["fork", "--discard", &b]);
    for _ in 0..50 {
        if discarded.status.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        discarded = fsd_tests::fsctl(&daemon, &["fork", "--discard", &b]);
    }
    assert!(
        discarded.status.success(),
        "{}",
        String::from_utf8_lossy(&discarded.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&discarded.stdout),
        format!("discarded {b}\n")
    );
    let out = fsd_tests::fsctl(&daemon, &["fork", "--list"]);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        listed.starts_with(&format!("{a}  from {dir_arg} at ")) && !listed.contains(&b),
        "{listed}"
    );

    // Merged back with fsctl: a dry run changes nothing; a conflict kept exits 3, and
    // `--theirs` settles the next one.
    let stdout = |out: &std::process::Output| String::from_utf8_lossy(&out.stdout).into_owned();
    let out = fsd_tests::fsctl(&daemon, &["merge", &a, "--dry-run"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout(&out),
        format!(
            "would merge {a} into {dir_arg} (1 paths changed on either side since the fork):\n  put made.txt\n"
        )
    );
    assert!(!dir.join("made.txt").exists());
    std::fs::write(dir.join("README.md"), "the directory's\n").unwrap();
    std::fs::write(format!("{a}/README.md"), "a's\n").unwrap();
    let out = fsd_tests::fsctl(&daemon, &["--json", "merge", &a]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["conflicts"][0]["path"], "README.md", "{merged}");
    assert_eq!(
        std::fs::read_to_string(dir.join("made.txt")).unwrap(),
        "made-by-a-command\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).unwrap(),
        "the directory's\n"
    );
    let aside = dir.join("README.md.sync-conflict-remote");
    assert_eq!(std::fs::read_to_string(&aside).unwrap(), "a's\n");
    // Settled by keeping both; both sides change it again, and `--theirs` takes a's.
    std::fs::write(dir.join("README.md"), "the directory's, again\n").unwrap();
    std::fs::write(format!("{a}/README.md"), "a's, again\n").unwrap();
    let out = fsd_tests::fsctl(&daemon, &["merge", &a, "--theirs"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("conflict README.md: theirs won\n"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).unwrap(),
        "a's, again\n"
    );
    unmount_all(&daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_confine_a_branch_beneath_the_root_is_inside_and_the_root_is_not_forked() {
    if !require_mount_privilege(
        "under_confine_a_branch_beneath_the_root_is_inside_and_the_root_is_not_forked",
    ) {
        return;
    }
    let daemon = Daemon::start_with(fsd_tests::Options {
        confine: true,
        ..Default::default()
    });
    let dir = daemon.path("inside");
    tree(&dir);
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["b"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let branch = format!("{}@b", dir.display());
    // The branch is inside the roots: the file calls serve it.
    let (status, body) = daemon
        .post(
            "/api/write",
            json!({"path": format!("{branch}/w.txt"), "content": "in b\n"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = daemon
        .post("/api/read", json!({"path": format!("{branch}/README.md")}))
        .await;
    assert_eq!(
        (status.as_u16(), body["content"].as_str()),
        (200, Some("the project\n")),
        "{body}"
    );
    assert!(!dir.join("w.txt").exists());
    // The workspace root is a root: its branches would be beside it, outside.
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": daemon.root(), "names": ["x"]}))
        .await;
    assert_eq!(
        (status.as_u16(), &body["code"]),
        (403, &json!("PERMISSION_DENIED")),
        "the branch beside the root is outside: {body}"
    );
    let root = daemon.root().display().to_string();
    assert!(
        fsd_tests::mounts_under(&daemon.root())
            .iter()
            .all(|point| point != &root),
        "the root was not forked"
    );
    unmount_all(&daemon);
}

/// A machine that lost its mounts (a container started again with its disk) gets a fork's
/// mounts back at the next start: the directory with its own writes, each branch with its.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_after_the_mounts_were_lost_mounts_the_fork_again() {
    if !require_mount_privilege("a_start_after_the_mounts_were_lost_mounts_the_fork_again") {
        return;
    }
    let mut daemon = Daemon::start();
    let dir = daemon.path("lost");
    tree(&dir);
    let before = digest(&dir);
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["one", "self"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (one, two) = (
        PathBuf::from(format!("{}@one", dir.display())),
        // A branch may be named as the directory's own layer is kept.
        PathBuf::from(format!("{}@self", dir.display())),
    );
    std::fs::write(dir.join("README.md"), b"the directory's own\n").unwrap();
    std::fs::write(one.join("one.txt"), b"one\n").unwrap();
    std::fs::remove_file(two.join("src/main.rs")).unwrap();
    assert!(
        dir.join("src/main.rs").is_file(),
        "the branch's deletion stays in it"
    );
    assert_eq!(
        std::fs::read(two.join("README.md")).unwrap(),
        b"the project\n"
    );
    let shown = [digest(&dir), digest(&one), digest(&two)];

    daemon.stop();
    unmount_all(&daemon);
    assert_eq!(
        digest(&dir),
        before,
        "without its mounts the directory is the frozen tree"
    );
    daemon.resume();
    assert_eq!(
        [digest(&dir), digest(&one), digest(&two)],
        shown,
        "the start mounted the fork again, each with its writes"
    );
    let (_, list) = daemon.get("/api/fork").await;
    assert_eq!(list["branches"].as_array().map(Vec::len), Some(2), "{list}");
    unmount_all(&daemon);
}

/// A branch serves as any directory of the workspace does: its change tokens tell what was
/// written in it, the one-way mirror and a two-way pair keep it exact with a local copy,
/// and a session started in it runs there; none of it reaches the directory it was forked
/// from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_is_watched_mirrored_synced_both_ways_and_worked_in_like_any_directory() {
    if !require_mount_privilege(
        "a_branch_is_watched_mirrored_synced_both_ways_and_worked_in_like_any_directory",
    ) {
        return;
    }
    let daemon = Daemon::start();
    let dir = daemon.path("app");
    tree(&dir);
    let before = digest(&dir);
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": dir, "names": ["w"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let branch = PathBuf::from(format!("{}@w", dir.display()));
    let remote = "app@w";
    let sandbox = daemon.sandbox();

    // Change tokens.
    let first = sandbox.check_changes(remote, None, true).await.unwrap();
    std::fs::write(branch.join("new.txt"), b"written in the branch\n").unwrap();
    let seen = sandbox
        .check_changes(remote, Some(&first.version), true)
        .await
        .unwrap();
    let paths: Vec<String> = seen
        .changes
        .unwrap_or_default()
        .iter()
        .map(|change| change.path.clone())
        .collect();
    assert!(
        paths.iter().any(|path| path.ends_with("new.txt")),
        "{} {paths:?}",
        seen.status
    );

    // The one-way mirror, then again after a directory renamed and a file deleted.
    let mirror = tempfile::tempdir().unwrap();
    let report = sandbox.sync(remote, mirror.path(), None).await.unwrap();
    assert_eq!(crate::sync::difference(&branch, mirror.path()), None);
    std::fs::rename(branch.join("src/deep"), branch.join("src/core")).unwrap();
    std::fs::remove_file(branch.join("README.md")).unwrap();
    sandbox
        .sync(remote, mirror.path(), Some(&report.version))
        .await
        .unwrap();
    assert_eq!(crate::sync::difference(&branch, mirror.path()), None);

    // Two ways: what is made on either side reaches the other.
    let local = tempfile::tempdir().unwrap();
    let options = fsd_sdk::two_way::TwoWayOptions {
        state_root: Some(crate::two_way::state_root(local.path())),
        ..Default::default()
    };
    let mut pair =
        fsd_sdk::two_way::TwoWay::open(daemon.sandbox(), local.path(), remote, options).unwrap();
    pair.pass().await.unwrap();
    std::fs::write(local.path().join("from-local.txt"), b"made locally\n").unwrap();
    std::fs::write(branch.join("from-branch.txt"), b"made in the branch\n").unwrap();
    pair.pass().await.unwrap();
    assert_eq!(
        std::fs::read(branch.join("from-local.txt")).unwrap(),
        b"made locally\n"
    );
    assert_eq!(
        std::fs::read(local.path().join("from-branch.txt")).unwrap(),
        b"made in the branch\n"
    );

    // A session started in the branch runs there.
    let session = sandbox
        .create_session(&fsd_sdk::api::exec::CreateSessionRequest {
            cwd: Some(branch.display().to_string()),
            ..Default::default()
        })
        .await
        .unwrap();
    let ran = sandbox
        .exec_with(&fsd_sdk::api::exec::ExecuteRequest {
            command: "pwd && ls from-local.txt".into(),
            session_id: Some(session.id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        ran.stdout,
        format!("{}\nfrom-local.txt\n", branch.display()),
        "{ran:?}"
    );
    assert_eq!(digest(&dir), before, "none of it reached the directory");
    unmount_all(&daemon);
}
