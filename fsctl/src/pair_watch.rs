//! The watcher a two-way sync leaves for its local directory between single passes
//! (`fsctl sync --two-way` without `--follow`, a new process each time, as agents call it):
//! the next pass asks it what changed since the token the last one journaled, instead of
//! walking the whole tree. It is fsd-watch's engine, the one `--follow` and the daemon run,
//! behind a unix socket in the pair's state; watchman and mutagen keep such a watcher too.
//!
//! Its token is `EPOCH:SEQ`: the epoch is this process's (a token of another, or one from
//! before changes were lost, is answered "not known", and the pass walks); SEQ moves only
//! when something changed, so a pass that found nothing journals nothing. It ends when its
//! directory or its socket goes, or after [`IDLE`] without a question.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use fsd_sdk::two_way::{LocalSince, TwoWay};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// A watcher asked nothing this long ends (the next pass walks and leaves a new one).
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// Changed paths kept beyond this many are forgotten: a pass since then reads whole.
const MOST_PATHS: usize = 20_000;
/// How long a pass waits for a watcher that is starting to answer, and for an answer.
const READY_WITHIN: Duration = Duration::from_secs(2);
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// How often the watcher checks that its directory and socket are still its own.
const CHECK_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Args)]
pub struct WatcherArgs {
    /// The local directory watched.
    local: PathBuf,
    /// Where it answers.
    #[arg(long)]
    socket: PathBuf,
    /// fsd-watch's globs left out (repeatable).
    #[arg(long)]
    exclude: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Question {
    since: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct Answer {
    token: String,
    paths: Option<Vec<String>>,
}

/// What the watcher has been told: each changed path with the sequence number of the
/// first token that covers it.
struct Told {
    epoch: String,
    /// The last token's number.
    seq: u64,
    /// Tokens below this do not know what changed since (changes were lost after them).
    floor: u64,
    changed: HashMap<PathBuf, u64>,
    /// Whether anything was told since the last token.
    fresh: bool,
    /// Whether changes were forgotten since the heap was last given back.
    lost: bool,
}

impl Told {
    fn keep(&mut self, event: fsd_watch::Event) {
        self.fresh = true;
        if event.kind == fsd_watch::EventKind::Overflow || self.changed.len() >= MOST_PATHS {
            self.lose();
            return;
        }
        let next = self.seq + 1;
        self.changed.insert(event.path, next);
        if let Some(from) = event.from {
            self.changed.insert(from, next);
        }
    }

    /// Everything told so far is forgotten: only tokens from now on know what changed.
    fn lose(&mut self) {
        // Its room too: a burst (a first sync's whole tree) is not kept for the idle hours.
        self.changed = HashMap::new();
        self.floor = self.seq + 1;
        self.lost = true;
    }

    fn answer(&mut self, since: Option<&str>) -> Answer {
        if std::mem::take(&mut self.fresh) {
            self.seq += 1;
        }
        let since = since
            .and_then(|token| token.split_once(':'))
            .filter(|(epoch, _)| *epoch == self.epoch)
            .and_then(|(_, seq)| seq.parse::<u64>().ok())
            .filter(|seq| *seq >= self.floor && *seq <= self.seq);
        let paths = since.map(|since| {
            self.changed
                .iter()
                .filter(|(_, seq)| **seq > since)
                .map(|(path, _)| told_path(path))
                .collect()
        });
        Answer {
            token: format!("{}:{}", self.epoch, self.seq),
            paths,
        }
    }
}

/// A path as text; a name that is not UTF-8 is told as the nearest directory above it
/// that is (read again whole).
fn told_path(path: &Path) -> String {
    let mut path = path;
    loop {
        if let Some(text) = path.to_str() {
            return text.to_string();
        }
        match path.parent() {
            Some(parent) => path = parent,
            None => return "/".into(),
        }
    }
}

/// `fsctl sync-watcher`: runs until its directory or socket goes, or [`IDLE`] passes
/// without a question.
pub async fn serve(args: WatcherArgs) -> ExitCode {
    // No one reads its output: a watcher that cannot start leaves the passes walking.
    match watch_and_answer(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

async fn watch_and_answer(args: &WatcherArgs) -> std::io::Result<()> {
    // Held for life: one watcher per socket, and a pass that finds it held knows one is
    // starting.
    let life = open_life_lock(&args.socket)?;
    if life.try_lock().is_err() {
        return Ok(());
    }
    let filter = fsd_watch::Filter::new(&[], &args.exclude).map_err(std::io::Error::other)?;
    // Asked once a pass, not followed: what the passes write is reconciled when the next
    // asks, not while they write (each reconciliation reads the directory written in).
    let engine = if cfg!(target_os = "linux") {
        fsd_watch::EngineKind::InotifyWhenAsked
    } else {
        fsd_watch::EngineKind::default()
    };
    let (watcher, mut events) = fsd_watch::Watcher::start_with(engine, &args.local, filter, true)
        .map_err(std::io::Error::other)?;
    let root = watcher.root().to_path_buf();
    let root_object = watcher.root_object();
    // In place only once the watch is: a pass that reaches it is told every change after.
    let temp = args
        .socket
        .with_extension(format!("{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let listener = {
        let (_dir, reachable) = reachable(&temp)?;
        UnixListener::bind(reachable)?
    };
    std::fs::rename(&temp, &args.socket)?;
    let socket_ino = std::fs::metadata(&args.socket)?.ino();
    let epoch = format!(
        "{:x}{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
        std::process::id()
    );
    let mut told = Told {
        epoch,
        seq: 0,
        floor: 0,
        changed: HashMap::new(),
        fresh: false,
        lost: false,
    };
    let still_ours = || {
        let root_here =
            std::fs::metadata(&root).is_ok_and(|meta| (meta.dev(), meta.ino()) == root_object);
        let socket_here =
            std::fs::metadata(&args.socket).is_ok_and(|meta| meta.ino() == socket_ino);
        (root_here, socket_here)
    };
    let mut idle_until = tokio::time::Instant::now() + IDLE;
    let mut check = tokio::time::interval(CHECK_EVERY);
    loop {
        tokio::select! {
            event = events.recv() => match event {
                // The root itself gone: nothing left to watch.
                Some(event) if event.path == root && event.kind == fsd_watch::EventKind::Delete => break,
                Some(event) => told.keep(event),
                None => break,
            },
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                idle_until = tokio::time::Instant::now() + IDLE;
                // The directory replaced since the last check: this watch is of another.
                let root_here = still_ours().0;
                if !root_here {
                    told.lose();
                }
                let caught_up = watcher.caught_up();
                let answered = tokio::time::timeout(ANSWER_WITHIN, async {
                    let (read, mut write) = stream.into_split();
                    let mut line = String::new();
                    BufReader::new(read).read_line(&mut line).await?;
                    let question: Question = serde_json::from_str(&line)?;
                    // Every change made before the question is in the channel.
                    caught_up.await;
                    while let Ok(event) = events.try_recv() {
                        told.keep(event);
                    }
                    let mut answer = serde_json::to_vec(&told.answer(question.since.as_deref()))?;
                    answer.push(b'\n');
                    write.write_all(&answer).await?;
                    std::io::Result::Ok(())
                })
                .await;
                // A question cut short or malformed is the asker's: it walks.
                drop(answered);
                if std::mem::take(&mut told.lost) {
                    release_free_memory();
                }
                if !root_here {
                    break;
                }
            }
            _ = tokio::time::sleep_until(idle_until) => break,
            _ = check.tick() => {
                let (root_here, socket_here) = still_ours();
                if !root_here || !socket_here {
                    break;
                }
            }
        }
    }
    // The socket goes with this process, unless another watcher's took its place.
    if still_ours().1 {
        let _ = std::fs::remove_file(&args.socket);
    }
    Ok(())
}

/// The pass's side: asks the pair's watcher, and starts one after a pass none answered.
pub struct PairWatcher {
    socket: PathBuf,
    local: PathBuf,
    exclude: Vec<String>,
    /// The program run as the watcher (`fsctl`).
    program: PathBuf,
    /// No watcher was running when asked: one is started once the pass is over.
    missing: bool,
}

impl PairWatcher {
    /// The watcher of `sync`'s local directory, answering where the pair's state says,
    /// run as `program sync-watcher`.
    pub fn new(sync: &TwoWay, program: PathBuf) -> Self {
        let socket = sync.watcher_socket();
        Self {
            // Absolute: the watcher runs from `/`.
            socket: std::path::absolute(&socket).unwrap_or(socket),
            local: sync.local().to_path_buf(),
            exclude: sync.watch_excludes(),
            program,
            missing: false,
        }
    }

    /// The socket it answers on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    async fn ask(&self, since: Option<&str>) -> std::io::Result<Answer> {
        let stream = {
            let (_dir, reachable) = reachable(&self.socket)?;
            UnixStream::connect(reachable).await?
        };
        tokio::time::timeout(ANSWER_WITHIN, async {
            let (read, mut write) = stream.into_split();
            let mut question = serde_json::to_vec(&Question {
                since: since.map(str::to_string),
            })?;
            question.push(b'\n');
            write.write_all(&question).await?;
            let mut line = String::new();
            BufReader::new(read).read_line(&mut line).await?;
            Ok(serde_json::from_str(&line)?)
        })
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
    }

    /// Whether a watcher holds its life lock (running, or still starting).
    fn alive(&self) -> bool {
        open_life_lock(&self.socket).is_ok_and(|lock| lock.try_lock().is_err())
    }

    /// Starts a watcher, detached (its own process group: a Ctrl-C of the pass is not
    /// its), not waited for: it outlives this process.
    fn start(&self) -> std::io::Result<()> {
        let mut command = std::process::Command::new(&self.program);
        command
            .arg("sync-watcher")
            .arg("--socket")
            .arg(&self.socket);
        for glob in &self.exclude {
            command.arg(format!("--exclude={glob}"));
        }
        command
            .arg(&self.local)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Holding no directory it was started from (one a user may unmount).
            .current_dir("/")
            .process_group(0);
        command.spawn().map(drop)
    }
}

impl LocalSince for PairWatcher {
    fn since<'a>(
        &'a mut self,
        since: Option<&'a str>,
    ) -> BoxFuture<'a, Option<(String, Option<Vec<PathBuf>>)>> {
        Box::pin(async move {
            let mut answer = self.ask(since).await;
            // One a pass left moments ago may still be reading the tree: it answers soon.
            let deadline = tokio::time::Instant::now() + READY_WITHIN;
            while answer.is_err() && self.alive() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
                answer = self.ask(since).await;
            }
            match answer {
                Ok(answer) => {
                    let paths = answer
                        .paths
                        .map(|paths| paths.into_iter().map(PathBuf::from).collect());
                    Some((answer.token, paths))
                }
                // None runs: the pass walks, and leaves one.
                Err(_) => {
                    self.missing = !self.alive();
                    None
                }
            }
        })
    }

    fn passed(&mut self) {
        // Started after the pass, so that its first read of the tree does not compete
        // with the pass's (a first sync writes the whole tree the watcher would be told).
        if std::mem::take(&mut self.missing) {
            let _ = self.start();
        }
    }
}

/// Returns freed heap pages to the system (glibc keeps them otherwise): after a burst of
/// events, an idle watcher or follow holds only what it keeps.
pub fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

/// The lock a watcher holds while it runs, beside its socket (made if missing).
fn open_life_lock(socket: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(socket.with_extension("lock"))
}

/// A path by which `socket` can be bound or reached: itself, or, when it is longer than a
/// socket address holds (108 bytes), the same name through its directory's descriptor
/// (`/proc/self/fd/N/NAME`), kept open while the path is used.
fn reachable(socket: &Path) -> std::io::Result<(Option<std::fs::File>, PathBuf)> {
    use std::os::fd::AsRawFd;
    if socket.as_os_str().len() < 100 {
        return Ok((None, socket.to_path_buf()));
    }
    let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
        return Ok((None, socket.to_path_buf()));
    };
    let dir = std::fs::File::open(dir)?;
    let path = Path::new("/proc/self/fd")
        .join(dir.as_raw_fd().to_string())
        .join(name);
    Ok((Some(dir), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told() -> Told {
        Told {
            epoch: "e".into(),
            seq: 0,
            floor: 0,
            changed: HashMap::new(),
            fresh: false,
            lost: false,
        }
    }

    fn event(path: &str) -> fsd_watch::Event {
        fsd_watch::Event {
            kind: fsd_watch::EventKind::Modify,
            path: PathBuf::from(path),
            from: None,
            is_dir: false,
        }
    }

    #[test]
    fn a_token_names_what_changed_after_it_and_moves_only_when_something_did() {
        let mut told = told();
        let first = told.answer(None);
        assert_eq!(first.paths, None, "no token given: not known");
        assert_eq!(
            told.answer(Some(&first.token)).token,
            first.token,
            "nothing changed"
        );
        told.keep(event("/l/a"));
        let second = told.answer(Some(&first.token));
        assert_eq!(second.paths, Some(vec!["/l/a".to_string()]));
        assert_ne!(second.token, first.token);
        told.keep(event("/l/b"));
        let third = told.answer(Some(&second.token));
        assert_eq!(third.paths, Some(vec!["/l/b".to_string()]));
        // An older token still names everything since it.
        let mut again = told.answer(Some(&first.token)).paths.unwrap();
        again.sort();
        assert_eq!(again, ["/l/a", "/l/b"]);
    }

    #[test]
    fn a_socket_deeper_than_an_address_holds_is_bound_and_reached() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("watch.sock");
        assert!(socket.as_os_str().len() > 108);
        let (_held, bound) = reachable(&socket).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&bound).unwrap();
        assert!(socket.exists(), "made where it was asked");
        let (_held, reached) = reachable(&socket).unwrap();
        std::os::unix::net::UnixStream::connect(&reached).unwrap();
        listener.accept().unwrap();
    }

    #[test]
    fn tokens_of_another_watcher_or_from_before_a_loss_are_not_known() {
        let mut told = told();
        let first = told.answer(None);
        assert_eq!(told.answer(Some("other:0")).paths, None);
        assert_eq!(
            told.answer(Some("e:99")).paths,
            None,
            "a token not given yet"
        );
        told.keep(fsd_watch::Event {
            kind: fsd_watch::EventKind::Overflow,
            ..event("/l")
        });
        let after = told.answer(Some(&first.token));
        assert_eq!(after.paths, None, "changes were lost after it");
        told.keep(event("/l/c"));
        assert_eq!(
            told.answer(Some(&after.token)).paths,
            Some(vec!["/l/c".to_string()])
        );
    }
}
