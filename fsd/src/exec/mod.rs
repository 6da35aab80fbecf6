//! Sessions and command execution: persistent bash sessions that keep cwd, env, functions
//! and aliases; foreground commands serialized per session; sessionless one-shot commands.
//!
//! `routes` parses and answers; `sessions` owns the table; `session` runs commands and the
//! timeout policy; `shell` is one bash and its control FIFO; `script` is the bash text.

mod error;
mod isolation;
pub mod proctree;
mod routes;
mod script;
mod session;
mod sessions;
mod shell;

use axum::Router;
use axum::routing::{get, post};

pub use error::ExecError;
pub use isolation::Isolation;
pub use routes::{DEFAULT_SESSION, command_spec};
pub use session::{CommandSpec, Session, Started};
pub use sessions::{ExecConfig, SessionManager, base_env};
pub use shell::Report;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/session/create", post(routes::create_session))
        .route("/api/session/list", get(routes::list_sessions))
        .route("/api/session/delete", post(routes::delete_session))
        .route("/api/execute", post(routes::execute))
        .route("/api/execute/stream", post(routes::execute_stream))
}
