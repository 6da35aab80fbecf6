//! Reading an output file as a command writes it: what was appended since the last read,
//! as bytes and as text that never cuts a character in two. Background processes and
//! streamed foreground commands both follow their output this way.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::script_names::ScriptNames;
use crate::text::Utf8Chunker;

/// Which output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// How often a followed output file is read besides inotify's wake-ups (for what inotify
/// cannot tell, and where a watch could not be set).
pub const POLL: Duration = Duration::from_millis(20);

/// The most one read takes, so one busy stream cannot hold its follower for long.
const READ_BYTES: u64 = 4 * 1024 * 1024;

/// New output of one file.
pub struct Appended {
    pub bytes: Vec<u8>,
    /// The whole characters so far (a character cut at the end waits for the next read).
    pub text: String,
}

/// One output file being followed.
pub struct OutputTail {
    path: PathBuf,
    /// Opened at the first read and kept: a wake-up per write must not cost an open.
    file: Option<std::fs::File>,
    /// How far the file has been read.
    offset: u64,
    /// For stderr: the session's script names, rewritten as bash's own.
    names: Option<ScriptNames>,
    text: Utf8Chunker,
}

impl OutputTail {
    pub fn new(path: &Path, stream: Stream) -> Self {
        Self {
            path: path.to_path_buf(),
            file: None,
            offset: 0,
            names: match stream {
                Stream::Stderr => ScriptNames::beside(path),
                Stream::Stdout => None,
            },
            text: Utf8Chunker::default(),
        }
    }

    /// Up to 4 MiB appended since the last read; `None` when there is nothing new (or the
    /// file is not there yet).
    pub fn read(&mut self) -> Option<Appended> {
        if self.file.is_none() {
            self.file = std::fs::File::open(&self.path).ok();
        }
        let file = self.file.as_mut()?;
        file.seek(SeekFrom::Start(self.offset)).ok()?;
        let mut bytes = Vec::new();
        file.take(READ_BYTES).read_to_end(&mut bytes).ok()?;
        if bytes.is_empty() {
            return None;
        }
        self.offset += bytes.len() as u64;
        let bytes = match &mut self.names {
            Some(names) => names.push(&bytes),
            None => bytes,
        };
        let text = self.text.push(&bytes);
        Some(Appended { bytes, text })
    }

    /// What is held back at the end (a line's start that may have been a script's name,
    /// the rest of a character, as U+FFFD), once nothing more will come: the bytes not
    /// answered before (the held line's) and the text.
    pub fn finish(&mut self) -> (Vec<u8>, String) {
        let held = self
            .names
            .as_mut()
            .map(ScriptNames::finish)
            .unwrap_or_default();
        let mut text = String::new();
        if !held.is_empty() {
            text = self.text.push(&held);
        }
        text.push_str(&self.text.finish());
        (held, text)
    }
}
