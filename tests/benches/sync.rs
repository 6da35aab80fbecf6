//! `sync` beside `rsync -a --delete` on the same tree in the same run: the first full copy
//! of a 50,000-file tree, then a 10-file change (fsd asks its change token what changed;
//! rsync scans both trees), the median of 5 rounds. Then two-way sync (`fsctl sync
//! --two-way`) on the same tree: its first full sync, a pass after a 10-file change (in a
//! sync kept open, as `--follow` keeps it, and in a new one, as a single `fsctl sync
//! --two-way` is), each beside rsync one way in the same round, and `--follow`'s latency:
//! a local save until the sandbox holds it, and a sandbox write until the local side does.
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
    two_way(
        &daemon,
        &tree,
        &rsynced,
        scratch.path(),
        total,
        &mut summary,
    )
    .await;
    summary.print();
}

/// Two-way sync on the same tree (see the module's doc).
async fn two_way(
    daemon: &Daemon,
    tree: &Path,
    rsynced: &Path,
    scratch: &Path,
    total: usize,
    summary: &mut Summary,
) {
    use fsd_sdk::two_way::{LocalWatch, TwoWay, TwoWayOptions};
    let local = scratch.join("two-way");
    let open =
        || TwoWay::open(daemon.sandbox(), &local, "tree", TwoWayOptions::default()).expect("open");
    let mut sync = open();
    nix::unistd::sync();
    let started = Instant::now();
    let report = sync.pass().await.expect("first pass");
    let full = started.elapsed();
    assert_eq!(report.to_local.files, total);
    nix::unistd::sync();
    let anchor_full = {
        let _ = std::fs::remove_dir_all(rsynced);
        rsync(tree, rsynced)
    };
    println!("two-way sync");
    println!(
        "  first full sync (one tar stream, hashed)   {:>7.1} ms",
        ms(full)
    );
    if let Some(anchor) = anchor_full {
        println!(
            "  anchor: rsync -a --delete (local)        {:>9.1} ms",
            ms(anchor)
        );
        summary.row(
            &format!("two-way sync: first sync of {total} files"),
            format!("{:.0} ms", ms(full)),
            format!("`rsync -a --delete` {:.0} ms", ms(anchor)),
            Summary::ratio(ms(full), ms(anchor)),
            "no slower than rsync",
        );
    }
    // A pass after a 10-file change: in the sync kept open, then in a new one.
    let dirs = total / 100;
    let mut round = 0;
    let edit = |round: &mut usize| {
        for i in 0..10 {
            let file = tree.join(format!(
                "pkg{}/src/m{}.ts",
                (*round * 41 + i * 7) % dirs,
                i + 20
            ));
            std::fs::write(&file, format!("// two-way round {round}\n")).expect("edit");
        }
        *round += 1;
    };
    let mut kept = Vec::new();
    let mut fresh = Vec::new();
    let mut anchor = Vec::new();
    // Kept open as `--follow` keeps it: the local side watched, the sandbox's change token
    // kept; its first pass reads both whole.
    let mut watch = fsctl::local_watch::Watched::start(&local, &sync.watch_excludes())
        .expect("watch the local side");
    let changed = watch.take().await;
    sync.pass_changed(changed)
        .await
        .expect("first following pass");
    for _ in 0..5 {
        edit(&mut round);
        let started = Instant::now();
        let changed = watch.take().await;
        let report = sync.pass_changed(changed).await.expect("pass");
        kept.push(started.elapsed());
        assert_eq!(report.to_local.files, 10, "{report:?}");
        if let Some(took) = rsync(tree, rsynced) {
            anchor.push(took);
        }
    }
    drop(sync);
    drop(watch);
    for _ in 0..5 {
        edit(&mut round);
        let started = Instant::now();
        let report = open().pass().await.expect("pass");
        fresh.push(started.elapsed());
        assert_eq!(report.to_local.files, 10, "{report:?}");
        if let Some(took) = rsync(tree, rsynced) {
            anchor.push(took);
        }
    }
    let kept = pct(&mut kept, 50.0);
    let fresh = pct(&mut fresh, 50.0);
    println!(
        "  a 10-file change, kept open (median of 5) {:>7.1} ms",
        ms(kept)
    );
    println!(
        "  a 10-file change, new sync (median of 5)  {:>7.1} ms",
        ms(fresh)
    );
    if !anchor.is_empty() {
        let anchor = pct(&mut anchor, 50.0);
        println!(
            "  anchor: rsync -a --delete (median of 10)  {:>8.1} ms",
            ms(anchor)
        );
        for (what, took) in [("kept open", kept), ("a new sync", fresh)] {
            summary.row(
                &format!("two-way sync: a 10-file change in {total} files, {what}"),
                format!("{:.1} ms", ms(took)),
                format!("`rsync -a --delete` one way {:.0} ms", ms(anchor)),
                Summary::ratio(ms(took), ms(anchor)),
                "≥ 10× faster than rsync",
            );
        }
    }
    follow_latency(daemon, tree, &local, total, summary).await;
    println!();
}

/// `fsctl sync --two-way --follow`: a save on one side until the other holds it.
async fn follow_latency(
    daemon: &Daemon,
    tree: &Path,
    local: &Path,
    total: usize,
    summary: &mut Summary,
) {
    use std::io::BufRead;
    let mut command = Command::new(fsd_tests::binary("fsctl"));
    command
        .args(["--url", &daemon.url])
        .args(["sync", "--two-way", "--follow=600000", "tree"])
        .arg(local)
        .env_remove("FSD_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    if let Some(token) = &daemon.token {
        command.args(["--token", token]);
    }
    let mut child = command.spawn().expect("fsctl sync --follow");
    // Its first pass is done when it prints what it did.
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    for line in lines.by_ref() {
        if line.expect("line").starts_with("to remote:") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let wait_for = |path: &Path, body: &[u8]| {
        let started = Instant::now();
        loop {
            if std::fs::read(path).is_ok_and(|now| now == body) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} never arrived",
                path.display()
            );
            std::thread::sleep(Duration::from_micros(500));
        }
    };
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for i in 0..30 {
        let name = format!("pkg{}/src/m{}.ts", (i * 13) % (total / 100), 60 + i % 20);
        let body = format!("// saved locally, round {i}\n").into_bytes();
        // A save as editors make it: a temp file renamed over the file.
        let temp = local.join(format!("{name}.swp"));
        std::fs::write(&temp, &body).expect("write");
        let started = Instant::now();
        std::fs::rename(&temp, local.join(&name)).expect("save");
        up.push(started.elapsed() + wait_for(&tree.join(&name), &body));
        // Let the pass that follows settle before the other way.
        std::thread::sleep(Duration::from_millis(100));
        let body = format!("// written in the sandbox, round {i}\n").into_bytes();
        let started = Instant::now();
        std::fs::write(tree.join(&name), &body).expect("write");
        down.push(started.elapsed() + wait_for(&local.join(&name), &body));
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    let line = |samples: &mut Vec<Duration>| {
        let p50 = pct(samples, 50.0);
        let p95 = pct(samples, 95.0);
        (format!("p50 {:.0} ms, p95 {:.0} ms", ms(p50), ms(p95)), p95)
    };
    let (up_line, _) = line(&mut up);
    let (down_line, _) = line(&mut down);
    println!("  --follow: a local save visible in the sandbox   {up_line}");
    println!("  --follow: a sandbox write visible locally       {down_line}");
    summary.row(
        &format!("two-way --follow: local save → sandbox, {total} files"),
        up_line,
        "—".into(),
        "—".into(),
        "p95 ≤ 150 ms",
    );
    summary.row(
        &format!("two-way --follow: sandbox write → local, {total} files"),
        down_line,
        "—".into(),
        "—".into(),
        "p95 ≤ 150 ms",
    );
}
