//! The fsctl command line against the real daemon, and `fsctl up`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};

use fsd_tests::{Daemon, Options, available_or_skip, binary, succeeded};

fn fsctl(daemon: &Daemon, args: &[&str]) -> Output {
    fsd_tests::fsctl(daemon, args)
}

#[test]
fn file_commands_round_trip() {
    let daemon = Daemon::start_with(Options {
        token: Some("cli-token".into()),
        ..Options::default()
    });
    let local = tempfile::tempdir().unwrap();
    let source = local.path().join("in.bin");
    let payload: Vec<u8> = (0..500_000u32).map(|i| (i % 255) as u8).collect();
    std::fs::write(&source, &payload).unwrap();

    let put = succeeded(&fsctl(
        &daemon,
        &["put", source.to_str().unwrap(), "data/in.bin"],
    ));
    assert!(put.contains("500000 bytes"), "{put}");
    assert_eq!(std::fs::read(daemon.path("data/in.bin")).unwrap(), payload);

    let cat = fsctl(&daemon, &["cat", "data/in.bin"]);
    assert!(cat.status.success());
    assert_eq!(cat.stdout, payload);

    let copy = local.path().join("out.bin");
    succeeded(&fsctl(
        &daemon,
        &["get", "data/in.bin", copy.to_str().unwrap()],
    ));
    assert_eq!(std::fs::read(&copy).unwrap(), payload);

    assert_eq!(
        succeeded(&fsctl(&daemon, &["mkdir", "-p", "a/b"])),
        "created a/b\n"
    );
    // -p of a directory that is there makes nothing, and says so (it said "created").
    assert_eq!(
        succeeded(&fsctl(&daemon, &["mkdir", "-p", "a/b"])),
        "a/b exists already\n"
    );
    assert!(daemon.path("a/b").is_dir());
    succeeded(&fsctl(&daemon, &["mv", "data/in.bin", "a/b/moved.bin"]));
    assert!(daemon.path("a/b/moved.bin").exists());

    let ls = succeeded(&fsctl(&daemon, &["ls", "-r"]));
    assert!(
        ls.lines()
            .any(|l| l.starts_with("-rw-r--r--") && l.ends_with(" a/b/moved.bin")),
        "{ls}"
    );
    assert!(
        ls.lines()
            .any(|l| l.starts_with("drwx") && l.ends_with(" a")),
        "{ls}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&succeeded(&fsctl(&daemon, &["--json", "ls", "a/b"]))).unwrap();
    assert_eq!(json[0]["name"], "moved.bin");
    assert_eq!(json[0]["size"], 500_000);

    let stat: serde_json::Value = serde_json::from_str(&succeeded(&fsctl(
        &daemon,
        &["stat", "--json", "a/b/moved.bin"],
    )))
    .unwrap();
    assert_eq!(stat["type"], "file");
    let human = succeeded(&fsctl(&daemon, &["stat", "a/b/moved.bin"]));
    assert!(human.contains("size: 500000"), "{human}");

    succeeded(&fsctl(&daemon, &["rm", "a/b/moved.bin"]));
    assert!(!daemon.path("a/b/moved.bin").exists());
}

#[test]
fn put_from_stdin() {
    let daemon = Daemon::start();
    let mut child = Command::new(binary("fsctl"))
        .args(["--url", &daemon.url, "put", "-", "piped.txt"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from a pipe\n")
        .unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    assert_eq!(
        std::fs::read_to_string(daemon.path("piped.txt")).unwrap(),
        "from a pipe\n"
    );
}

#[test]
fn errors_exit_nonzero_with_the_code() {
    let daemon = Daemon::start();
    let output = fsctl(&daemon, &["cat", "missing.txt"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("FILE_NOT_FOUND"), "{stderr}");

    let output = fsctl(&daemon, &["--json", "rm", "missing.txt"]);
    assert_eq!(output.status.code(), Some(1));
    let body: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(body["code"], "FILE_NOT_FOUND");
    assert_eq!(body["httpStatus"], 404);

    // `ls` of what cannot be listed exits 2, as GNU ls does (it exited 1).
    let output = fsctl(&daemon, &["ls", "missing-dir"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    // A command that ends the session's shell exits with its code, with --json as without
    // (it exited 1): the daemon's answer is the document.
    let output = fsctl(&daemon, &["--json", "exec", "--", "exit 4"]);
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    let body: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(body["code"], "SESSION_TERMINATED");
}

#[test]
fn up_serves_a_workspace_with_a_token_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    let (mut child, info) = up(dir.path(), "127.0.0.1:0", Stdio::inherit(), &[]);
    let url = info["url"].as_str().unwrap().to_string();
    let token = info["token"].as_str().unwrap().to_string();
    assert_eq!(token.len(), 32);
    assert!(workspace.is_dir());

    // The preview gateway comes up with it, guarded by the same token.
    let gateway = info["gateway"]["url"].as_str().unwrap().to_string();
    let exposed = Command::new(binary("fsctl"))
        .args([
            "--json",
            "--token",
            &token,
            "expose",
            "4444",
            "--gateway",
            &gateway,
        ])
        .env_remove("FSD_TOKEN")
        .output()
        .unwrap();
    assert!(
        exposed.status.success(),
        "{}",
        String::from_utf8_lossy(&exposed.stderr)
    );
    let exposed: serde_json::Value = serde_json::from_slice(&exposed.stdout).unwrap();
    assert!(
        exposed["url"]
            .as_str()
            .unwrap()
            .starts_with("http://4444-local-"),
        "{exposed}"
    );
    assert!(dir.path().join("fsd-gateway.json").is_file());

    let run = |args: &[&str], token: Option<&str>| {
        let mut command = Command::new(binary("fsctl"));
        command
            .args(["--url", &url])
            .args(args)
            .env_remove("FSD_TOKEN");
        if let Some(token) = token {
            command.args(["--token", token]);
        }
        command.output().unwrap()
    };
    std::fs::write(workspace.join("hello.txt"), "hi").unwrap();
    let cat = run(&["cat", "hello.txt"], Some(&token));
    assert_eq!(cat.stdout, b"hi");
    let denied = run(&["cat", "hello.txt"], None);
    assert!(String::from_utf8_lossy(&denied.stderr).contains("UNAUTHORIZED"));

    // The embedded store takes backups out of the box.
    let store = &info["store"];
    assert!(
        store["endpoint"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    let backup = |args: &[&str]| {
        Command::new(binary("fsctl"))
            .args(["--url", &url, "--token", &token, "backup"])
            .args(args)
            .env("FSD_S3_ENDPOINT", store["endpoint"].as_str().unwrap())
            .env("FSD_S3_BUCKET", store["bucket"].as_str().unwrap())
            .env("FSD_S3_ACCESS_KEY", store["accessKey"].as_str().unwrap())
            .env("FSD_S3_SECRET_KEY", store["secretKey"].as_str().unwrap())
            .output()
            .unwrap()
    };
    if fsd_tests::require_mount_privilege("fsctl backup through fsctl up's store") {
        std::fs::create_dir_all(workspace.join("proj")).unwrap();
        std::fs::write(workspace.join("proj/a.txt"), "backed up").unwrap();
        let created = backup(&["create", workspace.join("proj").to_str().unwrap()]);
        assert!(
            created.status.success(),
            "{}",
            String::from_utf8_lossy(&created.stderr)
        );
        let id = String::from_utf8_lossy(&created.stdout).trim().to_string();
        let listed = backup(&["list"]);
        assert!(String::from_utf8_lossy(&listed.stdout).contains(&id));
        let target = workspace.join("restored");
        let restored = backup(&["restore", &id, target.to_str().unwrap()]);
        assert!(
            restored.status.success(),
            "{}",
            String::from_utf8_lossy(&restored.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(target.join("a.txt")).unwrap(),
            "backed up"
        );
        // The time machine from the command line: an incremental snapshot over the first,
        // its place in the timeline, its tree, the difference, one file, a path restored.
        std::fs::write(workspace.join("proj/b.txt"), "second").unwrap();
        let proj = workspace.join("proj");
        let proj = proj.to_str().unwrap();
        let second = backup(&["--json", "create", proj]);
        let second: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
        assert_eq!(second["parent"], id.as_str(), "{second}");
        assert_eq!(second["changes"]["created"], 1, "{second}");
        let second = second["id"].as_str().unwrap();
        let log = String::from_utf8_lossy(&backup(&["log", proj]).stdout).to_string();
        assert!(
            log.lines().next().is_some_and(|l| l.starts_with(second)) && log.contains(&id),
            "{log}"
        );
        let ls = String::from_utf8_lossy(&backup(&["ls", second]).stdout).to_string();
        assert!(ls.contains("a.txt") && ls.contains("b.txt"), "{ls}");
        // As diff(1): 1 when it lists differences, 2 when it cannot compare.
        let diff = backup(&["diff", &id, second]);
        assert_eq!(diff.status.code(), Some(1), "{diff:?}");
        let diff = String::from_utf8_lossy(&diff.stdout).to_string();
        assert_eq!(diff.trim(), "created   b.txt", "{diff}");
        let unknown = backup(&["diff", "no-such-backup"]);
        assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
        assert_eq!(backup(&["cat", second, "a.txt"]).stdout, b"backed up");
        std::fs::write(workspace.join("proj/a.txt"), "changed").unwrap();
        let back = backup(&["restore", second, proj, "--path", "a.txt"]);
        assert!(
            back.status.success(),
            "{}",
            String::from_utf8_lossy(&back.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(workspace.join("proj/a.txt")).unwrap(),
            "backed up"
        );
        assert!(backup(&["delete", second]).status.success());

        assert!(backup(&["delete", &id]).status.success());
        let gone = backup(&["restore", &id, target.to_str().unwrap()]);
        assert!(String::from_utf8_lossy(&gone.stderr).contains("BACKUP_NOT_FOUND"));
    }

    // The store's bucket is mounted through a proxy, scoped to `files/`.
    let bucket = dir.path().join("bucket");
    if fsd_tests::require_mount_privilege("fsctl up's bucket mount") {
        assert_eq!(info["mount"]["mountPath"], bucket.to_str().unwrap());
        assert_eq!(info["mount"]["viaProxy"], true);
        std::fs::write(bucket.join("note.txt"), "through the mount").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("store/fsd/files/note.txt")).unwrap(),
            "through the mount"
        );
    }

    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!bucket.exists(), "the mount went with the daemon");
    assert!(
        std::net::TcpStream::connect(url.trim_start_matches("http://")).is_err(),
        "daemon still up"
    );
}

#[test]
fn exec_streams_output_and_exits_with_the_code() {
    let daemon = Daemon::start();
    let output = fsctl(&daemon, &["exec", "--", "echo out; echo err >&2; exit 5"]);
    assert_eq!(output.status.code(), Some(5));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "err\n");
    // Several words each arrive as written, as kubectl and docker exec pass them (they were
    // joined with spaces, as ssh joins them: a syntax error here).
    let program = "import sys\nprint(\"a  b\", sys.argv[1:])";
    let output = fsctl(
        &daemon,
        &["exec", "--", "python3", "-c", program, "it's", "x;y"],
    );
    assert_eq!(succeeded(&output), "a  b [\"it's\", 'x;y']\n");
    let output = fsctl(
        &daemon,
        &["exec", "--", "printf", "%s|", "a b", "$HOME", "*"],
    );
    assert_eq!(succeeded(&output), "a b|$HOME|*|");

    let output = fsctl(
        &daemon,
        &["exec", "--env", "GREETING=hi", "--", "echo $GREETING"],
    );
    assert_eq!(succeeded(&output), "hi\n");
    let output = fsctl(&daemon, &["--json", "exec", "--", "printf", "x"]);
    let result: serde_json::Value = serde_json::from_str(&succeeded(&output)).unwrap();
    assert_eq!(result["stdout"], "x");
}

#[tokio::test]
async fn ps_logs_and_kill() {
    let daemon = Daemon::start();
    let (status, _) = daemon
        .post(
            "/api/process/start",
            serde_json::json!({"command": "echo logged; sleep 3037", "processId": "cli-proc"}),
        )
        .await;
    assert!(status.is_success());
    let mut logs = String::new();
    for _ in 0..100 {
        logs = succeeded(&fsctl(&daemon, &["logs", "cli-proc"]));
        if !logs.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(logs, "logged\n");
    let ps = succeeded(&fsctl(&daemon, &["ps", "--status", "running"]));
    assert!(
        ps.lines()
            .any(|l| l.starts_with("cli-proc") && l.contains("running")),
        "{ps}"
    );
    let sent = succeeded(&fsctl(&daemon, &["kill", "--signal", "cont", "cli-proc"]));
    assert!(sent.starts_with("sent SIGCONT to "), "{sent}");
    succeeded(&fsctl(&daemon, &["kill", "cli-proc"]));
    let followed = fsctl(&daemon, &["logs", "-f", "cli-proc"]);
    assert_eq!(followed.status.code(), Some(143));
    assert_eq!(String::from_utf8_lossy(&followed.stdout), "logged\n");
}

#[test]
fn mount_serves_a_proxy_until_stopped_and_umount_unmounts() {
    if !fsd_tests::require_mount_privilege("fsctl mount") {
        return;
    }
    let daemon = Daemon::start();
    let store = fsd_tests::s3::Store::start();
    let dir = tempfile::tempdir().unwrap();
    let store_env = |command: &mut Command| {
        command
            .env("FSD_S3_ENDPOINT", &store.url)
            .env("FSD_S3_BUCKET", fsd_tests::s3::BUCKET)
            .env("FSD_S3_ACCESS_KEY", fsd_tests::s3::ACCESS_KEY)
            .env("FSD_S3_SECRET_KEY", fsd_tests::s3::SECRET_KEY)
            .args(["--url", &daemon.url]);
    };
    // Through a proxy: stays up serving it; SIGTERM unmounts.
    let proxied = dir.path().join("proxied");
    let mut command = Command::new(binary("fsctl"));
    store_env(&mut command);
    let mut child = command
        .args(["mount", "--prefix", "data"])
        .arg(&proxied)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("via credential proxy"), "{line}");
    std::fs::write(proxied.join("a.txt"), "a").unwrap();
    assert_eq!(
        std::fs::read_to_string(
            store
                .dir
                .path()
                .join(fsd_tests::s3::BUCKET)
                .join("data/a.txt")
        )
        .unwrap(),
        "a"
    );
    let mut listed = Command::new(binary("fsctl"));
    store_env(&mut listed);
    let listed = listed.arg("mounts").output().unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains(proxied.to_str().unwrap()));
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    assert!(!proxied.exists(), "unmounted and removed at SIGTERM");

    // Direct: the daemon gets the keys; the command returns; `fsctl umount` unmounts.
    let direct = dir.path().join("direct");
    let mut command = Command::new(binary("fsctl"));
    store_env(&mut command);
    let mounted = command
        .args(["mount", "--direct"])
        .arg(&direct)
        .output()
        .unwrap();
    assert!(
        mounted.status.success(),
        "{}",
        String::from_utf8_lossy(&mounted.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(direct.join("data/a.txt")).unwrap(),
        "a"
    );
    let mut command = Command::new(binary("fsctl"));
    store_env(&mut command);
    let unmounted = command.arg("umount").arg(&direct).output().unwrap();
    assert!(
        unmounted.status.success(),
        "{}",
        String::from_utf8_lossy(&unmounted.stderr)
    );
    assert!(!direct.exists());
}

/// `fsctl --json up` over `dir` (workspace `ws`, store, bucket) with its gateway on
/// `gateway`; the running child and its JSON document.
/// A running `fsctl up`, stopped (SIGTERM, then SIGKILL) when dropped, so a failing test
/// does not leave it, its daemon and its schedule running.
struct Up(Option<std::process::Child>, Vec<u32>);

impl Up {
    fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        self.0.take().expect("running").wait_with_output()
    }
}

/// The processes `pid` started (its daemon, for `fsctl up`).
fn children_of(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

impl std::ops::Deref for Up {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("running")
    }
}

impl std::ops::DerefMut for Up {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.as_mut().expect("running")
    }
}

impl Drop for Up {
    /// Stops it, then removes what its daemon wrote in /var/backups (its snapshots).
    fn drop(&mut self) {
        // One already waited for (through `DerefMut`) is left alone.
        if let Some(mut child) = self.0.take() {
            fsd_tests::stop_child(&mut child);
        }
        for daemon in &self.1 {
            fsd_tests::archives::remove_written_by(*daemon);
        }
    }
}

fn up(
    dir: &std::path::Path,
    gateway: &str,
    stderr: Stdio,
    extra: &[&str],
) -> (Up, serde_json::Value) {
    up_logging(dir, gateway, stderr, extra, "warn")
}

/// `fsctl --json up` with its directories under `dir` and its gateway on `gateway`.
fn up_command(dir: &std::path::Path, gateway: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(binary("fsctl"));
    command
        .args(["--json", "up", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(dir.join("ws"))
        .arg("--store-dir")
        .arg(dir.join("store"))
        .arg("--mount-dir")
        .arg(dir.join("bucket"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(["--gateway-listen", gateway])
        .args(extra)
        .env_remove("FSD_TOKEN")
        .env("FSD_BIN", binary("fsd"));
    command
}

/// `fsctl ls` on the daemon at `url` with `token` succeeds: the token is the daemon's.
fn lists_with(url: &str, token: &str) {
    let listed = Command::new(binary("fsctl"))
        .args(["--url", url, "ls"])
        .env("FSD_TOKEN", token)
        .output()
        .unwrap();
    succeeded(&listed);
}

/// [`up`] with the daemon logging at `log` (a `tracing` filter).
fn up_logging(
    dir: &std::path::Path,
    gateway: &str,
    stderr: Stdio,
    extra: &[&str],
    log: &str,
) -> (Up, serde_json::Value) {
    fsd_tests::archives::watch();
    let mut child = up_command(dir, gateway, extra)
        .env("FSD_LOG", log)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    while !text.trim_end().ends_with('}') {
        assert!(
            reader.read_line(&mut text).unwrap() > 0,
            "fsctl up ended early: {text}"
        );
    }
    let daemons = children_of(child.id());
    (
        Up(Some(child), daemons),
        serde_json::from_str(&text).unwrap(),
    )
}

/// `fsctl up` comes up without its gateway when the gateway's address is taken, and says so
/// (as it does without FUSE for the bucket).
#[test]
fn up_comes_up_without_its_gateway_when_its_address_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    // Its stderr is read only at the end (the daemon logs at `warn`, so it stays small).
    let (child, info) = up(dir.path(), &address, Stdio::piped(), &[]);
    assert!(info["gateway"].is_null(), "{info}");
    assert!(
        info["url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the preview gateway is not running"),
        "{stderr}"
    );
    drop(taken);
}

/// `fsctl up` started again keeps its token, its store's keys and the store's address (in
/// its state directory, private), so a shell given them goes on after a restart (each start
/// made new ones); `--new-token` makes new ones.
#[test]
fn up_keeps_its_token_and_store_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--no-mount", "--no-gateway"];
    let (first, info) = up(dir.path(), "127.0.0.1:0", Stdio::null(), &extra);
    drop(first);
    let (second, again) = up(dir.path(), "127.0.0.1:0", Stdio::null(), &extra);
    assert_eq!(again["token"], info["token"], "{again}");
    assert_eq!(again["store"], info["store"], "{again}");
    let kept = std::path::Path::new(again["kept"].as_str().unwrap());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(kept).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "{}", kept.display());
    // A shell given the first start's token goes on.
    lists_with(
        again["url"].as_str().unwrap(),
        info["token"].as_str().unwrap(),
    );
    drop(second);
    let (third, fresh) = up(
        dir.path(),
        "127.0.0.1:0",
        Stdio::null(),
        &["--no-mount", "--no-gateway", "--new-token"],
    );
    assert_ne!(fresh["token"], info["token"], "{fresh}");
    assert_ne!(
        fresh["store"]["accessKey"], info["store"]["accessKey"],
        "{fresh}"
    );
    drop(third);
}

/// A second `fsctl up` on the directories of one that runs is refused (its fsd will not share
/// the state directory) before it starts a store of its own, and changes nothing the first
/// kept: its token, keys and store's address stay, and the first goes on serving.
#[test]
fn up_beside_a_running_up_is_refused_and_changes_nothing_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--no-mount", "--no-gateway"];
    let (first, info) = up(dir.path(), "127.0.0.1:0", Stdio::null(), &extra);
    let kept = std::path::Path::new(info["kept"].as_str().unwrap());
    let kept_before = std::fs::read_to_string(kept).unwrap();
    let second = up_command(dir.path(), "127.0.0.1:0", &extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "refused: {said}");
    assert!(said.contains("is in use by another fsd"), "{said}");
    // A store started first would have found the first's address taken and said so.
    assert!(
        !said.contains("the store's last address"),
        "a refused start starts no store: {said}"
    );
    assert_eq!(
        std::fs::read_to_string(kept).unwrap(),
        kept_before,
        "what the first kept is unchanged"
    );
    lists_with(
        info["url"].as_str().unwrap(),
        info["token"].as_str().unwrap(),
    );
    drop(first);
}

/// `fsctl up --snapshot DIR --every 1s --keep-last 2`: snapshots of DIR keep coming (each
/// incremental over the one before), and the store never holds more than the policy keeps
/// and what those stack on: no chain is ever broken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_snapshots_on_a_schedule_and_prunes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws/proj")).unwrap();
    std::fs::write(dir.path().join("ws/proj/a.txt"), "a").unwrap();
    let (child, info) = up(
        dir.path(),
        "127.0.0.1:0",
        Stdio::null(),
        &[
            "--no-mount",
            "--no-gateway",
            "--snapshot",
            "proj",
            "--every",
            "1s",
            "--keep-last",
            "2",
        ],
    );
    let store = &info["store"];
    let backups = fsctl::trusted::Backups::new(fsctl::trusted::BucketAccess::new(
        store["endpoint"].as_str().unwrap(),
        store["bucket"].as_str().unwrap(),
        store["accessKey"].as_str().unwrap(),
        store["secretKey"].as_str().unwrap(),
    ));
    let project = std::fs::canonicalize(dir.path().join("ws/proj")).unwrap();
    let mut most = 0;
    let mut ids = std::collections::BTreeSet::new();
    let started = std::time::Instant::now();
    // Rounds a second apart, watched until four were made and pruning had its rounds
    // (at least 5.5 s): a busy machine makes them slower, never fewer.
    while ids.len() < 4 || started.elapsed() < std::time::Duration::from_millis(5500) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "a snapshot each second: {ids:?} in 60 s"
        );
        let listed = backups.list_backups().await.unwrap();
        assert!(
            listed
                .iter()
                .all(|meta| meta.dir == project.display().to_string()),
            "{listed:?}"
        );
        // Every parent is still there; the tips of the chains are what the policy keeps (a
        // snapshot may be listed for a moment before its round prunes).
        let listed_ids: std::collections::BTreeSet<&str> =
            listed.iter().map(|meta| meta.id.as_str()).collect();
        let parents: std::collections::BTreeSet<&str> = listed
            .iter()
            .filter_map(|meta| meta.parent.as_deref())
            .collect();
        assert!(parents.is_subset(&listed_ids), "a chain broken: {listed:?}");
        let tips = listed_ids.difference(&parents).count();
        assert!(tips <= 3, "more than the policy keeps: {listed:?}");
        most = most.max(listed.len());
        ids.extend(listed.into_iter().map(|meta| meta.id));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // fsctl up stops its store with it: the checks come first.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let _ = child.wait_with_output();
    assert!(most >= 2, "snapshots were made");
    assert!(ids.len() >= 4, "a snapshot each second: {ids:?}");
}

/// Runs `fsctl ARGS | head -c 1` in bash; answers fsctl's exit status and what it wrote on
/// stderr.
fn into_head(daemon: &Daemon, env: &[(&str, &str)], args: &[&str]) -> (i32, String) {
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let mut words = vec![
        binary("fsctl").display().to_string(),
        "--url".into(),
        daemon.url.clone(),
    ];
    words.extend(args.iter().map(|arg| arg.to_string()));
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "{} 2>'{}' | head -c 1 >/dev/null; echo ${{PIPESTATUS[0]}}",
        quoted.join(" "),
        stderr.path().display()
    );
    let mut command = Command::new("bash");
    command.args(["-c", &script]).env_remove("FSD_TOKEN");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let status = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap();
    (status, std::fs::read_to_string(stderr.path()).unwrap())
}

#[test]
fn printing_commands_end_quietly_when_their_reader_goes() {
    let daemon = Daemon::start();
    let tree = daemon.path("many");
    for i in 0..4000 {
        let dir = tree.join(format!("d{}", i % 40));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("file-{i}.txt")), format!("{i}\n")).unwrap();
    }
    std::fs::write(tree.join("big.bin"), fsd_tests::noise(4 << 20, 3)).unwrap();
    let store = fsd_tests::s3::Store::start();
    let env = [
        ("FSD_S3_ENDPOINT", store.url.as_str()),
        ("FSD_S3_ACCESS_KEY", fsd_tests::s3::ACCESS_KEY),
        ("FSD_S3_SECRET_KEY", fsd_tests::s3::SECRET_KEY),
    ];
    let made = {
        let mut command = Command::new(binary("fsctl"));
        command.args(["--url", &daemon.url, "backup", "create"]);
        command.arg(&tree).env_remove("FSD_TOKEN");
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    };
    let id = succeeded(&made).trim().to_string();
    let tree = tree.display().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["ls", "--recursive", &tree],
        vec!["cat", "many/big.bin"],
        vec!["exec", "--", "seq", "1", "300000"],
        vec!["backup", "ls", &id],
        vec!["backup", "cat", &id, "big.bin"],
    ];
    for args in cases {
        let (status, stderr) = into_head(&daemon, &env, &args);
        assert!(
            status == 0 || status == 141,
            "fsctl {args:?} | head: exit {status}, stderr: {stderr}"
        );
        assert_eq!(stderr, "", "fsctl {args:?} | head");
    }
    // (The store takes the archive the daemon kept of its backup with it when dropped.)
}

#[test]
fn exec_gives_the_command_fsctls_stdin_unless_told_not_to() {
    use std::io::Write;
    let daemon = Daemon::start();
    let run = |args: &[&str], input: &[u8]| {
        let mut child = Command::new(binary("fsctl"))
            .args(["--url", &daemon.url])
            .args(args)
            .env_remove("FSD_TOKEN")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        // A command that never saw its end of file fails here, fsctl's stderr above it,
        // instead of holding the suite.
        fsd_tests::wait_output(child, std::time::Duration::from_secs(60))
            .unwrap_or_else(|| panic!("fsctl {args:?} did not end within 60 s"))
    };
    let output = run(&["exec", "--", "wc", "-l"], b"a\nb\nc\n");
    assert_eq!(succeeded(&output).trim(), "3");
    let output = run(&["exec", "--", "od -An -tx1 | tr -d ' \\n'"], &[0, 255]);
    assert_eq!(succeeded(&output), "00ff");
    let output = run(&["exec", "-n", "--", "wc", "-c"], b"ignored");
    assert_eq!(succeeded(&output).trim(), "0");
}

/// `fsctl exec` streams a piped stdin as ssh does: the command starts at once (a harness
/// that leaves its pipe open is not held until it closes: fsctl hung for ever), reads each
/// line as it is written (a prompt answered after the command asked), and reads end of
/// file when the pipe closes; `--json` still gives stdin whole.
#[test]
fn exec_streams_its_stdin_as_it_comes() {
    let daemon = Daemon::start();
    let spawn = |args: &[&str]| {
        Command::new(binary("fsctl"))
            .args(["--url", &daemon.url, "exec"])
            .args(args)
            .env_remove("FSD_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The pipe stays open and the command does not read it: fsctl ends with the command.
    let mut child = spawn(&["--", "echo", "ran"]);
    let held = child.stdin.take().unwrap();
    let output = fsd_tests::wait_output(child, std::time::Duration::from_secs(60))
        .expect("fsctl exec waited for a stdin the command never read");
    assert_eq!(succeeded(&output), "ran\n");
    drop(held);

    // A dialogue: the command asks, the answer is written only once the question is read.
    let mut child = spawn(&[
        "--",
        "echo 'name?'; read name; echo \"hello $name\"; od -An -tx1 | tr -d ' \\n'",
    ]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "name?\n");
    stdin.write_all(b"ada\n").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "hello ada\n");
    // Bytes, then end of file: `od` ends, and with it the command.
    stdin.write_all(&[0, 255, b'\n']).unwrap();
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(rest, "00ff0a");
    assert!(child.wait().unwrap().success());

    // A command that ends before reading everything: fsctl exits with its code, quietly.
    let mut child = spawn(&["--", "head -c 1 >/dev/null; exit 3"]);
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&vec![b'x'; 4 * 1024 * 1024]);
    });
    let output = fsd_tests::wait_output(child, std::time::Duration::from_secs(60)).unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    writer.join().unwrap();

    // `exit N` ends the session's shell while its stdin's end of file is on its way: fsctl
    // exits N and says nothing of a session it no longer writes to.
    for _ in 0..5 {
        let mut child = spawn(&["--", "exit 4"]);
        drop(child.stdin.take());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(4), "{output:?}");
        assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    }

    // --json answers whole, so it reads its stdin to the end first, as before.
    let mut child = spawn(&["--json", "--", "wc", "-c"]);
    child.stdin.take().unwrap().write_all(b"12345").unwrap();
    let output = child.wait_with_output().unwrap();
    let result: serde_json::Value = serde_json::from_str(&succeeded(&output)).unwrap();
    assert_eq!(result["stdout"].as_str().unwrap().trim(), "5");
}

#[test]
fn start_and_send_feed_a_process_its_stdin() {
    use std::io::Write;
    let daemon = Daemon::start();
    let target = daemon.path("sent.txt");
    let started = fsctl(
        &daemon,
        &[
            "start",
            "--pipe",
            "--id",
            "fed",
            "--",
            &format!("cat > '{}'", target.display()),
        ],
    );
    assert_eq!(succeeded(&started), "fed\n");
    let mut send = Command::new(binary("fsctl"))
        .args(["--url", &daemon.url, "send", "fed"])
        .env_remove("FSD_TOKEN")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let input: Vec<u8> = (0..600_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    send.stdin.take().unwrap().write_all(&input).unwrap();
    assert!(send.wait().unwrap().success());
    // `send` closed the process's stdin: cat ends, having written everything.
    let mut ended = false;
    for _ in 0..250 {
        let ps = succeeded(&fsctl(&daemon, &["ps", "--status", "completed"]));
        if ps.lines().any(|l| l.starts_with("fed")) {
            ended = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(ended, "cat never ended");
    assert!(std::fs::read(&target).unwrap() == input, "the copy differs");
    let output = fsctl(&daemon, &["send", "fed"]);
    assert!(
        !output.status.success(),
        "a finished process takes no stdin"
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("PROCESS_EXITED"),
        "{output:?}"
    );
}

/// Ctrl-C on `fsctl up 2>&1 | tee up.log` takes `tee` too: stderr is then a pipe whose
/// reader has gone. `fsctl up` and its daemon stop as with a terminal, without a panic
/// (exit 101 before).
#[test]
fn up_stops_cleanly_when_its_stderr_reader_has_gone() {
    let dir = tempfile::tempdir().unwrap();
    // Its daemon logs its stop, as by default.
    let (mut child, _) = up_logging(dir.path(), "127.0.0.1:0", Stdio::piped(), &[], "info");
    let daemons = child.1.clone();
    drop(child.0.as_mut().expect("running").stderr.take());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.0.take().expect("running").wait().unwrap();
    assert!(
        matches!(status.code(), Some(0) | Some(130)),
        "fsctl up ended with {status:?}"
    );
    for daemon in daemons {
        for _ in 0..100 {
            if !std::path::Path::new(&format!("/proc/{daemon}")).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// A mistyped flag before `--` is refused, not run as the command (`fsctl start --pip --
/// cat` printed an id, then failed with 127); a command's own flags after its first word
/// still go to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_flags_are_refused_and_a_commands_own_flags_are_its() {
    let daemon = Daemon::start();
    for args in [
        &["start", "--pip", "--", "cat"][..],
        &["exec", "--timout-ms", "5", "--", "true"][..],
    ] {
        let refused = fsd_tests::fsctl(&daemon, args);
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {refused:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(args[1]), "{args:?}: {stderr}");
    }
    let (_, list) = daemon.get("/api/process/list").await;
    assert_eq!(
        list["processes"],
        serde_json::json!([]),
        "nothing started: {list}"
    );
    let echoed = fsd_tests::fsctl(&daemon, &["exec", "-n", "echo", "-n", "hi"]);
    assert_eq!(succeeded(&echoed), "hi");
    let dashed = fsd_tests::fsctl(&daemon, &["exec", "-n", "--", "-x"]);
    assert_eq!(dashed.status.code(), Some(127), "{dashed:?}");
}

/// With no daemon at the address, fsctl says so and what to start, instead of the HTTP
/// client's words.
#[test]
fn a_missing_daemon_is_named_with_what_to_start() {
    let port = fsd_tests::free_port();
    let output = Command::new(binary("fsctl"))
        .args(["--url", &format!("http://127.0.0.1:{port}"), "ls"])
        .env_remove("FSD_TOKEN")
        .output()
        .unwrap();
    // ls's status for trouble, as GNU ls.
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("connection refused at http://127.0.0.1:{port}"))
            && stderr.contains("fsctl up"),
        "{stderr}"
    );
}

/// `fsctl sync --follow` prints a line for the first round and for rounds that changed
/// something, not one for every quiet round, and says what it leaves out (it did not).
#[test]
fn sync_follow_is_quiet_while_nothing_changes() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("a.txt"), "a").unwrap();
    let local = tempfile::tempdir().unwrap();
    let mirror = local.path().join("m");
    let child = Command::new(binary("fsctl"))
        .args(["--url", &daemon.url, "sync", "--follow=20", "."])
        .arg(&mirror)
        .env_remove("FSD_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "one line for the first round only: {stdout}"
    );
    assert!(mirror.join("a.txt").is_file());
    // What the mirror leaves out is said, as the two-way sync says it.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("leaving out .git, node_modules, .DS_Store"),
        "{stderr}"
    );
}

/// `fsctl rm` of a directory answers in fsctl's words, not the SDK's (`deleteFile()`,
/// `exec('rm -rf …')`).
#[test]
fn rm_of_a_directory_answers_in_fsctls_words() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("d")).unwrap();
    let output = fsd_tests::fsctl(&daemon, &["rm", "d"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("IS_DIRECTORY")
            && stderr.contains("fsctl exec -- rm -r d")
            && !stderr.contains("deleteFile"),
        "{stderr}"
    );
    assert!(daemon.path("d").is_dir());
}

/// `fsctl exec` runs in its session's shell whether it streams or has a timeout: `cd` and
/// `export` last for the session's next command, and one-off commands leave no process
/// record behind.
#[test]
fn exec_keeps_cd_and_export_in_its_session_and_leaves_no_records() {
    let daemon = Daemon::start();
    let dir = daemon.path("exec-cd");
    std::fs::create_dir_all(&dir).unwrap();
    let cd = format!("cd {}; export Z=1", dir.display());
    for session in [&["--session", "a"][..], &[][..]] {
        let args = |rest: &[&str]| -> Vec<String> {
            let mut args = vec!["exec".to_string()];
            args.extend(session.iter().map(|s| s.to_string()));
            args.extend(rest.iter().map(|s| s.to_string()));
            args
        };
        let run = |rest: &[&str]| {
            let args = args(rest);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            fsctl(&daemon, &args)
        };
        succeeded(&run(&["--", &cd]));
        let expected = format!("{}\n1\n", dir.display());
        assert_eq!(
            succeeded(&run(&["--", "pwd; echo $Z"])),
            expected,
            "{session:?}"
        );
        assert_eq!(
            succeeded(&run(&["--timeout-ms", "5000", "--", "pwd; echo $Z"])),
            expected,
            "{session:?}"
        );
        succeeded(&run(&["--", "cd /"]));
    }
    let timed_out = fsctl(&daemon, &["exec", "--timeout-ms", "200", "--", "sleep 30"]);
    assert_eq!(timed_out.status.code(), Some(124));
    assert!(
        String::from_utf8_lossy(&timed_out.stderr).contains("timeout after 200ms"),
        "{timed_out:?}"
    );
    let ps = fsctl(&daemon, &["ps"]);
    assert_eq!(succeeded(&ps).lines().count(), 1, "only the header: {ps:?}");
}

/// A two-way sync's progress on a terminal gives its rate as a whole number of changes a
/// second (it printed a raw float with no unit: `98,598,552.8806/s`).
#[test]
fn a_sync_shows_its_rate_in_changes_a_second() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("up-4410")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    for n in 0..1500 {
        let sub = local.join(format!("d{}", n % 15));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{n}.txt")), format!("{n}\n")).unwrap();
    }
    let state = dir.path().join("state");
    let mut terminal = Terminal::spawn_with(
        &daemon,
        &[
            "sync",
            "--two-way",
            "--no-watcher",
            "up-4410",
            local.to_str().unwrap(),
        ],
        &[("FSD_SYNC_STATE_DIR", &state)],
    );
    let code = terminal.exit_code();
    assert_eq!(code, 0, "{}", terminal.text());
    terminal.wait_for("changes/s");
    let text = terminal.text();
    assert!(!text.contains(".0000/s"), "{text}");
}

/// A terminal's Ctrl-C on `fsctl exec` reaches the command, as ssh passes it on: a program
/// that handles it decides (here it ends, and fsctl with it); a second Ctrl-C leaves, and
/// the daemon stops the command that went on.
#[test]
fn ctrl_c_on_exec_reaches_the_command_through_a_terminal() {
    if !available_or_skip(
        fsd_tests::on_path("python3"),
        "ctrl_c_on_exec_reaches_the_command_through_a_terminal",
        "python3",
    ) {
        return;
    }
    let daemon = Daemon::start();
    std::fs::write(
        daemon.path("on-int-5127.py"),
        "import signal, sys, time\n\
         def stop(*_):\n    print('interrupted', flush=True)\n    sys.exit(3)\n\
         signal.signal(signal.SIGINT, stop)\n\
         print('ready', flush=True)\n\
         time.sleep(60)\n",
    )
    .unwrap();
    std::fs::write(
        daemon.path("keeps-on-6248.py"),
        "import signal, time\n\
         signal.signal(signal.SIGINT, lambda *_: print('carrying on', flush=True))\n\
         print('ready', flush=True)\n\
         while True:\n    time.sleep(0.01)\n",
    )
    .unwrap();

    let mut terminal = Terminal::spawn(&daemon, &["exec", "--", "python3 -u on-int-5127.py"]);
    terminal.wait_for("ready");
    terminal.interrupt();
    terminal.wait_for("interrupted");
    let code = terminal.exit_code();
    // The program ended with 3 on the interrupt; the interrupt ended its command line.
    assert_eq!(code, 130, "{}", terminal.text());

    // A glob, so only the program's own command line names it, not fsctl's.
    let mut terminal = Terminal::spawn(&daemon, &["exec", "--", "python3 -u keeps-on-*.py"]);
    terminal.wait_for("ready");
    terminal.interrupt();
    terminal.wait_for("carrying on");
    assert_eq!(
        fsd_tests::host_processes_with("keeps-on-6248.py").len(),
        1,
        "the program runs on after the first Ctrl-C"
    );
    terminal.interrupt();
    assert_eq!(terminal.exit_code(), 130, "{}", terminal.text());
    let started = std::time::Instant::now();
    while !fsd_tests::host_processes_with("keeps-on-6248.py").is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "the daemon never stopped the command fsctl left"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The session is free for the next command.
    assert_eq!(
        succeeded(&fsctl(&daemon, &["exec", "--", "echo next"])),
        "next\n"
    );
}

/// fsctl on a pseudo-terminal of its own, as a user's shell runs it: the terminal's
/// controlling process, so Ctrl-C (byte 3) is SIGINT from the line discipline.
struct Terminal {
    child: std::process::Child,
    master: std::fs::File,
    seen: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Terminal {
    fn spawn(daemon: &Daemon, args: &[&str]) -> Self {
        Self::spawn_with(daemon, args, &[])
    }

    /// `fsctl ARGS` on a terminal of its own, with `env` set.
    fn spawn_with(daemon: &Daemon, args: &[&str], env: &[(&str, &std::path::Path)]) -> Self {
        use std::os::unix::process::CommandExt;
        let pty = nix::pty::openpty(None, None).unwrap();
        let slave = std::fs::File::from(pty.slave);
        let mut command = Command::new(binary("fsctl"));
        command
            .args(["--url", &daemon.url])
            .args(args)
            .envs(env.iter().copied())
            .env_remove("FSD_TOKEN")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        // SAFETY: setsid and TIOCSCTTY are async-signal-safe system calls on the child's
        // own descriptors, made between fork and exec.
        unsafe {
            command.pre_exec(|| {
                nix::unistd::setsid()?;
                if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap();
        let master = std::fs::File::from(pty.master);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut reader = master.try_clone().unwrap();
        let shared = seen.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buffer = [0u8; 4096];
            // Ends with EIO once every holder of the terminal's other side has gone.
            while let Ok(read @ 1..) = reader.read(&mut buffer) {
                shared
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..read]));
            }
        });
        Self {
            child,
            master,
            seen,
        }
    }

    fn text(&self) -> String {
        self.seen.lock().unwrap().clone()
    }

    /// Waits up to 20 s for `text` on the terminal.
    fn wait_for(&self, text: &str) {
        let started = std::time::Instant::now();
        while !self.text().contains(text) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "no {text:?} on the terminal: {:?}",
                self.text()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Types Ctrl-C.
    fn interrupt(&mut self) {
        self.master.write_all(&[3]).unwrap();
    }

    /// fsctl's exit code, waited for up to 20 s.
    fn exit_code(&mut self) -> i32 {
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            if started.elapsed() > std::time::Duration::from_secs(20) {
                let _ = self.child.kill();
                panic!("fsctl did not exit: {:?}", self.text());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The README's flow: `fsctl backup restore ID DIR` under `fsctl up`, an edit in `DIR`, then
/// Ctrl-C of `fsctl up`. The stop says it took the restore down and kept what was written;
/// the next `fsctl up` over the same state mounts it again, edit included, until `fsctl
/// backup release`. Relative directories work as in the other commands, and a diff right
/// after a restore says nothing changed.
#[test]
fn a_restore_under_up_survives_its_ctrl_c_and_next_start() {
    if !fsd_tests::require_mount_privilege("a_restore_under_up_survives_its_ctrl_c_and_next_start")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws/proj")).unwrap();
    std::fs::write(dir.path().join("ws/proj/a.txt"), "as backed up\n").unwrap();
    let log = tempfile::NamedTempFile::new().unwrap();
    let quiet = ["--no-mount", "--no-gateway"];
    let (mut first, info) = up_logging(
        dir.path(),
        "127.0.0.1:0",
        Stdio::from(log.reopen().unwrap()),
        &quiet,
        "info",
    );
    let run = |info: &serde_json::Value, args: &[&str]| {
        let store = &info["store"];
        Command::new(binary("fsctl"))
            .args(["--url", info["url"].as_str().unwrap()])
            .args(["--token", info["token"].as_str().unwrap()])
            .args(args)
            .env("FSD_S3_ENDPOINT", store["endpoint"].as_str().unwrap())
            .env("FSD_S3_BUCKET", store["bucket"].as_str().unwrap())
            .env("FSD_S3_ACCESS_KEY", store["accessKey"].as_str().unwrap())
            .env("FSD_S3_SECRET_KEY", store["secretKey"].as_str().unwrap())
            .output()
            .unwrap()
    };
    // A relative directory is taken from the workspace, as by every other command.
    let id = succeeded(&run(&info, &["backup", "create", "proj"]));
    let id = id.trim();
    let target = std::fs::canonicalize(dir.path().join("ws/proj")).unwrap();
    succeeded(&run(&info, &["backup", "restore", id, "proj"]));
    // Restored, the tree is what the snapshot holds: a diff says nothing.
    assert_eq!(succeeded(&run(&info, &["backup", "diff", id])), "");
    std::fs::write(target.join("a.txt"), "edited after the restore\n").unwrap();
    let edited = run(&info, &["backup", "diff", id]);
    assert_eq!(edited.status.code(), Some(1), "{edited:?}");
    assert_eq!(String::from_utf8_lossy(&edited.stdout), "modified  a.txt\n");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = first.0.take().expect("running").wait().unwrap();
    assert!(matches!(status.code(), Some(0) | Some(130)), "{status:?}");
    let said = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        said.contains("took a restore down for the stop")
            && said.contains(target.to_str().unwrap()),
        "the stop says what it did with the restore: {said}"
    );
    assert_eq!(
        std::fs::read_to_string(target.join("a.txt")).unwrap(),
        "as backed up\n",
        "taken down while fsd is stopped"
    );

    let (_second, info) = up_logging(dir.path(), "127.0.0.1:0", Stdio::null(), &quiet, "warn");
    assert_eq!(
        std::fs::read_to_string(target.join("a.txt")).unwrap(),
        "edited after the restore\n"
    );
    let mounts = succeeded(&run(&info, &["backup", "mounts"]));
    assert!(mounts.starts_with(target.to_str().unwrap()), "{mounts}");
    succeeded(&run(&info, &["backup", "release", "proj"]));
    assert_eq!(
        std::fs::read_to_string(target.join("a.txt")).unwrap(),
        "as backed up\n",
        "a release discards the restore's writes"
    );
    assert_eq!(succeeded(&run(&info, &["backup", "mounts"])), "");
}

/// `fsctl replace` and `fsctl chown` drive the routes that were already there; a local file
/// that is missing is named.
#[test]
fn replace_chown_and_a_missing_local_file_named() {
    let daemon = Daemon::start();
    std::fs::create_dir_all(daemon.path("rep")).unwrap();
    std::fs::write(daemon.path("rep/a.txt"), "hello world\nhello again\n").unwrap();
    std::fs::write(daemon.path("rep/b.txt"), "nothing here\n").unwrap();

    let dry = fsctl(&daemon, &["replace", "--dry-run", "hello", "bye", "rep"]);
    let diff = succeeded(&dry);
    assert!(
        diff.contains("-hello world") && diff.contains("+bye world"),
        "{diff}"
    );
    assert_eq!(
        std::fs::read_to_string(daemon.path("rep/a.txt")).unwrap(),
        "hello world\nhello again\n"
    );
    let done = succeeded(&fsctl(&daemon, &["replace", "hel+o", "bye", "rep"]));
    assert_eq!(
        done,
        format!("{}: 2 replaced\n", daemon.path("rep/a.txt").display())
    );
    assert_eq!(
        std::fs::read_to_string(daemon.path("rep/a.txt")).unwrap(),
        "bye world\nbye again\n"
    );
    let none = fsctl(&daemon, &["replace", "absent", "x", "rep"]);
    assert_eq!(none.status.code(), Some(1), "{none:?}");
    let bad = fsctl(&daemon, &["replace", "(", "x", "rep"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");

    if fsd_tests::is_root() {
        let given = succeeded(&fsctl(&daemon, &["chown", "1234:2345", "rep/b.txt"]));
        assert_eq!(given, "rep/b.txt: 1234:2345\n");
        let meta = std::os::unix::fs::MetadataExt::uid(
            &std::fs::metadata(daemon.path("rep/b.txt")).unwrap(),
        );
        assert_eq!(meta, 1234);
        let group = succeeded(&fsctl(&daemon, &["chown", ":0", "rep/b.txt"]));
        assert_eq!(group, "rep/b.txt: 1234:0\n");
    }
    let refused = fsctl(&daemon, &["chown", ":", "rep/b.txt"]);
    assert!(!refused.status.success());

    let missing = fsctl(&daemon, &["put", "/nonexistent-fsctl-local.txt", "x.txt"]);
    assert!(!missing.status.success());
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("/nonexistent-fsctl-local.txt"), "{said}");
}
