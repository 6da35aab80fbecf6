//! The next line's `processes` (docs/api.md, RPC: `processes`) on the argv engine
//! (`fsd_process::argv`): start, get, list, kill, hasActive, and logs as a subscription of
//! event objects read from the process's log on disk by cursor. They read every process
//! of this daemon's table by id, 0.12's too (a session's command line shows as the
//! `bash -c` that ran it). The engine's errors are mapped to the next registry's codes and
//! details here.

use std::sync::Arc;
use std::time::Duration;

use fsd_process::argv::{ArgvSpec, KillError, Outcome, StartError};
use fsd_process::seqlog::{Entry, Kind, SequencedLog};
use fsd_process::table::Record;
use serde_json::{Value, json};

use super::args::{Answer, coded, options};
use super::logs;
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::capnweb::session::Session;
use crate::state::AppState;

/// Serves `processes.method`; `None` when it is not one of the next line's.
pub async fn call(
    state: &AppState,
    session: &Arc<Session>,
    method: &str,
    args: Vec<Arg>,
) -> Option<Answer> {
    let processes = &state.argv_processes;
    Some(match method {
        "start" => start(state, args).await,
        "get" => Ok(match id_arg(&args).and_then(|id| processes.get(&id)) {
            Some(process) => status_value(&process.record()),
            None => Value::Null,
        }),
        "list" => Ok(json!([processes
            .list()
            .iter()
            .map(status_value)
            .collect::<Vec<_>>()])),
        "hasActive" => Ok(Value::Bool(processes.has_active())),
        "kill" => kill(state, &args),
        "openLogs" => open_logs(state, session, &args),
        _ => return None,
    })
}

fn id_arg(args: &[Arg]) -> Option<String> {
    match args.first() {
        Some(Arg::Json(Value::String(id))) => Some(id.clone()),
        _ => None,
    }
}

fn invalid_command(message: &str) -> Value {
    coded("INVALID_COMMAND", message, json!({}))
}

async fn start(state: &AppState, args: Vec<Arg>) -> Answer {
    let argv = match args.first() {
        Some(Arg::Json(Value::Array(items))) => items
            .iter()
            .map(|item| item.as_str().map(str::to_string))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| invalid_command("Process argv members must be strings"))?,
        _ => {
            return Err(invalid_command(
                "Process command must include an executable",
            ));
        }
    };
    let options =
        options(&args, 1).ok_or_else(|| invalid_command("Process options are invalid"))?;
    let cwd = match options.get("cwd") {
        None => None,
        Some(Value::String(cwd)) => Some(state.paths.workspace().join(cwd)),
        Some(_) => {
            return Err(coded(
                "INVALID_PROCESS_CWD",
                "Process cwd is invalid: cwd must be a string",
                json!({ "cwd": Value::Null, "reason": "cwd must be a string" }),
            ));
        }
    };
    let env = match options.get("env") {
        None => Vec::new(),
        Some(Value::Object(env)) => {
            let mut pairs = Vec::with_capacity(env.len());
            for (name, value) in env {
                let Value::String(value) = value else {
                    return Err(environment_error(name, "value must be a string"));
                };
                pairs.push((name.clone(), value.clone()));
            }
            pairs
        }
        Some(_) => return Err(environment_error("", "env must be a plain object")),
    };
    let timeout = match options.get("timeout") {
        None => None,
        Some(value) => match value.as_f64() {
            Some(ms) if ms.is_finite() && ms > 0.0 => Some(Duration::from_secs_f64(ms / 1000.0)),
            _ => {
                return Err(invalid_command(
                    "Process timeout must be a positive finite number",
                ));
            }
        },
    };
    let id = crate::random::uuid_v4();
    let spec = ArgvSpec {
        argv,
        cwd,
        env,
        timeout,
    };
    let workspace = state.paths.workspace().to_path_buf();
    let cwd_named = spec.cwd.clone().unwrap_or(workspace);
    match state.argv_processes.start(id.clone(), spec).await {
        Ok(record) => Ok(status_value(&record)),
        Err(error) => Err(start_error(&id, &cwd_named, &error)),
    }
}

fn environment_error(name: &str, reason: &str) -> Value {
    coded(
        "INVALID_PROCESS_ENVIRONMENT",
        &format!("Process environment is invalid: {reason}"),
        json!({ "name": name, "reason": reason }),
    )
}

fn start_error(id: &str, cwd: &std::path::Path, error: &StartError) -> Value {
    let message = error.to_string();
    match error {
        StartError::Command(_) => invalid_command(&message),
        StartError::Cwd { cwd, reason } => coded(
            "INVALID_PROCESS_CWD",
            &message,
            json!({ "processId": id, "cwd": cwd, "reason": reason }),
        ),
        StartError::Environment { name, reason } => environment_error(name, reason),
        StartError::Spawn {
            command,
            message: stderr,
        } => coded(
            "PROCESS_SPAWN_FAILED",
            &message,
            json!({
                "processId": id,
                "command": command,
                "cwd": cwd.display().to_string(),
                "stderr": stderr,
            }),
        ),
        StartError::Log(_) => coded("INTERNAL_ERROR", &message, json!({ "processId": id })),
    }
}

fn kill(state: &AppState, args: &[Arg]) -> Answer {
    let id = id_arg(args).unwrap_or_default();
    let signal = match args.get(1) {
        None | Some(Arg::Undefined) => Some(15),
        Some(Arg::Json(value)) => value
            .as_f64()
            .filter(|n| n.fract() == 0.0 && (1.0..=64.0).contains(n))
            .map(|n| n as i32),
        Some(_) => None,
    };
    let result = match signal {
        Some(signal) => state.argv_processes.kill(&id, signal),
        None => match state.argv_processes.get(&id) {
            None => Err(KillError::NotFound(id.clone())),
            Some(_) => Err(KillError::Signal),
        },
    };
    result.map(|()| capnweb::undefined()).map_err(|error| {
        let message = error.to_string();
        match error {
            KillError::NotFound(_) => {
                coded("PROCESS_NOT_FOUND", &message, json!({ "processId": id }))
            }
            KillError::Signal | KillError::Failed { .. } => {
                coded("PROCESS_ERROR", &message, json!({ "processId": id }))
            }
        }
    })
}

/// `openLogs(id, {since, replay = true, follow = false})`: a subscription from the event
/// after `since` (replay), or from what comes next; through the end as it is now, or live
/// through the terminal event. An ended process is replayed through its end either way.
fn open_logs(state: &AppState, session: &Arc<Session>, args: &[Arg]) -> Answer {
    let id = id_arg(args).unwrap_or_default();
    let Some(process) = state.argv_processes.get(&id) else {
        return Err(coded(
            "PROCESS_NOT_FOUND",
            &format!("Process {id} not found"),
            json!({ "processId": id }),
        ));
    };
    let options = options(args, 1).unwrap_or_default();
    let ended = !process.record().running();
    let cursor_error = |cursor: Value, reason: &str| {
        coded(
            "INVALID_PROCESS_CURSOR",
            "Process log cursor is invalid",
            json!({ "processId": id, "cursor": cursor, "reason": reason }),
        )
    };
    logs::subscribe(
        session,
        Arc::clone(process.log()),
        &options,
        ended,
        cursor_error,
        log_event,
    )
}

/// One log entry as the object's `ProcessLogEvent`.
fn log_event(log: &SequencedLog, entry: Entry) -> Value {
    let stream = |kind| {
        if kind == Kind::Stderr {
            "stderr"
        } else {
            "stdout"
        }
    };
    logs::event(log, entry, stream, None)
}

/// `ProcessStatus` as the object reads it.
fn status_value(status: &Record) -> Value {
    let mut fields = json!({
        "id": status.id,
        "pid": status.pid,
        "command": status.launcher.argv(),
        "cwd": status.cwd.display().to_string(),
        "startedAt": status.started_at,
    });
    let extra = match &status.outcome {
        Outcome::Running => json!({ "state": "running" }),
        Outcome::Exited(exit) => {
            json!({ "state": "exited", "exit": exit, "endedAt": status.ended_at })
        }
        Outcome::Failed(failure) => {
            json!({ "state": "error", "error": failure, "endedAt": status.ended_at })
        }
    };
    if let (Some(fields), Value::Object(extra)) = (fields.as_object_mut(), extra) {
        fields.extend(extra);
    }
    capnweb::from_json(fields)
}
