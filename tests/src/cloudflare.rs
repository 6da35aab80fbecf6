//! The Cloudflare stack for tests and benchmarks: `wrangler dev` (workerd) running fsd's
//! Worker and Durable Object, or the official `@cloudflare/sandbox` ones, with fsd's image
//! as the container on podman, through `scripts/dev-cloudflare`.
//!
//! The toolchain comes from `scripts/dev-cloudflare tools` (`.ci/run` runs it). Once per test
//! process the Worker is built for wasm32 and the image made from the fsd under test
//! (`scripts/dev-cloudflare build <fsd>`). Each [`Stack`] is one wrangler of its own (its
//! port, its state directory, its worker name, so its containers are told apart) and is
//! stopped with what it started when dropped. Without the toolchain a test skips with the
//! reason, unless `CI=true`, where it fails.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{binary, repo_root};

/// How long wrangler may take to serve after it starts (image preparation included): a guard
/// against a stack that never serves, not a measure of speed. Alone it serves in about 10 s;
/// beside the rest of the suite on a loaded 2-core CI machine it once needed more than 180.
const START_TIMEOUT: Duration = Duration::from_secs(420);
/// What wrangler prints once its server listens (requests may still wait for the Worker).
const READY: &str = "Ready on http";
/// How many of wrangler's last lines a failure's message carries.
const LOG_TAIL_LINES: usize = 40;

/// Which Worker a stack runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Worker {
    /// fsd's own (`worker/`, Rust).
    Fsd,
    /// `@cloudflare/sandbox`'s Worker and object, unchanged (`worker/dev/official`).
    Official,
    /// The SDK's next line (0.13.0-next), its Worker and object (`worker/dev/next`).
    Next,
    /// The same Worker and object in front of the reference's own next runtime in place of
    /// fsd (see [`reference_next_image`]).
    NextReference,
}

impl Worker {
    fn name(self) -> &'static str {
        match self {
            Worker::Fsd => "fsd",
            Worker::Official => "official",
            Worker::Next => "next",
            Worker::NextReference => "next-reference",
        }
    }
}

/// One `wrangler dev`.
pub struct Stack {
    child: Option<Child>,
    worker: Worker,
    vars: Vec<(String, String)>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub port: u16,
    /// The worker's name for this stack; its containers' names carry it.
    pub name: String,
    state: tempfile::TempDir,
    log: PathBuf,
}

fn script() -> PathBuf {
    repo_root().join("scripts/dev-cloudflare")
}

/// Where `scripts/dev-cloudflare` keeps its tools, sockets and logs.
fn cloudflare_home() -> PathBuf {
    std::env::var("FSD_CLOUDFLARE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join("target/cloudflare"))
}

/// Whether the toolchain `scripts/dev-cloudflare tools` installs is here; the reason if not.
fn toolchain() -> Result<(), String> {
    let home = cloudflare_home();
    let needed = [
        home.join("bin/node"),
        home.join("bin/docker"),
        home.join("cargo/bin/worker-build"),
        home.join("cargo/bin/wasm-bindgen"),
        repo_root().join("worker/dev/node_modules/.bin/wrangler"),
    ];
    if let Some(missing) = needed.iter().find(|path| !path.exists()) {
        return Err(format!(
            "{} is missing: run scripts/dev-cloudflare tools",
            missing.display()
        ));
    }
    for program in ["podman", "runc", "mmdebstrap"] {
        if !crate::on_path(program) {
            return Err(format!("{program} is not installed (.ci/run installs it)"));
        }
    }
    if !crate::is_root() {
        return Err("podman here needs root".into());
    }
    podman_locks_left()
}

/// How many of podman's locks (`num_locks`, 2,048 unless configured) the stacks' tests may
/// need: a stack creates two containers per sandbox, each with two anonymous volumes, and
/// the suite runs about twenty stacks, several at once.
const LOCKS_NEEDED: usize = 300;

/// Whether podman has locks left for the stacks' containers. Every container, pod and
/// volume holds one; once they are used up no container can be created, and workerd retries
/// a sandbox's start for minutes before the test sees anything. Said here at once instead.
fn podman_locks_left() -> Result<(), String> {
    let count = |args: &[&str]| {
        let output = crate::podman(args);
        String::from_utf8_lossy(&output.stdout).lines().count()
    };
    let volumes = count(&["volume", "ls", "-q"]);
    let containers = count(&["ps", "-a", "-q"]);
    let pods = count(&["pod", "ls", "-q"]);
    let held = volumes + containers + pods;
    if held + LOCKS_NEEDED > 2048 {
        return Err(format!(
            "podman holds {held} of its 2048 locks ({volumes} volumes, {containers} \
             containers, {pods} pods), too few left to create the stacks' containers; \
             the anonymous volumes no container uses (earlier containers left them) are what \
             `.ci/run` removes before the tests"
        ));
    }
    Ok(())
}

/// Builds the Worker and the images from the fsd under test, once per process.
fn built() -> &'static Result<(), String> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT.get_or_init(|| {
        toolchain()?;
        let output = Command::new(script())
            .arg("build")
            .arg(binary("fsd"))
            .output()
            .map_err(|e| format!("scripts/dev-cloudflare: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "scripts/dev-cloudflare build failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
        Ok(())
    })
}

/// Puts the reference's next runtime into the stacks' image in fsd's place, once per process
/// (`scripts/dev-cloudflare reference-image`), for [`Worker::NextReference`]; the reason when
/// it is not built here. Call [`available`] first.
pub fn reference_next_image() -> &'static Result<(), String> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let output = Command::new(script())
            .arg("reference-image")
            .output()
            .map_err(|e| format!("scripts/dev-cloudflare: {e}"))?;
        let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
        match output.status.code() {
            Some(0) => Ok(()),
            Some(3) => Err(said),
            _ => Err(format!(
                "scripts/dev-cloudflare reference-image failed:\n{said}"
            )),
        }
    })
}

/// Whether the stack can run here: `false` (with the reason printed) when it cannot and
/// `CI` is not `true`; under CI a missing piece fails the test.
pub fn available(test: &str) -> bool {
    match built() {
        Ok(()) => true,
        Err(reason) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{test}: the Cloudflare stack cannot run: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping {test}: {reason}");
            false
        }
    }
}

impl Stack {
    /// Starts `worker` under wrangler with `vars` (`--var NAME:VALUE`), and waits until it
    /// serves. Call [`available`] first.
    pub fn start(worker: Worker, vars: &[(&str, &str)]) -> Stack {
        static STACKS: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "fsd-test-{}-{}",
            std::process::id(),
            STACKS.fetch_add(1, Ordering::Relaxed)
        );
        let state = tempfile::tempdir().expect("wrangler state dir");
        let log = state.path().join("wrangler.log");
        let mut stack = Stack {
            child: None,
            worker,
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            url: String::new(),
            port: 0,
            name,
            state,
            log,
        };
        stack.launch();
        stack
    }

    fn launch(&mut self) {
        self.port = crate::free_port();
        self.url = format!("http://127.0.0.1:{}", self.port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("wrangler log");
        let mut command = Command::new(script());
        command
            .args(["run", self.worker.name(), "--port", &self.port.to_string()])
            .args(["--name", &self.name])
            .arg("--persist-to")
            .arg(self.state.path().join("state"))
            .args(["--inspector-port", &crate::free_port().to_string()]);
        for (name, value) in &self.vars {
            command.arg("--var").arg(format!("{name}:{value}"));
        }
        use std::os::unix::process::CommandExt;
        let child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn scripts/dev-cloudflare run");
        at_exit::stop_group(child.id());
        self.child = Some(child);
        let started = Instant::now();
        let readies_before = self.logs().matches(READY).count();
        let mut ready_after = None;
        loop {
            if answers(self.port) {
                eprintln!(
                    "wrangler served after {:?} (said ready after {ready_after:?})",
                    started.elapsed()
                );
                return;
            }
            if ready_after.is_none() && self.logs().matches(READY).count() > readies_before {
                ready_after = Some(started.elapsed());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("wrangler exited with {status}:\n{}", self.log_tail());
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "wrangler did not serve within {START_TIMEOUT:?} (said ready after \
                 {ready_after:?}):\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops wrangler (and workerd with it) and starts it again on the same state, as a
    /// restart of the runtime does.
    pub fn restart(&mut self) {
        self.stop();
        // workerd removes its containers as it ends, through podman's API, which can finish
        // after workerd has (seen under a full test run), and one killed after its grace
        // leaves them as a crash does: the next runtime starts with none of the last one's.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.containers().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        remove_containers(&format!("{}-", self.name));
        self.launch();
    }

    /// Kills wrangler and workerd outright (SIGKILL, as a crash does: what they started is
    /// left as it is) and starts them again on the same state.
    pub fn crash_and_restart(&mut self, meanwhile: impl FnOnce(&Stack)) {
        self.end(Duration::ZERO);
        meanwhile(self);
        self.launch();
    }

    /// Runs a drop-in Worker's `/drive` (`query`: its parameters) and answers each call's
    /// detail by method, after checking every call succeeded.
    pub async fn drive(&self, query: &str) -> serde_json::Map<String, Value> {
        let response = reqwest::Client::new()
            .post(format!("{}/drive?{query}", self.url))
            .timeout(Duration::from_secs(300))
            .send()
            .await
            .unwrap_or_else(|e| panic!("drive: {e}\n{}", self.log_tail()));
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert_eq!(status, 200, "{query}: {text}\n{}", self.log_tail());
        let report: Vec<Value> = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{query}: the report: {e}: {text}"));
        let failed: Vec<&Value> = report.iter().filter(|call| call["ok"] != true).collect();
        assert!(
            failed.is_empty(),
            "{query}: calls failed: {failed:#?}\n{}",
            self.log_tail()
        );
        report
            .into_iter()
            .map(|call| {
                let method = call["method"].as_str().unwrap_or_default().to_string();
                (method, call["detail"].clone())
            })
            .collect()
    }

    /// Checks that the preview URL `url` (one the SDK made for port 8080, whose server
    /// serves files from the sandbox's drive directory) serves `path` through the Worker.
    pub async fn preview_serves(&self, url: &str, path: &str, expected: &str) {
        let host = url.trim_start_matches("https://").trim_end_matches('/');
        let response = reqwest::Client::new()
            .get(format!("{}{path}", self.url))
            .header("host", host)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .expect("preview");
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), expected);
    }

    /// Opens the terminal WebSocket at the Worker's `path`, types a command once it is
    /// `ready` and waits for its output: a shell in the sandbox answered through the object.
    pub async fn terminal_echoes(&self, path: &str) {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let url = format!("{}{path}", self.url);
        let mut client = crate::ws::WsClient::connect_url(&url, None)
            .await
            .unwrap_or_else(|e| panic!("terminal through the object: {e:?}\n{}", self.log_tail()));
        let mut screen = String::new();
        let mut typed = false;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !screen.contains("drop-42") {
            let frame = tokio::time::timeout_at(deadline, client.socket.next())
                .await
                .unwrap_or_else(|_| panic!("no echo; screen: {screen:?}\n{}", self.log_tail()));
            match frame {
                Some(Ok(Message::Binary(bytes))) => {
                    screen.push_str(&String::from_utf8_lossy(&bytes))
                }
                Some(Ok(Message::Text(text))) => {
                    let control: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    if control["type"] == "ready" && !typed {
                        client
                            .socket
                            .send(Message::Binary(b"echo drop-$((40+2))\r".to_vec().into()))
                            .await
                            .expect("typed");
                        typed = true;
                    }
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => panic!(
                    "the terminal closed; screen: {screen:?}\n{}",
                    self.log_tail()
                ),
            }
        }
    }

    /// Whether podman runs the container named `name` now.
    pub fn running(&self, name: &str) -> bool {
        let output = crate::podman(&[
            "ps",
            "--format",
            "{{.Names}}",
            "--filter",
            &format!("name=^{name}$"),
            "--filter",
            "status=running",
        ]);
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .any(|line| line == name)
    }

    /// What wrangler and workerd printed so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines wrangler and workerd printed, and what the Docker API proxy changed:
    /// for a failure's message, which a CI log keeps only when it is short.
    pub fn log_tail(&self) -> String {
        let logs = self.logs();
        let lines: Vec<&str> = logs.lines().collect();
        let mut tail = format!(
            "wrangler's last lines:\n{}",
            lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
        );
        let proxy = cloudflare_home().join("docker-api-proxy.log");
        if let Ok(changed) = std::fs::read_to_string(proxy) {
            let changed: Vec<&str> = changed.lines().collect();
            tail.push_str("\ndocker-api-proxy's last lines:\n");
            tail.push_str(&changed[changed.len().saturating_sub(10)..].join("\n"));
        }
        tail
    }

    /// The names of this stack's containers that podman has (running or not), sidecars
    /// left out.
    pub fn containers(&self) -> Vec<String> {
        let filter = format!("name=-{}-", self.name);
        let output = crate::podman(&["ps", "-a", "--format", "{{.Names}}", "--filter", &filter]);
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|name| !name.ends_with("-proxy"))
            .map(str::to_string)
            .collect()
    }

    fn stop(&mut self) {
        self.end(Duration::from_secs(15));
    }

    /// Ends wrangler's process group: SIGTERM and up to `grace` to end by itself (none:
    /// killed outright, as a crash ends it), then SIGKILL.
    fn end(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        at_exit::forget(child.id());
        let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
        if !grace.is_zero() {
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.stop();
        remove_containers(&format!("{}-", self.name));
    }
}

/// Removes the containers of the workers whose names start with `prefix` (workerd removes
/// its containers as it ends; this is for what a killed one left).
fn remove_containers(prefix: &str) {
    let podman = repo_root().join("scripts/podman");
    // Looked at again after each removal: a workerd that was ending may have been removing
    // the same containers (podman's API outlives it), and a removal that met one of its
    // own leaves a sidecar running.
    for _ in 0..5 {
        let Ok(output) = Command::new(&podman)
            .args(["ps", "-a", "--format", "{{.Names}}"])
            .args(["--filter", &format!("name=-{prefix}")])
            .output()
        else {
            return;
        };
        let names = String::from_utf8_lossy(&output.stdout).into_owned();
        let names: Vec<&str> = names.lines().collect();
        if names.is_empty() {
            return;
        }
        // `--depend`: a sidecar goes with the container in its network, even one workerd
        // is removing at the same moment.
        let _ = Command::new(&podman)
            .args(["rm", "-f", "-v", "-t", "0", "--depend"])
            .args(&names)
            .output();
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What must not outlive the test process even when nothing drops it (a stack or store in
/// a `static`, shared by tests): process groups and processes stopped, and this process's
/// stacks' containers removed, at exit.
pub mod at_exit {
    use std::sync::Mutex;

    static PROCESSES: Mutex<Vec<(u32, bool)>> = Mutex::new(Vec::new());

    fn register(pid: u32, group: bool) {
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            // SAFETY: registers a plain function to run at exit.
            unsafe { libc::atexit(run) };
        });
        if let Ok(mut processes) = PROCESSES.lock() {
            processes.push((pid, group));
        }
    }

    /// Kills the process group led by `pid` at exit.
    pub fn stop_group(pid: u32) {
        register(pid, true);
    }

    /// Kills process `pid` at exit.
    pub fn stop(pid: u32) {
        register(pid, false);
    }

    /// `pid` was stopped already.
    pub fn forget(pid: u32) {
        if let Ok(mut processes) = PROCESSES.lock() {
            processes.retain(|(p, _)| *p != pid);
        }
    }

    extern "C" fn run() {
        let processes = PROCESSES.lock().map(|p| p.clone()).unwrap_or_default();
        for (pid, group) in processes {
            let pid = pid as i32;
            let target = nix::unistd::Pid::from_raw(if group { -pid } else { pid });
            let _ = nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGKILL);
        }
        super::remove_containers(&format!("fsd-test-{}-", std::process::id()));
    }
}

/// Whether something answers an HTTP request on `port` (any status).
fn answers(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let asked = stream.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    let mut head = [0u8; 12];
    asked.is_ok() && stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 ")
}

/// This machine's address that both the host's processes and the containers reach (the
/// source address of the default route), for servers the containers must call back.
pub fn host_address() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
    socket
        .connect("198.51.100.1:9")
        .expect("a route off this machine");
    socket.local_addr().expect("local address").ip()
}
