//! One readiness check of a local port.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one probe may take, as in the reference.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether something accepts TCP connections on localhost:`port`.
pub async fn tcp(port: u16) -> bool {
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(("127.0.0.1", port))).await,
        Ok(Ok(_))
    )
}

/// The status code of `GET http://localhost:<port><path>`, if the server answered.
pub async fn http_status(port: u16, path: &str) -> Option<u16> {
    let request = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nUser-Agent: fsd-port-watch\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.ok()?;
        let mut buffer = Vec::with_capacity(256);
        let mut chunk = [0u8; 256];
        while !buffer.contains(&b'\n') && buffer.len() < 4096 {
            let read = stream.read(&mut chunk).await.ok()?;
            if read == 0 {
                break;
            }
            buffer.extend_from_slice(&chunk[..read]);
        }
        parse_status_line(&buffer)
    };
    tokio::time::timeout(PROBE_TIMEOUT, request)
        .await
        .ok()
        .flatten()
}

/// `HTTP/1.1 204 No Content` → 204.
fn parse_status_line(bytes: &[u8]) -> Option<u16> {
    let line = std::str::from_utf8(bytes.split(|&b| b == b'\n').next()?).ok()?;
    let mut parts = line.split_whitespace();
    parts
        .next()
        .filter(|version| version.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_lines() {
        assert_eq!(parse_status_line(b"HTTP/1.1 204 No Content\r\n"), Some(204));
        assert_eq!(parse_status_line(b"HTTP/1.0 500\r\nx"), Some(500));
        assert_eq!(parse_status_line(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(parse_status_line(b""), None);
    }
}
