//! An executor's stdout or stderr during one call: the text up to the call's sentinel, which
//! the executor writes before it says the call is done, and the marks it writes to stdout
//! before each result, so a result takes its place after the output printed before it
//! (the frames come on another pipe, which can overtake the output). Bytes that could start
//! the sentinel or a mark, or an unfinished UTF-8 character, are held back until the next
//! chunk tells.
//!
//! The sentinel is `\x01fsd-<random>-<call>\x01`; result `k`'s mark is the sentinel with
//! `-r<k>` before its last byte.

/// What one chunk completes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    /// The mark written before the call's result `k` (counted from 1).
    Mark(u64),
}

/// One stream of one call.
pub struct CallOutput {
    /// The sentinel without its last byte: what the sentinel and every mark start with.
    stem: Vec<u8>,
    held: Vec<u8>,
    ended: bool,
}

/// What follows the stem at the start of some bytes.
enum After {
    /// The sentinel's last byte: the call's output is complete.
    End,
    /// A whole mark, and how long it is after the stem.
    Mark(u64, usize),
    /// Too few bytes to tell.
    Unknown,
    /// Nothing of ours: the stem is text.
    Text,
}

impl CallOutput {
    pub fn new(sentinel: &str) -> Self {
        let bytes = sentinel.as_bytes();
        Self {
            stem: bytes[..bytes.len().saturating_sub(1)].to_vec(),
            held: Vec::new(),
            ended: false,
        }
    }

    /// Whether the sentinel has been seen (the call's output is complete).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Takes in a chunk; answers the text and marks it completes, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Piece> {
        let mut pieces = Vec::new();
        if self.ended {
            return pieces;
        }
        self.held.extend_from_slice(chunk);
        let mut from = 0;
        let mut text_start = 0;
        while let Some(at) = find(&self.held[from..], &self.stem).map(|at| from + at) {
            let after = &self.held[at + self.stem.len()..];
            match read_after(after) {
                After::End => {
                    push_text(&mut pieces, &self.held[text_start..at]);
                    self.ended = true;
                    self.held.clear();
                    return pieces;
                }
                After::Mark(k, len) => {
                    push_text(&mut pieces, &self.held[text_start..at]);
                    pieces.push(Piece::Mark(k));
                    from = at + self.stem.len() + len;
                    text_start = from;
                }
                After::Unknown => {
                    // Held from the stem on until the next chunk says what it is.
                    push_text(&mut pieces, &self.held[text_start..at]);
                    self.held.drain(..at);
                    return pieces;
                }
                After::Text => from = at + 1,
            }
        }
        self.held.drain(..text_start);
        let keep = self.stem_prefix_len().max(incomplete_utf8_tail(&self.held));
        let ready = self.held.len() - keep;
        push_text(&mut pieces, &self.held[..ready]);
        self.held.drain(..ready);
        pieces
    }

    /// What is held back, when the call ends without its sentinel (the executor died or
    /// its stream was taken over).
    pub fn flush(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.held).into_owned();
        self.held.clear();
        text
    }

    /// The longest end of `held` that begins the stem.
    fn stem_prefix_len(&self) -> usize {
        let most = self.held.len().min(self.stem.len().saturating_sub(1));
        (1..=most)
            .rev()
            .find(|&len| self.stem.starts_with(&self.held[self.held.len() - len..]))
            .unwrap_or(0)
    }
}

/// Reads what follows a stem: `\x01` ends the call, `-r<digits>\x01` is a mark.
fn read_after(after: &[u8]) -> After {
    match after.first() {
        None => After::Unknown,
        Some(1) => After::End,
        Some(b'-') => {
            let Some(rest) = after.strip_prefix(b"-r") else {
                return if after.len() < 2 {
                    After::Unknown
                } else {
                    After::Text
                };
            };
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            match rest.get(digits) {
                None if digits < 20 => After::Unknown,
                Some(1) if digits > 0 => std::str::from_utf8(&rest[..digits])
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .map_or(After::Text, |k| After::Mark(k, 2 + digits + 1)),
                _ => After::Text,
            }
        }
        Some(_) => After::Text,
    }
}

fn push_text(pieces: &mut Vec<Piece>, bytes: &[u8]) {
    if !bytes.is_empty() {
        pieces.push(Piece::Text(String::from_utf8_lossy(bytes).into_owned()));
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// How many bytes at the end of `bytes` are the start of a UTF-8 character still to come.
fn incomplete_utf8_tail(bytes: &[u8]) -> usize {
    let start = bytes.len().saturating_sub(3);
    match std::str::from_utf8(&bytes[start..]) {
        Ok(_) => 0,
        Err(error) if error.error_len().is_none() => bytes.len() - start - error.valid_up_to(),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text and marks of `chunks`, text joined.
    fn through(chunks: &[&[u8]]) -> (Vec<Piece>, bool) {
        let mut output = CallOutput::new("\u{1}END-7\u{1}");
        let mut pieces: Vec<Piece> = Vec::new();
        for chunk in chunks {
            for piece in output.push(chunk) {
                match (pieces.last_mut(), piece) {
                    (Some(Piece::Text(text)), Piece::Text(more)) => text.push_str(&more),
                    (_, piece) => pieces.push(piece),
                }
            }
        }
        (pieces, output.ended())
    }

    fn text(value: &str) -> Piece {
        Piece::Text(value.to_string())
    }

    #[test]
    fn text_marks_and_the_end_in_any_split() {
        let whole =
            "héllo\n\u{1}END-7-r1\u{1}wörld\u{1}END-7-r12\u{1}\u{1}END-7\u{1}late".as_bytes();
        for cut in 0..whole.len() {
            for second in cut..whole.len() {
                let (pieces, ended) =
                    through(&[&whole[..cut], &whole[cut..second], &whole[second..]]);
                assert_eq!(
                    pieces,
                    [
                        text("héllo\n"),
                        Piece::Mark(1),
                        text("wörld"),
                        Piece::Mark(12)
                    ],
                    "cuts {cut} {second}"
                );
                assert!(ended);
            }
        }
    }

    #[test]
    fn a_lookalike_is_text_and_nothing_waits_needlessly() {
        let (pieces, ended) = through(&[b"a\x01EN", b"D-8\x01b"]);
        assert_eq!(pieces, [text("a\u{1}END-8\u{1}b")]);
        assert!(!ended);
        let (pieces, _) = through(&[b"x\x01END-7-rz\x01y\x01END-7-q"]);
        assert_eq!(pieces, [text("x\u{1}END-7-rz\u{1}y\u{1}END-7-q")]);
        let mut output = CallOutput::new("\u{1}END\u{1}");
        assert_eq!(output.push(b"plain"), [text("plain")]);
        assert_eq!(output.push(b"x\x01E"), [text("x")]);
        assert_eq!(output.flush(), "\u{1}E");
    }
}
