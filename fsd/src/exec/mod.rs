//! Sessions and command execution: persistent bash sessions that keep cwd, env, functions
//! and aliases; foreground commands serialized per session; sessionless one-shot commands.
//!
//! `routes` parses and answers; `request` checks what a command request says, for this
//! module's routes and the process routes alike; `sessions` owns the table; `session` runs commands and the
//! timeout policy; `shell` is one bash and its control FIFO; `script` is the bash text;
//! `world` is the one PID namespace all commands share, and `supervisor` the subreapers
//! (run as `fsd supervise`) that keep every command's tree findable.

mod error;
mod output;
pub mod proctree;
mod request;
mod routes;
mod script;
mod session;
mod sessions;
mod shell;
pub mod stop;
pub mod supervisor;
mod world;

pub use error::{ExecError, RequestError};
pub use request::{CommandRequest, DEFAULT_SESSION};
pub use routes::router;
pub use session::{CommandSpec, Session, Started};
pub use sessions::{ExecConfig, SessionManager, base_env};
pub use shell::Report;
pub use world::World;
