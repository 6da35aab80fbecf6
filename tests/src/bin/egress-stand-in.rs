//! A stand-in for `cloudflare/proxy-everything`, the networking sidecar workerd starts beside
//! every container under `wrangler dev`, whose image cannot be pulled on the project's
//! machines. workerd reaches a container's ports only through the sidecar: it publishes the
//! ingress port (39001) and asks it, per connection, `CONNECT` with `X-Dst-Addr: IP:PORT`
//! (400 when nothing listens there); at start it `PUT`s `/egress` (the host port of its
//! egress listener) and reads `GET /ca` (a PEM certificate it writes into the container when
//! HTTPS is intercepted).
//!
//! What it does not do: intercept the container's outbound traffic (no TPROXY rules, no DNS
//! interception, no TLS interception). Outbound connections leave the container directly, so
//! `interceptOutboundHttp` does not reach the Worker under it; `/ca` answers a CA the image
//! already trusts (the first of Debian's bundle), not one of its own.
//!
//! Both sides of a tunnel are relayed with `TCP_NODELAY`: a relay without it holds the second
//! of two small writes (an HTTP head and body sent apart) until the first is acknowledged.
//!
//! `egress-stand-in --http-ingress-address 0.0.0.0:39001 [the real sidecar's other flags]`

use std::io;
use std::net::SocketAddr;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use fsd_tests::http_head::{HeadRead, read_body, read_request_head};

/// The longest request head read from workerd.
const MAX_HEAD: usize = 16 * 1024;
/// What `GET /ca` answers: the first certificate of this bundle.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

#[tokio::main(flavor = "current_thread")]
async fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ingress = args
        .iter()
        .position(|arg| arg == "--http-ingress-address")
        .and_then(|at| args.get(at + 1))
        .map_or("0.0.0.0:39001", String::as_str);
    let listener = TcpListener::bind(ingress).await?;
    println!("egress-stand-in: ingress on {}", listener.local_addr()?);
    loop {
        let (client, _) = listener.accept().await?;
        tokio::spawn(async move {
            if let Err(failed) = serve(client).await {
                eprintln!("egress-stand-in: {failed}");
            }
        });
    }
}

/// One connection from workerd: a tunnel, the egress update or the CA.
async fn serve(mut client: TcpStream) -> io::Result<()> {
    client.set_nodelay(true)?;
    let (request, head_len, mut buffer) = match read_request_head(&mut client, MAX_HEAD).await? {
        HeadRead::Complete { head, len, read } => (head, len, read),
        HeadRead::Closed => return Ok(()),
        HeadRead::Malformed => return reply(&mut client, "400 Bad Request", "", b"").await,
    };
    match (request.method.as_str(), request.path.as_str()) {
        ("CONNECT", target) => {
            let destination = request.header("x-dst-addr").unwrap_or(target).to_string();
            let leftover = buffer.split_off(head_len);
            tunnel(client, &destination, &leftover).await
        }
        ("PUT", "/egress") => {
            // The body (`{"port": …}`) only matters to outbound interception, which this
            // stand-in does not do; it is read so the answer does not race it.
            let length: usize = request
                .header("content-length")
                .and_then(|value| value.parse().ok())
                .unwrap_or(0);
            read_body(&mut client, buffer.split_off(head_len), length).await?;
            reply(&mut client, "204 No Content", "", b"").await
        }
        ("GET", "/ca") => match first_certificate() {
            Some(pem) => {
                reply(
                    &mut client,
                    "200 OK",
                    "application/x-pem-file",
                    pem.as_bytes(),
                )
                .await
            }
            None => reply(&mut client, "404 Not Found", "", b"").await,
        },
        _ => reply(&mut client, "404 Not Found", "", b"").await,
    }
}

/// A `CONNECT` to `destination` (`IP:PORT`, in the sandbox's network): 400 when nothing
/// listens there, as the real sidecar answers, else 200 and the bytes both ways.
async fn tunnel(mut client: TcpStream, destination: &str, leftover: &[u8]) -> io::Result<()> {
    let address: SocketAddr = match destination.parse() {
        Ok(address) => address,
        Err(_) => return reply(&mut client, "400 Bad Request", "", b"").await,
    };
    let mut upstream = match TcpStream::connect(address).await {
        Ok(upstream) => upstream,
        Err(_) => return reply(&mut client, "400 Bad Request", "", b"").await,
    };
    upstream.set_nodelay(true)?;
    client.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await?;
    if !leftover.is_empty() {
        upstream.write_all(leftover).await?;
    }
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

async fn reply(client: &mut TcpStream, status: &str, kind: &str, body: &[u8]) -> io::Result<()> {
    let kind = if kind.is_empty() {
        String::new()
    } else {
        format!("content-type: {kind}\r\n")
    };
    let head = format!(
        "HTTP/1.1 {status}\r\n{kind}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(&[head.as_bytes(), body].concat()).await?;
    client.shutdown().await
}

fn first_certificate() -> Option<String> {
    let bundle = std::fs::read_to_string(CA_BUNDLE).ok()?;
    let end = "-----END CERTIFICATE-----";
    let start = bundle.find("-----BEGIN CERTIFICATE-----")?;
    let stop = bundle[start..].find(end)? + start + end.len();
    Some(format!("{}\n", &bundle[start..stop]))
}
