//! Reads an SSE body back into events, as the reference's shared parser does: lines split on
//! `\n` (a trailing `\r` dropped), `event:` and `data:` fields with one optional space, a
//! blank line ending an event that has data, other lines ignored; chunks may split lines
//! and UTF-8 sequences anywhere.

/// One event: its `event:` name, if any, and its data lines joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// Parser state carried across chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of a line not ended yet.
    partial: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Feeds one chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut rest = chunk;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            self.partial.extend_from_slice(&rest[..end]);
            rest = &rest[end + 1..];
            let mut line = std::mem::take(&mut self.partial);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if let Some(event) = self.line(&String::from_utf8_lossy(&line)) {
                events.push(event);
            }
        }
        self.partial.extend_from_slice(rest);
        events
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = self.event.take();
            return self.data.take().map(|data| SseEvent { event, data });
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(data: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: data.into(),
        }
    }

    #[test]
    fn events_come_out_whole_however_the_chunks_split_them() {
        let body = "data: {\"a\":1}\n\ndata:{\"b\":\"é\"}\r\n\r\n: comment\nevent: named\ndata: x\ndata: y\n\n";
        let whole = SseParser::default().push(body.as_bytes());
        assert_eq!(
            whole,
            [
                event("{\"a\":1}"),
                event("{\"b\":\"é\"}"),
                SseEvent {
                    event: Some("named".into()),
                    data: "x\ny".into()
                }
            ]
        );
        for split in 0..body.len() {
            let mut parser = SseParser::default();
            let mut events = parser.push(&body.as_bytes()[..split]);
            events.extend(parser.push(&body.as_bytes()[split..]));
            assert_eq!(events, whole, "split at {split}");
        }
    }

    #[test]
    fn a_blank_line_without_data_is_no_event() {
        assert!(SseParser::default().push(b"\n\nevent: x\n\n").is_empty());
    }
}
