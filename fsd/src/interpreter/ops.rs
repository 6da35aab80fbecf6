//! The domain's typed operations: a request in, a response or an [`ApiError`] out, no HTTP.
//! The routes and the 0.12 `/rpc` are codecs over these (a call's event stream is the
//! transports' own).

use fsd_api::interpreter::{
    CreateContextRequest, CreateContextResponse, DeleteContextResponse, ListContextsResponse,
};

use crate::error::ApiError;
use crate::paths::Follow;
use crate::state::AppState;
use crate::wire::time::now_rfc3339;

/// Starts a code context in its language, directory and environment.
pub async fn create_context(
    state: &AppState,
    req: CreateContextRequest,
) -> Result<CreateContextResponse, ApiError> {
    if let Some(cwd) = req.cwd.as_deref().filter(|cwd| !cwd.is_empty()) {
        state.paths.in_workspace("cwd", cwd, Follow::Final)?;
    }
    let context = state
        .interpreters
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

pub fn list_contexts(state: &AppState) -> ListContextsResponse {
    ListContextsResponse {
        success: true,
        contexts: state.interpreters.list(),
        timestamp: now_rfc3339(),
    }
}

pub async fn delete_context(
    state: &AppState,
    id: String,
) -> Result<DeleteContextResponse, ApiError> {
    state.interpreters.delete(&id).await?;
    Ok(DeleteContextResponse {
        success: true,
        context_id: id,
        timestamp: now_rfc3339(),
    })
}
