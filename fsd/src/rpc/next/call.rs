//! Which domain serves a next-line call.

use std::sync::Arc;

use super::args::Answer;
use super::{
    backup, extensions, files, mounts, processes, readiness, terminals, tunnels, workspace,
};
use crate::capnweb::protocol::Arg;
use crate::capnweb::session::Session;
use crate::state::AppState;

/// Serves `domain.method` for an activated next socket; `None` when it is not served.
pub async fn call(
    state: &AppState,
    session: &Arc<Session>,
    domain: &str,
    method: &str,
    args: Vec<Arg>,
    raw: Vec<serde_json::Value>,
) -> Option<Answer> {
    match domain {
        "files" => files::call(state, session, method, args).await,
        "backup" => backup::call(state, method, &args).await,
        "mounts" => mounts::call(state, method, &args).await,
        "extensions" => extensions::call(state, session, method, &args, raw).await,
        "processes" => processes::call(state, session, method, args).await,
        "ports" | "watch" => readiness::call(state, session, domain, method, args).await,
        "tunnels" => tunnels::call(state, method, &args).await,
        "workspace" => workspace::call(state, method, &args).await,
        "terminals" => terminals::call(state, session, method, &args).await,
        _ => None,
    }
}
