//! Sessions and command execution: `/api/session/*`, `/api/execute`, `/api/execute/stream`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Quotes `value` for bash as printable ASCII: `'…'`, or `$'…'` with escapes when it holds
/// control characters or anything beyond ASCII. A newline must never split a command line,
/// and the driver reads a line as a count of characters, which is a count of bytes only
/// for ASCII (in a UTF-8 locale bash counts characters).
pub fn quote(value: &str) -> String {
    if value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        return format!("'{}'", value.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for byte in value.bytes() {
        match byte {
            b'\\' => out.push_str(r"\\"),
            b'\'' => out.push_str(r"\'"),
            b'\n' => out.push_str(r"\n"),
            b'\r' => out.push_str(r"\r"),
            b'\t' => out.push_str(r"\t"),
            b' ' => out.push(' '),
            b if b.is_ascii_graphic() => out.push(char::from(b)),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('\'');
    out
}

/// The line a session shell runs for a command given as words, as `kubectl exec` and
/// `docker exec` pass them: one word is a shell line as it is (`'cd src && make'`, as ssh
/// runs it); several are each quoted, so each arrives as written (`python3 -c
/// 'print("a  b")'` prints `a  b`; joined with spaces, as ssh joins them, it was a syntax
/// error). A word of only plain characters (`ls`, `-la`, `a/b.txt`) goes bare.
pub fn command_line(words: &[String]) -> String {
    if let [line] = words {
        return line.clone();
    }
    let plain = |word: &str| {
        !word.is_empty()
            && word
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-./=:,+@%^".contains(&b))
    };
    words
        .iter()
        .map(|word| {
            if plain(word) {
                word.clone()
            } else {
                quote(word)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_timeout_ms: Option<u64>,
}

/// What fsd says about a session (the reference sends an unstable internal object here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub id: String,
    pub cwd: String,
    pub shell_pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_timeout_ms: Option<u64>,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionResponse {
    pub success: bool,
    pub id: String,
    pub data: SessionInfo,
    pub container_placement_id: Option<String>,
    pub timestamp: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsResponse {
    pub success: bool,
    /// Session ids.
    pub data: Vec<String>,
    pub timestamp: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteSessionRequest {
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteSessionResponse {
    pub success: bool,
    pub session_id: String,
    pub timestamp: String,
}

/// `POST /api/execute` and `/api/execute/stream`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteRequest {
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Per-command variables; `null` values are skipped, as the reference does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `user` or `internal`; logging only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    /// fsd's own, for `/api/execute/stream`: run the command in the session's shell, as
    /// `/api/execute` does (so `cd` and `export` persist, and it waits its turn), streaming
    /// its output; no process record is made, `timeoutMs` applies, and the `start` event's
    /// `commandId` addresses `/api/execute/signal`. Without it the stream runs as the
    /// reference runs it: a background process with a copy of the session's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreground: Option<bool>,
    /// fsd's own: text the command reads on stdin (then end of file); without it, stdin is
    /// `/dev/null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// fsd's own: bytes the command reads on stdin, base64; not with `stdin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_base64: Option<String>,
    /// fsd's own, with `foreground` on `/api/execute/stream`: the command reads a pipe that
    /// `POST /api/execute/stdin` writes as the caller's input comes (the `start` event's
    /// `commandId` addresses it), until it is closed; not with `stdin` or `stdinBase64`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin_pipe: bool,
}

/// A finished foreground command.
///
/// `stdout` and `stderr` are the exact bytes when they are UTF-8. When they are not, the
/// string is the lossy decoding (for clients that only read it) and `stdoutBase64` /
/// `stderrBase64` carry the exact bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecResult {
    pub success: bool,
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_base64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_base64: Option<String>,
    /// Output beyond the cap was dropped (the cap is in docs/api.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub command: String,
    /// Milliseconds from start to exit, measured by the daemon.
    pub duration: u64,
    pub timestamp: String,
    pub session_id: String,
}

/// `POST /api/execute` with `background: true`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundStarted {
    pub success: bool,
    pub process_id: String,
    pub pid: u32,
    pub command: String,
    pub timestamp: String,
}

/// One SSE frame of `/api/execute/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ExecEvent {
    #[serde(rename_all = "camelCase")]
    Start {
        command: String,
        timestamp: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        process_id: Option<String>,
        /// fsd's own, on a `foreground` stream: the command's id within its session, for
        /// `/api/execute/signal`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command_id: Option<String>,
    },
    Stdout {
        data: String,
        timestamp: String,
    },
    Stderr {
        data: String,
        timestamp: String,
    },
    #[serde(rename_all = "camelCase")]
    Complete {
        exit_code: i32,
        timestamp: String,
    },
    #[serde(rename_all = "camelCase")]
    Error {
        error: String,
        timestamp: String,
        /// fsd's own: the wire error code (`COMMAND_EXECUTION_ERROR`, `SESSION_TERMINATED`,
        /// …), as `/api/execute` would have answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// fsd's own: the command ran past `timeoutMs` and was stopped.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        timed_out: bool,
        /// fsd's own: the status the session's shell exited with, when the command ended
        /// it (`exit 5`: `SESSION_TERMINATED`, and the next command starts a fresh shell).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
    },
}

/// `POST /api/execute/signal` (fsd's own): a signal for the command a `foreground` stream
/// runs, as its `start` event named it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandSignalRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub command_id: String,
    /// By name (`SIGINT`, `INT`, any case) or number.
    pub signal: serde_json::Value,
}

/// `POST /api/execute/stdin` (fsd's own): bytes for the stdin of the command a
/// `foreground` stream runs with `stdinPipe`, as `/api/process/{id}/stdin` writes a
/// background process's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandStdinRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub command_id: String,
    #[serde(flatten)]
    pub write: crate::process::StdinRequest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandStdinResponse {
    pub success: bool,
    pub session_id: String,
    pub command_id: String,
    /// Bytes written.
    pub written: u64,
    /// Whether stdin is now closed.
    pub closed: bool,
    pub timestamp: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandSignalResponse {
    pub success: bool,
    pub session_id: String,
    pub command_id: String,
    /// The signal's name, as `SIGINT`.
    pub signal: String,
    /// Whether the command was still running (a signal for one that has ended is dropped).
    pub running: bool,
    pub timestamp: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_arrive_as_written_and_one_word_is_a_line() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(command_line(&words(&["cd src && make"])), "cd src && make");
        assert_eq!(
            command_line(&words(&["ls", "-la", "a/b.txt"])),
            "ls -la a/b.txt"
        );
        assert_eq!(
            command_line(&words(&["python3", "-c", "print(\"a  b\")"])),
            "python3 -c 'print(\"a  b\")'"
        );
        assert_eq!(
            command_line(&words(&["echo", "it's", "", "a;b"])),
            r"echo 'it'\''s' '' 'a;b'"
        );
        assert_eq!(
            command_line(&words(&["python3", "-c", "import sys\nprint(1)"])),
            r"python3 -c $'import sys\nprint(1)'"
        );
    }
}
