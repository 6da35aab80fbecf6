//! One process world per daemon: every user command (each session's shell and what it runs,
//! sessionless commands, background processes) lives in one PID namespace, the sandbox's,
//! so a pid the API returns is valid in every command and `ps` shows everything. The
//! daemon stays outside it: commands can neither see nor signal it (`kill -9 -1` inside
//! reaches only the sandbox's processes).
//!
//! The namespace's first process is `fsd sandbox-init` under `unshare --kill-child`, and
//! `unshare` dies with the daemon (`PR_SET_PDEATHSIG`), so a daemon that is SIGKILLed takes
//! every user command with it: the kernel kills a namespace whose init dies. The init also
//! holds the read end of a pipe only the daemon writes to, and ends at its end-of-file:
//! that covers a daemon killed before `unshare`'s child had set its own parent-death signal. Each command
//! tree runs under `fsd supervise` (see `supervisor`), a child subreaper, which is how the
//! daemon finds everything a session or a process started, whatever it forked.
//!
//! Without the privilege to make namespaces, commands are plain descendants of the daemon
//! (still under supervisors), and the capabilities say so.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;

use crate::proctree;
use crate::spawner::SpawnRequest;
use crate::supervisor::OnExit;

/// How user commands are kept from the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// All user commands share one PID namespace that the daemon is not in.
    PidNamespace,
    /// Plain descendants of the daemon (the host does not allow namespaces).
    None,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Self::PidNamespace => "pid-namespace",
            Self::None => "none",
        }
    }
}

/// The sandbox's process world.
#[derive(Debug)]
pub struct World {
    exe: PathBuf,
    init: Option<Init>,
    /// Under `--confine`: the roots (canonical) every command's working directory must lie
    /// beneath; its supervisor enters it by a descriptor opened beneath one of them.
    within: Vec<PathBuf>,
    /// The resident spawner (see `spawner`), started on first use and again if it ended.
    spawner: std::sync::Mutex<Option<Spawner>>,
    /// One request at a time on the spawner's socket: each is answered before the next
    /// goes.
    requests: tokio::sync::Mutex<()>,
}

/// The resident spawner, as the daemon holds it.
#[derive(Debug)]
struct Spawner {
    /// The daemon's end of its socket, read and written without blocking: closing it ends
    /// the spawner.
    socket: Arc<AsyncFd<OwnedFd>>,
    /// The process the daemon started: the spawner, or (in a namespace) the one outside
    /// that waits for it.
    started: std::process::Child,
}

/// The namespace's init, as the daemon sees it.
#[derive(Debug)]
struct Init {
    unshare: std::sync::Mutex<std::process::Child>,
    /// Host pid of `fsd sandbox-init`, looked for the first time it is needed (`None` when
    /// it never came): the daemon answers requests meanwhile, since the init takes about as
    /// long to appear as the rest of the daemon's start.
    pid: OnceLock<Option<u32>>,
    /// The daemon's own PID namespace, which the init's is not.
    own_ns: PathBuf,
    /// The write end of the init's lifeline (see `supervisor::sandbox_init`): only the
    /// daemon holds it (close-on-exec), so it closes when the daemon ends, however it ends.
    _lifeline: std::io::PipeWriter,
}

/// How long the namespace's init may take to appear.
const INIT_TIMEOUT: Duration = Duration::from_secs(5);

impl World {
    /// Starts the sandbox's PID namespace when `wanted` and the host allows it. Must run on
    /// a thread that lives as long as the daemon (the main thread): the parent-death signal
    /// that ties `unshare` to the daemon fires when the spawning thread ends. Returns once
    /// `unshare` is spawned; its init is waited for when first needed.
    pub fn start(wanted: bool) -> Self {
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
        let init = if wanted {
            match Init::spawn(&exe) {
                Ok(init) => Some(init),
                Err(error) => {
                    tracing::warn!(%error, "PID namespaces unavailable; user commands can see the daemon");
                    None
                }
            }
        } else {
            None
        };
        Self {
            exe,
            init,
            within: Vec::new(),
            spawner: std::sync::Mutex::new(None),
            requests: tokio::sync::Mutex::new(()),
        }
    }

    /// Starts `request`'s program under a supervisor forked by the resident spawner (started
    /// on first use), with `fds` as its stdin, stdout and stderr and the supervisor's status
    /// pipe (see `supervise --status-fd`). Answers the supervisor's pid as the daemon sees
    /// it (0 when it has already gone). The request and its answer are not cut in two: a
    /// caller that may be dropped runs it in a task of its own.
    pub async fn spawn(
        self: &Arc<Self>,
        request: &SpawnRequest,
        fds: [BorrowedFd<'_>; 4],
    ) -> std::io::Result<u32> {
        let _turn = self.requests.lock().await;
        let mut retried = false;
        loop {
            let socket = self.running_spawner().await?;
            match crate::spawner::request(&socket, request, fds).await {
                Ok(answer) => {
                    return Ok(match self.init_pid() {
                        // Without a namespace the sandbox's pids are the daemon's.
                        None => u32::try_from(answer.pid).unwrap_or(0),
                        // The supervisor answered itself: the kernel translated its pid
                        // for the daemon in the answer's credentials.
                        Some(_) => answer.sender,
                    });
                }
                // A spawner killed from inside the sandbox (it lives there) fails the
                // request it was killed under: another one takes it, once.
                Err(error) if !retried => {
                    tracing::warn!(%error, "the spawner failed; starting another");
                    let old = self
                        .spawner
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .take();
                    if let Some(old) = old {
                        old.end();
                    }
                    retried = true;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The spawner's socket, the spawner started first (on a blocking thread: a start
    /// waits for the process) if none runs.
    async fn running_spawner(self: &Arc<Self>) -> std::io::Result<Arc<AsyncFd<OwnedFd>>> {
        let ended = {
            let mut spawner = self.spawner.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(current) = spawner.as_mut()
                && current
                    .started
                    .try_wait()
                    .is_ok_and(|ended| ended.is_none())
            {
                return Ok(Arc::clone(&current.socket));
            }
            spawner.take()
        };
        let world = Arc::clone(self);
        let started = tokio::task::spawn_blocking(move || {
            if let Some(old) = ended {
                old.end();
            }
            Spawner::start(&world)
        })
        .await
        .map_err(std::io::Error::other)??;
        let running = Arc::clone(&started.socket);
        *self.spawner.lock().unwrap_or_else(|p| p.into_inner()) = Some(started);
        Ok(running)
    }

    /// Confines every command's working directory to `roots` (canonical directories):
    /// each supervisor opens it beneath one of them in the sandbox's own mount namespace
    /// and enters it by that descriptor, so a link swapped in for a directory on the way
    /// cannot start a command outside.
    pub fn confined(mut self, roots: Vec<PathBuf>) -> Self {
        self.within = roots;
        self
    }

    /// The roots commands are confined to (empty: not confined).
    pub fn within(&self) -> &[PathBuf] {
        &self.within
    }

    /// Whether a command may start in `dir` as it is now: unconfined, always; confined,
    /// when its real path lies beneath a root (its supervisor checks again by descriptor).
    pub fn admits(&self, dir: &Path) -> bool {
        self.within.is_empty() || beneath(&self.within, dir).is_some()
    }

    /// Host pid of the namespace's init; `None` without a namespace. Blocks until the init
    /// has appeared (about a millisecond after the start), or at most 5 s.
    fn init_pid(&self) -> Option<u32> {
        self.init.as_ref().and_then(Init::pid)
    }

    pub fn isolation(&self) -> Isolation {
        match self.init_pid() {
            Some(_) => Isolation::PidNamespace,
            None => Isolation::None,
        }
    }

    /// The fsd binary, which commands in the world run as their supervisor.
    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// A command that runs `program` in `cwd` inside this world, under a supervisor.
    pub fn command(
        &self,
        on_exit: OnExit,
        cwd: &Path,
        program: &[&OsStr],
    ) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.exe);
        command.arg("supervise");
        if let Some(pid) = self.init_pid() {
            command.arg("--join").arg(pid.to_string());
        }
        let on_exit = match on_exit {
            OnExit::Kill => "kill",
            OnExit::Leave => "leave",
            OnExit::Linger => "linger",
        };
        for root in &self.within {
            command.arg("--within").arg(root);
        }
        command
            .arg("--cwd")
            .arg(cwd)
            .args(["--on-exit", on_exit, "--"])
            .args(program);
        command
    }

    /// The supervisor (the subreaper) of a command started with [`World::command`], given
    /// the pid the daemon spawned: that process itself, or its child when it had to enter
    /// the namespace first. `None` if it is gone.
    pub fn supervisor_of(&self, spawned: u32) -> Option<u32> {
        if self.init_pid().is_none() {
            return proctree::alive(spawned).then_some(spawned);
        }
        for _ in 0..500 {
            if let Some(&child) = proctree::children(spawned).first() {
                return Some(child);
            }
            if !proctree::alive(spawned) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }

    /// How many processes run below the daemon: commands, their shells and supervisors
    /// (commands join the namespace as children of their supervisors, not of its init,
    /// which is counted too).
    pub fn process_count(&self) -> usize {
        proctree::living_below(std::process::id()).len()
    }

    /// Ends every process of the world (daemon shutdown).
    pub fn shutdown(&self) {
        // Its socket's end stops the spawner; its supervisors go with the namespace.
        if let Some(spawner) = self
            .spawner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            spawner.end();
        }
        if let Some(init) = &self.init {
            // Killing unshare kills an init not yet seen (`--kill-child`).
            if let Some(Some(pid)) = init.pid.get() {
                let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
            }
            let mut unshare = init.unshare.lock().unwrap_or_else(|p| p.into_inner());
            let _ = unshare.kill();
            let _ = unshare.wait();
        }
    }
}

impl Spawner {
    /// Starts `fsd spawner` in `world` (inside its namespace when it has one), with no
    /// environment of the daemon's: its /proc entries are not the daemon's, so the file API
    /// serves them. It ends when the daemon's end of its socket closes, however the daemon
    /// ends (no parent-death signal: that would fire when the thread that started it ends).
    fn start(world: &World) -> std::io::Result<Self> {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        let theirs_fd = theirs.as_raw_fd();
        let mut command = std::process::Command::new(&world.exe);
        command
            .arg("spawner")
            .arg("--socket")
            .arg(theirs_fd.to_string());
        let namespace = world.init_pid();
        if let Some(pid) = namespace {
            command.arg("--join").arg(pid.to_string());
        }
        command
            .env_clear()
            .envs(std::env::var_os("PATH").map(|path| ("PATH", path)))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        // SAFETY: fcntl is async-signal-safe; the socket's end is the one descriptor the
        // spawner keeps past exec.
        unsafe {
            command.pre_exec(move || {
                if nix::libc::fcntl(theirs_fd, nix::libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let started = command.spawn()?;
        drop(theirs);
        nix::fcntl::fcntl(
            &ours,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        // Answers carry their sender's credentials: the supervisor's pid as the daemon sees
        // it, without a walk of /proc.
        nix::sys::socket::setsockopt(&ours, nix::sys::socket::sockopt::PassCred, &true)?;
        // SAFETY: `ours` owns its descriptor, which stays open and the same for as long as
        // the `AsyncFd` that takes it.
        let socket = unsafe { AsyncFd::register(ours) }.map_err(|failed| failed.into_parts().1)?;
        Ok(Self {
            socket: Arc::new(socket),
            started,
        })
    }

    /// Stops it: its socket's end, then the process the daemon started, waited for.
    fn end(self) {
        let Self {
            socket,
            mut started,
        } = self;
        drop(socket);
        let _ = started.kill();
        let _ = started.wait();
    }
}

/// `dir`'s real path and the root of `roots` it lies beneath, if it is beneath one now.
pub(crate) fn beneath<'a>(roots: &'a [PathBuf], dir: &Path) -> Option<(PathBuf, &'a Path)> {
    let real = std::fs::canonicalize(dir).ok()?;
    let root = roots.iter().find(|root| real.starts_with(root))?;
    Some((real, root))
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Init {
    fn spawn(exe: &Path) -> std::io::Result<Self> {
        let (lifeline_end, lifeline) = std::io::pipe()?;
        let lifeline_fd = lifeline_end.as_raw_fd();
        let mut command = std::process::Command::new(unshare_program());
        command
            .args([
                "--pid",
                "--fork",
                "--mount-proc",
                // Mounts made later (restores, bucket mounts) reach the sandbox.
                "--propagation",
                "slave",
                // The init dies with unshare, and the namespace with its init.
                "--kill-child",
                "--",
            ])
            .arg(exe)
            .arg("sandbox-init")
            .arg("--lifeline")
            .arg(lifeline_fd.to_string())
            // Neither unshare nor the init may carry the daemon's environment (tokens,
            // keys): their /proc entries are not the daemon's, so the file API serves them.
            .env_clear()
            .envs(std::env::var_os("PATH").map(|path| ("PATH", path)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl and fcntl are async-signal-safe. The lifeline's read end is the one
        // descriptor `unshare` and its child keep past exec.
        unsafe {
            command.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
                if nix::libc::fcntl(lifeline_fd, nix::libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let own_ns = std::fs::read_link("/proc/self/ns/pid")?;
        let unshare = command.spawn()?;
        drop(lifeline_end);
        Ok(Self {
            unshare: std::sync::Mutex::new(unshare),
            pid: OnceLock::new(),
            own_ns,
            _lifeline: lifeline,
        })
    }

    fn pid(&self) -> Option<u32> {
        *self.pid.get_or_init(|| {
            let mut unshare = self.unshare.lock().unwrap_or_else(|p| p.into_inner());
            match Self::wait(&mut unshare, &self.own_ns) {
                Ok(pid) => Some(pid),
                Err(error) => {
                    tracing::warn!(%error, "PID namespaces unavailable; user commands can see the daemon");
                    None
                }
            }
        })
    }

    /// Waits for `unshare`'s child to be `fsd sandbox-init` in a PID namespace of its own.
    fn wait(unshare: &mut std::process::Child, own_ns: &Path) -> std::io::Result<u32> {
        let started = std::time::Instant::now();
        // The init appears about a millisecond after the spawn and a command waits for it,
        // so the first looks are close together.
        let mut pause = Duration::from_micros(100);
        while started.elapsed() < INIT_TIMEOUT {
            if let Some(status) = unshare.try_wait()? {
                let mut message = String::new();
                if let Some(mut stderr) = unshare.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut stderr, &mut message);
                }
                return Err(std::io::Error::other(format!(
                    "unshare exited with {status}: {}",
                    message.trim()
                )));
            }
            let init = proctree::children(unshare.id()).into_iter().find(|&pid| {
                std::fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|ns| ns != *own_ns)
                    && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                        cmdline.split(|b| *b == 0).nth(1) == Some(b"sandbox-init".as_slice())
                    })
            });
            if let Some(pid) = init {
                drop(unshare.stderr.take());
                return Ok(pid);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
        let _ = unshare.kill();
        let _ = unshare.wait();
        Err(std::io::Error::other("the namespace's init did not start"))
    }
}

/// `unshare` by its full path, found with one stat per PATH directory: spawned by name, it
/// is looked for with an exec in each directory until one succeeds (eight failed execs on
/// this machine's PATH, about half a millisecond of the daemon's start).
fn unshare_program() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("unshare"))
                .find(|candidate| candidate.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("unshare"))
}
