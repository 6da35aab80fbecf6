//! The next line's `processes` (`reference-next.md` §4.3) on the argv engine
//! (`fsd_process::argv`): start, get, list, kill, hasActive, and logs as a subscription of
//! event objects read from the process's log on disk by cursor. The engine's errors are
//! mapped to the next registry's codes and details here.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat};
use fsd_process::argv::{self, ArgvSpec, ArgvStatus, KillError, Outcome, StartError, Until};
use fsd_process::seqlog::{Entry, Kind};
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::args::{Answer, coded, options, subscription};
use crate::rpc::session::Session;
use crate::rpc::subscription::Source;
use crate::rpc::wire::{self, Arg};
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
            Some(process) => status_value(&process.status()),
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
        Ok(status) => Ok(status_value(&status)),
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
    result.map(|()| wire::undefined()).map_err(|error| {
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
    let replay = options
        .get("replay")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let follow = options
        .get("follow")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let log = Arc::clone(process.log());
    let cursor_error = |cursor: Value, reason: &str| {
        coded(
            "INVALID_PROCESS_CURSOR",
            "Process log cursor is invalid",
            json!({ "processId": id, "cursor": cursor, "reason": reason }),
        )
    };
    let since = match options.get("since") {
        None => None,
        Some(Value::String(text)) if !text.is_empty() => Some(
            log.parse_cursor(text)
                .map_err(|error| cursor_error(json!(text), &error.to_string()))?,
        ),
        Some(other) => {
            return Err(cursor_error(
                other.clone(),
                "cursor must be a non-empty string",
            ));
        }
    };
    let end = log.end();
    let from = if replay {
        since.unwrap_or(0) + 1
    } else {
        end + 1
    };
    let ended = !matches!(process.status().outcome, Outcome::Running);
    let until = if follow && !ended {
        Until::Terminal
    } else {
        Until::Seq(end)
    };
    let events =
        argv::follow(Arc::clone(&log), from, until).map(move |entry| log_event(&log, entry));
    subscription(session, Source::Objects(events.boxed()))
}

/// One log entry as the object's `ProcessLogEvent`.
fn log_event(log: &fsd_process::seqlog::SequencedLog, entry: Entry) -> Value {
    let record = match entry {
        Entry::Truncated => {
            return json!({ "type": "truncated", "timestamp": crate::wire::time::now_rfc3339() });
        }
        Entry::Record(record) => record,
    };
    let timestamp = DateTime::from_timestamp_millis(record.at_ms)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default();
    let cursor = log.cursor(record.seq);
    match record.kind {
        Kind::Stdout | Kind::Stderr => json!({
            "type": if record.kind == Kind::Stdout { "stdout" } else { "stderr" },
            "cursor": cursor,
            "timestamp": timestamp,
            "data": wire::bytes_expr(&record.data),
        }),
        Kind::Terminal => {
            let end: Map<String, Value> = serde_json::from_slice(&record.data).unwrap_or_default();
            let mut event = Map::new();
            event.insert("type".into(), json!("terminal"));
            event.insert("cursor".into(), json!(cursor));
            event.insert("timestamp".into(), json!(timestamp));
            for (key, value) in end {
                event.insert(key, wire::from_json(&value));
            }
            Value::Object(event)
        }
    }
}

/// `ProcessStatus` as the object reads it.
fn status_value(status: &ArgvStatus) -> Value {
    let mut fields = json!({
        "id": status.id,
        "pid": status.pid,
        "command": status.command,
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
    wire::from_json(&fields)
}
