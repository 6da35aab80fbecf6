//! The SDK's `sync` keeps a local mirror byte-identical to a sandbox subtree.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use fsd_tests::Daemon;

/// Relative path → contents (`None` for directories), leaving out what the watch ignores.
fn snapshot(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            if relative
                .split('/')
                .any(|s| [".git", "node_modules", ".DS_Store"].contains(&s))
            {
                continue;
            }
            if path.is_dir() {
                out.insert(relative, None);
                pending.push(path);
            } else {
                out.insert(relative, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn assert_mirrored(remote: &Path, local: &Path, when: &str) {
    let (remote, local) = (snapshot(remote), snapshot(local));
    if remote != local {
        let only_remote: Vec<_> = remote
            .keys()
            .filter(|k| local.get(*k) != remote.get(*k))
            .take(10)
            .collect();
        let only_local: Vec<_> = local
            .keys()
            .filter(|k| !remote.contains_key(*k))
            .take(10)
            .collect();
        panic!(
            "{when}: mirror differs; remote-only or different: {only_remote:?}; local-only: {only_local:?}"
        );
    }
}

/// Events reach the daemon's journal asynchronously; give them a moment.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn a_mirror_stays_identical_through_edits_bursts_and_restarts() {
    let mut daemon = Daemon::start();
    let remote = daemon.root();
    std::fs::create_dir_all(remote.join("src/deep/er")).unwrap();
    std::fs::write(remote.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    std::fs::write(
        remote.join("src/deep/er/data.bin"),
        [0u8, 159, 146, 150, 255],
    )
    .unwrap();
    std::fs::write(remote.join(".hidden"), "dot").unwrap();
    std::fs::create_dir_all(remote.join("node_modules/pkg")).unwrap();
    std::fs::write(remote.join("node_modules/pkg/index.js"), "skipped").unwrap();
    let local_dir = tempfile::tempdir().unwrap();
    let local = local_dir.path().join("mirror");

    let sandbox = daemon.sandbox();
    let report = sandbox.sync(".", &local, None).await.unwrap();
    assert_eq!(report.mode, "full");
    assert_mirrored(&remote, &local, "first copy");
    assert!(!local.join("node_modules").exists());

    // Creates, edits, renames of a file and a directory, deletes.
    std::fs::write(remote.join("new.txt"), "new").unwrap();
    std::fs::write(remote.join("src/lib.rs"), "pub fn g() {}\n").unwrap();
    std::fs::rename(remote.join(".hidden"), remote.join("visible")).unwrap();
    std::fs::rename(remote.join("src/deep"), remote.join("src/shallow")).unwrap();
    std::fs::write(remote.join("temp"), "x").unwrap();
    std::fs::remove_file(remote.join("temp")).unwrap();
    settle().await;
    let report = sandbox
        .sync(".", &local, Some(&report.version))
        .await
        .unwrap();
    assert_eq!(report.mode, "incremental", "{report:?}");
    assert!(report.renamed >= 2, "{report:?}");
    assert_mirrored(&remote, &local, "after edits");
    std::fs::remove_dir_all(remote.join("src/shallow")).unwrap();
    settle().await;
    let report = sandbox
        .sync(".", &local, Some(&report.version))
        .await
        .unwrap();
    assert_mirrored(&remote, &local, "after a directory delete");

    // A burst of 10,000 files.
    std::fs::create_dir(remote.join("burst")).unwrap();
    for i in 0..10_000 {
        std::fs::write(remote.join(format!("burst/f{i:05}")), i.to_string()).unwrap();
    }
    settle().await;
    let report = sandbox
        .sync(".", &local, Some(&report.version))
        .await
        .unwrap();
    assert_mirrored(&remote, &local, "after a 10,000-file burst");

    // A restart, with changes while the daemon was down.
    daemon.stop();
    std::fs::write(remote.join("src/lib.rs"), "pub fn h() {}\n").unwrap();
    std::fs::remove_file(remote.join("burst/f00001")).unwrap();
    std::fs::write(remote.join("while-down.txt"), "down").unwrap();
    daemon.resume();
    let sandbox = daemon.sandbox();
    let report = sandbox
        .sync(".", &local, Some(&report.version))
        .await
        .unwrap();
    assert_eq!(
        report.mode, "incremental",
        "the token survived the restart: {report:?}"
    );
    assert_eq!((report.downloaded, report.deleted), (2, 1), "{report:?}");
    assert_mirrored(&remote, &local, "after a restart");

    let report = sandbox
        .sync(".", &local, Some(&report.version))
        .await
        .unwrap();
    assert_eq!(report.mode, "unchanged");
}
