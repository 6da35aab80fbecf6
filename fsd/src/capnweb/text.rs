//! A frame's JSON text, written here rather than by `serde_json::to_string`: serde_json
//! scans a string for bytes to escape one byte at a time, which was a sixth of the daemon's
//! time answering a 1 MiB `readFile` and moved that row by a tenth from one build to the next
//! as its loop's alignment changed. Here eight bytes are checked at once and clean runs are
//! copied whole, into a buffer sized once. The text is byte for byte what serde_json writes
//! (the tests compare the two).
//!
//! A frame is read by serde_json, but a long string without escapes (a `writeFile`'s
//! content) is taken out of the text first and copied in whole: serde_json's scan of a
//! string for its end checks eight bytes at a time for a quote, a backslash or a control
//! character, about 0.25 ms for 1 MiB here, where `memchr` finds the end and a minimum
//! finds a control character in a tenth of that. The value is the one serde_json reads
//! (the tests compare the two), and a frame serde_json refuses is refused with its error.

use std::ops::Range;

use serde_json::Value;

/// The shortest string read outside serde_json: below it the scan costs more than it saves.
const LIFTED_LEN: usize = 16 * 1024;

/// `text` read as JSON, as `serde_json::from_str` reads it, long strings copied in whole.
pub fn parse(text: &str) -> serde_json::Result<Value> {
    let lifted = if text.len() < LIFTED_LEN {
        Vec::new()
    } else {
        long_strings(text.as_bytes())
    };
    if lifted.is_empty() {
        return serde_json::from_str(text);
    }
    // The rest of the text, each long string's content replaced by a placeholder: `\u0000`
    // and its index. No other string of it may start with NUL, which JSON writes as that
    // escape (a raw one is refused).
    let mut rest = String::with_capacity(text.len() / 64 + lifted.len() * 16);
    let mut from = 0;
    for (index, range) in lifted.iter().enumerate() {
        rest.push_str(&text[from..range.start]);
        rest.push_str("\\u0000");
        rest.push_str(&index.to_string());
        from = range.end;
    }
    rest.push_str(&text[from..]);
    // A `\u0000` of the frame's own (or an escaped backslash before `u0000`): read it all.
    if memchr::memmem::find_iter(rest.as_bytes(), PLACEHOLDER).count() != lifted.len() {
        return serde_json::from_str(text);
    }
    // A text serde_json refuses is refused with the error it finds in the whole.
    let Ok(mut value) = serde_json::from_str(&rest) else {
        return serde_json::from_str(text);
    };
    // Each string put back once, where its placeholder is.
    let mut unplaced: Vec<Option<Range<usize>>> = lifted.into_iter().map(Some).collect();
    put_back(&mut value, &mut |index| {
        let range = unplaced.get_mut(index)?.take()?;
        Some(text[range].to_owned())
    });
    if unplaced.iter().any(Option::is_some) {
        // Not reached: each placeholder is one string of the value.
        return serde_json::from_str(text);
    }
    Ok(value)
}

/// Escapes passed over before the rest of a text is left to serde_json.
const ESCAPES_SEEN: usize = 16;

/// What stands for a long string's content in the rest of the text, with its index after.
const PLACEHOLDER: &[u8] = b"\\u0000";

/// The contents (between the quotes) of `text`'s strings of at least [`LIFTED_LEN`] bytes
/// with no escape and no control character that are values, not keys, up to the
/// [`ESCAPES_SEEN`]th escape: text with escapes (source code has one a line) is serde_json's
/// to read, and a second scan stopping at each would cost more than the first. A text that
/// ends inside a string has none: serde_json says what is wrong with it.
fn long_strings(text: &[u8]) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut at = 0;
    let mut escapes = 0;
    while let Some(open) = memchr::memchr(b'"', &text[at..]) {
        let start = at + open + 1;
        let mut end = start;
        let mut escaped = false;
        loop {
            let Some(next) = text
                .get(end..)
                .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
            else {
                return Vec::new();
            };
            end += next;
            if text[end] == b'"' {
                break;
            }
            escaped = true;
            escapes += 1;
            if escapes > ESCAPES_SEEN {
                return found;
            }
            end += 2;
        }
        at = end + 1;
        let is_key = text[at..]
            .iter()
            .find(|byte| !byte.is_ascii_whitespace())
            .is_some_and(|&byte| byte == b':');
        if end - start >= LIFTED_LEN && !escaped && !is_key && !has_control(&text[start..end]) {
            found.push(start..end);
        }
    }
    found
}

/// Whether `bytes` hold a control character, which a JSON string must escape. A minimum
/// a block, which the compiler does sixteen or thirty-two bytes at a time.
fn has_control(bytes: &[u8]) -> bool {
    bytes
        .chunks(8192)
        .any(|block| block.iter().fold(u8::MAX, |low, &byte| low.min(byte)) < 0x20)
}

/// Each placeholder string in `value` replaced by what `take` gives for its index.
fn put_back(value: &mut Value, take: &mut impl FnMut(usize) -> Option<String>) {
    match value {
        Value::String(text) => {
            let index = text
                .strip_prefix('\0')
                .and_then(|digits| digits.parse().ok());
            if let Some(content) = index.and_then(&mut *take) {
                *text = content;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| put_back(item, take)),
        Value::Object(fields) => fields.values_mut().for_each(|item| put_back(item, take)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

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

    /// `text` read by [`parse`] exactly as serde_json reads it: the same value, or the same
    /// error.
    fn read_alike(text: &str) {
        let ours = parse(text).map_err(|error| error.to_string());
        let theirs = serde_json::from_str::<Value>(text).map_err(|error| error.to_string());
        assert!(ours == theirs, "{}", &text[..text.len().min(200)]);
    }

    #[test]
    fn frames_are_read_as_serde_json_reads_them() {
        let long = |piece: &str| piece.repeat(LIFTED_LEN / piece.len() + 3);
        let plain = long("abcdefg é☃𝄞 ");
        let strings = [
            plain.clone(),
            long("a"),
            format!("{plain}\n{plain}"),
            format!("{plain}\"{plain}"),
            format!("{plain}\\u0000"),
            format!("{plain}\u{1}"),
            format!("{plain}\u{1f}"),
            format!("{plain}\u{7f}"),
            "short".to_owned(),
            "\u{0}7".to_owned(),
            "\u{0}0".to_owned(),
            String::new(),
        ];
        let mut state = 7_u64;
        let mut next = |below: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize % below
        };
        for _ in 0..300 {
            let mut values: Vec<Value> = (0..1 + next(4))
                .map(|_| Value::String(strings[next(strings.len())].clone()))
                .collect();
            let key = strings[next(strings.len())].clone();
            let value = json!([
                "push",
                ["pipeline", 0, ["files", "writeFile"], values.clone()]
            ]);
            values.push(json!({ key: values[0].clone(), "nested": [values.clone()] }));
            let text = serde_json::to_string(&json!(["push", values])).unwrap();
            read_alike(&text);
            read_alike(&serde_json::to_string(&value).unwrap());
            read_alike(&serde_json::to_string_pretty(&value).unwrap());
            // Cut short, or with a byte changed: the same error.
            let cut = next(text.len());
            if text.is_char_boundary(cut) {
                read_alike(&text[..cut]);
                for byte in ["\u{1}", "\\", "\\é", "\"", "x", "\\u0000"] {
                    read_alike(&format!("{}{byte}{}", &text[..cut], &text[cut..]));
                }
            }
        }
        // A raw control character, or a raw NUL, in a long string is refused as serde_json
        // refuses it; a key as long is read as a key.
        for text in [
            format!("[\"push\",\"{plain}\u{1}{plain}\"]"),
            format!("[\"push\",\"{plain}\u{0}\"]"),
            format!(r#"{{"{plain}" : "{plain}", "\u00001": 2}}"#),
            format!(r#"["{plain}", "\u00000"]"#),
            format!(r#"["{plain}", "\\u00000"]"#),
            format!(r#"["{plain}""#),
            format!(r#"["{plain}"] x"#),
            format!(r#"[{}"{plain}"]"#, r#""\n","#.repeat(ESCAPES_SEEN + 1)),
        ] {
            read_alike(&text);
        }
        // Values are lifted, keys and strings with an escape are not.
        let text = format!(r#"["{plain}",{{"{plain}":"{plain}x","e":"{plain}\n"}}]"#);
        let lifted = long_strings(text.as_bytes());
        assert_eq!(lifted.len(), 2);
        assert_eq!(&text[lifted[1].clone()], format!("{plain}x"));
        assert_eq!(
            parse(&format!(r#"["{plain}",{{"k":"{plain}x"}}]"#)).unwrap(),
            json!([plain.clone(), {"k": format!("{plain}x")}])
        );
    }
}
