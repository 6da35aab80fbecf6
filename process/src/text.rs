//! Turning byte streams into text events without cutting a character in two.

/// Length of a UTF-8 sequence cut off at the end of `bytes` (0 if the end is whole).
pub fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0b1100_0000 != 0b1000_0000 {
            let needed = match byte {
                b if b >= 0xF0 => 4,
                b if b >= 0xE0 => 3,
                b if b >= 0xC0 => 2,
                _ => 1,
            };
            return if needed > back { back } else { 0 };
        }
    }
    0
}

/// Decodes a byte stream chunk by chunk, holding back a character split across chunks.
/// Invalid sequences become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Chunker {
    carry: Vec<u8>,
}

impl Utf8Chunker {
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.carry.extend_from_slice(bytes);
        let whole = self.carry.len() - incomplete_tail(&self.carry);
        let text = String::from_utf8_lossy(&self.carry[..whole]).into_owned();
        self.carry.drain(..whole);
        text
    }

    /// How many bytes are held back (the start of a character not yet whole).
    pub fn held(&self) -> usize {
        self.carry.len()
    }

    /// Whatever is held back, at the end of the stream.
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.carry).into_owned();
        self.carry.clear();
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cut_characters() {
        let euro = "€".as_bytes();
        assert_eq!(incomplete_tail(b"abc"), 0);
        assert_eq!(incomplete_tail(euro), 0);
        assert_eq!(incomplete_tail(&euro[..1]), 1);
        assert_eq!(incomplete_tail(&euro[..2]), 2);
    }

    #[test]
    fn chunker_rejoins_split_characters() {
        let mut chunker = Utf8Chunker::default();
        let bytes = "a€b".as_bytes();
        assert_eq!(chunker.push(&bytes[..2]), "a");
        assert_eq!(chunker.push(&bytes[2..]), "€b");
        assert_eq!(chunker.push(b"\xe2"), "");
        assert_eq!(chunker.finish(), "\u{fffd}");
    }
}
