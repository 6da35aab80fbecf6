//! The `SandboxAPI` of `@cloudflare/sandbox` 0.12 (docs/api.md, RPC), a codec over the
//! domains' typed operations (`exec::ops`, `files::ops`, `process::ops`,
//! `backup::operations`, `watch::changes`, `git::ops`, `interpreter::ops`, `tunnels::ops`,
//! `system::ops`), which the routes call too: the same validation and errors, reshaped where
//! RPC's answers differ. Streams (files, process logs, commands, code, watches, ports) are
//! the same operations' events framed as the routes frame them, as pipes. What RPC alone
//! allows (file reads and writes as byte streams without the 32 MiB cap, code output to
//! callbacks) is built here on the same operations.

use std::sync::Arc;

use axum::extract::FromRef;
use fsd_api::Operation;
use fsd_api::exec::ExecuteRequest;
use fsd_api::interpreter::CodeEvent;
use fsd_api::tunnels::StopTunnelRequest;
use fsd_process::Since;
use futures_util::StreamExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::backup;
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::capnweb::session::{PipeChunks, Session};
use crate::error::{ApiError, OperationExt};
use crate::exec;
use crate::files;
use crate::git;
use crate::interpreter;
use crate::process;
use crate::state::AppState;
use crate::tunnels;
use crate::watch;
use crate::wire::json::parse_value;
use crate::wire::sse::sse_frame;

/// How one connection reaches the domains' operations.
#[derive(Clone)]
pub struct Api {
    state: AppState,
    /// The substates the domains' operations take, made once per connection.
    exec: exec::ExecState,
    process: process::ProcessState,
    backup: backup::BackupState,
}

type Answer = Result<Value, Value>;

/// The positional arguments of a call, read by index (absent and `undefined` alike).
struct Args(Vec<Arg>);

impl Args {
    fn json(&self, index: usize) -> Option<&Value> {
        match self.0.get(index) {
            Some(Arg::Json(value)) => Some(value),
            _ => None,
        }
    }

    fn string(&self, index: usize, name: &str) -> Result<String, Value> {
        match self.json(index) {
            Some(Value::String(text)) => Ok(text.clone()),
            _ => Err(invalid(name, "must be a string")),
        }
    }

    /// The string argument at `index`, moved out (a `writeFile`'s content can be large).
    fn take_string(&mut self, index: usize, name: &str) -> Result<String, Value> {
        match self.0.get_mut(index) {
            Some(Arg::Json(Value::String(text))) => Ok(std::mem::take(text)),
            _ => Err(invalid(name, "must be a string")),
        }
    }

    fn optional_string(&self, index: usize) -> Option<String> {
        self.json(index).and_then(Value::as_str).map(str::to_string)
    }

    fn object(&self, index: usize) -> Map<String, Value> {
        match self.json(index) {
            Some(Value::Object(fields)) => fields.clone(),
            _ => Map::new(),
        }
    }
}

/// A caller mistake in the arguments themselves, as the routes name one.
pub(super) fn invalid(field: &str, message: &str) -> Value {
    capnweb::sandbox_error(
        &format!("{field}: {message}"),
        "VALIDATION_FAILED",
        &json!({ "validationErrors": [{ "field": field, "message": message, "code": "INVALID_ARGUMENT" }] }),
    )
}

/// The pipe a call passes as `arg`, as the chunks the caller writes into it; refused (field
/// `stream`) when it is no pipe, or not one of this connection's still unread.
pub(super) fn pipe_chunks(session: &Session, arg: Option<&Arg>) -> Result<PipeChunks, Value> {
    let Some(Arg::Readable(pipe)) = arg else {
        return Err(invalid("stream", "must be a ReadableStream"));
    };
    session.take_readable(*pipe).ok_or_else(|| {
        invalid(
            "stream",
            "names no pipe of this session, or one already read",
        )
    })
}

/// `fields` with `extra` set (absent values left out).
fn with<const N: usize>(
    mut fields: Map<String, Value>,
    extra: [(&str, Option<Value>); N],
) -> Value {
    for (key, value) in extra {
        if let Some(value) = value {
            fields.insert(key.to_string(), value);
        }
    }
    Value::Object(fields)
}

/// What capnweb answers for a method the object does not have, as the reference does.
fn not_a_function(domain: &str, method: &str) -> Value {
    capnweb::js_error(
        "TypeError",
        &format!("'{domain}.{method}' is not a function."),
    )
}

impl Api {
    pub fn new(state: AppState) -> Self {
        Self {
            exec: FromRef::from_ref(&state),
            process: FromRef::from_ref(&state),
            backup: FromRef::from_ref(&state),
            state,
        }
    }

    /// Runs `path` (`[domain, method]`) with `args`.
    pub async fn call(&self, session: &Arc<Session>, path: &[String], args: Vec<Arg>) -> Answer {
        let [domain, method] = path else {
            return Err(capnweb::js_error(
                "TypeError",
                &format!("'{}' is not a function.", path.join(".")),
            ));
        };
        let args = Args(args);
        match domain.as_str() {
            "utils" => self.utils(method, args).await,
            "commands" => self.commands(session, method, args).await,
            "files" => self.files(session, method, args).await,
            "processes" => self.processes(session, method, args).await,
            "ports" => self.ports(session, method, args).await,
            "git" => self.git(method, args).await,
            "interpreter" => self.interpreter(session, method, args).await,
            "backup" => self.backup(method, args).await,
            "watch" => self.watch(session, method, args).await,
            "tunnels" => self.tunnels(session, method, args).await,
            _ => Err(not_a_function(domain, method)),
        }
    }

    /// `utils`: health, version, sessions.
    async fn utils(&self, method: &str, args: Args) -> Answer {
        match method {
            "ping" => Ok(json!("healthy")),
            "getVersion" => Ok(json!(crate::system::ops::version().version)),
            "getCommands" => Ok(json!([[]])),
            "createSession" => {
                let req = typed_body(Value::Object(args.object(0)))?;
                let created = exec::ops::create_session(&self.exec, req).await;
                let mut answer = json_of(created.map_err(refused)?)?;
                let id = answer.get("id").cloned().unwrap_or(Value::Null);
                if let Some(fields) = answer.as_object_mut() {
                    fields.insert(
                        "message".into(),
                        json!(format!(
                            "Session {} created",
                            id.as_str().unwrap_or_default()
                        )),
                    );
                    fields.remove("data");
                }
                Ok(capnweb::from_json(answer))
            }
            "deleteSession" => {
                let body = json!({ "sessionId": args.string(0, "sessionId")? });
                typed(body, |req| exec::ops::delete_session(&self.exec, req)).await
            }
            "listSessions" => {
                let answer = json_of(exec::ops::list_sessions(&self.exec).await)?;
                let sessions = answer.get("data").cloned().unwrap_or(json!([]));
                Ok(capnweb::from_json(json!({ "sessions": sessions })))
            }
            _ => Err(not_a_function("utils", method)),
        }
    }

    /// `commands`: a command run to its end, or streamed.
    async fn commands(&self, session: &Arc<Session>, method: &str, args: Args) -> Answer {
        match method {
            "execute" => {
                let req: ExecuteRequest = typed_body(self.command(&args)?)?;
                let session_id =
                    exec::ops::session_of(req.session_id.as_deref()).map_err(refused)?;
                let executed = exec::ops::execute(&self.exec, req, session_id).await;
                let mut answer = json_of(executed.map_err(refused)?)?;
                if let Some(fields) = answer.as_object_mut() {
                    fields.remove("duration");
                    fields.remove("sessionId");
                }
                Ok(capnweb::from_json(answer))
            }
            "executeStream" => {
                let body = self.command(&args)?;
                let command = args.string(0, "command")?;
                self.execute_stream(session, body, command).await
            }
            _ => Err(not_a_function("commands", method)),
        }
    }

    /// `files`: the file routes.
    async fn files(&self, session: &Arc<Session>, method: &str, mut args: Args) -> Answer {
        if method == "writeFile" {
            let (path, session_id) = (args.string(0, "path")?, args.optional_string(2));
            let content = args.take_string(1, "content")?;
            let body = with(
                args.object(3),
                [
                    ("path", Some(json!(path))),
                    ("content", Some(Value::String(content))),
                    ("sessionId", session_id.map(Value::from)),
                ],
            );
            return typed(body, |req| files::ops::write(&self.state.files, req)).await;
        }
        let sid = |index: usize| args.optional_string(index);
        match method {
            "readFile" => {
                let path = args.string(0, "path")?;
                let options = args.object(2);
                if options.get("encoding").and_then(Value::as_str) == Some("none") {
                    return self.read_raw(session, &path, sid(1).as_deref()).await;
                }
                let body = with(
                    options,
                    [
                        ("path", Some(json!(path))),
                        ("sessionId", sid(1).map(Value::from)),
                    ],
                );
                typed(body, |req| files::ops::read(&self.state.files, req)).await
            }
            "readFileStream" => {
                let path = args.string(0, "path")?;
                let opened = self
                    .state
                    .files
                    .open_for_stream(sid(1).as_deref(), &path)
                    .await;
                let opened = opened.op(Operation::FileRead).map_err(refused)?;
                session.open_sse_pipe(files::read_events(opened)).await
            }
            "writeFileStream" => {
                let path = args.string(0, "path")?;
                let chunks = pipe_chunks(session, args.0.get(1))?;
                self.write_raw(&path, chunks, sid(2).as_deref()).await
            }
            "deleteFile" => {
                let body = json!({ "path": args.string(0, "path")?, "sessionId": sid(1) });
                typed(body, |req| files::ops::delete(&self.state.files, req)).await
            }
            "renameFile" => {
                let (old, new) = (args.string(0, "oldPath")?, args.string(1, "newPath")?);
                let body = json!({ "oldPath": old, "newPath": new, "sessionId": sid(2) });
                let renamed = typed_body(body)?;
                let renamed = files::ops::rename(&self.state.files, renamed).await;
                let mut answer = json_of(renamed.map_err(refused)?)?;
                if let Some(fields) = answer.as_object_mut() {
                    fields.insert("oldPath".into(), json!(old));
                }
                Ok(capnweb::from_json(answer))
            }
            "moveFile" => {
                let body = json!({
                    "sourcePath": args.string(0, "sourcePath")?,
                    "destinationPath": args.string(1, "destinationPath")?,
                    "sessionId": sid(2),
                });
                typed(body, |req| files::ops::move_file(&self.state.files, req)).await
            }
            "mkdir" => {
                let body = with(
                    args.object(2),
                    [
                        ("path", Some(json!(args.string(0, "path")?))),
                        ("sessionId", sid(1).map(Value::from)),
                    ],
                );
                typed(body, |req| files::ops::mkdir(&self.state.files, req)).await
            }
            "listFiles" => {
                let body = json!({
                    "path": args.string(0, "path")?,
                    "sessionId": sid(1),
                    "options": Value::Object(args.object(2)),
                });
                typed(body, |req| files::ops::list(&self.state.files, req)).await
            }
            "exists" => {
                let body = json!({ "path": args.string(0, "path")?, "sessionId": sid(1) });
                typed(body, |req| files::ops::exists(&self.state.files, req)).await
            }
            _ => Err(not_a_function("files", method)),
        }
    }

    /// `processes`: background processes and their logs.
    async fn processes(&self, session: &Arc<Session>, method: &str, args: Args) -> Answer {
        let sid = |index: usize| args.optional_string(index);
        match method {
            "startProcess" => {
                let body = with(
                    args.object(2),
                    [
                        ("command", Some(json!(args.string(0, "command")?))),
                        ("sessionId", sid(1).map(Value::from)),
                    ],
                );
                typed(body, |req| process::ops::start(&self.process, req)).await
            }
            "listProcesses" => answer(process::ops::list(&self.process, None)),
            "getProcess" => answer(process::ops::get(&self.process, &args.string(0, "id")?)),
            "killProcess" => {
                let id = args.string(0, "id")?;
                answer(process::ops::kill(&self.process, id).await)
            }
            "killAllProcesses" => answer(Ok(process::ops::kill_all(&self.process).await)),
            "getProcessLogs" => {
                let id = args.string(0, "id")?;
                answer(process::ops::logs(&self.process, id, Since::default()).await)
            }
            "streamProcessLogs" => {
                let id = args.string(0, "id")?;
                // RPC's stream has no `process_info` event.
                let (_, live) = process::ops::log_events(&self.process, &id, Since::default())
                    .map_err(refused)?;
                session.open_sse_pipe(live).await
            }
            _ => Err(not_a_function("processes", method)),
        }
    }

    /// `ports`: a port watched until it is ready.
    async fn ports(&self, session: &Arc<Session>, method: &str, args: Args) -> Answer {
        match method {
            "watchPort" => {
                let req = typed_body(Value::Object(args.object(0)))?;
                let events =
                    crate::ports::readiness(&self.state.processes, req).map_err(refused)?;
                session.open_sse_pipe(events).await
            }
            _ => Err(not_a_function("ports", method)),
        }
    }

    /// `git`: a checkout.
    async fn git(&self, method: &str, args: Args) -> Answer {
        let sid = |index: usize| args.optional_string(index);
        match method {
            "checkout" => {
                let body = with(
                    args.object(2),
                    [
                        ("repoUrl", Some(json!(args.string(0, "repoUrl")?))),
                        ("sessionId", sid(1).map(Value::from)),
                    ],
                );
                let req = typed_body(body)?;
                answer(git::ops::checkout(&self.state.sessions, &self.state.paths, &req).await)
            }
            _ => Err(not_a_function("git", method)),
        }
    }

    /// `interpreter`: code contexts and code run in them.
    async fn interpreter(&self, session: &Arc<Session>, method: &str, args: Args) -> Answer {
        match method {
            "createCodeContext" => {
                let req = typed_body(Value::Object(args.object(0)))?;
                let created = interpreter::ops::create_context(
                    &self.state.interpreters,
                    &self.state.paths,
                    req,
                )
                .await;
                let answer = json_of(created.map_err(refused)?)?;
                Ok(context(&json!({
                    "id": answer.get("contextId"),
                    "language": answer.get("language"),
                    "cwd": answer.get("cwd"),
                    "createdAt": answer.get("createdAt"),
                    "lastUsed": answer.get("createdAt"),
                })))
            }
            "listCodeContexts" => {
                let answer = json_of(interpreter::ops::list_contexts(&self.state.interpreters))?;
                let contexts = answer.get("contexts").and_then(Value::as_array);
                let contexts: Vec<Value> = contexts.into_iter().flatten().map(context).collect();
                Ok(json!([contexts]))
            }
            "deleteCodeContext" => {
                let id = args.string(0, "contextId")?;
                interpreter::ops::delete_context(&self.state.interpreters, id)
                    .await
                    .map_err(refused)?;
                Ok(capnweb::undefined())
            }
            "streamCode" => session.open_sse_pipe(self.code_events(&args).await?).await,
            "runCodeStream" => self.run_code_stream(session, &args).await,
            _ => Err(not_a_function("interpreter", method)),
        }
    }

    /// `backup`: archives made, restored and uploaded.
    async fn backup(&self, method: &str, args: Args) -> Answer {
        let sid = |index: usize| args.optional_string(index);
        match method {
            "createArchive" => {
                let body = with(
                    args.object(3),
                    [
                        ("dir", Some(json!(args.string(0, "dir")?))),
                        ("archivePath", Some(json!(args.string(1, "archivePath")?))),
                        ("sessionId", sid(2).map(Value::from)),
                    ],
                );
                let req =
                    backup::operations::request(body, Operation::BackupCreate).map_err(refused)?;
                answer(backup::operations::create_archive(&self.backup, &req).await)
            }
            "restoreArchive" => {
                let body = json!({
                    "dir": args.string(0, "dir")?,
                    "archivePath": args.string(1, "archivePath")?,
                    "sessionId": sid(2),
                });
                let req =
                    backup::operations::request(body, Operation::BackupRestore).map_err(refused)?;
                answer(backup::operations::restore_archive(&self.backup, &req).await)
            }
            "uploadParts" => {
                let body = Value::Object(args.object(0));
                let req =
                    backup::operations::request(body, Operation::BackupCreate).map_err(refused)?;
                answer(backup::operations::upload_parts(&self.backup, &req).await)
            }
            _ => Err(not_a_function("backup", method)),
        }
    }

    /// `watch`: a watch's events and a check of a change token.
    async fn watch(&self, session: &Arc<Session>, method: &str, args: Args) -> Answer {
        match method {
            "watch" => {
                let req = typed_body(Value::Object(args.object(0)))?;
                let events = watch::events(&self.state.watches, &self.state.paths, &req)
                    .await
                    .map_err(refused)?;
                session.open_sse_pipe(events).await
            }
            "checkChanges" => {
                let body = Value::Object(args.object(0));
                let req = typed_body(body)?;
                answer(watch::changes(&self.state.watches, &self.state.paths, &req).await)
            }
            _ => Err(not_a_function("watch", method)),
        }
    }

    /// `tunnels`: runs of cloudflared and their exits.
    async fn tunnels(&self, session: &Arc<Session>, method: &str, args: Args) -> Answer {
        match method {
            "ensureTunnelRun" => {
                self.follow_tunnel_exits(session);
                let body = Value::Object(args.object(0));
                typed(body, |req| tunnels::ops::ensure(&self.state.tunnels, req)).await
            }
            "stopTunnelRun" => {
                let body = Value::Object(args.object(0));
                let req = typed_body(body)?;
                answer(Ok(tunnels::ops::stop(&self.state.tunnels, req).await))
            }
            "runQuickTunnel" => {
                let id = args.string(0, "id")?;
                let port = args.json(1).cloned().unwrap_or(Value::Null);
                self.run_tunnel(session, id, json!({ "mode": "quick", "port": port }))
                    .await
            }
            "runNamedTunnel" => {
                let (id, token) = (args.string(0, "id")?, args.string(1, "token")?);
                let port = args.json(2).cloned().unwrap_or(Value::Null);
                let body = json!({ "mode": "named", "token": token, "port": port });
                self.run_tunnel(session, id, body).await
            }
            "destroyTunnel" => {
                let id = args.string(0, "id")?;
                let runs = self.tunnel_runs().await?;
                let Some(run) = runs.iter().find(|run| run["tunnelId"] == id.as_str()) else {
                    let message = format!("Tunnel {id} is not running");
                    let details = json!({ "tunnelId": id });
                    return Err(capnweb::sandbox_error(
                        &message,
                        "TUNNEL_NOT_FOUND",
                        &details,
                    ));
                };
                let req = StopTunnelRequest {
                    tunnel_id: id.clone(),
                    run_id: run["runId"].as_str().unwrap_or_default().to_string(),
                };
                tunnels::ops::stop(&self.state.tunnels, req).await;
                Ok(json!({ "success": true, "id": id }))
            }
            "listTunnels" => {
                let runs = self.tunnel_runs().await?;
                let infos: Vec<Value> = runs.iter().map(tunnel_info).collect();
                Ok(capnweb::from_json(Value::Array(infos)))
            }
            _ => Err(not_a_function("tunnels", method)),
        }
    }

    /// `runQuickTunnel`/`runNamedTunnel`: a run whose tunnel and run ids are `id`, answered
    /// as the reference's `TunnelInfo`; an id already running is `TUNNEL_ALREADY_RUNNING`.
    async fn run_tunnel(&self, session: &Arc<Session>, id: String, mut body: Value) -> Answer {
        self.follow_tunnel_exits(session);
        body["tunnelId"] = json!(id);
        body["runId"] = json!(id);
        let named = body["mode"] == "named";
        let req = typed_body(body)?;
        let ensured = tunnels::ops::ensure(&self.state.tunnels, req).await;
        let answer = json_of(ensured.map_err(refused)?)?;
        if answer["started"] == false {
            let message = format!("Tunnel {id} is already running");
            let details = json!({ "tunnelId": id });
            return Err(capnweb::sandbox_error(
                &message,
                "TUNNEL_ALREADY_RUNNING",
                &details,
            ));
        }
        let mut info = tunnel_info(&answer["run"]);
        if named {
            // The object fills these in for named tunnels.
            info["url"] = json!("");
            info["hostname"] = json!("");
        }
        Ok(capnweb::from_json(info))
    }

    async fn tunnel_runs(&self) -> Result<Vec<Value>, Value> {
        let answer = json_of(tunnels::ops::list(&self.state.tunnels))?;
        Ok(answer["tunnels"].as_array().cloned().unwrap_or_default())
    }

    /// Tells the object of every cloudflared exit from now on (`onTunnelExit` on its main
    /// object), for as long as this connection lives: `(id, port, exitCode)` for runs of
    /// `run*Tunnel` (their run id is their tunnel id), `(tunnelId, port, exitCode, runId)`
    /// for `ensureTunnelRun`'s.
    fn follow_tunnel_exits(&self, session: &Arc<Session>) {
        let (mut exits, peer) = (self.state.tunnels.exits(), Arc::clone(session));
        session.hold_once("tunnel exits", async move {
            loop {
                let exit = match exits.recv().await {
                    Ok(exit) => exit,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                };
                let (tunnel, run) = (json!(exit.tunnel_id), json!(exit.run_id));
                let mut args = vec![tunnel.clone(), json!(exit.port), json!(exit.exit_code)];
                if tunnel != run {
                    args.push(run);
                }
                let path = vec!["onTunnelExit".to_string()];
                // Fire and forget, as the reference: an object that fails is not retried.
                let _ = peer.call_peer(0, path, args).await;
            }
        });
    }

    /// The body of `/api/execute` from `(command, sessionId, options)`.
    fn command(&self, args: &Args) -> Result<Value, Value> {
        Ok(with(
            args.object(2),
            [
                ("command", Some(json!(args.string(0, "command")?))),
                ("sessionId", args.optional_string(1).map(Value::from)),
            ],
        ))
    }

    /// `executeStream`: the command as a background process (the route's own), each event
    /// framed with its `event:` line; a command that cannot start is one `error` event.
    async fn execute_stream(&self, session: &Arc<Session>, body: Value, command: String) -> Answer {
        let started = async {
            let req: ExecuteRequest = parse_value(body).map_err(ApiError::from)?;
            let session_id = exec::ops::session_of(req.session_id.as_deref())?;
            exec::ops::execute_stream(&self.exec, req, session_id).await
        };
        let events = match started.await {
            Ok(events) => events,
            Err(error) => {
                error.log();
                let event = json!({ "type": "error", "error": error.message, "command": command, "timestamp": now() });
                let frame = sse_frame(Some("error"), &event);
                let pipe = session
                    .open_outgoing_pipe(futures_util::stream::once(async move { Ok(frame) }))
                    .await?;
                return Ok(capnweb::readable(pipe));
            }
        };
        let framed = events.map(|event| {
            let event = serde_json::to_value(&event).unwrap_or_default();
            let kind = event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("message");
            Ok(sse_frame(Some(kind), &event))
        });
        Ok(capnweb::readable(session.open_outgoing_pipe(framed).await?))
    }

    /// `readFile(…, {encoding: "none"})`: the file's bytes as a pipe, no cap.
    async fn read_raw(&self, session: &Arc<Session>, path: &str, sid: Option<&str>) -> Answer {
        let read = files::ops::read_chunks(&self.state.files, path, sid).await;
        let read = read.map_err(refused)?;
        let chunks = read
            .chunks
            .map(|chunk| chunk.map_err(|error| error.to_string()));
        let pipe = session.open_outgoing_pipe(chunks).await?;
        Ok(json!({
            "success": true,
            "content": capnweb::readable(pipe),
            "path": path,
            "size": read.size,
            "mimeType": read.mime_type,
            "timestamp": now(),
        }))
    }

    /// `writeFileStream`: the caller's pipe written atomically (as a raw upload).
    async fn write_raw(&self, path: &str, chunks: PipeChunks, sid: Option<&str>) -> Answer {
        let written =
            files::ops::write_chunks(&self.state.files, path.to_string(), sid, chunks, None);
        let mut answer = json_of(written.await.map_err(refused)?)?;
        // The path as the caller gave it, not as its session resolved it.
        if let Some(fields) = answer.as_object_mut() {
            fields.insert("path".into(), json!(path));
        }
        Ok(capnweb::from_json(answer))
    }

    /// `runCodeStream`: the code's events, each handed to the caller's callback in order
    /// (each call awaited), then the callbacks released and the call resolved.
    async fn run_code_stream(&self, session: &Arc<Session>, args: &Args) -> Answer {
        let callbacks = args.object(3);
        let stub = |name: &str| {
            callbacks
                .get(name)
                .and_then(|value| value.get(capnweb::EXPORT_KEY))
                .and_then(Value::as_i64)
        };
        let stubs = [
            ("stdout", stub("onStdout")),
            ("stderr", stub("onStderr")),
            ("result", stub("onResult")),
            ("error", stub("onError")),
        ];
        let answer = self.run_code_events(session, args, &stubs).await;
        for id in stubs.iter().filter_map(|(_, id)| *id) {
            session.release_peer(id, 1).await;
        }
        answer
    }

    /// The events of `(contextId, code, language)` run in its context (`streamCode` and
    /// `runCodeStream` alike).
    async fn code_events(
        &self,
        args: &Args,
    ) -> Result<futures_util::stream::BoxStream<'static, CodeEvent>, Value> {
        let body = json!({
            "context_id": args.optional_string(0),
            "code": args.string(1, "code")?,
            "language": args.optional_string(2),
        });
        let req = typed_body(body)?;
        interpreter::ops::execute_code(&self.state.interpreters, req)
            .await
            .map_err(refused)
    }

    async fn run_code_events(
        &self,
        session: &Arc<Session>,
        args: &Args,
        stubs: &[(&str, Option<i64>)],
    ) -> Answer {
        let mut events = self.code_events(args).await?;
        while let Some(event) = events.next().await {
            let Ok(event) = serde_json::to_value(&event) else {
                continue;
            };
            let kind = event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let Some(target) = stubs
                .iter()
                .find(|(name, _)| *name == kind)
                .and_then(|(_, id)| *id)
            else {
                continue;
            };
            let argument = match kind {
                "stdout" | "stderr" => json!({
                    "text": event.get("text"),
                    "timestamp": chrono::Utc::now().timestamp_millis(),
                }),
                "result" => {
                    let mut fields = Map::new();
                    for key in RESULT_KEYS {
                        let value = event.get(key).cloned().unwrap_or(Value::Null);
                        fields.insert(key.to_string(), capnweb::from_json(value));
                    }
                    Value::Object(fields)
                }
                _ => json!({
                    "name": event.get("ename"),
                    "message": event.get("evalue"),
                    "traceback": event.get("traceback"),
                }),
            };
            let argument = match kind {
                "result" => undefined_for_null(argument),
                _ => capnweb::from_json(argument),
            };
            session
                .call_peer(target, Vec::new(), vec![argument])
                .await?;
        }
        Ok(capnweb::undefined())
    }
}

/// What `onResult` is given: every format key, absent ones `undefined`.
const RESULT_KEYS: [&str; 10] = [
    "text",
    "html",
    "png",
    "jpeg",
    "svg",
    "latex",
    "markdown",
    "javascript",
    "json",
    "data",
];

/// An object whose `null` fields become `undefined`.
fn undefined_for_null(value: Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| {
                    let value = if value.is_null() {
                        capnweb::undefined()
                    } else {
                        value
                    };
                    (key, value)
                })
                .collect(),
        ),
        other => other,
    }
}

/// A tunnel run as the reference's `TunnelInfo`.
fn tunnel_info(run: &Value) -> Value {
    json!({
        "id": run["tunnelId"],
        "port": run["port"],
        "url": run.get("url").cloned().unwrap_or(json!("")),
        "hostname": run.get("hostname").cloned().unwrap_or(json!("")),
        "createdAt": run["startedAt"],
    })
}

/// Code contexts as RPC has them: dates as Dates.
fn context(info: &Value) -> Value {
    let date = |field: &str| {
        let millis = info
            .get(field)
            .and_then(Value::as_str)
            .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
            .map_or_else(
                || chrono::Utc::now().timestamp_millis(),
                |at| at.timestamp_millis(),
            );
        capnweb::date(millis)
    };
    json!({
        "id": info.get("id"),
        "language": info.get("language"),
        "cwd": info.get("cwd"),
        "createdAt": date("createdAt"),
        "lastUsed": date("lastUsed"),
    })
}

fn now() -> String {
    crate::time::now_rfc3339()
}

/// Runs a typed operation on a call's body: its answer as the object gets it, or its error.
async fn typed<Req, Res, Op>(body: Value, operation: impl FnOnce(Req) -> Op) -> Answer
where
    Req: DeserializeOwned,
    Res: Serialize,
    Op: std::future::Future<Output = Result<Res, ApiError>>,
{
    answer(operation(typed_body(body)?).await)
}

/// An operation's result as the object gets it.
fn answer(result: Result<impl Serialize, ApiError>) -> Answer {
    json_of(result.map_err(refused)?).map(capnweb::from_json)
}

/// A call's body as the typed request of its operation, refused as its route refuses it.
fn typed_body<T: DeserializeOwned>(body: Value) -> Result<T, Value> {
    parse_value(body).map_err(|error| refused(ApiError::from(error)))
}

/// An operation's answer as the JSON its route answers.
fn json_of(answer: impl Serialize) -> Answer {
    serde_json::to_value(answer)
        .map_err(|error| capnweb::js_error("Error", &format!("encoding the answer: {error}")))
}

/// An operation's error as the Error the object maps (its `code`, and its context as
/// `details`); logged as the routes log theirs.
fn refused(error: ApiError) -> Value {
    error.log();
    api_error(&error)
}

/// A failure of an operation as either SDK line's object maps it: its `code`, and its
/// context as `details`.
pub fn api_error(error: &ApiError) -> Value {
    capnweb::sandbox_error(&error.message, error.code.as_str(), &error.context)
}
