//! A process's stdin and signals: writes to a process started with `stdin: "pipe"` (or to
//! a command a foreground stream runs with `stdinPipe`), as calls or as an [`AsyncWrite`],
//! and any signal to its tree.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use fsd_api::ErrorCode;
use fsd_api::exec::{CommandStdinRequest, CommandStdinResponse};
use fsd_api::process::{SignalRequest, SignalResponse, StdinRequest, StdinResponse};
use tokio::io::AsyncWrite;

use crate::{ProcessHandle, Sandbox, SdkError};

/// The most one [`ProcessStdin`] write sends: the daemon's pipe holds 1 MiB.
const WRITE_CHUNK: usize = 1024 * 1024;

impl Sandbox {
    /// Writes `bytes` to a process's stdin (started with `stdin: "pipe"`), then closes it
    /// when `close` says so. Fails with `STDIN_FULL` (and how much went in, in the error's
    /// context) when the process has not read for the daemon's wait.
    pub async fn write_stdin(
        &self,
        id: &str,
        bytes: &[u8],
        close: bool,
    ) -> Result<StdinResponse, SdkError> {
        let request = StdinRequest {
            data: STANDARD.encode(bytes),
            encoding: Some("base64".into()),
            close,
            timeout_ms: None,
        };
        self.post_json(&format!("/api/process/{id}/stdin"), &request)
            .await
    }

    /// Writes `bytes` to the stdin of the command a foreground stream runs with
    /// `stdinPipe` (`command_id` from its `start` event), then closes it when `close`
    /// says so; as [`Sandbox::write_stdin`] writes a process's.
    pub async fn write_command_stdin(
        &self,
        session_id: &str,
        command_id: &str,
        bytes: &[u8],
        close: bool,
    ) -> Result<CommandStdinResponse, SdkError> {
        let request = CommandStdinRequest {
            session_id: Some(session_id.into()),
            command_id: command_id.into(),
            write: StdinRequest {
                data: STANDARD.encode(bytes),
                encoding: Some("base64".into()),
                close,
                timeout_ms: None,
            },
        };
        self.post_json("/api/execute/stdin", &request).await
    }

    /// The stdin of process `id` (started with `stdin: "pipe"`) as an [`AsyncWrite`].
    pub fn process_stdin(&self, id: &str) -> ProcessStdin {
        self.stdin_of(Target::Process(id.to_string()))
    }

    /// The stdin of the command a foreground stream runs with `stdinPipe` as an
    /// [`AsyncWrite`].
    pub fn command_stdin(&self, session_id: &str, command_id: &str) -> ProcessStdin {
        self.stdin_of(Target::Command {
            session_id: session_id.to_string(),
            command_id: command_id.to_string(),
        })
    }

    fn stdin_of(&self, target: Target) -> ProcessStdin {
        ProcessStdin {
            sandbox: self.clone(),
            target,
            pending: None,
            closing: false,
        }
    }

    /// Sends a signal (`SIGUSR1`, `usr1` or `10`) to every process of `id`'s tree.
    pub async fn signal_process(&self, id: &str, signal: &str) -> Result<SignalResponse, SdkError> {
        let request = SignalRequest {
            signal: serde_json::Value::String(signal.to_string()),
        };
        self.post_json(&format!("/api/process/{id}/signal"), &request)
            .await
    }
}

impl ProcessHandle {
    /// The process's stdin as an [`AsyncWrite`]; shutting it down sends end of file.
    pub fn stdin(&self) -> ProcessStdin {
        self.sandbox().process_stdin(&self.id)
    }

    /// Sends a signal (`SIGUSR1`, `usr1` or `10`) to the process's tree.
    pub async fn signal(&self, signal: &str) -> Result<SignalResponse, SdkError> {
        self.sandbox().signal_process(&self.id, signal).await
    }
}

type Pending = Pin<Box<dyn Future<Output = io::Result<usize>> + Send>>;

/// A running process's stdin. A write waits while the process does not read, as a pipe
/// does (the daemon answers `STDIN_FULL` after its wait and the write is sent again); a
/// process that has exited (a command whose session has gone), or a stdin already closed,
/// is [`io::ErrorKind::BrokenPipe`].
/// Each write is one request, done when the bytes are in the process's pipe: wrap it in a
/// `tokio::io::BufWriter` to gather many small writes into fewer.
pub struct ProcessStdin {
    sandbox: Sandbox,
    target: Target,
    pending: Option<Pending>,
    /// Whether the call in flight is the close.
    closing: bool,
}

/// Whose stdin a [`ProcessStdin`] writes.
#[derive(Clone)]
enum Target {
    Process(String),
    Command {
        session_id: String,
        command_id: String,
    },
}

impl ProcessStdin {
    fn send(&self, bytes: Vec<u8>, close: bool) -> Pending {
        let (sandbox, target) = (self.sandbox.clone(), self.target.clone());
        Box::pin(async move {
            loop {
                let written = match &target {
                    Target::Process(id) => sandbox
                        .write_stdin(id, &bytes, close)
                        .await
                        .map(|reply| reply.written),
                    Target::Command {
                        session_id,
                        command_id,
                    } => sandbox
                        .write_command_stdin(session_id, command_id, &bytes, close)
                        .await
                        .map(|reply| reply.written),
                };
                match written {
                    Ok(written) => return Ok(usize::try_from(written).unwrap_or(bytes.len())),
                    Err(err) => {
                        let written = written_before(&err);
                        match err.code() {
                            Some(ErrorCode::StdinFull) if written > 0 => return Ok(written),
                            Some(ErrorCode::StdinFull) => continue,
                            // A command's session gone (`exit N` ended its shell) is
                            // the command gone too.
                            Some(
                                ErrorCode::ProcessExited
                                | ErrorCode::StdinClosed
                                | ErrorCode::StdinNotPiped
                                | ErrorCode::SessionNotFound
                                | ErrorCode::SessionTerminated
                                | ErrorCode::SessionDestroyed,
                            ) => return Err(io::Error::new(io::ErrorKind::BrokenPipe, err)),
                            _ => return Err(io::Error::other(err)),
                        }
                    }
                }
            }
        })
    }

    /// Drives the write in flight; `Ready` with its result once the daemon has answered.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<usize>>> {
        let Some(pending) = self.pending.as_mut() else {
            return Poll::Ready(None);
        };
        let result = ready!(pending.as_mut().poll(cx));
        self.pending = None;
        Poll::Ready(Some(result))
    }
}

/// How much of a refused write went in, from the error's context.
fn written_before(err: &SdkError) -> usize {
    match err {
        SdkError::Api { body, .. } => body.context["written"]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0),
        _ => 0,
    }
}

impl AsyncWrite for ProcessStdin {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        // The write in flight is the one for `buf`: AsyncWrite callers call again with the
        // same bytes until it is ready.
        if self.pending.is_none() {
            let bytes = buf[..buf.len().min(WRITE_CHUNK)].to_vec();
            self.pending = Some(self.send(bytes, false));
        }
        match ready!(self.poll_pending(cx)) {
            Some(result) => Poll::Ready(result),
            None => Poll::Ready(Ok(0)),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A write is done when the daemon has put it in the pipe; nothing else is held.
        match ready!(self.poll_pending(cx)) {
            Some(Err(err)) => Poll::Ready(Err(err)),
            _ => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.pending.is_none() {
                self.closing = true;
                self.pending = Some(self.send(Vec::new(), true));
            }
            let closing = self.closing;
            match ready!(self.poll_pending(cx)) {
                Some(Err(err)) => return Poll::Ready(Err(err)),
                // A write left in flight finished first; now the close.
                _ if !closing => continue,
                _ => return Poll::Ready(Ok(())),
            }
        }
    }
}
