//! Backup benchmark on one generated tree (50,000 small files plus three 100 MB files),
//! side by side with the anchors in the same run: archive creation against `mksquashfs`
//! (same codec, level and thread count), restore-to-usable-directory for a 1 GiB archive
//! already local, upload and download MB/s to the embedded S3 store beside `curl` moving
//! the same bytes, and the daemon's peak RSS.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench backup`
//! (as root, with squashfs-tools and curl). `FSD_BENCH_QUICK=1`: a tenth of the sizes.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fsctl::trusted::aws_sdk_s3::presigning::PresigningConfig;
use fsctl::trusted::{BackupOptions, Backups};
use fsd_tests::bench::{Summary, dir_bytes, generate, ms};
use fsd_tests::s3::Store;
use fsd_tests::{Daemon, noise, peak_rss_kib};
use serde_json::json;

const MB: f64 = 1_000_000.0;

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(if quick { 10 } else { 1 }));
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

async fn run(divisor: usize) {
    let daemon = Daemon::start();
    let store = Store::start();
    let tree = daemon.path("tree");
    generate(&tree, divisor);
    let _ = Command::new("cat").arg("/dev/null").status();
    // Warm the page cache for both sides.
    let _ = Command::new("tar")
        .arg("cf")
        .arg("/dev/null")
        .arg(&tree)
        .status();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    println!(
        "fsd backup benchmark: {} small files + 3 × {} MB ({:.0} MB), zstd level 3, {threads} threads",
        50_000 / divisor,
        100 / divisor,
        dir_bytes(&tree) as f64 / MB
    );
    println!();

    // The large files alone, hard links into a directory of their own.
    let large = daemon.path("large");
    std::fs::create_dir_all(&large).expect("mkdir");
    for i in 0..3 {
        let name = format!("big{i}.bin");
        std::fs::hard_link(tree.join(&name), large.join(&name)).expect("link");
    }
    let whole = create_beside_mksquashfs(&daemon, &tree, threads).await;
    let large_part = create_beside_mksquashfs(&daemon, &large, threads).await;
    println!(
        "archive creation (median of 3; fsd through HTTP, with the fsync that makes the archive durable)"
    );
    for (name, times) in [
        ("the whole tree", &whole),
        ("the 3 large files alone", &large_part),
    ] {
        println!("  {name}");
        println!(
            "    fsd /api/backup/create     {:>8.0} ms   {:>7.1} MB",
            ms(times.fsd),
            times.fsd_bytes as f64 / MB
        );
        println!(
            "    anchor: mksquashfs         {:>8.0} ms   {:>7.1} MB   ratio {:.2}",
            ms(times.mksquashfs),
            times.mksquashfs_bytes as f64 / MB,
            times.fsd.as_secs_f64() / times.mksquashfs.as_secs_f64()
        );
        println!(
            "    mksquashfs + fsync         {:>8.0} ms              ratio {:.2}",
            ms(times.mksquashfs_durable),
            times.fsd.as_secs_f64() / times.mksquashfs_durable.as_secs_f64()
        );
    }
    println!("  (targets: ≤ 0.9 for the whole tree, ≤ 1.0 for the large files)");
    let mut summary = Summary::default();
    for (name, times, target) in [
        ("backup create, whole tree", &whole, "≤ 0.9×"),
        ("backup create, the large files", &large_part, "≤ 1.0×"),
    ] {
        summary.row(
            name,
            format!("{:.0} ms (fsync included)", ms(times.fsd)),
            format!(
                "mksquashfs: {:.0} ms (no fsync); with an fsync of its archive: {:.0} ms ({})",
                ms(times.mksquashfs),
                ms(times.mksquashfs_durable),
                Summary::ratio(ms(times.fsd), ms(times.mksquashfs_durable))
            ),
            Summary::ratio(ms(times.fsd), ms(times.mksquashfs)),
            target,
        );
    }

    // A 1 GiB archive: incompressible data, so the archive is as large as the tree.
    let gib = daemon.path("gib");
    std::fs::create_dir_all(&gib).expect("mkdir");
    for i in 0..8 {
        std::fs::write(
            gib.join(format!("part{i}.bin")),
            noise((1 << 30) / 8 / divisor, 3000 + i),
        )
        .expect("write");
    }
    std::fs::write(gib.join("hello.txt"), b"hello\n").expect("write");
    let backups = Backups::new(store.object_store(None));
    let sandbox = daemon.sandbox();
    let phases: Arc<Mutex<Vec<(String, Instant, Instant)>>> = Arc::new(Mutex::new(Vec::new()));
    let recorder = {
        let phases = phases.clone();
        Arc::new(move |phase: &str, _done: u64, _total: u64| {
            let mut phases = phases.lock().expect("phases");
            match phases.last_mut() {
                Some((p, _, last)) if p == phase => *last = Instant::now(),
                _ => phases.push((phase.to_string(), Instant::now(), Instant::now())),
            }
        })
    };
    let options = BackupOptions {
        progress: Some(recorder.clone()),
        ..Default::default()
    };
    let backup = backups
        .create_backup(&sandbox, gib.to_str().expect("utf-8"), options)
        .await
        .expect("create 1 GiB");
    let done = Instant::now();
    let upload_time = phase_span(&phases, "upload", done);
    let parts_time = phases
        .lock()
        .expect("phases")
        .iter()
        .find(|(p, _, _)| p == "upload")
        .map(|(_, first, last)| *last - *first)
        .unwrap_or_default();
    let archive = format!("/var/backups/{}.sqsh", backup.id);
    let size = backup.size_bytes;

    // Restore from a local archive: request → usable directory.
    let target = daemon.path("restored");
    let mut restore_times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let (status, body) = daemon
            .post(
                "/api/backup/restore",
                json!({"dir": target, "archivePath": archive}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            std::fs::read(target.join("hello.txt")).expect("usable"),
            b"hello\n"
        );
        restore_times.push(started.elapsed());
    }
    let restore = median(restore_times);
    let mut cached_times = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        backups
            .restore_backup(&sandbox, &backup.id, target.to_str().expect("utf-8"), None)
            .await
            .expect("restore");
        cached_times.push(started.elapsed());
    }
    let cached = median(cached_times);

    // Download: the archive is not local any more.
    phases.lock().expect("phases").clear();
    daemon
        .post("/api/backup/unmount", json!({"dir": target}))
        .await;
    let _ = std::fs::remove_file(&archive);
    let _ = std::fs::remove_file(format!("{archive}.sha256"));
    backups
        .restore_backup(
            &sandbox,
            &backup.id,
            target.to_str().expect("utf-8"),
            Some(recorder),
        )
        .await
        .expect("download + restore");
    let download_time = phase_span(
        &phases,
        "download",
        phase_start(&phases, "mount").unwrap_or_else(Instant::now),
    );

    // curl moving the same bytes through presigned URLs of the same store.
    let s3 = store.object_store(None).client();
    let presign = PresigningConfig::expires_in(Duration::from_secs(3600)).expect("presign");
    let put = s3
        .put_object()
        .bucket("fsd")
        .key("bench/curl.bin")
        .presigned(presign.clone())
        .await
        .expect("presign put");
    let started = Instant::now();
    let status = Command::new("curl")
        .args([
            "-sSf",
            "-X",
            "PUT",
            "-H",
            "content-type: application/octet-stream",
            "-T",
        ])
        .arg(&archive)
        .arg(put.uri())
        .status()
        .expect("curl");
    let curl_put = started.elapsed();
    assert!(status.success(), "curl PUT");
    let get = s3
        .get_object()
        .bucket("fsd")
        .key("bench/curl.bin")
        .presigned(presign)
        .await
        .expect("presign get");
    let downloaded = daemon.path("curl.bin");
    let started = Instant::now();
    let status = Command::new("curl")
        .args(["-sSf", "-o"])
        .arg(&downloaded)
        .arg(get.uri())
        .status()
        .expect("curl");
    let curl_get = started.elapsed();
    assert!(status.success(), "curl GET");
    let rate = |d: Duration| size as f64 / MB / d.as_secs_f64();
    println!();
    println!(
        "{:.0} MB archive ({} in the workspace)",
        size as f64 / MB,
        if divisor == 1 {
            "1 GiB of data"
        } else {
            "quick mode"
        }
    );
    println!(
        "  restore, archive local: request → usable dir   {:>7.1} ms (median of 5; target ≤ 100 ms)",
        ms(restore)
    );
    println!(
        "  restore through the SDK (meta, TTL, presign, cached archive)   {:>7.1} ms (median of 3)",
        ms(cached)
    );
    println!(
        "  upload to the embedded store (presigned multipart parts, until stored)   {:>7.0} MB/s",
        rate(upload_time)
    );
    println!(
        "    of which sending the parts                                {:>7.0} MB/s",
        rate(parts_time)
    );
    println!(
        "  anchor: curl PUT, one presigned URL                       {:>7.0} MB/s",
        rate(curl_put)
    );
    println!(
        "  download from the embedded store (parallel ranges + SHA-256)   {:>7.0} MB/s",
        rate(download_time)
    );
    println!(
        "  anchor: curl GET, one presigned URL                            {:>7.0} MB/s",
        rate(curl_get)
    );
    println!();
    println!(
        "daemon peak RSS over the run: {:.1} MiB",
        peak_rss_kib(daemon.pid()) as f64 / 1024.0
    );
    daemon
        .post("/api/backup/unmount", json!({"dir": target}))
        .await;
    let _ = std::fs::remove_file(&archive);
    let _ = std::fs::remove_file(format!("{archive}.sha256"));
    summary.print();
}

fn phase_start(phases: &Mutex<Vec<(String, Instant, Instant)>>, phase: &str) -> Option<Instant> {
    phases
        .lock()
        .ok()?
        .iter()
        .find(|(p, _, _)| p == phase)
        .map(|(_, t, _)| *t)
}

/// From the first report of `phase` to the first report of the next phase (or `end`).
fn phase_span(
    phases: &Mutex<Vec<(String, Instant, Instant)>>,
    phase: &str,
    end: Instant,
) -> Duration {
    let phases = phases.lock().expect("phases");
    let Some(index) = phases.iter().position(|(p, _, _)| p == phase) else {
        return Duration::ZERO;
    };
    let stop = phases.get(index + 1).map(|(_, t, _)| *t).unwrap_or(end);
    stop - phases[index].1
}

/// Archive creation of one directory by fsd and by mksquashfs (same codec, level, threads).
struct Creation {
    fsd: Duration,
    fsd_bytes: u64,
    mksquashfs: Duration,
    mksquashfs_bytes: u64,
    /// mksquashfs followed by an fsync of its archive: the durability fsd's create includes.
    mksquashfs_durable: Duration,
}

/// Creates an archive of `dir` three times each way, alternating, and keeps the medians.
async fn create_beside_mksquashfs(daemon: &Daemon, dir: &Path, threads: usize) -> Creation {
    let pid = std::process::id();
    let ours = format!("/var/backups/bench-fsd-{pid}.sqsh");
    let theirs = format!("/tmp/bench-mksquashfs-{pid}.sqsh");
    let mut fsd_times = Vec::new();
    let mut mk_times = Vec::new();
    let mut durable_times = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let (status, body) = daemon
            .post("/api/backup/create", json!({"dir": dir, "archivePath": ours, "compression": {"format": "zstd", "threads": threads}}))
            .await;
        fsd_times.push(started.elapsed());
        assert_eq!(status, 200, "{body}");
        let _ = std::fs::remove_file(&theirs);
        let started = Instant::now();
        let status = Command::new("mksquashfs")
            .arg(dir)
            .arg(&theirs)
            .args([
                "-comp",
                "zstd",
                "-Xcompression-level",
                "3",
                "-processors",
                &threads.to_string(),
                "-no-progress",
                "-noappend",
                "-quiet",
            ])
            .status()
            .expect("mksquashfs (squashfs-tools)");
        mk_times.push(started.elapsed());
        assert!(status.success());
        std::fs::File::open(&theirs)
            .and_then(|file| file.sync_all())
            .expect("fsync");
        durable_times.push(started.elapsed());
    }
    let creation = Creation {
        mksquashfs_durable: median(durable_times),
        fsd: median(fsd_times),
        fsd_bytes: std::fs::metadata(&ours).expect("archive").len(),
        mksquashfs: median(mk_times),
        mksquashfs_bytes: std::fs::metadata(&theirs).expect("archive").len(),
    };
    let _ = std::fs::remove_file(&theirs);
    let _ = std::fs::remove_file(&ours);
    for sidecar in [".sha256", ".index"] {
        let _ = std::fs::remove_file(format!("{ours}{sidecar}"));
    }
    creation
}
