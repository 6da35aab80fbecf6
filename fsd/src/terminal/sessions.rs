//! 0.12's terminals: one per session, started on first connect from the session's current
//! environment and directory, kept while its shell lives, ended with its session. Each is
//! a terminal of the one [`TerminalTable`], the next line's model; this keeps which is whose.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use fsd_process::{CommandSpec, ExecError, SessionManager};

use super::pty::Size;
use super::table::{TableError, Terminal, TerminalSpec, TerminalTable};

/// Output a session's terminal keeps to replay to a connection that joins later (the
/// reference's 256 KiB).
const REPLAY_BYTES: u64 = 256 * 1024;

/// Why a terminal could not start.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    #[error("{0}")]
    Session(#[from] ExecError),
    #[error("Failed to create PTY: {0}")]
    Start(#[from] TableError),
}

/// The sessions' terminals, by session id.
pub struct SessionTerminals {
    sessions: Arc<SessionManager>,
    table: Arc<TerminalTable>,
    /// Session id → terminal id.
    by_session: tokio::sync::Mutex<HashMap<String, String>>,
}

impl SessionTerminals {
    pub fn new(sessions: Arc<SessionManager>, table: Arc<TerminalTable>) -> Self {
        Self {
            sessions,
            table,
            by_session: tokio::sync::Mutex::default(),
        }
    }

    pub fn table(&self) -> &Arc<TerminalTable> {
        &self.table
    }

    /// The session's terminal, started if it has none (or its shell exited): `shell` on a
    /// PTY of `size`, with the session's environment and directory as they are now.
    pub async fn get_or_start(
        &self,
        session_id: &str,
        size: Size,
        shell: &str,
    ) -> Result<Arc<Terminal>, TerminalError> {
        let mut by_session = self.by_session.lock().await;
        if let Some(terminal) = by_session.get(session_id).and_then(|id| self.table.get(id))
            && terminal.running()
        {
            return Ok(terminal);
        }
        let session = self.sessions.get_or_create(session_id).await?;
        let (env, cwd) = self.snapshot(&session).await;
        let id = crate::random::uuid_v4();
        let spec = TerminalSpec {
            argv: vec![shell.to_string()],
            cwd: Some(cwd),
            env,
            cols: size.cols,
            rows: size.rows,
            buffer_bytes: REPLAY_BYTES,
            whole_env: true,
            listed: false,
        };
        self.table.create(id.clone(), spec).await?;
        let terminal = self
            .table
            .get(&id)
            .ok_or_else(|| TableError::NotFound(id.clone()))?;
        by_session.insert(session_id.to_string(), id);
        Ok(terminal)
    }

    /// Ends the session's terminal (the session was deleted): the shell and everything it
    /// started.
    pub async fn end(&self, session_id: &str) {
        let id = self.by_session.lock().await.remove(session_id);
        if let Some(id) = id {
            self.table.end(&id).await;
        }
    }

    /// Ends every session's terminal (shutdown).
    pub async fn shutdown(&self) {
        let ids: Vec<String> = self.by_session.lock().await.keys().cloned().collect();
        for id in ids {
            self.end(&id).await;
        }
    }

    /// The session's environment and directory now, read through its shell (an empty
    /// environment and the workspace when that fails, as the reference does).
    async fn snapshot(&self, session: &fsd_process::Session) -> (Vec<(String, String)>, PathBuf) {
        let spec = CommandSpec {
            command: "env -0".into(),
            ..CommandSpec::default()
        };
        let env = match session.exec(&spec, None).await {
            Ok(finished) => finished
                .stdout
                .split(|&byte| byte == 0)
                .filter_map(|pair| {
                    let pair = std::str::from_utf8(pair).ok()?;
                    let (name, value) = pair.split_once('=')?;
                    Some((name.to_string(), value.to_string()))
                })
                .filter(|(name, _)| name != "_" && name != "SHLVL")
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "cannot read the session's environment for a terminal");
                Vec::new()
            }
        };
        // A session that moved out of a confined workspace opens its terminal in the
        // workspace, where a confined command may start.
        let config = self.sessions.config();
        let cwd = session
            .cwd()
            .filter(|cwd| config.world.admits(cwd))
            .unwrap_or_else(|| config.workspace.clone());
        (env, cwd)
    }
}
