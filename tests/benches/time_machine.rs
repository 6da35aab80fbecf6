//! Time machine benchmark on the backup benchmark's tree (50,000 small files plus three
//! 100 MB files), through the embedded S3 store, side by side with restic on the same tree
//! and the same change in the same run: a full snapshot, an incremental one after 10 files
//! changed (end to end, and the daemon's part alone), `ls` of the whole tree, `diff` of
//! two snapshots, one small file read and one restored into the live directory.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench time_machine`
//! (as root, with restic). `FSD_BENCH_QUICK=1`: a tenth of the sizes. restic keeps its
//! repository on the local disk (fsd's store is on loopback HTTP).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use fsctl::trusted::{BackupOptions, Backups};
use fsd_tests::Daemon;
use fsd_tests::bench::{generate, ms};
use fsd_tests::s3::Store;
use serde_json::json;

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(if quick { 10 } else { 1 }));
}

fn restic(repo: &Path, args: &[&str]) -> (Duration, Output) {
    let started = Instant::now();
    let output = Command::new("restic")
        .arg("--repo")
        .arg(repo)
        .args(["--quiet", "--no-cache"])
        .args(args)
        .env("RESTIC_PASSWORD", "bench")
        .output()
        .expect("restic (apt install restic)");
    let took = started.elapsed();
    assert!(
        output.status.success(),
        "restic {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (took, output)
}

/// Runs `work` `rounds` times; the median.
async fn median<F, Fut>(rounds: usize, mut work: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        work().await;
        times.push(started.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}

fn row(what: &str, fsd: Duration, anchor: &str, theirs: Duration, target: &str) {
    println!(
        "  {what:<44} {:>9.1} ms   {anchor:<28} {:>9.1} ms   {target}",
        ms(fsd),
        ms(theirs)
    );
}

async fn run(divisor: usize) {
    let daemon = Daemon::start();
    let store = Store::start();
    let tree = daemon.path("tree");
    generate(&tree, divisor);
    let dir = tree.to_str().expect("utf-8");
    let _ = Command::new("tar")
        .arg("cf")
        .arg("/dev/null")
        .arg(&tree)
        .status();
    let repo = tempfile::tempdir().expect("tempdir");
    let repo = repo.path().join("restic");
    restic(&repo, &["init"]);
    let backups = Backups::new(store.object_store(None));
    let sandbox = daemon.sandbox();
    println!(
        "fsd time machine benchmark: {} small files + 3 × {} MB, zstd level 3 (restic: its defaults, local repository)",
        50_000 / divisor,
        100 / divisor
    );
    println!();

    let started = Instant::now();
    let full = backups
        .create_backup(
            &sandbox,
            dir,
            BackupOptions {
                full: true,
                ..BackupOptions::default()
            },
        )
        .await
        .expect("full snapshot");
    let full_time = started.elapsed();
    let (restic_full, _) = restic(&repo, &["backup", dir]);

    // Ten files edited, then the incremental snapshot; restic backs up the same change.
    let edit = |round: usize| {
        for i in 0..10 {
            let index = i * 997 % (50_000 / divisor);
            let path = tree.join(format!(
                "pkg{:03}/mod{}/file{index}.rs",
                index % 500,
                index % 7
            ));
            std::fs::write(path, format!("edited in round {round}, file {i}\n")).expect("edit");
        }
    };
    edit(0);
    let started = Instant::now();
    let second = backups
        .create_backup(&sandbox, dir, BackupOptions::default())
        .await
        .expect("incremental snapshot");
    let incremental_time = started.elapsed();
    assert_eq!(second.parent.as_deref(), Some(full.id.as_str()));
    let (restic_incremental, _) = restic(&repo, &["backup", dir]);

    // The daemon's part alone: scan, compare with the parent's index, archive the change.
    let index_url = store
        .object_store(None)
        .presign("GET", &fsd_control::backup::index_key(&second.id), &[])
        .expect("presign");
    assert_eq!(second.compared_by.as_deref(), Some("changeToken"));
    let token = backups.meta(&second.id).await.expect("meta").token;
    let mut round = 0;
    let daemon_part = median(5, || {
        round += 1;
        edit(round);
        let body = json!({
            "dir": dir,
            "archivePath": format!("/var/backups/bench-incremental-{round}.sqsh"),
            "base": {"indexUrl": index_url, "depth": 1, "token": token},
        });
        let daemon = &daemon;
        async move {
            let (status, answer) = daemon.post("/api/backup/create", body).await;
            assert_eq!(status, 200, "{answer}");
            assert_eq!(answer["comparedBy"], "changeToken", "{answer}");
        }
    })
    .await;
    for round in 1..=5 {
        for suffix in ["", ".index"] {
            let _ = std::fs::remove_file(format!(
                "/var/backups/bench-incremental-{round}.sqsh{suffix}"
            ));
        }
    }

    let ls = median(5, || async {
        let entries = backups.list_snapshot(&second.id, None).await.expect("ls");
        assert!(entries.len() > 50_000 / divisor);
    })
    .await;
    let (restic_ls, _) = restic(&repo, &["ls", "latest"]);
    let diff = median(5, || async {
        let changes = backups
            .diff(&full.id, Some(&second.id), &sandbox)
            .await
            .expect("diff");
        assert_eq!(changes.len(), 10, "{changes:?}");
    })
    .await;
    let snapshots = restic(&repo, &["snapshots", "--json"]).1.stdout;
    let snapshots: serde_json::Value = serde_json::from_slice(&snapshots).expect("json");
    let ids: Vec<&str> = snapshots
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|s| s["short_id"].as_str())
        .collect();
    let (restic_diff, _) = restic(&repo, &["diff", ids[0], ids[1]]);

    let one = "pkg001/mod1/file1.rs";
    let cat = median(5, || async {
        let bytes = backups.read_file(&second.id, one).await.expect("cat");
        assert!(!bytes.is_empty());
    })
    .await;
    let (restic_cat, _) = restic(&repo, &["dump", "latest", &format!("{dir}/{one}")]);
    let restore_one = median(5, || async {
        let restored = backups
            .restore_paths(&sandbox, &second.id, dir, &[one.to_string()])
            .await
            .expect("restore --path");
        assert_eq!(restored.files, 1);
    })
    .await;
    let target = tempfile::tempdir().expect("tempdir");
    let (restic_restore, _) = restic(
        &repo,
        &[
            "restore",
            "latest",
            "--include",
            &format!("{dir}/{one}"),
            "--target",
            target.path().to_str().expect("utf-8"),
        ],
    );

    println!(
        "  {:<44} {:>12}   {:<28} {:>12}   target",
        "fsd", "", "anchor, same run", ""
    );
    row(
        "full snapshot (create + upload)",
        full_time,
        "restic backup (first)",
        restic_full,
        "",
    );
    row(
        "incremental, 10 files changed (end to end)",
        incremental_time,
        "restic backup (same change)",
        restic_incremental,
        "",
    );
    row(
        "  of which the daemon (changes, archive)",
        daemon_part,
        "",
        Duration::ZERO,
        "≤ 50 ms",
    );
    row(
        "ls of the whole tree (from the store)",
        ls,
        "restic ls latest",
        restic_ls,
        "≤ 200 ms",
    );
    row(
        "diff of two snapshots (from the store)",
        diff,
        "restic diff",
        restic_diff,
        "≤ 200 ms",
    );
    row(
        "one file read (cat, ranged GETs)",
        cat,
        "restic dump",
        restic_cat,
        "",
    );
    row(
        "one small file restored (--path)",
        restore_one,
        "restic restore --include",
        restic_restore,
        "≤ 50 ms",
    );
    println!();
    println!(
        "  sizes: full {:.1} MB, incremental {:.1} KB",
        full.size_bytes as f64 / 1e6,
        second.size_bytes as f64 / 1e3
    );
}
