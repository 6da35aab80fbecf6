//! The sandbox side: its tree from the daemon's manifest (hashes read there, no content
//! moved), its changes sent in batches to `POST /api/files/apply` (the check before each
//! change made by the daemon, files raw in the body), and content brought here in one tar
//! stream for many files.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use fsd_api::files::{ApplyRequest, ApplyResponse, ApplyStep, ManifestResponse, StepOutcome};
use fsd_api::watch::{CheckChangesRequest, CheckChangesResponse};
use futures_util::StreamExt;
use reqwest::Method;

use crate::content_hash::ContentHash;
use crate::merge::{Entries, Entry};
use crate::sync::ChannelReader;
use crate::{Sandbox, SdkError};

use super::local::{Contents, Refused};
use super::ops::{self, Op};

/// Steps in one apply request at most.
const BATCH_STEPS: usize = 50_000;
/// Content in one apply request at most (one larger file goes alone).
const BATCH_BYTES: u64 = 256 * 1024 * 1024;

/// The sandbox tree at `remote`, leaving out what `exclude` matches; and what it holds that
/// the merge cannot (devices, FIFOs, sockets, names not UTF-8).
pub async fn tree(
    sandbox: &Sandbox,
    remote: &str,
    exclude: &[String],
) -> Result<(Entries, Vec<String>), SdkError> {
    let manifest: ManifestResponse = sandbox.manifest(remote, exclude).await?;
    let (mut tree, skipped) = entries(manifest);
    // What lies under something left out is left out with it.
    let paths: Vec<String> = tree.keys().cloned().collect();
    for path in paths {
        if !crate::merge::placed(&tree, &path) {
            tree.remove(&path);
        }
    }
    Ok((tree, skipped))
}

/// What the sandbox holds at `paths` (relative to `remote`) and below them, as
/// [`tree`] reads it: the parts of the tree a change list named.
pub async fn tree_of(
    sandbox: &Sandbox,
    remote: &str,
    exclude: &[String],
    paths: &BTreeSet<String>,
) -> Result<(Entries, Vec<String>), SdkError> {
    if paths.is_empty() {
        return Ok(Default::default());
    }
    let manifest = sandbox
        .manifest_of(remote, exclude, paths.iter().cloned().collect())
        .await?;
    Ok(entries(manifest))
}

fn entries(manifest: ManifestResponse) -> (Entries, Vec<String>) {
    let mut tree = Entries::new();
    let mut skipped = manifest.skipped;
    for entry in manifest.entries {
        let Some(held) = Entry::of_manifest(&entry) else {
            skipped.push(entry.path);
            continue;
        };
        tree.insert(entry.path, held);
    }
    (tree, skipped)
}

/// Where the sandbox says something happened under `remote` since `version` (`None`: a
/// baseline): the next version, and every path an event named, relative to `remote`
/// (`None` when the history is lost: everything is read again). Not the coalesced change
/// list, which is against the tree at the token and leaves out what was made and gone
/// again, or changed and changed back, since: a pass that read the tree meanwhile may have
/// seen those. `exclude` are the watch's globs.
pub async fn changes_since(
    sandbox: &Sandbox,
    remote: &str,
    root: &Path,
    version: Option<&str>,
    exclude: &[String],
) -> Result<(String, Option<BTreeSet<String>>), SdkError> {
    let request = CheckChangesRequest {
        path: remote.to_string(),
        exclude: Some(exclude.to_vec()),
        since: version.map(str::to_string),
        touched: Some(version.is_some()),
        ..CheckChangesRequest::default()
    };
    let answer: CheckChangesResponse = sandbox.post_json("/api/watch/check", &request).await?;
    let changed = match (version, answer.status.as_str(), answer.touched) {
        (None, _, _) => None,
        (Some(_), "unchanged", _) => Some(BTreeSet::new()),
        (Some(_), "changed", Some(touched)) => Some(
            touched
                .iter()
                .filter_map(|path| {
                    let relative = Path::new(path).strip_prefix(root).ok()?.to_str()?;
                    (!relative.is_empty()).then(|| relative.to_string())
                })
                .collect(),
        ),
        _ => None,
    };
    Ok((answer.version, changed))
}

/// Whether nothing changed in `remote` since `version`, and the token is still it.
pub async fn unchanged_since(
    sandbox: &Sandbox,
    remote: &str,
    version: &str,
    exclude: &[String],
) -> Result<bool, SdkError> {
    let request = CheckChangesRequest {
        path: remote.to_string(),
        exclude: Some(exclude.to_vec()),
        since: Some(version.to_string()),
        ..CheckChangesRequest::default()
    };
    let answer: CheckChangesResponse = sandbox.post_json("/api/watch/check", &request).await?;
    Ok(answer.status == "unchanged" && answer.version == version)
}

/// An apply step and, for a file, where its content is read from and how long it is.
struct Prepared {
    step: ApplyStep,
    content: Option<(PathBuf, u64)>,
}

fn prepare(op: &Op, contents: &dyn Contents) -> Result<Prepared, Refused> {
    let content = match op {
        Op::Put {
            path,
            entry: Entry::File { hash, .. },
            ..
        } => {
            let source = contents
                .source(hash)
                .ok_or_else(|| Refused::Failed(format!("{path}: its content is not here")))?;
            let size = match contents.size(hash) {
                Some(size) => size,
                None => std::fs::metadata(&source)?.len(),
            };
            Some((source, size))
        }
        _ => None,
    };
    Ok(Prepared {
        step: ops::apply_step(op, content.as_ref().map_or(0, |(_, size)| *size)),
        content,
    })
}

/// Told how many of a pass's changes have been sent.
pub type Sent = std::sync::Arc<dyn Fn(usize) + Send + Sync>;

/// Makes `ops` in the sandbox under `remote`, in batches; answers each one's result.
/// `sent` is told how many have been sent as each file's content goes, and after each
/// batch.
pub async fn apply(
    sandbox: &Sandbox,
    remote: &str,
    ops: &[Op],
    contents: &(dyn Contents + Sync),
    sent: Sent,
) -> Result<Vec<Result<(), Refused>>, SdkError> {
    let mut results: Vec<Option<Result<(), Refused>>> = Vec::with_capacity(ops.len());
    let mut batch: Vec<(usize, Prepared)> = Vec::new();
    let mut batch_bytes = 0u64;
    for (index, op) in ops.iter().enumerate() {
        results.push(None);
        let prepared = match prepare(op, contents) {
            Ok(prepared) => prepared,
            Err(refused) => {
                results[index] = Some(Err(refused));
                continue;
            }
        };
        let size = prepared.content.as_ref().map_or(0, |(_, size)| *size);
        if !batch.is_empty() && (batch.len() >= BATCH_STEPS || batch_bytes + size > BATCH_BYTES) {
            let batch = std::mem::take(&mut batch);
            send(sandbox, remote, batch, &mut results, &sent).await?;
            sent(index);
            batch_bytes = 0;
        }
        batch_bytes += size;
        batch.push((index, prepared));
    }
    if !batch.is_empty() {
        send(sandbox, remote, batch, &mut results, &sent).await?;
    }
    sent(ops.len());
    Ok(results
        .into_iter()
        .map(|result| result.unwrap_or_else(|| Err(Refused::Failed("not sent".into()))))
        .collect())
}

async fn send(
    sandbox: &Sandbox,
    remote: &str,
    batch: Vec<(usize, Prepared)>,
    results: &mut [Option<Result<(), Refused>>],
    sent: &Sent,
) -> Result<(), SdkError> {
    let request = ApplyRequest {
        path: remote.to_string(),
        steps: batch.iter().map(|(_, p)| p.step.clone()).collect(),
        session_id: None,
    };
    let header = serde_json::to_vec(&request).map_err(std::io::Error::other)?;
    let mut head = Vec::with_capacity(4 + header.len());
    head.extend_from_slice(&(header.len() as u32).to_be_bytes());
    head.extend_from_slice(&header);
    let sources: Vec<Source> = batch
        .iter()
        .filter_map(|(index, p)| {
            p.content.clone().map(|(path, size)| Source {
                path,
                size,
                index: *index,
            })
        })
        .collect();
    let total: u64 = head.len() as u64 + sources.iter().map(|source| source.size).sum::<u64>();
    let body =
        futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(Bytes::from(head)) })
            .chain(content_stream(sources, sent.clone()));
    let response = sandbox
        .request(Method::POST, "/api/files/apply")
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .header(reqwest::header::CONTENT_LENGTH, total)
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await?;
    let answer: ApplyResponse = crate::client::decode(response).await?;
    for ((index, prepared), outcome) in batch.into_iter().zip(answer.outcomes) {
        results[index] = Some(match outcome {
            StepOutcome::Applied => Ok(()),
            StepOutcome::Changed { .. } => Err(Refused::Changed),
            StepOutcome::Failed { reason } => {
                // Read again on a blocking thread: it may be a large file.
                let changed = tokio::task::spawn_blocking(move || source_changed(&prepared))
                    .await
                    .unwrap_or(false);
                if changed {
                    Err(Refused::Changed)
                } else {
                    Err(Refused::Failed(reason))
                }
            }
        });
    }
    Ok(())
}

/// Whether a put's local file no longer holds the content it was sent for: edited while
/// the pass read it, which the sandbox refuses (its hash did not match). That put changed
/// while the sync ran, and the next pass sends what the file holds then; a put whose file
/// still holds it failed for another reason.
fn source_changed(prepared: &Prepared) -> bool {
    let (ApplyStep::PutFile { sha256, .. }, Some((source, _))) =
        (&prepared.step, &prepared.content)
    else {
        return false;
    };
    crate::scan::hash_file(source).map_or(true, |hash| hash.to_string() != *sha256)
}

/// Bytes of content sent in one piece: small files share one (20,000 files of a first
/// upload sent one piece each cost a wake-up on both ends for each).
const PIECE_BYTES: usize = 256 * 1024;

/// A file whose content a batch sends: where it is read, its announced size, and the
/// index of its change in the pass.
struct Source {
    path: PathBuf,
    size: u64,
    index: usize,
}

/// The files' content, each exactly its announced size (see [`BodyWriter::write_exactly`]).
/// `sent` is told of each file as it is read.
fn content_stream(
    sources: Vec<Source>,
    sent: Sent,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let (mut body, stream) = body_writer(8);
    tokio::task::spawn_blocking(move || {
        for Source { path, size, index } in sources {
            if let Err(err) = body.write_exactly(&path, size) {
                body.fail(err);
                return;
            }
            sent(index + 1);
        }
        body.finish();
    });
    stream
}

/// A request body written on a blocking thread, and the stream that sends it: what is
/// written runs at most `ahead` pieces ahead of what is sent.
pub(super) fn body_writer(
    ahead: usize,
) -> (
    BodyWriter,
    impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
) {
    let (pieces, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(ahead);
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    let writer = BodyWriter {
        pieces,
        piece: bytes::BytesMut::with_capacity(PIECE_BYTES),
    };
    (writer, stream)
}

/// What a request body is written with: bytes gathered into pieces of [`PIECE_BYTES`],
/// each sent once full.
pub(super) struct BodyWriter {
    pieces: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    piece: bytes::BytesMut,
}

impl BodyWriter {
    /// Writes `bytes`; an error once the request has ended.
    pub fn write(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let room = PIECE_BYTES - self.piece.len();
            let (now, later) = bytes.split_at(room.min(bytes.len()));
            self.piece.extend_from_slice(now);
            bytes = later;
            if self.piece.len() == PIECE_BYTES {
                let piece = self.piece.split().freeze();
                self.piece.reserve(PIECE_BYTES);
                self.pieces
                    .blocking_send(Ok(piece))
                    .map_err(|_| std::io::Error::other("the request ended"))?;
            }
        }
        Ok(())
    }

    /// Writes the file at `path` as exactly `size` bytes: cut, or padded with zeros if it
    /// shrank (the daemon's hash check then refuses it, and the body stays aligned).
    pub fn write_exactly(&mut self, path: &Path, size: u64) -> std::io::Result<()> {
        let file: Box<dyn Read> = match std::fs::File::open(path) {
            Ok(file) => Box::new(file),
            Err(_) => Box::new(std::io::empty()),
        };
        let mut exact = file.take(size).chain(std::io::repeat(0)).take(size);
        let mut buffer = vec![0u8; PIECE_BYTES.min(size as usize)];
        loop {
            let read = exact.read(&mut buffer)?;
            if read == 0 {
                return Ok(());
            }
            self.write(&buffer[..read])?;
        }
    }

    /// Sends what is left: the body is whole.
    pub fn finish(mut self) {
        if !self.piece.is_empty() {
            let _ = self.pieces.blocking_send(Ok(self.piece.split().freeze()));
        }
    }

    /// Ends the body with `err`: the request fails.
    pub fn fail(self, err: std::io::Error) {
        let _ = self.pieces.blocking_send(Err(err));
    }
}

/// Streams the files `wanted` (a hash and a sandbox path holding it, in the order the puts
/// need them) and runs `apply` on a thread with an [`Incoming`] that hands each one's
/// content to the put that needs it as the stream reaches it: written once, where it goes.
pub async fn with_incoming<T: Send + 'static>(
    sandbox: &Sandbox,
    remote: &str,
    wanted: Vec<(ContentHash, String)>,
    uses: HashMap<ContentHash, usize>,
    stash: PathBuf,
    apply: impl FnOnce(&Incoming<'_>) -> T + Send + 'static,
) -> Result<T, SdkError> {
    let files: Vec<String> = wanted.iter().map(|(_, path)| path.clone()).collect();
    let stream = sandbox.download_files(remote, files).await?;
    let applied = crate::sync::read_on_a_thread(stream, move |reader| {
        let mut archive = tar::Archive::new(reader);
        let entries = archive.entries()?;
        let incoming = Incoming {
            entries: RefCell::new(entries),
            ahead: RefCell::new(None),
            coming: RefCell::new(wanted.iter().map(|(_, path)| path.clone()).collect()),
            wanted: RefCell::new(wanted.into_iter().collect()),
            uses,
            stash,
            stashed: RefCell::new(HashMap::new()),
            left_out: RefCell::new(HashSet::new()),
        };
        Ok::<T, std::io::Error>(apply(&incoming))
    })
    .await?;
    Ok(applied?)
}

/// Content streamed for the local puts, handed to each as the stream reaches it.
impl Contents for Incoming<'_> {
    /// A file holding `hash` kept for the puts after the first.
    fn source(&self, hash: &ContentHash) -> Option<PathBuf> {
        self.stashed.borrow().get(hash).cloned()
    }

    /// Writes the content `hash` into `temp` (made new), checked against its hash; `None`
    /// when it is not coming (not asked for, or taken already). One the stream left out
    /// (its file gone or no longer a file in the sandbox since the scan) changed while the
    /// sync ran, as one whose content no longer has its hash: the next pass sees what it
    /// is now.
    fn write(&self, hash: &ContentHash, temp: &Path, mode: u32) -> Option<Result<(), Refused>> {
        if self.left_out.borrow().contains(hash) {
            return Some(Err(Refused::Changed));
        }
        let path = self.wanted.borrow_mut().remove(hash)?;
        self.coming.borrow_mut().remove(&path);
        let Some(mut entry) = self.entry_for(&path) else {
            self.left_out.borrow_mut().insert(*hash);
            return Some(Err(Refused::Changed));
        };
        if self.uses.get(hash).copied().unwrap_or(0) > 1 {
            let kept = self.stash.join(hash.to_string());
            let stashed = std::fs::create_dir_all(&self.stash)
                .map_err(Refused::from)
                .and_then(|()| super::local::write_checked(&mut entry, &kept, hash, 0o600));
            if let Err(refused) = stashed {
                let _ = std::fs::remove_file(&kept);
                return Some(Err(refused));
            }
            self.stashed.borrow_mut().insert(*hash, kept.clone());
            return Some(super::local::copy_checked(&kept, temp, hash, mode));
        }
        Some(super::local::write_checked(&mut entry, temp, hash, mode))
    }

    /// The content `hash` read into memory when it is coming, wanted by one put, and at
    /// most `limit` bytes; `None` otherwise (a larger one stays next in the stream for
    /// [`Contents::write`]).
    fn take(&self, hash: &ContentHash, limit: u64) -> Option<Result<Vec<u8>, Refused>> {
        if self.uses.get(hash).copied().unwrap_or(0) > 1 {
            return None;
        }
        let path = self.wanted.borrow().get(hash)?.clone();
        let mut entry = self.entry_for(&path)?;
        let size = entry.header().size().unwrap_or(u64::MAX);
        if size > limit {
            *self.ahead.borrow_mut() = Some(entry);
            return None;
        }
        self.wanted.borrow_mut().remove(hash);
        self.coming.borrow_mut().remove(&path);
        let mut content = Vec::with_capacity(size as usize);
        Some(
            entry
                .read_to_end(&mut content)
                .map(|_| content)
                .map_err(Refused::from),
        )
    }
}

/// Files coming from the sandbox in one tar stream, in the order the puts need them.
pub struct Incoming<'a> {
    entries: RefCell<tar::Entries<'a, ChannelReader>>,
    /// An entry read ahead: a later put's (the one looked for was left out, gone since).
    ahead: RefCell<Option<tar::Entry<'a, ChannelReader>>>,
    /// The sandbox paths still to come.
    coming: RefCell<BTreeSet<String>>,
    /// Hash → sandbox path, of what is still to come.
    wanted: RefCell<HashMap<ContentHash, String>>,
    /// How many puts want each content: one wanted by more is kept in `stash` for them.
    uses: HashMap<ContentHash, usize>,
    stash: PathBuf,
    stashed: RefCell<HashMap<ContentHash, PathBuf>>,
    /// Contents the stream left out, for each put that wanted them.
    left_out: RefCell<HashSet<ContentHash>>,
}

impl<'a> Incoming<'a> {
    /// The stream's entry for `path`; `None` when the daemon left it out.
    fn entry_for(&self, path: &str) -> Option<tar::Entry<'a, ChannelReader>> {
        loop {
            let next = match self.ahead.borrow_mut().take() {
                Some(entry) => Some(entry),
                None => self.entries.borrow_mut().next().and_then(Result::ok),
            };
            let entry = next?;
            let name = entry
                .path()
                .ok()
                .map(|name| name.to_string_lossy().into_owned());
            match name {
                Some(name) if name == path => return Some(entry),
                // A later put's: the one looked for was left out.
                Some(name) if self.coming.borrow().contains(&name) => {
                    *self.ahead.borrow_mut() = Some(entry);
                    return None;
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file the sandbox's stream left out (gone or no longer a file since the scan)
    /// changed while the sync ran, for each put that wanted it: the next pass makes what it
    /// is now. It was reported as a put that failed ("its content is not here").
    #[test]
    fn content_left_out_of_the_stream_changed_while_the_sync_ran() {
        let (gone, kept) = (b"gone since the scan\n".to_vec(), b"still there\n".to_vec());
        let (gone_hash, kept_hash) = (ContentHash::of(&gone), ContentHash::of(&kept));
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(kept.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, "kept", kept.as_slice())
            .unwrap();
        let body = tar.into_inner().unwrap();
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        sender.send(Ok(Bytes::from(body))).unwrap();
        drop(sender);
        let mut archive = tar::Archive::new(ChannelReader::new(receiver));
        let wanted = vec![
            (gone_hash, "gone".to_string()),
            (kept_hash, "kept".to_string()),
        ];
        let dir = tempfile::tempdir().unwrap();
        let incoming = Incoming {
            entries: RefCell::new(archive.entries().unwrap()),
            ahead: RefCell::new(None),
            coming: RefCell::new(wanted.iter().map(|(_, path)| path.clone()).collect()),
            wanted: RefCell::new(wanted.into_iter().collect()),
            uses: HashMap::from([(gone_hash, 2), (kept_hash, 1)]),
            stash: dir.path().join("stash"),
            stashed: RefCell::new(HashMap::new()),
            left_out: RefCell::new(HashSet::new()),
        };
        for put in ["first", "second"] {
            let temp = dir.path().join(put);
            assert!(
                matches!(
                    incoming.write(&gone_hash, &temp, 0o644),
                    Some(Err(Refused::Changed))
                ),
                "the {put} put of what was left out"
            );
            assert!(!temp.exists());
        }
        let temp = dir.path().join("kept");
        assert!(matches!(
            incoming.write(&kept_hash, &temp, 0o644),
            Some(Ok(()))
        ));
        assert_eq!(std::fs::read(&temp).unwrap(), kept);
    }

    /// A put the sandbox refused (its content did not match its hash) changed while the
    /// sync ran when its local file no longer holds that content (or is gone); one whose
    /// file still does failed.
    #[test]
    fn a_refused_put_changed_when_its_file_did() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("f");
        std::fs::write(&source, b"sent\n").unwrap();
        let prepared = Prepared {
            step: ApplyStep::PutFile {
                path: "f".into(),
                expect: fsd_api::files::Held::Absent,
                size: 5,
                sha256: ContentHash::of(b"sent\n").to_string(),
                mode: 0o644,
            },
            content: Some((source.clone(), 5)),
        };
        assert!(
            !source_changed(&prepared),
            "the file still holds what was sent"
        );
        std::fs::write(&source, b"edited meanwhile\n").unwrap();
        assert!(source_changed(&prepared), "edited while the pass read it");
        std::fs::remove_file(&source).unwrap();
        assert!(source_changed(&prepared), "removed since");
    }
}
