//! `sync` beside `rsync -a --delete` on the same tree in the same run: the first full copy
//! of a 50,000-file tree, then a 10-file change (fsd asks its change token what changed;
//! rsync scans both trees), the median of 5 rounds. Then two-way sync at 20,000 and 50,000
//! files, each pass a new `fsctl sync --two-way` process as agents call it, beside `rsync
//! -a --delete` and `unison -batch` (two local roots) on the same trees in the same rounds:
//! the first sync each way (both sides on one fresh ext4, so that the upload and the
//! download write onto the same filesystem), a pass with nothing changed, with 10 files
//! changed and with 10,000 changed; an idle `--follow`'s CPU (fsctl and fsd) and fsctl's memory; and
//! `--follow`'s latency: a local save until the sandbox holds it, and a sandbox write until
//! the local side does.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench sync`
//! (needs `rsync` and `unison`: `apt-get install rsync unison`). `FSD_BENCH_QUICK=1`: 5,000
//! files.

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
    runtime.block_on(run(dirs, files, quick));
}

fn rsync(from: &Path, to: &Path) -> Option<Duration> {
    rsync_with(from, to, &[])
}

/// `rsync -a --delete MORE FROM/ TO`.
fn rsync_with(from: &Path, to: &Path, more: &[&str]) -> Option<Duration> {
    let started = Instant::now();
    let status = Command::new("rsync")
        .arg("-a")
        .arg("--delete")
        .args(more)
        .arg(format!("{}/", from.display()))
        .arg(to)
        .status()
        .ok()?;
    status.success().then(|| started.elapsed())
}

async fn run(dirs: usize, files: usize, quick: bool) {
    let daemon = Daemon::start();
    let tree = daemon.path("tree");
    make_tree(&tree, dirs, files);
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
    // Two-way sync's sandbox side on a fresh ext4 with a journal, as a container's disk
    // is: this machine's root is an ext4 without one, where a create within a minute of
    // many deletions steps over every inode they freed (up to 10× slower, and the rows
    // after a removal paid for it: a first upload 2.7 s beside rsync's 9.1 s one run, 1.8 s
    // beside 1.3 s the next).
    drop(daemon);
    let disk = SandboxDisk::make(scratch.path());
    let daemon = Daemon::start_with(fsd_tests::Options {
        under: disk.as_ref().map(|disk| disk.mounted.path().to_path_buf()),
        ..Default::default()
    });
    // The local side on the same disk, outside the daemon's workspace: an upload and a
    // download then write onto the same filesystem, so that their ratio measures the
    // sync, not tmpfs beside ext4 (a create and a rename there cost 2.5× tmpfs's).
    let local_side = match &disk {
        Some(disk) => {
            println!(
                "two-way sync's sandbox side: a fresh ext4 with a journal (loop, in memory); \
                 its local side: another directory on it"
            );
            let dir = disk.mounted.path().join("local-side");
            std::fs::create_dir_all(&dir).expect("local side");
            dir
        }
        None => {
            println!(
                "two-way sync's sandbox side: this machine's disk (no loop ext4: needs root and \
                 mkfs.ext4); its local side: memory"
            );
            scratch.path().to_path_buf()
        }
    };
    let sizes: &[usize] = if quick { &[5_000] } else { &[20_000, 50_000] };
    for &total in sizes {
        two_way(&daemon, total, &local_side, disk.as_ref(), &mut summary).await;
    }
    let total = sizes[0];
    let remote = format!("tw{total}");
    let local = local_side.join(format!("{remote}-local"));
    follow_latency(&daemon, &remote, &local, total, &mut summary).await;
    drop(daemon);
    // The watchers the passes left for the pairs hold the local side's disk.
    for pid in fsd_tests::host_processes_with(&local_side.display().to_string()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(disk);
    summary.print();
}

/// An ext4 made fresh (with its journal, mkfs's default; an inode per 4 KiB, as both
/// sides' trees and the anchors' copies are nearly a million files) on a sparse image in
/// memory and mounted through a loop device; unmounted when dropped.
struct SandboxDisk {
    mounted: tempfile::TempDir,
}

impl SandboxDisk {
    fn make(scratch: &Path) -> Option<SandboxDisk> {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let image = scratch.join("sandbox-disk.img");
        std::fs::File::create(&image)
            .and_then(|file| file.set_len(8 << 30))
            .ok()?;
        let made = Command::new("mkfs.ext4")
            .args([
                "-q",
                "-F",
                "-i",
                "4096",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
            ])
            .arg(&image)
            .status()
            .ok()?;
        let mounted = tempfile::tempdir().ok()?;
        let mount = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(mounted.path())
            .status()
            .ok()?;
        (made.success() && mount.success()).then_some(SandboxDisk { mounted })
    }
}

impl Drop for SandboxDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.mounted.path()).status();
    }
}

/// Two-way sync of a tree of `total` files in the sandbox, made the way agents call it (a
/// new `fsctl sync --two-way` process per pass), beside `rsync -a --delete` and `unison
/// -batch` (two local roots) on the same trees in the same rounds; then an idle `--follow`.
async fn two_way(
    daemon: &Daemon,
    total: usize,
    scratch: &Path,
    disk: Option<&SandboxDisk>,
    summary: &mut Summary,
) {
    let name = format!("tw{total}");
    let tree = daemon.path(&name);
    let dirs = total / 100;
    make_tree(&tree, dirs, 100);
    let at = |what: &str| scratch.join(format!("{name}-{what}"));
    let (local, rsynced, unisoned) = (at("local"), at("rsync"), at("unison"));
    let fsctl = |remote: &str, local: &Path| {
        let mut command = fsctl_sync(daemon, remote, local, &[]);
        command.stdout(std::process::Stdio::null());
        command
    };
    let timed = |mut command: Command| {
        let started = Instant::now();
        let status = command.status().expect("run");
        assert!(status.success(), "{command:?}: {status}");
        started.elapsed()
    };
    let unison = |from: &Path, to: &Path| unison(from, to, &scratch.join("unison-state"));
    println!("two-way sync, {total} files in {dirs} directories (each pass a new process)");
    let mut row = |what: &str,
                   fsd: Duration,
                   rsync: Option<Duration>,
                   unison: Option<Duration>,
                   target: &str| {
        let anchor = |name: &str, took: Option<Duration>| match took {
            Some(took) => format!("{name} {:.0} ms", ms(took)),
            None => format!("{name} not installed"),
        };
        println!(
            "  {what:<44} fsd {:>8.1} ms   {}   {}",
            ms(fsd),
            anchor("rsync", rsync),
            anchor("unison", unison)
        );
        let ratio = |took: Option<Duration>| {
            took.map_or("—".into(), |took| Summary::ratio(ms(fsd), ms(took)))
        };
        summary.row(
            &format!("two-way sync, {total} files: {what}"),
            format!("{:.0} ms", ms(fsd)),
            format!(
                "{}; {}",
                anchor("`rsync -a --delete`", rsync),
                anchor("`unison -batch`", unison)
            ),
            format!("{} rsync; {} unison", ratio(rsync), ratio(unison)),
            target,
        );
    };

    // The first sync, sandbox → an empty local directory.
    nix::unistd::sync();
    let fsd = timed(fsctl(&name, &local));
    nix::unistd::sync();
    let (r, u) = (rsync(&tree, &rsynced), unison(&tree, &unisoned));
    row("first sync, sandbox → local", fsd, r, u, "≤ 0.5× rsync");
    let download = fsd;
    // Past the racy window: a file written in the last 2 s is read again by every pass (its
    // stat cannot tell a second write in the same tick), and agents' steps are seconds
    // apart.
    std::thread::sleep(Duration::from_millis(2500));

    // Passes, each a new process: nothing changed; 10 files changed in the sandbox.
    let median = |samples: &mut Vec<Duration>| pct(samples, 50.0);
    let (mut fsd, mut r, mut u) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        fsd.push(timed(fsctl(&name, &local)));
        r.extend(rsync(&tree, &rsynced));
        u.extend(unison(&tree, &unisoned));
    }
    let some = |samples: &mut Vec<Duration>| (!samples.is_empty()).then(|| median(samples));
    row(
        "a pass, nothing changed (median of 5)",
        median(&mut fsd),
        some(&mut r),
        some(&mut u),
        "≤ 0.2× rsync, < unison",
    );
    let (mut fsd, mut r, mut u) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..5 {
        for i in 0..10 {
            let file = tree.join(format!(
                "pkg{}/src/m{}.ts",
                (round * 41 + i * 7) % dirs,
                i + 20
            ));
            std::fs::write(&file, format!("// two-way round {round}\n")).expect("edit");
        }
        fsd.push(timed(fsctl(&name, &local)));
        r.extend(rsync(&tree, &rsynced));
        u.extend(unison(&tree, &unisoned));
    }
    row(
        "a pass, 10 files changed (median of 5)",
        median(&mut fsd),
        some(&mut r),
        some(&mut u),
        "≤ 0.2× rsync, < unison",
    );
    // The watcher the passes left for the pair (its command line names the directory).
    let rss: u64 = fsd_tests::host_processes_with(&format!("{} ", local.display()))
        .into_iter()
        .map(fsd_tests::rss_kib)
        .sum();
    let per_file = rss as f64 * 1024.0 / total as f64;
    println!("  the pair's watcher: {rss} KiB ({per_file:.0} B a file)");
    // 10,000 files changed in the sandbox.
    for i in 0..10_000 {
        let file = tree.join(format!("pkg{}/src/m{}.ts", i % dirs, (i / dirs) % 100));
        std::fs::write(&file, format!("// many {i}\n")).expect("edit");
    }
    let fsd = timed(fsctl(&name, &local));
    let (r, u) = (rsync(&tree, &rsynced), unison(&tree, &unisoned));
    row("a pass, 10,000 files changed", fsd, r, u, "< rsync");

    // The first sync the other way: a local tree → an empty sandbox directory; into a
    // daemon as the image runs it (`--durability atomic`: nothing waits for the disk, and
    // rsync and unison do not either), then into this one (`fsync`, beside `rsync
    // --fsync` too). The image's first: after the flushed rows' 10 s of a flush per file,
    // a create paid for the journal's catching up (an upload measured 1.34 s there, 0.95–
    // 1.0 s in three rounds before them). The trees are removed after both:
    // ext4 creates slowly for a while after many deletions (its allocator steps over the
    // inodes just freed), which took the second row to 2.7 s beside rsync's 9.1 s when
    // the first one's went before it.
    let upload = format!("up{total}");
    let atomic = Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--durability".into(), "atomic".into()],
        under: disk.map(|disk| disk.mounted.path().to_path_buf()),
        ..Default::default()
    });
    let (mut made, mut uploads) = (Vec::new(), Vec::new());
    let mut flushed_anchor = None;
    for (into, how) in [
        (&atomic, "the image's --durability atomic"),
        (daemon, "--durability fsync"),
    ] {
        nix::unistd::sync();
        let mut command = fsctl_sync(into, &upload, &local, &[]);
        command.stdout(std::process::Stdio::null()).env(
            "FSD_SYNC_STATE_DIR",
            scratch.join(format!("sync-state-up-{}", made.len())),
        );
        let fsd = timed(command);
        nix::unistd::sync();
        // Onto the sandbox's disk, as fsd writes.
        let (rsync_up, unison_up) = (
            into.path(&format!("{upload}-rsync")),
            into.path(&format!("{upload}-unison")),
        );
        let (r, u) = (rsync(&local, &rsync_up), unison(&local, &unison_up));
        row(
            &format!("first sync, local → sandbox ({how})"),
            fsd,
            r,
            u,
            "≤ 0.5× rsync",
        );
        println!(
            "  {:<44} {:.2}× the download",
            "  the upload beside the first download",
            ms(fsd) / ms(download)
        );
        uploads.push((how, fsd));
        if into.pid() == daemon.pid() {
            // What fsd's flush buys, rsync gives with --fsync (a flush per file).
            let flushed = into.path(&format!("{upload}-rsync-fsync"));
            nix::unistd::sync();
            let took = rsync_with(&local, &flushed, &["--fsync"]);
            if let Some(took) = took {
                println!(
                    "  {:<44} {:.1} ms (fsd {:.2}×)",
                    "  anchor: rsync -a --delete --fsync",
                    ms(took),
                    ms(fsd) / ms(took)
                );
            }
            flushed_anchor = took.map(|took| (fsd, took));
            made.push(flushed);
        }
        made.extend([into.path(&upload), rsync_up, unison_up]);
    }
    drop(atomic);
    if let Some((fsd, took)) = flushed_anchor {
        summary.row(
            &format!("two-way sync, {total} files: first sync, local → sandbox, flushed"),
            format!("{:.0} ms (`--durability fsync`)", ms(fsd)),
            format!("`rsync -a --delete --fsync` {:.0} ms", ms(took)),
            Summary::ratio(ms(fsd), ms(took)),
            "≤ 0.5× rsync",
        );
    }
    for (how, upload) in uploads {
        summary.row(
            &format!("two-way sync, {total} files: the upload ({how}) beside the download"),
            format!("{:.0} ms", ms(upload)),
            format!("the download {:.0} ms", ms(download)),
            Summary::ratio(ms(upload), ms(download)),
            "≤ 1.2×",
        );
    }
    for dir in made {
        let _ = std::fs::remove_dir_all(dir);
    }

    summary.row(
        &format!("two-way sync, {total} files: the watcher a pass leaves, memory"),
        format!("{} MiB, {per_file:.0} B a file", rss / 1024),
        String::new(),
        String::new(),
        "",
    );
    idle_follow(daemon, &name, &local, total, summary);
    println!();
}

fn unison(from: &Path, to: &Path, state: &Path) -> Option<Duration> {
    let started = Instant::now();
    let status = Command::new("unison")
        .arg(from)
        .arg(to)
        .args(["-batch", "-silent", "-ui", "text"])
        .env("UNISON", state)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    status.success().then(|| started.elapsed())
}

/// `fsctl sync --two-way FOLLOW REMOTE LOCAL` (its state beside `local`), once its first
/// pass is done (it prints what it did).
fn following(daemon: &Daemon, remote: &str, local: &Path, follow: &str) -> std::process::Child {
    use std::io::BufRead;
    let mut command = fsctl_sync(daemon, remote, local, &[follow]);
    command.stdout(std::process::Stdio::piped());
    let mut child = command.spawn().expect("fsctl sync --follow");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    for line in lines.by_ref() {
        if line.expect("line").starts_with("to remote:") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    child
}

/// `fsctl sync --two-way MORE REMOTE LOCAL` against `daemon`, the pairs' state beside
/// `local` (the scratch directory's `sync-state`), stderr dropped.
fn fsctl_sync(daemon: &Daemon, remote: &str, local: &Path, more: &[&str]) -> Command {
    let mut command = Command::new(fsd_tests::binary("fsctl"));
    command
        .args(["--url", &daemon.url, "sync", "--two-way"])
        .args(more)
        .arg(remote)
        .arg(local)
        .env(
            "FSD_SYNC_STATE_DIR",
            local.parent().unwrap_or(local).join("sync-state"),
        )
        .env_remove("FSD_TOKEN")
        .stderr(std::process::Stdio::null());
    if let Some(token) = &daemon.token {
        command.args(["--token", token]);
    }
    command
}

/// The tree both benchmarks sync: `dirs` packages of `files` source-like files each.
fn make_tree(tree: &Path, dirs: usize, files: usize) {
    for d in 0..dirs {
        let dir = tree.join(format!("pkg{d}/src"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..files {
            let body = format!("// file {f} of package {d}\n").repeat(1 + (f % 40));
            std::fs::write(dir.join(format!("m{f}.ts")), body).expect("write");
        }
    }
}

/// CPU time a process has used (user and system).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // The fields after the command's closing parenthesis; utime and stime are the 12th
    // and 13th of them.
    let after = stat.rsplit_once(')').expect("stat").1;
    let fields: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|field| field.parse().expect("ticks"))
        .collect();
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as u64;
    Duration::from_millis((fields[0] + fields[1]) * 1000 / hz)
}

/// `fsctl sync --two-way --follow` settled on a pair with nothing changing: the CPU it and
/// the daemon use over 30 s, and fsctl's memory per file.
fn idle_follow(daemon: &Daemon, remote: &str, local: &Path, total: usize, summary: &mut Summary) {
    let mut child = following(daemon, remote, local, "--follow");
    std::thread::sleep(Duration::from_secs(5));
    // Until the daemon has done with what came before (its watches told of the trees the
    // rows before removed: 200,000 deletions at 50,000 files), so that the window
    // measures the follow at rest, not their tail.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let before = cpu_time(child.id()) + cpu_time(daemon.pid());
        std::thread::sleep(Duration::from_secs(1));
        if cpu_time(child.id()) + cpu_time(daemon.pid()) - before <= Duration::from_millis(10) {
            break;
        }
    }
    let window = Duration::from_secs(30);
    let (fsctl_before, fsd_before) = (cpu_time(child.id()), cpu_time(daemon.pid()));
    std::thread::sleep(window);
    let used = (cpu_time(child.id()) - fsctl_before) + (cpu_time(daemon.pid()) - fsd_before);
    let rss = fsd_tests::status_kib(child.id(), "VmRSS").unwrap_or(0);
    // What grows with the tree: the heap, not the binary's pages (shared, in the page
    // cache, the same at any size).
    let anon = fsd_tests::status_kib(child.id(), "RssAnon").unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    let share = used.as_secs_f64() / window.as_secs_f64() * 100.0;
    let per_file = rss as f64 * 1024.0 / total as f64;
    let anon_per_file = anon as f64 * 1024.0 / total as f64;
    println!(
        "  idle --follow: {share:.2} % of a core (fsctl and fsd), fsctl {rss} KiB ({per_file:.0} B a file; \
         its heap {anon} KiB, {anon_per_file:.0} B a file)"
    );
    summary.row(
        &format!("two-way --follow, idle, {total} files: CPU (fsctl + fsd)"),
        format!("{share:.2} % of a core"),
        "—".into(),
        "—".into(),
        "≤ 0.5 %",
    );
    summary.row(
        &format!("two-way --follow, idle, {total} files: fsctl memory"),
        format!(
            "{} MiB, {per_file:.0} B a file (heap {} MiB, {anon_per_file:.0} B a file)",
            rss / 1024,
            anon / 1024
        ),
        "—".into(),
        "—".into(),
        "≤ 1 KiB a file",
    );
}

/// `fsctl sync --two-way --follow`: a save on one side until the other holds it.
async fn follow_latency(
    daemon: &Daemon,
    remote: &str,
    local: &Path,
    total: usize,
    summary: &mut Summary,
) {
    let tree = &daemon.path(remote);
    let mut child = following(daemon, remote, local, "--follow=600000");
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
