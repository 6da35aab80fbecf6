//! The parts of an HTTP request head the stand-ins and proxies here read (httparse's, owned),
//! and reading a head and its body from a connection.

use tokio::io::{AsyncRead, AsyncReadExt};

/// A request's method, path and headers (names lowercased).
pub struct RequestHead {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    pub fn of(parsed: &httparse::Request<'_, '_>) -> RequestHead {
        RequestHead {
            method: parsed.method.unwrap_or_default().to_string(),
            path: parsed.path.unwrap_or_default().to_string(),
            headers: lowercase_headers(parsed.headers),
        }
    }

    /// The first value of the header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Headers as owned pairs, names lowercased.
pub fn lowercase_headers(headers: &[httparse::Header<'_>]) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|h| {
            let value = String::from_utf8_lossy(h.value).into_owned();
            (h.name.to_ascii_lowercase(), value)
        })
        .collect()
}

/// What reading a request head from a connection came to.
pub enum HeadRead {
    /// The peer ended before a whole head.
    Closed,
    /// Not a request head, or longer than allowed.
    Malformed,
    /// The head, its length, and every byte read (the head and what followed it).
    Complete {
        head: RequestHead,
        len: usize,
        read: Vec<u8>,
    },
}

/// Reads from `stream` until a whole request head (at most `max` bytes) is held.
pub async fn read_request_head(
    stream: &mut (impl AsyncRead + Unpin),
    max: usize,
) -> std::io::Result<HeadRead> {
    let mut read = Vec::with_capacity(4096);
    loop {
        if read_some(stream, &mut read).await? == 0 {
            return Ok(HeadRead::Closed);
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(&read) {
            Ok(httparse::Status::Complete(len)) => {
                let head = RequestHead::of(&parsed);
                return Ok(HeadRead::Complete { head, len, read });
            }
            Ok(httparse::Status::Partial) if read.len() < max => continue,
            _ => return Ok(HeadRead::Malformed),
        }
    }
}

/// Reads from `stream` onto `body` (what came after the head) until it holds `length`
/// bytes or the peer ends; what is past `length` is not kept.
pub async fn read_body(
    stream: &mut (impl AsyncRead + Unpin),
    mut body: Vec<u8>,
    length: usize,
) -> std::io::Result<Vec<u8>> {
    while body.len() < length {
        if read_some(stream, &mut body).await? == 0 {
            break;
        }
    }
    body.truncate(length);
    Ok(body)
}

/// Reads a chunked body from `stream` (`raw`: what came after the head) and answers it
/// decoded; `None` when the peer ended before the last chunk, the encoding is broken, or the
/// body is longer than `max`.
pub async fn read_chunked_body(
    stream: &mut (impl AsyncRead + Unpin),
    mut raw: Vec<u8>,
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let (start, size) = match httparse::parse_chunk_size(&raw[at..]) {
            Ok(httparse::Status::Complete((used, size))) => (at + used, size),
            Ok(httparse::Status::Partial) if raw.len() - at < 1024 => {
                if read_some(stream, &mut raw).await? == 0 {
                    return Ok(None);
                }
                continue;
            }
            _ => return Ok(None),
        };
        let Some(size) = usize::try_from(size)
            .ok()
            .filter(|size| body.len() + size <= max)
        else {
            return Ok(None);
        };
        if size == 0 {
            // The last chunk: then trailers, if any, and an empty line.
            loop {
                let rest = &raw[start..];
                if rest.starts_with(b"\r\n") || rest.windows(4).any(|w| w == b"\r\n\r\n") {
                    return Ok(Some(body));
                }
                if rest.len() > 64 * 1024 || read_some(stream, &mut raw).await? == 0 {
                    return Ok(None);
                }
            }
        }
        // The chunk and the line end after it.
        while raw.len() < start + size + 2 {
            if read_some(stream, &mut raw).await? == 0 {
                return Ok(None);
            }
        }
        body.extend_from_slice(&raw[start..start + size]);
        at = start + size + 2;
    }
}

/// One read from `stream`, appended to `into`; how many bytes came (0: the peer ended).
async fn read_some(
    stream: &mut (impl AsyncRead + Unpin),
    into: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut chunk = [0u8; 8192];
    let read = stream.read(&mut chunk).await?;
    into.extend_from_slice(&chunk[..read]);
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `sent`, of which `first` bytes came with the head and the rest later.
    async fn chunked(sent: &[u8], first: usize, max: usize) -> Option<Vec<u8>> {
        let mut later = &sent[first..];
        read_chunked_body(&mut later, sent[..first].to_vec(), max)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_chunked_body_is_decoded_however_it_arrives() {
        let sent = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
        for first in 0..sent.len() {
            assert_eq!(
                chunked(sent, first, 64).await.as_deref(),
                Some(&b"hello, world"[..]),
                "{first} bytes with the head"
            );
        }
        // An empty body (workerd's removals), and one with a trailer.
        assert_eq!(chunked(b"0\r\n\r\n", 0, 64).await, Some(Vec::new()));
        assert_eq!(
            chunked(b"2\r\nab\r\n0\r\nx-t: 1\r\n\r\n", 3, 64).await,
            Some(b"ab".to_vec())
        );
    }

    #[tokio::test]
    async fn a_chunked_body_cut_short_broken_or_too_long_is_none() {
        assert_eq!(chunked(b"5\r\nhel", 0, 64).await, None);
        assert_eq!(chunked(b"5\r\nhello\r\n", 0, 64).await, None);
        assert_eq!(chunked(b"zz\r\nhello\r\n0\r\n\r\n", 0, 64).await, None);
        assert_eq!(chunked(b"5\r\nhello\r\n0\r\n\r\n", 0, 4).await, None);
    }
}
