//! Black-box test harness: starts the real `fsd` binary on an ephemeral loopback port over a
//! fresh temporary workspace, and talks to it over HTTP.
//!
//! The binaries must be built first (`cargo build --workspace`); `FSD_BIN` and `FSCTL_BIN`
//! override where they are looked for.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub mod archives;
pub mod bench;
pub mod cloudflare;
pub mod docker_api;
pub mod http_head;
pub mod node;
pub mod rpc;
pub mod s3;
pub mod split_writes;
pub mod sse;
pub mod ws;

use reqwest::StatusCode;
use serde_json::Value;

/// Path of a workspace binary (`fsd`, `fsctl`) beside the test executable's target dir.
pub fn binary(name: &str) -> PathBuf {
    let var = format!("{}_BIN", name.to_uppercase());
    if let Ok(path) = std::env::var(&var) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile dir");
    let path = profile_dir.join(name);
    assert!(
        path.exists(),
        "{} not found: run `cargo build --workspace` first (or set {var})",
        path.display()
    );
    path
}

/// A running daemon; killed when dropped.
pub struct Daemon {
    child: Child,
    pub url: String,
    pub token: Option<String>,
    options: Options,
    workspace: tempfile::TempDir,
    state: tempfile::TempDir,
    http: reqwest::Client,
    /// Every pid the daemon has had (it gets a new one when resumed): what they wrote in
    /// /var/backups goes when it is dropped.
    pids: Vec<u32>,
    /// Whether the test ended the running daemon itself (`crash`, `terminate`).
    ended_by_test: bool,
}

/// Options for [`Daemon::start_with`].
#[derive(Default, Clone)]
pub struct Options {
    pub token: Option<String>,
    pub confine: bool,
    pub allow_roots: Vec<PathBuf>,
    /// The address to serve on (default `127.0.0.1:0`, an ephemeral port).
    pub listen: Option<String>,
    /// More `fsd serve` flags.
    pub extra_args: Vec<String>,
    /// More environment variables for the daemon.
    pub env: Vec<(String, String)>,
    /// Where the workspace and state directories are made (default: the temp directory).
    pub under: Option<PathBuf>,
    /// The `fsd` binary to run (default: [`binary`]`("fsd")`): a bench's build before,
    /// beside this one.
    pub fsd: Option<PathBuf>,
}

impl Daemon {
    pub fn start() -> Self {
        Self::start_with(Options::default())
    }

    pub fn start_with(options: Options) -> Self {
        archives::watch();
        let made = |what: &str| {
            match &options.under {
                Some(under) => tempfile::tempdir_in(under),
                None => tempfile::tempdir(),
            }
            .unwrap_or_else(|err| panic!("temp {what}: {err}"))
        };
        let (workspace, state) = (made("workspace"), made("state dir"));
        let (child, url) = spawn(&options, workspace.path(), state.path());
        Self {
            pids: vec![child.id()],
            child,
            url,
            token: options.token.clone(),
            options,
            workspace,
            state,
            http: reqwest::Client::new(),
            ended_by_test: false,
        }
    }

    /// Stops the daemon with SIGTERM and starts it again over the same workspace and state
    /// directory (on a new port).
    pub fn restart(&mut self) {
        self.stop();
        self.resume();
    }

    /// Stops the daemon with SIGTERM (it must exit 0); `resume` starts it again.
    pub fn stop(&mut self) {
        let status = self.terminate();
        assert!(status.success(), "fsd exited with {status:?} on SIGTERM");
    }

    /// Starts the daemon again over the same workspace and state directory (new port).
    pub fn resume(&mut self) {
        let (child, url) = spawn(&self.options, self.workspace.path(), self.state.path());
        self.pids.push(child.id());
        self.child = child;
        self.url = url;
        self.ended_by_test = false;
    }

    /// A typed client for this daemon (with its token).
    pub fn sandbox(&self) -> fsd_sdk::Sandbox {
        fsd_sdk::Sandbox::connect(&self.url, self.token.as_deref()).expect("client")
    }

    /// A typed client over the transport the run asks for: HTTP, or the WebSocket
    /// transport when `FSD_SDK_TRANSPORT=websocket` (CI runs the SDK tests both ways).
    pub async fn client(&self) -> fsd_sdk::Sandbox {
        if std::env::var("FSD_SDK_TRANSPORT").as_deref() == Ok("websocket") {
            let sandbox = fsd_sdk::Sandbox::connect_websocket(&self.url, self.token.as_deref())
                .await
                .expect("a WebSocket client");
            assert!(sandbox.uses_websocket());
            sandbox
        } else {
            self.sandbox()
        }
    }

    /// The workspace root, canonical.
    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.workspace.path()).expect("canonical workspace")
    }

    /// The daemon's state directory (`--state-dir`).
    pub fn state_dir(&self) -> PathBuf {
        self.state.path().to_path_buf()
    }

    /// A path inside the workspace.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root().join(relative)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The host pid of the living process that commands of this daemon know as `pid`:
    /// searched among the daemon's descendants by the last `NSpid` entry.
    pub fn host_pid_of(&self, pid: u32) -> Option<u32> {
        let mut tree = vec![self.pid()];
        let mut index = 0;
        while index < tree.len() {
            let parent = tree[index];
            index += 1;
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                let children = std::fs::read_to_string(task.path().join("children"));
                tree.extend(
                    children
                        .unwrap_or_default()
                        .split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
        tree.into_iter().skip(1).find(|&host| {
            let status =
                std::fs::read_to_string(format!("/proc/{host}/status")).unwrap_or_default();
            status
                .lines()
                .find(|line| line.starts_with("NSpid:"))
                .and_then(|line| line.split_whitespace().last())
                .is_some_and(|inner| inner == pid.to_string())
                && host_alive(host)
        })
    }

    pub fn url(&self, route: &str) -> String {
        format!("{}{route}", self.url)
    }

    /// A request builder with the token attached, if any.
    pub fn request(&self, method: reqwest::Method, route: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, self.url(route));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// POSTs JSON and returns status and parsed body.
    pub async fn post(&self, route: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .request(reqwest::Method::POST, route)
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = response.status();
        let text = response.text().await.expect("body");
        let json = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        (status, json)
    }

    /// POSTs JSON that must succeed (200, else the answer is the panic's), and returns the
    /// parsed body.
    pub async fn posted(&self, route: &str, body: Value) -> Value {
        let (status, answer) = self.post(route, body).await;
        assert_eq!(status, StatusCode::OK, "{route}: {answer}");
        answer
    }

    /// POSTs JSON and returns the body as text, whatever it is (an SSE stream read to its
    /// end, say).
    pub async fn post_text(&self, route: &str, body: &Value) -> String {
        body_text(self.request(reqwest::Method::POST, route).json(body)).await
    }

    /// GETs and returns the body as text, whatever it is.
    pub async fn get_text(&self, route: &str) -> String {
        body_text(self.request(reqwest::Method::GET, route)).await
    }

    pub async fn get(&self, route: &str) -> (StatusCode, Value) {
        self.bodiless(reqwest::Method::GET, route).await
    }

    /// DELETEs and returns status and parsed body.
    pub async fn delete(&self, route: &str) -> (StatusCode, Value) {
        self.bodiless(reqwest::Method::DELETE, route).await
    }

    /// A request without a body, answered with JSON.
    async fn bodiless(&self, method: reqwest::Method, route: &str) -> (StatusCode, Value) {
        let response = self.request(method, route).send().await.expect("request");
        let status = response.status();
        let json = response.json().await.expect("JSON body");
        (status, json)
    }

    /// SIGKILLs the daemon (a crash) and waits for it; `resume` starts it again.
    pub fn crash(&mut self) {
        self.ended_by_test = true;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.ended_by_test = true;
        term_unless_waited(&mut self.child);
        self.child.wait().expect("wait for fsd")
    }
}

impl Drop for Daemon {
    /// SIGTERM first, so the daemon releases what it mounted; SIGKILL after 5 s. Then what
    /// it wrote in /var/backups goes.
    fn drop(&mut self) {
        // A daemon that ended before the test let it go is what a test's "connection
        // refused" means: say how it ended (a signal names who to look for).
        if !self.ended_by_test
            && let Ok(Some(status)) = self.child.try_wait()
        {
            eprintln!(
                "fsd (pid {}) ended before its test let it go: {status}",
                self.child.id()
            );
        }
        stop_child(&mut self.child);
        for pid in &self.pids {
            archives::remove_written_by(*pid);
        }
    }
}

/// Sends SIGTERM to `child` unless it was already waited for (stopped, crashed, waited
/// through another handle): its pid may be another test's process by now. Answers whether
/// it was sent.
pub fn term_unless_waited(child: &mut Child) -> bool {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return false;
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_ok()
}

/// Ends a child a test started: SIGTERM first (a daemon releases what it mounted), SIGKILL
/// after 5 s; one already waited for is left alone.
pub fn stop_child(child: &mut Child) {
    if !term_unless_waited(child) {
        return;
    }
    for _ in 0..100 {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts `fsd serve` and returns it with its URL: on `options.listen`, else on a free
/// port below the kernel's ephemeral range. Not port 0: podman publishes the Cloudflare
/// tests' containers on ports the kernel picks from that range, and netavark redirects
/// 127.0.0.1 at such a port to the container, so a daemon handed the same port by the
/// kernel was unreachable ("connection refused" from a daemon that was running).
fn spawn(options: &Options, workspace: &Path, state: &Path) -> (Child, String) {
    if let Some(listen) = &options.listen {
        return spawn_on(options, workspace, state, listen).unwrap_or_else(|line| {
            panic!("unexpected first line from fsd: {line:?}");
        });
    }
    for _ in 0..50 {
        // A port another test took first makes fsd exit before it prints its line.
        let listen = format!("127.0.0.1:{}", below_ephemeral());
        if let Ok(started) = spawn_on(options, workspace, state, &listen) {
            return started;
        }
    }
    panic!("fsd found no free port below the ephemeral range in 50 tries");
}

/// A random port in 20000–32767, below Linux's default ephemeral range (32768–60999).
fn below_ephemeral() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    20_000 + (random % 12_768) as u16
}

/// `fsd serve` on `listen`; its first line when it is not the listen line (it could not
/// serve there).
fn spawn_on(
    options: &Options,
    workspace: &Path,
    state: &Path,
    listen: &str,
) -> Result<(Child, String), String> {
    let mut command = Command::new(options.fsd.clone().unwrap_or_else(|| binary("fsd")));
    command
        .args([
            "serve",
            "--listen",
            listen,
            "--log-level",
            // FSD_TEST_LOG (a tracing filter) makes the daemons of a test run talk more.
            &std::env::var("FSD_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            "--workspace",
        ])
        .arg(workspace)
        .arg("--state-dir")
        .arg(state)
        .env_remove("FSD_TOKEN")
        // No warm code-context executors unless a test asks (`--interpreter-pool N`): a
        // suite starts hundreds of daemons, and each pool is a Python and a Node process.
        .env("FSD_INTERPRETER_POOL", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(token) = &options.token {
        command.args(["--token", token]);
    }
    if options.confine {
        command.arg("--confine");
    }
    for root in &options.allow_roots {
        command.arg("--allow-root").arg(root);
    }
    command.args(&options.extra_args);
    command.envs(options.env.iter().map(|(k, v)| (k, v)));
    let mut child = command.spawn().expect("spawn fsd");
    let line = first_line(&mut child, "fsd");
    match line.strip_prefix(LISTEN_LINE) {
        Some(url) => Ok((child, url.to_string())),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(line)
        }
    }
}

/// The repository's root (scripts, deploy files, the image's build context).
pub fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// `scripts/podman ARGS` (podman as it works on the project's machines), run to its end.
pub fn podman(args: &[&str]) -> std::process::Output {
    Command::new(repo_root().join("scripts/podman"))
        .args(args)
        .output()
        .expect("scripts/podman")
}

/// Removes an archive the daemon wrote in /var/backups and what it keeps beside it (the
/// index, the checksum): a test leaves nothing of its own there.
pub fn remove_archive(archive: impl AsRef<Path>) {
    let archive = archive.as_ref();
    for suffix in ["", ".index", ".sha256"] {
        let mut path = archive.as_os_str().to_owned();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }
}

/// Whether `program` is on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).exists()))
}

/// Sends a request and returns its body as text.
pub async fn body_text(request: reqwest::RequestBuilder) -> String {
    let response = request.send().await.expect("request");
    response.text().await.expect("body")
}

/// Sends a request and returns its status and JSON body.
pub async fn reply(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("request");
    let status = response.status();
    let text = response.text().await.expect("body");
    let json =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, json)
}

/// What fsd prints first once it serves, before its URL.
const LISTEN_LINE: &str = "fsd listening on ";

/// Reads `fsd listening on <url>` from the child's stdout (10 s budget).
pub fn read_listen_line(child: &mut Child) -> String {
    let line = first_line(child, "fsd");
    line.strip_prefix(LISTEN_LINE)
        .unwrap_or_else(|| panic!("unexpected first line from fsd: {line:?}"))
        .to_string()
}

/// The first line `what` (a child started with piped stdout) prints, trimmed, within
/// 10 s. The rest of its stdout is drained, so the child never blocks on a full pipe.
pub fn first_line(child: &mut Child, what: &str) -> String {
    let stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = sender.send(line);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    receiver
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what} printed no line within 10 s"))
        .trim()
        .to_string()
}

/// The stdout of a command that must have succeeded (its stderr in the failure).
pub fn succeeded(output: &std::process::Output) -> String {
    assert!(
        output.status.success(),
        "the command failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8 stdout")
}

/// What a child printed and how it ended, once it has ended within `deadline` (a guard
/// against a hang, not a measure); `None`, the child killed, when it had not.
pub fn wait_output(
    mut child: std::process::Child,
    deadline: std::time::Duration,
) -> Option<std::process::Output> {
    use std::io::Read;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let until = std::time::Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Some(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Asserts an error envelope: status, code, and (if given) the validation field.
pub fn assert_error(status: StatusCode, body: &Value, expected_status: u16, code: &str) {
    assert_eq!(status.as_u16(), expected_status, "status for {body}");
    assert_eq!(body["code"], code, "code in {body}");
    assert_eq!(body["httpStatus"], expected_status, "httpStatus in {body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "message in {body}"
    );
    assert!(body["timestamp"].as_str().is_some(), "timestamp in {body}");
    assert!(body["context"].is_object(), "context in {body}");
    assert!(
        body.get("success").is_none(),
        "error bodies carry no success field: {body}"
    );
}

/// Asserts a 400 VALIDATION_FAILED naming `field`.
pub fn assert_validation(status: StatusCode, body: &Value, field: &str) {
    assert_error(status, body, 400, "VALIDATION_FAILED");
    let fields: Vec<&str> = body["context"]["validationErrors"]
        .as_array()
        .unwrap_or_else(|| panic!("validationErrors in {body}"))
        .iter()
        .filter_map(|issue| issue["field"].as_str())
        .collect();
    assert!(
        fields.contains(&field),
        "expected field {field:?} in {body}"
    );
}

/// Where a seeded simulation's new seeds start: from the day (UTC), so a run's seeds are
/// known from its date and run again whole (`FSD_SEED_DAY`, days since 1970, names another
/// day's), where a CI log that keeps only the head and tail of a failure's output may not
/// keep its replay line. `what` names the simulation, so each has its own.
pub fn seed_base(what: &str) -> u64 {
    let day = fsd_api::seeds::day();
    eprintln!("{what}: new seeds of day {day} (FSD_SEED_DAY={day} runs them again)");
    // splitmix64 of the day and the name.
    let mut z = what
        .bytes()
        .fold(day, |hash, byte| hash.rotate_left(5) ^ u64::from(byte))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hex sha256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

/// A `… kB` field of `/proc/<pid>/status` (`VmRSS`, `RssAnon`, …), in KiB; `None` when the
/// process or the field is not there.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
}

/// `VmHWM` (peak resident set) of a process, in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM").expect("VmHWM")
}

/// `len` incompressible bytes (xorshift64), the same for the same `seed`.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2).wrapping_add(1);
    let mut out = vec![0u8; len];
    for chunk in out.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    out
}

/// Extracts a squashfs `archive` into `dest` with `unsquashfs` (squashfs-tools), which
/// must succeed.
pub fn unsquashfs(archive: &str, dest: &Path) {
    let status = Command::new("unsquashfs")
        .args(["-q", "-d"])
        .arg(dest)
        .arg(archive)
        .status()
        .expect("unsquashfs (squashfs-tools)");
    assert!(status.success(), "unsquashfs {archive}");
}

/// Whether this process may mount filesystems. Tests that need it call this and return early
/// when it is false, printing why; under `CI=true` they fail instead of skipping.
pub fn require_mount_privilege(test: &str) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_sys_admin = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|caps| u64::from_str_radix(caps.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0);
    available_or_skip(cap_sys_admin, test, "CAP_SYS_ADMIN to mount (run as root)")
}

/// Whether a test's precondition holds. When it does not, the test should return: outside
/// CI it skips with a printed reason; under `CI=true` skipping is refused and this panics.
pub fn available_or_skip(available: bool, test: &str, need: &str) -> bool {
    if available {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: needs {need}, and CI=true forbids skipping"
    );
    eprintln!("skipping {test}: needs {need}");
    false
}

/// Threads that keep `count` cores busy until this is dropped: races that a quiet machine
/// hides (a follower late by a tick, a reader behind its writer) show beside them.
pub struct BusyCores {
    busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyCores {
    pub fn start(count: usize) -> BusyCores {
        let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let threads = (0..count)
            .map(|_| {
                let busy = busy.clone();
                std::thread::spawn(move || {
                    let mut spin = 0u64;
                    while busy.load(std::sync::atomic::Ordering::Relaxed) {
                        spin = std::hint::black_box(spin.wrapping_mul(31).wrapping_add(7));
                    }
                })
            })
            .collect();
        BusyCores { busy, threads }
    }
}

impl Drop for BusyCores {
    fn drop(&mut self) {
        self.busy.store(false, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Whether this process runs as uid 0.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// A mount that is unmounted when dropped.
pub struct Mount(PathBuf);

impl Mount {
    /// `mount -t tmpfs -o <options> tmpfs <dir>` (creating `dir`).
    pub fn tmpfs(dir: &Path, options: &str) -> Self {
        std::fs::create_dir_all(dir).expect("mountpoint");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount");
        assert!(
            status.success(),
            "mount tmpfs {options} on {}",
            dir.display()
        );
        Self(dir.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Host pids of living processes (zombies left out) whose command line contains `marker`,
/// seen from the host, outside any sandbox.
pub fn host_processes_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(marker) && host_alive(*pid)
        })
        .collect()
}

/// Whether a host pid is a living process (a zombie is not).
pub fn host_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Waits up to `limit` for no living host process to carry `marker`; returns what is left.
pub async fn host_processes_gone(marker: &str, limit: Duration) -> Vec<u32> {
    let started = std::time::Instant::now();
    loop {
        let left = host_processes_with(marker);
        if left.is_empty() || started.elapsed() >= limit {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits up to 5 s for a living host process with an argument that starts `marker` (the
/// marked program or script itself, not a shell whose `-c` script names it, which runs
/// before the program has set up); returns how many do.
pub async fn host_processes_started(marker: &str) -> usize {
    for _ in 0..250 {
        let found = host_processes_with(marker)
            .into_iter()
            .filter(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let args: Vec<String> = String::from_utf8_lossy(&cmdline)
                    .split('\0')
                    .map(str::to_string)
                    .collect();
                (0..args.len()).any(|first| args[first..].join(" ").starts_with(marker))
            })
            .count();
        if found > 0 {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    0
}

/// The resident memory of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS").unwrap_or(0)
}

/// Waits until something listens at `address` (a server a test started); panics, naming
/// `what`, after 10 s.
pub async fn wait_until_listening(address: std::net::SocketAddr, what: &str) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(address).is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{what} never listened on {address}");
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .expect("its address")
        .port()
}

/// Runs `fsctl` against `daemon` (its URL and token) with `args`.
pub fn fsctl(daemon: &Daemon, args: &[&str]) -> std::process::Output {
    let mut command = std::process::Command::new(binary("fsctl"));
    command
        .args(["--url", &daemon.url])
        .args(args)
        .env_remove("FSD_TOKEN");
    if let Some(token) = &daemon.token {
        command.args(["--token", token]);
    }
    command.output().unwrap()
}

/// Takes down every mount under `dir`, deepest first (a point mounted on twice, twice):
/// for what outlives the daemon that made it (a workspace fork's mounts).
pub fn unmount_under(dir: &Path) {
    let mut points = mounts_under(dir);
    points.sort_by(|a, b| b.cmp(a));
    for point in points {
        let _ = nix::mount::umount2(Path::new(&point), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// This process's mount table as text (a mount point that is not UTF-8, another test's,
/// with U+FFFD in it).
pub fn mount_table() -> String {
    String::from_utf8_lossy(&std::fs::read("/proc/self/mountinfo").unwrap_or_default()).into_owned()
}

/// The mount points in this process's mount table that lie under `dir`, as the table
/// writes them.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    mount_table()
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| point.starts_with(&dir))
        .map(str::to_string)
        .collect()
}
