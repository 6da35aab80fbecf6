//! A resident spawner: one small process in the sandbox's process world that forks the
//! supervisors of next-line processes, instead of the daemon executing `fsd supervise` for
//! each. Starting the fsd binary is most of a process's start (a large executable's
//! mapping and relocations: about 3 ms against a fork's tenth of that); the spawner pays it
//! once. It is single-threaded, so a fork of it is an ordinary process, which then runs the
//! supervisor's code as `fsd supervise` would. It keeps one fork ready (a spare) that
//! reads the next request itself, answers it and becomes its supervisor, while the spawner
//! forks the next spare: no fork is on a start's way.
//!
//! The daemon sends one request per message on a `SOCK_SEQPACKET` socket: the request as
//! JSON, and the program's stdin, stdout and stderr and the supervisor's status pipe as
//! passed descriptors. The answer is the supervisor's pid as the sandbox sees it (or a
//! negative errno), sent by the supervisor. The spawner ends when the daemon's end of the
//! socket closes; its children are reaped by the kernel (it ignores SIGCHLD), and each
//! supervisor tells the daemon how its program ended on the status pipe.

use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::sys::signal::{SigHandler, Signal, signal};
use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, UnixCredentials, recvmsg, sendmsg,
};
use nix::unistd::{ForkResult, fork};
use serde::{Deserialize, Serialize};
use tokio::io::unix::AsyncFd;

use crate::supervisor::{self, OnExit, SuperviseArgs};

/// `fsd spawner`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SpawnerArgs {
    /// Enter this process's PID and mount namespaces first (the sandbox's init).
    #[arg(long)]
    pub join: Option<u32>,
    /// The inherited socket requests come on.
    #[arg(long)]
    pub socket: i32,
}

/// What to start: a program under a supervisor that reports on the status pipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpawnRequest {
    pub program: Vec<String>,
    pub cwd: PathBuf,
    /// Roots the working directory must lie beneath (`--confine`).
    pub within: Vec<PathBuf>,
    pub on_exit: OnExit,
    /// The program's stdin is a terminal it is to control (a PTY's slave as its stdio).
    pub terminal: bool,
    /// The program's whole environment.
    pub env: Vec<(String, String)>,
}

/// `base` with each of `overlay` set over it (a name given again replaces the earlier one):
/// a program's whole environment.
pub fn overlaid<'a>(
    base: &[(String, String)],
    overlay: impl IntoIterator<Item = &'a (String, String)>,
) -> Vec<(String, String)> {
    let mut env = base.to_vec();
    for (name, value) in overlay {
        env.retain(|(kept, _)| kept != name);
        env.push((name.clone(), value.clone()));
    }
    env
}

/// The largest request a message may carry.
const MAX_REQUEST: usize = 1 << 20;
/// Descriptors per request: stdin, stdout, stderr, the status pipe.
const DESCRIPTORS: usize = 4;

/// Runs `fsd spawner`; returns the exit code.
pub fn serve(args: SpawnerArgs) -> i32 {
    supervisor::block_polite_signals();
    // SAFETY: the descriptor was handed to this process for this use alone.
    let socket = unsafe { OwnedFd::from_raw_fd(args.socket) };
    let _ = nix::fcntl::fcntl(
        &socket,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    if let Some(pid) = args.join {
        if let Err(err) = supervisor::enter_namespaces(pid) {
            eprintln!("fsd spawner: cannot enter the namespaces of {pid}: {err}");
            return 125;
        }
        // Only children enter a PID namespace: the spawner proper is the child.
        // SAFETY: this process is single-threaded (no runtime has started).
        match unsafe { fork() } {
            Ok(ForkResult::Parent { child }) => {
                drop(socket);
                return supervisor::mirror(child);
            }
            Ok(ForkResult::Child) => {}
            Err(err) => {
                eprintln!("fsd spawner: fork: {err}");
                return 125;
            }
        }
    }
    // The kernel reaps the supervisors: the spawner never waits for them.
    // SAFETY: setting a signal's disposition; no handler runs.
    unsafe {
        let _ = signal(Signal::SIGCHLD, SigHandler::SigIgn);
    }
    // A spare is forked before its request comes and takes it itself: the fork is not on
    // a start's way (the request is read, answered and started by a process already there),
    // and the next spare is forked while this one starts its program.
    loop {
        let (taken, told) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
            Ok(pipe) => pipe,
            Err(err) => {
                eprintln!("fsd spawner: pipe: {err}");
                return 1;
            }
        };
        // SAFETY: this process is single-threaded.
        match unsafe { fork() } {
            Ok(ForkResult::Parent { .. }) => {
                drop(told);
                // A byte: the spare took a request (another is forked). The end without
                // one: it ended, on the daemon's end closing (or a failure of its socket,
                // or a kill), and the spawner ends with it (the daemon starts another).
                let mut byte = [0u8; 1];
                loop {
                    match nix::unistd::read(&taken, &mut byte) {
                        Ok(1) => break,
                        Err(nix::errno::Errno::EINTR) => continue,
                        _ => return 0,
                    }
                }
            }
            Ok(ForkResult::Child) => {
                drop(taken);
                let code = spare(&socket, told);
                // Without the exit handlers a fork of the daemon's binary carries (its
                // libraries' clean-ups: 15 of a supervisor's 25 page faults, measured):
                // nothing here is buffered, and what they free goes with the process.
                // SAFETY: ends this process; nothing of it is used after.
                unsafe { nix::libc::_exit(code) }
            }
            Err(err) => {
                eprintln!("fsd spawner: fork: {err}");
                return 1;
            }
        }
    }
}

/// A forked spare: reads requests until one is valid, answers it with its own pid, tells
/// the spawner (`told`) it took one, and becomes that request's supervisor. Returns when
/// the daemon's end closes.
fn spare(socket: &OwnedFd, told: OwnedFd) -> i32 {
    rehearse();
    let mut buffer = vec![0u8; MAX_REQUEST];
    loop {
        let (length, fds) = match receive(socket.as_fd(), &mut buffer) {
            Ok(Some(received)) => received,
            // The daemon's end closed: the daemon is gone or done.
            Ok(None) => return 0,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(err) => {
                eprintln!("fsd spawner: {err}");
                return 1;
            }
        };
        let request = serde_json::from_slice::<SpawnRequest>(&buffer[..length]);
        let (Ok(request), Some(fds)) = (request, fds) else {
            if send_answer(socket.as_fd(), -(nix::libc::EINVAL)).is_err() {
                return 1;
            }
            continue;
        };
        let answered = send_answer(socket.as_fd(), std::process::id() as i32);
        let _ = nix::unistd::write(&told, &[1]);
        drop(told);
        if answered.is_err() {
            return 1;
        }
        // The buffer is kept, not freed: its unmapping is no part of a start (the process
        // ends with its program).
        return supervise(request, fds, socket.as_raw_fd());
    }
}

/// The request a spare rehearses: a program found on PATH, as most are.
const REHEARSAL: &[u8] = br#"{"program":["true"],"cwd":"/","within":[],"on_exit":"Leave","terminal":false,"env":[["PATH","/usr/local/bin:/usr/bin:/bin"],["HOME","/root"]]}"#;

/// A request like those that come, read and made ready to start (not started) while no
/// request waits: the pages a start touches (the code, the heap and the stack a fork left
/// shared) are faulted in here, not on the start's way.
fn rehearse() {
    if let Ok(request) = serde_json::from_slice::<SpawnRequest>(REHEARSAL) {
        let (program, env) = (os_strings(request.program), os_pairs(request.env));
        supervisor::rehearse(&program, &env, &request.cwd);
    }
}

fn os_strings(strings: Vec<String>) -> Vec<OsString> {
    strings.into_iter().map(OsString::from).collect()
}

fn os_pairs(pairs: Vec<(String, String)>) -> Vec<(OsString, OsString)> {
    pairs
        .into_iter()
        .map(|(name, value)| (OsString::from(name), OsString::from(value)))
        .collect()
}

/// Answers a request: the pid (or negative errno) as the sandbox sees it. Sent by the
/// supervisor itself, it carries its credentials without naming them: the daemon's end
/// asks for them (`SO_PASSCRED`), and the kernel gives them as the daemon sees them (a pid
/// of a child namespace translated on its way out).
fn send_answer(socket: BorrowedFd<'_>, answer: i32) -> nix::Result<()> {
    let bytes = answer.to_le_bytes();
    sendmsg::<()>(
        socket.as_raw_fd(),
        &[IoSlice::new(&bytes)],
        &[],
        MsgFlags::empty(),
        None,
    )
    .map(drop)
}

/// One request's message: its length and its descriptors (`None` unless all four came);
/// `None` at the end of the socket.
fn receive(
    socket: BorrowedFd<'_>,
    buffer: &mut [u8],
) -> nix::Result<Option<(usize, Option<[OwnedFd; DESCRIPTORS]>)>> {
    let mut space = nix::cmsg_space!([RawFd; DESCRIPTORS]);
    let mut iov = [IoSliceMut::new(buffer)];
    let message = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let length = message.bytes;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for control in message.cmsgs()? {
        if let ControlMessageOwned::ScmRights(received) = control {
            // SAFETY: the kernel just installed these descriptors in this process.
            fds.extend(
                received
                    .into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    if length == 0 && fds.is_empty() {
        return Ok(None);
    }
    Ok(Some((length, fds.try_into().ok())))
}

/// In the spare that took it: becomes the supervisor of `request`'s program.
fn supervise(request: SpawnRequest, fds: [OwnedFd; DESCRIPTORS], socket: RawFd) -> i32 {
    // The supervisor waits for its program: its children are not reaped for it.
    // SAFETY: setting a signal's disposition; no handler runs.
    unsafe {
        let _ = signal(Signal::SIGCHLD, SigHandler::SigDfl);
    }
    let _ = nix::unistd::close(socket);
    // Told apart from the spawner in `ps` and `top` (its command line stays the spawner's).
    let _ = nix::sys::prctl::set_name(c"fsd-supervise");
    let [stdin, stdout, stderr, status] = fds;
    for (fd, target) in [(&stdin, 0), (&stdout, 1), (&stderr, 2)] {
        // SAFETY: dup2 onto the standard descriptors, which this process owns.
        if unsafe { nix::libc::dup2(fd.as_raw_fd(), target) } == -1 {
            return 125;
        }
    }
    drop((stdin, stdout, stderr));
    supervisor::supervise(SuperviseArgs {
        join: None,
        cwd: Some(request.cwd),
        within: request.within,
        on_exit: request.on_exit,
        terminal: request.terminal,
        report: None,
        job: None,
        status_fd: Some(status.into_raw_fd()),
        program: os_strings(request.program),
        env: Some(os_pairs(request.env)),
    })
}

/// The daemon's end: sends a request with its descriptors and reads the answer, waiting on
/// the socket (which does not block) rather than on a thread. Dropped between the two, the
/// answer would be read by the next request: callers run it in a task of its own.
pub(crate) async fn request(
    socket: &AsyncFd<OwnedFd>,
    request: &SpawnRequest,
    fds: [BorrowedFd<'_>; DESCRIPTORS],
) -> std::io::Result<Answer> {
    let json = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    if json.len() > MAX_REQUEST {
        return Err(std::io::Error::other(
            "the command and its environment are too large",
        ));
    }
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    loop {
        let mut ready = socket.writable().await?;
        let sent = ready.try_io(|socket| {
            sendmsg::<()>(
                socket.as_raw_fd(),
                &[IoSlice::new(&json)],
                &[ControlMessage::ScmRights(&raw)],
                MsgFlags::empty(),
                None,
            )
            .map_err(std::io::Error::from)
        });
        match sent {
            Ok(sent) => {
                sent?;
                break;
            }
            Err(_would_block) => continue,
        }
    }
    loop {
        let mut ready = socket.readable().await?;
        match ready.try_io(|socket| read_answer(socket.as_raw_fd())) {
            Ok(answer) => return answer,
            Err(_would_block) => continue,
        }
    }
}

/// One answer from the spawner's socket.
fn read_answer(socket: RawFd) -> std::io::Result<Answer> {
    let mut answer = [0u8; 4];
    let mut iov = [IoSliceMut::new(&mut answer)];
    let mut space = nix::cmsg_space!(UnixCredentials);
    let received = recvmsg::<()>(socket, &mut iov, Some(&mut space), MsgFlags::empty())?;
    let sender = received.cmsgs()?.find_map(|control| match control {
        ControlMessageOwned::ScmCredentials(credentials) => u32::try_from(credentials.pid()).ok(),
        _ => None,
    });
    if received.bytes != 4 {
        return Err(std::io::Error::other("the spawner ended"));
    }
    let answer = i32::from_le_bytes(answer);
    if answer < 0 {
        return Err(std::io::Error::from_raw_os_error(-answer));
    }
    Ok(Answer {
        pid: answer,
        sender: sender.unwrap_or(0),
    })
}

/// The spawner's answer: the supervisor's pid in the sandbox, and the pid the credentials
/// of the answer name as the daemon sees it (with `SO_PASSCRED` on the daemon's end: the
/// supervisor's, or the spawner's own when it could not name another; 0 without them).
pub(crate) struct Answer {
    pub pid: i32,
    pub sender: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    /// A rehearsal that no longer reads as a request would rehearse nothing, silently.
    #[test]
    fn the_rehearsal_is_a_request() {
        let request = serde_json::from_slice::<SpawnRequest>(REHEARSAL).unwrap();
        assert_eq!(request.program, ["true"]);
    }

    /// The answer names its sender to a daemon that asks for credentials, without the
    /// sender naming them: the supervisor's pid as the daemon sees it.
    #[test]
    fn an_answer_carries_its_senders_pid() {
        use std::os::fd::AsFd;
        let (ours, theirs) = UnixStream::pair().unwrap();
        nix::sys::socket::setsockopt(&theirs, nix::sys::socket::sockopt::PassCred, &true).unwrap();
        let pid = i32::try_from(std::process::id()).unwrap();
        send_answer(ours.as_fd(), pid).unwrap();
        let answer = read_answer(theirs.as_fd().as_raw_fd()).unwrap();
        assert_eq!((answer.pid, answer.sender), (pid, std::process::id()));
    }
}
