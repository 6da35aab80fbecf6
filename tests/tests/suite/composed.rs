//! Features composed: what one feature does to a directory (a restore's overlay, a release,
//! a bucket mount, a mount made beside the daemon, a restart that mounts a restore again)
//! is seen by every feature that watches, snapshots or syncs it, so none of them loses work.

use std::path::Path;
use std::time::Duration;

use fsctl::trusted::{BackupOptions, Backups, DirectoryBackup};
use fsd_api::watch::{WatchEvent, WatchRequest};
use fsd_s3::ObjectStore;
use fsd_tests::s3::Store;
use fsd_tests::{Daemon, require_mount_privilege};
use futures_util::StreamExt;

use super::backup::digest;
use super::sync::difference;

/// A mirror of `remote` kept by the SDK's `sync`, with the version it holds.
struct Mirror {
    remote: String,
    local: tempfile::TempDir,
    version: Option<String>,
}

impl Mirror {
    fn new(remote: &str) -> Self {
        Self {
            remote: remote.into(),
            local: tempfile::tempdir().unwrap(),
            version: None,
        }
    }

    /// Syncs and checks the mirror equals `tree`; returns the sync's mode.
    async fn sync_equal(
        &mut self,
        sandbox: &fsd_sdk::Sandbox,
        tree: &Path,
        when: &str,
    ) -> &'static str {
        let report = match sandbox
            .sync(&self.remote, self.local.path(), self.version.as_deref())
            .await
        {
            // A full copy of a directory that holds nothing into a mirror that holds
            // something halts; the steps emptied it on purpose, so it is asked for.
            Err(err) if err.code() == Some(&fsd_sdk::ErrorCode::SyncHalted) => {
                assert!(
                    super::sync::difference(tree, tempfile::tempdir().unwrap().path()).is_none(),
                    "{when}: the mirror halted for a directory that holds something: {err}"
                );
                let options = fsd_sdk::MirrorOptions {
                    accept_emptied: true,
                };
                sandbox
                    .sync_with(
                        &self.remote,
                        self.local.path(),
                        self.version.as_deref(),
                        options,
                    )
                    .await
            }
            other => other,
        }
        .unwrap_or_else(|err| panic!("{when}: sync: {err}"));
        self.version = Some(report.version);
        if let Some(difference) = difference(tree, self.local.path()) {
            panic!("{when}: {difference} (sync said {})", report.mode);
        }
        report.mode
    }
}

/// The paths of a change list, as `type path`.
async fn changes_since(
    sandbox: &fsd_sdk::Sandbox,
    remote: &str,
    since: &str,
) -> (String, Vec<String>) {
    let answer = sandbox
        .check_changes(remote, Some(since), true)
        .await
        .unwrap();
    let lines = answer
        .changes
        .unwrap_or_default()
        .iter()
        .map(|change| {
            let name = Path::new(&change.path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("{} {name}", change.change)
        })
        .collect();
    (answer.status, lines)
}

/// A snapshot restored from the store alone into a directory of its own equals `expected`.
async fn restores_to(
    daemon: &Daemon,
    backups: &Backups,
    snapshot: &DirectoryBackup,
    expected: &std::collections::BTreeMap<String, String>,
    when: &str,
) {
    let target = daemon.path(&format!("check-{}", &snapshot.id[..8]));
    backups
        .restore_backup(
            &daemon.sandbox(),
            &snapshot.id,
            target.to_str().unwrap(),
            None,
        )
        .await
        .unwrap_or_else(|err| panic!("{when}: restore: {err}"));
    assert_eq!(&digest(&target), expected, "{when}: the snapshot's tree");
    daemon
        .sandbox()
        .release_restore(target.to_str().unwrap())
        .await
        .unwrap();
}

/// An SSE stream of a watch, open.
type Events = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<WatchEvent, fsd_sdk::SdkError>> + Send>,
>;

/// `remote` (the directory `tree`) mirrored, a token of it now, and a stream of its events.
async fn watched(
    sandbox: &fsd_sdk::Sandbox,
    remote: &str,
    tree: &Path,
) -> (Mirror, String, Events) {
    let mut mirror = Mirror::new(remote);
    mirror.sync_equal(sandbox, tree, "the first sync").await;
    let base = sandbox
        .check_changes(remote, None, true)
        .await
        .unwrap()
        .version;
    let mut events: Events = Box::pin(
        sandbox
            .watch(&WatchRequest {
                path: remote.into(),
                ..Default::default()
            })
            .await
            .unwrap(),
    );
    assert!(matches!(
        events.next().await,
        Some(Ok(WatchEvent::Watching { .. }))
    ));
    (mirror, base, events)
}

/// What an SSE stream tells (`type name`), until every line of `expected` is among it.
async fn told(events: &mut Events, expected: &[&str]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !expected.iter().all(|line| seen.iter().any(|s| s == line)) {
        let event = tokio::time::timeout_at(deadline, events.next())
            .await
            .unwrap_or_else(|_| panic!("{expected:?} never all told; told: {seen:?}"))
            .expect("the stream goes on")
            .expect("an event");
        match event {
            WatchEvent::Event {
                event_type, path, ..
            } => {
                let name = Path::new(&path)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                seen.push(format!("{event_type} {name}"));
            }
            WatchEvent::Resync { reason } => seen.push(format!("resync {reason}")),
            other => panic!("unexpected {other:?} after {seen:?}"),
        }
    }
    seen
}

/// The store's bucket, its `files/` prefix, mounted by the daemon at `path` through a proxy
/// that holds the keys (kept alive by the caller while the mount is used).
pub(crate) async fn mount_bucket(
    daemon: &Daemon,
    store: &Store,
    path: &Path,
) -> fsd_s3::CredentialProxy {
    let proxy = fsd_s3::CredentialProxy::start(
        "127.0.0.1:0".parse().unwrap(),
        fsd_control::Scope {
            bucket: fsd_tests::s3::BUCKET.into(),
            prefix: "files/".into(),
            read_only: false,
        },
        store.object_store(None).upstream(),
    )
    .await
    .unwrap();
    let (status, body) = daemon
        .post(
            "/api/mounts",
            serde_json::json!({"bucket": fsd_tests::s3::BUCKET, "mountPath": path,
                "proxyUrl": proxy.url(), "prefix": "/files"}),
        )
        .await;
    assert_eq!(status, 200, "a bucket mount: {body}");
    proxy
}

/// The first failure: a whole-directory restore under a watch. The token, a stream
/// opened before it, the mirror and the next incremental snapshot all see the restore and
/// the work after it; then the same for a release, and for a restart of the daemon that
/// mounts a restore again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_and_a_release_under_a_watch_reach_tokens_streams_mirrors_and_snapshots() {
    if !require_mount_privilege(
        "a_restore_and_a_release_under_a_watch_reach_tokens_streams_mirrors_and_snapshots",
    ) {
        return;
    }
    let mut daemon = Daemon::start();
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let sandbox = daemon.sandbox();
    let dir = daemon.path("r3");
    let dir_name = dir.to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("one.txt"), b"one\n").unwrap();
    std::fs::write(dir.join("sub/kept.txt"), b"kept\n").unwrap();
    let (mut mirror, base, mut events) = watched(&sandbox, "r3", &dir).await;

    let s = backups
        .create_backup(&sandbox, &dir_name, BackupOptions::default())
        .await
        .unwrap();
    std::fs::write(dir.join("two.txt"), b"two\n").unwrap();
    mirror
        .sync_equal(&sandbox, &dir, "before the restore")
        .await;
    told(&mut events, &["create two.txt"]).await;

    backups
        .restore_backup(&sandbox, &s.id, &dir_name, None)
        .await
        .unwrap();
    std::fs::write(dir.join("three.txt"), b"three\n").unwrap();
    std::fs::write(dir.join("sub/after.txt"), b"after\n").unwrap();
    told(
        &mut events,
        &["delete two.txt", "create three.txt", "create after.txt"],
    )
    .await;
    let (status, lines) = changes_since(&sandbox, "r3", &base).await;
    assert_eq!(status, "changed");
    for line in ["created three.txt", "created after.txt"] {
        assert!(lines.contains(&line.to_string()), "{line} in {lines:?}");
    }
    assert!(
        !lines.iter().any(|l| l.ends_with(" two.txt")),
        "made and gone since the token: {lines:?}"
    );
    let mode = mirror.sync_equal(&sandbox, &dir, "after the restore").await;
    assert_eq!(mode, "incremental");
    let after_restore = digest(&dir);
    let s2 = backups
        .create_backup(&sandbox, &dir_name, BackupOptions::default())
        .await
        .unwrap();
    assert_eq!(
        s2.parent.as_deref(),
        Some(s.id.as_str()),
        "incremental over S"
    );
    assert_eq!(
        backups.read_file(&s2.id, "three.txt").await.unwrap(),
        b"three\n"
    );
    restores_to(&daemon, &backups, &s2, &after_restore, "S2").await;

    // A release shows what the directory held before the restore.
    sandbox.release_restore(&dir_name).await.unwrap();
    std::fs::write(dir.join("four.txt"), b"four\n").unwrap();
    told(
        &mut events,
        &["create two.txt", "delete three.txt", "create four.txt"],
    )
    .await;
    mirror.sync_equal(&sandbox, &dir, "after the release").await;
    assert!(dir.join("two.txt").exists() && !dir.join("three.txt").exists());
    let after_release = digest(&dir);
    let s3 = backups
        .create_backup(&sandbox, &dir_name, BackupOptions::default())
        .await
        .unwrap();
    restores_to(
        &daemon,
        &backups,
        &s3,
        &after_release,
        "S3, after the release",
    )
    .await;

    // A restore the stop takes down and the start mounts again, with writes on both sides.
    backups
        .restore_backup(&sandbox, &s2.id, &dir_name, None)
        .await
        .unwrap();
    std::fs::write(dir.join("five.txt"), b"five\n").unwrap();
    mirror
        .sync_equal(&sandbox, &dir, "before the restart")
        .await;
    drop(events);
    daemon.restart();
    let sandbox = daemon.sandbox();
    std::fs::write(dir.join("six.txt"), b"six\n").unwrap();
    let mode = mirror.sync_equal(&sandbox, &dir, "after the restart").await;
    assert_eq!(mode, "incremental", "the token survived the restart");
    let after_restart = digest(&dir);
    let s4 = backups
        .create_backup(&sandbox, &dir_name, BackupOptions::default())
        .await
        .unwrap();
    assert_eq!(s4.parent.as_deref(), Some(s3.id.as_str()));
    restores_to(
        &daemon,
        &backups,
        &s4,
        &after_restart,
        "S4, after the restart",
    )
    .await;
    sandbox.release_restore(&dir_name).await.unwrap();
}

/// Mounts inside a watched tree that the daemon did not make (a tmpfs mounted beside it) and
/// a bucket mount it made: each mount and unmount is told to the token, the stream and the
/// mirror as the difference between what the path showed and what it shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounts_made_and_taken_away_inside_a_watched_tree_are_told() {
    if !require_mount_privilege("mounts_made_and_taken_away_inside_a_watched_tree_are_told")
        || !fsd_tests::available_or_skip(
            Path::new("/dev/fuse").exists(),
            "mounts_made_and_taken_away_inside_a_watched_tree_are_told",
            "/dev/fuse",
        )
    {
        return;
    }
    let daemon = Daemon::start();
    let sandbox = daemon.sandbox();
    let dir = daemon.path("w");
    std::fs::create_dir_all(dir.join("data/deep")).unwrap();
    std::fs::write(dir.join("top.txt"), b"top\n").unwrap();
    std::fs::write(dir.join("data/old.txt"), b"old\n").unwrap();
    std::fs::write(dir.join("data/deep/older.txt"), b"older\n").unwrap();
    let (mut mirror, base, mut events) = watched(&sandbox, "w", &dir).await;

    // A tmpfs over a directory of the tree, and writes into it.
    let tmpfs = fsd_tests::Mount::tmpfs(&dir.join("data"), "mode=0755");
    std::fs::write(dir.join("data/new.txt"), b"new\n").unwrap();
    told(
        &mut events,
        &["delete old.txt", "delete deep", "create new.txt"],
    )
    .await;
    let (_, lines) = changes_since(&sandbox, "w", &base).await;
    for line in ["deleted old.txt", "deleted deep", "created new.txt"] {
        assert!(lines.contains(&line.to_string()), "{line} in {lines:?}");
    }
    mirror.sync_equal(&sandbox, &dir, "over the tmpfs").await;
    std::fs::create_dir(dir.join("data/made")).unwrap();
    std::fs::write(dir.join("data/made/inside.txt"), b"inside\n").unwrap();
    told(&mut events, &["create made", "create inside.txt"]).await;
    mirror
        .sync_equal(&sandbox, &dir, "written in the tmpfs")
        .await;
    drop(tmpfs);
    std::fs::write(dir.join("after-umount.txt"), b"x\n").unwrap();
    told(
        &mut events,
        &[
            "delete new.txt",
            "delete made",
            "create old.txt",
            "create deep",
            "create after-umount.txt",
        ],
    )
    .await;
    mirror.sync_equal(&sandbox, &dir, "after the umount").await;

    // A bucket mounted by the daemon inside the tree: what the bucket holds appears.
    let store = Store::start();
    let client = fsd_s3::ObjectClient::new(
        &store.url,
        fsd_tests::s3::BUCKET,
        Some(store.object_store(None).upstream()),
    )
    .unwrap();
    for (key, content) in [
        ("files/seeded/in-bucket.txt", "from the bucket\n"),
        ("files/at-top.txt", "at the top\n"),
    ] {
        client.put(key, bytes::Bytes::from(content)).await.unwrap();
    }
    let bucket = dir.join("bucket");
    let _proxy = mount_bucket(&daemon, &store, &bucket).await;
    std::fs::write(bucket.join("written.txt"), b"through the mount\n").unwrap();
    told(
        &mut events,
        &[
            "create bucket",
            "create in-bucket.txt",
            "create written.txt",
        ],
    )
    .await;
    mirror
        .sync_equal(&sandbox, &dir, "with the bucket mounted")
        .await;
    assert_eq!(
        std::fs::read(mirror.local.path().join("bucket/seeded/in-bucket.txt")).unwrap(),
        b"from the bucket\n"
    );
    // `rm -r` of the mount point: what the bucket held (what came with the mount too) goes,
    // the mount point stays (busy), and the deletes are told like any others.
    let before_delete = mirror.version.clone().unwrap();
    let removed = std::fs::remove_dir_all(&bucket);
    assert!(removed.is_err(), "the mount point itself stays");
    assert!(
        !bucket.join("at-top.txt").exists(),
        "a file deleted through the mount is not found again by its name"
    );
    told(
        &mut events,
        &["delete seeded", "delete at-top.txt", "delete written.txt"],
    )
    .await;
    let (_, lines) = changes_since(&sandbox, "w", &before_delete).await;
    for line in [
        "deleted seeded",
        "deleted at-top.txt",
        "deleted written.txt",
    ] {
        assert!(lines.contains(&line.to_string()), "{line} in {lines:?}");
    }
    mirror
        .sync_equal(&sandbox, &dir, "after deletes through the mount")
        .await;
    let (status, body) = fsd_tests::reply(
        daemon
            .request(reqwest::Method::DELETE, "/api/mounts")
            .json(&serde_json::json!({ "mountPath": bucket })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    std::fs::write(dir.join("after-bucket.txt"), b"x\n").unwrap();
    told(&mut events, &["delete bucket", "create after-bucket.txt"]).await;
    mirror
        .sync_equal(&sandbox, &dir, "after the bucket's unmount")
        .await;
}

/// A mount over a directory above a watched one: the watched path shows another tree (or
/// none), and a token is answered `resync`, never a list that leaves the mount out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_above_a_watched_directory_is_never_silence() {
    if !require_mount_privilege("a_mount_above_a_watched_directory_is_never_silence") {
        return;
    }
    let daemon = Daemon::start();
    let sandbox = daemon.sandbox();
    let outer = daemon.path("outer");
    std::fs::create_dir_all(outer.join("inner")).unwrap();
    std::fs::write(outer.join("inner/a.txt"), b"a\n").unwrap();
    let mut mirror = Mirror::new("outer/inner");
    mirror
        .sync_equal(&sandbox, &outer.join("inner"), "the first sync")
        .await;
    let base = sandbox
        .check_changes("outer/inner", None, true)
        .await
        .unwrap()
        .version;
    let tmpfs = fsd_tests::Mount::tmpfs(&outer, "mode=0755");
    let answer = sandbox
        .check_changes("outer/inner", Some(&base), true)
        .await;
    assert!(
        answer.is_err() || answer.as_ref().unwrap().status == "resync",
        "a watched directory a mount took away: {answer:?}"
    );
    std::fs::create_dir(outer.join("inner")).unwrap();
    std::fs::write(outer.join("inner/b.txt"), b"b\n").unwrap();
    mirror
        .sync_equal(&sandbox, &outer.join("inner"), "over the mount")
        .await;
    drop(tmpfs);
    mirror
        .sync_equal(&sandbox, &outer.join("inner"), "after the umount")
        .await;
}

/// `fsctl` with the store's keys.
fn fsctl_with_store(daemon: &Daemon, store: &Store, args: &[&str]) -> std::process::Output {
    std::process::Command::new(fsd_tests::binary("fsctl"))
        .args(["--url", &daemon.url])
        .args(args)
        .env_remove("FSD_TOKEN")
        .env("FSD_S3_ENDPOINT", &store.url)
        .env("FSD_S3_ACCESS_KEY", fsd_tests::s3::ACCESS_KEY)
        .env("FSD_S3_SECRET_KEY", fsd_tests::s3::SECRET_KEY)
        .output()
        .unwrap()
}

/// The second failure: a snapshot others build on is never deleted from under
/// them. The delete is refused naming them (exit 1, `BACKUP_HAS_DEPENDENTS`), the log says
/// what builds on what, retention keeps the parents and says why, and every snapshot still
/// restores; deleted newest first, each delete is allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_others_build_on_is_not_deleted_from_under_them() {
    if !require_mount_privilege("a_snapshot_others_build_on_is_not_deleted_from_under_them") {
        return;
    }
    let daemon = Daemon::start();
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let sandbox = daemon.sandbox();
    let dir = daemon.path("chain");
    let dir_name = dir.to_str().unwrap().to_string();
    std::fs::create_dir_all(&dir).unwrap();
    let mut snapshots: Vec<(DirectoryBackup, std::collections::BTreeMap<String, String>)> =
        Vec::new();
    for step in 0..3 {
        std::fs::write(dir.join(format!("step-{step}.txt")), format!("{step}\n")).unwrap();
        let snapshot = backups
            .create_backup(&sandbox, &dir_name, BackupOptions::default())
            .await
            .unwrap();
        snapshots.push((snapshot, digest(&dir)));
    }
    let ids: Vec<&str> = snapshots.iter().map(|(s, _)| s.id.as_str()).collect();
    assert_eq!(snapshots[1].0.parent.as_deref(), Some(ids[0]));
    assert_eq!(snapshots[2].0.parent.as_deref(), Some(ids[1]));

    let refused = fsctl_with_store(&daemon, &store, &["backup", "delete", ids[0]]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("BACKUP_HAS_DEPENDENTS") && stderr.contains(ids[1]),
        "the refusal names what is built on it: {stderr}"
    );
    let err = backups.delete_backup(ids[1]).await.unwrap_err();
    assert_eq!(err.code(), Some(&fsd_sdk::ErrorCode::BackupHasDependents));
    let log = fsctl_with_store(&daemon, &store, &["backup", "log", &dir_name]);
    let log = fsd_tests::succeeded(&log);
    let line_of = |id: &str| log.lines().find(|l| l.starts_with(id)).unwrap().to_string();
    assert!(
        line_of(ids[0]).contains(&format!("built on by {}", ids[1])),
        "{log}"
    );
    assert!(
        line_of(ids[1]).contains(&format!("built on by {}", ids[2])),
        "{log}"
    );
    assert!(!line_of(ids[2]).contains("built on by"), "{log}");

    let kept = fsctl_with_store(
        &daemon,
        &store,
        &["backup", "forget", &dir_name, "--keep-last", "1"],
    );
    let kept = fsd_tests::succeeded(&kept);
    assert!(
        kept.contains(&format!(
            "keep    {}  parent of kept snapshot {}",
            ids[1], ids[2]
        )),
        "{kept}"
    );
    assert!(
        !kept.contains("removed"),
        "nothing a kept snapshot needs goes: {kept}"
    );
    for (snapshot, expected) in &snapshots {
        restores_to(&daemon, &backups, snapshot, expected, "after the refusals").await;
    }
    for id in ids.iter().rev() {
        let deleted = fsctl_with_store(&daemon, &store, &["backup", "delete", id]);
        fsd_tests::succeeded(&deleted);
    }
    assert!(backups.log(Some(&dir_name)).await.unwrap().is_empty());
}

/// A directory under a whole restore forks: the fork point is a copy of what the restore
/// shows (the restore stays, with what was written to it), the branch merges back into the
/// restore, and the next snapshot holds the merged work. It was refused (409: a mount in the
/// directory), and the only way to a fork, a release, discarded the restore's writes. A
/// branch forked (by overlays) before the restore merges into it too, three ways against
/// that fork point: what the directory changed since is what the restore shows beside it
/// (the directory's own layers lie beneath the restore). That merge was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_directory_forks_from_a_copy_and_takes_its_branch_back() {
    if !require_mount_privilege("a_restored_directory_forks_from_a_copy_and_takes_its_branch_back")
    {
        return;
    }
    let daemon = Daemon::start();
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let sandbox = daemon.sandbox();
    let dir = daemon.path("restored");
    let dir_name = dir.to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("a.txt"), b"a\n").unwrap();
    std::fs::write(dir.join("sub/b.txt"), b"b\n").unwrap();
    let (status, body) = daemon
        .post(
            "/api/fork",
            serde_json::json!({"dir": dir, "names": ["old"]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["copiedBecause"].is_null(), "{body}");
    let old = daemon.path("restored@old");
    std::fs::write(old.join("old.txt"), b"made in the old branch\n").unwrap();
    std::fs::write(old.join("sub/b.txt"), b"b, in the old branch\n").unwrap();
    std::fs::write(old.join("c.txt"), b"c, in the old branch\n").unwrap();
    std::fs::write(dir.join("c.txt"), b"c, here before the snapshot\n").unwrap();
    let s = backups
        .create_backup(&sandbox, &dir_name, BackupOptions::default())
        .await
        .unwrap();
    std::fs::write(dir.join("before-restore.txt"), b"gone with the restore\n").unwrap();
    backups
        .restore_backup(&sandbox, &s.id, &dir_name, None)
        .await
        .unwrap();
    std::fs::write(dir.join("d.txt"), b"written to the restore\n").unwrap();
    let restored = digest(&dir);

    let (status, body) = daemon
        .post("/api/fork", serde_json::json!({"dir": dir, "names": ["x"]}))
        .await;
    assert_eq!(status, 200, "a fork of a restored directory: {body}");
    assert!(
        body["copiedBecause"]
            .as_str()
            .is_some_and(|because| because.contains("restore")),
        "says it forked from a copy, and why: {body}"
    );
    let branch = daemon.path("restored@x");
    assert_eq!(digest(&branch), restored, "the branch shows the restore");
    assert_eq!(digest(&dir), restored, "the fork leaves the directory");

    std::fs::write(branch.join("a.txt"), b"a, in the branch\n").unwrap();
    std::fs::write(branch.join("sub/e.txt"), b"made in the branch\n").unwrap();
    std::fs::write(dir.join("f.txt"), b"made here meanwhile\n").unwrap();
    // The branch forked before the restore: against its fork point, the directory (as the
    // restore shows it) made c.txt, d.txt and f.txt, the branch old.txt and c.txt and
    // changed sub/b.txt. Only c.txt is both sides'.
    let (status, merged) = daemon
        .post("/api/fork/merge", serde_json::json!({"branch": old}))
        .await;
    assert_eq!(status, 200, "a branch forked before the restore: {merged}");
    assert_eq!(merged["failed"], serde_json::json!([]), "{merged}");
    let conflicts = merged["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{merged}");
    assert_eq!(conflicts[0]["path"], "c.txt", "{merged}");
    assert_eq!(conflicts[0]["resolution"], "keptBoth", "{merged}");
    let aside = conflicts[0]["aside"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(dir.join(&aside)).unwrap(),
        "c, in the old branch\n"
    );
    let (status, merged) = daemon
        .post("/api/fork/merge", serde_json::json!({"branch": branch}))
        .await;
    assert_eq!(status, 200, "a merge into a restored directory: {merged}");
    assert_eq!(merged["failed"], serde_json::json!([]), "{merged}");
    assert_eq!(merged["conflicts"], serde_json::json!([]), "{merged}");
    let mut expected = vec![
        ("a.txt", "a, in the branch\n"),
        ("c.txt", "c, here before the snapshot\n"),
        (aside.as_str(), "c, in the old branch\n"),
        ("d.txt", "written to the restore\n"),
        ("f.txt", "made here meanwhile\n"),
        ("old.txt", "made in the old branch\n"),
        ("sub/b.txt", "b, in the old branch\n"),
        ("sub/e.txt", "made in the branch\n"),
    ];
    expected.sort();
    holds_files(&dir, &expected, "after the merges");

    // The restore is still the directory's top: a snapshot now holds the merged work.
    let s2 = backups
        .create_backup(&sandbox, &dir_name, BackupOptions::default())
        .await
        .unwrap();
    assert_eq!(
        backups.read_file(&s2.id, "sub/e.txt").await.unwrap(),
        b"made in the branch\n".to_vec()
    );
    restores_to(&daemon, &backups, &s2, &digest(&dir), "after the merge").await;

    let merged_tree = digest(&dir);
    for discarded in [&branch, &old] {
        let (status, body) = daemon
            .post("/api/fork/discard", serde_json::json!({"path": discarded}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(digest(&dir), merged_tree, "a discard leaves the directory");
    sandbox.release_restore(&dir_name).await.unwrap();
    assert!(
        dir.join("before-restore.txt").exists() && !dir.join("d.txt").exists(),
        "a release shows what the directory held before the restore"
    );
    // The directory's own fork overlay outlives the daemon: taken down with the test.
    super::fork::unmount_all(&daemon);
}

/// `dir` holds these files (sorted by path) with this content, and no other file.
fn holds_files(dir: &Path, expected: &[(&str, &str)], when: &str) {
    let files: Vec<String> = digest(dir)
        .into_iter()
        .filter(|(_, kind)| kind.starts_with("file"))
        .map(|(path, _)| path)
        .collect();
    let paths: Vec<&str> = expected.iter().map(|(path, _)| *path).collect();
    assert_eq!(files, paths, "the files {when}");
    for (path, text) in expected {
        assert_eq!(
            std::fs::read_to_string(dir.join(path)).unwrap(),
            *text,
            "{path} {when}"
        );
    }
}

/// A branch under a whole restore merges back as it shows: what it changed since its fork
/// point is what the restore shows beside that point (its own layers lie beneath the
/// restore), not what it wrote before the restore. That merge was refused (409). A discard
/// of the branch then takes the restore with it; its archives stayed mounted and its record
/// outlived the branch's directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_branch_merges_back_what_it_shows() {
    if !require_mount_privilege("a_restored_branch_merges_back_what_it_shows") {
        return;
    }
    let mut daemon = Daemon::start();
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let sandbox = daemon.sandbox();
    let dir = daemon.path("work");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("a.txt"), b"a\n").unwrap();
    std::fs::write(dir.join("sub/b.txt"), b"b\n").unwrap();
    let (status, body) = daemon
        .post("/api/fork", serde_json::json!({"dir": dir, "names": ["y"]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let branch = daemon.path("work@y");
    let branch_name = branch.to_str().unwrap().to_string();
    std::fs::write(branch.join("y1.txt"), b"kept by the snapshot\n").unwrap();
    let s = backups
        .create_backup(&sandbox, &branch_name, BackupOptions::default())
        .await
        .unwrap();
    std::fs::write(branch.join("y2.txt"), b"gone with the restore\n").unwrap();
    std::fs::write(branch.join("a.txt"), b"a, changed before the restore\n").unwrap();
    backups
        .restore_backup(&sandbox, &s.id, &branch_name, None)
        .await
        .unwrap();
    std::fs::write(branch.join("y3.txt"), b"written to the restore\n").unwrap();
    std::fs::write(dir.join("d.txt"), b"made here meanwhile\n").unwrap();

    let (status, merged) = daemon
        .post("/api/fork/merge", serde_json::json!({"branch": branch}))
        .await;
    assert_eq!(status, 200, "a merge of a restored branch: {merged}");
    assert_eq!(merged["failed"], serde_json::json!([]), "{merged}");
    assert_eq!(merged["conflicts"], serde_json::json!([]), "{merged}");
    let expected = [
        ("a.txt", "a\n"),
        ("d.txt", "made here meanwhile\n"),
        ("sub/b.txt", "b\n"),
        ("y1.txt", "kept by the snapshot\n"),
        ("y3.txt", "written to the restore\n"),
    ];
    holds_files(&dir, &expected, "after the merge");

    // A discard of the branch takes the restore on it with it: nothing of the restore is
    // left mounted or on record (a record outliving its directory could never be released,
    // and a restart would try to mount it again).
    let (status, body) = daemon
        .post("/api/fork/discard", serde_json::json!({"path": branch}))
        .await;
    assert_eq!(status, 200, "a discard of a restored branch: {body}");
    assert!(!branch.exists(), "the branch's directory goes");
    let left: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|line| line.contains(daemon.state_dir().to_str().unwrap()))
        .filter(|line| !line.contains("/forks/"))
        .map(str::to_string)
        .collect();
    assert!(left.is_empty(), "the restore's mounts go: {left:#?}");
    let released = sandbox.release_restore(&branch_name).await;
    assert!(
        released.is_err(),
        "no restore is left to release: {released:?}"
    );
    daemon.restart();
    let (status, body) = daemon.get("/api/fork").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !branch.exists(),
        "a restart makes nothing at the branch's path"
    );
    holds_files(&dir, &expected, "after the discard and a restart");
    super::fork::unmount_all(&daemon);
}

/// The seventh failure: a path restore gives back times, modes and (as root)
/// owners, so the snapshot compared with the live directory right after restoring from it
/// lists nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_restore_gives_back_times_modes_and_owners() {
    if !require_mount_privilege("a_path_restore_gives_back_times_modes_and_owners") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let daemon = Daemon::start();
    let store = Store::start();
    let dir = daemon.path("kept");
    let dir_name = dir.to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    std::fs::write(dir.join("a.txt"), b"a\n").unwrap();
    std::fs::write(dir.join("sub/tool"), b"#!/bin/sh\n").unwrap();
    std::fs::write(dir.join("sub/deeper/b.txt"), b"b\n").unwrap();
    std::os::unix::fs::symlink("a.txt", dir.join("sub/link")).unwrap();
    let mode = |path: &str, mode: u32| {
        std::fs::set_permissions(dir.join(path), std::fs::Permissions::from_mode(mode)).unwrap()
    };
    mode("sub/tool", 0o4750);
    mode("sub", 0o2775);
    nix::unistd::chown(
        &dir.join("sub/deeper/b.txt"),
        Some(nix::unistd::Uid::from_raw(1234)),
        Some(nix::unistd::Gid::from_raw(1234)),
    )
    .unwrap();
    let made = fsctl_with_store(&daemon, &store, &["backup", "create", &dir_name]);
    let id = fsd_tests::succeeded(&made).trim().to_string();
    let unchanged = fsctl_with_store(&daemon, &store, &["backup", "diff", &id]);
    assert_eq!(fsd_tests::succeeded(&unchanged), "", "nothing changed yet");

    // Edits of content, mode, owner and time, and a delete.
    std::fs::write(dir.join("a.txt"), b"changed\n").unwrap();
    mode("sub/tool", 0o755);
    mode("sub", 0o755);
    nix::unistd::chown(
        &dir.join("sub/deeper/b.txt"),
        Some(nix::unistd::Uid::from_raw(0)),
        None,
    )
    .unwrap();
    std::fs::remove_file(dir.join("sub/link")).unwrap();
    std::fs::File::options()
        .append(true)
        .open(dir.join("sub/deeper/b.txt"))
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    let changed = fsctl_with_store(&daemon, &store, &["backup", "diff", &id]);
    assert_eq!(
        changed.status.code(),
        Some(1),
        "diff(1)'s status: {changed:?}"
    );
    assert_ne!(String::from_utf8_lossy(&changed.stdout), "");

    let restored = fsctl_with_store(
        &daemon,
        &store,
        &[
            "backup", "restore", &id, &dir_name, "--path", "a.txt", "--path", "sub",
        ],
    );
    fsd_tests::succeeded(&restored);
    let after = fsctl_with_store(&daemon, &store, &["backup", "diff", &id]);
    assert_eq!(
        fsd_tests::succeeded(&after),
        "",
        "the live directory is the snapshot again"
    );
    let meta = std::fs::metadata(dir.join("sub/tool")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o4750, "setuid kept");

    // What the live tree holds in the way is the caller's: a file where the snapshot's
    // directory goes, a directory where its file goes, each refused by name (400), and
    // left as it is.
    std::fs::remove_dir_all(dir.join("sub/deeper")).unwrap();
    std::fs::write(dir.join("sub/deeper"), b"in the way\n").unwrap();
    std::fs::remove_file(dir.join("a.txt")).unwrap();
    std::fs::create_dir(dir.join("a.txt")).unwrap();
    for (path, code) in [("sub", "NOT_DIRECTORY"), ("a.txt", "IS_DIRECTORY")] {
        let refused = fsctl_with_store(
            &daemon,
            &store,
            &["backup", "restore", &id, &dir_name, "--path", path],
        );
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success(),
            "--path {path} over what is in the way"
        );
        assert!(said.contains(code), "--path {path}: {code} in {said}");
    }
    assert_eq!(
        std::fs::read(dir.join("sub/deeper")).unwrap(),
        b"in the way\n"
    );
    assert!(dir.join("a.txt").is_dir());
}

/// Files under /var/backups now.
fn archives_now() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/var/backups")
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The eighth failure: a daemon killed while a snapshot is created and uploaded
/// leaves nothing of it in /var/backups once it starts again (its archive, the index beside
/// it and their temp files).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_cut_short_by_a_crash_leaves_nothing() {
    if !require_mount_privilege("a_create_cut_short_by_a_crash_leaves_nothing") {
        return;
    }
    let mut daemon = Daemon::start();
    let store = Store::start();
    // The store behind a proxy that never answers a part's upload: the crash comes while
    // the archive and its index wait to be uploaded.
    let proxy = fsd_tests::s3::FaultProxy::start(&store.url).await;
    proxy.set(fsd_tests::s3::Faults {
        stall: u32::MAX,
        ..Default::default()
    });
    let dir = daemon.path("big");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..8 {
        std::fs::write(dir.join(format!("f{i}")), fsd_tests::noise(1_000_000, i)).unwrap();
    }
    let before = archives_now();
    let sandbox = daemon.sandbox();
    let backups = Backups::new(store.object_store(Some(&proxy.url)));
    let dir_name = dir.to_str().unwrap().to_string();
    let create = tokio::spawn(async move {
        backups
            .create_backup(&sandbox, &dir_name, BackupOptions::default())
            .await
    });
    // Killed once the archive and its index are written, while they are uploaded. The
    // archive is this create's when its index lists `f0` with f0's inode: other tests write
    // in /var/backups meanwhile.
    let f0 = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(dir.join("f0")).unwrap());
    let ours = |index: &str| {
        std::fs::read(Path::new("/var/backups").join(index))
            .ok()
            .and_then(|bytes| fsd_backup::index::Index::decode(&bytes).ok())
            .is_some_and(|index| {
                index
                    .entries
                    .iter()
                    .any(|entry| entry.path == Path::new("f0") && entry.inode == f0)
            })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let stem = loop {
        let new: Vec<String> = archives_now().difference(&before).cloned().collect();
        if let Some(index) = new
            .iter()
            .find(|name| name.ends_with(".sqsh.index") && ours(name))
        {
            break index.trim_end_matches(".sqsh.index").to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no index written: {new:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    daemon.crash();
    assert!(create.await.unwrap().is_err(), "the create was cut short");
    daemon.resume();
    let left: Vec<String> = archives_now()
        .into_iter()
        .filter(|name| name.starts_with(&stem))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "what the create wrote is gone");
}

#[path = "composed/simulation.rs"]
mod simulation;

/// Runs `command` in session `session` and answers its stdout (it must succeed).
async fn in_session(daemon: &Daemon, session: &str, command: &str) -> String {
    let out = daemon
        .posted(
            "/api/execute",
            serde_json::json!({"command": command, "sessionId": session}),
        )
        .await;
    assert_eq!(out["exitCode"], 0, "{command}: {out}");
    out["stdout"].as_str().unwrap_or_default().to_string()
}

/// A session's shell that stands in a directory when a restore is mounted on it (or on a
/// directory above it) works in what the restore shows from its next command on: it reads
/// the restored files and its writes are seen by everyone else, where its shell's own
/// directory, hidden by the mount, would have given it the files the restore replaced and
/// kept its writes where nothing shows them. A background command started from it too; and
/// after a release, what the directory shows again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_standing_in_a_restored_directory_works_in_what_it_shows() {
    if !require_mount_privilege("a_session_standing_in_a_restored_directory_works_in_what_it_shows")
    {
        return;
    }
    use serde_json::json;
    let daemon = Daemon::start();
    let dir = daemon.path("w");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("a.txt"), b"snapshot\n").unwrap();
    std::fs::write(dir.join("sub/b.txt"), b"snapshot b\n").unwrap();
    let archive = format!("/var/backups/standing-{}.sqsh", std::process::id());
    daemon
        .posted(
            "/api/backup/create",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    std::fs::write(dir.join("a.txt"), b"after\n").unwrap();
    std::fs::write(dir.join("sub/b.txt"), b"after b\n").unwrap();
    let quoted = |path: &Path| format!("'{}'", path.display());
    // One session stands in the directory, one beneath it.
    let cd = format!("cd {} && cat a.txt", quoted(&dir));
    assert_eq!(in_session(&daemon, "top", &cd).await, "after\n");
    let cd = format!("cd {} && cat b.txt", quoted(&dir.join("sub")));
    assert_eq!(in_session(&daemon, "below", &cd).await, "after b\n");

    daemon
        .posted(
            "/api/backup/restore",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    assert_eq!(
        in_session(&daemon, "top", "cat a.txt; echo made > top.txt").await,
        "snapshot\n",
        "the session standing in the directory reads what the restore shows"
    );
    assert_eq!(
        in_session(&daemon, "below", "cat b.txt; echo made > below.txt").await,
        "snapshot b\n",
        "the session beneath it too"
    );
    assert_eq!(std::fs::read(dir.join("top.txt")).unwrap(), b"made\n");
    assert_eq!(std::fs::read(dir.join("sub/below.txt")).unwrap(), b"made\n");
    daemon
        .posted(
            "/api/process/start",
            json!({"command": "echo background > bg.txt", "sessionId": "top"}),
        )
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !dir.join("bg.txt").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the background command's file is not in what the directory shows"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(std::fs::read(dir.join("bg.txt")).unwrap(), b"background\n");

    // A snapshot of the directory now holds the session's work.
    let layer = format!("/var/backups/standing-layer-{}.sqsh", std::process::id());
    daemon
        .posted(
            "/api/backup/create",
            json!({"dir": dir, "archivePath": layer, "layer": true}),
        )
        .await;
    let check = daemon.path("check");
    std::fs::create_dir_all(&check).unwrap();
    daemon
        .posted(
            "/api/backup/restore",
            json!({"dir": check, "archivePath": layer, "parentArchivePaths": [archive]}),
        )
        .await;
    assert_eq!(
        digest(&check),
        digest(&dir),
        "the snapshot after holds the sessions' work"
    );
    for made in ["top.txt", "sub/below.txt", "bg.txt"] {
        assert!(check.join(made).is_file(), "{made} in the snapshot after");
    }
    daemon
        .posted("/api/backup/unmount", json!({"dir": check}))
        .await;

    daemon
        .posted("/api/backup/unmount", json!({"dir": dir}))
        .await;
    assert_eq!(
        in_session(&daemon, "top", "cat a.txt; ls").await,
        "after\na.txt\nsub\n",
        "after the release, what the directory held before"
    );
    assert_eq!(in_session(&daemon, "below", "cat b.txt").await, "after b\n");
    fsd_tests::remove_archive(&archive);
    fsd_tests::remove_archive(&layer);
}

/// What a restore's or a release's answer names as left behind: pid, command, what it holds.
fn left_behind(answer: &serde_json::Value) -> Vec<(u64, String, String)> {
    answer["processesLeftBehind"]
        .as_array()
        .unwrap_or_else(|| panic!("no processes named: {answer}"))
        .iter()
        .map(|p| {
            (
                p["pid"].as_u64().unwrap(),
                p["command"].as_str().unwrap().to_string(),
                p["holds"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A restore mounted on a directory hides the directory its programs stand in without
/// moving them: a server or a build started there goes on reading and writing what the
/// restore replaced. The restore names each such process (its working directory there, or
/// a file it holds open there), and none of those that follow the directory by name (a
/// session's shell) nor any outside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_names_the_processes_it_leaves_behind() {
    if !require_mount_privilege("a_restore_names_the_processes_it_leaves_behind") {
        return;
    }
    use serde_json::json;
    let daemon = Daemon::start();
    let dir = daemon.path("w");
    let elsewhere = daemon.path("elsewhere");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(dir.join("a.txt"), b"snapshot\n").unwrap();
    let archive = format!("/var/backups/left-behind-{}.sqsh", std::process::id());
    daemon
        .posted(
            "/api/backup/create",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    let quoted = |path: &Path| format!("'{}'", path.display());
    in_session(&daemon, "agent", &format!("cd {}", quoted(&dir))).await;
    let started = |command: String, cwd: &Path| {
        let daemon = &daemon;
        let cwd = cwd.to_path_buf();
        async move {
            daemon
                .posted(
                    "/api/process/start",
                    json!({"command": command, "cwd": cwd}),
                )
                .await["pid"]
                .as_u64()
                .unwrap()
        }
    };
    let server = started("exec sleep 300".into(), &dir).await;
    let log = dir.join("server.log");
    let writer = started(
        format!("exec 3>>{}; exec sleep 301", quoted(&log)),
        &elsewhere,
    )
    .await;
    started("exec sleep 302".into(), &elsewhere).await;
    // Each has become what it runs (a start answers before the program's exec); the
    // API's pids are the sandbox's, these the host's.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let host_pid = |argument: &'static str| async move {
        let wanted = format!("sleep\0{argument}\0").into_bytes();
        loop {
            let found = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
                .find(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted)
                });
            if let Some(pid) = found {
                return pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "sleep {argument} never ran"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let mut host = Vec::new();
    for argument in ["300", "301", "302"] {
        host.push(host_pid(argument).await);
    }
    while std::fs::read_dir(format!("/proc/{}/fd", host[1])).map_or(0, |d| d.count()) < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the log was never opened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let answer = daemon
        .posted(
            "/api/backup/restore",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    let mut named = left_behind(&answer);
    named.sort();
    let mut expected = vec![
        (
            server,
            "sleep 300".to_string(),
            "its working directory".into(),
        ),
        (
            writer,
            "sleep 301".to_string(),
            format!("an open file, {}", log.display()),
        ),
    ];
    expected.sort();
    assert_eq!(named, expected, "{answer}");
    // The session named none goes on in what the directory shows.
    assert_eq!(
        in_session(&daemon, "agent", "cat a.txt").await,
        "snapshot\n"
    );

    // A release names those that stand in the restore it takes away (what they write
    // there from now on nothing shows), not those it shows their directory again.
    let in_restore = started("exec sleep 303".into(), &dir).await;
    host.push(host_pid("303").await);
    let answer = daemon
        .posted("/api/backup/unmount", json!({"dir": dir}))
        .await;
    assert_eq!(
        left_behind(&answer),
        [(
            in_restore,
            "sleep 303".into(),
            "its working directory".into()
        )],
        "{answer}"
    );

    // The time machine's restore names them too, and fsctl warns of each.
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let snapshot = backups
        .create_backup(
            &daemon.sandbox(),
            dir.to_str().unwrap(),
            BackupOptions::default(),
        )
        .await
        .unwrap();
    let restored = fsctl_with_store(
        &daemon,
        &store,
        &["backup", "restore", &snapshot.id, dir.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&restored.stderr);
    assert!(restored.status.success(), "{stderr}");
    for (pid, command, holds) in &expected {
        let warning =
            format!("warning: process {pid} ({command}) still holds {holds} in the directory");
        assert!(stderr.contains(&warning), "{warning}: {stderr}");
    }
    assert_eq!(stderr.matches("warning: process").count(), 2, "{stderr}");
    let in_restore = started("exec sleep 304".into(), &dir).await;
    host.push(host_pid("304").await);
    let released = fsctl_with_store(
        &daemon,
        &store,
        &["backup", "release", dir.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&released.stderr);
    assert!(released.status.success(), "{stderr}");
    let warning = format!(
        "warning: process {in_restore} (sleep 304) still holds its working directory in the \
         restore the release took away"
    );
    assert!(stderr.contains(&warning), "{warning}: {stderr}");
    assert_eq!(stderr.matches("warning: process").count(), 1, "{stderr}");

    // A restore with nobody in the directory names nobody.
    for &pid in &host {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    in_session(&daemon, "agent", "cd /").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while host
        .iter()
        .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the sleeps never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answer = daemon
        .posted(
            "/api/backup/restore",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    assert!(answer.get("processesLeftBehind").is_none(), "{answer}");
    daemon
        .posted("/api/backup/unmount", json!({"dir": dir}))
        .await;
    fsd_tests::remove_archive(&archive);
}

/// The watched directory itself removed and made again (an agent that starts over:
/// `rm -rf app && git clone … app`, or a tool that replaces the directory by a rename):
/// the token, the mirror and the next incremental snapshot all have the new tree, and
/// whatever is written in it afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_directory_removed_and_made_again_is_followed() {
    if !require_mount_privilege("a_watched_directory_removed_and_made_again_is_followed") {
        return;
    }
    let daemon = Daemon::start();
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let sandbox = daemon.sandbox();
    let dir = daemon.path("app");
    let dir_name = dir.to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("old.txt"), b"old\n").unwrap();
    std::fs::write(dir.join("sub/old.txt"), b"old sub\n").unwrap();
    let (mut mirror, base, _events) = watched(&sandbox, "app", &dir).await;
    let s = backups
        .create_backup(&sandbox, &dir_name, BackupOptions::default())
        .await
        .unwrap();

    for (round, how) in [
        "rm -rf app && mkdir -p app/src && echo new > app/src/new.txt",
        "mkdir -p app.next/lib && echo swapped > app.next/lib/swapped.txt && rm -rf app && mv app.next app",
    ]
    .into_iter()
    .enumerate()
    {
        let parent = dir.parent().unwrap().to_path_buf();
        daemon
            .posted(
                "/api/execute",
                serde_json::json!({"command": how, "cwd": parent}),
            )
            .await;
        // Written a moment later, in the new directory.
        tokio::time::sleep(Duration::from_millis(300)).await;
        std::fs::write(dir.join(format!("later-{round}.txt")), b"later\n").unwrap();
        let (status, lines) = changes_since(&sandbox, "app", &base).await;
        assert!(
            status == "changed" || status == "resync",
            "round {round}: {status} {lines:?}"
        );
        if status == "changed" {
            let later = format!("created later-{round}.txt");
            assert!(lines.contains(&later), "round {round}: {later} in {lines:?}");
        }
        mirror
            .sync_equal(&sandbox, &dir, &format!("round {round}: after {how}"))
            .await;
        let now = digest(&dir);
        let snapshot = backups
            .create_backup(&sandbox, &dir_name, BackupOptions::default())
            .await
            .unwrap();
        assert!(snapshot.parent.is_some(), "incremental");
        restores_to(&daemon, &backups, &snapshot, &now, &format!("round {round}")).await;
        // Written again after the snapshot: the next one has it.
        std::fs::write(dir.join(format!("after-{round}.txt")), b"after\n").unwrap();
        let now = digest(&dir);
        let next = backups
            .create_backup(&sandbox, &dir_name, BackupOptions::default())
            .await
            .unwrap();
        restores_to(&daemon, &backups, &next, &now, &format!("round {round}, next")).await;
        mirror
            .sync_equal(&sandbox, &dir, &format!("round {round}: after the write"))
            .await;
    }
    drop(s);
}

/// A bucket mounted in a watched directory, written by another writer (another sandbox,
/// the trusted side): no kernel event tells the watch, so a token check looks at what is
/// below the mount again. The token lists the object made and the one changed, the mirror
/// carries them, and the next incremental snapshot has them, where the check answered
/// `unchanged` and the snapshot kept the bucket's old content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_written_elsewhere_reaches_tokens_mirrors_and_snapshots() {
    let test = "a_bucket_written_elsewhere_reaches_tokens_mirrors_and_snapshots";
    if !require_mount_privilege(test)
        || !fsd_tests::available_or_skip(Path::new("/dev/fuse").exists(), test, "/dev/fuse")
    {
        return;
    }
    let daemon = Daemon::start();
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let sandbox = daemon.sandbox();
    let dir = daemon.path("w");
    let dir_name = dir.to_str().unwrap().to_string();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("local.txt"), b"local\n").unwrap();
    let elsewhere = fsd_s3::ObjectClient::new(
        &store.url,
        fsd_tests::s3::BUCKET,
        Some(store.object_store(None).upstream()),
    )
    .unwrap();
    let put = |key: &'static str, content: &'static str| {
        let elsewhere = &elsewhere;
        async move {
            use fsd_s3::ObjectStore;
            elsewhere
                .put(key, bytes::Bytes::from(content))
                .await
                .unwrap();
        }
    };
    put("files/one.txt", "one\n").await;
    put("files/deep/old.txt", "old\n").await;
    let _proxy = mount_bucket(&daemon, &store, &dir.join("bucket")).await;
    let (mut mirror, base, _events) = watched(&sandbox, "w", &dir).await;
    let first = backups
        .create_backup(&sandbox, &dir_name, BackupOptions::default())
        .await
        .unwrap();

    put("files/two.txt", "two\n").await;
    put("files/one.txt", "one, changed elsewhere\n").await;
    put("files/deep/new/made.txt", "made\n").await;
    // Past the mount's cache (cacheTtlMs, 1 s): what it shows is the bucket's.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, lines) = changes_since(&sandbox, "w", &base).await;
    assert_eq!(status, "changed", "{lines:?}");
    for line in ["created two.txt", "modified one.txt", "created made.txt"] {
        assert!(lines.contains(&line.to_string()), "{line} in {lines:?}");
    }
    mirror.sync_equal(&sandbox, &dir, "the mirror").await;
    let now = digest(&dir);
    let second = backups
        .create_backup(&sandbox, &dir_name, BackupOptions::default())
        .await
        .unwrap();
    assert_eq!(
        second.parent.as_deref(),
        Some(first.id.as_str()),
        "incremental"
    );
    restores_to(&daemon, &backups, &second, &now, "the snapshot after").await;
    // Nothing more changed: the next look finds nothing.
    let token = sandbox
        .check_changes("w", None, false)
        .await
        .unwrap()
        .version;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (status, lines) = changes_since(&sandbox, "w", &token).await;
    assert_eq!(status, "unchanged", "{lines:?}");
}
