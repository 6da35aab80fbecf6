//! What a hostile sandbox can aim at the daemon: special files and symlinks to them, the
//! daemon's own /proc, crash litter, idle-connection floods and malformed input.
//!
//! Every path these tests write, rename or delete is one they created (their temp
//! workspaces, device nodes they made with major numbers no driver serves); never `/dev`.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use fsd_tests::{Daemon, assert_error, available_or_skip, is_root};

#[path = "hostile/suite.rs"]
mod suite;
use nix::sys::stat::{Mode, SFlag, makedev, mknod};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// No request here may hang; a hang fails the test instead of stalling CI.
const HANG_GUARD: Duration = Duration::from_secs(30);

async fn guarded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(HANG_GUARD, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not answer within {HANG_GUARD:?}"))
}

async fn post(daemon: &Daemon, route: &str, body: Value) -> (StatusCode, Value) {
    guarded(route, daemon.post(route, body)).await
}

async fn raw_put(daemon: &Daemon, path: &str, body: &'static [u8]) -> (StatusCode, Value) {
    let request = daemon
        .request(Method::PUT, &format!("/api/files/raw?path={path}"))
        .body(body);
    guarded("PUT /api/files/raw", fsd_tests::reply(request)).await
}

async fn raw_get(daemon: &Daemon, path: &str) -> reqwest::Response {
    let request = daemon.request(Method::GET, &format!("/api/files/raw?path={path}"));
    guarded("GET /api/files/raw", request.send())
        .await
        .expect("request")
}

/// Identity of a node: it must be the same node after every write.
fn identity(path: &Path) -> (u64, u64, u32, u64) {
    let meta = std::fs::symlink_metadata(path).expect("node still there");
    (meta.dev(), meta.ino(), meta.mode(), meta.rdev())
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, Mode::from_bits_truncate(0o600)).unwrap();
}

/// Reads a FIFO to its end on a thread (the reader the write needs).
fn fifo_reader(path: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let path = path.to_path_buf();
    let (opened, ready) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags_nonblock()
            .open(&path)
            .unwrap();
        opened.send(()).unwrap();
        let mut bytes = Vec::new();
        // Waits for a writer to come and go.
        loop {
            let mut buf = [0; 4096];
            match std::io::Read::read(&mut file, &mut buf) {
                Ok(0) if !bytes.is_empty() => return bytes,
                Ok(0) => std::thread::sleep(Duration::from_millis(5)),
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(err) => panic!("fifo read: {err}"),
            }
        }
    });
    ready.recv().unwrap();
    handle
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, libc::O_NONBLOCK)
    }
}

#[tokio::test]
async fn writes_through_links_go_into_devices_and_fifos_and_never_replace_them() {
    if !available_or_skip(
        is_root(),
        "writes_through_links_go_into_devices_and_fifos",
        "root, to make device nodes",
    ) {
        return;
    }
    // Under `atomic` a small write is made on the daemon's async thread when the target is
    // on a local filesystem, as these nodes are; a device or FIFO found there is still
    // written into from a blocking thread, and a socket or disk refused.
    for durability in ["fsync", "atomic"] {
        let daemon = Daemon::start_with(fsd_tests::Options {
            extra_args: vec!["--durability".into(), durability.into()],
            ..Default::default()
        });
        writes_go_into_devices_and_fifos(&daemon).await;
    }
}

async fn writes_go_into_devices_and_fifos(daemon: &Daemon) {
    let dir = daemon.path("nodes");
    std::fs::create_dir(&dir).unwrap();
    // A character device the test made (the null device's numbers, in the test's own dir),
    // reached the usual way: `ln -s <device> .bash_history`.
    let null = dir.join("null");
    mknod(
        &null,
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o666),
        makedev(1, 3),
    )
    .unwrap();
    std::os::unix::fs::symlink(&null, dir.join(".bash_history")).unwrap();
    let before = identity(&null);
    let (status, body) = post(
        daemon,
        "/api/write",
        json!({"path": "nodes/.bash_history", "content": "history"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = raw_put(daemon, "nodes/.bash_history", b"raw history").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["bytesWritten"], 11, "{body}");
    assert_eq!(identity(&null), before, "the device was replaced");
    assert!(
        std::fs::symlink_metadata(dir.join(".bash_history"))
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A FIFO with no reader: refused at once, through both routes.
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    std::os::unix::fs::symlink("fifo", dir.join("to-fifo")).unwrap();
    let fifo_before = identity(&fifo);
    let (status, body) = post(
        daemon,
        "/api/write",
        json!({"path": "nodes/to-fifo", "content": "x"}),
    )
    .await;
    assert_error(status, &body, 409, "NO_READER");
    let (status, body) = raw_put(daemon, "nodes/fifo", b"x").await;
    assert_error(status, &body, 409, "NO_READER");
    // With a reader, the bytes go into it, as `echo x > fifo` would.
    let reader = fifo_reader(&fifo);
    let (status, body) = post(
        daemon,
        "/api/write",
        json!({"path": "nodes/to-fifo", "content": "through the pipe"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(reader.join().unwrap(), b"through the pipe");
    // A body large enough to be written while it arrives goes into the FIFO all the same.
    let large = fsd_tests::noise(300 * 1024, 3);
    let reader = fifo_reader(&fifo);
    // `path` first, as the daemon expects of a body it writes while receiving.
    let text = base64::engine::general_purpose::STANDARD.encode(&large);
    let request = daemon
        .request(Method::POST, "/api/write")
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"path":"nodes/to-fifo","content":"{text}","encoding":"base64"}}"#
        ));
    let (status, body) = guarded("POST /api/write", fsd_tests::reply(request)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(reader.join().unwrap(), large);
    let reader = fifo_reader(&fifo);
    let (status, body) = raw_put(daemon, "nodes/fifo", b"raw through the pipe").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(reader.join().unwrap(), b"raw through the pipe");
    assert_eq!(identity(&fifo), fifo_before, "the FIFO was replaced");

    // A socket cannot be written into: refused, named, left alone.
    let socket = dir.join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let socket_before = identity(&socket);
    let (status, body) = post(
        daemon,
        "/api/write",
        json!({"path": "nodes/socket", "content": "x"}),
    )
    .await;
    assert_error(status, &body, 400, "UNSUPPORTED_FILE_TYPE");
    assert_eq!(body["context"]["fileType"], "socket", "{body}");
    let (status, body) = raw_put(daemon, "nodes/socket", b"x").await;
    assert_error(status, &body, 400, "UNSUPPORTED_FILE_TYPE");
    assert_eq!(identity(&socket), socket_before);

    // A block device is a disk: never written through a file route. (Major 240 is reserved
    // for local use; no driver here serves it, so even a wrong write could not reach data.)
    let disk = dir.join("disk");
    mknod(
        &disk,
        SFlag::S_IFBLK,
        Mode::from_bits_truncate(0o600),
        makedev(240, 0),
    )
    .unwrap();
    let disk_before = identity(&disk);
    let (status, body) = post(
        daemon,
        "/api/write",
        json!({"path": "nodes/disk", "content": "x"}),
    )
    .await;
    assert_error(status, &body, 400, "UNSUPPORTED_FILE_TYPE");
    assert_eq!(body["context"]["fileType"], "block-device", "{body}");
    let (status, body) = raw_put(daemon, "nodes/disk", b"x").await;
    assert_error(status, &body, 400, "UNSUPPORTED_FILE_TYPE");
    assert_eq!(identity(&disk), disk_before);
    assert!(
        std::fs::symlink_metadata(&disk)
            .unwrap()
            .file_type()
            .is_block_device()
    );

    // Nothing of the daemon's was left beside the nodes.
    assert_eq!(
        names_in(&dir),
        [".bash_history", "disk", "fifo", "null", "socket", "to-fifo"]
    );
}

#[tokio::test]
async fn reads_of_fifos_sockets_and_loops_answer_at_once_with_4xx() {
    let daemon = Daemon::start();
    let dir = daemon.path("special");
    std::fs::create_dir(&dir).unwrap();
    mkfifo(&dir.join("fifo"));
    let _listener = std::os::unix::net::UnixListener::bind(dir.join("socket")).unwrap();
    std::os::unix::fs::symlink("loop-b", dir.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", dir.join("loop-b")).unwrap();
    for (name, file_type) in [("fifo", "fifo"), ("socket", "socket")] {
        let path = format!("special/{name}");
        let (status, body) = post(&daemon, "/api/read", json!({"path": path})).await;
        assert_error(status, &body, 400, "UNSUPPORTED_FILE_TYPE");
        assert_eq!(body["context"]["fileType"], file_type, "{body}");
        let (status, body) = post(&daemon, "/api/read/stream", json!({"path": path})).await;
        assert_error(status, &body, 400, "UNSUPPORTED_FILE_TYPE");
        let response = raw_get(&daemon, &path).await;
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_error(status, &body, 400, "UNSUPPORTED_FILE_TYPE");
    }
    let (status, body) = post(&daemon, "/api/read", json!({"path": "special/loop-a"})).await;
    assert_error(status, &body, 400, "SYMLINK_LOOP");
    let (status, body) = post(
        &daemon,
        "/api/write",
        json!({"path": "special/loop-a", "content": "x"}),
    )
    .await;
    assert_error(status, &body, 400, "SYMLINK_LOOP");
    let response = raw_get(&daemon, "special/loop-b").await;
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_error(status, &body, 400, "SYMLINK_LOOP");
    assert_eq!(
        names_in(&dir),
        ["fifo", "loop-a", "loop-b", "socket"],
        "a refused request changed the directory"
    );
}

#[tokio::test]
async fn files_whose_size_stat_cannot_tell_are_read_whole_or_refused_whole() {
    let daemon = Daemon::start();
    // procfs says size 0; the raw route streams what a read gives, without a length.
    let response = raw_get(&daemon, "/proc/cpuinfo").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers().get("content-length").is_none(),
        "{:?}",
        response.headers()
    );
    let text = guarded("cpuinfo body", response.text()).await.unwrap();
    assert!(text.contains("processor"), "{text}");
    let (status, body) = post(&daemon, "/api/read", json!({"path": "/proc/cpuinfo"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["content"].as_str().unwrap().contains("processor"));
    assert_eq!(
        body["size"].as_u64(),
        Some(body["content"].as_str().unwrap().len() as u64)
    );
    // An endless device: the JSON read stops at its cap and says so, instead of answering a
    // cut file as if it were whole.
    let (status, body) = post(&daemon, "/api/read", json!({"path": "/dev/zero"})).await;
    assert_error(status, &body, 413, "FILE_TOO_LARGE");
    assert_eq!(body["context"]["actualSize"], Value::Null, "{body}");
    // The stream route reads it like `cat` until the client stops; the daemon stays well.
    let response = guarded(
        "read/stream of /dev/zero",
        daemon
            .request(Method::POST, "/api/read/stream")
            .json(&json!({"path": "/dev/zero"}))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut response = response;
    let mut received = 0;
    while received < 1 << 20 {
        let chunk = guarded("a /dev/zero chunk", response.chunk())
            .await
            .unwrap()
            .expect("the stream went on");
        received += chunk.len();
    }
    drop(response);
    let (status, _) = daemon.get("/api/ping").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_device_that_trickles_data_cannot_hold_a_whole_read_open() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    // A terminal's far side: a character device that gives a line every 100 ms, for ever
    // (as `/proc/kmsg` does while the kernel logs now and then). No read ever waits the
    // idle bound, so only a total time can end a read of it.
    let pty = nix::pty::openpty(None, None).unwrap();
    let device = std::fs::read_link(format!("/proc/self/fd/{}", pty.slave.as_raw_fd())).unwrap();
    let daemon = Daemon::start();
    std::os::unix::fs::symlink(&device, daemon.path("tty")).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let trickle = {
        let stop = stop.clone();
        let mut master = std::fs::File::from(pty.master);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = master.write_all(b"x\n");
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let (status, body) = post(&daemon, "/api/read", json!({"path": "tty"})).await;
    stop.store(true, Ordering::Relaxed);
    trickle.join().unwrap();
    drop(pty.slave);
    assert_error(status, &body, 409, "FILE_BLOCKED");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("no end within 10 s"), "{body}");
    let (status, _) = daemon.get("/api/ping").await;
    assert_eq!(status, StatusCode::OK);
}

/// Host pids of every living descendant of `root`.
fn descendants(root: u32) -> Vec<u32> {
    let mut parents = std::collections::HashMap::<u32, Vec<u32>>::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The parent is the second field after the parenthesised command.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.entry(ppid).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for &child in parents.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            found.push(child);
            queue.push(child);
        }
    }
    found
}

#[tokio::test]
async fn the_file_api_does_not_serve_the_daemons_own_proc_entries() {
    let marker = format!("hostile-secret-{}", std::process::id());
    let daemon = Daemon::start_with(fsd_tests::Options {
        env: vec![("FSD_TEST_SECRET".into(), marker.clone())],
        ..Default::default()
    });
    let pid = daemon.pid();
    std::os::unix::fs::symlink("/proc/self/environ", daemon.path("env")).unwrap();
    std::os::unix::fs::symlink("/proc", daemon.path("p")).unwrap();
    let refused = [
        "/proc/self/environ".to_string(),
        "/proc/thread-self/environ".to_string(),
        format!("/proc/{pid}/environ"),
        format!("/proc/{pid}/mem"),
        format!("/proc/{pid}/cmdline"),
        "/proc/self/fd/0".to_string(),
        "/proc/self/root/proc/self/environ".to_string(),
        "env".to_string(),
        "p/self/environ".to_string(),
        format!("p/{pid}/task/{pid}/environ"),
    ];
    for path in &refused {
        let (status, body) = post(&daemon, "/api/read", json!({"path": path})).await;
        assert_error(status, &body, 403, "PERMISSION_DENIED");
        let (status, body) = post(&daemon, "/api/read/stream", json!({"path": path})).await;
        assert_error(status, &body, 403, "PERMISSION_DENIED");
        let response = raw_get(&daemon, path).await;
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_error(status, &body, 403, "PERMISSION_DENIED");
    }
    let (status, body) = post(&daemon, "/api/list-files", json!({"path": "/proc/self/fd"})).await;
    assert_error(status, &body, 403, "PERMISSION_DENIED");

    // The sandbox's processes stay readable, and none of the daemon's helpers (the
    // namespace's unshare and init, supervisors) carries the daemon's environment.
    let (status, started) = post(
        &daemon,
        "/api/process/start",
        json!({"command": "sleep 30"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let helpers = descendants(pid);
    assert!(!helpers.is_empty());
    let mut served = 0;
    for helper in helpers {
        let (status, body) = post(
            &daemon,
            "/api/read",
            json!({"path": format!("/proc/{helper}/environ"), "encoding": "utf-8"}),
        )
        .await;
        if status == StatusCode::OK {
            served += 1;
            assert!(
                !body["content"].to_string().contains(&marker),
                "/proc/{helper}/environ has the daemon's environment"
            );
        }
    }
    assert!(served > 0, "no sandbox process's /proc entry was readable");
}

/// Every scratch file (an fsd temp name) under `dir`.
fn scratch_files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path);
            } else if fsd_api::scratch::is_scratch(&path) {
                found.push(path);
            }
        }
    }
    found
}

/// A loopback server whose every ranged GET sends `head` bytes and then nothing, forever: a
/// download that is still running when the daemon is killed.
async fn stalling_server(head: usize) -> String {
    use axum::body::Body;
    let app = axum::Router::new().fallback(move || async move {
        let (sender, receiver) =
            tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
        tokio::spawn(async move {
            let _ = sender.send(Ok(bytes::Bytes::from(vec![7; head]))).await;
            std::future::pending::<()>().await;
            drop(sender);
        });
        let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        });
        // 206, as a store answers a ranged GET; then a few bytes and silence.
        (StatusCode::PARTIAL_CONTENT, Body::from_stream(stream))
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/archive")
}

#[tokio::test]
async fn a_crash_mid_write_leaves_no_temp_file_once_the_daemon_is_back() {
    let mut daemon = Daemon::start();
    let root = daemon.root();
    for dir in ["a", "a/b", "c"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        std::fs::write(root.join(dir).join("kept.txt"), "old").unwrap();
    }
    // Raw uploads that are still streaming when the daemon dies: each has its temp file.
    let mut uploads = Vec::new();
    let mut feeders = Vec::new();
    for dir in ["a", "a/b", "c"] {
        let (sender, receiver) =
            tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(4);
        sender
            .send(Ok(bytes::Bytes::from(vec![1; 256 * 1024])))
            .await
            .unwrap();
        let body = reqwest::Body::wrap_stream(futures_util::stream::unfold(
            receiver,
            |mut receiver| async move { receiver.recv().await.map(|item| (item, receiver)) },
        ));
        let request = daemon
            .request(Method::PUT, &format!("/api/files/raw?path={dir}/kept.txt"))
            .body(body);
        uploads.push(tokio::spawn(request.send()));
        feeders.push(sender);
    }
    // JSON writes going on at the same time, big enough to be caught mid-write now and then.
    let writer = {
        let url = daemon.url("/api/write");
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let content = "x".repeat(4 << 20);
            loop {
                let body = json!({"path": "c/json.txt", "content": content});
                if client.post(&url).json(&body).send().await.is_err() {
                    return;
                }
            }
        })
    };
    // A backup download stalled halfway, deep under /var/backups.
    let archive_dir = format!("/var/backups/fsd-hostile-{}", std::process::id());
    let archive = format!("{archive_dir}/deep/a.sqsh");
    let url = stalling_server(64 * 1024).await;
    let download = {
        let request = daemon
            .request(Method::POST, "/api/backup/download")
            .json(&json!({
                "dir": root.join("restored").display().to_string(),
                "archives": [{"archivePath": archive, "url": url, "sizeBytes": 8 << 20}],
            }));
        tokio::spawn(request.send())
    };
    let deadline = std::time::Instant::now() + HANG_GUARD;
    loop {
        let in_workspace = scratch_files_under(&root).len();
        let in_backups = scratch_files_under(Path::new(&archive_dir)).len();
        if in_workspace >= 3 && in_backups >= 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the writes never started: {in_workspace} temp files in the workspace, {in_backups} in {archive_dir}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    daemon.crash();
    writer.abort();
    drop(feeders);
    for upload in uploads {
        let _ = upload.await;
    }
    let _ = download.await;
    // The crash left them; the next start removes them.
    assert!(scratch_files_under(&root).len() >= 3);
    daemon.resume();
    let (status, _) = daemon.get("/api/ping").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(scratch_files_under(&root), Vec::<std::path::PathBuf>::new());
    assert_eq!(
        scratch_files_under(Path::new(&archive_dir)),
        Vec::<std::path::PathBuf>::new()
    );
    // The targets are whole: old or new, never torn.
    for dir in ["a", "a/b", "c"] {
        assert_eq!(
            std::fs::read_to_string(root.join(dir).join("kept.txt")).unwrap(),
            "old"
        );
    }
    if let Ok(json) = std::fs::read_to_string(root.join("c/json.txt")) {
        assert_eq!(json.len(), 4 << 20);
    }
    std::fs::remove_dir_all(&archive_dir).unwrap();
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}

/// Whether the server has closed `stream` (EOF or reset), without blocking.
fn closed_by_server(stream: &mut std::net::TcpStream) -> bool {
    let mut buf = [0; 256];
    match std::io::Read::read(stream, &mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(err) => err.kind() != std::io::ErrorKind::WouldBlock,
    }
}

const FLOOD: usize = 3000;

#[tokio::test]
async fn idle_connections_are_closed_and_their_memory_comes_back() {
    let daemon = Daemon::start_with(fsd_tests::Options {
        extra_args: vec![
            "--header-timeout-secs".into(),
            "5".into(),
            "--max-connections".into(),
            "4000".into(),
        ],
        ..Default::default()
    });
    let pid = daemon.pid();
    let address = daemon.url.trim_start_matches("http://").to_string();
    // Warm the daemon up, so "before" is a daemon that has served requests.
    for _ in 0..20 {
        let (status, _) = post(
            &daemon,
            "/api/write",
            json!({"path": "w.txt", "content": "x"}),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    // The files the writes replaced are let go of a moment after their answers (a thread
    // gathers them): the baseline is the count once it has settled.
    let mut base_fds = open_descriptors(pid);
    let settling = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = open_descriptors(pid);
        if now == base_fds || settling.elapsed() > Duration::from_secs(2) {
            break;
        }
        base_fds = now;
    }
    let before = fsd_tests::rss_kib(pid);
    let opened = std::time::Instant::now();
    let mut flood: Vec<std::net::TcpStream> = (0..FLOOD)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(&address).unwrap();
            // Half a request head, then nothing.
            std::io::Write::write_all(
                &mut stream,
                b"POST /api/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl",
            )
            .unwrap();
            stream.set_nonblocking(true).unwrap();
            stream
        })
        .collect();
    // The daemon holds them all (they are accepted before any request is read).
    while open_descriptors(pid) < base_fds + FLOOD {
        assert!(
            opened.elapsed() < HANG_GUARD,
            "the flood was not accepted: {} descriptors, {base_fds} before",
            open_descriptors(pid)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let during = fsd_tests::rss_kib(pid);
    let accepted = opened.elapsed();
    // Requests still work during the flood.
    let (status, _) = daemon.get("/api/ping").await;
    assert_eq!(status, StatusCode::OK);
    // Every half-open connection is closed by the daemon within the header timeout.
    let mut open: Vec<usize> = (0..flood.len()).collect();
    while !open.is_empty() {
        assert!(
            opened.elapsed() < HANG_GUARD,
            "{} of {FLOOD} idle connections still open after {:?}",
            open.len(),
            opened.elapsed()
        );
        open.retain(|&i| !closed_by_server(&mut flood[i]));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let closed_after = opened.elapsed();
    drop(flood);
    // Memory comes back once the flood is over.
    let mut after = fsd_tests::rss_kib(pid);
    for _ in 0..100 {
        if after <= before + 30 * 1024 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        after = fsd_tests::rss_kib(pid);
    }
    eprintln!(
        "idle flood: {FLOOD} half-open connections accepted in {accepted:?}, all closed by the \
         daemon {closed_after:?} after opening (header timeout 5 s); RSS before {before} KiB, \
         during {during} KiB, after {after} KiB; {:.1} KiB per connection",
        (during.saturating_sub(before)) as f64 / FLOOD as f64
    );
    assert!(
        after <= before + 30 * 1024,
        "RSS stayed up: {before} KiB before, {during} KiB during, {after} KiB after"
    );

    // An idle keep-alive connection is closed too; a stream quiet for longer is not cut.
    let mut idle = std::net::TcpStream::connect(&address).unwrap();
    std::io::Write::write_all(
        &mut idle,
        b"GET /api/ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    )
    .unwrap();
    idle.set_nonblocking(true).unwrap();
    let request = daemon
        .request(Method::POST, "/api/execute/stream")
        .json(&json!({"command": "sleep 3; echo after-the-quiet"}));
    let stream = guarded("execute/stream", request.send()).await.unwrap();
    let events = guarded("a quiet stream", stream.text()).await.unwrap();
    assert!(events.contains("after-the-quiet"), "{events}");
    assert!(events.contains("\"complete\""), "{events}");
    let mut answer = Vec::new();
    let since = std::time::Instant::now();
    loop {
        let mut buf = [0; 4096];
        match std::io::Read::read(&mut idle, &mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    since.elapsed() < HANG_GUARD,
                    "the idle keep-alive connection stayed open"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(_) => break,
        }
    }
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
}

/// Opens a connection to `address` and sends half a request head.
fn half_open(address: &str) -> std::net::TcpStream {
    try_half_open(address).unwrap()
}

fn try_half_open(address: &str) -> std::io::Result<std::net::TcpStream> {
    let mut stream = std::net::TcpStream::connect(address)?;
    std::io::Write::write_all(
        &mut stream,
        b"POST /api/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl",
    )?;
    stream.set_nonblocking(true)?;
    Ok(stream)
}

#[tokio::test]
async fn at_the_cap_the_connection_that_showed_least_makes_room() {
    let daemon = Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--max-connections".into(), "4".into()],
        ..Default::default()
    });
    let address = daemon.url.trim_start_matches("http://").to_string();
    // Two requests in flight (streams) and two connections that sent half a head.
    let streams: Vec<_> = (0..2)
        .map(|i| {
            let request = daemon
                .request(Method::POST, "/api/execute/stream")
                .json(&json!({"command": format!("sleep 4; echo stream-{i}")}));
            tokio::spawn(request.send())
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut silent: Vec<std::net::TcpStream> = (0..2).map(|_| half_open(&address)).collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A newcomer is served: a silent connection made room, not a stream.
    for _ in 0..2 {
        let (status, _) = guarded("ping at the cap", daemon.get("/api/ping")).await;
        assert_eq!(status, StatusCode::OK);
    }
    let since = std::time::Instant::now();
    while !silent.iter_mut().all(closed_by_server) {
        assert!(
            since.elapsed() < HANG_GUARD,
            "no silent connection was closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for stream in streams {
        let response = guarded("stream", stream).await.unwrap().unwrap();
        let events = guarded("stream events", response.text()).await.unwrap();
        assert!(
            events.contains("\"complete\""),
            "a stream was cut: {events}"
        );
    }

    // When every connection is busy, a newcomer is closed at once.
    let busy: Vec<_> = (0..4)
        .map(|_| {
            let request = daemon
                .request(Method::POST, "/api/execute/stream")
                .json(&json!({"command": "sleep 3"}));
            tokio::spawn(request.send())
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut refused = std::net::TcpStream::connect(&address).unwrap();
    refused.set_read_timeout(Some(HANG_GUARD)).unwrap();
    let _ = std::io::Write::write_all(&mut refused, b"GET /api/ping HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut buf = [0; 64];
    let read = std::io::Read::read(&mut refused, &mut buf);
    assert!(
        matches!(read, Ok(0))
            || read
                .as_ref()
                .is_err_and(|e| e.kind() != std::io::ErrorKind::WouldBlock),
        "a connection past the cap was served while every one was busy: {read:?}"
    );
    for request in busy {
        let _ = guarded("busy stream", request).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_flood_does_not_lock_the_trusted_side_out() {
    let daemon = Daemon::start();
    let pid = daemon.pid();
    let address = daemon.url.trim_start_matches("http://").to_string();
    let before = fsd_tests::rss_kib(pid);
    // FLOOD half-open connections (past the default cap of 1,024), each opened again as
    // soon as the daemon closes it, for as long as the pings below take.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let flooder = {
        let (address, stop, peak) = (address.clone(), stop.clone(), peak.clone());
        std::thread::spawn(move || {
            let mut flood: Vec<std::net::TcpStream> =
                (0..FLOOD).map(|_| half_open(&address)).collect();
            let mut reopened = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for stream in flood.iter_mut() {
                    // (A connect the backlog has no room for is tried again next round.)
                    if closed_by_server(stream)
                        && let Ok(fresh) = try_half_open(&address)
                    {
                        *stream = fresh;
                        reopened += 1;
                    }
                }
                let rss = fsd_tests::rss_kib(pid);
                peak.fetch_max(rss, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
            reopened
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut pings = Vec::new();
    for _ in 0..100 {
        // A fresh client each time: a new connection, as a caller outside would open.
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let response = client.get(daemon.url("/api/ping")).send().await;
        let took = started.elapsed();
        let status = response.map(|r| r.status());
        assert!(
            matches!(status, Ok(StatusCode::OK)),
            "a ping during the flood failed: {status:?} after {took:?}"
        );
        pings.push(took);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reopened = flooder.join().unwrap();
    pings.sort();
    let p50 = pings[pings.len() / 2];
    let p99 = pings[pings.len() * 99 / 100];
    eprintln!(
        "flood: {FLOOD} half-open connections held open (reopened {reopened} times as the \
         daemon made room); 100 pings from fresh clients all answered, p50 {p50:?}, p99 \
         {p99:?}; RSS before {before} KiB, peak {} KiB",
        peak.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(reopened > 0, "the flood never met the cap");
}

#[tokio::test]
async fn a_head_trickled_a_byte_at_a_time_does_not_outlive_the_header_timeout() {
    let daemon = Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--header-timeout-secs".into(), "2".into()],
        ..Default::default()
    });
    let address = daemon.url.trim_start_matches("http://").to_string();
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let head = format!(
        "GET /api/ping HTTP/1.1\r\nHost: x\r\nX-Slow: {}",
        "a".repeat(200)
    );
    let started = std::time::Instant::now();
    let mut closed = false;
    for byte in head.bytes() {
        if std::io::Write::write_all(&mut stream, &[byte]).is_err() {
            closed = true;
            break;
        }
        let mut buf = [0; 64];
        match std::io::Read::read(&mut stream, &mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(_) => panic!("a trickled head was answered"),
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    let lasted = started.elapsed();
    assert!(
        closed,
        "the trickled connection was never closed ({lasted:?})"
    );
    // Closed at the timeout, not kept alive by each byte (the trickle would last 40 s).
    assert!(lasted < Duration::from_secs(10), "closed after {lasted:?}");
}

/// Checks one answer of the suite: no 5xx, the error envelope on every 4xx.
fn check_answer(what: &str, status: StatusCode, body: &[u8]) {
    assert!(
        status.as_u16() < 500,
        "{what}: {status} {}",
        String::from_utf8_lossy(body)
    );
    if status.is_client_error() {
        let body: Value = serde_json::from_slice(body)
            .unwrap_or_else(|_| panic!("{what}: {status} without a JSON envelope"));
        assert_eq!(body["httpStatus"], status.as_u16(), "{what}: {body}");
        assert!(
            body["code"].as_str().is_some_and(|c| !c.is_empty()),
            "{what}: {body}"
        );
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: {body}"
        );
    }
}

async fn send_raw(
    daemon: &Daemon,
    method: &str,
    route: &str,
    body: Vec<u8>,
    streams: bool,
) -> (StatusCode, Vec<u8>) {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let request = daemon
        .request(method, route)
        .header("content-type", "application/json")
        .body(body);
    let response = guarded(route, request.send()).await.expect("request");
    let status = response.status();
    if streams && status.is_success() {
        // A stream that started is the route working; its events are other tests' matter.
        return (status, Vec::new());
    }
    let bytes = guarded(route, response.bytes()).await.expect("body");
    (status, bytes.to_vec())
}

#[tokio::test]
async fn hostile_input_on_every_route_gets_4xx_envelopes_and_never_a_5xx_or_a_hang() {
    let daemon = Daemon::start();
    let ws = daemon.root();
    let tag = format!("fsd-hostile-suite-{}", std::process::id());
    std::fs::create_dir_all(ws.join("decoy")).unwrap();
    std::fs::create_dir_all(ws.join("scratch")).unwrap();
    std::fs::write(ws.join("decoy/a.txt"), "decoy").unwrap();
    // Something outside the workspace, made by the test: no request may touch it.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep.txt"), "keep").unwrap();
    let marker = ws.join("scratch/injected");
    let ws_text = ws.display().to_string();
    let started = std::time::Instant::now();
    let mut sent = 0usize;
    for route in suite::routes(&ws_text, &tag) {
        let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
        let (status, answer) = send_raw(
            &daemon,
            route.method,
            route.path,
            serde_json::to_vec(&route.sample).unwrap(),
            route.streams,
        )
        .await;
        sent += 1;
        check_answer(
            &format!("{} {} sample", route.method, route.path),
            status,
            &answer,
        );
        for field in suite::fields(&route.sample) {
            let command_field = field.last().is_some_and(|f| f == "command");
            for raw in suite::values(&ws_text, &marker.display().to_string(), command_field) {
                let body = suite::body_with(&route.sample, &field, &raw);
                let (status, answer) =
                    send_raw(&daemon, route.method, route.path, body, route.streams).await;
                sent += 1;
                *statuses.entry(status.as_u16()).or_default() += 1;
                let what = format!(
                    "{} {} {} = {}",
                    route.method,
                    route.path,
                    field.join("."),
                    String::from_utf8_lossy(&raw)
                        .chars()
                        .take(80)
                        .collect::<String>()
                );
                check_answer(&what, status, &answer);
            }
        }
        let first_field = suite::fields(&route.sample)
            .first()
            .and_then(|f| f.first().cloned())
            .unwrap_or_default();
        for body in suite::malformed_bodies(&first_field) {
            let what = format!(
                "{} {} body {}",
                route.method,
                route.path,
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(40)
                    .collect::<String>()
            );
            let (status, answer) =
                send_raw(&daemon, route.method, route.path, body, route.streams).await;
            sent += 1;
            check_answer(&what, status, &answer);
        }
        eprintln!(
            "{} {}: sample {status} {}, hostile {statuses:?}",
            route.method,
            route.path,
            String::from_utf8_lossy(&answer)
                .chars()
                .take(200)
                .collect::<String>()
        );
    }
    // Hostile path parameters and query strings (percent-encoded: received as written).
    for raw in suite::values(&ws_text, &marker.display().to_string(), false) {
        let Ok(value) = String::from_utf8(raw) else {
            continue;
        };
        let value: String = serde_json::from_str(&value).unwrap_or(value);
        let encoded: String = value.bytes().map(|b| format!("%{b:02X}")).collect();
        for (method, route) in [
            (Method::GET, format!("/api/process/{encoded}")),
            (Method::DELETE, format!("/api/process/{encoded}")),
            (Method::GET, format!("/api/process/{encoded}/logs")),
            (Method::GET, format!("/api/files/raw?path={encoded}")),
            (Method::PUT, format!("/api/files/raw?path={encoded}")),
        ] {
            let request = daemon.request(method.clone(), &route).body("x");
            let response = guarded(&route, request.send()).await.expect("request");
            let status = response.status();
            let answer = guarded(&route, response.bytes()).await.expect("body");
            sent += 1;
            check_answer(&format!("{method} {route}"), status, &answer);
        }
    }
    let elapsed = started.elapsed();
    let (status, _) = daemon.get("/api/ping").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the daemon is not alive after the suite"
    );
    assert!(!marker.exists(), "a field that is data reached a shell");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("keep.txt")).unwrap(),
        "keep"
    );
    assert_eq!(names_in(outside.path()), ["keep.txt"]);
    eprintln!("hostile suite: {sent} requests in {elapsed:?}");
    let _ = std::fs::remove_dir_all(format!("/var/backups/{tag}"));
}
