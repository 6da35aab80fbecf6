//! A bare TCP relay for the gateway benchmark's anchor: `tcp-relay TARGET` listens on an
//! ephemeral loopback port (printing it), and moves each connection's bytes to and from
//! TARGET with `tokio::io::copy_bidirectional_with_sizes` (1 MiB buffers each way), reading
//! nothing of them. What it costs is what any proxy in its own process costs on the
//! machine, before any HTTP work.

use tokio::net::{TcpListener, TcpStream};

/// Each direction's buffer: as large as the gateway's reads get, so the anchor is not
/// slowed by small copies.
const BUF: usize = 1 << 20;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let target = std::env::args()
        .nth(1)
        .ok_or_else(|| std::io::Error::other("usage: tcp-relay HOST:PORT"))?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("tcp-relay listening on {}", listener.local_addr()?);
    loop {
        let (mut client, _) = listener.accept().await?;
        let target = target.clone();
        tokio::spawn(async move {
            let _ = client.set_nodelay(true);
            if let Ok(mut server) = TcpStream::connect(&target).await {
                let _ = server.set_nodelay(true);
                let _ =
                    tokio::io::copy_bidirectional_with_sizes(&mut client, &mut server, BUF, BUF)
                        .await;
            }
        });
    }
}
