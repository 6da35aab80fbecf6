//! `POST /api/write` with large base64 content: decoded and written while the body arrives.
//!
//! A 1 MiB base64 write spends about as long arriving over loopback as the disk takes to
//! store it; done one after the other, fsd was slower than the runtime it replaces. When the
//! body is large and its `content` is a plain base64 string after `path`, the content goes,
//! as it arrives, to a writer thread that decodes it into the temp file of the atomic write.
//! Once the whole body is in, the other fields are parsed from the body without its content,
//! and the write is committed only if they confirm what was assumed (base64, the same
//! target). Anything else (another encoding, JSON escapes, bad base64, fields in another
//! order, a device or FIFO as target) drops the temp file and hands the whole body to the
//! ordinary path, so answers and errors are always the ones that path gives.

use axum::extract::Request;
use base64_simd::STANDARD as BASE64;
use bytes::Bytes;
use fsd_api::files::{Encoding, WriteResponse, mode_digits};
use futures_util::StreamExt;
use serde::Deserialize;
use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::Arc;
use tokio::sync::mpsc;

use super::FileService;
use super::atomic::Destination;
use super::permissions::ModeSpec;
use super::service::blocking;
use crate::error::ApiError;
use crate::time::now_rfc3339;
use crate::wire::json::{BodyError, MAX_JSON_BODY_BYTES, body_read_error};

/// Bodies smaller than this are parsed whole: there is little transfer to overlap.
const STREAM_FROM_BYTES: usize = 64 * 1024;
/// `content` must start within this many bytes of the body.
const PREFIX_LIMIT: usize = 4096;
/// Content bytes checked for the base64 alphabet before a temp file is created, so a large
/// text write (which has a space or an escape early) never creates one.
const ALPHABET_PROBE: usize = 4096;
/// Chunks queued for the writer thread before the reader waits for it.
const WRITER_QUEUE_CHUNKS: usize = 64;

/// What the body turned out to be.
pub enum Received {
    /// The content was written while it arrived, and committed.
    Written(WriteResponse),
    /// The whole body, for the ordinary path.
    Body(Vec<u8>),
}

/// Reads the body of a write, writing base64 content as it arrives where it can.
pub async fn receive(files: &Arc<FileService>, request: Request) -> Result<Received, ApiError> {
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
    let mut phase = match declared {
        // Too large a body is refused once it has passed the limit, as the other JSON routes
        // do (refused before it is read, a client still sending gets a broken pipe).
        Some(len) if (STREAM_FROM_BYTES..=MAX_JSON_BODY_BYTES).contains(&len) => {
            Phase::Locating { head: Vec::new() }
        }
        _ => Phase::Off,
    };
    // The chunks are kept as they came (no copy); the body is joined only for the ordinary path.
    let mut chunks = Vec::new();
    let mut total = 0;
    let mut data = request.into_body().into_data_stream();
    while let Some(chunk) = data.next().await {
        let chunk = chunk.map_err(body_read_error)?;
        total += chunk.len();
        if total > MAX_JSON_BODY_BYTES {
            return Err(BodyError::TooLarge.into());
        }
        chunks.push(chunk.clone());
        phase = phase.advance(files, chunk).await;
    }
    if let Phase::Ended {
        head,
        tail,
        target,
        writer,
    } = phase
        && let Some(response) = finish(files, &head, &tail, target, writer).await
    {
        return Ok(Received::Written(response));
    }
    let mut body = Vec::with_capacity(total);
    for chunk in chunks {
        body.extend_from_slice(&chunk);
    }
    Ok(Received::Body(body))
}

/// The writer thread's answer: the open temp file and the bytes decoded into it.
type Writer = tokio::task::JoinHandle<Option<(Destination, u64)>>;

enum Phase {
    /// Looking for where `content` starts in the body so far.
    Locating { head: Vec<u8> },
    /// Sending content to the writer as it arrives; `head` is the body before it.
    Streaming {
        head: Vec<u8>,
        target: String,
        sender: mpsc::Sender<Bytes>,
        writer: Writer,
    },
    /// The content has ended; `tail` is the body from its closing quote on.
    Ended {
        head: Vec<u8>,
        tail: Vec<u8>,
        target: String,
        writer: Writer,
    },
    /// The ordinary path will parse the whole body.
    Off,
}

impl Phase {
    /// Takes in the next chunk of the body.
    async fn advance(self, files: &Arc<FileService>, chunk: Bytes) -> Self {
        match self {
            Self::Locating { mut head } => {
                head.extend_from_slice(&chunk);
                Self::start(files, head).await
            }
            Self::Streaming {
                head,
                target,
                sender,
                writer,
            } => {
                let quote = memchr::memchr(b'"', &chunk);
                let content = chunk.slice(..quote.unwrap_or(chunk.len()));
                let tail = quote.map(|at| chunk[at..].to_vec());
                Self::sent(content, tail, head, target, sender, writer).await
            }
            Self::Ended {
                head,
                mut tail,
                target,
                writer,
            } => {
                tail.extend_from_slice(&chunk);
                Self::Ended {
                    head,
                    tail,
                    target,
                    writer,
                }
            }
            Self::Off => Self::Off,
        }
    }

    /// Starts streaming once `content` is found, its target known and its first bytes look
    /// like base64; keeps looking while the body is too short to tell.
    async fn start(files: &Arc<FileService>, mut head: Vec<u8>) -> Self {
        let start = match locate_content(&head) {
            Locate::NeedMore if head.len() <= PREFIX_LIMIT => return Self::Locating { head },
            Locate::Found(start) => start,
            Locate::NeedMore | Locate::GiveUp => return Self::Off,
        };
        let seen = &head[start..];
        let quote = memchr::memchr(b'"', seen);
        let probe = &seen[..quote.unwrap_or(seen.len()).min(ALPHABET_PROBE)];
        if !probe.iter().all(|&byte| is_base64_byte(byte)) {
            return Self::Off;
        }
        if quote.is_none() && probe.len() < ALPHABET_PROBE {
            return Self::Locating { head };
        }
        let Some(prefix) = PrefixFields::of(&head, start) else {
            return Self::Off;
        };
        let target = files
            .paths()
            .in_session(prefix.session_id.as_deref(), "path", &prefix.path)
            .await;
        let (sender, receiver) = mpsc::channel(WRITER_QUEUE_CHUNKS);
        let writer = spawn_writer(files, target.clone(), receiver);
        let content = Bytes::copy_from_slice(&seen[..quote.unwrap_or(seen.len())]);
        let tail = quote.map(|at| seen[at..].to_vec());
        head.truncate(start);
        Self::sent(content, tail, head, target, sender, writer).await
    }

    /// Sends content to the writer; the content has ended if the body from its closing
    /// quote on (`tail`) is known.
    async fn sent(
        content: Bytes,
        tail: Option<Vec<u8>>,
        head: Vec<u8>,
        target: String,
        sender: mpsc::Sender<Bytes>,
        writer: Writer,
    ) -> Self {
        if sender.send(content).await.is_err() {
            return Self::Off;
        }
        match tail {
            Some(tail) => Self::Ended {
                head,
                tail,
                target,
                writer,
            },
            None => Self::Streaming {
                head,
                target,
                sender,
                writer,
            },
        }
    }
}

/// Decodes what the reader sends into the temp file of `target`; `None` if the target is not
/// a regular file or the content is not plain base64.
fn spawn_writer(
    files: &Arc<FileService>,
    target: String,
    mut receiver: mpsc::Receiver<Bytes>,
) -> Writer {
    let files = files.clone();
    tokio::task::spawn_blocking(move || {
        let mut decoder = Base64Decoder::new(files.open_replacement(&target)?);
        while let Some(chunk) = receiver.blocking_recv() {
            decoder.push(&chunk).ok()?;
        }
        let (mut destination, written) = decoder.finish().ok()?;
        // Durable before the rest of the body is checked: the check is quick, the fsync is
        // not, and a temp file that is then dropped costs nothing.
        destination.sync().ok()?;
        Some((destination, written))
    })
}

/// `POST /api/write`'s body as parsed in place: `fsd_api::files::WriteRequest`, with a
/// `content` that borrows from the request body (no copy unless it holds JSON escapes).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WriteBody<'a> {
    pub(super) path: String,
    #[serde(borrow)]
    pub(super) content: Cow<'a, str>,
    #[serde(default)]
    pub(super) encoding: Option<Encoding>,
    #[serde(default)]
    pub(super) session_id: Option<String>,
    #[serde(default)]
    pub(super) mode: Option<String>,
}

/// Commits the streamed write if the rest of the body (`head`, the content, `tail`)
/// confirms it.
async fn finish(
    files: &Arc<FileService>,
    head: &[u8],
    tail: &[u8],
    target: String,
    writer: Writer,
) -> Option<WriteResponse> {
    let (destination, written) = writer.await.ok()??;
    // The body with its content emptied: the other fields, parsed as the ordinary path does.
    let rest = [head, tail].concat();
    let fields: WriteBody<'_> = serde_json::from_slice(&rest).ok()?;
    if fields.encoding != Some(Encoding::Base64) {
        return None;
    }
    let confirmed = files
        .paths()
        .in_session(fields.session_id.as_deref(), "path", &fields.path)
        .await;
    if confirmed != target {
        return None;
    }
    // A mode that does not parse is left for the ordinary path to report.
    let spec = match fields.mode.as_deref() {
        Some(text) => Some(ModeSpec::parse(text).ok()?),
        None => None,
    };
    // A commit that fails leaves the write to the ordinary path too, which reports it.
    let mode = blocking(move || Ok(destination.commit_with_mode(spec)))
        .await
        .ok()?
        .ok()?;
    Some(WriteResponse {
        success: true,
        path: fields.path,
        bytes_written: written,
        mode: mode.map(mode_digits),
        timestamp: now_rfc3339(),
    })
}

/// The fields before `content`, read from the body cut there with the content emptied.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PrefixFields {
    path: String,
    #[serde(default)]
    session_id: Option<String>,
}

impl PrefixFields {
    fn of(body: &[u8], start: usize) -> Option<Self> {
        let cut = [&body[..start], b"\"}"].concat();
        serde_json::from_slice(&cut).ok()
    }
}

fn is_base64_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'=')
}

/// Where the `content` string of a write body starts.
#[derive(Debug, PartialEq)]
enum Locate {
    /// The byte after the opening quote of `content`'s value.
    Found(usize),
    NeedMore,
    /// Not the simple shape this path handles: the ordinary path decides.
    GiveUp,
}

/// Reads the top-level keys of a JSON object in order, skipping string and scalar values,
/// until the key `content` with a string value. Nested values and escaped keys give up.
fn locate_content(body: &[u8]) -> Locate {
    let mut at = skip_whitespace(body, 0);
    match body.get(at) {
        None => return Locate::NeedMore,
        Some(b'{') => at += 1,
        Some(_) => return Locate::GiveUp,
    }
    loop {
        at = skip_whitespace(body, at);
        match body.get(at) {
            None => return Locate::NeedMore,
            Some(b'"') => {}
            Some(_) => return Locate::GiveUp,
        }
        let key_start = at + 1;
        let Some(key_len) = memchr::memchr(b'"', &body[key_start..]) else {
            return Locate::NeedMore;
        };
        let key = &body[key_start..key_start + key_len];
        if key.contains(&b'\\') {
            return Locate::GiveUp;
        }
        at = skip_whitespace(body, key_start + key_len + 1);
        match body.get(at) {
            None => return Locate::NeedMore,
            Some(b':') => at = skip_whitespace(body, at + 1),
            Some(_) => return Locate::GiveUp,
        }
        let Some(&first) = body.get(at) else {
            return Locate::NeedMore;
        };
        if key == b"content" {
            return if first == b'"' {
                Locate::Found(at + 1)
            } else {
                Locate::GiveUp
            };
        }
        at = match first {
            b'"' => match string_end(body, at + 1) {
                Some(end) => end + 1,
                None => return Locate::NeedMore,
            },
            b'{' | b'[' => return Locate::GiveUp,
            _ => match body[at..]
                .iter()
                .position(|&byte| matches!(byte, b',' | b'}') || byte.is_ascii_whitespace())
            {
                Some(len) => at + len,
                None => return Locate::NeedMore,
            },
        };
        at = skip_whitespace(body, at);
        match body.get(at) {
            None => return Locate::NeedMore,
            Some(b',') => at += 1,
            Some(_) => return Locate::GiveUp,
        }
    }
}

fn skip_whitespace(body: &[u8], mut at: usize) -> usize {
    while body.get(at).is_some_and(|byte| byte.is_ascii_whitespace()) {
        at += 1;
    }
    at
}

/// The index of the quote closing a string whose contents start at `from`.
fn string_end(body: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        match body.get(at)? {
            b'"' => return Some(at),
            b'\\' => at += 2,
            _ => at += 1,
        }
    }
}

/// Standard padded base64 decoded as it arrives in pieces of any size, into `out`. The
/// result is exactly the whole text's decoding: the last group (which may be padded) is
/// held back until the end, and padding anywhere before it is refused. Pieces are decoded
/// where they lie; only a group split between two pieces is copied.
struct Base64Decoder<W> {
    out: W,
    held: Vec<u8>,
    decoded: Vec<u8>,
    written: u64,
}

fn invalid() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "not plain base64")
}

/// Decodes whole groups that are not the text's last, so carry no padding.
fn decode_inner_groups(text: &[u8], decoded: &mut Vec<u8>) -> io::Result<()> {
    if text.last() == Some(&b'=') {
        return Err(invalid());
    }
    BASE64.decode_append(text, decoded).map_err(|_| invalid())
}

impl<W: Write> Base64Decoder<W> {
    fn new(out: W) -> Self {
        Self {
            out,
            held: Vec::with_capacity(4),
            decoded: Vec::new(),
            written: 0,
        }
    }

    fn push(&mut self, piece: &[u8]) -> io::Result<()> {
        let held = self.held.len();
        let total = held + piece.len();
        if total <= 4 {
            self.held.extend_from_slice(piece);
            return Ok(());
        }
        // Everything but the last 1..=4 characters, a whole number of groups (at least one,
        // and at least what is held).
        let ready = total - (total - 1) % 4 - 1;
        let (now, later) = piece.split_at(ready - held);
        self.decoded.clear();
        let direct = if held > 0 {
            let (fill, rest) = now.split_at(4 - held);
            self.held.extend_from_slice(fill);
            decode_inner_groups(&self.held, &mut self.decoded)?;
            rest
        } else {
            now
        };
        decode_inner_groups(direct, &mut self.decoded)?;
        self.held.clear();
        self.held.extend_from_slice(later);
        self.emit()
    }

    fn emit(&mut self) -> io::Result<()> {
        self.out.write_all(&self.decoded)?;
        self.written += self.decoded.len() as u64;
        Ok(())
    }

    /// Decodes the last group and answers the output and the bytes written to it.
    fn finish(mut self) -> io::Result<(W, u64)> {
        self.decoded.clear();
        BASE64
            .decode_append(&self.held, &mut self.decoded)
            .map_err(|_| invalid())?;
        self.emit()?;
        Ok((self.out, self.written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_found_after_string_and_scalar_fields() {
        let body = br#" { "path" : "/w/a\"b.txt", "sessionId": null, "n": 12,"content":"QUJD"#;
        let Locate::Found(start) = locate_content(body) else {
            panic!("not found");
        };
        assert_eq!(&body[start..], b"QUJD");
        let prefix = PrefixFields::of(body, start).expect("prefix fields");
        assert_eq!(prefix.path, "/w/a\"b.txt");
        assert_eq!(prefix.session_id, None);
    }

    #[test]
    fn every_cut_of_the_prefix_asks_for_more() {
        let body = br#"{"path":"/w/x","content":""#;
        for cut in 0..body.len() {
            assert_eq!(locate_content(&body[..cut]), Locate::NeedMore, "cut {cut}");
        }
        assert_eq!(locate_content(body), Locate::Found(body.len()));
    }

    #[test]
    fn other_shapes_give_up() {
        for body in [
            &br#"["content"]"#[..],
            br#"{"path":{"a":1},"content":"QUJD"}"#,
            br#"{"content":null}"#,
            br#"{"pa\u0074h":"x","content":"QUJD"}"#,
            br#"{"path":"x"}"#,
            br#"{"path" "x","content":"QUJD"}"#,
        ] {
            assert_eq!(locate_content(body), Locate::GiveUp, "{body:?}");
        }
    }

    #[test]
    fn a_prefix_without_a_path_has_no_fields() {
        let body = br#"{"content":""#;
        let Locate::Found(start) = locate_content(body) else {
            panic!("not found");
        };
        assert!(PrefixFields::of(body, start).is_none());
    }

    fn decode_in_pieces(text: &[u8], piece: usize) -> io::Result<Vec<u8>> {
        let mut decoder = Base64Decoder::new(Vec::new());
        for chunk in text.chunks(piece.max(1)) {
            decoder.push(chunk)?;
        }
        let (out, written) = decoder.finish()?;
        assert_eq!(written, out.len() as u64);
        Ok(out)
    }

    #[test]
    fn pieces_of_any_size_decode_as_the_whole() {
        for len in [0usize, 1, 2, 3, 4, 5, 100, 3001] {
            let bytes: Vec<u8> = (0..len).map(|index| (index * 7 + 3) as u8).collect();
            let text = BASE64.encode_to_string(&bytes);
            for piece in [1, 2, 3, 4, 5, 7, 64, 4096] {
                let decoded = decode_in_pieces(text.as_bytes(), piece).expect("decodes");
                assert_eq!(decoded, bytes, "len {len} piece {piece}");
            }
        }
    }

    #[test]
    fn what_the_whole_decoder_refuses_is_refused_in_pieces() {
        for text in [
            &b"QQ==QUJD"[..],
            b"QUJD QUJD",
            b"QUJ",
            b"QUJDQ",
            b"QUJD\\n",
            b"QU=D",
        ] {
            assert!(BASE64.decode_to_vec(text).is_err(), "{text:?}");
            for piece in [1, 2, 3, 4, 5, 8] {
                assert!(
                    decode_in_pieces(text, piece).is_err(),
                    "{text:?} piece {piece}"
                );
            }
        }
    }
}
