//! The first sync into an empty sandbox directory: nothing to merge, so the local tree goes
//! as it is read, in one request whose body holds its steps in parts (see
//! [`fsd_api::files::ApplyPart`]): the directories and links first, then the files a part
//! at a time, each read once and hashed as it is read, its part streamed while the next is
//! read. No scan hashes the tree before the first byte goes, and no small file is read
//! twice (a scan first, then a send, left the daemon idle for most of a first upload).
//!
//! Each step expects nothing at its path: what the sandbox made there meanwhile is kept,
//! and left to the next pass's merge (the change token was taken before this began).

use std::io::Read;

use fsd_api::files::{ApplyPart, ApplyRequest, ApplyResponse, ApplyStep, Held, StepOutcome};
use reqwest::Method;
use sha2::{Digest, Sha256};

use crate::content_hash::ContentHash;
use crate::files::ListOptions;
use crate::merge::{Entries, Entry};
use crate::scan::{self, Ignores, ScanCache, WalkedFile};
use crate::{Sandbox, SdkError};

use super::endpoint::Progress;
use super::local::Refused;
use super::ops::Op;
use super::remote::{BodyWriter, body_writer};

/// Files in one part at most.
const PART_FILES: usize = 1_000;
/// Content held for one part at most (a larger file goes alone).
const PART_BYTES: u64 = 16 * 1024 * 1024;
/// Files larger than this are hashed first and read again as they are sent, not held.
const HELD_BYTES: u64 = 1024 * 1024;
/// Pieces of the body waiting to be sent: what is read runs at most this far ahead.
const PIECES_AHEAD: usize = 16;

/// What a first upload made.
pub struct Uploaded {
    /// Each step as a change, in the order sent, and what came of it.
    pub ops: Vec<Op>,
    pub results: Vec<Result<(), Refused>>,
    /// The records of the files read (for the next pass's walk of stats).
    pub cache: ScanCache,
    /// What a sync cannot carry (devices, FIFOs, sockets, names not UTF-8).
    pub skipped: Vec<String>,
}

/// Whether the sandbox's directory `remote` holds nothing (hidden names included).
pub async fn is_empty(sandbox: &Sandbox, remote: &str) -> Result<bool, SdkError> {
    let listed = sandbox
        .list_files(
            remote,
            ListOptions {
                recursive: false,
                include_hidden: true,
            },
        )
        .await?;
    Ok(listed.is_empty())
}

/// Sends the local tree at `local` (what `ignores` leaves) into the empty sandbox directory
/// `remote`; `progress` is told how many changes have gone.
pub async fn send(
    sandbox: &Sandbox,
    remote: &str,
    local: &std::path::Path,
    ignores: &Ignores,
    progress: Option<Progress>,
) -> Result<Uploaded, SdkError> {
    let (mut body, stream) = body_writer(PIECES_AHEAD);
    let (root, ignores, remote_path) = (local.to_path_buf(), ignores.clone(), remote.to_string());
    let reading = tokio::task::spawn_blocking(move || {
        let read = read_parts(&root, &ignores, &remote_path, &mut body, progress);
        match read {
            Ok(read) => {
                body.finish();
                Ok(read)
            }
            Err(err) => {
                // The request fails with the body cut; the pass fails with this error.
                body.fail(std::io::Error::other(err.to_string()));
                Err(err)
            }
        }
    });
    let answer = sandbox
        .request(Method::POST, "/api/files/apply")
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await;
    let answer: Result<ApplyResponse, SdkError> = match answer {
        Ok(response) => crate::client::decode(response).await,
        Err(err) => Err(err.into()),
    };
    // The daemon answers once it has read the whole body. An answer before that (a
    // refusal, a connection gone) is the pass's error, and the reader stops by itself
    // once the request's body is dropped.
    let answer = match answer {
        Err(err) if !reading.is_finished() => return Err(err),
        answer => answer,
    };
    let read = reading.await.map_err(std::io::Error::other)?;
    let (ops, cache, skipped) = match read {
        Ok(read) => read,
        // A body cut short by the daemon's refusal: the refusal says why.
        Err(err) => {
            return Err(match answer {
                Err(refused @ SdkError::Api { .. }) => refused,
                _ => err,
            });
        }
    };
    let answer = answer?;
    let mut outcomes = answer.outcomes.into_iter();
    let results = ops
        .iter()
        .map(|_| match outcomes.next() {
            Some(StepOutcome::Applied) => Ok(()),
            Some(StepOutcome::Changed { .. }) => Err(Refused::Changed),
            Some(StepOutcome::Failed { reason }) => Err(Refused::Failed(reason)),
            None => Err(Refused::Failed("not answered".into())),
        })
        .collect();
    Ok(Uploaded {
        ops,
        results,
        cache,
        skipped,
    })
}

/// Writes a part's JSON, framed by its 4-byte big-endian length.
fn frame(body: &mut BodyWriter, json: &impl serde::Serialize) -> std::io::Result<()> {
    let json = serde_json::to_vec(json).map_err(std::io::Error::other)?;
    let length = u32::try_from(json.len()).map_err(std::io::Error::other)?;
    body.write(&length.to_be_bytes())?;
    body.write(&json)
}

/// A file of a part, read: its content held, or (a large one) to be read again as it goes.
struct ReadFile {
    file: WalkedFile,
    hash: ContentHash,
    size: u64,
    held: Option<Vec<u8>>,
}

/// Walks the tree and writes the body: the directories and links, then the files a part at
/// a time. Answers each step as a change, in order, the files' records and what was
/// skipped.
fn read_parts(
    root: &std::path::Path,
    ignores: &Ignores,
    remote: &str,
    body: &mut BodyWriter,
    progress: Option<Progress>,
) -> Result<(Vec<Op>, ScanCache, Vec<String>), SdkError> {
    let walk = scan::walk(root, ignores)?;
    let total = (walk.tree.len() + walk.files.len()) as u64;
    let sent = |done: usize| {
        if let Some(progress) = &progress {
            progress("to sandbox", done as u64, total);
        }
    };
    let mut ops: Vec<Op> = Vec::with_capacity(walk.tree.len() + walk.files.len());
    let mut cache = ScanCache::new();
    // Directories parents first (a path sorts after its parent's), then links.
    let mut steps = Vec::with_capacity(walk.tree.len());
    let (dirs, links): (Vec<_>, Vec<_>) = walk
        .tree
        .into_iter()
        .partition(|(_, entry)| matches!(entry, Entry::Dir { .. }));
    for (path, entry) in dirs.into_iter().chain(links) {
        steps.push(match &entry {
            Entry::Dir { mode } => ApplyStep::Mkdir {
                path: path.clone(),
                expect: Held::Absent,
                mode: *mode,
            },
            Entry::Link { target } => ApplyStep::Symlink {
                path: path.clone(),
                expect: Held::Absent,
                target: target.clone(),
            },
            Entry::File { .. } => continue,
        });
        ops.push(Op::Put {
            path,
            expect: None,
            entry,
        });
    }
    let mut first = Some(steps);
    let mut files = walk.files.into_iter().peekable();
    loop {
        // One part: files read until it is full.
        let mut part: Vec<ReadFile> = Vec::new();
        let mut held = 0u64;
        while part.len() < PART_FILES && held < PART_BYTES {
            let Some(file) = files.next() else { break };
            let Some((read, seen)) = read_one(file, walk.began)? else {
                continue;
            };
            held += read.held.as_ref().map_or(0, |held| held.len() as u64);
            if let Some(seen) = seen {
                cache.insert(read.file.relative.clone(), seen);
            }
            part.push(read);
        }
        let first_part = first.is_some();
        let mut steps = first.take().unwrap_or_default();
        for read in &part {
            steps.push(ApplyStep::PutFile {
                path: read.file.relative.clone(),
                expect: Held::Absent,
                size: read.size,
                sha256: read.hash.to_string(),
                mode: read.file.mode,
            });
        }
        if first_part {
            let request = ApplyRequest {
                path: remote.to_string(),
                steps,
                session_id: None,
            };
            frame(body, &request)?;
        } else {
            frame(body, &ApplyPart { steps })?;
        }
        for read in part {
            match &read.held {
                Some(content) => body.write(content)?,
                None => body.write_exactly(&read.file.path, read.size)?,
            }
            ops.push(Op::Put {
                path: read.file.relative,
                expect: None,
                entry: Entry::File {
                    hash: read.hash,
                    mode: read.file.mode,
                },
            });
            sent(ops.len());
        }
        if files.peek().is_none() {
            break;
        }
    }
    Ok((ops, cache, walk.skipped))
}

/// Reads and hashes one file (held if small), with the record to keep of it; `None` if it
/// is gone or no longer a regular file (the next pass sees what is there).
fn read_one(
    file: WalkedFile,
    began: std::time::SystemTime,
) -> std::io::Result<Option<(ReadFile, Option<scan::Seen>)>> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&file.path);
    let mut opened = match opened {
        Ok(opened) => opened,
        Err(err)
            if err.kind() == std::io::ErrorKind::NotFound
                || err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) =>
        {
            return Ok(None);
        }
        Err(err) => return Err(err),
    };
    let meta = opened.metadata()?;
    if !meta.is_file() {
        return Ok(None);
    }
    let mut hasher = Sha256::new();
    let (size, held) = if meta.len() <= HELD_BYTES {
        let mut content = Vec::with_capacity(meta.len() as usize + 1);
        opened.read_to_end(&mut content)?;
        hasher.update(&content);
        (content.len() as u64, Some(content))
    } else {
        (std::io::copy(&mut opened, &mut hasher)?, None)
    };
    let hash = ContentHash::from(hasher);
    // Read after its record's stat: a file written meanwhile is newer than `began`.
    let seen = scan::record_of_read(&meta, hash, began);
    Ok(Some((
        ReadFile {
            file,
            hash,
            size,
            held,
        },
        seen,
    )))
}

/// The tree the upload made: each change that was made.
pub fn made(uploaded: &Uploaded) -> Entries {
    uploaded
        .ops
        .iter()
        .zip(&uploaded.results)
        .filter(|(_, result)| result.is_ok())
        .filter_map(|(op, _)| match op {
            Op::Put { path, entry, .. } => Some((path.clone(), entry.clone())),
            _ => None,
        })
        .collect()
}
