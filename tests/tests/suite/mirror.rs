//! A mirror exact on real work: a git repository with history, symlinks and executable
//! files, put through an agent's day (checkouts of commits far apart with `git clean`, a
//! burst of small files made and removed, a mass rename, build output moved into place),
//! mirrored with `sync` after every step and compared byte for byte, link for link, mode
//! for mode; and change checks that are barriers: a write, then a check, always sees the
//! write, three writers at a time.

use std::path::Path;
use std::process::Command;

use fsd_tests::Daemon;
use serde_json::json;

fn assert_same(remote: &Path, local: &Path, step: &str) {
    if let Some(difference) = crate::sync::difference(remote, local) {
        panic!("after {step}: {difference}");
    }
}

pub(crate) fn git(repo: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=fsd", "-c", "user.email=fsd@localhost"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "advice.detachedHead=false",
        ])
        .args(args)
        .current_dir(repo)
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A repository with history: packages, a root README and LICENSE that are symlinks into
/// them, executable scripts, and commits far apart (a package renamed with its forty
/// files, another added, scripts changed).
pub(crate) fn make_repository(repo: &Path) -> (String, String) {
    std::fs::create_dir_all(repo).unwrap();
    git(repo, &["init", "-q"]);
    for package in ["sandbox", "shared", "cli"] {
        for i in 0..40 {
            write(
                &repo.join(format!("packages/{package}/src/m{i}.ts")),
                &format!("export const v{i} = {i}; // {package}\n"),
            );
        }
        write(
            &repo.join(format!("packages/{package}/README.md")),
            &format!("# {package}\n"),
        );
    }
    write(&repo.join("scripts/build.sh"), "#!/bin/sh\necho build\n");
    executable(&repo.join("scripts/build.sh"));
    std::os::unix::fs::symlink("packages/sandbox/README.md", repo.join("README.md")).unwrap();
    std::os::unix::fs::symlink("packages/shared/README.md", repo.join("LICENSE")).unwrap();
    std::os::unix::fs::symlink("../../outside/of/the/tree", repo.join("scripts/away")).unwrap();
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "first"]);
    let first = rev(repo);
    for round in 0..5 {
        write(
            &repo.join(format!("packages/cli/src/round{round}.ts")),
            &format!("export const r = {round};\n"),
        );
        git(repo, &["add", "-A"]);
        git(repo, &["commit", "-q", "-m", &format!("round {round}")]);
    }
    git(repo, &["mv", "packages/shared", "packages/common"]);
    std::fs::remove_file(repo.join("LICENSE")).unwrap();
    std::os::unix::fs::symlink("packages/common/README.md", repo.join("LICENSE")).unwrap();
    write(&repo.join("scripts/test.sh"), "#!/bin/sh\necho test\n");
    executable(&repo.join("scripts/test.sh"));
    write(&repo.join("scripts/build.sh"), "#!/bin/sh\necho build v2\n");
    for i in 0..30 {
        write(
            &repo.join(format!("packages/web/app/page{i}.tsx")),
            &format!("export default () => {i};\n"),
        );
    }
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "far apart"]);
    (first, rev(repo))
}

fn rev(repo: &Path) -> String {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test]
async fn an_agents_day_on_a_real_repository_keeps_the_mirror_exact() {
    let daemon = Daemon::start();
    let repo = daemon.path("repo");
    let (first, last) = make_repository(&repo);
    let local_dir = tempfile::tempdir().unwrap();
    let local = local_dir.path().join("mirror");
    let sandbox = daemon.sandbox();
    let report = sandbox.sync("repo", &local, None).await.unwrap();
    assert_eq!(report.mode, "full");
    assert!(report.links >= 3, "{report:?}");
    assert_same(&repo, &local, "the first sync");
    let mut version = report.version;

    let mut step = async |name: &str, act: &dyn Fn()| {
        act();
        let report = sandbox.sync("repo", &local, Some(&version)).await.unwrap();
        assert_eq!(report.mode, "incremental", "{name}: {report:?}");
        assert_same(&repo, &local, name);
        version = report.version;
    };
    step("a checkout far back with git clean", &|| {
        git(&repo, &["checkout", "-q", &first]);
        git(&repo, &["clean", "-q", "-fdx"]);
    })
    .await;
    step("a checkout forward again", &|| {
        git(&repo, &["checkout", "-q", &last]);
    })
    .await;
    step("a burst of small packages made", &|| {
        for package in 0..300 {
            for file in ["index.js", "package.json", "lib/util.js"] {
                write(
                    &repo.join(format!("burst/p{package}/{file}")),
                    &format!("{package}/{file}\n"),
                );
            }
        }
    })
    .await;
    step("the burst removed", &|| {
        std::fs::remove_dir_all(repo.join("burst")).unwrap();
    })
    .await;
    step("a directory and forty files renamed", &|| {
        std::fs::rename(repo.join("packages/cli"), repo.join("packages/tool")).unwrap();
        for i in 0..40 {
            std::fs::rename(
                repo.join(format!("packages/sandbox/src/m{i}.ts")),
                repo.join(format!("packages/sandbox/src/module{i}.ts")),
            )
            .unwrap();
        }
    })
    .await;
    step(
        "build output written to temp names and moved into place",
        &|| {
            std::fs::create_dir_all(repo.join("dist")).unwrap();
            for i in 0..50 {
                let temp = repo.join(format!("dist/.chunk{i}.js.tmp"));
                std::fs::write(&temp, format!("chunk {i}\n")).unwrap();
                std::fs::rename(&temp, repo.join(format!("dist/chunk{i}.js"))).unwrap();
            }
            write(&repo.join("dist/run"), "#!/bin/sh\n");
            executable(&repo.join("dist/run"));
        },
    )
    .await;
    step("a link retargeted and a script made plain", &|| {
        let temp = repo.join("README.md.new");
        std::os::unix::fs::symlink("packages/web/app/page1.tsx", &temp).unwrap();
        std::fs::rename(&temp, repo.join("README.md")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            repo.join("scripts/build.sh"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    })
    .await;
    step("a checkout back and a reset", &|| {
        git(&repo, &["checkout", "-q", "-f", &first]);
        git(&repo, &["clean", "-q", "-fdx"]);
    })
    .await;
}

/// A FIFO cannot be mirrored: the sync says so, and mirrors the rest.
#[tokio::test]
async fn what_a_mirror_cannot_hold_is_reported() {
    let daemon = Daemon::start();
    let root = daemon.path("w");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("kept"), "x").unwrap();
    nix::unistd::mkfifo(
        &root.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let local_dir = tempfile::tempdir().unwrap();
    let local = local_dir.path().join("mirror");
    let sandbox = daemon.sandbox();
    let report = sandbox.sync("w", &local, None).await.unwrap();
    assert_eq!(report.skipped, ["pipe"], "{report:?}");
    assert_eq!(std::fs::read(local.join("kept")).unwrap(), b"x");
    assert!(std::fs::symlink_metadata(local.join("pipe")).is_err());
    nix::unistd::mkfifo(
        &root.join("pipe2"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let report = sandbox
        .sync("w", &local, Some(&report.version))
        .await
        .unwrap();
    assert_eq!(report.skipped, ["pipe2"], "{report:?}");
}

/// A check is a barrier: a write that finished before it is in its answer, every time,
/// with three writers checking at once.
#[tokio::test]
async fn a_write_then_a_check_always_sees_the_write() {
    let daemon = Daemon::start();
    let rounds: usize = std::env::var("FSD_BARRIER_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let mut writers = Vec::new();
    for writer in 0..3 {
        let dir = daemon.path(&format!("b{writer}"));
        std::fs::create_dir_all(&dir).unwrap();
        let client = reqwest::Client::new();
        let url = daemon.url("/api/watch/check");
        writers.push(tokio::spawn(async move {
            let check = |since: Option<String>| {
                let mut body = json!({"path": format!("b{writer}"), "paths": true});
                if let Some(since) = since {
                    body["since"] = json!(since);
                }
                client.post(&url).json(&body).send()
            };
            let answer: serde_json::Value = check(None).await.unwrap().json().await.unwrap();
            let mut version = answer["version"].as_str().unwrap().to_string();
            for round in 0..rounds {
                let file = dir.join(format!("f{}", round % 7));
                std::fs::write(&file, round.to_string()).unwrap();
                let answer: serde_json::Value = check(Some(version.clone()))
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let seen = answer["changes"].as_array().is_some_and(|changes| {
                    changes
                        .iter()
                        .any(|c| c["path"] == file.display().to_string())
                });
                assert!(
                    seen,
                    "writer {writer}, round {round}: a check after the write missed it: {answer}"
                );
                version = answer["version"].as_str().unwrap().to_string();
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
}

/// A name that is not UTF-8: the first copy (a tar stream) brings it exactly; an incremental
/// sync, whose change list is JSON, names it in the report instead of mirroring it.
#[tokio::test]
async fn a_name_that_is_not_utf8_is_copied_or_reported() {
    use std::os::unix::ffi::OsStrExt;
    let daemon = Daemon::start();
    let root = daemon.path("w");
    std::fs::create_dir_all(&root).unwrap();
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(root.join(odd), "latin-1").unwrap();
    let local_dir = tempfile::tempdir().unwrap();
    let local = local_dir.path().join("mirror");
    let sandbox = daemon.sandbox();
    let report = sandbox.sync("w", &local, None).await.unwrap();
    assert_eq!(std::fs::read(local.join(odd)).unwrap(), b"latin-1");
    let other = std::ffi::OsStr::from_bytes(b"na\xefve.txt");
    std::fs::write(root.join(other), "x").unwrap();
    let report = sandbox
        .sync("w", &local, Some(&report.version))
        .await
        .unwrap();
    assert_eq!(report.mode, "incremental");
    assert_eq!(report.skipped, ["na\u{FFFD}ve.txt"], "{report:?}");
}
