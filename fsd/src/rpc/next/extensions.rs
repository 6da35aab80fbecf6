//! The next line's `extensions` (`reference-next.md` §4.11). The object provisions its code
//! interpreter as a sidecar package; fsd recognises that package by its hash and serves it
//! natively on its own code contexts (no tarball, no Bun sidecar, results streamed as they
//! come): `connect` answers an object of ours with the sidecar's methods (`createContext`,
//! `listContexts`, `deleteContext`, `interruptContext`, `runCode` with its `onEvent`
//! callback, `__ping__`). Any other package is answered as the reference answers one not
//! provisioned; a package sent with its tarball is refused, since fsd does not run
//! arbitrary sidecars yet.

use std::collections::BTreeMap;
use std::sync::Arc;

use fsd_api::interpreter::ContextInfo;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::args::{Answer, options};
use crate::interpreter::InterpreterService;
use crate::rpc::session::{Session, Settling, Target};
use crate::rpc::wire::{self, Arg};
use crate::state::AppState;

/// The shipped interpreter sidecar (`@cloudflare/sandbox-interpreter-sidecar`
/// 0.0.0-c20b8cc3a8a6): the SHA-256 of its tarball, as the object names it.
const INTERPRETER_HASH: &str = "8f88475725e425f72f73a98698b92da764c8d63ec3a535ae2e0cff2ac86263c0";
const INTERPRETER_ID: &str = "cloudflare-sandbox-interpreter-sidecar";
const INTERPRETER_VERSION: &str = "0.0.0-c20b8cc3a8a6";

/// Serves `extensions.connect`, `health` and `stop`.
pub async fn call(
    state: &AppState,
    session: &Arc<Session>,
    method: &str,
    args: &[Arg],
) -> Option<Answer> {
    Some(match method {
        "connect" => {
            let options = options(args, 0).unwrap_or_default();
            let hash = options
                .get("packageHash")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if hash == INTERPRETER_HASH {
                let target: Arc<dyn Target> = Arc::new(Interpreter {
                    service: Arc::clone(&state.interpreters),
                });
                session.export(target)
            } else if options.contains_key("tarball") {
                Err(wire::js_error(
                    "Error",
                    &format!(
                        "Extension package '{hash}' cannot be run: fsd serves the interpreter \
                         extension natively and runs no other sidecar yet"
                    ),
                ))
            } else {
                Err(json!([
                    "error",
                    "ExtensionTarballRequired",
                    format!(
                        "Extension package '{hash}' is not provisioned; resend connect() with tarball bytes"
                    ),
                    null,
                    { "packageHash": hash }
                ]))
            }
        }
        "health" => {
            let hash = match args.first() {
                Some(Arg::Json(Value::String(hash))) => hash.clone(),
                _ => String::new(),
            };
            let known = hash == INTERPRETER_HASH;
            Ok(json!({
                "packageHash": hash,
                "id": if known { INTERPRETER_ID } else { "" },
                "version": if known { INTERPRETER_VERSION } else { "" },
                "provisioned": known,
                "running": known,
                "pid": null,
                "responsive": known,
            }))
        }
        "stop" => Ok(wire::undefined()),
        _ => return None,
    })
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
                wire::js_error("Error", &error.to_string())
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
                    Ok(wire::undefined())
                }
                "interruptContext" => {
                    let id = text(0).unwrap_or_default();
                    self.service.interrupt(&id).map_err(failed)?;
                    Ok(wire::undefined())
                }
                "runCode" => {
                    let Some(Arg::Export(on_event)) = args.get(3) else {
                        return Err(wire::js_error("TypeError", "onEvent must be a function"));
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
                _ => Err(wire::js_error(
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
            .map_err(|error| wire::js_error("Error", &error.to_string()))?;
        let (events, mut received) = mpsc::channel(64);
        let (started, starting) = oneshot::channel();
        let service = Arc::clone(&self.service);
        tokio::spawn(async move {
            service
                .execute(context, code, language.as_deref(), None, events, started)
                .await;
        });
        if let Ok(Err(error)) = starting.await {
            return Err(wire::js_error("Error", &error.to_string()));
        }
        while let Some(event) = received.recv().await {
            let value = serde_json::to_value(&event).unwrap_or(Value::Null);
            let value = match value {
                Value::Object(fields) => Value::Object(
                    fields
                        .into_iter()
                        .map(|(key, value)| (key, wire::from_json(&value)))
                        .collect::<Map<String, Value>>(),
                ),
                other => other,
            };
            session.call_peer(on_event, Vec::new(), vec![value]).await?;
        }
        Ok(wire::undefined())
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
