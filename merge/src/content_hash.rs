//! Content hashes as two-way sync keeps them: a SHA-256's 32 bytes, written as lowercase
//! hex where they are stored or sent (the daemon's manifests, a sync's state).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A SHA-256 of content, kept as its 32 bytes and written as lowercase hex (as the daemon
/// and a sync's state write it). A following sync holds two per file (the ancestor's and
/// the record's); as hex strings they were 200 bytes and two allocations a file.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ContentHash([u8; 32]);

impl Ord for ContentHash {
    /// The bytes' order, compared as two big-endian halves: the derived order calls
    /// `memcmp` for each comparison, a sixth of a 10,000-file pass's writing thread.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.halves().cmp(&other.halves())
    }
}

impl PartialOrd for ContentHash {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl ContentHash {
    fn halves(&self) -> (u128, u128) {
        let (high, low) = self.0.split_at(16);
        let half = |bytes: &[u8]| {
            let mut half = [0u8; 16];
            half.copy_from_slice(bytes);
            u128::from_be_bytes(half)
        };
        (half(high), half(low))
    }

    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> ContentHash {
        ContentHash(Sha256::digest(bytes).into())
    }

    /// Reads 64 hex digits (either case); anything else is `None`.
    pub fn parse(hex: &str) -> Option<ContentHash> {
        let digits = hex.as_bytes();
        if digits.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            let text = std::str::from_utf8(pair).ok()?;
            *byte = u8::from_str_radix(text, 16).ok()?;
        }
        Some(ContentHash(bytes))
    }
}

impl From<Sha256> for ContentHash {
    fn from(hasher: Sha256) -> ContentHash {
        ContentHash(hasher.finalize().into())
    }
}

impl ContentHash {
    /// The 64 hex digits, made without the formatter (a sync's state writes one or two a
    /// file: 20,000 through `{:02x}` a byte took a tenth of a first upload's own time).
    fn hex(&self) -> [u8; 64] {
        let mut hex = [0u8; 64];
        fsd_api::hex::write_lower(&self.0, &mut hex);
        hex
    }
}

impl std::fmt::Display for ContentHash {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = self.hex();
        out.write_str(std::str::from_utf8(&hex).map_err(|_| std::fmt::Error)?)
    }
}

impl std::fmt::Debug for ContentHash {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, out)
    }
}

impl Serialize for ContentHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let hex = self.hex();
        let text = std::str::from_utf8(&hex).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(text)
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        ContentHash::parse(&text).ok_or_else(|| {
            serde::de::Error::invalid_value(
                serde::de::Unexpected::Str(&text),
                &"a SHA-256 in 64 hex digits",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_digit_by_digit_and_reads_back() {
        let hash = ContentHash::of(b"a sync's content");
        let by_formatter: String = Sha256::digest(b"a sync's content")
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        assert_eq!(hash.to_string(), by_formatter);
        let json = serde_json::to_string(&hash).unwrap();
        assert_eq!(json, format!("\"{by_formatter}\""));
        assert_eq!(serde_json::from_str::<ContentHash>(&json).unwrap(), hash);
        assert_eq!(ContentHash::parse(&by_formatter), Some(hash));
    }

    #[test]
    fn hashes_are_ordered_as_their_bytes() {
        let mut hashes: Vec<ContentHash> = (0u8..64).map(|n| ContentHash::of(&[n])).collect();
        // Differing only in the last byte, and only in the first.
        let mut low = [7u8; 32];
        low[31] = 1;
        let mut high = low;
        high[31] = 2;
        let mut first = low;
        first[0] = 0xff;
        hashes.extend([ContentHash(low), ContentHash(high), ContentHash(first)]);
        let mut by_hash = hashes.clone();
        by_hash.sort();
        let mut by_bytes = hashes;
        by_bytes.sort_by_key(|hash| hash.0);
        assert_eq!(by_hash, by_bytes);
    }
}
