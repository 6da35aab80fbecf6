//! Terminals: `GET /ws/pty?sessionId=…[&cols&rows&shell]` upgrades to a WebSocket on the
//! session's PTY (one per session, started on first connect), as the reference's xterm
//! addon expects it.
//!
//! `ring` keeps what a terminal showed for the replay; `pty` opens PTYs and starts shells
//! on them in the sandbox's process world; `service` owns the terminals; `connection`
//! serves one socket; `table` holds the SDK next line's terminals, by id, and
//! `output_socket` serves `/ws/terminal` on them.

mod connection;
mod frames;
mod output_socket;
mod pty;
mod ring;
mod routes;
mod service;
pub mod table;

pub use routes::router;
pub use service::TerminalService;
