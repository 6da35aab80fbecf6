//! The next line's `extensions` (docs/api.md, RPC: `extensions`). A package the object sends is
//! provisioned with Bun and run as a sidecar (`crate::extensions`), and `connect` answers a
//! stub that forwards each call, callback and release across the two capnweb sessions
//! (`rpc::forward`). The object's code interpreter is the one package not run that way:
//! fsd recognises it by its hash and serves it natively on its own code contexts (no
//! tarball, no sidecar start, results streamed as they come), with the sidecar's methods
//! (`createContext`, `listContexts`, `deleteContext`, `interruptContext`, `runCode` with
//! its `onEvent` callback, `__ping__`).

use std::collections::BTreeMap;
use std::sync::Arc;

use fsd_api::interpreter::ContextInfo;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::args::{Answer, options};
use crate::capnweb::forward::Forward;
use crate::capnweb::protocol::{self as capnweb, Arg};
use crate::capnweb::session::{Session, Settling, Target};
use crate::extensions::{ConnectOptions, ExtensionError};
use crate::interpreter::InterpreterService;
use crate::state::AppState;

/// The shipped interpreter sidecar (`@cloudflare/sandbox-interpreter-sidecar`
/// 0.0.0-c20b8cc3a8a6): the SHA-256 of its tarball, as the object names it.
const INTERPRETER_HASH: &str = "8f88475725e425f72f73a98698b92da764c8d63ec3a535ae2e0cff2ac86263c0";
const INTERPRETER_ID: &str = "cloudflare-sandbox-interpreter-sidecar";
const INTERPRETER_VERSION: &str = "0.0.0-c20b8cc3a8a6";

/// Serves `extensions.connect`, `health` and `stop`; `raw` are the arguments as sent (the
/// tarball's bytes sit inside the options object).
pub async fn call(
    state: &AppState,
    session: &Arc<Session>,
    method: &str,
    args: &[Arg],
    raw: Vec<Value>,
) -> Option<Answer> {
    let hash_arg = || match args.first() {
        Some(Arg::Json(Value::String(hash))) => hash.clone(),
        _ => String::new(),
    };
    Some(match method {
        "connect" => {
            let Some(fields) = options(args, 0) else {
                return Some(Err(capnweb::js_error(
                    "TypeError",
                    "connect takes an options object",
                )));
            };
            let hash = fields
                .get("packageHash")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            // The object connects before every use and never releases: one stub per
            // package and socket, given again.
            let key = format!("extension:{hash}");
            if hash == INTERPRETER_HASH {
                return Some(session.export_keyed(&key, || {
                    Arc::new(Interpreter {
                        service: Arc::clone(&state.interpreters),
                    })
                }));
            }
            let connect = match connect_options(&fields, raw) {
                Ok(connect) => connect,
                Err(error) => return Some(Err(error)),
            };
            match state.extensions.connect(&hash, connect).await {
                Ok(link) => {
                    // A sidecar started again is another link, and another stub.
                    let key = format!("{key}:{:p}", Arc::as_ptr(&link));
                    session.export_keyed(&key, || Forward::main(link))
                }
                Err(error) => Err(rpc_error(&error, &hash)),
            }
        }
        "health" => {
            let hash = hash_arg();
            if hash == INTERPRETER_HASH {
                return Some(Ok(json!({
                    "packageHash": hash,
                    "id": INTERPRETER_ID,
                    "version": INTERPRETER_VERSION,
                    "provisioned": true,
                    "running": true,
                    "pid": null,
                    "responsive": true,
                })));
            }
            let health = state.extensions.health(&hash).await;
            Ok(json!({
                "packageHash": hash,
                "id": health.id,
                "version": health.version,
                "provisioned": health.provisioned,
                "running": health.running,
                "pid": health.pid,
                "responsive": health.responsive,
            }))
        }
        "stop" => {
            state.extensions.stop(&hash_arg()).await;
            Ok(capnweb::undefined())
        }
        _ => return None,
    })
}

/// `connect`'s options: the tarball read from the expression as sent (bytes), the rest
/// from the decoded object.
fn connect_options(fields: &Map<String, Value>, raw: Vec<Value>) -> Result<ConnectOptions, Value> {
    let tarball = match raw.into_iter().next() {
        Some(Value::Object(mut sent)) => match sent.remove("tarball").map(capnweb::decode) {
            None | Some(Ok(Arg::Undefined)) => None,
            Some(Ok(Arg::Bytes(bytes))) => Some(bytes),
            Some(_) => {
                return Err(capnweb::js_error(
                    "TypeError",
                    "tarball must be a Uint8Array",
                ));
            }
        },
        _ => None,
    };
    let timeout = fields.get("readinessTimeoutMs");
    let readiness_timeout_ms = match timeout {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(ms) if ms > 0 => Some(ms),
            _ => {
                return Err(capnweb::js_error(
                    "TypeError",
                    "readinessTimeoutMs must be a positive number of milliseconds",
                ));
            }
        },
    };
    Ok(ConnectOptions {
        tarball,
        bin: fields
            .get("bin")
            .and_then(Value::as_str)
            .map(str::to_string),
        readiness_timeout_ms,
        allow_install_scripts: fields
            .get("allowInstallScripts")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// An extension's failure as the object reads it: the refusal it retries with a tarball
/// by its message (its name does not survive), everything else a plain `Error`.
fn rpc_error(error: &ExtensionError, hash: &str) -> Value {
    match error {
        ExtensionError::NotProvisioned(_) => json!([
            "error",
            "ExtensionTarballRequired",
            error.to_string(),
            null,
            { "packageHash": hash }
        ]),
        other => capnweb::js_error("Error", &other.to_string()),
    }
}

/// The interpreter sidecar's main object, on fsd's code contexts.
struct Interpreter {
    service: Arc<InterpreterService>,
}

impl Target for Interpreter {
    fn call(self: Arc<Self>, session: Arc<Session>, method: String, args: Vec<Arg>) -> Settling {
        Box::pin(async move {
            let text = |index: usize| match args.get(index) {
                Some(Arg::Json(Value::String(text))) => Some(text.clone()),
                _ => None,
            };
            let failed = |error: crate::interpreter::InterpreterError| {
                capnweb::js_error("Error", &error.to_string())
            };
            match method.as_str() {
                "__ping__" => Ok(json!("pong")),
                "createContext" => {
                    let options = options(&args, 0).unwrap_or_default();
                    let field = |name: &str| options.get(name).and_then(Value::as_str);
                    let context = self
                        .service
                        .create(field("language"), field("cwd"), BTreeMap::new())
                        .await
                        .map_err(failed)?;
                    let info = self
                        .service
                        .list()
                        .into_iter()
                        .find(|info| info.id == context.id);
                    Ok(info.map_or(Value::Null, |info| context_value(&info)))
                }
                "listContexts" => Ok(json!([self
                    .service
                    .list()
                    .iter()
                    .map(context_value)
                    .collect::<Vec<_>>()])),
                "deleteContext" => {
                    let id = text(0).unwrap_or_default();
                    self.service.delete(&id).await.map_err(failed)?;
                    Ok(capnweb::undefined())
                }
                "interruptContext" => {
                    let id = text(0).unwrap_or_default();
                    self.service.interrupt(&id).map_err(failed)?;
                    Ok(capnweb::undefined())
                }
                "runCode" => {
                    let Some(Arg::Export(on_event)) = args.get(3) else {
                        return Err(capnweb::js_error("TypeError", "onEvent must be a function"));
                    };
                    let on_event = *on_event;
                    let answer = self
                        .run_code(
                            &session,
                            text(0),
                            text(1).unwrap_or_default(),
                            text(2),
                            on_event,
                        )
                        .await;
                    session.release_peer(on_event, 1).await;
                    answer
                }
                _ => Err(capnweb::js_error(
                    "TypeError",
                    &format!("'{method}' is not a method of the interpreter."),
                )),
            }
        })
    }

    fn dispose(&self) {}
}

impl Interpreter {
    /// Runs `code`, awaiting `onEvent` for each event as the sidecar does, and resolves once
    /// the call is complete.
    async fn run_code(
        &self,
        session: &Arc<Session>,
        context: Option<String>,
        code: String,
        language: Option<String>,
        on_event: i64,
    ) -> Answer {
        let context = self
            .service
            .get(context.as_deref().unwrap_or_default())
            .map_err(|error| capnweb::js_error("Error", &error.to_string()))?;
        let (events, mut received) = mpsc::channel(64);
        let (started, starting) = oneshot::channel();
        let service = Arc::clone(&self.service);
        tokio::spawn(async move {
            service
                .execute(context, code, language.as_deref(), None, events, started)
                .await;
        });
        if let Ok(Err(error)) = starting.await {
            return Err(capnweb::js_error("Error", &error.to_string()));
        }
        while let Some(event) = received.recv().await {
            let value = serde_json::to_value(&event).unwrap_or(Value::Null);
            let value = match value {
                Value::Object(fields) => Value::Object(
                    fields
                        .into_iter()
                        .map(|(key, value)| (key, capnweb::from_json(value)))
                        .collect::<Map<String, Value>>(),
                ),
                other => other,
            };
            session.call_peer(on_event, Vec::new(), vec![value]).await?;
        }
        Ok(capnweb::undefined())
    }
}

/// A context as the sidecar answers it.
fn context_value(info: &ContextInfo) -> Value {
    json!({
        "id": info.id,
        "language": info.language,
        "cwd": info.cwd,
        "createdAt": info.created_at,
        "lastUsed": info.last_used,
    })
}
