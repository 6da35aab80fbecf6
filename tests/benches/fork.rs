//! Workspace forks on the real daemon: the time of one `POST /api/fork` making 1, 10 and
//! 100 branches of the backup benchmarks' tree at 5,000 and 50,000 files, beside `cp -a`
//! and `cp --reflink=auto` of the same tree in the same run (one copy each: N branches
//! cost N copies that way), the disk a branch takes, and the time of a discard.
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
            for name in &names {
                let path = format!("{}@{name}", tree.display());
                let (status, body) = daemon
                    .post("/api/fork/discard", json!({"path": path}))
                    .await;
                assert_eq!(status, 200, "{body}");
            }
            println!(
                "  discard them, one call each        {:>10.1} ms",
                ms(started.elapsed())
            );
        }
    }
    // The forked trees stay overlays after their branches go: taken down here.
    fsd_tests::unmount_under(&daemon.root());
    fsd_tests::unmount_under(&daemon.state_dir());
}
