//! Which directory a relative path in a request means: the session's, or the workspace.

use crate::state::AppState;

/// A relative path in a request that names a live session resolves against that session's
/// current directory (as the reference does); otherwise against the workspace. Invalid paths
/// are passed through unchanged so the service rejects them naming the field.
pub async fn in_session(
    state: &AppState,
    session_id: Option<&str>,
    field: &'static str,
    raw: &str,
) -> String {
    let relative =
        !std::path::Path::new(raw).is_absolute() && super::paths::validate(field, raw).is_ok();
    match session_id {
        Some(id) if relative && id != fsd_api::DISABLE_SESSION_TOKEN => {
            match state.sessions.cwd_of(id).await {
                Some(cwd) => cwd.join(raw).display().to_string(),
                None => raw.to_string(),
            }
        }
        _ => raw.to_string(),
    }
}
