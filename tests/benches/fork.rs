//! Workspace forks on the real daemon: the time of one `POST /api/fork` making 1, 10 and
//! 100 branches of the backup benchmarks' tree at 5,000 and 50,000 files, beside `cp -a`
//! and `cp --reflink=auto` of the same tree in the same run (one copy each: N branches
//! cost N copies that way), the disk a branch takes, and the time of a discard. Then the
//! time of `POST /api/fork/merge` carrying a branch's change of 10 and of 10,000 files
//! back, beside `rsync -a --delete` of the branch over a copy of the tree (what carrying it
//! by hand costs: rsync reads the whole tree, and overwrites what the directory changed
//! itself where a merge keeps it).
//!
//! A fork of the tree while a process works in it (from a copy) is timed beside `cp -a` of
//! it just before.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench fork` (as
//! root, with kernel overlayfs). `FSD_BENCH_QUICK=1`: the 5,000-file tree only.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use fsd_tests::Daemon;
use fsd_tests::bench::{dir_bytes, generate, ms};
use serde_json::json;

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(quick));
}

/// How long `cp ARGS tree copy` takes, the copy removed after.
fn copy_time(tree: &Path, args: &[&str]) -> Duration {
    let copy = tree.with_extension("copy");
    let started = Instant::now();
    let status = Command::new("cp")
        .args(args)
        .arg(tree)
        .arg(&copy)
        .status()
        .expect("cp");
    let took = started.elapsed();
    assert!(status.success(), "cp {args:?}");
    std::fs::remove_dir_all(&copy).expect("remove the copy");
    took
}

async fn run(quick: bool) {
    let daemon = Daemon::start();
    println!("fsd fork benchmark (release build)");
    let sizes: &[(usize, usize)] = if quick {
        &[(5_000, 10)]
    } else {
        &[(5_000, 10), (50_000, 1)]
    };
    for &(files, divisor) in sizes {
        let tree = daemon.path(&format!("tree{files}"));
        generate(&tree, divisor);
        let _ = Command::new("sync").status();
        let bytes = dir_bytes(&tree);
        println!();
        println!("{files} files, {:.0} MB", bytes as f64 / 1e6);
        let cp = copy_time(&tree, &["-a"]);
        let reflink = copy_time(&tree, &["-a", "--reflink=auto"]);
        println!("  cp -a, one copy                    {:>10.1} ms", ms(cp));
        println!(
            "  cp -a --reflink=auto, one copy     {:>10.1} ms",
            ms(reflink)
        );
        for (round, branches) in [1usize, 10, 100].into_iter().enumerate() {
            let names: Vec<String> = (0..branches).map(|i| format!("r{round}-{i}")).collect();
            let started = Instant::now();
            let (status, body) = daemon
                .post("/api/fork", json!({"dir": tree, "names": names}))
                .await;
            let took = started.elapsed();
            assert_eq!(status, 200, "{body}");
            let (_, listed) = daemon.get("/api/fork").await;
            let held: Vec<u64> = listed["branches"]
                .as_array()
                .map(|all| all.iter().filter_map(|b| b["bytes"].as_u64()).collect())
                .unwrap_or_default();
            let per_branch = held.iter().max().copied().unwrap_or(0);
            println!(
                "  fork into {branches:>3} branches          {:>10.1} ms  ({:.2}× one cp -a, {:.3}× {branches} of them; each branch holds {per_branch} bytes of its own)",
                ms(took),
                ms(took) / ms(cp),
                ms(took) / (ms(cp) * branches as f64),
            );
            let started = Instant::now();
            discard(&daemon, &tree, &names).await;
            println!(
                "  discard them, one call each        {:>10.1} ms",
                ms(started.elapsed())
            );
        }
        // With a process working in the tree the fork point is a copy of it: beside `cp -a`
        // of the tree as it is now (an overlay after the forks above), with the disk's
        // write-back settled before each (the copies above leave much of it pending).
        let _ = Command::new("sync").status();
        let cp_now = copy_time(&tree, &["-a"]);
        let _ = Command::new("sync").status();
        let mut sitting = Command::new("sleep")
            .arg("600")
            .current_dir(&tree)
            .spawn()
            .expect("sleep");
        let names: Vec<String> = (0..10).map(|i| format!("busy-{i}")).collect();
        let started = Instant::now();
        let (status, body) = daemon
            .post("/api/fork", json!({"dir": tree, "names": names}))
            .await;
        let took = started.elapsed();
        let _ = sitting.kill();
        let _ = sitting.wait();
        assert_eq!(status, 200, "{body}");
        assert!(body["copiedBecause"].is_string(), "{body}");
        println!(
            "  fork into  10 branches, a process working in it (from a copy) {:>8.1} ms  ({:.2}× one cp -a of it just before: {:.1} ms)",
            ms(took),
            ms(took) / ms(cp_now),
            ms(cp_now),
        );
        discard(&daemon, &tree, &names).await;
    }
    let tree = daemon.path(if quick { "tree5000" } else { "tree50000" });
    let has_rsync = Command::new("rsync").arg("--version").output().is_ok();
    if !has_rsync {
        println!("  (rsync is not installed: the merges have no anchor)");
    }
    // The quick tree has 5,000 files: a 1,000-file change stands for the large one.
    let large = if quick { 1_000 } else { 10_000 };
    for (round, changed) in [10usize, large].into_iter().enumerate() {
        merge_round(&daemon, &tree, &format!("m{round}"), changed, has_rsync).await;
    }
    // The forked trees stay overlays after their branches go: taken down here.
    fsd_tests::unmount_under(&daemon.root());
    fsd_tests::unmount_under(&daemon.state_dir());
}

/// Discards the branches of `tree` named `names`, one call each.
async fn discard(daemon: &Daemon, tree: &Path, names: &[String]) {
    for name in names {
        let path = format!("{}@{name}", tree.display());
        let (status, body) = daemon
            .post("/api/fork/discard", json!({"path": path}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
}

/// A branch of `tree` with `changed` of its files edited, merged back, beside rsync of the
/// branch over a copy of the tree.
async fn merge_round(daemon: &Daemon, tree: &Path, name: &str, changed: usize, rsync: bool) {
    let (status, body) = daemon
        .post("/api/fork", json!({"dir": tree, "names": [name]}))
        .await;
    assert_eq!(status, 200, "{body}");
    let branch = format!("{}@{name}", tree.display());
    let mut edited = 0;
    for i in 0..50_000 {
        if edited == changed {
            break;
        }
        let file = Path::new(&branch).join(format!("pkg{:03}/mod{}/file{i}.rs", i % 500, i % 7));
        if let Ok(mut content) = std::fs::read(&file) {
            content.extend_from_slice(format!("// edited in {name}\n").as_bytes());
            std::fs::write(&file, content).expect("edit");
            edited += 1;
        }
    }
    let _ = Command::new("sync").status();
    let anchor = rsync.then(|| {
        let copy = tree.with_extension("copy");
        let made = Command::new("cp").arg("-a").arg(tree).arg(&copy).status();
        assert!(made.is_ok_and(|s| s.success()), "cp -a");
        let _ = Command::new("sync").status();
        let started = Instant::now();
        let status = Command::new("rsync")
            .args(["-a", "--delete"])
            .arg(format!("{branch}/"))
            .arg(format!("{}/", copy.display()))
            .status()
            .expect("rsync");
        let took = started.elapsed();
        assert!(status.success(), "rsync");
        std::fs::remove_dir_all(&copy).expect("remove the copy");
        took
    });
    let started = Instant::now();
    let (status, merged) = daemon
        .post("/api/fork/merge", json!({"branch": branch}))
        .await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{merged}");
    let made = merged["changes"].as_array().map_or(0, Vec::len);
    assert_eq!(made, changed, "{merged}");
    match anchor {
        Some(rsync) => println!(
            "  merge a {changed:>6}-file change     {:>10.1} ms  (rsync -a --delete of the branch over a copy: {:.1} ms, {:.2}×)",
            ms(took),
            ms(rsync),
            ms(took) / ms(rsync)
        ),
        None => println!(
            "  merge a {changed:>6}-file change     {:>10.1} ms",
            ms(took)
        ),
    }
    let (status, body) = daemon
        .post("/api/fork/discard", json!({"path": branch}))
        .await;
    assert_eq!(status, 200, "{body}");
}
