//! Bucket mounts through the real daemon: real FUSE, the real embedded store (s3s-fs, which
//! checks SigV4) and a credential proxy that signs for the sandbox, which holds no key.
//! Files are read and written with plain `std::fs` calls through the mount.

use std::io::{Read, Write};
use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use fsd_control::Scope;
use fsd_s3::{CredentialProxy, ObjectClient, ObjectStore};
use fsd_tests::s3::{BUCKET, FaultProxy, Faults, Store};
use fsd_tests::{
    Daemon, assert_error, available_or_skip, noise, require_mount_privilege, sha256_hex,
};
use serde_json::{Value, json};

fn fuse_ready(test: &str) -> bool {
    require_mount_privilege(test)
        && available_or_skip(Path::new("/dev/fuse").exists(), test, "/dev/fuse")
}

async fn proxy(store: &Store, prefix: &str, read_only: bool) -> CredentialProxy {
    let scope = Scope {
        bucket: BUCKET.into(),
        prefix: prefix.into(),
        read_only,
    };
    CredentialProxy::start(
        "127.0.0.1:0".parse().unwrap(),
        scope,
        store.object_store(None).upstream(),
    )
    .await
    .expect("proxy")
}

/// The store, signed with its own keys: what is really in the bucket.
fn direct(store: &Store) -> ObjectClient {
    ObjectClient::new(
        &store.url,
        BUCKET,
        Some(store.object_store(None).upstream()),
    )
    .unwrap()
}

async fn mount(daemon: &Daemon, body: Value) -> (reqwest::StatusCode, Value) {
    daemon.post("/api/mounts", body).await
}

async fn unmount(daemon: &Daemon, path: &Path) -> (reqwest::StatusCode, Value) {
    fsd_tests::reply(
        daemon
            .request(reqwest::Method::DELETE, "/api/mounts")
            .json(&json!({ "mountPath": path })),
    )
    .await
}

fn is_mount_point(path: &Path) -> bool {
    let table = fsd_tests::mount_table();
    let wanted = path.to_str().unwrap();
    table
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(wanted))
}

/// A daemon with the whole bucket mounted through a proxy of its own, at a directory fsd
/// makes. Fields drop in order: the daemon (releasing the mount), then the proxy.
struct Mounted {
    daemon: Daemon,
    path: PathBuf,
    /// The mount's answer.
    body: Value,
    _proxy: CredentialProxy,
    _dirs: tempfile::TempDir,
}

async fn mounted(store: &Store, extra: Value) -> Mounted {
    let proxy = proxy(store, "", false).await;
    let daemon = Daemon::start();
    let dirs = tempfile::tempdir().unwrap();
    let path = fresh_mount_path(&dirs, "bucket");
    let mut request = json!({ "bucket": BUCKET, "mountPath": path, "proxyUrl": proxy.url() });
    for (key, value) in extra.as_object().unwrap() {
        request[key] = value.clone();
    }
    let (status, body) = mount(&daemon, request).await;
    assert_eq!(status, 200, "{body}");
    Mounted {
        daemon,
        path,
        body,
        _proxy: proxy,
        _dirs: dirs,
    }
}

/// Mounts the whole bucket at `path` through the fault proxy, with explicit credentials:
/// the daemon signs, for the proxy's host.
async fn mount_through(daemon: &Daemon, store: &Store, faults: &FaultProxy, path: &Path) {
    let (status, body) = mount(daemon, through(store, faults, path)).await;
    assert_eq!(status, 200, "{body}");
}

/// The mount request of [`mount_through`].
fn through(store: &Store, faults: &FaultProxy, path: &Path) -> Value {
    let upstream = store.object_store(None).upstream();
    json!({ "bucket": BUCKET, "mountPath": path, "endpoint": faults.url,
            "credentials": { "accessKeyId": upstream.access_key,
                             "secretAccessKey": upstream.secret_key } })
}

/// A store with `held.txt` in its bucket, and a fault proxy before it.
async fn store_with_held_file() -> (Store, FaultProxy) {
    let store = Store::start();
    let faults = FaultProxy::start(&store.url).await;
    direct(&store)
        .put("held.txt", Bytes::from_static(b"held\n"))
        .await
        .unwrap();
    (store, faults)
}

/// Sends `read` (of a file on a mount through `faults`) with the store holding up every
/// read, and waits until it has reached the store: the daemon's thread is then waiting on
/// its own mount. Answers the read's status once it comes.
async fn read_held(
    faults: &FaultProxy,
    read: reqwest::RequestBuilder,
) -> tokio::task::JoinHandle<reqwest::Result<reqwest::StatusCode>> {
    faults.set(Faults {
        hold_gets: true,
        ..Default::default()
    });
    let read = tokio::spawn(async move { read.send().await.map(|r| r.status()) });
    for _ in 0..1500 {
        if faults.held.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        faults.held.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the read reached the store"
    );
    read
}

/// The names in `dir`, sorted, as `readdir` through the mount gives them.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A mount point that does not exist yet (fsd makes it).
fn fresh_mount_path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_go_both_ways_through_a_proxy_mount() {
    if !fuse_ready("files_go_both_ways_through_a_proxy_mount") {
        return;
    }
    let store = Store::start();
    let bucket = direct(&store);
    bucket
        .put("seed/a/b/deep.txt", Bytes::from_static(b"deep\n"))
        .await
        .unwrap();
    bucket
        .put("seed/top.txt", Bytes::from_static(b"top\n"))
        .await
        .unwrap();
    let Mounted {
        daemon, path, body, ..
    } = &mounted(&store, json!({})).await;
    assert_eq!(body["mount"]["viaProxy"], true);
    assert_eq!(body["mount"]["createdDir"], true);
    assert!(is_mount_point(path));

    // Objects in the bucket are files; prefixes are directories.
    assert_eq!(
        std::fs::read_to_string(path.join("seed/a/b/deep.txt")).unwrap(),
        "deep\n"
    );
    let names = names_in(&path.join("seed"));
    assert_eq!(names, vec!["a", "top.txt"]);
    assert!(path.join("seed/a").is_dir());
    assert_eq!(
        std::fs::metadata(path.join("seed/top.txt")).unwrap().len(),
        4
    );
    assert_eq!(
        std::fs::metadata(path.join("seed/nope"))
            .unwrap_err()
            .kind(),
        std::io::ErrorKind::NotFound
    );

    // Files written through the mount land in the bucket, nested directories included.
    std::fs::create_dir_all(path.join("out/x/y")).unwrap();
    std::fs::write(path.join("out/x/y/result.txt"), "result\n").unwrap();
    let mut appended = std::fs::OpenOptions::new()
        .append(true)
        .open(path.join("seed/top.txt"))
        .unwrap();
    appended.write_all(b"more\n").unwrap();
    drop(appended);
    assert_eq!(
        &bucket.get_range("out/x/y/result.txt", 0, 7).await.unwrap()[..],
        b"result\n"
    );
    assert_eq!(
        &bucket.get_range("seed/top.txt", 0, 9).await.unwrap()[..],
        b"top\nmore\n"
    );

    // Rename of a file is copy + delete; of a directory, EXDEV (mv falls back to copying).
    std::fs::rename(
        path.join("out/x/y/result.txt"),
        path.join("out/renamed.txt"),
    )
    .unwrap();
    assert!(bucket.head("out/x/y/result.txt").await.unwrap().is_none());
    assert_eq!(
        bucket.head("out/renamed.txt").await.unwrap().unwrap().size,
        7
    );
    let error = std::fs::rename(path.join("seed/a"), path.join("seed/moved")).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EXDEV));

    // Truncate, unlink, rmdir of a non-empty and of an empty directory.
    std::fs::OpenOptions::new()
        .write(true)
        .open(path.join("out/renamed.txt"))
        .unwrap()
        .set_len(3)
        .unwrap();
    assert_eq!(
        bucket.head("out/renamed.txt").await.unwrap().unwrap().size,
        3
    );
    let error = std::fs::remove_dir(path.join("seed/a")).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::ENOTEMPTY));
    std::fs::remove_file(path.join("seed/a/b/deep.txt")).unwrap();
    assert!(bucket.head("seed/a/b/deep.txt").await.unwrap().is_none());
    std::fs::create_dir(path.join("empty")).unwrap();
    assert!(path.join("empty").is_dir());
    std::fs::remove_dir(path.join("empty")).unwrap();
    assert!(!path.join("empty").exists());

    // The kernel forgets its inodes (FUSE forget); the mount keeps answering.
    let open = std::fs::File::open(path.join("seed/top.txt")).unwrap();
    std::fs::write("/proc/sys/vm/drop_caches", "2").unwrap();
    assert_eq!(
        std::fs::read_to_string(path.join("seed/top.txt")).unwrap(),
        "top\nmore\n"
    );
    assert_eq!(
        std::fs::metadata(path.join("out/renamed.txt"))
            .unwrap()
            .len(),
        3
    );
    assert!(path.join("out").is_dir());
    let names = names_in(&path.join("out"));
    assert!(names.contains(&"renamed.txt".to_string()), "{names:?}");

    let mut held = String::new();
    std::io::BufReader::new(open)
        .read_to_string(&mut held)
        .unwrap();
    assert_eq!(held, "top\nmore\n");

    let (status, body) = daemon.get("/api/mounts").await;
    assert_eq!(status, 200);
    assert_eq!(body["mounts"][0]["mountPath"], path.to_str().unwrap());

    let (status, body) = unmount(daemon, path).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["removedDir"], true);
    assert!(!path.exists(), "the mount directory fsd made is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_mb_file_round_trips_and_concurrent_readers_agree() {
    if !fuse_ready("a_200_mb_file_round_trips_and_concurrent_readers_agree") {
        return;
    }
    let store = Store::start();
    let Mounted { path, .. } = &mounted(&store, json!({})).await;

    // Written in 1 MiB pieces through the mount: a multipart upload at close.
    let data = noise(200 << 20, 7);
    let expected = sha256_hex(&data);
    let mut file = std::fs::File::create(path.join("big.bin")).unwrap();
    for piece in data.chunks(1 << 20) {
        file.write_all(piece).unwrap();
    }
    file.sync_all().unwrap();
    drop(file);
    let stored = direct(&store).head("big.bin").await.unwrap().unwrap();
    assert_eq!(stored.size, data.len() as u64);
    drop(data);
    let in_bucket = direct(&store)
        .get_range("big.bin", 0, stored.size)
        .await
        .unwrap();
    assert_eq!(sha256_hex(&in_bucket), expected, "the object is the file");
    drop(in_bucket);

    // Four readers at once, each through its own handle, all get the same bytes.
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let file = path.join("big.bin");
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                std::fs::File::open(file)
                    .unwrap()
                    .read_to_end(&mut bytes)
                    .unwrap();
                sha256_hex(&bytes)
            })
        })
        .collect();
    for reader in readers {
        assert_eq!(reader.join().unwrap(), expected);
    }
    // Random reads fetch just what they ask for, and get the right bytes.
    let data = noise(200 << 20, 7);
    let mut file = std::fs::File::open(path.join("big.bin")).unwrap();
    for offset in [150u64 << 20, 3, 99 << 20, (200 << 20) - 10] {
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(offset)).unwrap();
        let mut buffer = vec![0; 10];
        file.read_exact(&mut buffer).unwrap();
        assert_eq!(buffer, data[offset as usize..offset as usize + 10]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_scoping_and_read_only_mounts() {
    if !fuse_ready("prefix_scoping_and_read_only_mounts") {
        return;
    }
    let store = Store::start();
    let bucket = direct(&store);
    bucket
        .put("team-a/report.txt", Bytes::from_static(b"a\n"))
        .await
        .unwrap();
    bucket
        .put("team-b/secret.txt", Bytes::from_static(b"b\n"))
        .await
        .unwrap();
    let read_only = proxy(&store, "team-a/", true).await;
    let daemon = Daemon::start();
    let dirs = tempfile::tempdir().unwrap();

    // The proxy refuses what is outside its scope: here the whole-bucket listing a mount
    // of the bucket root starts with.
    let outside = fresh_mount_path(&dirs, "outside");
    let (status, body) = mount(
        &daemon,
        json!({ "bucket": BUCKET, "mountPath": outside, "proxyUrl": read_only.url() }),
    )
    .await;
    assert_error(status, &body, 500, "BUCKET_MOUNT_ERROR");
    assert_eq!(body["context"]["upstreamStatus"], 403);
    assert!(
        !outside.exists(),
        "a failed mount removes the directory it made"
    );

    let path = dirs.path().join("team-a");
    std::fs::create_dir(&path).unwrap();
    let (status, body) = mount(
        &daemon,
        json!({ "bucket": BUCKET, "mountPath": path, "proxyUrl": read_only.url(),
                "prefix": "/team-a", "readOnly": true }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mount"]["prefix"], "team-a/");
    assert_eq!(body["mount"]["createdDir"], false);
    let names = names_in(&path);
    assert_eq!(names, vec!["report.txt"]);
    assert_eq!(
        std::fs::read_to_string(path.join("report.txt")).unwrap(),
        "a\n"
    );
    for error in [
        std::fs::write(path.join("new.txt"), "x").unwrap_err(),
        std::fs::OpenOptions::new()
            .append(true)
            .open(path.join("report.txt"))
            .unwrap_err(),
        std::fs::remove_file(path.join("report.txt")).unwrap_err(),
        std::fs::create_dir(path.join("d")).unwrap_err(),
    ] {
        assert_eq!(error.raw_os_error(), Some(libc::EROFS), "{error}");
    }
    let (status, _) = unmount(&daemon, &path).await;
    assert_eq!(status, 200);
    assert!(path.is_dir(), "a directory fsd did not make stays");
    assert!(!is_mount_point(&path));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_upload_is_eio_to_the_writer_never_silent() {
    if !fuse_ready("a_failed_upload_is_eio_to_the_writer_never_silent") {
        return;
    }
    let store = Store::start();
    let faults = FaultProxy::start(&store.url).await;
    let daemon = Daemon::start();
    let dirs = tempfile::tempdir().unwrap();
    let path = fresh_mount_path(&dirs, "faulty");
    mount_through(&daemon, &store, &faults, &path).await;
    faults.set(Faults {
        fail_all_puts: true,
        ..Default::default()
    });
    for (name, size) in [("small.bin", 1000usize), ("large.bin", 40 << 20)] {
        let mut file = std::fs::File::create(path.join(name)).unwrap();
        file.write_all(&noise(size, 1)).unwrap();
        let error = file.sync_all().unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EIO), "fsync of {name}");
        // close(2) reports it too: the writer cannot miss it.
        let closed = nix::unistd::close(file.into_raw_fd());
        assert_eq!(closed, Err(nix::errno::Errno::EIO), "close of {name}");
        assert!(
            direct(&store).head(name).await.unwrap().is_none(),
            "nothing half-written in the bucket"
        );
    }
    // The data stays in the mount for the next try.
    assert_eq!(
        std::fs::read(path.join("small.bin")).unwrap(),
        noise(1000, 1)
    );
    faults.set(Faults::default());
    std::fs::write(path.join("small.bin"), b"fine").unwrap();
    assert_eq!(
        &direct(&store).get_range("small.bin", 0, 4).await.unwrap()[..],
        b"fine"
    );

    // A file written front to back uploads its full parts while it is written.
    let before = faults.part_puts.load(std::sync::atomic::Ordering::SeqCst);
    let data = noise(40 << 20, 9);
    let mut file = std::fs::File::create(path.join("streamed.bin")).unwrap();
    file.write_all(&data).unwrap();
    let mut waited = 0;
    while faults.part_puts.load(std::sync::atomic::Ordering::SeqCst) < before + 2 && waited < 200 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
    }
    assert!(
        faults.part_puts.load(std::sync::atomic::Ordering::SeqCst) >= before + 2,
        "two full parts went up before close"
    );
    drop(file);
    let stored = direct(&store)
        .get_range("streamed.bin", 0, data.len() as u64)
        .await
        .unwrap();
    assert_eq!(sha256_hex(&stored), sha256_hex(&data));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounts_are_validated_released_and_recovered_after_a_crash() {
    if !fuse_ready("mounts_are_validated_released_and_recovered_after_a_crash") {
        return;
    }
    let store = Store::start();
    let proxy = proxy(&store, "", false).await;
    let mut daemon = Daemon::start();
    let dirs = tempfile::tempdir().unwrap();
    let path = fresh_mount_path(&dirs, "m");
    let base = json!({ "bucket": BUCKET, "mountPath": path, "proxyUrl": proxy.url() });
    for (change, field) in [
        (json!({ "mountPath": "relative/dir" }), "mountPath"),
        (json!({ "bucket": "Not_A_Bucket" }), "bucket"),
        (json!({ "prefix": "no-slash" }), "prefix"),
        (json!({ "proxyUrl": "nota url" }), "proxyUrl"),
        (json!({ "proxyUrl": null }), "endpoint"),
    ] {
        let mut body = base.clone();
        for (key, value) in change.as_object().unwrap() {
            if value.is_null() {
                body.as_object_mut().unwrap().remove(key);
            } else {
                body[key] = value.clone();
            }
        }
        let (status, reply) = mount(&daemon, body).await;
        assert_error(status, &reply, 400, "INVALID_MOUNT_CONFIG");
        assert_eq!(reply["context"]["field"], field, "{reply}");
    }
    let (status, reply) = mount(
        &daemon,
        json!({ "bucket": BUCKET, "mountPath": path, "endpoint": store.url }),
    )
    .await;
    assert_error(status, &reply, 400, "MISSING_CREDENTIALS");
    let (status, reply) = unmount(&daemon, &path).await;
    assert_error(status, &reply, 400, "INVALID_MOUNT_CONFIG");

    let (status, reply) = mount(&daemon, base.clone()).await;
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = mount(&daemon, base.clone()).await;
    assert_error(status, &reply, 400, "INVALID_MOUNT_CONFIG");

    // Busy: a process works inside the mount. The unmount fails and the mount stays.
    std::fs::write(path.join("held.txt"), "x").unwrap();
    let mut holder = std::process::Command::new("sleep")
        .arg("30")
        .current_dir(&path)
        .spawn()
        .unwrap();
    let (status, reply) = unmount(&daemon, &path).await;
    assert_error(status, &reply, 500, "BUCKET_UNMOUNT_ERROR");
    assert!(is_mount_point(&path));
    holder.kill().unwrap();
    holder.wait().unwrap();

    // A crash leaves the mount behind; the next start detaches it and removes the dir.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(is_mount_point(&path), "a killed daemon leaves its mount");
    daemon.resume();
    assert!(!is_mount_point(&path));
    assert!(!path.exists());

    // A clean stop releases mounts too.
    let (status, reply) = mount(&daemon, base.clone()).await;
    assert_eq!(status, 200, "{reply}");
    daemon.stop();
    assert!(!is_mount_point(&path));
    assert!(!path.exists());
    assert!(direct(&store).head("held.txt").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_follow_changes_in_the_bucket() {
    if !fuse_ready("cached_reads_follow_changes_in_the_bucket") {
        return;
    }
    let store = Store::start();
    let bucket = direct(&store);
    bucket
        .put("v.txt", Bytes::from_static(b"one\n"))
        .await
        .unwrap();
    let Mounted { path, .. } = &mounted(&store, json!({ "cacheTtlMs": 100 })).await;
    let file = path.join("v.txt");
    // The second open finds the same version and may read the kernel's cached pages.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\n");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\n");
    // Same size, likely the same second: only the ETag tells the versions apart.
    bucket
        .put("v.txt", Bytes::from_static(b"two\n"))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "two\n");
    // A write through the mount is what the next reader sees, cached or not.
    std::fs::write(&file, "three\n").unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "three\n");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "three\n");
}

/// Under `--confine`, a bucket is mounted aside and attached to its directory opened
/// beneath the workspace (and its directory made there by descriptor): while a process
/// swaps a directory and a link out, no bucket lands over the outside and no directory is
/// made there; with the swaps stopped, a confined mount carries files both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confined_mounts_land_beneath_the_workspace_while_a_link_out_swaps_in() {
    if !fuse_ready("confined_mounts_land_beneath_the_workspace_while_a_link_out_swaps_in") {
        return;
    }
    let store = Store::start();
    let proxy = proxy(&store, "", false).await;
    let outside = tempfile::tempdir().unwrap();
    let out = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::create_dir(out.join("b")).unwrap();
    let daemon = Daemon::start_with(fsd_tests::Options {
        confine: true,
        ..fsd_tests::Options::default()
    });
    std::fs::create_dir_all(daemon.path("sub/b")).unwrap();
    std::os::unix::fs::symlink(&out, daemon.path("alt")).unwrap();
    let mounted_outside = || !fsd_tests::mounts_under(&out).is_empty();
    let swapper = super::confine::Swapper::start_every(
        daemon.path("sub"),
        daemon.path("alt"),
        std::time::Duration::from_millis(2),
    );
    let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
    let mut still_mounted = Vec::new();
    for round in 0..20 {
        for target in ["sub/b".to_string(), format!("sub/new{round}")] {
            let path = daemon.path(&target);
            let (status, body) = mount(
                &daemon,
                json!({ "bucket": BUCKET, "mountPath": path, "proxyUrl": proxy.url() }),
            )
            .await;
            assert!(!mounted_outside(), "round {round}: {body}");
            *outcomes.entry(format!("mount {status}")).or_default() += 1;
            if status == 200 {
                let (status, body) = unmount(&daemon, &path).await;
                *outcomes.entry(format!("unmount {status}")).or_default() += 1;
                assert!(!mounted_outside(), "round {round}: {body}");
                if status != 200 {
                    still_mounted.push(path);
                }
            }
        }
    }
    let swaps = swapper.stop();
    // A mount whose unmount met a swap is unmounted by the path it was made at, wherever
    // its directory moved with its parent (detached by its root).
    for path in &still_mounted {
        let (status, body) = unmount(&daemon, path).await;
        assert_eq!(status, 200, "{body}");
    }
    let left = fsd_tests::mounts_under(&daemon.root());
    assert!(left.is_empty(), "{left:?}");
    eprintln!("outcomes after {swaps} swaps: {outcomes:?}");
    assert!(swaps > 5, "the swaps ran alongside");
    assert!(!mounted_outside());
    let names: Vec<String> = names_in(&out);
    assert_eq!(names, ["b"], "nothing was made outside");
    // Whatever is left mounted in the workspace is released with the daemon; with the
    // swaps stopped, a confined mount carries a file both ways.
    let dir = ["sub", "alt"]
        .into_iter()
        .find(|name| daemon.path(name).symlink_metadata().unwrap().is_dir())
        .unwrap();
    let path = daemon.path(dir).join("settled");
    let (status, body) = mount(
        &daemon,
        json!({ "bucket": BUCKET, "mountPath": path, "proxyUrl": proxy.url() }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(is_mount_point(&path));
    std::fs::write(path.join("through.txt"), b"confined\n").unwrap();
    let (status, body) = unmount(&daemon, &path).await;
    assert_eq!(status, 200, "{body}");
    assert!(!is_mount_point(&path));
    assert_eq!(
        &direct(&store).get_range("through.txt", 0, 9).await.unwrap()[..],
        b"confined\n"
    );
}

/// The file routes read and write a bucket's files, and a call the store holds up waits
/// on a thread of its own: a small read, and under `--durability atomic` a small write, is
/// made on the thread that took it only on a local disk, so reads and writes of a bucket
/// that does not answer, more of them than the daemon has worker threads, leave it
/// answering everything else meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_holds_up_reads_and_writes_holds_up_only_those_calls() {
    if !fuse_ready("a_store_that_holds_up_reads_and_writes_holds_up_only_those_calls") {
        return;
    }
    let store = Store::start();
    for durability in ["fsync", "atomic"] {
        hold_up_reads_and_writes(&store, durability).await;
    }
}

/// Under `--durability <durability>`, with the bucket's files under `<durability>/`.
async fn hold_up_reads_and_writes(store: &Store, durability: &str) {
    const HELD: usize = 4;
    let faults = FaultProxy::start(&store.url).await;
    let bucket = direct(store);
    let key = |name: &str| format!("{durability}/{name}");
    bucket
        .put(&key("quick.txt"), Bytes::from_static(b"quick\n"))
        .await
        .unwrap();
    for i in 0..HELD {
        let content = Bytes::from(format!("held {i}\n"));
        bucket
            .put(&key(&format!("held-{i}.txt")), content)
            .await
            .unwrap();
    }
    let daemon = Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--durability".into(), durability.into()],
        ..Default::default()
    });
    let dirs = tempfile::tempdir().unwrap();
    let mount_path = fresh_mount_path(&dirs, "held");
    mount_through(&daemon, store, &faults, &mount_path).await;
    let path = mount_path.join(durability);

    // Through the routes, both ways.
    let (status, body) = daemon
        .post("/api/read", json!({ "path": path.join("quick.txt") }))
        .await;
    assert_eq!(
        (status.as_u16(), &body["content"]),
        (200, &json!("quick\n")),
        "{durability}"
    );
    let (status, body) = daemon
        .post(
            "/api/write",
            json!({ "path": path.join("written.txt"), "content": "written\n" }),
        )
        .await;
    assert_eq!(status, 200, "{durability}: {body}");
    assert_eq!(
        &bucket.get_range(&key("written.txt"), 0, 8).await.unwrap()[..],
        b"written\n"
    );

    // The store holds every object read and upload; the routes wait on them.
    faults.set(Faults {
        hold_gets: true,
        hold_puts: true,
        ..Default::default()
    });
    let call = |route: &str, body: Value| {
        let request = daemon.request(reqwest::Method::POST, route).json(&body);
        tokio::spawn(fsd_tests::reply(request))
    };
    // `/api/read` of `<name>-0.txt` … in the directory, each a task.
    let reads_of = |name: &str| -> Vec<_> {
        (0..HELD)
            .map(|i| {
                let file = path.join(format!("{name}-{i}.txt"));
                call("/api/read", json!({ "path": file }))
            })
            .collect()
    };
    let held = || faults.held.load(std::sync::atomic::Ordering::SeqCst) as usize;
    let wait_for = |count: usize| async move {
        for _ in 0..1500 {
            if held() >= count {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    // A failure lets the store go first, and the daemon finish what waited on it: a
    // daemon killed while its threads wait on its own bucket mount does not exit until
    // something ends the mount's connection (the kernel's FUSE connection waits on the very
    // process it would answer; see the test after this one).
    let fail = |message: String| -> ! {
        faults.set(Faults::default());
        std::thread::sleep(std::time::Duration::from_secs(2));
        panic!("{durability}: {message}");
    };
    // Every read's GET is held first (the writes below lock the directory, and a read that
    // has not looked its file up by then waits in the kernel, short of the store).
    let reads = reads_of("held");
    wait_for(HELD).await;
    if held() < HELD {
        fail(format!("the reads reached the store: {} held", held()));
    }
    let writes: Vec<_> = (0..HELD)
        .map(|i| {
            let file = path.join(format!("put-{i}.txt"));
            call(
                "/api/write",
                json!({ "path": file, "content": format!("put {i}\n") }),
            )
        })
        .collect();
    // Under `fsync` every write's upload (its flush, before its rename), under `atomic` the
    // first write's rename, a copy in the store, which keeps the directory locked, so that
    // the other writes wait in the kernel to create their temp files there, and any lookup
    // in it waits too.
    let reached = match durability {
        "fsync" => 2 * HELD,
        _ => HELD + 1,
    };
    wait_for(reached).await;
    if held() < reached {
        fail(format!(
            "the reads and writes reached the store (a daemon whose own threads wait on \
             it takes no more calls): {} held",
            held()
        ));
    }

    // Reads of names never looked up in that directory: under `atomic` each waits in the
    // kernel for the directory too, from the path's first look (more of them than the
    // daemon has workers).
    let lookups = reads_of("missing");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;

    // Meanwhile the daemon answers, local files read and written on its own threads.
    let local = dirs.path().join("local.txt");
    let answered = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        let (status, body) = daemon.get("/api/ping").await;
        assert_eq!(status, 200, "{body}");
        let (status, body) = daemon
            .post("/api/write", json!({ "path": local, "content": "local\n" }))
            .await;
        assert_eq!(status, 200, "{body}");
        let (status, body) = daemon.post("/api/read", json!({ "path": local })).await;
        assert_eq!(
            (status.as_u16(), &body["content"]),
            (200, &json!("local\n"))
        );
    })
    .await;
    if answered.is_err() {
        fail(format!(
            "the daemon stopped answering while the store held {} calls",
            held()
        ));
    }
    if held() < reached {
        fail(format!("the held calls were let go: {} held", held()));
    }

    // Let go: every held call completes, none lost.
    faults.set(Faults::default());
    for (i, read) in reads.into_iter().enumerate() {
        let (status, body) = read.await.unwrap();
        assert_eq!(status, 200, "{durability}: {body}");
        assert_eq!(body["content"], format!("held {i}\n"));
    }
    for lookup in lookups {
        let (status, body) = lookup.await.unwrap();
        assert_eq!(status, 404, "{durability}: {body}");
    }
    for (i, write) in writes.into_iter().enumerate() {
        let (status, body) = write.await.unwrap();
        assert_eq!(status, 200, "{durability}: {body}");
        let content = format!("put {i}\n");
        let stored = bucket
            .get_range(&key(&format!("put-{i}.txt")), 0, content.len() as u64)
            .await
            .unwrap();
        assert_eq!(&stored[..], content.as_bytes());
    }
}

/// A daemon killed while one of its own threads waits on its own bucket mount (a read the
/// store holds up) does not finish exiting: the kernel waits for an answer only that process
/// could give, so it keeps its mount, its listening socket and its clients' connections.
/// Started again over the same state directory and address, the daemon ends that mount's
/// connection first: the earlier process exits, the address is free, the mount and its
/// directory are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_while_waiting_on_its_own_mount_lets_go_of_it_when_started_again() {
    if !fuse_ready(
        "a_daemon_killed_while_waiting_on_its_own_mount_lets_go_of_it_when_started_again",
    ) {
        return;
    }
    let (store, faults) = store_with_held_file().await;
    let listen = format!("127.0.0.1:{}", fsd_tests::free_port());
    let mut daemon = Daemon::start_with(fsd_tests::Options {
        listen: Some(listen.clone()),
        ..Default::default()
    });
    let dirs = tempfile::tempdir().unwrap();
    let path = fresh_mount_path(&dirs, "held");
    mount_through(&daemon, &store, &faults, &path).await;
    // Whatever happens below, the mount's connection is ended before the test does, so no
    // process is left waiting on it.
    let mut abort = AbortOnDrop(Some(path.clone()));

    let read = read_held(
        &faults,
        daemon
            .request(reqwest::Method::POST, "/api/read")
            .json(&json!({ "path": path.join("held.txt") })),
    )
    .await;
    let earlier = nix::unistd::Pid::from_raw(daemon.pid() as i32);
    nix::sys::signal::kill(earlier, nix::sys::signal::Signal::SIGKILL).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let exited = |pid| {
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        !matches!(
            waitpid(pid, Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::StillAlive)
        )
    };
    let stuck = !exited(earlier);
    eprintln!("the killed daemon is still there half a second later: {stuck}");
    assert!(is_mount_point(&path), "a killed daemon leaves its mount");

    // Started again on the same address: it binds once the earlier run has let go of it.
    daemon.resume();
    assert_eq!(daemon.url, format!("http://{listen}"));
    let (status, body) = daemon.get("/api/ping").await;
    assert_eq!(status, 200, "{body}");
    let mut gone = exited(earlier);
    for _ in 0..250 {
        if gone {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        gone = exited(earlier);
    }
    assert!(
        gone,
        "the earlier daemon exits once its mount's connection ends"
    );
    // With it, the connection the read came on (which the stuck process kept open) closes:
    // the read fails, it does not hang.
    let answered = tokio::time::timeout(std::time::Duration::from_secs(30), read).await;
    assert!(
        matches!(answered, Ok(Ok(Err(_)))),
        "the read's connection ends with the earlier daemon: {answered:?}"
    );
    assert!(!is_mount_point(&path));
    assert!(!path.exists());
    abort.0 = None;
    faults.set(Faults::default());

    // The daemon mounts there again, and the held file reads whole.
    mount_through(&daemon, &store, &faults, &path).await;
    let (status, body) = daemon
        .post("/api/read", json!({ "path": path.join("held.txt") }))
        .await;
    assert_eq!((status.as_u16(), &body["content"]), (200, &json!("held\n")));
}

/// A second `fsd serve` on a state directory a living daemon holds is refused at once, with
/// the directory and the holder named, and takes nothing from the first: a start ends the
/// bucket mounts its directory's record names, which here are the first daemon's, in use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_a_state_directory_in_use_is_refused_and_leaves_the_first_alone() {
    if !fuse_ready(
        "a_second_daemon_on_a_state_directory_in_use_is_refused_and_leaves_the_first_alone",
    ) {
        return;
    }
    let store = Store::start();
    direct(&store)
        .put("kept.txt", Bytes::from_static(b"kept\n"))
        .await
        .unwrap();
    // Held whole: its proxy serves the mount.
    let mounted = mounted(&store, json!({})).await;
    let (daemon, path) = (&mounted.daemon, &mounted.path);
    assert_eq!(
        std::fs::read_to_string(path.join("kept.txt")).unwrap(),
        "kept\n"
    );
    let other_workspace = tempfile::tempdir().unwrap();
    let in_use = format!(
        "the state directory {} is in use by another fsd (pid {}",
        daemon.state_dir().display(),
        daemon.pid()
    );
    let said = refused_start(other_workspace.path(), &daemon.state_dir());
    assert!(
        said.contains(&format!("{in_use}): --state-dir takes another")),
        "says which directory and which daemon: {said}"
    );
    // Stopped (a Ctrl-Z), the first looks gone to whoever stopped it: the refusal says so.
    let first = nix::unistd::Pid::from_raw(daemon.pid() as i32);
    nix::sys::signal::kill(first, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let said = refused_start(other_workspace.path(), &daemon.state_dir());
    nix::sys::signal::kill(first, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert!(
        said.contains(&format!(
            "{in_use}, stopped: `kill -CONT {0}` lets it go on, `kill -KILL {0}` ends it)",
            daemon.pid()
        )),
        "says the holder is stopped: {said}"
    );
    // The first daemon serves on, its mount still there and still reading.
    assert!(is_mount_point(path), "the first daemon's mount stays");
    assert_eq!(
        std::fs::read_to_string(path.join("kept.txt")).unwrap(),
        "kept\n"
    );
    let (status, body) = daemon.get("/api/ping").await;
    assert_eq!(status, 200, "{body}");
}

/// Starts a second `fsd serve` on `state_dir` and answers what it said, asserting it was
/// refused at once and never listened.
fn refused_start(workspace: &Path, state_dir: &Path) -> String {
    let mut second = std::process::Command::new(fsd_tests::binary("fsd"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--log-level", "warn"])
        .arg("--workspace")
        .arg(workspace)
        .arg("--state-dir")
        .arg(state_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("a second fsd runs");
    // Refused, it ends at once; one that serves is killed after a while, and fails here.
    let mut waited = 0;
    while second.try_wait().unwrap().is_none() && waited < 1500 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        waited += 1;
    }
    let _ = second.kill();
    let second = second.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&second.stderr).into_owned();
    assert!(!second.status.success(), "refused: {said}");
    assert!(
        String::from_utf8_lossy(&second.stdout).is_empty(),
        "it never listened"
    );
    said
}

/// In a container fsd's first process (PID 1) waits for its daemon: a daemon killed while
/// one of its own threads waits on its own bucket mount never finishes exiting, and no
/// next start comes to end the mount's connection until the container ends, so the
/// container stayed up for ever with nothing serving. The first process sees its daemon
/// stuck dying, ends the connection itself, and the container ends with the daemon's code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_pid_1_a_daemon_killed_while_waiting_on_its_own_mount_ends_the_container() {
    let test = "as_pid_1_a_daemon_killed_while_waiting_on_its_own_mount_ends_the_container";
    if !fuse_ready(test)
        || !available_or_skip(fsd_tests::is_root(), test, "root for a PID namespace")
    {
        return;
    }
    let (store, faults) = store_with_held_file().await;
    let dir = tempfile::tempdir().unwrap();
    let port = fsd_tests::free_port();
    // PID 1 of a PID namespace with its own /proc, as in a container.
    let mut container = super::init::serve(dir.path(), port, &["sleep", "1000"], true);
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    fsd_tests::wait_until_listening(format!("127.0.0.1:{port}").parse().unwrap(), "the daemon")
        .await;
    let init = super::init::children(container.0.id() as i32)[0].0;
    let daemon = super::init::children(init)
        .into_iter()
        .find(|(_, _, name)| name == "fsd")
        .expect("the daemon is the first process's child")
        .0;
    // The mount is made in the namespace's own mount table; it is ended from inside it if
    // the test fails, so no process is left waiting on it.
    let path = fresh_mount_path(&dir, "held");
    let _abort = AbortInside {
        pid: daemon,
        path: path.clone(),
    };
    let mounted = client
        .post(format!("{url}/api/mounts"))
        .json(&through(&store, &faults, &path))
        .send()
        .await
        .unwrap();
    assert_eq!(mounted.status(), 200, "{:?}", mounted.text().await);

    let read = read_held(
        &faults,
        client
            .post(format!("{url}/api/read"))
            .json(&json!({ "path": path.join("held.txt") })),
    )
    .await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let ended = tokio::task::spawn_blocking(move || {
        let status = super::init::exit_of(&mut container);
        (status, container)
    })
    .await
    .unwrap()
    .0;
    assert_eq!(
        ended.code(),
        Some(137),
        "the container ends as its daemon did"
    );
    let answered = tokio::time::timeout(std::time::Duration::from_secs(30), read).await;
    assert!(
        matches!(answered, Ok(Ok(Err(_)))),
        "the read's connection ends with the daemon: {answered:?}"
    );
    faults.set(Faults::default());
}

/// Ends the FUSE connection of the mount at `path` in the mount namespace of `pid`'s
/// threads, if one of them is still there (a daemon stuck exiting on its own mount).
struct AbortInside {
    pid: i32,
    path: PathBuf,
}

impl Drop for AbortInside {
    fn drop(&mut self) {
        use std::os::unix::ffi::OsStrExt;
        let Ok(threads) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else {
            return;
        };
        let Ok(path) = std::ffi::CString::new(self.path.as_os_str().as_bytes()) else {
            return;
        };
        for thread in threads.flatten() {
            let Ok(namespace) = std::fs::File::open(thread.path().join("ns/mnt")) else {
                continue;
            };
            // In a child: a process with threads cannot enter another mount namespace. (Its
            // `umount` would not do: it reads a `/proc` that namespace's dead PID 1 took away.)
            // SAFETY: the child makes two system calls and exits, allocating nothing.
            match unsafe { nix::unistd::fork() } {
                Ok(nix::unistd::ForkResult::Child) => {
                    let ended = nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNS).is_ok()
                            // SAFETY: `path` is a C string that outlives the call.
                            && unsafe { libc::umount2(path.as_ptr(), libc::MNT_FORCE) } == 0;
                    // SAFETY: ends the child without running the parent's exit handlers.
                    unsafe { libc::_exit(if ended { 0 } else { 1 }) };
                }
                Ok(nix::unistd::ForkResult::Parent { child }) => {
                    if matches!(
                        nix::sys::wait::waitpid(child, None),
                        Ok(nix::sys::wait::WaitStatus::Exited(_, 0))
                    ) {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }
}

/// Ends the FUSE connection of the mount at its path, if it is still one, and detaches it.
struct AbortOnDrop(Option<PathBuf>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take().filter(|path| is_mount_point(path)) {
            let _ = fsd_mounts::mount::release_dead(&path);
        }
    }
}
