//! `fsctl exec`, `start`, `send`, `ps`, `kill`, `logs`.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use fsd_sdk::api::exec::{ExecEvent, ExecuteRequest, command_line};
use fsd_sdk::api::process::{ProcessEvent, ProcessStatus, StartProcessRequest};
use fsd_sdk::{ErrorCode, Sandbox, SdkError};
use futures_util::StreamExt;
use tokio_util::task::AbortOnDropHandle;

use crate::output;

/// Where a command runs and with which variables.
#[derive(Debug, clap::Args)]
pub struct Placement {
    /// Session to run in (default: the daemon's default session).
    #[arg(long)]
    session: Option<String>,
    /// Directory for this command only.
    #[arg(long)]
    cwd: Option<String>,
    /// Variable for this command only, as NAME=VALUE (repeatable).
    #[arg(short, long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum ExecCommand {
    /// Run a command in its session's shell, so `cd` and `export` last for the session's
    /// next command, streaming its output (and fsctl's stdin to it); fsctl exits with
    /// the command's exit code. Ctrl-C interrupts the command, as ssh passes it on; a second
    /// Ctrl-C leaves, and the daemon stops the command.
    Exec {
        #[command(flatten)]
        place: Placement,
        /// Stop the command after this many milliseconds; fsctl then exits 124, as
        /// timeout(1) does.
        #[arg(long)]
        timeout_ms: Option<u64>,
        /// Give the command no stdin. Without it, fsctl's own stdin, when it is not a
        /// terminal, goes to the command as it comes, as ssh streams it (the command starts
        /// at once; end of file closes its stdin). With --json, stdin is read to its end
        /// first and given whole (up to 32 MiB).
        #[arg(short = 'n', long)]
        no_stdin: bool,
        /// The command: one word is a shell line (`'make && ./run'`); several each arrive
        /// as written, quoted for the shell (`python3 -c 'print("a  b")'`). One that
        /// starts with `-` comes after `--` (a mistyped flag of fsctl's is refused, never
        /// run as the command).
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
    /// Start a background process (run by bash) and print its id; with --pipe its stdin
    /// stays open for `fsctl send`.
    Start {
        /// The process's id (default: one is made).
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        place: Placement,
        /// Keep a pipe to its stdin.
        #[arg(long)]
        pipe: bool,
        /// The command: one word is a shell line (`'make && ./run'`); several each arrive
        /// as written, quoted for the shell (`python3 -c 'print("a  b")'`). One that
        /// starts with `-` comes after `--` (a mistyped flag of fsctl's is refused, never
        /// run as the command).
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
    /// Copy fsctl's stdin, as it comes, to a process started with --pipe; its stdin is
    /// closed at the end unless --keep-open.
    Send {
        id: String,
        #[arg(long)]
        keep_open: bool,
    },
    /// List background processes.
    Ps {
        /// Only processes with this status (running, completed, failed, killed, error).
        #[arg(long)]
        status: Option<String>,
    },
    /// Kill a background process and its children; with --signal, send that signal to
    /// them instead (a name such as USR1 or a number).
    Kill {
        id: String,
        #[arg(short, long)]
        signal: Option<String>,
    },
    /// Print a process's output; with -f, follow it until the process exits (across
    /// broken connections and daemon restarts, nothing printed twice).
    Logs {
        id: String,
        #[arg(short, long)]
        follow: bool,
    },
}

pub async fn run(
    sandbox: &Sandbox,
    command: ExecCommand,
    as_json: bool,
) -> Result<ExitCode, SdkError> {
    match command {
        ExecCommand::Exec {
            place,
            timeout_ms,
            no_stdin,
            command,
        } => {
            use std::io::IsTerminal;
            let piped = !no_stdin && !std::io::stdin().is_terminal() && !stdin_is_null();
            let mut request = ExecuteRequest {
                command: command_line(&command),
                env: variables(place.env)?,
                session_id: place.session,
                cwd: place.cwd,
                timeout_ms,
                foreground: Some(true),
                ..ExecuteRequest::default()
            };
            if as_json {
                if piped {
                    request.stdin_base64 = piped_stdin()?;
                }
                return match sandbox.exec_with(&request).await {
                    Ok(result) => {
                        output::json(&result);
                        Ok(exit_code(result.exit_code))
                    }
                    // `exit N` ended the session's shell: N, as the stream exits (the
                    // daemon's answer is the document).
                    Err(SdkError::Api { body, .. })
                        if body.code == ErrorCode::SessionTerminated
                            && body.context["exitCode"].is_i64() =>
                    {
                        output::json(&body);
                        let status = body.context["exitCode"].as_i64().unwrap_or(1);
                        Ok(exit_code(i32::try_from(status).unwrap_or(1)))
                    }
                    Err(err) => Err(err),
                };
            }
            request.stdin_pipe = piped;
            stream_in_session(sandbox, &request).await
        }
        ExecCommand::Start {
            id,
            place,
            pipe,
            command,
        } => {
            let request = StartProcessRequest {
                command: command_line(&command),
                process_id: id,
                env: variables(place.env)?,
                session_id: place.session,
                cwd: place.cwd,
                stdin: pipe.then(|| "pipe".to_string()),
                ..StartProcessRequest::default()
            };
            let handle = sandbox.start_process(&request).await?;
            if as_json {
                output::json(&serde_json::json!({"processId": handle.id, "pid": handle.pid}));
            } else {
                println!("{}", handle.id);
            }
            Ok(ExitCode::SUCCESS)
        }
        ExecCommand::Send { id, keep_open } => {
            use tokio::io::AsyncWriteExt;
            let mut stdin = sandbox.process_stdin(&id);
            // Each read becomes one request: up to 256 KiB when that much is waiting, a
            // line at a time when a terminal types it.
            let mut input = tokio::io::BufReader::with_capacity(256 * 1024, tokio::io::stdin());
            let sent = tokio::io::copy_buf(&mut input, &mut stdin).await?;
            if !keep_open {
                stdin.shutdown().await?;
            }
            if as_json {
                output::json(
                    &serde_json::json!({"processId": id, "sent": sent, "closed": !keep_open}),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ExecCommand::Ps { status } => {
            let status = match status {
                Some(name) => Some(
                    serde_json::from_value::<ProcessStatus>(serde_json::Value::String(
                        name.clone(),
                    ))
                    .map_err(|_| {
                        SdkError::Io(std::io::Error::other(format!("unknown status {name:?}")))
                    })?,
                ),
                None => None,
            };
            let processes = sandbox.list_processes(status).await?;
            if as_json {
                output::json(&processes);
            } else {
                println!(
                    "{:<28} {:>8} {:<10} {:>5}  COMMAND",
                    "ID", "PID", "STATUS", "EXIT"
                );
                for p in processes {
                    let exit = p.exit_code.map(|c| c.to_string()).unwrap_or_default();
                    let status = p.status.as_str();
                    println!(
                        "{:<28} {:>8} {:<10} {:>5}  {}",
                        p.id, p.pid, status, exit, p.command
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ExecCommand::Kill {
            id,
            signal: Some(signal),
        } => {
            let reply = sandbox.signal_process(&id, &signal).await?;
            if as_json {
                output::json(&reply);
            } else {
                println!(
                    "sent {} to {} process(es) of {id}",
                    reply.signal, reply.signalled
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ExecCommand::Kill { id, signal: None } => {
            sandbox.kill_process(&id).await?;
            if as_json {
                output::json(&serde_json::json!({"killed": id}));
            } else {
                println!("killed {id}");
            }
            Ok(ExitCode::SUCCESS)
        }
        ExecCommand::Logs { id, follow } => {
            if !follow {
                let logs = sandbox.process_logs(&id).await?;
                if as_json {
                    output::json(&logs);
                } else {
                    print_raw(&logs.stdout, &logs.stderr);
                }
                return Ok(ExitCode::SUCCESS);
            }
            // Across broken connections too: it goes on from the offsets it has seen.
            let mut events = sandbox.follow_process(&id);
            while let Some(event) = events.next().await {
                match event? {
                    ProcessEvent::Stdout { data, .. } => print_raw(&data, ""),
                    ProcessEvent::Stderr { data, .. } => print_raw("", &data),
                    ProcessEvent::Exit { exit_code, .. } => return Ok(self::exit_code(exit_code)),
                    ProcessEvent::ProcessInfo { .. } => {}
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Streams a command run in its session's shell (`foreground`), printing its output as it
/// comes. The first Ctrl-C is sent to the command; a second one, or one before the command
/// had its turn, ends fsctl with 130 (the daemon stops a command whose stream is gone).
async fn stream_in_session(
    sandbox: &Sandbox,
    request: &ExecuteRequest,
) -> Result<ExitCode, SdkError> {
    use tokio::signal::unix::{SignalKind, signal};
    // Listening before the request, so no Ctrl-C falls between.
    let mut interrupts = signal(SignalKind::interrupt())?;
    let mut events = tokio::select! {
        events = sandbox.exec_stream(request) => events?,
        _ = interrupts.recv() => return Ok(ExitCode::from(130)),
    };
    let mut running: Option<(String, String)> = None;
    // Sending stdin stops when fsctl does: a write cut by fsctl's end says nothing.
    let mut _sending: Option<AbortOnDropHandle<()>> = None;
    loop {
        tokio::select! {
            event = events.next() => {
                let Some(event) = event else {
                    return Err(SdkError::Io(std::io::Error::other(
                        "the daemon ended the stream before the command ended",
                    )));
                };
                match event? {
                    ExecEvent::Start {
                        session_id,
                        command_id,
                        ..
                    } => {
                        running = session_id.zip(command_id);
                        if let (true, Some((session, command))) = (request.stdin_pipe, &running) {
                            let task = send_stdin(sandbox.clone(), session.clone(), command.clone());
                            _sending = Some(AbortOnDropHandle::new(tokio::spawn(task)));
                        }
                    }
                    ExecEvent::Stdout { data, .. } => print_raw(&data, ""),
                    ExecEvent::Stderr { data, .. } => print_raw("", &data),
                    ExecEvent::Complete { exit_code: code, .. } => return Ok(exit_code(code)),
                    ExecEvent::Error {
                        error,
                        code,
                        timed_out,
                        exit_code: ended_shell,
                        ..
                    } => {
                        // `exit N` ended the session's shell, as it ends an ssh session: N
                        // is the command's status, and nothing went wrong to say.
                        if let (false, Some(status)) = (timed_out, ended_shell) {
                            return Ok(exit_code(status));
                        }
                        say!("fsctl: {}: {error}", code.as_deref().unwrap_or("ERROR"));
                        return Ok(ExitCode::from(if timed_out { 124 } else { 1 }));
                    }
                }
            }
            _ = interrupts.recv() => match running.take() {
                Some((session, command)) => {
                    if let Err(err) = sandbox.signal_command(&session, &command, "INT").await {
                        output::error(&err, false);
                    }
                }
                None => return Ok(ExitCode::from(130)),
            },
        }
    }
}

/// How many more times the end of a command's stdin is sent when its request failed.
const CLOSE_ATTEMPTS: usize = 3;

/// The most one stdin write carries: what arrived while the last one was sent, up to this.
const STDIN_WRITE_BYTES: usize = 1024 * 1024;

/// Copies fsctl's stdin, as it comes, to the command `command` of `session` (run with
/// `stdinPipe`), then closes the command's stdin at end of file. A command that ended
/// before reading it all (or whose session's shell `exit N` ended) ends this quietly, as
/// ssh drops what its command did not read.
async fn send_stdin(sandbox: Sandbox, session: String, command: String) {
    use tokio::io::AsyncWriteExt;
    let mut stdin = sandbox.command_stdin(&session, &command);
    let mut chunks = crate::shell::stdin_chunks(256 * 1024);
    let sent = async {
        while let Some(mut bytes) = chunks.recv().await {
            while bytes.len() < STDIN_WRITE_BYTES
                && let Ok(more) = chunks.try_recv()
            {
                bytes.extend_from_slice(&more);
            }
            stdin.write_all(&bytes).await?;
        }
        // The end of file is sent again when its request did not go through (closing twice
        // is a closed stdin, which is quiet): a command reading to its end would otherwise
        // wait for ever.
        let mut closed = stdin.shutdown().await;
        for _ in 0..CLOSE_ATTEMPTS {
            match &closed {
                Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    closed = sandbox.command_stdin(&session, &command).shutdown().await;
                }
                _ => break,
            }
        }
        closed
    };
    match sent.await {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
        // The daemon's refusal as it said it; anything else as the I/O error it is.
        Err(err) => match err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<SdkError>())
        {
            Some(refused) => output::error(refused, false),
            None => output::error(&SdkError::Io(err), false),
        },
        Ok(()) => {}
    }
}

/// Whether fsctl's stdin is `/dev/null` (a harness's default): the command reads it as
/// it would without a pipe, so none is asked for.
fn stdin_is_null() -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let (Ok(stdin), Ok(null)) = (
        std::fs::metadata("/proc/self/fd/0"),
        std::fs::metadata("/dev/null"),
    ) else {
        return false;
    };
    stdin.file_type().is_char_device() && stdin.rdev() == null.rdev()
}

/// `--env NAME=VALUE` flags as the request's variables (`None` when there are none).
fn variables(env: Vec<String>) -> Result<Option<BTreeMap<String, Option<String>>>, SdkError> {
    let mut vars = BTreeMap::new();
    for pair in env {
        let (name, value) = pair.split_once('=').ok_or_else(|| {
            SdkError::Io(std::io::Error::other(format!(
                "--env {pair:?}: expected NAME=VALUE"
            )))
        })?;
        vars.insert(name.to_string(), Some(value.to_string()));
    }
    Ok((!vars.is_empty()).then_some(vars))
}

/// The most `fsctl exec` reads of its stdin: what one request carries comfortably.
const MAX_STDIN_BYTES: u64 = 32 * 1024 * 1024;

/// fsctl's stdin, read to its end and base64-encoded, when it is not a terminal.
fn piped_stdin() -> Result<Option<String>, SdkError> {
    use base64::Engine;
    use std::io::{IsTerminal, Read};
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .take(MAX_STDIN_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_STDIN_BYTES {
        return Err(SdkError::Io(std::io::Error::other(format!(
            "stdin holds more than {MAX_STDIN_BYTES} bytes: upload it as a file (fsctl put) \
             and read it from there, or pass -n"
        ))));
    }
    Ok(Some(
        base64::engine::general_purpose::STANDARD.encode(bytes),
    ))
}

fn print_raw(stdout: &str, stderr: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(stdout.as_bytes());
    let _ = out.flush();
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(stderr.as_bytes());
    let _ = err.flush();
}

/// Exit codes outside 0–255 (a signal death reported as -1) become 1.
fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
