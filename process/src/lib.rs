//! The sandbox's process world, with no HTTP: session shells that run commands one at a
//! time, background processes and their output, supervisors that keep every tree a
//! command starts findable, kills that take whole trees, and the PID namespace commands
//! live in. The daemon's exec, process, terminal, interpreter and git routes sit on it.
//!
//! [`World`] starts programs under a supervisor (in the sandbox's PID namespace when it
//! has one); [`SessionManager`] owns the sessions (creating, replacing a dead one,
//! deleting); [`Session`] runs one command at a time in its shell; [`ProcessTable`] holds
//! every process, whichever line started it, each a record and a
//! [`seqlog::SequencedLog`] on disk; [`ProcessService`] starts 0.12's background processes
//! through sessions and [`argv::ArgvProcesses`] the next line's from an argv (no shell);
//! `stop` and `proctree` find and end trees.

pub mod argv;
pub mod background;
mod error;
pub mod log;
mod output;
pub mod proctree;
pub mod reporting;
mod script;
mod script_names;
pub mod seqlog;
mod session;
mod sessions;
mod shell;
pub mod spawner;
pub mod stdin;
pub mod stop;
pub mod supervisor;
pub mod table;
mod tail;
pub mod text;
mod time;
mod wake;
mod world;

pub use background::{Live, Logs, ProcessService, Since};
pub use error::{ExecError, ProcessError, StdinError, StreamedStdinError};
pub use script::valid_env_name;
pub use session::{CommandSpec, Finished, Session, Started, Streamed};
pub use sessions::{ExecConfig, SessionManager, SessionOptions, base_env};
pub use shell::Report;
pub use stdin::Stdin;
pub use table::{Process, ProcessTable};
pub use tail::Stream;
pub use world::{Isolation, World};
