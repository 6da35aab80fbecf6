//! The domain's typed operations: a request in, a response or an [`ApiError`] out, no HTTP.
//! The routes and the 0.12 `/rpc` are codecs over these; a call's events are framed by each
//! transport its own way.

use std::sync::Arc;
use std::time::Duration;

use fsd_api::interpreter::{
    CodeEvent, CreateContextRequest, CreateContextResponse, DeleteContextResponse,
    ExecuteCodeRequest, ListContextsResponse,
};
use futures_util::stream::{BoxStream, StreamExt};

use super::InterpreterService;
use super::error::InterpreterError;
use super::wire_error::code_execution_error;
use crate::channel::receiver_stream;
use crate::error::ApiError;
use crate::paths::{Follow, Paths};
use crate::time::now_rfc3339;

/// Starts a code context in its language, directory and environment.
pub async fn create_context(
    interpreters: &Arc<InterpreterService>,
    paths: &Paths,
    req: CreateContextRequest,
) -> Result<CreateContextResponse, ApiError> {
    if let Some(cwd) = req.cwd.as_deref().filter(|cwd| !cwd.is_empty()) {
        paths.in_workspace("cwd", cwd, Follow::Final)?;
    }
    let context = interpreters
        .create(
            req.language.as_deref(),
            req.cwd.as_deref(),
            req.env_vars.unwrap_or_default(),
        )
        .await?;
    Ok(CreateContextResponse {
        success: true,
        context_id: context.id.clone(),
        language: context.language.name().to_string(),
        cwd: context.cwd.display().to_string(),
        created_at: context.created_at.clone(),
        timestamp: now_rfc3339(),
    })
}

pub fn list_contexts(interpreters: &InterpreterService) -> ListContextsResponse {
    ListContextsResponse {
        success: true,
        contexts: interpreters.list(),
        timestamp: now_rfc3339(),
    }
}

pub async fn delete_context(
    interpreters: &InterpreterService,
    id: String,
) -> Result<DeleteContextResponse, ApiError> {
    interpreters.delete(&id).await?;
    Ok(DeleteContextResponse {
        success: true,
        context_id: id,
        timestamp: now_rfc3339(),
    })
}

/// Events buffered between a call and its reader.
const EVENT_QUEUE: usize = 256;

/// Runs code in its context: the call's events as they come (output as it is produced,
/// then exactly one `execution_complete` or `error`). A call that cannot start is an error
/// (see [`code_execution_error`]). The call goes on if the reader leaves, so its context
/// stays consistent.
pub async fn execute_code(
    interpreters: &Arc<InterpreterService>,
    req: ExecuteCodeRequest,
) -> Result<BoxStream<'static, CodeEvent>, ApiError> {
    let context = interpreters
        .get(&req.context_id)
        .map_err(code_execution_error)?;
    let (sender, receiver) = tokio::sync::mpsc::channel(EVENT_QUEUE);
    let (started, start) = tokio::sync::oneshot::channel();
    let service = Arc::clone(interpreters);
    let timeout = req
        .timeout_ms
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis);
    tokio::spawn(async move {
        service
            .execute(
                context,
                req.code,
                req.language.as_deref(),
                timeout,
                sender,
                started,
            )
            .await;
    });
    let started = start.await.unwrap_or_else(|_| {
        Err(InterpreterError::Protocol(
            "the call ended before it started".into(),
        ))
    });
    started.map_err(code_execution_error)?;
    Ok(receiver_stream(receiver).boxed())
}
