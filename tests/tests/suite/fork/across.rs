//! A workspace fanned out to other sandboxes through the backup store and merged back:
//! a fork point sent from one daemon (`backup create --fork`; a copy of the directory, as a
//! process works in it), restored in two others,
//! their work snapshotted there as layers and brought back as branches of the directory
//! it came from, each merged three ways against the fork point; what the merges make is
//! held equal to the merge of the whole trees. The branches brought back survive a start
//! that lost their mounts, their archives go with their discard, and snapshots that were
//! not built on a fork point sent from the directory are refused by name.

use std::path::Path;

use fsctl::trusted::{BackupOptions, Backups};
use fsd_sdk::merge::{Entries, Mode};
use fsd_sdk::{ErrorCode, SdkError};
use fsd_tests::s3::Store;
use fsd_tests::{Daemon, require_mount_privilege};
use serde_json::json;

use super::merge::entries;
use super::{tree, unmount_all};
use crate::backup::{digest, forget_local};

fn text(dir: &Path, relative: &str, content: &str) {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// A layer of what was done in `dir` (a restore of the fork point) since it was restored.
async fn work_sent_back(backups: &Backups, daemon: &Daemon, dir: &Path, sent: &str) -> String {
    let layer = backups
        .create_backup(
            &daemon.sandbox(),
            dir.to_str().unwrap(),
            BackupOptions {
                layer: true,
                ..Default::default()
            },
        )
        .await
        .expect("a layer of the work");
    assert_eq!(
        layer.parent.as_deref(),
        Some(sent),
        "built on the fork point"
    );
    // The sandbox it comes back to has to fetch it.
    forget_local(&layer.id);
    layer.id
}

/// Merges `branch` into `dir` and holds `dir` equal to the merge of the whole trees
/// against `ancestor` (the tree sent); answers the merge.
async fn merged_as_whole(
    daemon: &Daemon,
    dir: &Path,
    branch: &Path,
    ancestor: &Entries,
) -> serde_json::Value {
    let whole = fsd_sdk::merge::merge(ancestor, &entries(dir), &entries(branch), Mode::TwoWaySafe);
    let (status, merged) = daemon
        .post("/api/fork/merge", json!({"branch": branch}))
        .await;
    assert_eq!(status, 200, "{merged}");
    assert_eq!(merged["failed"], json!([]), "{merged}");
    assert_eq!(merged["changedMeanwhile"], json!([]), "{merged}");
    assert_eq!(
        entries(dir),
        whole.agreed,
        "the merge made what the merge of the whole trees decides: {merged}"
    );
    assert_eq!(
        merged["conflicts"].as_array().map(Vec::len),
        Some(whole.conflicts.len()),
        "{merged}"
    );
    merged
}

/// `dir` sent as a fork point.
async fn send(
    backups: &Backups,
    daemon: &Daemon,
    dir: &Path,
) -> Result<fsctl::trusted::DirectoryBackup, SdkError> {
    let options = BackupOptions {
        fork: true,
        ..Default::default()
    };
    backups
        .create_backup(&daemon.sandbox(), dir.to_str().unwrap(), options)
        .await
}

fn refused_by_from(result: Result<fsd_sdk::api::backup::ForkResponse, SdkError>) {
    match result {
        Err(SdkError::Api { status, body }) => {
            assert_eq!(status, 400, "{body:?}");
            assert_eq!(body.code, ErrorCode::ValidationFailed, "{body:?}");
            assert_eq!(body.context["field"], "from", "{body:?}");
        }
        other => panic!("a snapshot not built on a fork point sent from here: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_fanned_out_to_two_sandboxes_comes_back_as_branches_and_merges() {
    if !require_mount_privilege(
        "work_fanned_out_to_two_sandboxes_comes_back_as_branches_and_merges",
    ) {
        return;
    }
    let mut here = Daemon::start();
    let (one, two) = (Daemon::start(), Daemon::start());
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let dir = here.path("app");
    tree(&dir);
    text(&dir, "docs/guide.md", "the guide\n");
    let sandbox = here.sandbox();

    // Refused: a fork point is archived whole, and frozen as a fork is, so not while a
    // process is in the directory.
    let code_of = |result: Result<_, SdkError>| match result {
        Err(SdkError::Api { status, body }) => (status, body.code, body.context["field"].clone()),
        Ok(_) => panic!("sent where it should have been refused"),
        Err(other) => panic!("{other}"),
    };
    let both = backups
        .create_backup(
            &sandbox,
            dir.to_str().unwrap(),
            BackupOptions {
                fork: true,
                layer: true,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(
        code_of(both),
        (400, ErrorCode::InvalidBackupConfig, json!("fork"))
    );
    // A process works in the directory all along (a dev server, a build): the fork point
    // sent is a copy of it, and the directory is not mounted over.
    let mut inside = std::process::Command::new("sleep")
        .arg("60")
        .current_dir(&dir)
        .spawn()
        .unwrap();
    // Sent: the directory frozen and archived whole, still writable where it is.
    let sent = send(&backups, &here, &dir)
        .await
        .expect("a fork point sent");
    assert_eq!(sent.parent, None, "a fork point is archived whole");
    assert!(
        fsd_tests::mounts_under(&dir).is_empty(),
        "a copy was sent: the directory the process works in is left as it is"
    );
    let at_send = entries(&dir);
    let (_, list) = here.get("/api/fork").await;
    assert_eq!(
        list["branches"],
        json!([]),
        "sending makes no branch: {list}"
    );
    text(&dir, "README.md", "the project, as edited here\n");
    text(&dir, "here.txt", "made here after the send\n");

    // Worked on in two other sandboxes, each from the snapshot.
    let there = [(&one, one.path("work")), (&two, two.path("elsewhere/app"))];
    for (daemon, work) in &there {
        std::fs::create_dir_all(work.parent().unwrap()).unwrap();
        backups
            .restore_backup(&daemon.sandbox(), &sent.id, work.to_str().unwrap(), None)
            .await
            .expect("the fork point restored there");
        assert_eq!(entries(work), at_send, "the sandbox shows the tree sent");
    }
    let work_one = &there[0].1;
    text(work_one, "src/main.rs", "fn main() { one(); }\n");
    text(work_one, "one.txt", "made in sandbox one\n");
    text(work_one, "README.md", "the project, as edited in one\n");
    std::fs::rename(work_one.join("src/deep"), work_one.join("src/core")).unwrap();
    std::fs::remove_file(work_one.join("target/debug/app")).unwrap();
    let work_two = &there[1].1;
    text(work_two, "docs/guide.md", "the guide, rewritten in two\n");
    std::fs::remove_dir_all(work_two.join("target")).unwrap();
    std::os::unix::fs::symlink("docs/guide.md", work_two.join("guide")).unwrap();
    let layer_one = work_sent_back(&backups, &one, work_one, &sent.id).await;
    let layer_two = work_sent_back(&backups, &two, work_two, &sent.id).await;

    // Back here as branches: each shows exactly the tree its sandbox had.
    let received = backups
        .branch_from(
            &sandbox,
            &layer_one,
            dir.to_str().unwrap(),
            vec!["one".into()],
        )
        .await
        .expect("sandbox one's work as a branch");
    let branch_one = Path::new(&received.branches[0].path).to_path_buf();
    assert_eq!(branch_one, super::merge::branch(&dir, "one"));
    assert_eq!(
        digest(&branch_one),
        digest(work_one),
        "the branch is sandbox one's tree"
    );
    let received = backups
        .branch_from(&sandbox, &layer_two, dir.to_str().unwrap(), Vec::new())
        .await
        .expect("sandbox two's work as a branch");
    let branch_two = super::merge::branch(&dir, &layer_two[..8]);
    assert_eq!(received.branches[0].path, branch_two.display().to_string());
    assert_eq!(
        digest(&branch_two),
        digest(work_two),
        "the branch is sandbox two's tree"
    );
    let (_, list) = here.get("/api/fork").await;
    let from = |name: &str| {
        list["branches"]
            .as_array()
            .and_then(|all| all.iter().find(|b| b["name"] == name))
            .map(|b| b["receivedFrom"].clone())
    };
    assert_eq!(
        from("one"),
        Some(json!(format!("/var/backups/{layer_one}.sqsh"))),
        "{list}"
    );

    // A start that lost every mount brings the received branches back with their writes.
    text(&branch_two, "written-here.txt", "in the received branch\n");
    let shown = [digest(&dir), digest(&branch_one), digest(&branch_two)];
    here.stop();
    unmount_all(&here);
    // Their archives removed meanwhile (a cleanup of /var/backups): the branches keep their
    // own links to them.
    for layer in [&layer_one, &layer_two] {
        std::fs::remove_file(format!("/var/backups/{layer}.sqsh")).unwrap();
    }
    here.resume();
    assert_eq!(
        [digest(&dir), digest(&branch_one), digest(&branch_two)],
        shown,
        "the start mounted the received branches again, their archives' names gone"
    );
    std::fs::remove_file(branch_two.join("written-here.txt")).unwrap();
    let sandbox = here.sandbox();

    // Merged three ways against the tree sent: one's rename arrives as a move, the
    // README both edited is kept both ways; then two's work on what one's merge made.
    let merged = merged_as_whole(&here, &dir, &branch_one, &at_send).await;
    assert!(
        merged["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["op"] == "move" && c["path"] == "src/deep" && c["to"] == "src/core"),
        "{merged}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).unwrap(),
        "the project, as edited here\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md.sync-conflict-remote")).unwrap(),
        "the project, as edited in one\n"
    );
    merged_as_whole(&here, &dir, &branch_two, &at_send).await;
    assert_eq!(
        std::fs::read_to_string(dir.join("docs/guide.md")).unwrap(),
        "the guide, rewritten in two\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("here.txt")).unwrap(),
        "made here after the send\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("one.txt")).unwrap(),
        "made in sandbox one\n"
    );

    // Refused by name: a snapshot not built on a fork point sent from the directory, and
    // a fork point brought back to another directory.
    let plain = backups
        .create_backup(
            &one.sandbox(),
            work_one.to_str().unwrap(),
            BackupOptions {
                full: true,
                ..Default::default()
            },
        )
        .await
        .expect("a plain snapshot");
    refused_by_from(
        backups
            .branch_from(&sandbox, &plain.id, dir.to_str().unwrap(), Vec::new())
            .await,
    );
    let other = here.path("other");
    tree(&other);
    refused_by_from(
        backups
            .branch_from(
                &sandbox,
                &layer_one,
                other.to_str().unwrap(),
                vec!["x".into()],
            )
            .await,
    );

    let _ = inside.kill();
    let _ = inside.wait();

    // Discarded, a received branch takes its archive's mount with it.
    for branch in [&branch_one, &branch_two] {
        let (status, body) = here
            .post("/api/fork/discard", json!({"path": branch}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let archives = here.state_dir().join("forks/archives");
    let left = fsd_tests::mounts_under(&archives);
    assert!(
        left.is_empty(),
        "archive mounts left after the discards: {left:?}"
    );
    for daemon in [&one, &two] {
        unmount_all(daemon);
    }
    unmount_all(&here);
}

/// The merge of work brought back from another sandbox proven against the merge of whole
/// trees. For each seed a tree is made here at random (the sync property test's workload)
/// and sent as a fork point; the other sandbox restores it, and both it and the directory
/// here are edited at random (writes, appends, truncates, renames of files and
/// directories, swaps, deletes, directories removed and made again, links, modes); the
/// work there is snapshotted as a layer, brought back here as a branch, which must show
/// exactly the tree the other sandbox had, and merged: the directory must then hold what
/// `fsd_merge::merge` of the three whole trees decides. So a layer archive carries every
/// kind of change such that the branch stacked on the frozen fork point is the tree made
/// elsewhere, and the merge of it reads every path either side changed. Seeds from the day
/// (`FSD_SEED_DAY`); `FSD_ACROSS_SEED` replays one, `FSD_ACROSS_SEEDS` sets how many (16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_simulation_of_work_brought_back_merges_as_the_whole_trees_merge() {
    use crate::sync::workload::{Rng, Workload};
    if !require_mount_privilege(
        "a_seeded_simulation_of_work_brought_back_merges_as_the_whole_trees_merge",
    ) {
        return;
    }
    let seeds: Vec<u64> = match std::env::var("FSD_ACROSS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => {
            let count = std::env::var("FSD_ACROSS_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(16u64);
            let base = fsd_tests::seed_base("work brought back");
            (0..count).map(|i| base.wrapping_add(i)).collect()
        }
    };
    let (here, there) = (Daemon::start(), Daemon::start());
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    for seed in seeds {
        let mut rng = Rng::new(seed);
        let name = format!("sim{seed:x}");
        let dir = here.path(&name);
        std::fs::create_dir(&dir).unwrap();
        let into = Workload {
            root: dir.clone(),
            remote: name.clone(),
        };
        let mut done = Vec::new();
        for _ in 0..30 {
            done.push(super::merge::edit(&here, &into, &mut rng));
        }
        let sent = send(&backups, &here, &dir)
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: send: {e}"));
        let ancestor = entries(&dir);
        let work = there.path(&name);
        backups
            .restore_backup(&there.sandbox(), &sent.id, work.to_str().unwrap(), None)
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: restore there: {e}"));
        let elsewhere = Workload {
            root: work.clone(),
            remote: name.clone(),
        };
        for _ in 0..40 {
            let (daemon, side, label) = if rng.percent(50) {
                (&here, &into, "here")
            } else {
                (&there, &elsewhere, "there")
            };
            let what = super::merge::edit(daemon, side, &mut rng);
            done.push(format!("{label}: {what}"));
        }
        let layer = work_sent_back(&backups, &there, &work, &sent.id).await;
        done.push("the work there sent back as a layer".into());
        let replay = |done: &[String]| {
            format!(
                "seed {seed} (FSD_ACROSS_SEED={seed} replays it) after:\n  {}",
                done.join("\n  ")
            )
        };
        backups
            .branch_from(
                &here.sandbox(),
                &layer,
                dir.to_str().unwrap(),
                vec!["b".into()],
            )
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", replay(&done)));
        let branch = Workload {
            root: super::merge::branch(&dir, "b"),
            remote: format!("{name}@b"),
        };
        assert_eq!(
            entries(&branch.root),
            entries(&work),
            "the branch brought back is the tree made there\n{}",
            replay(&done)
        );
        super::merge::merged_as_whole(&here, seed, &ancestor, &into, &branch, &mut done).await;
    }
    for daemon in [&here, &there] {
        unmount_all(daemon);
    }
}
