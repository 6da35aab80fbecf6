//! A frame's JSON text, written here rather than by `serde_json::to_string`: serde_json
//! scans a string for bytes to escape one byte at a time, which was a sixth of the daemon's
//! time answering a 1 MiB `readFile` and moved that row by a tenth from one build to the next
//! as its loop's alignment changed. Here eight bytes are checked at once and clean runs are
//! copied whole, into a buffer sized once. The text is byte for byte what serde_json writes
//! (the tests compare the two).

use serde_json::Value;

/// `parts` as one JSON array's text: a message's tag and its fields.
pub fn array(parts: &[Part<'_>]) -> String {
    let size = 2 + parts.iter().map(Part::size).sum::<usize>() + parts.len();
    let mut out = Vec::with_capacity(size);
    out.push(b'[');
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        match part {
            Part::Str(text) => push_str(&mut out, text),
            Part::Int(number) => out.extend_from_slice(number.to_string().as_bytes()),
            Part::Value(value) => push_value(&mut out, value),
        }
    }
    out.push(b']');
    // Only whole UTF-8 strings and ASCII were written.
    String::from_utf8(out).unwrap_or_default()
}

/// One element of a message's array.
pub enum Part<'a> {
    Str(&'a str),
    Int(i128),
    Value(&'a Value),
}

impl Part<'_> {
    /// About the text's length (exact for a string with nothing to escape).
    fn size(&self) -> usize {
        match self {
            Part::Str(text) => text.len() + 2,
            Part::Int(_) => 20,
            Part::Value(value) => value_size(value),
        }
    }
}

fn value_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|item| value_size(item) + 1).sum::<usize>(),
        Value::Object(fields) => {
            let fields = fields.iter();
            2 + fields
                .map(|(key, value)| key.len() + 4 + value_size(value))
                .sum::<usize>()
        }
    }
}

fn push_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // A number writes into a Vec without failing.
        Value::Number(number) => drop(serde_json::to_writer(&mut *out, number)),
        Value::String(text) => push_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                push_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(fields) => {
            out.push(b'{');
            for (index, (key, value)) in fields.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                push_str(out, key);
                out.push(b':');
                push_value(out, value);
            }
            out.push(b'}');
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any of a word's eight bytes is below a space, a quote or a backslash (the
/// bytes JSON escapes): "has a zero byte" of the word and of it xor each character.
fn needs_escape(word: u64) -> bool {
    let controls = word.wrapping_sub(ONES * 0x20);
    let quotes = (word ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES);
    let backslashes = (word ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES);
    (controls | quotes | backslashes) & !word & HIGHS != 0
}

/// `text` as a JSON string literal.
fn push_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut clean = 0;
    let mut at = 0;
    while at < bytes.len() {
        if let Some(word) = bytes.get(at..at + 8) {
            let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
            if !needs_escape(word) {
                at += 8;
                continue;
            }
        }
        let byte = bytes[at];
        if let Some(escape) = escaped(byte) {
            out.extend_from_slice(&bytes[clean..at]);
            out.extend_from_slice(escape.as_bytes());
            if escape == UNICODE {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 15)]]);
            }
            clean = at + 1;
        }
        at += 1;
    }
    out.extend_from_slice(&bytes[clean..]);
    out.push(b'"');
}

/// The start of a `\u00XX` escape; its two hex digits follow.
const UNICODE: &str = "\\u00";

/// How JSON writes `byte` if it must be escaped, as serde_json writes it.
fn escaped(byte: u8) -> Option<&'static str> {
    Some(match byte {
        b'"' => "\\\"",
        b'\\' => "\\\\",
        0x08 => "\\b",
        b'\t' => "\\t",
        b'\n' => "\\n",
        0x0c => "\\f",
        b'\r' => "\\r",
        0..0x20 => UNICODE,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Strings of every kind of byte: each escape, runs longer and shorter than a word,
    /// multi-byte characters across word boundaries.
    fn strings(seed: u64) -> Vec<String> {
        let pieces = [
            "a",
            "\"",
            "\\",
            "\n",
            "\t",
            "\r",
            "\u{8}",
            "\u{c}",
            "\u{0}",
            "\u{1f}",
            "\u{7f}",
            " ",
            "é",
            "☃",
            "𝄞",
            "abcdefgh",
            "0123456789abcdef",
        ];
        let mut state = seed;
        (0..500)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = (state >> 33) % 40;
                (0..len)
                    .map(|step| {
                        let pick = (state >> (step % 50)) ^ step.wrapping_mul(0x9e37_79b9);
                        pieces[(pick % pieces.len() as u64) as usize]
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for seed in 0..20 {
            for text in strings(seed) {
                let mut out = Vec::new();
                push_str(&mut out, &text);
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    serde_json::to_string(&text).unwrap(),
                    "{text:?}"
                );
            }
        }
        for byte in 0..=0x7f_u8 {
            let text = format!("abcdefg{}hijklmnop", char::from(byte));
            let mut out = Vec::new();
            push_str(&mut out, &text);
            assert_eq!(out, serde_json::to_vec(&text).unwrap(), "byte {byte}");
        }
    }

    #[test]
    fn messages_are_written_as_serde_json_writes_them() {
        let value = json!({
            "content": "x\"y\\z\n".repeat(100),
            "size": 1u64 << 40,
            "negative": -3,
            "ratio": 0.25,
            "list": [[null, true, false, "é"]],
            "nested": {"": {}, "empty": []},
        });
        assert_eq!(
            array(&[Part::Str("resolve"), Part::Int(7), Part::Value(&value)]),
            serde_json::to_string(&("resolve", 7, &value)).unwrap()
        );
        assert_eq!(array(&[Part::Str("pipe")]), r#"["pipe"]"#);
        assert_eq!(
            array(&[
                Part::Str("release"),
                Part::Int(-1),
                Part::Int(u64::MAX.into())
            ]),
            serde_json::to_string(&("release", -1, u64::MAX)).unwrap()
        );
    }
}
