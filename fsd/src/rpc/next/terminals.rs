//! The next line's `terminals` (docs/api.md, RPC: `terminals`) on `terminal::table`: create,
//! get, list, output as a subscription read by cursor, write, resize, interrupt,
//! terminate, hasActive, with the next registry's codes and details.

use std::sync::Arc;

use bytes::Bytes;
use fsd_process::seqlog::{Entry, SequencedLog};
use serde_json::{Value, json};

use super::args::{Answer, coded, options};
use super::logs;
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::capnweb::session::Session;
use crate::state::AppState;
use crate::terminal::table::{TableError, TerminalSpec, TerminalStatus};

/// The output a terminal keeps when `bufferSize` does not say (the reference's).
const DEFAULT_BUFFER: u64 = 262_144;

/// Serves `terminals.method`; `None` when it is not one of the next line's.
pub async fn call(
    state: &AppState,
    session: &Arc<Session>,
    method: &str,
    args: &[Arg],
) -> Option<Answer> {
    let table = &state.terminals;
    let id = match args.first() {
        Some(Arg::Json(Value::String(id))) => id.clone(),
        _ => String::new(),
    };
    let failed = |error: TableError| table_error(&id, &error);
    Some(match method {
        "create" => create(state, args).await,
        "get" => Ok(table
            .get(&id)
            .map_or(Value::Null, |terminal| snapshot(&terminal.snapshot()))),
        "list" => Ok(json!([table
            .list()
            .iter()
            .map(snapshot)
            .collect::<Vec<_>>()])),
        "hasActive" => Ok(Value::Bool(table.has_active())),
        "write" => {
            let bytes = match args.get(1) {
                Some(Arg::Bytes(bytes)) => Bytes::from(bytes.clone()),
                Some(Arg::Json(Value::String(text))) => Bytes::from(text.clone()),
                _ => return Some(Err(capnweb::js_error("TypeError", "data must be bytes"))),
            };
            table
                .write(&id, bytes)
                .await
                .map(|()| capnweb::undefined())
                .map_err(failed)
        }
        "resize" => {
            let size = |index: usize| match args.get(index) {
                Some(Arg::Json(value)) => value.as_u64().and_then(|n| u16::try_from(n).ok()),
                _ => None,
            };
            table
                .resize(&id, size(1).unwrap_or(0), size(2).unwrap_or(0))
                .map(|()| capnweb::undefined())
                .map_err(failed)
        }
        "interrupt" => table
            .interrupt(&id)
            .map(|()| capnweb::undefined())
            .map_err(failed),
        "terminate" => table
            .terminate(&id)
            .await
            .map(|()| capnweb::undefined())
            .map_err(failed),
        "output" => output(state, session, &id, args),
        _ => return None,
    })
}

/// `create({command, cwd, env, cols = 80, rows = 24, bufferSize = 262144})`.
async fn create(state: &AppState, args: &[Arg]) -> Answer {
    let options = options(args, 0).unwrap_or_default();
    let invalid_command = |message: &str| coded("INVALID_COMMAND", message, json!({}));
    let argv = match options.get("command") {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|item| {
                item.as_str()
                    .filter(|arg| !arg.contains('\0'))
                    .map(str::to_string)
            })
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| invalid_command("Terminal argv members must be strings"))?,
        _ => {
            return Err(invalid_command(
                "Terminal command must include an executable",
            ));
        }
    };
    if argv[0].is_empty() {
        return Err(invalid_command(
            "Terminal executable must be a non-empty string",
        ));
    }
    let id = crate::random::uuid_v4();
    let dimension = |name: &str, default: u64| match options.get(name) {
        None => Some(default),
        Some(value) => value.as_u64(),
    };
    let (Some(cols), Some(rows)) = (dimension("cols", 80), dimension("rows", 24)) else {
        return Err(table_error(&id, &control_create("Invalid dimensions")));
    };
    let (Ok(cols), Ok(rows)) = (u16::try_from(cols), u16::try_from(rows)) else {
        return Err(table_error(&id, &control_create("Invalid dimensions")));
    };
    let env = match options.get("env") {
        None => Vec::new(),
        Some(Value::Object(env)) => env
            .iter()
            .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_string())))
            .filter(|(name, value)| {
                !name.is_empty() && !name.contains(['=', '\0']) && !value.contains('\0')
            })
            .collect(),
        Some(_) => Vec::new(),
    };
    let spec = TerminalSpec {
        argv,
        cwd: options
            .get("cwd")
            .and_then(Value::as_str)
            .map(|cwd| state.paths.workspace().join(cwd)),
        env,
        cols,
        rows,
        buffer_bytes: options
            .get("bufferSize")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_BUFFER),
        whole_env: false,
        listed: true,
    };
    state
        .terminals
        .create(id.clone(), spec)
        .await
        .map(|created| snapshot(&created))
        .map_err(|error| table_error(&id, &error))
}

fn control_create(reason: &str) -> TableError {
    TableError::Control {
        operation: "create",
        reason: reason.to_string(),
    }
}

/// `output(id, {since, replay, follow})`.
fn output(state: &AppState, session: &Arc<Session>, id: &str, args: &[Arg]) -> Answer {
    let Some(terminal) = state.terminals.get(id) else {
        return Err(table_error(id, &TableError::NotFound(id.to_string())));
    };
    let options = options(args, 1).unwrap_or_default();
    let cursor_error = |cursor: Value, reason: &str| {
        coded(
            "INVALID_TERMINAL_CURSOR",
            "Terminal output cursor is invalid",
            json!({ "terminalId": id, "cursor": cursor, "reason": reason }),
        )
    };
    let log = Arc::clone(terminal.log());
    let ended = !terminal.running();
    // The terminal's id goes in every event: the log names its store, not the terminal.
    let terminal_id = id.to_string();
    let event = move |log: &SequencedLog, entry: Entry| output_event(&terminal_id, log, entry);
    logs::subscribe(session, log, &options, ended, cursor_error, event)
}

/// One log entry as the object's `TerminalOutputEvent`.
fn output_event(terminal_id: &str, log: &SequencedLog, entry: Entry) -> Value {
    logs::event(log, entry, |_| "data", Some(("terminalId", terminal_id)))
}

/// `TerminalSnapshot` as the object reads it.
fn snapshot(snapshot: &TerminalStatus) -> Value {
    let mut fields = json!({
        "id": snapshot.id,
        "pid": snapshot.pid,
        "command": snapshot.command,
        "cwd": snapshot.cwd.display().to_string(),
        "status": if snapshot.exit.is_some() { "exited" } else { "running" },
    });
    if let (Some(exit), Some(fields)) = (&snapshot.exit, fields.as_object_mut()) {
        fields.insert("exit".into(), json!(exit));
    }
    capnweb::from_json(fields)
}

fn table_error(id: &str, error: &TableError) -> Value {
    let message = error.to_string();
    match error {
        TableError::NotFound(_) => {
            coded("TERMINAL_NOT_FOUND", &message, json!({ "terminalId": id }))
        }
        TableError::Cwd { cwd, reason } => coded(
            "INVALID_TERMINAL_CWD",
            &message,
            json!({ "terminalId": id, "cwd": cwd, "operation": "create", "reason": reason }),
        ),
        TableError::Control { operation, reason } => coded(
            "TERMINAL_CONTROL_ERROR",
            &message,
            json!({ "terminalId": id, "operation": operation, "reason": reason }),
        ),
        TableError::Log(_) => coded("INTERNAL_ERROR", &message, json!({ "terminalId": id })),
    }
}
