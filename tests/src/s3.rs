//! Object stores for the backup tests: the embedded S3-compatible store (`fsctl store`,
//! s3s-fs, which checks SigV4 signatures and presign expiry) and a fault proxy in front of
//! it that fails, drops or stalls multipart part uploads on request.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsctl::trusted::BucketAccess;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::binary;

pub const ACCESS_KEY: &str = "fsd-test-access";
pub const SECRET_KEY: &str = "fsd-test-secret-key";
pub const BUCKET: &str = "fsd";

/// `fsctl store` on an ephemeral port over a temp directory; killed when dropped.
pub struct Store {
    child: Child,
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl Store {
    pub fn start() -> Store {
        Store::start_on("127.0.0.1:0")
    }

    /// The store on `listen` (an address other processes than this one's must reach).
    pub fn start_on(listen: &str) -> Store {
        let dir = tempfile::tempdir().expect("store dir");
        let mut child = Command::new(binary("fsctl"))
            .args(["store", "--listen", listen, "--bucket", BUCKET, "--dir"])
            .arg(dir.path())
            .env("FSD_S3_ACCESS_KEY", ACCESS_KEY)
            .env("FSD_S3_SECRET_KEY", SECRET_KEY)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn fsctl store");
        let line = crate::first_line(&mut child, "fsctl store");
        let url = line
            .strip_prefix("fsd store listening on ")
            .expect("listen line")
            .to_string();
        Store { child, url, dir }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Client settings for this store (or for a proxy in front of it at `endpoint`).
    pub fn object_store(&self, endpoint: Option<&str>) -> BucketAccess {
        BucketAccess::new(
            endpoint.unwrap_or(&self.url),
            BUCKET,
            ACCESS_KEY,
            SECRET_KEY,
        )
    }

    /// Object keys under `prefix`, from the store's directory.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let root = self.dir.path().join(BUCKET);
        let mut keys: Vec<String> = walk(&root)
            .into_iter()
            .filter_map(|p| {
                p.strip_prefix(&root)
                    .ok()
                    .map(|r| r.to_string_lossy().into_owned())
            })
            .filter(|k| k.starts_with(prefix) && !k.contains(".s3s") && !k.starts_with('.'))
            .collect();
        keys.sort();
        keys
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the proxy does to the next part uploads (`PUT ...?partNumber=...`), and which
/// requests it holds until told to let them through.
#[derive(Debug, Default, Clone)]
pub struct Faults {
    /// The next N part PUTs get a 500.
    pub fail: u32,
    /// Every part PUT gets a 500.
    pub fail_always: bool,
    /// The next N part PUTs have their connection cut halfway through the body.
    pub drop: u32,
    /// The next N part PUTs are read and never answered.
    pub stall: u32,
    /// Every PUT, whole object or part, gets a 500.
    pub fail_all_puts: bool,
    /// Object GETs (not listings) wait unanswered while this is set, then pass.
    pub hold_gets: bool,
    /// PUTs, whole object or part, wait unanswered while this is set, then pass.
    pub hold_puts: bool,
}

/// An HTTP/1.1 proxy on loopback that forwards requests byte for byte (so presigned
/// signatures, which cover the proxy's host, stay valid) and injects [`Faults`].
pub struct FaultProxy {
    pub url: String,
    pub faults: Arc<Mutex<Faults>>,
    /// Part PUTs seen, faulted or not.
    pub part_puts: Arc<AtomicU32>,
    /// Requests being held now (see [`Faults::hold_gets`]).
    pub held: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    pub async fn start(upstream: &str) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let upstream = upstream.trim_start_matches("http://").to_string();
        let faults = Arc::new(Mutex::new(Faults::default()));
        let part_puts = Arc::new(AtomicU32::new(0));
        let held = Arc::new(AtomicU32::new(0));
        let (f, p, h) = (faults.clone(), part_puts.clone(), held.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let (upstream, faults, part_puts, held) =
                    (upstream.clone(), f.clone(), p.clone(), h.clone());
                tokio::spawn(async move {
                    let _ = serve(client, &upstream, &faults, &part_puts, &held).await;
                });
            }
        });
        FaultProxy {
            url,
            faults,
            part_puts,
            held,
            task,
        }
    }

    pub fn set(&self, faults: Faults) {
        *self.faults.lock().expect("faults") = faults;
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

enum Action {
    Pass,
    Fail,
    Drop,
    Stall,
}

async fn serve(
    mut client: TcpStream,
    upstream: &str,
    faults: &Mutex<Faults>,
    part_puts: &AtomicU32,
    held: &AtomicU32,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).await? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let request_line = text.lines().next().unwrap_or_default().to_string();
    let length: usize = text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_string())
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let is_part = request_line.starts_with("PUT ") && request_line.contains("partNumber=");
    let is_put = request_line.starts_with("PUT ");
    let is_object_get = request_line.starts_with("GET ") && !request_line.contains("list-type=");
    let fail_all_puts = is_put && faults.lock().expect("faults").fail_all_puts;
    let holding =
        |faults: &Faults| (is_object_get && faults.hold_gets) || (is_put && faults.hold_puts);
    if holding(&faults.lock().expect("faults")) {
        held.fetch_add(1, Ordering::SeqCst);
        while holding(&faults.lock().expect("faults")) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        held.fetch_sub(1, Ordering::SeqCst);
    }
    let action = if fail_all_puts {
        Action::Fail
    } else if is_part {
        part_puts.fetch_add(1, Ordering::SeqCst);
        let mut f = faults.lock().expect("faults");
        if f.fail_always {
            Action::Fail
        } else if f.fail > 0 {
            f.fail -= 1;
            Action::Fail
        } else if f.drop > 0 {
            f.drop -= 1;
            Action::Drop
        } else if f.stall > 0 {
            f.stall -= 1;
            Action::Stall
        } else {
            Action::Pass
        }
    } else {
        Action::Pass
    };
    match action {
        Action::Fail => {
            discard(&mut client, length).await?;
            client
                .write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await?;
            client.shutdown().await
        }
        Action::Drop => {
            discard(&mut client, length / 2).await?;
            Ok(()) // dropping `client` cuts the connection mid-body
        }
        Action::Stall => {
            discard(&mut client, length).await?;
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(())
        }
        Action::Pass => {
            let mut server = TcpStream::connect(upstream).await?;
            let head = text.trim_end_matches("\r\n").to_string() + "\r\nConnection: close\r\n\r\n";
            let head = head
                .replace("\r\nconnection: keep-alive", "")
                .replace("\r\nConnection: keep-alive", "");
            server.write_all(head.as_bytes()).await?;
            let mut body = vec![0u8; length];
            client.read_exact(&mut body).await?;
            server.write_all(&body).await?;
            let mut response = Vec::new();
            server.read_to_end(&mut response).await?;
            client.write_all(&response).await?;
            client.shutdown().await
        }
    }
}

async fn discard(client: &mut TcpStream, mut length: usize) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    while length > 0 {
        let n = client.read(&mut buf[..length.min(64 * 1024)]).await?;
        if n == 0 {
            break;
        }
        length -= n;
    }
    Ok(())
}
