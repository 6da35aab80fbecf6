//! `POST /api/git/checkout` with real git: local repositories over `file://`, one served
//! over dumb HTTP (to clone through a URL with credentials), and a server that never
//! answers (for the timeout).

use std::path::Path;
use std::process::Command;

use fsd_sdk::api::git::{GitCheckoutEvent, GitCheckoutRequest};
use fsd_tests::{Daemon, assert_error};
use futures_util::StreamExt;
use serde_json::json;

fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(["-c", "user.name=fsd", "-c", "user.email=fsd@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(output.status.success(), "git {args:?}: {output:?}");
}

/// A repository with two commits on `main` and a branch `feature`.
fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README.md"), "one\n").unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "one"]);
    std::fs::write(dir.join("README.md"), "two\n").unwrap();
    git(dir, &["commit", "-qam", "two"]);
    git(dir, &["branch", "feature"]);
    git(dir, &["checkout", "-q", "feature"]);
    std::fs::write(dir.join("feature.txt"), "f\n").unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "feature"]);
    git(dir, &["checkout", "-q", "main"]);
}

fn commits(dir: &Path) -> usize {
    let output = Command::new("git")
        .args(["rev-list", "--count", "HEAD"])
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_with_branch_depth_and_session_paths() {
    let daemon = Daemon::start();
    let source = tempfile::tempdir().unwrap();
    let repo = source.path().join("project.git");
    repository(&repo);
    let url = format!("file://{}", repo.display());

    // Default target: the workspace, named after the repository.
    let (status, body) = daemon
        .post("/api/git/checkout", json!({"repoUrl": url}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["branch"], "main");
    assert_eq!(body["repoUrl"], url.as_str());
    assert_eq!(
        body["targetDir"],
        daemon.path("project").display().to_string()
    );
    assert_eq!(
        std::fs::read_to_string(daemon.path("project/README.md")).unwrap(),
        "two\n"
    );

    // A branch, a depth, and a target relative to the session's directory.
    std::fs::create_dir(daemon.path("work")).unwrap();
    daemon
        .post(
            "/api/execute",
            json!({"command": "cd work", "sessionId": "s"}),
        )
        .await;
    let (status, body) = daemon
        .post(
            "/api/git/checkout",
            json!({"repoUrl": url, "branch": "feature", "depth": 1, "targetDir": "shallow", "sessionId": "s"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["branch"], "feature");
    assert_eq!(
        body["targetDir"],
        daemon.path("work/shallow").display().to_string()
    );
    assert!(daemon.path("work/shallow/feature.txt").exists());
    assert_eq!(commits(&daemon.path("work/shallow")), 1, "depth 1");

    // The SDK, with progress; and fsctl.
    let sandbox = daemon.sandbox();
    let request = GitCheckoutRequest {
        repo_url: url.clone(),
        target_dir: Some("via-sdk".into()),
        ..GitCheckoutRequest::default()
    };
    let mut events = sandbox.git_checkout_progress(&request).await.unwrap();
    let mut progress = 0;
    let mut complete = None;
    while let Some(event) = events.next().await {
        match event.unwrap() {
            GitCheckoutEvent::Progress { .. } => progress += 1,
            GitCheckoutEvent::Complete(done) => complete = Some(done),
            GitCheckoutEvent::Error(body) => panic!("{body:?}"),
        }
    }
    assert!(progress >= 1, "git said something on the way");
    assert_eq!(complete.expect("complete").branch, "main");
    let answer = sandbox
        .git_checkout(&GitCheckoutRequest {
            repo_url: url.clone(),
            target_dir: Some("via-sdk-json".into()),
            ..GitCheckoutRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(
        answer.target_dir,
        daemon.path("via-sdk-json").display().to_string()
    );
    let output = Command::new(fsd_tests::binary("fsctl"))
        .args([
            "--url",
            &daemon.url,
            "clone",
            &url,
            "by-fsctl",
            "--branch",
            "feature",
        ])
        .output()
        .unwrap();
    let printed = fsd_tests::succeeded(&output);
    assert_eq!(
        printed,
        format!("{} (feature)\n", daemon.path("by-fsctl").display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failure_has_its_class() {
    let daemon = Daemon::start();
    let source = tempfile::tempdir().unwrap();
    let repo = source.path().join("r");
    repository(&repo);
    let url = format!("file://{}", repo.display());

    let (status, body) = daemon
        .post(
            "/api/git/checkout",
            json!({"repoUrl": format!("file://{}/missing", source.path().display()), "targetDir": "a"}),
        )
        .await;
    assert_error(status, &body, 404, "GIT_REPOSITORY_NOT_FOUND");
    assert!(!daemon.path("a").exists(), "a failed clone leaves nothing");

    let (status, body) = daemon
        .post(
            "/api/git/checkout",
            json!({"repoUrl": url, "branch": "no-such-branch", "targetDir": "b"}),
        )
        .await;
    assert_error(status, &body, 404, "GIT_BRANCH_NOT_FOUND");

    // A non-empty directory is refused before git runs, and left as it was.
    std::fs::create_dir(daemon.path("taken")).unwrap();
    std::fs::write(daemon.path("taken/mine.txt"), "keep").unwrap();
    let (status, body) = daemon
        .post(
            "/api/git/checkout",
            json!({"repoUrl": url, "targetDir": "taken"}),
        )
        .await;
    assert_error(status, &body, 409, "FILE_EXISTS");
    assert_eq!(
        std::fs::read_to_string(daemon.path("taken/mine.txt")).unwrap(),
        "keep"
    );
    assert_eq!(std::fs::read_dir(daemon.path("taken")).unwrap().count(), 1);

    for (request, field, code) in [
        (json!({"repoUrl": "  "}), None, "INVALID_GIT_URL"),
        (
            json!({"repoUrl": url, "timeoutMs": 0}),
            Some("timeoutMs"),
            "VALIDATION_FAILED",
        ),
        (
            json!({"repoUrl": url, "depth": -1}),
            Some("depth"),
            "VALIDATION_FAILED",
        ),
        (
            json!({"repoUrl": url, "branch": "--upload-pack=x"}),
            Some("branch"),
            "VALIDATION_FAILED",
        ),
    ] {
        let (status, body) = daemon.post("/api/git/checkout", request).await;
        assert_error(status, &body, 400, code);
        if let Some(field) = field {
            fsd_tests::assert_validation(status, &body, field);
        }
    }

    // A server that accepts and never answers: the clone's own timeout ends it. The URL
    // carries credentials, which appear nowhere in the answer.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let (status, body) = daemon
        .post(
            "/api/git/checkout",
            json!({
                "repoUrl": format!("http://agent:hunter2@127.0.0.1:{port}/repo.git?token=t0ps3cret"),
                "targetDir": "slow",
                "timeoutMs": 1500,
            }),
        )
        .await;
    held.abort();
    assert_error(status, &body, 502, "GIT_NETWORK_ERROR");
    assert!(
        body["message"].as_str().unwrap().contains("timed out"),
        "{body}"
    );
    let text = body.to_string();
    for secret in ["hunter2", "t0ps3cret", "agent:"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    assert!(text.contains("******@127.0.0.1"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_redacted_in_the_answer_too() {
    let daemon = Daemon::start();
    // A bare repository served over dumb HTTP, which ignores the credentials in the URL.
    let served = tempfile::tempdir().unwrap();
    let work = served.path().join("work");
    repository(&work);
    git(
        served.path(),
        &["clone", "-q", "--bare", "work", "repo.git"],
    );
    git(&served.path().join("repo.git"), &["update-server-info"]);
    let port = fsd_tests::free_port();
    let mut server = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(served.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    fsd_tests::wait_until_listening(([127, 0, 0, 1], port).into(), "http.server").await;
    let url = format!("http://agent:hunter2@127.0.0.1:{port}/repo.git");
    let (status, body) = daemon
        .post(
            "/api/git/checkout",
            json!({"repoUrl": url, "targetDir": "served"}),
        )
        .await;
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["repoUrl"],
        format!("http://******@127.0.0.1:{port}/repo.git")
    );
    assert!(daemon.path("served/README.md").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_never_carry_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fsd.log");
    let port = fsd_tests::free_port();
    let mut fsd = Command::new(fsd_tests::binary("fsd"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--workspace",
        ])
        .arg(dir.path().join("ws"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env("FSD_LOG", "debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    fsd_tests::wait_until_listening(([127, 0, 0, 1], port).into(), "fsd").await;
    let closed = fsd_tests::free_port();
    let answer = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/git/checkout"))
        .json(&json!({"repoUrl": format!("https://agent:hunter2@127.0.0.1:{closed}/r.git?password=p4ss")}))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body = answer.text().await.unwrap();
    let _ = fsd.kill();
    let _ = fsd.wait();
    assert_eq!(status, 502, "{body}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("git clone failed"),
        "the failure is logged: {logged}"
    );
    for secret in ["hunter2", "p4ss"] {
        assert!(!logged.contains(secret), "{secret} in the log: {logged}");
        assert!(!body.contains(secret), "{secret} in the answer: {body}");
    }
}
