//! A sequenced event log on disk: the output of one next-line process (or terminal) as
//! numbered events (`stdout`, `stderr`, then one `terminal`), read from any sequence by
//! cursor, live or after the fact. It keeps the latest `cap` bytes in segment files and
//! drops whole old segments, so a reader that asks for an evicted event learns exactly
//! that (`Truncated`) and goes on from the oldest kept one. The reference keeps 1 MiB and
//! 10,000 events in memory; this is disk, sized by the daemon's setting.
//!
//! Cursors are the reference's: unpadded base64url of `v1.<base64url(store)>.<seq>`.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64_simd::URL_SAFE_NO_PAD;
use futures_util::{Stream, StreamExt};
use tokio::sync::watch;

/// Bytes of a record's header: seq (8), kind (1), timestamp in ms (8), data length (4).
const HEADER: usize = 21;
/// A log keeps this many segments' worth of its cap: a new segment starts at a quarter.
const SEGMENTS: u64 = 4;
/// The most records one read returns (a subscriber reads on).
const READ_RECORDS: usize = 256;
/// The most data bytes one read returns.
const READ_BYTES: usize = 1 << 20;
/// Data of the newest records a log also keeps in memory: a reader at the end of the log,
/// one following it live, gets what was just written without a file read on a blocking
/// thread (a terminal's keystroke echo: 0.03 ms of 0.17). A record larger than this is read
/// from the file (one of 4 MiB, a flood's read, kept by each of the 64 ended processes, was
/// 256 MiB of the daemon's memory).
const RECENT_BYTES: usize = 32 * 1024;

/// What an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Stdout,
    Stderr,
    /// The last event: how the run ended, as JSON.
    Terminal,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Stdout => 1,
            Kind::Stderr => 2,
            Kind::Terminal => 3,
        }
    }

    fn of(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Kind::Stdout,
            2 => Kind::Stderr,
            3 => Kind::Terminal,
            _ => return None,
        })
    }
}

/// One event as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub kind: Kind,
    /// Milliseconds since the epoch when it was written.
    pub at_ms: i64,
    pub data: Vec<u8>,
}

/// What a read from a sequence yields, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Events between the asked sequence and the next entry are no longer kept.
    Truncated,
    Record(Record),
}

/// Why a cursor was refused (the messages are the reference's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    #[error("Invalid byte log cursor")]
    Invalid,
    #[error("Byte log cursor belongs to another run or store")]
    OtherStore,
    #[error("Byte log cursor is from the future")]
    Future,
}

/// Why the log could not be written.
#[derive(Debug, thiserror::Error)]
#[error("the output log {path}: {source}")]
pub struct LogError {
    path: PathBuf,
    source: std::io::Error,
}

struct Segment {
    first_seq: u64,
    /// Bytes of stdout and of stderr written before its first record (in its name, so
    /// offsets in each stream stay absolute after older segments go and after a restart).
    before: [u64; 2],
    path: PathBuf,
    /// Bytes written to it (records are written whole under the lock, so a reader that
    /// stops here never sees half of one).
    len: u64,
}

struct Inner {
    /// Oldest first; the last one is written to.
    segments: VecDeque<Segment>,
    writer: Option<File>,
    next_seq: u64,
    /// The newest records, up to [`RECENT_BYTES`] of data, oldest first (none when the
    /// newest alone is larger).
    recent: VecDeque<Record>,
    recent_bytes: usize,
    /// Bytes of stdout and of stderr written so far, and before the oldest of `recent`.
    totals: [u64; 2],
    recent_before: [u64; 2],
}

/// What a log holds of one output stream from an offset on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamBytes {
    pub bytes: Vec<u8>,
    /// The stream's offset of `bytes[0]` (bytes of it written before): past the offset
    /// asked for when what was between is no longer kept.
    pub start: u64,
}

/// The index of a stream's byte counts (`None` for the terminal event).
fn stream_index(kind: Kind) -> Option<usize> {
    match kind {
        Kind::Stdout => Some(0),
        Kind::Stderr => Some(1),
        Kind::Terminal => None,
    }
}

/// A segment's file name: its first sequence and the bytes of each stream before it.
fn segment_name(first_seq: u64, before: [u64; 2]) -> String {
    format!("{first_seq:020}.{}.{}.log", before[0], before[1])
}

/// The first sequence and the streams' bytes before it that a segment's name holds (a
/// name of only the sequence, as logs written before the counts had: none before).
fn parse_segment_name(name: &str) -> Option<(u64, [u64; 2])> {
    let mut parts = name.strip_suffix(".log")?.split('.');
    let first = parts.next()?.parse().ok()?;
    let before = match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => [0, 0],
        (Some(out), Some(err), None) => [out.parse().ok()?, err.parse().ok()?],
        _ => return None,
    };
    Some((first, before))
}

/// One store's log.
pub struct SequencedLog {
    dir: PathBuf,
    store: String,
    cap: u64,
    inner: Mutex<Inner>,
    /// The last sequence written (0: none yet); readers wait on it.
    written: watch::Sender<u64>,
}

impl SequencedLog {
    /// A new, empty log in `dir` (made; what was there is removed) for the store `store`,
    /// keeping about the latest `cap` bytes.
    pub fn create(dir: &Path, store: &str, cap: u64) -> Result<Self, LogError> {
        Self::create_after(dir, store, cap, [0, 0])
    }

    /// [`SequencedLog::create`] for output that continues streams of which `before` bytes
    /// (stdout, stderr) were written and are not kept (a log moved from another form).
    pub fn create_after(
        dir: &Path,
        store: &str,
        cap: u64,
        before: [u64; 2],
    ) -> Result<Self, LogError> {
        let failed = |source| LogError {
            path: dir.to_path_buf(),
            source,
        };
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).map_err(failed)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            store: store.to_string(),
            cap: cap.max(SEGMENTS * 4096),
            inner: Mutex::new(Inner {
                segments: VecDeque::new(),
                writer: None,
                next_seq: 1,
                recent: VecDeque::new(),
                recent_bytes: 0,
                totals: before,
                recent_before: before,
            }),
            written: watch::channel(0).0,
        })
    }

    /// The log a daemon before this one left in `dir` for `store`, to read and to append
    /// its last event to: its segments as they are on disk, a record cut short by a crash
    /// left out (the segment is cut back to its last whole record).
    pub fn open(dir: &Path, store: &str, cap: u64) -> Result<Self, LogError> {
        let failed = |source| LogError {
            path: dir.to_path_buf(),
            source,
        };
        let mut found: Vec<(u64, [u64; 2], PathBuf)> = std::fs::read_dir(dir)
            .map_err(failed)?
            .flatten()
            .filter_map(|entry| {
                let (first, before) = parse_segment_name(entry.file_name().to_str()?)?;
                Some((first, before, entry.path()))
            })
            .collect();
        found.sort();
        let mut segments = VecDeque::new();
        let mut next_seq = 1;
        let mut totals = [0, 0];
        for (first_seq, before, path) in found {
            let (len, last, streams) = whole_records(&path).map_err(failed)?;
            if let Some(last) = last {
                next_seq = last + 1;
            }
            totals = [before[0] + streams[0], before[1] + streams[1]];
            segments.push_back(Segment {
                first_seq,
                before,
                path,
                len,
            });
        }
        // Appends go after the last whole record (a torn one is cut off first).
        let writer = match segments.back() {
            Some(last) => {
                let file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&last.path)
                    .map_err(failed)?;
                file.set_len(last.len).map_err(failed)?;
                Some(file)
            }
            None => None,
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            store: store.to_string(),
            cap: cap.max(SEGMENTS * 4096),
            inner: Mutex::new(Inner {
                segments,
                writer,
                next_seq,
                recent: VecDeque::new(),
                recent_bytes: 0,
                totals,
                recent_before: totals,
            }),
            written: watch::channel(next_seq - 1).0,
        })
    }

    /// Whether the log holds its last event (a `terminal` one).
    pub fn ended(&self) -> bool {
        let end = self.end();
        end > 0
            && self.read_from(end).iter().any(
                |entry| matches!(entry, Entry::Record(record) if record.kind == Kind::Terminal),
            )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends one event and returns its sequence. Data is written to the page cache under
    /// the lock (a few microseconds), so readers always see whole records in order.
    pub fn append(&self, kind: Kind, at_ms: i64, data: &[u8]) -> Result<u64, LogError> {
        let mut inner = self.lock();
        let seq = inner.next_seq;
        let segment_cap = self.cap / SEGMENTS;
        let roll = match inner.segments.back() {
            None => true,
            Some(last) => last.len >= segment_cap,
        };
        if roll {
            let before = inner.totals;
            let path = self.dir.join(segment_name(seq, before));
            let file = File::create(&path).map_err(|source| LogError {
                path: path.clone(),
                source,
            })?;
            inner.writer = Some(file);
            inner.segments.push_back(Segment {
                first_seq: seq,
                before,
                path,
                len: 0,
            });
            // Whole old segments go once the rest holds the cap.
            while inner.segments.len() > 1
                && inner.segments.iter().skip(1).map(|s| s.len).sum::<u64>() >= self.cap
            {
                if let Some(old) = inner.segments.pop_front() {
                    let _ = std::fs::remove_file(&old.path);
                }
            }
        }
        let length = u32::try_from(data.len()).unwrap_or(u32::MAX) as usize;
        let mut record = Vec::with_capacity(HEADER + length);
        record.extend_from_slice(&seq.to_le_bytes());
        record.push(kind.byte());
        record.extend_from_slice(&at_ms.to_le_bytes());
        record.extend_from_slice(&(length as u32).to_le_bytes());
        record.extend_from_slice(&data[..length]);
        let path = inner.segments.back().map(|s| s.path.clone());
        if let Some(writer) = inner.writer.as_mut() {
            writer.write_all(&record).map_err(|source| LogError {
                path: path.unwrap_or_default(),
                source,
            })?;
        }
        if let Some(last) = inner.segments.back_mut() {
            last.len += record.len() as u64;
        }
        if let Some(stream) = stream_index(kind) {
            inner.totals[stream] += length as u64;
        }
        inner.recent_bytes += length;
        inner.recent.push_back(Record {
            seq,
            kind,
            at_ms,
            data: data[..length].to_vec(),
        });
        while inner.recent_bytes > RECENT_BYTES {
            if let Some(old) = inner.recent.pop_front() {
                inner.recent_bytes -= old.data.len();
                if let Some(stream) = stream_index(old.kind) {
                    inner.recent_before[stream] += old.data.len() as u64;
                }
            }
        }
        inner.next_seq += 1;
        drop(inner);
        self.written.send_replace(seq);
        Ok(seq)
    }

    /// The store the log's cursors name.
    pub fn store(&self) -> &str {
        &self.store
    }

    /// The last sequence written (0: none).
    pub fn end(&self) -> u64 {
        *self.written.borrow()
    }

    /// Waits on the last sequence written.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.written.subscribe()
    }

    /// Entries from sequence `from` on as [`SequencedLog::read_from`] answers them, when the
    /// records kept in memory hold them (the newest, which no eviction has reached): no file
    /// is read, so it may be called on the runtime. `None` when `from` is older.
    pub fn read_recent(&self, from: u64) -> Option<Vec<Entry>> {
        let from = from.max(1);
        let inner = self.lock();
        if from >= inner.next_seq {
            return Some(Vec::new());
        }
        if inner.recent.front().is_none_or(|oldest| oldest.seq > from) {
            return None;
        }
        let mut entries = Vec::new();
        let mut bytes = 0;
        for record in inner.recent.iter().skip_while(|record| record.seq < from) {
            bytes += record.data.len();
            entries.push(Entry::Record(record.clone()));
            if entries.len() >= READ_RECORDS || bytes >= READ_BYTES {
                break;
            }
        }
        Some(entries)
    }

    /// Kept entries from sequence `from` on (at most a batch; empty when there is nothing
    /// after `from` yet). Blocking file reads, unless the newest records in memory hold
    /// them: call it off the runtime's workers.
    pub fn read_from(&self, from: u64) -> Vec<Entry> {
        self.read_recent(from)
            .unwrap_or_else(|| self.read_segments(from))
    }

    /// [`SequencedLog::read_from`] from the segment files.
    fn read_segments(&self, from: u64) -> Vec<Entry> {
        let from = from.max(1);
        for _ in 0..3 {
            // Which segments to read, and how far, as they are now.
            let plan: Vec<(u64, PathBuf, u64)> = {
                let inner = self.lock();
                if from >= inner.next_seq {
                    return Vec::new();
                }
                let start = inner
                    .segments
                    .iter()
                    .rposition(|s| s.first_seq <= from)
                    .unwrap_or(0);
                inner
                    .segments
                    .iter()
                    .skip(start)
                    .map(|s| (s.first_seq, s.path.clone(), s.len))
                    .collect()
            };
            let mut entries = Vec::new();
            if plan.first().is_some_and(|(first, _, _)| *first > from) {
                entries.push(Entry::Truncated);
            }
            let mut bytes = 0;
            let mut gone = false;
            for (_, path, len) in &plan {
                match read_segment(path, *len, from, &mut entries, &mut bytes) {
                    Ok(true) => {}
                    Ok(false) => break,
                    // Evicted while we read it: read again from what is kept now.
                    Err(_) => {
                        gone = true;
                        break;
                    }
                }
            }
            if !gone {
                return entries;
            }
        }
        vec![Entry::Truncated]
    }

    /// Bytes of stdout and of stderr written so far (what was dropped included).
    pub fn stream_ends(&self) -> [u64; 2] {
        self.lock().totals
    }

    /// Where what is kept of stdout and of stderr starts (bytes of each dropped before).
    pub fn kept_from(&self) -> [u64; 2] {
        let inner = self.lock();
        inner
            .segments
            .front()
            .map_or(inner.totals, |oldest| oldest.before)
    }

    /// What is kept of stdout and of stderr from the offsets `since` on (each stream's
    /// bytes counted from its first). Blocking file reads, unless the newest records in
    /// memory hold it all: call it off the runtime's workers.
    pub fn streams_from(&self, since: [u64; 2]) -> [StreamBytes; 2] {
        {
            let inner = self.lock();
            if (0..2).all(|stream| since[stream] >= inner.recent_before[stream]) {
                let mut out = nothing_from(since, inner.totals);
                let records = inner.recent.iter().map(|r| (r.kind, r.data.as_slice()));
                gather(records, inner.recent_before, since, &mut out);
                return out;
            }
        }
        self.streams_from_segments(since)
    }

    /// [`SequencedLog::streams_from`] from the segment files.
    fn streams_from_segments(&self, since: [u64; 2]) -> [StreamBytes; 2] {
        for _ in 0..3 {
            // The segments to read, from the last one that starts at or before `since` in
            // both streams (or the oldest kept), as they are now.
            let (plan, totals) = {
                let inner = self.lock();
                let start = inner
                    .segments
                    .iter()
                    .rposition(|s| (0..2).all(|i| s.before[i] <= since[i]))
                    .unwrap_or(0);
                let plan: Vec<(PathBuf, u64, [u64; 2])> = inner
                    .segments
                    .iter()
                    .skip(start)
                    .map(|s| (s.path.clone(), s.len, s.before))
                    .collect();
                (plan, inner.totals)
            };
            let mut out = nothing_from(since, totals);
            let Some(&(_, _, first_before)) = plan.first() else {
                return out;
            };
            // What is kept starts at the first segment: older bytes asked for are gone.
            for stream in 0..2 {
                out[stream].start = since[stream].max(first_before[stream]).min(totals[stream]);
            }
            let read = plan.iter().try_for_each(|(path, len, before)| {
                gather_segment(path, *len, *before, since, &mut out)
            });
            // A segment evicted while it was read: read again from what is kept now.
            if read.is_ok() {
                return out;
            }
        }
        nothing_from(since, self.stream_ends())
    }

    /// The cursor of sequence `seq` in this store.
    pub fn cursor(&self, seq: u64) -> String {
        cursor(&self.store, seq)
    }

    /// The sequence a cursor of this store names, checked against what was written.
    pub fn parse_cursor(&self, text: &str) -> Result<u64, CursorError> {
        let (store, seq) = parse_cursor(text)?;
        if store != self.store {
            return Err(CursorError::OtherStore);
        }
        if seq > self.end() {
            return Err(CursorError::Future);
        }
        Ok(seq)
    }
}

/// Appends the records of one segment (its first `len` bytes) at or after `from` to
/// `entries`; `false` once a batch is full.
fn read_segment(
    path: &Path,
    len: u64,
    from: u64,
    entries: &mut Vec<Entry>,
    bytes: &mut usize,
) -> std::io::Result<bool> {
    let mut reader = BufReader::with_capacity(64 * 1024, File::open(path)?.take(len));
    while let Some(record) = next_record(&mut reader, from)? {
        let Some(record) = record else {
            continue;
        };
        *bytes += record.data.len();
        entries.push(Entry::Record(record));
        if entries.len() >= READ_RECORDS || *bytes >= READ_BYTES {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Adds what one segment (its first `len` bytes, its first record at the streams' offsets
/// `at`) holds of each stream from `since` on to `out`, a record at a time: what lies
/// before `since` is passed over, not kept.
fn gather_segment(
    path: &Path,
    len: u64,
    mut at: [u64; 2],
    since: [u64; 2],
    out: &mut [StreamBytes; 2],
) -> std::io::Result<()> {
    let mut reader = BufReader::with_capacity(64 * 1024, File::open(path)?.take(len));
    while let Some(header) = read_header(&mut reader)? {
        let kind = header.kind.ok_or_else(bad_record)?;
        match stream_index(kind) {
            Some(stream) if at[stream] + header.length > since[stream] => {
                let mut data = vec![0u8; header.length as usize];
                reader.read_exact(&mut data)?;
                gather(std::iter::once((kind, data.as_slice())), at, since, out);
                at[stream] += header.length;
            }
            stream => {
                pass_over(&mut reader, header.length)?;
                if let Some(stream) = stream {
                    at[stream] += header.length;
                }
            }
        }
    }
    Ok(())
}

/// A record's header as a segment holds it.
struct Header {
    seq: u64,
    /// `None`: a byte no kind has (a damaged segment).
    kind: Option<Kind>,
    at_ms: i64,
    length: u64,
}

/// The next record's header (`None` at the reader's end).
fn read_header(reader: &mut impl Read) -> std::io::Result<Option<Header>> {
    let mut header = [0u8; HEADER];
    match reader.read_exact(&mut header) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error),
    }
    let field = |range: std::ops::Range<usize>| {
        let mut raw = [0u8; 8];
        raw[..range.len()].copy_from_slice(&header[range]);
        u64::from_le_bytes(raw)
    };
    Ok(Some(Header {
        seq: field(0..8),
        kind: Kind::of(header[8]),
        at_ms: field(9..17) as i64,
        length: field(17..21),
    }))
}

fn bad_record() -> std::io::Error {
    std::io::Error::other("bad record")
}

/// Reads past `length` bytes of a record's data.
fn pass_over(reader: &mut impl Read, length: u64) -> std::io::Result<()> {
    std::io::copy(&mut reader.take(length), &mut std::io::sink())?;
    Ok(())
}

/// The next record of a segment's reader (`None` at its end), its data skipped (`Some(None)`)
/// when its sequence is before `from`.
fn next_record(reader: &mut impl Read, from: u64) -> std::io::Result<Option<Option<Record>>> {
    let Some(header) = read_header(reader)? else {
        return Ok(None);
    };
    let kind = header.kind.ok_or_else(bad_record)?;
    if header.seq < from {
        pass_over(reader, header.length)?;
        return Ok(Some(None));
    }
    let mut data = vec![0u8; header.length as usize];
    reader.read_exact(&mut data)?;
    Ok(Some(Some(Record {
        seq: header.seq,
        kind,
        at_ms: header.at_ms,
        data,
    })))
}

/// The length of a segment's whole records, the last one's sequence, and the bytes of
/// stdout and of stderr in them.
fn whole_records(path: &Path) -> std::io::Result<(u64, Option<u64>, [u64; 2])> {
    let size = std::fs::metadata(path)?.len();
    let mut reader = BufReader::with_capacity(64 * 1024, File::open(path)?);
    let (mut len, mut last, mut streams) = (0u64, None, [0u64; 2]);
    loop {
        if len + HEADER as u64 > size {
            return Ok((len, last, streams));
        }
        let Ok(Some(Header {
            seq,
            kind: Some(kind),
            length,
            ..
        })) = read_header(&mut reader)
        else {
            return Ok((len, last, streams));
        };
        if len + HEADER as u64 + length > size {
            return Ok((len, last, streams));
        }
        pass_over(&mut reader, length)?;
        len += HEADER as u64 + length;
        last = Some(seq);
        if let Some(stream) = stream_index(kind) {
            streams[stream] += length;
        }
    }
}

/// No bytes of either stream, from `since` (or the end, `totals`, if sooner).
fn nothing_from(since: [u64; 2], totals: [u64; 2]) -> [StreamBytes; 2] {
    [0, 1].map(|stream| StreamBytes {
        bytes: Vec::new(),
        start: since[stream].min(totals[stream]),
    })
}

/// Adds what `records` (read in order, the first at the streams' offsets `at`) hold of
/// each stream from `since` on to `out`.
fn gather<'a>(
    records: impl Iterator<Item = (Kind, &'a [u8])>,
    mut at: [u64; 2],
    since: [u64; 2],
    out: &mut [StreamBytes; 2],
) {
    for (kind, data) in records {
        let Some(stream) = stream_index(kind) else {
            continue;
        };
        let end = at[stream] + data.len() as u64;
        if end > since[stream] {
            let skip = since[stream].saturating_sub(at[stream]) as usize;
            if out[stream].bytes.is_empty() {
                out[stream].start = at[stream] + skip as u64;
            }
            out[stream].bytes.extend_from_slice(&data[skip..]);
        }
        at[stream] = end;
    }
}

/// The reference's cursor for `seq` of `store`.
pub fn cursor(store: &str, seq: u64) -> String {
    let inner = format!("v1.{}.{seq}", URL_SAFE_NO_PAD.encode_to_string(store));
    URL_SAFE_NO_PAD.encode_to_string(inner)
}

/// The store and sequence a cursor names, if it is one (it must encode back to itself).
pub fn parse_cursor(text: &str) -> Result<(String, u64), CursorError> {
    let decoded = URL_SAFE_NO_PAD
        .decode_to_vec(text)
        .map_err(|_| CursorError::Invalid)?;
    let decoded = String::from_utf8(decoded).map_err(|_| CursorError::Invalid)?;
    let mut parts = decoded.splitn(3, '.');
    let (Some("v1"), Some(store), Some(seq)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(CursorError::Invalid);
    };
    let store = URL_SAFE_NO_PAD
        .decode_to_vec(store)
        .ok()
        .and_then(|raw| String::from_utf8(raw).ok())
        .ok_or(CursorError::Invalid)?;
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CursorError::Invalid);
    }
    let seq: u64 = seq.parse().map_err(|_| CursorError::Invalid)?;
    if seq == 0 || cursor(&store, seq) != text {
        return Err(CursorError::Invalid);
    }
    Ok((store, seq))
}

/// How far a reader of a log goes.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// Through this sequence (what was written when it subscribed).
    Seq(u64),
    /// Through the terminal event, live.
    Terminal,
}

/// A log's entries from sequence `from` on, read from disk batch by batch and waiting for
/// more while `until` is not reached. Dropping the stream stops it.
pub fn follow(
    log: Arc<SequencedLog>,
    from: u64,
    until: Until,
) -> impl Stream<Item = Entry> + Send + 'static {
    let written = log.subscribe();
    futures_util::stream::unfold(
        (log, written, from, false),
        move |(log, mut written, next, done)| async move {
            if done {
                return None;
            }
            loop {
                if let Until::Seq(last) = until
                    && next > last
                {
                    return None;
                }
                let batch = match log.read_recent(next) {
                    Some(batch) => batch,
                    None => {
                        // Older than the memory holds, which only moves on: the files.
                        let reader = Arc::clone(&log);
                        tokio::task::spawn_blocking(move || reader.read_segments(next))
                            .await
                            .unwrap_or_default()
                    }
                };
                if batch.is_empty() {
                    written.mark_unchanged();
                    if log.end() >= next {
                        continue;
                    }
                    if written.changed().await.is_err() {
                        return None;
                    }
                    continue;
                }
                let mut entries = Vec::with_capacity(batch.len());
                let mut after = next;
                let mut finished = false;
                for entry in batch {
                    if let Entry::Record(record) = &entry {
                        if let Until::Seq(last) = until
                            && record.seq > last
                        {
                            finished = true;
                            break;
                        }
                        after = record.seq + 1;
                        finished |= record.kind == Kind::Terminal;
                    }
                    entries.push(entry);
                    if finished {
                        break;
                    }
                }
                return Some((
                    futures_util::stream::iter(entries),
                    (log, written, after, finished),
                ));
            }
        },
    )
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(entries: &[Entry]) -> Vec<u64> {
        entries
            .iter()
            .map(|entry| match entry {
                Entry::Truncated => 0,
                Entry::Record(record) => record.seq,
            })
            .collect()
    }

    #[test]
    fn a_log_left_by_a_daemon_before_reopens_without_a_torn_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let log = SequencedLog::create(&path, "p", 4 * 4096).unwrap();
        // Enough to roll segments and drop the oldest.
        for i in 0..40u8 {
            log.append(Kind::Stdout, 1, &[i; 1000]).unwrap();
        }
        let kept = records(&log.read_from(1));
        let cursor = log.cursor(40);
        drop(log);
        // A crash in the middle of a record: its start is on disk, not its end.
        let last = std::fs::read_dir(&path)
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .max()
            .unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&last)
            .unwrap();
        file.write_all(&41u64.to_le_bytes()).unwrap();
        file.write_all(&[1, 0, 0]).unwrap();
        drop(file);

        let log = SequencedLog::open(&path, "p", 4 * 4096).unwrap();
        assert_eq!(log.end(), 40);
        assert_eq!(records(&log.read_from(1)), kept);
        assert!(!log.ended());
        // Its cursors still hold, and the next event follows the last whole one.
        assert_eq!(log.parse_cursor(&cursor), Ok(40));
        assert_eq!(log.append(Kind::Terminal, 2, b"{}").unwrap(), 41);
        assert!(log.ended());
        let tail = log.read_from(40);
        assert_eq!(records(&tail), vec![40, 41]);
        let Entry::Record(terminal) = &tail[1] else {
            panic!("{tail:?}")
        };
        assert_eq!(terminal.data, b"{}");
    }

    #[test]
    fn reads_back_in_order_from_any_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let log = SequencedLog::create(&dir.path().join("p"), "p", 1 << 20).unwrap();
        assert!(log.read_from(1).is_empty());
        for i in 0..10u8 {
            let kind = if i % 2 == 0 {
                Kind::Stdout
            } else {
                Kind::Stderr
            };
            assert_eq!(log.append(kind, 7, &[i; 3]).unwrap(), u64::from(i) + 1);
        }
        log.append(Kind::Terminal, 8, b"{}").unwrap();
        assert_eq!(log.end(), 11);
        let all = log.read_from(1);
        assert_eq!(records(&all), (1..=11).collect::<Vec<_>>());
        let Entry::Record(second) = &all[1] else {
            panic!()
        };
        assert_eq!(
            (second.kind, second.at_ms, second.data.as_slice()),
            (Kind::Stderr, 7, [1u8; 3].as_slice())
        );
        assert_eq!(records(&log.read_from(10)), [10, 11]);
        assert!(log.read_from(12).is_empty());
    }

    #[test]
    fn the_newest_records_are_read_from_memory_as_from_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let log = SequencedLog::create(&dir.path().join("p"), "p", 1 << 20).unwrap();
        for i in 0..200u32 {
            let kind = [Kind::Stdout, Kind::Stderr][i as usize % 2];
            log.append(kind, i64::from(i), &vec![i as u8; 100 + i as usize * 3])
                .unwrap();
        }
        log.append(Kind::Terminal, 9, b"{}").unwrap();
        let mut in_memory = 0;
        for from in 1..=202 {
            let Some(recent) = log.read_recent(from) else {
                continue;
            };
            in_memory += 1;
            assert_eq!(recent, log.read_segments(from), "from {from}");
        }
        // What the memory holds: the newest 32 KiB of data, then nothing past the end.
        assert!((40..100).contains(&in_memory), "{in_memory}");
        assert_eq!(log.read_recent(202), Some(Vec::new()));
        assert_eq!(log.read_recent(1), None);
        // A record larger than the memory holds is read from the file only.
        log.append(Kind::Stdout, 10, &vec![b'x'; RECENT_BYTES + 1])
            .unwrap();
        assert_eq!(log.read_recent(202), None);
        assert_eq!(records(&log.read_from(202)), [202]);
        assert_eq!(log.streams_from(log.stream_ends())[0].bytes.len(), 0);
        log.append(Kind::Stdout, 11, b"y").unwrap();
        assert_eq!(records(&log.read_recent(203).unwrap()), [203]);
    }

    #[test]
    fn keeps_the_latest_cap_and_says_what_it_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let cap = 64 * 1024;
        let log = SequencedLog::create(&dir.path().join("p"), "p", cap).unwrap();
        let chunk = vec![b'x'; 1000];
        for _ in 0..1000 {
            log.append(Kind::Stdout, 0, &chunk).unwrap();
        }
        // Kept: at least the cap, at most a segment more.
        let kept = std::fs::read_dir(dir.path().join("p"))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum::<u64>();
        assert!(kept >= cap && kept <= cap + cap / SEGMENTS + 2000, "{kept}");
        let from_start = log.read_from(1);
        assert_eq!(from_start[0], Entry::Truncated);
        let Entry::Record(oldest) = &from_start[1] else {
            panic!()
        };
        assert!(oldest.seq > 900 && oldest.seq < 1000);
        // Past the oldest kept: no truncation.
        assert_ne!(log.read_from(oldest.seq)[0], Entry::Truncated);
        let mut seen = Vec::new();
        let mut next = oldest.seq;
        loop {
            let batch = log.read_from(next);
            let Some(Entry::Record(last)) = batch.last() else {
                break;
            };
            next = last.seq + 1;
            seen.extend(records(&batch));
        }
        assert_eq!(seen, (oldest.seq..=1000).collect::<Vec<_>>());
    }

    /// Each stream's bytes from `since` as the log answers them, checked against what was
    /// written: the kept part is the stream's end, from `start` on.
    fn check_streams(log: &SequencedLog, written: &[Vec<u8>; 2], since: [u64; 2]) -> [u64; 2] {
        let read = log.streams_from(since);
        assert_eq!(read, log.streams_from_segments(since), "since {since:?}");
        for stream in 0..2 {
            let StreamBytes { bytes, start } = &read[stream];
            assert!(*start >= since[stream].min(written[stream].len() as u64));
            assert_eq!(bytes.as_slice(), &written[stream][*start as usize..]);
        }
        [read[0].start, read[1].start]
    }

    #[test]
    fn each_streams_offsets_stay_absolute_past_evictions_and_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let log = SequencedLog::create(&path, "p", 4 * 4096).unwrap();
        let mut written = [Vec::new(), Vec::new()];
        let mut seed = 7u64;
        for i in 0..400u32 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let stream = (seed >> 33) as usize % 3 % 2;
            let data = vec![b'a' + (i % 26) as u8; (seed >> 40) as usize % 300 + 1];
            log.append([Kind::Stdout, Kind::Stderr][stream], 0, &data)
                .unwrap();
            written[stream].extend_from_slice(&data);
            if i % 50 == 49 {
                log.append(Kind::Terminal, 0, b"{}").unwrap();
            }
        }
        let ends = written.clone().map(|w| w.len() as u64);
        assert_eq!(log.stream_ends(), ends);
        // Older bytes were dropped: what is kept starts past 0 in both streams.
        let kept = check_streams(&log, &written, [0, 0]);
        assert!(kept[0] > 0 && kept[1] > 0, "{kept:?}");
        for since in [kept, ends, [kept[0] + 5, ends[1] - 3], [ends[0] - 1, 0]] {
            check_streams(&log, &written, since);
        }
        drop(log);
        let log = SequencedLog::open(&path, "p", 4 * 4096).unwrap();
        assert_eq!(log.stream_ends(), ends);
        assert_eq!(check_streams(&log, &written, [0, 0]), kept);
        log.append(Kind::Stderr, 0, b"more").unwrap();
        written[1].extend_from_slice(b"more");
        assert_eq!(log.streams_from(ends)[1].bytes, b"more");
        assert_eq!(log.streams_from(ends)[1].start, ends[1]);
        check_streams(&log, &written, [0, 0]);
    }

    #[test]
    fn a_log_continues_streams_and_reads_names_without_counts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let log = SequencedLog::create_after(&path, "p", 1 << 20, [100, 7]).unwrap();
        log.append(Kind::Stdout, 0, b"abc").unwrap();
        let read = log.streams_from([0, 0]);
        assert_eq!(
            (read[0].bytes.as_slice(), read[0].start),
            (b"abc".as_slice(), 100)
        );
        assert_eq!((read[1].bytes.len(), read[1].start), (0, 7));
        assert_eq!(log.stream_ends(), [103, 7]);
        drop(log);
        // A segment named as before the counts: its streams start at 0.
        for entry in std::fs::read_dir(&path).unwrap().flatten() {
            let name = entry.file_name().into_string().unwrap();
            let (first, _) = parse_segment_name(&name).unwrap();
            std::fs::rename(entry.path(), path.join(format!("{first:020}.log"))).unwrap();
        }
        let log = SequencedLog::open(&path, "p", 1 << 20).unwrap();
        assert_eq!(log.stream_ends(), [3, 0]);
        assert_eq!(log.streams_from([1, 0])[0].bytes, b"bc");
        assert_eq!(parse_segment_name("1.2.log"), None);
        assert_eq!(parse_segment_name("x.log"), None);
    }

    #[test]
    fn cursors_are_the_references_and_checked() {
        let id = "0b6e2c1a-7d3f-4c8e-9a51-2f4d6b8e0c13";
        // The reference's own example of a cursor (their form: docs/api.md, RPC, logs).
        assert_eq!(
            cursor(id, 1),
            "djEuTUdJMlpUSmpNV0V0TjJRelppMDBZemhsTFRsaE5URXRNbVkwWkRaaU9HVXdZekV6LjE"
        );
        assert_eq!(parse_cursor(&cursor(id, 42)), Ok((id.to_string(), 42)));
        for bad in ["", "x", "djEu", "!!", &format!("{}=", cursor(id, 1))] {
            assert_eq!(parse_cursor(bad), Err(CursorError::Invalid), "{bad}");
        }
        let dir = tempfile::tempdir().unwrap();
        let log = SequencedLog::create(&dir.path().join("p"), id, 1 << 20).unwrap();
        log.append(Kind::Stdout, 0, b"a").unwrap();
        assert_eq!(log.parse_cursor(&cursor(id, 1)), Ok(1));
        assert_eq!(log.parse_cursor(&cursor(id, 2)), Err(CursorError::Future));
        assert_eq!(
            log.parse_cursor(&cursor("another", 1)),
            Err(CursorError::OtherStore)
        );
    }
}
