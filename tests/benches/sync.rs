//! `sync` beside `rsync -a --delete` on the same tree in the same run: the first full copy
//! of a 50,000-file tree, then a 10-file change (fsd asks its change token what changed;
//! rsync scans both trees), the median of 5 rounds.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench sync`
//! (needs `rsync`: `apt-get install rsync`). `FSD_BENCH_QUICK=1`: 5,000 files.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use fsd_tests::Daemon;
use fsd_tests::bench::{Summary, ms, pct};

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let (dirs, files) = if quick { (50, 100) } else { (500, 100) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(dirs, files));
}

fn rsync(from: &Path, to: &Path) -> Option<Duration> {
    let started = Instant::now();
    let status = Command::new("rsync")
        .arg("-a")
        .arg("--delete")
        .arg(format!("{}/", from.display()))
        .arg(to)
        .status()
        .ok()?;
    status.success().then(|| started.elapsed())
}

async fn run(dirs: usize, files: usize) {
    let daemon = Daemon::start();
    let tree = daemon.path("tree");
    for d in 0..dirs {
        let dir = tree.join(format!("pkg{d}/src"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..files {
            let body = format!("// file {f} of package {d}\n").repeat(1 + (f % 40));
            std::fs::write(dir.join(format!("m{f}.ts")), body).expect("write");
        }
    }
    let total = dirs * files;
    println!("sync benchmark: {total} files in {dirs} directories (release build, loopback HTTP)");
    println!();
    // The copies go to memory where there is a tmpfs: this disk's writeback stalls (seconds,
    // hitting whichever copy runs when they come) would measure the disk, not the copies.
    let scratch = match std::path::Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").expect("tempdir"),
        false => tempfile::tempdir().expect("tempdir"),
    };
    let mirror = scratch.path().join("mirror");
    let rsynced = scratch.path().join("rsynced");
    let sandbox = daemon.sandbox();

    // Dirty pages written back before each copy, so neither pays for what came before.
    nix::unistd::sync();
    let started = Instant::now();
    let report = sandbox.sync("tree", &mirror, None).await.expect("sync");
    let full = started.elapsed();
    nix::unistd::sync();
    let anchor_full = rsync(&tree, &rsynced);
    println!("first full copy");
    println!(
        "  fsd sync (one archive stream)            {:>9.1} ms",
        ms(full)
    );
    let mut summary = Summary::default();
    match anchor_full {
        Some(anchor) => {
            println!(
                "  anchor: rsync -a --delete (local)        {:>9.1} ms",
                ms(anchor)
            );
            summary.row(
                &format!("sync: first copy of {total} files"),
                format!("{:.0} ms", ms(full)),
                format!("`rsync -a --delete` {:.0} ms", ms(anchor)),
                Summary::ratio(ms(full), ms(anchor)),
                "no slower than rsync",
            );
        }
        None => println!("  anchor: rsync not installed"),
    }
    println!();

    let mut version = report.version;
    let (mut fsd_times, mut anchor_times) = (Vec::new(), Vec::new());
    for round in 0..5 {
        for i in 0..10 {
            let file = tree.join(format!("pkg{}/src/m{}.ts", (round * 37 + i * 13) % dirs, i));
            std::fs::write(&file, format!("// round {round}\n")).expect("edit");
        }
        let started = Instant::now();
        let report = sandbox
            .sync("tree", &mirror, Some(&version))
            .await
            .expect("sync");
        fsd_times.push(started.elapsed());
        assert_eq!(report.mode, "incremental");
        assert_eq!(report.downloaded, 10);
        version = report.version;
        if let Some(anchor) = rsync(&tree, &rsynced) {
            anchor_times.push(anchor);
        }
    }
    let fsd_p50 = pct(&mut fsd_times, 50.0);
    println!("a 10-file change (median of 5)");
    println!(
        "  fsd sync (change token)                  {:>9.1} ms",
        ms(fsd_p50)
    );
    if !anchor_times.is_empty() {
        let anchor_p50 = pct(&mut anchor_times, 50.0);
        println!(
            "  anchor: rsync -a --delete (scans all)    {:>9.1} ms",
            ms(anchor_p50)
        );
        summary.row(
            &format!("sync: a 10-file change in {total} files"),
            format!("{:.1} ms", ms(fsd_p50)),
            format!("`rsync -a --delete` {:.0} ms", ms(anchor_p50)),
            Summary::ratio(ms(fsd_p50), ms(anchor_p50)),
            "≥ 10× faster than rsync",
        );
    }
    println!();
    summary.print();
}
