//! One executor process: a Python or Node interpreter running fsd's executor script, in the
//! sandbox's process world under a supervisor (killable, counted, ended at shutdown like
//! every command). Requests go to it on fd 3 and frames come back on fd 4 (JSON lines);
//! its stdout and stderr are the running call's output, streamed as they arrive and cut at
//! the sentinel the executor writes before each `done` frame; a result waits for the mark
//! the executor writes to stdout before it (see `output`), so it follows what was printed
//! before it.

use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fsd_api::interpreter::CodeEvent;
use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::pipe;
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::error::InterpreterError;
use super::kind::Kind;
use super::output::{CallOutput, Piece};
use fsd_process::supervisor::OnExit;
use fsd_process::{World, proctree, stop};

const PYTHON_SCRIPT: &str = include_str!("python_executor.py");
const NODE_SCRIPT: &str = include_str!("node_executor.js");

/// How long an executor may take to say it is ready.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(30);
/// After a call's `done`, how long its output may take to reach its sentinel.
const SENTINEL_WAIT: Duration = Duration::from_millis(500);
/// After SIGINT, how long a call may take to stop before its executor is killed.
const INTERRUPT_GRACE: Duration = Duration::from_secs(2);

/// The interpreters and the executor scripts, written once under the state directory.
#[derive(Debug, Clone)]
pub struct Programs {
    pub python: PathBuf,
    pub node: PathBuf,
    /// `NODE_PATH` for Node executors (where `typescript` is found).
    pub node_path: Option<String>,
    python_script: PathBuf,
    node_script: PathBuf,
}

impl Programs {
    pub fn install(
        state_dir: &Path,
        python: PathBuf,
        node: PathBuf,
        node_path: Option<String>,
    ) -> std::io::Result<Self> {
        let dir = state_dir.join("interpreter");
        std::fs::create_dir_all(&dir)?;
        let python_script = dir.join("python_executor.py");
        let node_script = dir.join("node_executor.js");
        std::fs::write(&python_script, PYTHON_SCRIPT)?;
        std::fs::write(&node_script, NODE_SCRIPT)?;
        Ok(Self {
            python,
            node,
            node_path,
            python_script,
            node_script,
        })
    }

    fn command_line(&self, kind: Kind) -> Vec<&OsStr> {
        match kind {
            Kind::Python => vec![
                self.python.as_os_str(),
                OsStr::new("-u"),
                self.python_script.as_os_str(),
            ],
            // --expose-internals: the executor reaches Node's own REPL transform for a
            // top-level await when the typescript package is not there.
            Kind::Node => vec![
                self.node.as_os_str(),
                OsStr::new("--expose-internals"),
                self.node_script.as_os_str(),
            ],
        }
    }
}

/// Which stream a chunk of output came on.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

/// A frame from the executor.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Frame {
    Ready,
    Result {
        format: String,
        data: Value,
    },
    Error {
        ename: String,
        evalue: String,
        #[serde(default)]
        traceback: Vec<String>,
    },
    Done {
        id: u64,
        #[serde(default)]
        ok: bool,
        /// Confined: the directory it entered was outside the roots (a link swapped in).
        #[serde(default)]
        outside: bool,
    },
}

/// How a call ended, for the context: whether its executor can take the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallEnd {
    /// The executor is ready for the next call.
    Kept,
    /// The call ran past its timeout and did not stop when interrupted: the executor was
    /// killed, and the context gets a fresh one.
    Killed,
    /// The executor died during the call: the context must be recreated.
    Lost,
}

pub struct Executor {
    pub kind: Kind,
    child: Child,
    supervisor: u32,
    interpreter: u32,
    requests: pipe::Sender,
    frames: Lines<BufReader<pipe::Receiver>>,
    output: mpsc::UnboundedReceiver<(Stream, Bytes)>,
    next_id: u64,
}

impl Executor {
    /// Starts an executor in `cwd` with `env` and waits until it is ready.
    pub async fn spawn(
        kind: Kind,
        programs: &Programs,
        world: &Arc<World>,
        env: &[(String, String)],
        cwd: &Path,
    ) -> Result<Self, InterpreterError> {
        let spawn_error = |what: &str, error: &dyn std::fmt::Display| InterpreterError::Spawn {
            kind,
            reason: format!("{what}: {error}"),
        };
        let (request_read, request_write) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| spawn_error("pipe", &e))?;
        let (frame_read, frame_write) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| spawn_error("pipe", &e))?;
        let mut command = world.command(OnExit::Kill, cwd, &programs.command_line(kind));
        command
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("PYTHONUNBUFFERED", "1")
            .env("MPLBACKEND", "Agg")
            .env("NODE_NO_WARNINGS", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(node_path) = &programs.node_path {
            command.env("NODE_PATH", node_path);
        }
        let (request_fd, frame_fd) = (request_read.as_raw_fd(), frame_write.as_raw_fd());
        // SAFETY: fcntl and dup2 are async-signal-safe; the descriptors are open in the
        // child (the parent holds them until spawn returns).
        unsafe {
            command.pre_exec(move || place_descriptors(request_fd, frame_fd));
        }
        let mut child = command
            .spawn()
            .map_err(|e| spawn_error(&programs.command_line(kind)[0].to_string_lossy(), &e))?;
        drop((request_read, frame_write));
        let requests =
            pipe::Sender::from_owned_fd(request_write).map_err(|e| spawn_error("pipe", &e))?;
        let frames = BufReader::new(
            pipe::Receiver::from_owned_fd(frame_read).map_err(|e| spawn_error("pipe", &e))?,
        )
        .lines();
        let (sender, output) = mpsc::unbounded_channel();
        if let Some(stdout) = child.stdout.take() {
            tokio::spawn(read_output(stdout, Stream::Stdout, sender.clone()));
        }
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(read_output(stderr, Stream::Stderr, sender));
        }
        let spawned = child.id().unwrap_or(0);
        let world_pid = {
            let world = world.clone();
            tokio::task::spawn_blocking(move || world.supervisor_of(spawned))
                .await
                .ok()
                .flatten()
                .unwrap_or(0)
        };
        let mut executor = Self {
            kind,
            child,
            supervisor: world_pid,
            interpreter: 0,
            requests,
            frames,
            output,
            next_id: 1,
        };
        executor.await_ready().await?;
        executor.interpreter = proctree::children(executor.supervisor)
            .first()
            .copied()
            .unwrap_or(0);
        Ok(executor)
    }

    async fn await_ready(&mut self) -> Result<(), InterpreterError> {
        let kind = self.kind;
        let stderr = |output: &mut mpsc::UnboundedReceiver<(Stream, Bytes)>| {
            let mut text = String::new();
            while let Ok((_, chunk)) = output.try_recv() {
                text.push_str(&String::from_utf8_lossy(&chunk));
            }
            text.trim().to_string()
        };
        let ready = tokio::time::timeout(SPAWN_TIMEOUT, async {
            loop {
                match self.frames.next_line().await {
                    Ok(Some(line)) => {
                        if matches!(serde_json::from_str(&line), Ok(Frame::Ready)) {
                            return true;
                        }
                    }
                    _ => return false,
                }
            }
        })
        .await;
        match ready {
            Ok(true) => Ok(()),
            Ok(false) => {
                let status = self.child.wait().await.ok().and_then(|s| s.code());
                // Give the readers a moment to collect what it said on the way out.
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(InterpreterError::Spawn {
                    kind,
                    reason: format!(
                        "the {} executor exited (code {}) before it was ready: {}",
                        kind.name(),
                        status.map_or("none".to_string(), |c| c.to_string()),
                        stderr(&mut self.output)
                    ),
                })
            }
            Err(_) => Err(InterpreterError::Spawn {
                kind,
                reason: format!(
                    "the {} executor was not ready within {} s",
                    kind.name(),
                    SPAWN_TIMEOUT.as_secs()
                ),
            }),
        }
    }

    /// Applies a context's working directory and environment.
    /// Under `--confine`, `within` holds the roots the runner checks it landed beneath.
    pub async fn init(
        &mut self,
        cwd: &Path,
        env: &std::collections::BTreeMap<String, String>,
        within: &[PathBuf],
    ) -> Result<(), InterpreterError> {
        let id = self.take_id();
        let request = serde_json::json!({
            "op": "init", "id": id, "cwd": cwd, "env": env, "within": within, "sentinel": "",
        });
        self.send(&request).await?;
        loop {
            let line = self.frames.next_line().await;
            match line.map(|l| l.map(|l| serde_json::from_str::<Frame>(&l))) {
                Ok(Some(Ok(Frame::Done {
                    id: done,
                    ok,
                    outside,
                }))) if done == id => {
                    let cwd = cwd.display().to_string();
                    return match (ok, outside) {
                        (true, _) => Ok(()),
                        (false, true) => Err(InterpreterError::Outside(cwd)),
                        (false, false) => Err(InterpreterError::Init(cwd)),
                    };
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    return Err(InterpreterError::Init(cwd.display().to_string()));
                }
            }
        }
    }

    /// Runs one call, sending its events to `events` as they come; the last event sent is
    /// its `execution_complete` or `error`. `number` is the call's count in its context.
    pub async fn run(
        &mut self,
        code: &str,
        language: &str,
        timeout: Option<Duration>,
        number: u64,
        events: &mpsc::Sender<CodeEvent>,
    ) -> CallEnd {
        // Output that came after the last call's sentinel (a timer, a thread) is nobody's.
        while self.output.try_recv().is_ok() {}
        let id = self.take_id();
        let sentinel = format!(
            "\u{1}fsd-{}-{id}\u{1}",
            crate::random::hex(&crate::random::bytes::<8>())
        );
        let request = serde_json::json!({
            "op": "run", "id": id, "code": code, "language": language, "sentinel": sentinel,
        });
        if self.send(&request).await.is_err() {
            let _ = events.send(died(None)).await;
            return CallEnd::Lost;
        }
        let mut stdout = CallOutput::new(&sentinel);
        let mut stderr = CallOutput::new(&sentinel);
        let mut results = Results::default();
        let mut error: Option<CodeEvent> = None;
        let mut done_at: Option<Instant> = None;
        let mut interrupted = false;
        let mut deadline = timeout.map(|limit| Instant::now() + limit);
        loop {
            if done_at.is_some() && stdout.ended() && stderr.ended() {
                break;
            }
            let wake = match (done_at, deadline) {
                (Some(done), _) => Some(done + SENTINEL_WAIT),
                (None, deadline) => deadline,
            };
            tokio::select! {
                line = self.frames.next_line(), if done_at.is_none() => {
                    let Ok(Some(line)) = line else {
                        let status = self.child.wait().await.ok().and_then(|s| s.code());
                        results.flush(events).await;
                        flush(&mut stdout, &mut stderr, events).await;
                        let _ = events.send(died(status)).await;
                        return CallEnd::Lost;
                    };
                    match serde_json::from_str::<Frame>(&line) {
                        Ok(Frame::Result { format, data }) => {
                            results.arrived(CodeEvent::result(&format, data), events).await;
                        }
                        Ok(Frame::Error { ename, evalue, traceback }) => {
                            error = Some(CodeEvent::Error { ename, evalue, traceback });
                        }
                        Ok(Frame::Done { id: done, ok, .. }) if done == id => {
                            if !ok && error.is_none() {
                                error = Some(CodeEvent::Error {
                                    ename: "ExecutionError".into(),
                                    evalue: "Code execution failed".into(),
                                    traceback: Vec::new(),
                                });
                            }
                            done_at = Some(Instant::now());
                        }
                        _ => {}
                    }
                }
                chunk = self.output.recv() => {
                    let Some((stream, chunk)) = chunk else { continue };
                    match stream {
                        Stream::Stdout => {
                            for piece in stdout.push(&chunk) {
                                results.stdout(piece, events).await;
                            }
                        }
                        // Marks are written to stdout only.
                        Stream::Stderr => {
                            for piece in stderr.push(&chunk) {
                                if let Piece::Text(text) = piece {
                                    let _ = events.send(CodeEvent::Stderr { text }).await;
                                }
                            }
                        }
                    }
                }
                () = sleep_until(wake) => {
                    if done_at.is_some() {
                        break; // the output's sentinel did not come (fd 1 or 2 taken over)
                    }
                    if !interrupted {
                        interrupted = true;
                        self.interrupt();
                        deadline = Some(Instant::now() + INTERRUPT_GRACE);
                        continue;
                    }
                    // Interrupted and still running: the executor goes, and its state.
                    self.kill();
                    results.flush(events).await;
                    flush(&mut stdout, &mut stderr, events).await;
                    let _ = events.send(timed_out(timeout, false, None)).await;
                    return CallEnd::Killed;
                }
            }
        }
        // Results whose marks never came (the code took fd 1 over) go out at the end.
        results.flush(events).await;
        flush(&mut stdout, &mut stderr, events).await;
        let last = if interrupted {
            timed_out(timeout, true, error)
        } else {
            error.unwrap_or(CodeEvent::ExecutionComplete {
                execution_count: number,
            })
        };
        let _ = events.send(last).await;
        CallEnd::Kept
    }

    /// The supervisor below which the executor and what it started run.
    pub fn supervisor(&self) -> u32 {
        self.supervisor
    }

    /// Whether the process is still there.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Ends the executor and everything it started.
    pub fn kill(&mut self) {
        let supervisor = self.supervisor;
        if supervisor > 1 {
            std::thread::spawn(move || stop::kill_supervised(supervisor));
        }
        let _ = self.child.start_kill();
    }

    fn interrupt(&self) {
        if let Ok(pid) = i32::try_from(self.interpreter)
            && pid > 1
        {
            let _ = kill(Pid::from_raw(pid), Signal::SIGINT);
        }
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    async fn send(&mut self, request: &Value) -> Result<(), InterpreterError> {
        let mut line =
            serde_json::to_vec(request).map_err(|e| InterpreterError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.requests
            .write_all(&line)
            .await
            .map_err(|e| InterpreterError::Protocol(e.to_string()))
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Puts the request pipe on fd 3 and the frame pipe on fd 4 (in the child, before exec).
fn place_descriptors(request: i32, frame: i32) -> std::io::Result<()> {
    use nix::libc;
    // SAFETY: plain descriptor calls on descriptors the child holds.
    unsafe {
        // Moved above 4 first, so placing one cannot overwrite the other.
        let request = libc::fcntl(request, libc::F_DUPFD_CLOEXEC, 10);
        let frame = libc::fcntl(frame, libc::F_DUPFD_CLOEXEC, 10);
        if request < 0 || frame < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::dup2(request, 3) < 0 || libc::dup2(frame, 4) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

async fn read_output(
    mut stream: impl tokio::io::AsyncRead + Unpin,
    which: Stream,
    sender: mpsc::UnboundedSender<(Stream, Bytes)>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(read) = stream.read(&mut buffer).await {
        if read == 0
            || sender
                .send((which, Bytes::copy_from_slice(&buffer[..read])))
                .is_err()
        {
            return;
        }
    }
}

/// A call's stdout and results in one order: each result where its mark came in stdout,
/// after the output printed before it. The mark is written before the result's frame, but
/// they come on different pipes: a result that comes first waits for its mark, and stdout
/// that comes after a mark waits for the mark's result.
#[derive(Default)]
struct Results {
    /// Results whose marks have not come yet, in order.
    waiting: std::collections::VecDeque<CodeEvent>,
    /// Stdout from a mark whose result has not come yet on (the mark first).
    held: std::collections::VecDeque<Piece>,
}

impl Results {
    /// A piece of stdout, sent now unless it must wait behind a mark.
    async fn stdout(&mut self, piece: Piece, events: &mpsc::Sender<CodeEvent>) {
        if self.held.is_empty() {
            self.release(piece, events).await;
        } else {
            self.held.push_back(piece);
        }
    }

    /// Sends a piece whose turn it is; a mark without its result yet starts holding.
    async fn release(&mut self, piece: Piece, events: &mpsc::Sender<CodeEvent>) {
        match piece {
            Piece::Text(text) => {
                let _ = events.send(CodeEvent::Stdout { text }).await;
            }
            Piece::Mark(k) => match self.waiting.pop_front() {
                Some(result) => {
                    let _ = events.send(result).await;
                }
                None => self.held.push_front(Piece::Mark(k)),
            },
        }
    }

    /// A result's frame: sent at once when its mark is what holds stdout (and what was
    /// held behind it follows), else kept until its mark comes.
    async fn arrived(&mut self, result: CodeEvent, events: &mpsc::Sender<CodeEvent>) {
        if !matches!(self.held.front(), Some(Piece::Mark(_))) {
            self.waiting.push_back(result);
            return;
        }
        self.held.pop_front();
        let _ = events.send(result).await;
        while let Some(piece) = self.held.pop_front() {
            let blocks = matches!(piece, Piece::Mark(_)) && self.waiting.is_empty();
            self.release(piece, events).await;
            if blocks {
                return;
            }
        }
    }

    /// The call is over: whatever waits goes out, results first (their marks never came:
    /// the code took fd 1 over), then held output.
    async fn flush(&mut self, events: &mpsc::Sender<CodeEvent>) {
        while let Some(result) = self.waiting.pop_front() {
            let _ = events.send(result).await;
        }
        while let Some(piece) = self.held.pop_front() {
            if let Piece::Text(text) = piece {
                let _ = events.send(CodeEvent::Stdout { text }).await;
            }
        }
    }
}

async fn flush(stdout: &mut CallOutput, stderr: &mut CallOutput, events: &mpsc::Sender<CodeEvent>) {
    let out = stdout.flush();
    if !out.is_empty() {
        let _ = events.send(CodeEvent::Stdout { text: out }).await;
    }
    let err = stderr.flush();
    if !err.is_empty() {
        let _ = events.send(CodeEvent::Stderr { text: err }).await;
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn died(status: Option<i32>) -> CodeEvent {
    let code = status.map_or("by a signal".to_string(), |code| {
        format!("with code {code}")
    });
    CodeEvent::Error {
        ename: "ExecutorDied".into(),
        evalue: format!(
            "the context's executor exited {code} during the call; delete and recreate the context"
        ),
        traceback: Vec::new(),
    }
}

fn timed_out(timeout: Option<Duration>, kept: bool, error: Option<CodeEvent>) -> CodeEvent {
    let after = timeout.map_or(0, |t| t.as_millis());
    let what = if kept {
        "the code was interrupted and the context keeps its state"
    } else {
        "the code did not stop when interrupted; the context was restarted and its state is lost"
    };
    let traceback = match error {
        Some(CodeEvent::Error { traceback, .. }) => traceback,
        _ => Vec::new(),
    };
    CodeEvent::Error {
        ename: "TimeoutError".into(),
        evalue: format!("Execution timed out after {after} ms: {what}"),
        traceback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(text: &str) -> Piece {
        Piece::Text(text.into())
    }

    fn shown(text: &str) -> CodeEvent {
        CodeEvent::result("text", Value::String(text.into()))
    }

    /// Runs `steps` (stdout pieces or result frames) and names what went out, in order.
    async fn order(steps: Vec<Result<Piece, CodeEvent>>, end: bool) -> Vec<String> {
        let (sender, mut receiver) = mpsc::channel(64);
        let mut results = Results::default();
        for step in steps {
            match step {
                Ok(piece) => results.stdout(piece, &sender).await,
                Err(result) => results.arrived(result, &sender).await,
            }
        }
        if end {
            results.flush(&sender).await;
        }
        drop(sender);
        let mut seen = Vec::new();
        while let Some(event) = receiver.recv().await {
            seen.push(match event {
                CodeEvent::Stdout { text } => text,
                other => format!(
                    "[{}]",
                    other
                        .result_format()
                        .map_or(Value::Null, |(_, d)| d.clone())
                ),
            });
        }
        seen
    }

    #[tokio::test]
    async fn results_take_their_marks_places_whichever_pipe_is_first() {
        let want = ["a", "[\"one\"]", "b", "[\"two\"]", "c"];
        // The frames first.
        let frames_first = vec![
            Err(shown("one")),
            Err(shown("two")),
            Ok(out("a")),
            Ok(Piece::Mark(1)),
            Ok(out("b")),
            Ok(Piece::Mark(2)),
            Ok(out("c")),
        ];
        assert_eq!(order(frames_first, false).await, want);
        // The output first: what follows a mark waits for its result.
        let output_first = vec![
            Ok(out("a")),
            Ok(Piece::Mark(1)),
            Ok(out("b")),
            Ok(Piece::Mark(2)),
            Ok(out("c")),
            Err(shown("one")),
            Err(shown("two")),
        ];
        assert_eq!(order(output_first, false).await, want);
        // Interleaved.
        let mixed = vec![
            Ok(out("a")),
            Ok(Piece::Mark(1)),
            Ok(out("b")),
            Err(shown("one")),
            Err(shown("two")),
            Ok(Piece::Mark(2)),
            Ok(out("c")),
        ];
        assert_eq!(order(mixed, false).await, want);
        // A mark that never comes: the result goes out when the call ends.
        let unmarked = vec![Ok(out("a")), Err(shown("one"))];
        assert_eq!(order(unmarked.clone(), false).await, ["a"]);
        assert_eq!(order(unmarked, true).await, ["a", "[\"one\"]"]);
    }
}
