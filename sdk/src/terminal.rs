//! A session's terminal (`/ws/pty`): keystrokes in, the screen's bytes out, window sizes,
//! and how the shell ended.

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::{Sandbox, SdkError};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What a terminal sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalEvent {
    /// Bytes for the screen, untouched (the first is the replay of what it showed before).
    Output(Bytes),
    /// The shell ended; the terminal closes after this.
    Exit { code: i32, signal: Option<String> },
    /// A control message was refused (`Invalid control message`, bad dimensions).
    Error(String),
}

/// An open terminal; [`Terminal::split`] gives a writer and a reader to use at once.
pub struct Terminal {
    writer: TerminalWriter,
    reader: TerminalReader,
}

/// Sends keystrokes and window sizes.
pub struct TerminalWriter {
    sink: SplitSink<Socket, Message>,
}

/// Receives what the terminal shows.
pub struct TerminalReader {
    stream: SplitStream<Socket>,
    /// The replay, handed out as the first event.
    replay: Option<Bytes>,
}

impl Sandbox {
    /// Opens the terminal of session `session_id` (its shell starts on the first connect,
    /// from the session's environment and directory, with `cols`×`rows` cells). Returns
    /// once the terminal is ready; what it showed before is the first [`TerminalEvent`].
    pub async fn terminal(
        &self,
        session_id: &str,
        cols: u16,
        rows: u16,
    ) -> Result<Terminal, SdkError> {
        let base = match self.base_url().strip_prefix("http://") {
            Some(rest) => format!("ws://{rest}"),
            None => {
                return Err(SdkError::InvalidUrl {
                    url: self.base_url().to_string(),
                    reason: "terminals need an http:// daemon (TLS WebSockets are not built in)"
                        .into(),
                });
            }
        };
        let mut url = reqwest::Url::parse(&format!("{base}/ws/pty")).map_err(|error| {
            SdkError::InvalidUrl {
                url: base.clone(),
                reason: error.to_string(),
            }
        })?;
        url.query_pairs_mut()
            .append_pair("sessionId", session_id)
            .append_pair("cols", &cols.to_string())
            .append_pair("rows", &rows.to_string());
        let socket = crate::ws::open(url.as_str(), self.token())
            .await
            .map_err(terminal_error)?;
        let (sink, mut stream) = socket.split();
        let mut replay = Vec::new();
        loop {
            match stream.next().await {
                Some(Ok(Message::Binary(bytes))) => replay.extend_from_slice(&bytes),
                Some(Ok(Message::Text(text))) => {
                    let message: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
                    match message["type"].as_str() {
                        Some("ready") => break,
                        Some("error") => {
                            let reason = message["message"].as_str().unwrap_or_default();
                            return Err(SdkError::Terminal(reason.to_string()));
                        }
                        _ => {}
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(terminal_error(error)),
                None => return Err(SdkError::Terminal("closed before it was ready".into())),
            }
        }
        Ok(Terminal {
            writer: TerminalWriter { sink },
            reader: TerminalReader {
                stream,
                replay: (!replay.is_empty()).then(|| Bytes::from(replay)),
            },
        })
    }
}

impl Terminal {
    pub fn split(self) -> (TerminalWriter, TerminalReader) {
        (self.writer, self.reader)
    }

    pub async fn write(&mut self, keys: &[u8]) -> Result<(), SdkError> {
        self.writer.write(keys).await
    }

    pub async fn resize(&mut self, cols: u16, rows: u16) -> Result<(), SdkError> {
        self.writer.resize(cols, rows).await
    }

    /// The next event; `None` once the terminal has closed.
    pub async fn next(&mut self) -> Option<TerminalEvent> {
        self.reader.next().await
    }
}

impl TerminalWriter {
    /// Sends keystrokes (bytes, as a terminal emulator produces them).
    pub async fn write(&mut self, keys: &[u8]) -> Result<(), SdkError> {
        self.sink
            .send(Message::Binary(Bytes::copy_from_slice(keys)))
            .await
            .map_err(terminal_error)
    }

    /// Sets the window size every program on the terminal sees.
    pub async fn resize(&mut self, cols: u16, rows: u16) -> Result<(), SdkError> {
        let message = json!({"type": "resize", "cols": cols, "rows": rows}).to_string();
        self.sink
            .send(Message::Text(message.into()))
            .await
            .map_err(terminal_error)
    }

    /// Closes this connection (the shell keeps running).
    pub async fn close(&mut self) -> Result<(), SdkError> {
        self.sink.close().await.map_err(terminal_error)
    }
}

impl TerminalReader {
    /// The next event; `None` once the terminal has closed.
    pub async fn next(&mut self) -> Option<TerminalEvent> {
        if let Some(replay) = self.replay.take() {
            return Some(TerminalEvent::Output(replay));
        }
        loop {
            match self.stream.next().await? {
                Ok(Message::Binary(bytes)) => return Some(TerminalEvent::Output(bytes)),
                Ok(Message::Text(text)) => {
                    let message: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
                    match message["type"].as_str() {
                        Some("exit") => {
                            return Some(TerminalEvent::Exit {
                                code: message["code"]
                                    .as_i64()
                                    .and_then(|c| i32::try_from(c).ok())
                                    .unwrap_or(-1),
                                signal: message["signal"].as_str().map(str::to_string),
                            });
                        }
                        Some("error") => {
                            let reason = message["message"].as_str().unwrap_or_default();
                            return Some(TerminalEvent::Error(reason.to_string()));
                        }
                        _ => {}
                    }
                }
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }
}

fn terminal_error(error: tungstenite::Error) -> SdkError {
    match error {
        tungstenite::Error::Http(response) => SdkError::Terminal(format!(
            "the daemon refused the terminal: HTTP {}",
            response.status()
        )),
        other => SdkError::Terminal(other.to_string()),
    }
}
