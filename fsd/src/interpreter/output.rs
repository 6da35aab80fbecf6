//! An executor's stdout or stderr during one call: the text up to the call's sentinel, which
//! the executor writes before it says the call is done. Bytes that could start the sentinel,
//! or an unfinished UTF-8 character, are held back until the next chunk tells.

/// One stream of one call.
pub struct CallOutput {
    sentinel: Vec<u8>,
    held: Vec<u8>,
    ended: bool,
}

impl CallOutput {
    pub fn new(sentinel: &str) -> Self {
        Self {
            sentinel: sentinel.as_bytes().to_vec(),
            held: Vec::new(),
            ended: false,
        }
    }

    /// Whether the sentinel has been seen (the call's output is complete).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Takes in a chunk; answers the call's text it completes (possibly empty).
    pub fn push(&mut self, chunk: &[u8]) -> String {
        if self.ended {
            return String::new();
        }
        self.held.extend_from_slice(chunk);
        if let Some(at) = find(&self.held, &self.sentinel) {
            self.ended = true;
            let text = String::from_utf8_lossy(&self.held[..at]).into_owned();
            self.held.clear();
            return text;
        }
        let keep = self
            .sentinel_prefix_len()
            .max(incomplete_utf8_tail(&self.held));
        let ready = self.held.len() - keep;
        let text = String::from_utf8_lossy(&self.held[..ready]).into_owned();
        self.held.drain(..ready);
        text
    }

    /// What is held back, when the call ends without its sentinel (the executor died or
    /// its stream was taken over).
    pub fn flush(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.held).into_owned();
        self.held.clear();
        text
    }

    /// The longest end of `held` that begins the sentinel.
    fn sentinel_prefix_len(&self) -> usize {
        let most = self.held.len().min(self.sentinel.len().saturating_sub(1));
        (1..=most)
            .rev()
            .find(|&len| {
                self.sentinel
                    .starts_with(&self.held[self.held.len() - len..])
            })
            .unwrap_or(0)
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

    fn through(chunks: &[&[u8]]) -> (String, bool) {
        let mut output = CallOutput::new("\u{1}END-7\u{1}");
        let mut text = String::new();
        for chunk in chunks {
            text.push_str(&output.push(chunk));
        }
        (text, output.ended())
    }

    #[test]
    fn text_up_to_the_sentinel_in_any_split() {
        let whole = "héllo\nwörld\u{1}END-7\u{1}late".as_bytes();
        for cut in 0..whole.len() {
            for second in cut..whole.len() {
                let (text, ended) =
                    through(&[&whole[..cut], &whole[cut..second], &whole[second..]]);
                assert_eq!(text, "héllo\nwörld", "cuts {cut} {second}");
                assert!(ended);
            }
        }
    }

    #[test]
    fn a_lookalike_is_text_and_nothing_waits_needlessly() {
        let (text, ended) = through(&[b"a\x01EN", b"D-8\x01b"]);
        assert_eq!(text, "a\u{1}END-8\u{1}b");
        assert!(!ended);
        let mut output = CallOutput::new("\u{1}END\u{1}");
        assert_eq!(
            output.push(b"plain"),
            "plain",
            "nothing held without a prefix"
        );
        assert_eq!(output.push(b"x\x01E"), "x");
        assert_eq!(output.flush(), "\u{1}E");
    }
}
