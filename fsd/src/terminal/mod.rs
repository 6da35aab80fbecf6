//! Terminals: PTYs running a program under a supervisor, their output in a log read by
//! cursor. `table` owns them, for both SDK lines: the next line's by id (`/ws/terminal`,
//! served by `output_socket`), and 0.12's one per session (`GET /ws/pty?sessionId=…[&cols&rows&shell]`,
//! started on first connect, as the reference's xterm addon expects it), which `sessions`
//! keeps and `connection` serves. `pty` opens PTYs.

mod connection;
mod frames;
mod output_socket;
mod pty;
mod routes;
mod sessions;
pub mod table;

pub use routes::router;
pub use sessions::SessionTerminals;
