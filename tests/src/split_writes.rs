//! A client that sends a request's head and its body in two writes on a socket without
//! `TCP_NODELAY`, as some HTTP clients and relays do: with Nagle's algorithm on, the body
//! waits until the head is acknowledged, so a server that delays its ACK makes every such
//! request wait for it. Keeps one connection alive across requests, where delayed ACKs
//! apply. The test of that stall and the benchmark's row both use it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub struct SplitWrites {
    reader: BufReader<TcpStream>,
    host: String,
}

impl SplitWrites {
    /// Connects to `address` (`host:port`), leaving Nagle's algorithm on.
    pub fn connect(address: &str) -> std::io::Result<SplitWrites> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(false)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(SplitWrites {
            reader: BufReader::new(stream),
            host: address.to_string(),
        })
    }

    /// `POST path` with `body` (JSON), the head and body written apart when `split`, else in
    /// one write; returns the status, the body and how long the round trip took.
    pub fn post(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
        split: bool,
    ) -> std::io::Result<(u16, String, Duration)> {
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            self.host,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let started = Instant::now();
        let stream = self.reader.get_mut();
        if split {
            stream.write_all(head.as_bytes())?;
            stream.write_all(body.as_bytes())?;
        } else {
            stream.write_all(format!("{head}{body}").as_bytes())?;
        }
        let (status, answer) = self.read_response()?;
        Ok((status, answer, started.elapsed()))
    }

    /// One response with a `Content-Length`.
    fn read_response(&mut self) -> std::io::Result<(u16, String)> {
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("not a status line: {line:?}")))?;
        let mut length = 0usize;
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        self.reader.read_exact(&mut body)?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}
