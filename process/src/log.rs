//! One output stream of a background process as it is kept: the latest bytes up to a cap,
//! addressed by absolute offsets (bytes since the process started writing), so a client
//! can ask for what came after the offset it last saw.

use std::collections::VecDeque;

use crate::text::incomplete_tail;

/// The kept tail of one output stream.
#[derive(Debug, Default)]
pub struct OutputLog {
    bytes: VecDeque<u8>,
    /// The absolute offset of `bytes[0]`: how much was dropped from the front.
    start: u64,
}

/// Output read from an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// Lossy text of the bytes returned.
    pub text: String,
    /// The absolute offset after them: where the next read continues.
    pub end: u64,
    /// Bytes after the asked offset that are no longer kept (dropped by the cap).
    pub skipped: u64,
}

impl OutputLog {
    /// A log restored from a record: `bytes` kept after `start` dropped ones.
    pub fn restored(bytes: Vec<u8>, start: u64) -> Self {
        Self {
            bytes: bytes.into(),
            start,
        }
    }

    /// The absolute offset where the stream ends now.
    pub fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// Bytes dropped from the front so far.
    pub fn dropped(&self) -> u64 {
        self.start
    }

    /// Appends `bytes`, dropping the oldest beyond `cap` (and the rest of a character cut
    /// there, so the kept text starts whole).
    pub fn push(&mut self, bytes: &[u8], cap: usize) {
        self.bytes.extend(bytes);
        if self.bytes.len() <= cap {
            return;
        }
        let mut excess = self.bytes.len() - cap;
        for _ in 0..3 {
            match self.bytes.get(excess) {
                Some(byte) if byte & 0b1100_0000 == 0b1000_0000 => excess += 1,
                _ => break,
            }
        }
        self.bytes.drain(..excess);
        self.start += excess as u64;
    }

    /// What was written from `since` on. While the stream may still grow (`whole` false),
    /// a character cut at the end is left for the next read.
    pub fn since(&self, since: u64, whole: bool) -> Slice {
        let from = since.max(self.start).min(self.end());
        let skipped = from.saturating_sub(since);
        let offset = usize::try_from(from - self.start).unwrap_or(usize::MAX);
        let (front, back) = self.bytes.as_slices();
        let mut bytes = Vec::with_capacity(self.bytes.len() - offset);
        if offset < front.len() {
            bytes.extend_from_slice(&front[offset..]);
            bytes.extend_from_slice(back);
        } else {
            bytes.extend_from_slice(&back[offset - front.len()..]);
        }
        if !whole {
            bytes.truncate(bytes.len() - incomplete_tail(&bytes));
        }
        Slice {
            end: from + bytes.len() as u64,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_bytes_at_absolute_offsets() {
        let mut log = OutputLog::default();
        log.push(b"0123456789", 8);
        assert_eq!((log.dropped(), log.end()), (2, 10));
        let all = log.since(0, true);
        assert_eq!(
            (all.text.as_str(), all.end, all.skipped),
            ("23456789", 10, 2)
        );
        let tail = log.since(7, true);
        assert_eq!((tail.text.as_str(), tail.end, tail.skipped), ("789", 10, 0));
        let none = log.since(10, true);
        assert_eq!((none.text.as_str(), none.end), ("", 10));
        log.push(b"ab", 8);
        assert_eq!(log.since(10, true).text, "ab");
    }

    #[test]
    fn never_cuts_a_character() {
        let mut log = OutputLog::default();
        let euro = "€".as_bytes();
        log.push(b"a", 8);
        log.push(&euro[..2], 8);
        // Running: the cut character waits for its last byte.
        let first = log.since(0, false);
        assert_eq!((first.text.as_str(), first.end), ("a", 1));
        log.push(&euro[2..], 8);
        assert_eq!(log.since(first.end, false).text, "€");
        // Dropping the front drops a whole character: "€" is three bytes.
        let mut log = OutputLog::default();
        log.push("€€€".as_bytes(), 7);
        assert_eq!(log.since(0, true).text, "€€");
        assert_eq!(log.dropped(), 3);
    }
}
