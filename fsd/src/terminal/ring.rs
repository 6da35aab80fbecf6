//! The bytes a terminal showed last, kept to replay to a connection that joins later.

use std::collections::VecDeque;

/// Bytes a terminal keeps, as the reference: 256 KiB, oldest dropped first.
pub const RING_BYTES: usize = 256 * 1024;

/// A byte ring: not line-aware, never cleared while the terminal lives.
#[derive(Debug, Default)]
pub struct Ring {
    bytes: VecDeque<u8>,
}

impl Ring {
    pub fn push(&mut self, chunk: &[u8]) {
        let chunk = &chunk[chunk.len().saturating_sub(RING_BYTES)..];
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(RING_BYTES);
        self.bytes.drain(..overflow);
        self.bytes.extend(chunk);
    }

    /// Everything kept, oldest first.
    pub fn contents(&self) -> Vec<u8> {
        let (front, back) = self.bytes.as_slices();
        [front, back].concat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_in_order() {
        let mut ring = Ring::default();
        ring.push(b"hello ");
        ring.push(b"world");
        assert_eq!(ring.contents(), b"hello world");
        let big: Vec<u8> = (0..RING_BYTES + 10).map(|i| (i % 251) as u8).collect();
        ring.push(&big);
        assert_eq!(ring.contents(), &big[10..]);
        ring.push(b"!");
        let contents = ring.contents();
        assert_eq!(contents.len(), RING_BYTES);
        assert_eq!(contents.last(), Some(&b'!'));
        assert_eq!(&contents[..RING_BYTES - 1], &big[11..]);
    }
}
