//! Sessions, commands and background processes.

use std::time::Duration;

use fsd_api::exec::{
    BackgroundStarted, CommandSignalRequest, CommandSignalResponse, CreateSessionRequest,
    CreateSessionResponse, DeleteSessionRequest, DeleteSessionResponse, ExecEvent, ExecResult,
    ExecuteRequest, ListSessionsResponse,
};
use fsd_api::ports::{PortWatchEvent, PortWatchRequest, ProbeMode};
use fsd_api::process::{
    GetProcessResponse, KillAllResponse, KillProcessResponse, ListProcessesResponse, ProcessEvent,
    ProcessInfo, ProcessLogsResponse, ProcessStatus, StartProcessRequest, StartProcessResponse,
};
use futures_util::{Stream, StreamExt};
use reqwest::Method;

use crate::client::to_json;
use crate::{Sandbox, SdkError};

impl Sandbox {
    /// Runs `command` in the default session and waits for it.
    pub async fn exec(&self, command: &str) -> Result<ExecResult, SdkError> {
        self.exec_with(&ExecuteRequest {
            command: command.into(),
            ..ExecuteRequest::default()
        })
        .await
    }

    /// Runs a command with every option (session, cwd, env, timeout).
    pub async fn exec_with(&self, request: &ExecuteRequest) -> Result<ExecResult, SdkError> {
        let request = ExecuteRequest {
            background: None,
            ..request.clone()
        };
        self.post_json("/api/execute", &request).await
    }

    /// Starts a command as a background process (`background: true`).
    pub async fn exec_background(
        &self,
        request: &ExecuteRequest,
    ) -> Result<BackgroundStarted, SdkError> {
        let request = ExecuteRequest {
            background: Some(true),
            ..request.clone()
        };
        self.post_json("/api/execute", &request).await
    }

    /// Streams a command's events: `Start`, `Stdout`/`Stderr` as output arrives, then
    /// `Complete` with the exit code once the process has exited.
    pub async fn exec_stream(
        &self,
        request: &ExecuteRequest,
    ) -> Result<impl Stream<Item = Result<ExecEvent, SdkError>> + Send + Unpin + use<>, SdkError>
    {
        self.event_stream(Method::POST, "/api/execute/stream", Some(to_json(request)?))
            .await
    }

    /// Sends `signal` (a name such as `INT` or a number) to the command a `foreground`
    /// stream runs, named by its `Start` event's `session_id` and `command_id`.
    pub async fn signal_command(
        &self,
        session_id: &str,
        command_id: &str,
        signal: &str,
    ) -> Result<CommandSignalResponse, SdkError> {
        let request = CommandSignalRequest {
            session_id: Some(session_id.into()),
            command_id: command_id.into(),
            signal: serde_json::Value::String(signal.into()),
        };
        self.post_json("/api/execute/signal", &request).await
    }

    pub async fn create_session(
        &self,
        request: &CreateSessionRequest,
    ) -> Result<CreateSessionResponse, SdkError> {
        self.post_json("/api/session/create", request).await
    }

    pub async fn list_sessions(&self) -> Result<Vec<String>, SdkError> {
        let reply: ListSessionsResponse = self.get_json("/api/session/list").await?;
        Ok(reply.data)
    }

    pub async fn delete_session(&self, id: &str) -> Result<DeleteSessionResponse, SdkError> {
        let request = DeleteSessionRequest {
            session_id: id.into(),
        };
        self.post_json("/api/session/delete", &request).await
    }

    /// Starts a background process and returns a handle to it.
    pub async fn start_process(
        &self,
        request: &StartProcessRequest,
    ) -> Result<ProcessHandle, SdkError> {
        let reply: StartProcessResponse = self.post_json("/api/process/start", request).await?;
        Ok(ProcessHandle {
            sandbox: self.clone(),
            id: reply.process_id,
            pid: reply.pid,
            command: reply.command,
        })
    }

    pub async fn list_processes(
        &self,
        status: Option<ProcessStatus>,
    ) -> Result<Vec<ProcessInfo>, SdkError> {
        let route = match status {
            Some(status) => format!("/api/process/list?status={}", status.as_str()),
            None => "/api/process/list".into(),
        };
        let reply: ListProcessesResponse = self.get_json(&route).await?;
        Ok(reply.processes)
    }

    pub async fn get_process(&self, id: &str) -> Result<ProcessInfo, SdkError> {
        let reply: GetProcessResponse = self.get_json(&format!("/api/process/{id}")).await?;
        Ok(reply.process)
    }

    /// Kills a running process's whole tree (SIGTERM, SIGKILL after 5 s).
    pub async fn kill_process(&self, id: &str) -> Result<(), SdkError> {
        let _: KillProcessResponse = self.delete_json(&format!("/api/process/{id}")).await?;
        Ok(())
    }

    /// Kills every running process; returns how many there were.
    pub async fn kill_all_processes(&self) -> Result<usize, SdkError> {
        let reply: KillAllResponse = self.delete_json("/api/process/kill-all").await?;
        Ok(reply.cleaned_count)
    }

    pub async fn process_logs(&self, id: &str) -> Result<ProcessLogsResponse, SdkError> {
        self.process_logs_since(id, 0, 0).await
    }

    /// The output after the given absolute byte offsets (the `stdout_offset` and
    /// `stderr_offset` of an earlier answer, or an event's `offset`), so a client that
    /// reconnects continues where it stopped.
    pub async fn process_logs_since(
        &self,
        id: &str,
        stdout: u64,
        stderr: u64,
    ) -> Result<ProcessLogsResponse, SdkError> {
        self.get_json(&format!(
            "/api/process/{id}/logs?stdoutSince={stdout}&stderrSince={stderr}"
        ))
        .await
    }

    /// `ProcessInfo`, the output so far, live output, then `Exit`.
    pub async fn stream_process(
        &self,
        id: &str,
    ) -> Result<impl Stream<Item = Result<ProcessEvent, SdkError>> + Send + Unpin + use<>, SdkError>
    {
        self.stream_process_since(id, 0, 0).await
    }

    /// As [`Sandbox::stream_process`], replaying only the output after the given offsets.
    pub async fn stream_process_since(
        &self,
        id: &str,
        stdout: u64,
        stderr: u64,
    ) -> Result<impl Stream<Item = Result<ProcessEvent, SdkError>> + Send + Unpin + use<>, SdkError>
    {
        let route = format!("/api/process/{id}/stream?stdoutSince={stdout}&stderrSince={stderr}");
        self.event_stream(Method::GET, &route, None).await
    }
}

/// How [`ProcessHandle::wait_for_port`] decides a port is ready.
#[derive(Debug, Clone)]
pub enum PortProbe {
    Tcp,
    Http { path: String, min: u16, max: u16 },
}

impl PortProbe {
    /// `GET /` answering 200 to 399, the reference's default.
    pub fn http() -> Self {
        Self::Http {
            path: "/".into(),
            min: 200,
            max: 399,
        }
    }
}

/// What [`ProcessHandle::wait_for_log`] looks for in a line of output.
#[derive(Debug, Clone)]
pub enum LogPattern {
    Substring(String),
    Regex(regex::Regex),
}

impl LogPattern {
    fn matches(&self, line: &str) -> bool {
        match self {
            Self::Substring(needle) => line.contains(needle.as_str()),
            Self::Regex(regex) => regex.is_match(line),
        }
    }
}

/// A started background process.
#[derive(Debug, Clone)]
pub struct ProcessHandle {
    sandbox: Sandbox,
    pub id: String,
    pub pid: u32,
    pub command: String,
}

impl ProcessHandle {
    pub(crate) fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    pub async fn info(&self) -> Result<ProcessInfo, SdkError> {
        self.sandbox.get_process(&self.id).await
    }

    pub async fn kill(&self) -> Result<(), SdkError> {
        self.sandbox.kill_process(&self.id).await
    }

    pub async fn logs(&self) -> Result<ProcessLogsResponse, SdkError> {
        self.sandbox.process_logs(&self.id).await
    }

    pub async fn events(
        &self,
    ) -> Result<impl Stream<Item = Result<ProcessEvent, SdkError>> + Send + Unpin + use<>, SdkError>
    {
        self.sandbox.stream_process(&self.id).await
    }

    /// Waits until `port` answers (`mode` http: a status in `min..=max` for `GET path`;
    /// tcp: a connection). Fails with `PROCESS_EXITED_BEFORE_READY` if the process ends
    /// first, `PROCESS_READY_TIMEOUT` after `timeout`.
    pub async fn wait_for_port(
        &self,
        port: u16,
        probe: PortProbe,
        timeout: Option<Duration>,
    ) -> Result<(), SdkError> {
        let (mode, path, status_min, status_max) = match probe {
            PortProbe::Tcp => (ProbeMode::Tcp, None, None, None),
            PortProbe::Http { path, min, max } => {
                (ProbeMode::Http, Some(path), Some(min), Some(max))
            }
        };
        let request = PortWatchRequest {
            port: u32::from(port),
            mode,
            path,
            status_min,
            status_max,
            process_id: Some(self.id.clone()),
            interval: None,
        };
        let wait = async {
            let mut events = self
                .sandbox
                .event_stream::<PortWatchEvent>(
                    Method::POST,
                    "/api/port-watch",
                    Some(to_json(&request)?),
                )
                .await?;
            while let Some(event) = events.next().await {
                match event? {
                    PortWatchEvent::Ready { .. } => return Ok(()),
                    PortWatchEvent::ProcessExited { exit_code, .. } => {
                        return Err(local_error(
                            fsd_api::ErrorCode::ProcessExitedBeforeReady,
                            format!(
                                "process {} exited ({exit_code:?}) before port {port} was ready",
                                self.id
                            ),
                        ));
                    }
                    PortWatchEvent::Error { error, .. } => {
                        return Err(local_error(fsd_api::ErrorCode::PortOperationError, error));
                    }
                    PortWatchEvent::Watching { .. } => {}
                }
            }
            Err(local_error(
                fsd_api::ErrorCode::PortOperationError,
                "the port watch ended".into(),
            ))
        };
        with_timeout(timeout, wait).await
    }

    /// Waits for the process to exit and returns its exit code.
    pub async fn wait_for_exit(&self, timeout: Option<Duration>) -> Result<i32, SdkError> {
        let wait = async {
            let mut events = self.events().await?;
            while let Some(event) = events.next().await {
                if let ProcessEvent::Exit { exit_code, .. } = event? {
                    return Ok(exit_code);
                }
            }
            let info = self.info().await?;
            Ok(info.exit_code.unwrap_or(-1))
        };
        with_timeout(timeout, wait).await
    }

    /// Waits for a line of stdout or stderr that matches, and returns that line. Fails with
    /// `PROCESS_EXITED_BEFORE_READY` if the process exits first.
    pub async fn wait_for_log(
        &self,
        pattern: &LogPattern,
        timeout: Option<Duration>,
    ) -> Result<String, SdkError> {
        let wait = async {
            let mut events = self.events().await?;
            let (mut out, mut err) = (String::new(), String::new());
            while let Some(event) = events.next().await {
                let (buffer, data) = match event? {
                    ProcessEvent::Stdout { data, .. } => (&mut out, data),
                    ProcessEvent::Stderr { data, .. } => (&mut err, data),
                    ProcessEvent::Exit { exit_code, .. } => {
                        for rest in [&out, &err] {
                            if pattern.matches(rest) {
                                return Ok(rest.clone());
                            }
                        }
                        return Err(local_error(
                            fsd_api::ErrorCode::ProcessExitedBeforeReady,
                            format!(
                                "process {} exited with {exit_code} before the log line appeared",
                                self.id
                            ),
                        ));
                    }
                    ProcessEvent::ProcessInfo { .. } => continue,
                };
                buffer.push_str(&data);
                while let Some(end) = buffer.find('\n') {
                    let line: String = buffer.drain(..=end).collect();
                    let line = line.trim_end_matches('\n').to_string();
                    if pattern.matches(&line) {
                        return Ok(line);
                    }
                }
            }
            Err(local_error(
                fsd_api::ErrorCode::ProcessExitedBeforeReady,
                "the log stream ended".into(),
            ))
        };
        with_timeout(timeout, wait).await
    }
}

async fn with_timeout<T>(
    timeout: Option<Duration>,
    work: impl std::future::Future<Output = Result<T, SdkError>>,
) -> Result<T, SdkError> {
    match timeout {
        Some(limit) => tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
            Err(local_error(
                fsd_api::ErrorCode::ProcessReadyTimeout,
                format!("timed out after {} ms", limit.as_millis()),
            ))
        }),
        None => work.await,
    }
}

/// An error raised on the client side, in the daemon's envelope shape.
fn local_error(code: fsd_api::ErrorCode, message: String) -> SdkError {
    SdkError::Api {
        status: code.http_status(),
        body: Box::new(fsd_api::ErrorBody {
            http_status: code.http_status(),
            code,
            message,
            context: serde_json::json!({}),
            operation: None,
            timestamp: String::new(),
            suggestion: None,
        }),
    }
}
