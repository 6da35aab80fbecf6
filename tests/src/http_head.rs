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
