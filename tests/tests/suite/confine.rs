//! --confine: paths that resolve outside the workspace and extra roots are refused.

use std::os::unix::fs::symlink;

use fsd_tests::{Daemon, Options, assert_error};
use reqwest::{Method, StatusCode};
use serde_json::json;

/// A process in the sandbox swapping two names (a directory and a link out) with
/// `RENAME_EXCHANGE`, as fast as it can, until stopped.
pub(crate) struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Swapper {
    pub(crate) fn start(a: std::path::PathBuf, b: std::path::PathBuf) -> Swapper {
        Self::start_every(a, b, std::time::Duration::ZERO)
    }

    /// As [`Swapper::start`], resting `pause` between swaps (so that slower routes also
    /// meet moments without one).
    pub(crate) fn start_every(
        a: std::path::PathBuf,
        b: std::path::PathBuf,
        pause: std::time::Duration,
    ) -> Swapper {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut swaps = 0;
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let swapped = nix::fcntl::renameat2(
                    nix::fcntl::AT_FDCWD,
                    &a,
                    nix::fcntl::AT_FDCWD,
                    &b,
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                );
                match swapped {
                    Ok(()) => swaps += 1,
                    // A restore mounted on the directory: the kernel moves no mount point.
                    Err(nix::errno::Errno::EBUSY) => {}
                    // The names went (a move took them): nothing left to swap.
                    Err(nix::errno::Errno::ENOENT) => break,
                    Err(errno) => panic!("swap: {errno}"),
                }
                if !pause.is_zero() {
                    std::thread::sleep(pause);
                }
            }
            swaps
        });
        Swapper { stop, thread }
    }

    /// Stops the swaps; answers how many were made.
    pub(crate) fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

fn confined(extra: Vec<std::path::PathBuf>) -> Daemon {
    Daemon::start_with(Options {
        confine: true,
        allow_roots: extra,
        ..Options::default()
    })
}

#[tokio::test]
async fn escapes_are_refused_with_403() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    let daemon = confined(vec![]);
    symlink(outside.path(), daemon.path("escape")).unwrap();
    symlink(outside.path().join("secret"), daemon.path("secret-link")).unwrap();
    std::fs::create_dir(daemon.path("sub")).unwrap();
    let outside_abs = outside.path().join("secret").display().to_string();
    let cases = [
        ("/api/read", json!({"path": "../x"})),
        ("/api/read", json!({"path": outside_abs})),
        ("/api/read", json!({"path": "escape/secret"})),
        ("/api/read", json!({"path": "secret-link"})),
        ("/api/read", json!({"path": "sub/../../x"})),
        (
            "/api/write",
            json!({"path": "escape/new.txt", "content": "x"}),
        ),
        ("/api/write", json!({"path": "secret-link", "content": "x"})),
        ("/api/mkdir", json!({"path": "escape/newdir"})),
        ("/api/list-files", json!({"path": "escape"})),
        ("/api/exists", json!({"path": "/etc/hostname"})),
        (
            "/api/rename",
            json!({"oldPath": "sub", "newPath": "escape/sub"}),
        ),
        (
            "/api/move",
            json!({"sourcePath": outside_abs, "destinationPath": "stolen"}),
        ),
        ("/api/read/stream", json!({"path": "escape/secret"})),
        (
            "/api/stat",
            json!({"path": "secret-link", "followSymlinks": true}),
        ),
    ];
    for (route, body) in cases {
        let (status, reply) = daemon.post(route, body.clone()).await;
        assert_error(status, &reply, 403, "PERMISSION_DENIED");
        assert!(
            reply["message"].as_str().unwrap().contains("outside"),
            "{route} {body}: {reply}"
        );
    }
    let response = daemon
        .request(Method::GET, "/api/files/raw?path=escape/secret")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = daemon
        .request(Method::PUT, "/api/files/raw?path=escape/put.bin")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "s"
    );
    assert!(!outside.path().join("new.txt").exists());
    assert!(!outside.path().join("put.bin").exists());
    assert!(daemon.path("sub").is_dir());

    let (_, caps) = daemon.get("/api/capabilities").await;
    assert_eq!(caps["capabilities"]["confined"], true);
    // This machine's kernel (6.x) has openat2.
    assert_eq!(caps["capabilities"]["confinedBy"], "openat2");
}

#[tokio::test]
async fn inside_paths_and_links_within_still_work() {
    let daemon = confined(vec![]);
    std::fs::create_dir(daemon.path("real")).unwrap();
    symlink("real", daemon.path("alias")).unwrap();
    let (status, body) = daemon
        .post(
            "/api/write",
            json!({"path": "alias/f.txt", "content": "ok"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        std::fs::read_to_string(daemon.path("real/f.txt")).unwrap(),
        "ok"
    );
    let absolute = daemon.path("real/f.txt").display().to_string();
    let (status, _) = daemon.post("/api/read", json!({"path": absolute})).await;
    assert_eq!(status, StatusCode::OK);
    // A link that points outside may itself be deleted: it lives inside.
    symlink("/etc/hostname", daemon.path("out-link")).unwrap();
    let (status, _) = daemon
        .post("/api/delete", json!({"path": "out-link"}))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn extra_roots_are_allowed() {
    let extra = tempfile::tempdir().unwrap();
    let extra_root = std::fs::canonicalize(extra.path()).unwrap();
    let daemon = confined(vec![extra_root.clone()]);
    let target = extra_root.join("allowed.txt").display().to_string();
    let (status, body) = daemon
        .post("/api/write", json!({"path": target, "content": "yes"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        std::fs::read_to_string(extra_root.join("allowed.txt")).unwrap(),
        "yes"
    );
}

#[tokio::test]
async fn without_confine_outside_paths_are_served() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f"), "reachable").unwrap();
    let daemon = Daemon::start();
    let (status, body) = daemon
        .post(
            "/api/read",
            json!({"path": outside.path().join("f").display().to_string()}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["content"], "reachable");
}

/// Every route that takes a path, other than the file routes above, refuses one outside
/// the roots under --confine (directly and through a symlink in the workspace), before it
/// does anything with it; the same requests inside the workspace are not refused for it.
#[tokio::test]
async fn every_route_that_takes_a_path_applies_the_confinement() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("passwd"), "decoy\n").unwrap();
    let daemon = confined(vec![]);
    symlink(outside.path(), daemon.path("escape")).unwrap();
    std::fs::create_dir(daemon.path("inside")).unwrap();
    let out = outside.path().display().to_string();
    // Absolute, as backup directories must be (a relative one is refused by the
    // reference's own rule first).
    let escape = daemon.path("escape").display().to_string();
    for target in [out.as_str(), escape.as_str()] {
        let archive = format!("/var/backups/confine-{}.sqsh", std::process::id());
        let cases = [
            ("/api/execute", json!({"command": "true", "cwd": target})),
            (
                "/api/execute/stream",
                json!({"command": "true", "cwd": target}),
            ),
            (
                "/api/process/start",
                json!({"command": "true", "cwd": target}),
            ),
            (
                "/api/session/create",
                json!({"id": "confined", "cwd": target}),
            ),
            (
                "/api/backup/create",
                json!({"dir": target, "archivePath": archive}),
            ),
            (
                "/api/backup/restore",
                json!({"dir": target, "archivePath": archive}),
            ),
            (
                "/api/backup/extract",
                json!({"dir": target, "indexUrl": "http://127.0.0.1:9/i", "archives": [{"depth": 0, "url": "http://127.0.0.1:9/a", "sizeBytes": 1}], "paths": ["passwd"]}),
            ),
            (
                "/api/backup/download",
                json!({"dir": target, "archives": [{"archivePath": archive, "url": "http://127.0.0.1:9/a", "sizeBytes": 1}]}),
            ),
            ("/api/backup/index", json!({"dir": target})),
            ("/api/backup/unmount", json!({"dir": target})),
            (
                "/api/git/checkout",
                json!({"repoUrl": "file:///nonexistent/repo.git", "targetDir": format!("{target}/clone")}),
            ),
            (
                "/api/contexts",
                json!({"language": "python", "cwd": target}),
            ),
            (
                "/api/mounts",
                json!({"bucket": "b", "mountPath": format!("{target}/mnt"), "endpoint": "http://127.0.0.1:9"}),
            ),
            ("/api/watch", json!({"path": target})),
            ("/api/search", json!({"path": target, "pattern": "decoy"})),
            (
                "/api/search/stream",
                json!({"path": target, "pattern": "decoy"}),
            ),
            ("/api/chmod", json!({"path": target, "mode": "644"})),
            ("/api/chown", json!({"path": target, "owner": "0"})),
            (
                "/api/replace",
                json!({"path": target, "pattern": "decoy", "replacement": "x"}),
            ),
        ];
        for (route, body) in cases {
            let (status, reply) = daemon.post(route, body.clone()).await;
            assert_error(status, &reply, 403, "PERMISSION_DENIED");
            // (Watches refuse paths outside the workspace with or without --confine, in
            // the reference's words: "must be inside the workspace".)
            let message = reply["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("outside") || message.contains("must be inside the workspace"),
                "{route} {body}: {reply}"
            );
        }
        // The unmount route takes the mount path in its query too.
        let (status, reply) = fsd_tests::reply(
            daemon
                .request(Method::DELETE, "/api/mounts")
                .query(&[("mountPath", format!("{target}/mnt"))]),
        )
        .await;
        assert_error(status, &reply, 403, "PERMISSION_DENIED");
    }
    // A backup directory outside is refused for being outside before the reference's own
    // rules are applied (a relative path, one under none of its prefixes): 403 as
    // everywhere else, never 400 `INVALID_BACKUP_CONFIG`.
    for dir in ["escape", "/usr/share"] {
        let archive = format!("/var/backups/confine-{}.sqsh", std::process::id());
        for (route, body) in [
            (
                "/api/backup/create",
                json!({"dir": dir, "archivePath": archive}),
            ),
            (
                "/api/backup/restore",
                json!({"dir": dir, "archivePath": archive}),
            ),
            ("/api/backup/index", json!({"dir": dir})),
        ] {
            let (status, reply) = daemon.post(route, body.clone()).await;
            assert_error(status, &reply, 403, "PERMISSION_DENIED");
        }
    }
    // Nothing was made outside.
    let mut left: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["passwd"]);
    // Inside, the same routes go past the path check.
    let (status, reply) = daemon
        .post("/api/execute", json!({"command": "pwd", "cwd": "inside"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert!(
        reply["stdout"].as_str().unwrap().ends_with("/inside\n"),
        "{reply}"
    );
    let (status, reply) = daemon
        .post(
            "/api/contexts",
            json!({"language": "python", "cwd": "inside"}),
        )
        .await;
    assert_ne!(status.as_u16(), 403, "{reply}");
}

#[tokio::test]
async fn search_and_replace_do_not_follow_a_link_out() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(outside.path().join("dir")).unwrap();
    std::fs::write(outside.path().join("dir/secret.txt"), "needle outside\n").unwrap();
    std::fs::write(outside.path().join("alone.txt"), "needle outside\n").unwrap();
    let daemon = confined(vec![]);
    symlink(outside.path().join("dir"), daemon.path("escape")).unwrap();
    symlink(
        outside.path().join("alone.txt"),
        daemon.path("alone-link.txt"),
    )
    .unwrap();
    std::fs::create_dir(daemon.path("inside")).unwrap();
    std::fs::write(daemon.path("inside/a.txt"), "needle inside\n").unwrap();
    // A link that stays inside is followed as asked.
    symlink(daemon.path("inside"), daemon.path("again")).unwrap();
    let ask = json!({"path": ".", "pattern": "needle", "followLinks": true, "hidden": true, "noIgnore": true});
    let (status, reply) = daemon.post("/api/search", ask.clone()).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let lines: Vec<String> = reply["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["line"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(lines, ["needle inside", "needle inside"], "{reply}");
    assert_eq!(reply["skipped"]["outside"], 2, "{reply}");
    // Names only: the outside ones are not named either.
    let (status, reply) = daemon
        .post(
            "/api/search",
            json!({"path": ".", "followLinks": true, "hidden": true, "noIgnore": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert!(!reply.to_string().contains("secret"), "{reply}");
    assert_eq!(reply["skipped"]["outside"], 2, "{reply}");
    // The stream: the same walk, the count in its last event.
    let body = daemon.post_text("/api/search/stream", &ask).await;
    assert!(!body.contains("needle outside"), "{body}");
    assert!(body.contains(r#""skipped":{"outside":2}"#), "{body}");
    // Replace finds the same files: the outside ones stay as they were.
    let (status, reply) = daemon
        .post(
            "/api/replace",
            json!({"path": ".", "pattern": "needle", "replacement": "pin", "followLinks": true, "hidden": true, "noIgnore": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["replacements"], 1, "{reply}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("dir/secret.txt")).unwrap(),
        "needle outside\n"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("alone.txt")).unwrap(),
        "needle outside\n"
    );
    assert_eq!(
        std::fs::read_to_string(daemon.path("inside/a.txt")).unwrap(),
        "pin inside\n"
    );
}

#[tokio::test]
async fn a_directory_swapped_for_a_link_out_during_searches_leaks_nothing() {
    let outside = tempfile::tempdir().unwrap();
    for i in 0..20 {
        std::fs::write(outside.path().join(format!("f{i}.txt")), "needle secret\n").unwrap();
    }
    let daemon = confined(vec![]);
    std::fs::create_dir(daemon.path("sub")).unwrap();
    for i in 0..20 {
        std::fs::write(daemon.path(&format!("sub/f{i}.txt")), "needle inside\n").unwrap();
    }
    symlink(outside.path(), daemon.path("alt")).unwrap();
    // A process in the sandbox swaps `sub` (a directory) and `alt` (a link out), atomically,
    // as fast as it can, for as long as the searches run.
    let swapper = Swapper::start(daemon.path("sub"), daemon.path("alt"));
    let mut answered = 0;
    for round in 0..200 {
        let follow = round % 2 == 0;
        let names = round % 4 == 1;
        let mut ask = json!({"path": ".", "followLinks": follow, "hidden": true, "noIgnore": true});
        if !names {
            ask["pattern"] = json!("needle");
        }
        let (status, reply) = daemon.post("/api/search", ask).await;
        assert_eq!(status, StatusCode::OK, "{reply}");
        let text = reply.to_string();
        assert!(!text.contains("secret"), "round {round}: {reply}");
        answered += 1;
    }
    assert_eq!(answered, 200);
    assert!(swapper.stop() > 200, "the swaps ran alongside");
    // The outside is as it was.
    for i in 0..20 {
        assert_eq!(
            std::fs::read_to_string(outside.path().join(format!("f{i}.txt"))).unwrap(),
            "needle secret\n"
        );
    }
}

#[tokio::test]
async fn a_directory_swapped_for_a_link_out_during_reads_and_writes_leaks_nothing() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f.txt"), "secret").unwrap();
    let daemon = confined(vec![]);
    std::fs::create_dir(daemon.path("sub")).unwrap();
    std::fs::write(daemon.path("sub/f.txt"), "inside").unwrap();
    symlink(outside.path(), daemon.path("alt")).unwrap();
    // A process in the sandbox swaps `sub` (a directory) and `alt` (a link out) as fast as
    // it can while reads and writes through `sub` run.
    let swapper = Swapper::start(daemon.path("sub"), daemon.path("alt"));
    let (mut read_inside, mut refused) = (0, 0);
    for round in 0..300 {
        let (status, reply) = daemon.post("/api/read", json!({"path": "sub/f.txt"})).await;
        assert!(
            !reply.to_string().contains("secret"),
            "round {round}: {reply}"
        );
        match status.as_u16() {
            200 => read_inside += 1,
            403 | 404 => refused += 1,
            other => panic!("round {round}: {other} {reply}"),
        }
        let raw = daemon.get_text("/api/files/raw?path=sub/f.txt").await;
        assert!(!raw.contains("secret"), "round {round}: {raw}");
        let (status, reply) = daemon
            .post(
                "/api/write",
                json!({"path": format!("sub/nested/w{round}.txt"), "content": "x"}),
            )
            .await;
        assert!(
            [200, 403, 404].contains(&status.as_u16()),
            "round {round}: {status} {reply}"
        );
        let (status, reply) = daemon
            .post(
                "/api/write",
                json!({"path": "sub/f.txt", "content": "inside"}),
            )
            .await;
        assert!(
            [200, 403, 404].contains(&status.as_u16()),
            "round {round}: {status} {reply}"
        );
    }
    assert!(swapper.stop() > 300, "the swaps ran alongside");
    assert!(read_inside > 0 && refused > 0, "{read_inside} {refused}");
    // Nothing outside was read (above), written, made or replaced.
    let names: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["f.txt"]);
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f.txt")).unwrap(),
        "secret"
    );
}

/// The changing routes while a process swaps a directory and a link out: chmod and chown
/// (one file and a whole tree), mkdir (one and with parents), move into the workspace's
/// top, and delete. Each acts beneath the workspace by descriptor, so the outside keeps its
/// names, modes and owners whatever moment the swap lands at.
#[tokio::test]
async fn a_directory_swapped_for_a_link_out_during_changes_changes_nothing_outside() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path();
    std::fs::write(out.join("victim"), "outside").unwrap();
    std::fs::create_dir(out.join("keep")).unwrap();
    std::fs::write(out.join("keep/f"), "outside").unwrap();
    for path in ["victim", "keep", "keep/f"] {
        std::fs::set_permissions(out.join(path), std::fs::Permissions::from_mode(0o750)).unwrap();
    }
    let daemon = confined(vec![]);
    std::fs::create_dir_all(daemon.path("sub/keep")).unwrap();
    std::fs::write(daemon.path("sub/keep/f"), "inside").unwrap();
    symlink(out, daemon.path("alt")).unwrap();
    let swapper = Swapper::start(daemon.path("sub"), daemon.path("alt"));
    let mut done = 0;
    for round in 0..200 {
        let calls = [
            ("/api/chmod", json!({"path": "sub/victim", "mode": "600"})),
            (
                "/api/chmod",
                json!({"path": "sub/keep", "mode": "u+s,o+w", "recursive": true}),
            ),
            ("/api/chown", json!({"path": "sub/victim", "owner": "4242"})),
            (
                "/api/chown",
                json!({"path": "sub/keep", "group": "4242", "recursive": true}),
            ),
            ("/api/mkdir", json!({"path": format!("sub/made{round}")})),
            (
                "/api/mkdir",
                json!({"path": format!("sub/deep{round}/x"), "recursive": true}),
            ),
            (
                "/api/move",
                json!({"sourcePath": "sub/victim", "destinationPath": format!("moved{round}")}),
            ),
            ("/api/delete", json!({"path": "sub/victim"})),
            // Put a victim back inside for the next round (a confined write).
            (
                "/api/write",
                json!({"path": "sub/victim", "content": "inside"}),
            ),
        ];
        for (route, body) in calls {
            let (status, reply) = daemon.post(route, body).await;
            assert!(
                [200, 403, 404, 409].contains(&status.as_u16()),
                "round {round} {route}: {status} {reply}"
            );
            done += 1;
        }
    }
    assert!(swapper.stop() > 200, "the swaps ran alongside");
    assert_eq!(done, 1800);
    // The outside has what it had, as it had it.
    let mut names: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["keep", "victim"]);
    let keep: Vec<String> = std::fs::read_dir(out.join("keep"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(keep, ["f"]);
    for path in ["victim", "keep", "keep/f"] {
        let meta = std::fs::metadata(out.join(path)).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o750, "{path}");
        assert_eq!((meta.uid(), meta.gid()), (0, 0), "{path}");
    }
    assert_eq!(
        std::fs::read_to_string(out.join("victim")).unwrap(),
        "outside"
    );
}

/// Lists, stats and existence checks while a process swaps a directory and a link out:
/// each looks beneath the workspace by descriptor, so no name, size or existence of what
/// is outside comes back.
#[tokio::test]
async fn a_directory_swapped_for_a_link_out_during_lists_and_stats_tells_nothing() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret-name"), "seventeen bytes..").unwrap();
    let daemon = confined(vec![]);
    std::fs::create_dir(daemon.path("sub")).unwrap();
    std::fs::write(daemon.path("sub/inside-name"), "in").unwrap();
    symlink(outside.path(), daemon.path("alt")).unwrap();
    let swapper = Swapper::start(daemon.path("sub"), daemon.path("alt"));
    let (mut listed, mut found) = (0, 0);
    for round in 0..300 {
        let (status, reply) = daemon
            .post(
                "/api/list-files",
                json!({"path": "sub", "options": {"recursive": true}}),
            )
            .await;
        assert!(
            !reply.to_string().contains("secret-name"),
            "round {round}: {reply}"
        );
        assert!(
            [200, 403, 404].contains(&status.as_u16()),
            "round {round}: {status} {reply}"
        );
        listed += usize::from(status == StatusCode::OK);
        for follow in [true, false] {
            let (status, reply) = daemon
                .post(
                    "/api/stat",
                    json!({"path": "sub/secret-name", "followSymlinks": follow}),
                )
                .await;
            assert!(
                [403, 404].contains(&status.as_u16()),
                "round {round}: {status} {reply}"
            );
        }
        let (status, reply) = daemon
            .post("/api/exists", json!({"path": "sub/secret-name"}))
            .await;
        assert!(
            status != StatusCode::OK || reply["exists"] == json!(false),
            "round {round}: {status} {reply}"
        );
        let (status, _) = daemon
            .post("/api/stat", json!({"path": "sub/inside-name"}))
            .await;
        found += usize::from(status == StatusCode::OK);
    }
    assert!(swapper.stop() > 300, "the swaps ran alongside");
    assert!(listed > 0 && found > 0, "{listed} {found}");
}

/// Watches are of the workspace, confined or not. A process swapping a directory and a link
/// out while watches of it start: each watch starts on the directory opened beneath the
/// workspace or is refused, so no check ever lists what changes outside.
#[tokio::test]
async fn a_directory_swapped_for_a_link_out_while_watches_start_is_never_watched() {
    let outside = tempfile::tempdir().unwrap();
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("sub")).unwrap();
    symlink(outside.path(), daemon.path("alt")).unwrap();
    let swapper = Swapper::start(daemon.path("sub"), daemon.path("alt"));
    let (mut started, mut refused) = (0, 0);
    for round in 0..150 {
        // Another exclude each round: another key, so another watch starts.
        let body = json!({"path": "sub", "exclude": [format!("x{round}")], "paths": true});
        let (status, first) = daemon.post("/api/watch/check", body.clone()).await;
        match status.as_u16() {
            200 => started += 1,
            403 | 404 => {
                refused += 1;
                continue;
            }
            other => panic!("round {round}: {other} {first}"),
        }
        std::fs::write(outside.path().join(format!("o{round}")), "x").unwrap();
        let mut since = body;
        since["since"] = first["version"].clone();
        let (status, reply) = daemon.post("/api/watch/check", since).await;
        assert!(
            !reply.to_string().contains(&format!("o{round}")),
            "round {round}: a watch of the outside: {status} {reply}"
        );
    }
    assert!(swapper.stop() > 150, "the swaps ran alongside");
    assert_eq!(started + refused, 150);
    // On a busy machine every start can meet a swap and be refused: with the swaps
    // stopped and the directory back in place, a watch of it starts and sees a change.
    if std::fs::symlink_metadata(daemon.path("sub"))
        .unwrap()
        .file_type()
        .is_symlink()
    {
        std::fs::rename(daemon.path("sub"), daemon.path("tmp-link")).unwrap();
        std::fs::rename(daemon.path("alt"), daemon.path("sub")).unwrap();
        std::fs::rename(daemon.path("tmp-link"), daemon.path("alt")).unwrap();
    }
    let body = json!({"path": "sub", "exclude": ["after"], "paths": true});
    let (status, first) = daemon.post("/api/watch/check", body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    std::fs::write(daemon.path("sub/inside"), "x").unwrap();
    let mut since = body;
    since["since"] = first["version"].clone();
    let (status, reply) = daemon.post("/api/watch/check", since).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert!(reply.to_string().contains("inside"), "{reply}");
}

/// Commands with a `cwd` while a process swaps a directory and a link out: sessionless
/// and session commands, background processes (with and without a session), code
/// contexts and clones. Each starts where a confined daemon allows or not at all (its
/// supervisor enters the directory by a descriptor opened beneath the workspace; a session's
/// shell checks where its `cd` landed, by device and inode; a context's runner checks the
/// kernel's `getcwd`), so nothing is ever made outside, whatever moment the swap lands at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_link_out_during_commands_runs_nothing_outside() {
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path();
    std::fs::write(out.join("victim"), "outside").unwrap();
    let source = tempfile::tempdir().unwrap();
    let repo = source.path().join("r");
    std::fs::create_dir(&repo).unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &[
            "-c",
            "user.name=f",
            "-c",
            "user.email=f@e",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "one",
        ],
    ] {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
    }
    let url = format!("file://{}", repo.display());
    let daemon = confined(vec![]);
    std::fs::create_dir(daemon.path("sub")).unwrap();
    symlink(out, daemon.path("alt")).unwrap();
    let (status, _) = daemon.post("/api/session/create", json!({"id": "s"})).await;
    assert_eq!(status, 200);
    let swapper = Swapper::start(daemon.path("sub"), daemon.path("alt"));
    let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
    for round in 0..120 {
        run_commands_in(&daemon, "sub", round, &url, &mut outcomes).await;
    }
    assert!(swapper.stop() > 200, "the swaps ran alongside");
    // The background commands end before the outside is looked at.
    for _ in 0..200 {
        let (_, list) = daemon.get("/api/process/list?status=running").await;
        if list["processes"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    eprintln!("outcomes: {outcomes:?}");
    let names: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["victim"], "made outside: {outcomes:?}");
    // With the swaps stopped, each kind runs in the directory (whichever name it has now).
    let dir = ["sub", "alt"]
        .into_iter()
        .find(|name| daemon.path(name).symlink_metadata().unwrap().is_dir())
        .unwrap();
    for marker in MARKERS {
        let _ = std::fs::remove_file(daemon.path(dir).join(marker));
    }
    let mut settled = Default::default();
    run_commands_in(&daemon, dir, 0, &url, &mut settled).await;
    assert!(
        settled.keys().all(|outcome| outcome.ends_with(" ran")),
        "{settled:?}"
    );
    for _ in 0..200 {
        if MARKERS.iter().all(|m| daemon.path(dir).join(m).exists()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    for marker in MARKERS {
        assert!(daemon.path(dir).join(marker).exists(), "{marker}");
    }
}

/// What each kind of command writes in its directory.
const MARKERS: [&str; 5] = [
    "m-exec",
    "m-session",
    "m-process",
    "m-background",
    "m-context",
];

/// Runs each kind of command once with `cwd` (clones and contexts every tenth round),
/// counting how each ended in `outcomes`.
async fn run_commands_in(
    daemon: &Daemon,
    cwd: &str,
    round: usize,
    url: &str,
    outcomes: &mut std::collections::BTreeMap<String, usize>,
) {
    let mut calls = vec![
        (
            "/api/execute",
            json!({"command": "echo x > m-exec", "cwd": cwd}),
        ),
        (
            "/api/execute",
            json!({"command": "echo x > m-session", "cwd": cwd, "sessionId": "s"}),
        ),
        (
            "/api/process/start",
            json!({"command": "echo x > m-process", "cwd": cwd}),
        ),
        (
            "/api/process/start",
            json!({"command": "echo x > m-background", "cwd": cwd, "sessionId": "s"}),
        ),
    ];
    if round.is_multiple_of(10) {
        calls.push((
            "/api/git/checkout",
            json!({"repoUrl": url, "targetDir": format!("{cwd}/clone{round}")}),
        ));
        calls.push(("/api/contexts", json!({"language": "python", "cwd": cwd})));
    }
    for (route, body) in calls {
        let (status, reply) = daemon.post(route, body).await;
        assert!(
            [200, 403, 404, 500].contains(&status.as_u16()),
            "round {round} {route}: {status} {reply}"
        );
        if route == "/api/contexts" && status == 200 {
            let id = reply["contextId"].as_str().unwrap().to_string();
            let ran = daemon
                .post_text(
                    "/api/execute/code",
                    &json!({"context_id": id, "code": "open('m-context', 'w').write('x')"}),
                )
                .await;
            assert!(ran.contains("execution_complete"), "{ran}");
            daemon.delete(&format!("/api/contexts/{id}")).await;
        }
        let outcome = match (status.as_u16(), reply["exitCode"].as_i64()) {
            (200, Some(0)) | (200, None) => "ran",
            (200, Some(_)) => "refused by its supervisor",
            (403, _) => "403",
            _ => {
                eprintln!("{route}: {status} {reply}");
                "other"
            }
        };
        *outcomes.entry(format!("{route} {outcome}")).or_default() += 1;
    }
}

/// Backups while a process swaps a directory and a link out: a create reads its tree by
/// descriptor beneath the workspace (nothing outside is archived), a restore is attached to
/// the directory opened beneath it (never over the outside), and a release detaches by the
/// name beneath its parent's descriptor, not followed (never what a link leads to).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_link_out_during_backups_archives_and_mounts_nothing_outside() {
    if !fsd_tests::require_mount_privilege(
        "a_directory_swapped_for_a_link_out_during_backups_archives_and_mounts_nothing_outside",
    ) {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let out = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::write(out.join("secret-outside"), "outside").unwrap();
    let daemon = confined(vec![]);
    std::fs::create_dir(daemon.path("sub")).unwrap();
    std::fs::write(daemon.path("sub/inside.txt"), "inside").unwrap();
    symlink(&out, daemon.path("alt")).unwrap();
    let sub = daemon.path("sub").display().to_string();
    let stem = format!("/var/backups/confine-{}", std::process::id());
    let base = format!("{stem}-base.sqsh");
    let (status, reply) = daemon
        .post(
            "/api/backup/create",
            json!({"dir": sub, "archivePath": base}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    let mounted_outside = || !fsd_tests::mounts_under(&out).is_empty();
    let swapper = Swapper::start_every(
        daemon.path("sub"),
        daemon.path("alt"),
        std::time::Duration::from_millis(3),
    );
    let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
    for round in 0..30 {
        let archive = format!("{stem}-{round}.sqsh");
        let calls = [
            (
                "/api/backup/create",
                json!({"dir": sub, "archivePath": archive}),
            ),
            (
                "/api/backup/restore",
                json!({"dir": sub, "archivePath": base}),
            ),
            ("/api/backup/unmount", json!({"dir": sub})),
        ];
        for (route, body) in calls {
            let (status, reply) = daemon.post(route, body).await;
            assert!(
                [200, 403, 404, 500].contains(&status.as_u16()),
                "round {round} {route}: {status} {reply}"
            );
            if status == 500 {
                eprintln!("{route}: {reply}");
            }
            *outcomes.entry(format!("{route} {status}")).or_default() += 1;
            assert!(!mounted_outside(), "round {round} {route}: {outcomes:?}");
        }
        if std::path::Path::new(&archive).exists() {
            let unpacked = tempfile::tempdir().unwrap();
            let dest = unpacked.path().join("x");
            fsd_tests::unsquashfs(&archive, &dest);
            assert!(!dest.join("secret-outside").exists(), "round {round}");
            fsd_tests::remove_archive(&archive);
        }
    }
    let swaps = swapper.stop();
    eprintln!("outcomes after {swaps} swaps: {outcomes:?}");
    // A restored directory is a mount point, which the kernel does not move: fewer swaps.
    assert!(swaps > 5, "the swaps ran alongside");
    assert!(!mounted_outside());
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1,
        "the outside holds only what it held"
    );
    // What is still restored is released by the path it was restored on, wherever its
    // directory moved since (the overlay is detached by its root).
    daemon
        .post("/api/backup/unmount", json!({"dir": sub}))
        .await;
    let left = fsd_tests::mounts_under(&daemon.root());
    assert!(left.is_empty(), "{left:?}");
    fsd_tests::remove_archive(&base);
}

/// A move to another filesystem inside a confined workspace (a tmpfs mounted in it) copies
/// the tree by descriptor, links as links, and removes the source the same way; while a
/// process swaps a directory of the tree and a link out, nothing outside is read into the
/// copy or removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_across_filesystems_copies_beneath_the_workspace_only() {
    if !fsd_tests::require_mount_privilege(
        "a_move_across_filesystems_copies_beneath_the_workspace_only",
    ) {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path();
    std::fs::write(out.join("secret-outside"), "outside").unwrap();
    let daemon = confined(vec![]);
    let _other = fsd_tests::Mount::tmpfs(&daemon.path("other"), "size=16m");
    // Settled: a tree with a link goes across whole.
    std::fs::create_dir_all(daemon.path("tree/d")).unwrap();
    std::fs::write(daemon.path("tree/a.txt"), "a").unwrap();
    std::fs::write(daemon.path("tree/d/b.txt"), "b").unwrap();
    symlink("a.txt", daemon.path("tree/link")).unwrap();
    let (status, reply) = daemon
        .post(
            "/api/move",
            json!({"sourcePath": "tree", "destinationPath": "other/tree"}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert!(!daemon.path("tree").exists());
    assert_eq!(
        std::fs::read_to_string(daemon.path("other/tree/d/b.txt")).unwrap(),
        "b"
    );
    assert_eq!(
        std::fs::read_link(daemon.path("other/tree/link")).unwrap(),
        std::path::Path::new("a.txt")
    );
    // Racing: `moving/sub` and a link out swap while `moving` goes across.
    let mut outcomes: std::collections::BTreeMap<u16, usize> = Default::default();
    for round in 0..40 {
        std::fs::create_dir_all(daemon.path("moving/sub")).unwrap();
        std::fs::write(daemon.path("moving/sub/inside.txt"), "inside").unwrap();
        symlink(out, daemon.path("moving/alt")).unwrap();
        let swapper = Swapper::start(daemon.path("moving/sub"), daemon.path("moving/alt"));
        let (status, reply) = daemon
            .post(
                "/api/move",
                json!({"sourcePath": "moving", "destinationPath": format!("other/m{round}")}),
            )
            .await;
        swapper.stop();
        *outcomes.entry(status.as_u16()).or_default() += 1;
        // A tree that changes under the copy may fail it (a directory found a link when
        // opened, 400 NOT_DIRECTORY): what matters is what reached the outside.
        assert!(
            [200, 400, 403, 500].contains(&status.as_u16()),
            "round {round}: {status} {reply}"
        );
        let copied = daemon.path(&format!("other/m{round}"));
        for name in ["sub", "alt"] {
            assert!(
                !copied.join(name).join("secret-outside").exists()
                    || copied.join(name).symlink_metadata().unwrap().is_symlink(),
                "round {round}: the outside was copied in"
            );
        }
        let _ = std::fs::remove_dir_all(daemon.path("moving"));
    }
    eprintln!("outcomes: {outcomes:?}");
    let names: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["secret-outside"]);
    assert_eq!(
        std::fs::read_to_string(out.join("secret-outside")).unwrap(),
        "outside"
    );
}
