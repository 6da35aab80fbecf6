//! One output stream of a process as 0.12's logs answer it: the latest bytes up to a cap,
//! addressed by absolute offsets (bytes since the process started writing), so a client
//! can ask for what came after the offset it last saw. The bytes are the process's
//! [`SequencedLog`](crate::seqlog::SequencedLog)'s; this turns them into text.

use crate::seqlog::StreamBytes;
use crate::text::incomplete_tail;

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

/// Where the latest `cap` bytes of a stream that ends at `end` and is kept from `kept`
/// start: what a reader is given at most.
pub fn capped_start(kept: u64, end: u64, cap: u64) -> u64 {
    kept.max(end.saturating_sub(cap))
}

/// `read`, the bytes a log keeps of a stream from `since`, as text: the latest `cap` of
/// them, starting with a whole character where older ones were dropped. While the stream
/// may still grow (`whole` false), a character cut at the end is left for the next read.
pub fn slice(read: StreamBytes, since: u64, whole: bool, cap: u64) -> Slice {
    let StreamBytes {
        mut bytes,
        mut start,
    } = read;
    let end = start + bytes.len() as u64;
    let from = capped_start(start, end, cap);
    if from > start {
        bytes.drain(..(from - start) as usize);
        start = from;
    }
    if start > since {
        // Dropped in the middle of a character: the rest of it goes too.
        let cut = bytes
            .iter()
            .take(3)
            .take_while(|&&byte| byte & 0b1100_0000 == 0b1000_0000)
            .count();
        bytes.drain(..cut);
        start += cut as u64;
    }
    if !whole {
        bytes.truncate(bytes.len() - incomplete_tail(&bytes));
    }
    Slice {
        end: start + bytes.len() as u64,
        text: String::from_utf8_lossy(&bytes).into_owned(),
        skipped: start.saturating_sub(since),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(bytes: &[u8], start: u64) -> StreamBytes {
        StreamBytes {
            bytes: bytes.to_vec(),
            start,
        }
    }

    #[test]
    fn gives_the_latest_bytes_at_absolute_offsets() {
        let all = slice(kept(b"0123456789", 0), 0, true, 8);
        assert_eq!(
            (all.text.as_str(), all.end, all.skipped),
            ("23456789", 10, 2)
        );
        let tail = slice(kept(b"789", 7), 7, true, 8);
        assert_eq!((tail.text.as_str(), tail.end, tail.skipped), ("789", 10, 0));
        let none = slice(kept(b"", 10), 10, true, 8);
        assert_eq!((none.text.as_str(), none.end), ("", 10));
        // Dropped by the log before the asked offset.
        let late = slice(kept(b"56789", 5), 2, true, 8);
        assert_eq!(
            (late.text.as_str(), late.end, late.skipped),
            ("56789", 10, 3)
        );
    }

    #[test]
    fn never_cuts_a_character() {
        let euro = "€".as_bytes();
        let mut bytes = b"a".to_vec();
        bytes.extend_from_slice(&euro[..2]);
        // Running: the cut character waits for its last byte.
        let first = slice(kept(&bytes, 0), 0, false, 8);
        assert_eq!((first.text.as_str(), first.end), ("a", 1));
        assert_eq!(slice(kept(euro, 1), 1, false, 8).text, "€");
        // Dropping the front drops a whole character: "€" is three bytes.
        let capped = slice(kept("€€€".as_bytes(), 0), 0, true, 7);
        assert_eq!((capped.text.as_str(), capped.skipped), ("€€", 3));
        // And so does a log that dropped part of one.
        let dropped = slice(kept(&"€€".as_bytes()[1..], 1), 0, true, 8);
        assert_eq!((dropped.text.as_str(), dropped.skipped), ("€", 3));
    }
}
