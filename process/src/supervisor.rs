//! The small processes that hold user commands in one process world.
//!
//! `fsd sandbox-init` is the first process (PID 1) of the sandbox's PID namespace: it reaps
//! whatever is orphaned there, forever. `fsd supervise` runs one program as the child of a
//! *child subreaper*: anything the program starts, even through `setsid` and a double fork,
//! stays below the supervisor, so the daemon can find and kill the whole tree with a /proc
//! walk. With `--join`, it first enters the PID and mount namespaces of a running process
//! (the sandbox's init) and forks, so the supervisor and its program live in that world
//! while the process the daemon started (and waits for) stays outside and mirrors the
//! exit status.
//!
//! `fsd spawner` (see `spawner`) forks supervisors that run the same code.
//!
//! All run before any async runtime or thread exists (namespace changes need a
//! single-threaded process) and ignore the polite signals a user's `pkill` sends.

use std::ffi::{CString, OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use fsd_search::{Refused, Within};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::CloneFlags;
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::time::TimeValLike;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, getpid};

use super::{proctree, stop};

/// What a supervisor does when its program exits.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum OnExit {
    /// Kill everything still below it, then exit with the program's status (a session
    /// shell: a session that ends takes its processes with it).
    Kill,
    /// Exit at once with the program's status; what the program left running is the
    /// sandbox's (a sessionless command's `nohup x &`).
    Leave,
    /// Report the status, then stay until everything below it has exited (a background
    /// process: its detached leftovers keep a home the daemon can find).
    Linger,
}

/// `fsd supervise`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SuperviseArgs {
    /// Enter this process's PID and mount namespaces first (a pid as the caller sees it).
    #[arg(long)]
    pub join: Option<u32>,
    /// The program's working directory.
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// A root (canonical) the working directory must lie beneath (repeatable; `--confine`):
    /// it is opened beneath the root by the kernel and entered by that descriptor, and a
    /// directory outside, or reached through a link out, is refused with status 126.
    #[arg(long)]
    pub within: Vec<PathBuf>,
    #[arg(long, value_enum)]
    pub on_exit: OnExit,
    /// The program's stdin is a terminal: make it a session leader with that terminal as
    /// its controlling one (a shell on a PTY: job control, Ctrl-C, window sizes).
    #[arg(long)]
    pub terminal: bool,
    /// A FIFO to report `pid JOB PID` and `exit JOB STATUS` lines to.
    #[arg(long, requires = "job")]
    pub report: Option<PathBuf>,
    #[arg(long)]
    pub job: Option<u64>,
    /// A pipe (inherited descriptor) to report on: `pid PID` once the program runs, or
    /// `failed MESSAGE` if it could not start, then `exit CODE SIGNAL` when it ends (SIGNAL
    /// 0 unless it died of one). The program does not inherit it.
    #[arg(long)]
    pub status_fd: Option<i32>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub program: Vec<OsString>,
    /// The program's whole environment (the spawner's supervisors); `None`: the
    /// supervisor's own.
    #[arg(skip)]
    pub env: Option<Vec<(OsString, OsString)>>,
}

/// The signals a process may catch or ignore, as opposed to SIGKILL and SIGSTOP.
pub const POLITE_SIGNALS: [Signal; 6] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// The signals supervisors and the init keep blocked: a user's `kill`/`pkill` without `-9`
/// does not take them away from their trees. Children start with a clean mask.
pub(crate) fn block_polite_signals() {
    let mut set = SigSet::empty();
    for signal in POLITE_SIGNALS {
        set.add(signal);
    }
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
}

/// Runs `fsd supervise`; returns the exit code.
pub fn supervise(args: SuperviseArgs) -> i32 {
    block_polite_signals();
    let status_pipe = args.status_fd.and_then(StatusPipe::adopt);
    if let Some(pid) = args.join {
        if let Err(err) = enter_namespaces(pid) {
            eprintln!("fsd supervise: cannot enter the namespaces of {pid}: {err}");
            if let Some(pipe) = &status_pipe {
                pipe.line(&format!(
                    "failed cannot enter the sandbox's namespaces: {err}"
                ));
            }
            return 125;
        }
        // Only children enter a PID namespace: the supervisor proper is the child.
        // SAFETY: this process is single-threaded (no runtime has started).
        match unsafe { fork() } {
            Ok(ForkResult::Parent { child }) => return mirror(child),
            Ok(ForkResult::Child) => {}
            Err(err) => {
                eprintln!("fsd supervise: fork: {err}");
                return 125;
            }
        }
    }
    // A session and process group of its own inside the world (the daemon's are outside
    // it); fails harmlessly where it already leads one.
    let _ = nix::unistd::setsid();
    if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!("fsd supervise: cannot become a subreaper: {err}");
    }
    let Some((program, rest)) = args.program.split_first() else {
        return 125;
    };
    let cwd = if args.within.is_empty() {
        args.cwd.as_deref()
    } else {
        // The supervisor enters the directory itself; the program inherits it.
        if let Err(err) = enter_within(&args.within, args.cwd.as_deref()) {
            let cwd = args.cwd.as_deref().unwrap_or(std::path::Path::new("."));
            eprintln!("fsd supervise: {}: {err}", cwd.display());
            report(&args, "exit {job} 126");
            if let Some(pipe) = &status_pipe {
                pipe.line(&format!("cwd {}: {err}", cwd.display()));
            }
            return 126;
        }
        None
    };
    let wanted = Wanted {
        program,
        rest,
        env: args.env.as_deref(),
        cwd,
        terminal: args.terminal,
    };
    let started = match Launch::new(&wanted) {
        Some(launch) => launch.start(),
        None => spawn_searching(&wanted),
    };
    let main = match started {
        Ok(pid) => pid,
        Err(err) => {
            eprintln!("fsd supervise: {}: {err}", program.to_string_lossy());
            let code = if err.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            report(&args, &format!("exit {{job}} {code}"));
            if let Some(pipe) = &status_pipe {
                pipe.line(&format!("failed {err}"));
            }
            return code;
        }
    };
    report(&args, &format!("pid {{job}} {main}"));
    if let Some(pipe) = &status_pipe {
        pipe.line(&format!("pid {main}"));
    }
    release_stdio();
    let main = Pid::from_raw(main as i32);
    let mut status = None;
    loop {
        let mut died_of = 0;
        match waitpid(None, Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == main => status = Some(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == main => {
                status = Some(128 + signal as i32);
                died_of = signal as i32;
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => break,
        }
        let Some(code) = status else { continue };
        if let Some(pipe) = &status_pipe {
            pipe.line(&format!("exit {code} {died_of}"));
        }
        match args.on_exit {
            OnExit::Leave => return code,
            OnExit::Kill => {
                kill_below_me();
                return code;
            }
            OnExit::Linger => {
                // The CPU time of everything waited for so far (the program, and what it
                // started that ended), which the daemon keeps once the tree is gone.
                if let Ok(usage) = getrusage(UsageWho::RUSAGE_CHILDREN) {
                    let used = usage.user_time().num_microseconds()
                        + usage.system_time().num_microseconds();
                    report(&args, &format!("cpu {{job}} {used}"));
                }
                report(&args, &format!("exit {{job}} {code}"));
                status = None;
            }
        }
    }
    0
}

/// Makes `program` ready to start as [`supervise`] would, and drops it unstarted: what a
/// spare does ahead of its request (see `spawner`).
pub(crate) fn rehearse(program: &[OsString], env: &[(OsString, OsString)], cwd: &std::path::Path) {
    let Some((program, rest)) = program.split_first() else {
        return;
    };
    let wanted = Wanted {
        program,
        rest,
        env: Some(env),
        cwd: Some(cwd),
        terminal: false,
    };
    let launch = Launch::new(&wanted);
    let stack = vec![0u8; LAUNCH_STACK];
    std::hint::black_box((launch, stack, format!("pid {}", 0)));
}

/// The program a supervisor is to start, as it was asked for.
#[derive(Clone, Copy)]
struct Wanted<'a> {
    program: &'a OsStr,
    rest: &'a [OsString],
    /// Its whole environment; `None`: the supervisor's own.
    env: Option<&'a [(OsString, OsString)]>,
    cwd: Option<&'a std::path::Path>,
    terminal: bool,
}

/// A program ready to start as `posix_spawn` starts one: a child that shares the
/// supervisor's memory until it execs (`CLONE_VM | CLONE_VFORK`), so nothing is copied for
/// it and it faults in nothing of the supervisor's. Everything the child touches is made
/// here, before it exists: it only makes system calls.
struct Launch {
    path: CString,
    /// `argv` and `envp` as `execve` takes them (null-terminated, pointing into the two
    /// vectors after them).
    argv: Vec<*const nix::libc::c_char>,
    envp: Vec<*const nix::libc::c_char>,
    _args: Vec<CString>,
    _env: Vec<CString>,
    cwd: Option<CString>,
    /// Make the child a session leader with its stdin as its controlling terminal.
    terminal: bool,
}

/// The child's stack: its few system calls need a fraction of it.
const LAUNCH_STACK: usize = 64 * 1024;

impl Launch {
    /// `None` when only a search of PATH from the child can tell what to run (see
    /// [`on_path`]), or a string holds a NUL.
    fn new(wanted: &Wanted<'_>) -> Option<Self> {
        let (program, env) = (wanted.program, wanted.env);
        let path = if program.as_bytes().contains(&b'/') {
            program.to_owned()
        } else {
            on_path(program, env)?.into_os_string()
        };
        let args: Vec<CString> = std::iter::once(program)
            .chain(wanted.rest.iter().map(OsString::as_os_str))
            .map(|arg| CString::new(arg.as_bytes()).ok())
            .collect::<Option<_>>()?;
        let pair = |name: &OsStr, value: &OsStr| {
            let mut joined = name.as_bytes().to_vec();
            joined.push(b'=');
            joined.extend_from_slice(value.as_bytes());
            CString::new(joined).ok()
        };
        let env: Vec<CString> = match env {
            Some(env) => env
                .iter()
                .map(|(name, value)| pair(name, value))
                .collect::<Option<_>>(),
            None => std::env::vars_os()
                .map(|(name, value)| pair(&name, &value))
                .collect::<Option<_>>(),
        }?;
        let pointers = |strings: &[CString]| {
            strings
                .iter()
                .map(|string| string.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        Some(Self {
            path: CString::new(path.into_vec()).ok()?,
            argv: pointers(&args),
            envp: pointers(&env),
            _args: args,
            _env: env,
            cwd: match wanted.cwd {
                Some(cwd) => Some(CString::new(cwd.as_os_str().as_bytes()).ok()?),
                None => None,
            },
            terminal: wanted.terminal,
        })
    }

    /// Starts the program; its pid once it runs, or why it could not (the errno of the
    /// step that failed, as a failed `Command::spawn` says it). The program starts with no
    /// signal blocked and SIGPIPE at its default, and dies with its supervisor: a
    /// `kill -9 -1` from inside spares its caller (say, a session's shell) but not the
    /// supervisor, and a program whose supervisor is gone would run on where the daemon
    /// can no longer find it.
    fn start(&self) -> std::io::Result<u32> {
        use nix::libc;
        use std::sync::atomic::{AtomicI32, Ordering};
        let failed = AtomicI32::new(0);
        let mut stack = vec![0u8; LAUNCH_STACK];
        let child = || -> isize {
            // In the child, on its own stack and the supervisor's memory: system calls only.
            // SAFETY: every pointer was made before the clone and outlives the child's use
            // of it (the supervisor is suspended until the child execs or exits).
            unsafe {
                let step = || {
                    if let Some(cwd) = &self.cwd
                        && libc::chdir(cwd.as_ptr()) != 0
                    {
                        return;
                    }
                    if become_program(self.terminal).is_ok() {
                        libc::execve(self.path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
                    }
                };
                step();
                failed.store(Errno::last_raw().max(1), Ordering::Release);
                libc::_exit(127)
            }
        };
        // SAFETY: the child only makes system calls on its own stack (see above); the
        // supervisor is single-threaded and waits, suspended, until the child execs or exits.
        let pid = unsafe {
            nix::sched::clone(
                Box::new(child),
                &mut stack,
                CloneFlags::CLONE_VM | CloneFlags::CLONE_VFORK,
                Some(libc::SIGCHLD),
            )
        }?;
        match failed.load(Ordering::Acquire) {
            0 => Ok(pid.as_raw() as u32),
            errno => {
                let _ = waitpid(pid, None);
                Err(std::io::Error::from_raw_os_error(errno))
            }
        }
    }
}

/// In a program's child before its exec: no signal blocked, SIGPIPE at its default, killed
/// when its supervisor dies, and on a terminal a session leader that controls it. System
/// calls only (it runs in a `vfork`'s child, which shares the supervisor's memory).
fn become_program(terminal: bool) -> Result<(), Errno> {
    use nix::libc;
    // SAFETY: plain system calls on this process's own state; no memory is allocated.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0
            || libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR
            || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0
            || (terminal && (libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0))
        {
            return Err(Errno::last());
        }
    }
    Ok(())
}

/// Starts `program` as `std` does when only the child's search of PATH can find it (a
/// relative directory in PATH, or nothing found: the exec says why).
fn spawn_searching(wanted: &Wanted<'_>) -> std::io::Result<u32> {
    let terminal = wanted.terminal;
    let mut command = std::process::Command::new(wanted.program);
    command.args(wanted.rest);
    if let Some(env) = wanted.env {
        command
            .env_clear()
            .envs(env.iter().map(|(name, value)| (name, value)));
    }
    if let Some(cwd) = wanted.cwd {
        command.current_dir(cwd);
    }
    // SAFETY: `become_program` makes async-signal-safe system calls only.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            become_program(terminal).map_err(std::io::Error::from)
        });
    }
    command.spawn().map(|child| child.id())
}

/// Enters `cwd` (or stays where it is) by a descriptor opened beneath one of `roots`
/// (`fchdir`), in this process's mount namespace.
fn enter_within(roots: &[PathBuf], cwd: Option<&std::path::Path>) -> Result<(), Refused> {
    let within = Within::new(roots)?;
    let dir = within.open_with(
        cwd.unwrap_or(std::path::Path::new(".")),
        OFlag::O_PATH | OFlag::O_DIRECTORY,
    )?;
    Ok(nix::unistd::fchdir(&dir)?)
}

/// `fsd sandbox-init`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SandboxInitArgs {
    /// The read end of a pipe whose write end only the daemon holds: at its end-of-file the
    /// daemon is gone, and the init ends (and with it the namespace).
    #[arg(long)]
    pub lifeline: Option<i32>,
}

/// `fsd sandbox-init`: PID 1 of the sandbox's namespace. Reaps orphans until killed, or
/// until the daemon's lifeline closes. `unshare --kill-child` ties the init to `unshare`
/// with a parent-death signal its child sets after the fork; an `unshare` killed before
/// that (a daemon killed in its first milliseconds, under load) would leave the init and
/// every command after it running. The lifeline does not depend on that order.
pub fn sandbox_init(args: SandboxInitArgs) -> i32 {
    let mut all = SigSet::all();
    all.remove(Signal::SIGKILL);
    all.remove(Signal::SIGSTOP);
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&all), None);
    // Started after the mask is set, so the thread inherits it: a SIGCHLD delivered to a
    // thread that does not block it would be dropped, and the loop below never woken.
    if let Some(fd) = args.lifeline {
        std::thread::spawn(move || watch_lifeline(fd));
    }
    let mut child_exited = SigSet::empty();
    child_exited.add(Signal::SIGCHLD);
    loop {
        while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        let _ = child_exited.wait();
    }
}

/// Returns only by ending the process, once nothing can write to `fd` any more.
fn watch_lifeline(fd: i32) {
    let mut buf = [0u8; 64];
    loop {
        match nix::unistd::read(
            // SAFETY: `fd` is the lifeline this process was started with, open for its life.
            unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
            &mut buf,
        ) {
            Ok(0) => std::process::exit(0),
            Ok(_) | Err(Errno::EINTR) => {}
            // Not a lifeline after all: the parent-death signal is left to do its work.
            Err(_) => return,
        }
    }
}

pub(crate) fn enter_namespaces(pid: u32) -> std::io::Result<()> {
    // Both are opened before either is entered: /proc changes with the mount namespace.
    let pid_ns = std::fs::File::open(format!("/proc/{pid}/ns/pid"))?;
    let mnt_ns = std::fs::File::open(format!("/proc/{pid}/ns/mnt"))?;
    nix::sched::setns(&pid_ns, CloneFlags::CLONE_NEWPID)?;
    nix::sched::setns(&mnt_ns, CloneFlags::CLONE_NEWNS)?;
    Ok(())
}

/// Waits for `child` and returns its status as an exit code (128+N after signal N).
pub(crate) fn mirror(child: Pid) -> i32 {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, signal, _)) => return 128 + signal as i32,
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return 125,
        }
    }
}

/// SIGKILLs everything below this process until nothing is left, reaping as it goes.
/// Orphans of killed processes land here (the subreaper), so the walk closes.
fn kill_below_me() {
    let me = getpid().as_raw() as u32;
    let reap = || {
        while waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL))
            .is_ok_and(|s| s != WaitStatus::StillAlive)
        {}
    };
    stop::kill_until_gone(|| proctree::living_below(me), reap);
    reap();
}

/// Where a search of PATH (the program's, else this process's) finds `program`: the first
/// executable regular file named so in its directories. `None` leaves the search to the
/// exec: a name with a slash, a PATH with a relative directory (which the child's working
/// directory resolves), nothing found (the exec then says why).
fn on_path(
    program: &std::ffi::OsStr,
    env: Option<&[(std::ffi::OsString, std::ffi::OsString)]>,
) -> Option<std::path::PathBuf> {
    if program.is_empty() || program.as_bytes().contains(&b'/') {
        return None;
    }
    let path = match env {
        Some(env) => env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.clone())?,
        None => std::env::var_os("PATH")?,
    };
    for dir in std::env::split_paths(&path) {
        if !dir.is_absolute() {
            return None;
        }
        let candidate = dir.join(program);
        let executable = nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK).is_ok();
        if executable && candidate.metadata().is_ok_and(|meta| meta.is_file()) {
            return Some(candidate);
        }
    }
    None
}

/// The program holds its own stdin, stdout and stderr: the supervisor lets go of its
/// copies (`/dev/null` in their place), so the output's readers see its end (and a
/// terminal hangs up) once the program's tree lets go of them, not once the supervisor's
/// exit has torn down its memory, which the kernel does before it closes descriptors.
fn release_stdio() {
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return;
    };
    for target in 0..=2 {
        // SAFETY: dup2 onto the standard descriptors, which this process owns.
        unsafe {
            nix::libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), target);
        }
    }
}

/// The pipe `--status-fd` names, kept from the program (close-on-exec).
struct StatusPipe(std::fs::File);

impl StatusPipe {
    fn adopt(fd: i32) -> Option<Self> {
        // SAFETY: the descriptor was handed to this process for this use alone; it is
        // owned here from now on.
        let file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        nix::fcntl::fcntl(
            &file,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .ok()?;
        Some(Self(file))
    }

    /// One line; a reader that has gone loses nothing anyone could read.
    fn line(&self, line: &str) {
        let _ = (&self.0).write_all(format!("{}\n", line.replace('\n', " ")).as_bytes());
    }
}

/// Writes one report line (`{job}` replaced) to the report FIFO, if there is one. The
/// daemon holds the FIFO open, so the open does not block; if it has gone, nothing is lost
/// that anyone could read.
fn report(args: &SuperviseArgs, line: &str) {
    let (Some(path), Some(job)) = (&args.report, args.job) else {
        return;
    };
    let line = format!("{}\n", line.replace("{job}", &job.to_string()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path);
    if let Ok(mut file) = file {
        let _ = file.write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{OsStr, OsString};

    fn path(value: &str) -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), value.into())]
    }

    #[test]
    fn a_program_is_found_as_an_exec_would_find_it() {
        let found = on_path(OsStr::new("sh"), Some(&path("/nonexistent:/usr/bin:/bin"))).unwrap();
        assert!(found.is_absolute() && found.ends_with("sh"), "{found:?}");
        // A directory of that name is passed over.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sh")).unwrap();
        let searched = format!("{}:/usr/bin:/bin", dir.path().display());
        let found = on_path(OsStr::new("sh"), Some(&path(&searched))).unwrap();
        assert!(!found.starts_with(dir.path()), "{found:?}");
    }

    #[test]
    fn a_launch_runs_the_program_where_asked_or_says_why_not() {
        let env = path("/usr/bin:/bin");
        let dir = tempfile::tempdir().unwrap();
        let script = [OsString::from("-c"), OsString::from("pwd > out; exit 3")];
        let wanted = |program: &'static str, cwd| Wanted {
            program: OsStr::new(program),
            rest: &script,
            env: Some(&env),
            cwd,
            terminal: false,
        };
        let pid = Launch::new(&wanted("sh", Some(dir.path())))
            .unwrap()
            .start()
            .unwrap();
        let pid = Pid::from_raw(pid as i32);
        assert_eq!(waitpid(pid, None).unwrap(), WaitStatus::Exited(pid, 3));
        let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
        assert_eq!(out.trim_end(), dir.path().to_str().unwrap());
        let missing = dir.path().join("missing");
        for (program, cwd) in [("/nonexistent/sh", None), ("sh", Some(missing.as_path()))] {
            let error = Launch::new(&wanted(program, cwd))
                .unwrap()
                .start()
                .unwrap_err();
            assert_eq!(
                error.kind(),
                std::io::ErrorKind::NotFound,
                "{program} {cwd:?}"
            );
        }
        // A program found nowhere is left to the search in the child.
        assert!(Launch::new(&wanted("no-such-program-here", None)).is_none());
    }

    #[test]
    fn what_only_the_exec_can_tell_is_left_to_it() {
        for (program, searched) in [
            ("./sh", "/usr/bin:/bin"),
            ("sh", "bin:/usr/bin:/bin"),
            ("sh", ":/usr/bin:/bin"),
            ("no-such-program-here", "/usr/bin:/bin"),
            ("", "/usr/bin"),
        ] {
            assert_eq!(
                on_path(OsStr::new(program), Some(&path(searched))),
                None,
                "{program} in {searched}"
            );
        }
        assert_eq!(on_path(OsStr::new("sh"), Some(&[])), None);
    }
}
