//! Bucket mount benchmark: fsd's FUSE mount and s3fs (the Debian package) side by side
//! against one loopback moto server in the same run. Figures: sequential write and read
//! MB/s of a 1 GiB file, creates/s of 1,000 small files (create, write 1 KiB, close), and
//! the wall time of a cold `ls -lR` over 10,000 objects (100 directories of 100). The
//! server's own ceiling is measured beside them: boto3 (from the moto venv) uploading the
//! same size as 16 MiB parts, 8 in flight, then completing, and reading it in one GET.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench mounts`, as
//! root, with s3fs installed and moto in a venv (`python3 -m venv /opt/moto &&
//! /opt/moto/bin/pip install 'moto[server]'`; `FSD_MOTO` names another moto_server).
//! `FSD_BENCH_QUICK=1`: a tenth of the sizes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fsd_s3::{ObjectClient, ObjectStore};
use fsd_tests::{Daemon, noise, peak_rss_kib};
use futures_util::StreamExt;
use serde_json::json;

const MB: f64 = 1_000_000.0;
const BUCKET: &str = "bench";

struct Sizes {
    big: usize,
    small_files: usize,
    tree_dirs: usize,
    tree_files: usize,
}

fn main() {
    let divisor = if std::env::var_os("FSD_BENCH_QUICK").is_some() {
        10
    } else {
        1
    };
    let sizes = Sizes {
        big: (1 << 30) / divisor,
        small_files: 1_000 / divisor,
        tree_dirs: 100 / divisor,
        tree_files: 100,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(sizes));
}

/// moto_server on an ephemeral port; killed when dropped.
struct Moto {
    child: Child,
    url: String,
}

impl Moto {
    fn start() -> Option<Moto> {
        let program = std::env::var("FSD_MOTO").unwrap_or("/opt/moto/bin/moto_server".into());
        if !Path::new(&program).exists() {
            eprintln!("moto_server not found at {program}: set FSD_MOTO");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .ok()?;
        let child = Command::new(program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let url = format!("http://127.0.0.1:{port}");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(Moto { child, url });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// s3fs mounted at a directory; unmounted when dropped.
struct S3fs {
    dir: PathBuf,
}

impl S3fs {
    fn mount(url: &str, dir: &Path, passwd: &Path) -> S3fs {
        std::fs::create_dir_all(dir).expect("s3fs dir");
        let status = Command::new("s3fs")
            .arg(BUCKET)
            .arg(dir)
            .args(["-o", &format!("url={url}"), "-o", "use_path_request_style"])
            .args(["-o", &format!("passwd_file={}", passwd.display())])
            .args(["-o", "retries=1", "-o", "connect_timeout=5"])
            .args(["-o", "readwrite_timeout=120"])
            .status()
            .expect("run s3fs");
        assert!(status.success(), "s3fs mount failed");
        for _ in 0..100 {
            if is_mount_point(dir) {
                return S3fs {
                    dir: dir.to_path_buf(),
                };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("s3fs never appeared at {}", dir.display());
    }
}

impl Drop for S3fs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn is_mount_point(path: &Path) -> bool {
    let table = fsd_tests::mount_table();
    table
        .lines()
        .any(|line| line.split(' ').nth(4) == path.to_str())
}

/// Fills the bucket: one big object to read, and the tree to list.
async fn seed(client: &ObjectClient, sizes: &Sizes) {
    let data = Bytes::from(noise(sizes.big, 3));
    let upload = client
        .create_multipart("seed/big.bin")
        .await
        .expect("create");
    let part = 64 << 20;
    let mut etags = Vec::new();
    for (index, chunk) in data.chunks(part).enumerate() {
        let body = data.slice_ref(chunk);
        etags.push(
            client
                .upload_part("seed/big.bin", &upload, index as u32 + 1, body)
                .await
                .expect("part"),
        );
    }
    client
        .complete_multipart("seed/big.bin", &upload, &etags)
        .await
        .expect("complete");
    let keys: Vec<String> = (0..sizes.tree_dirs)
        .flat_map(|d| (0..sizes.tree_files).map(move |f| format!("tree/d{d:03}/f{f:03}.txt")))
        .collect();
    futures_util::stream::iter(keys)
        .map(|key| async move {
            client
                .put(&key, Bytes::from_static(b"0123456789\n"))
                .await
                .expect("seed put");
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// boto3 straight to moto: what the server itself can take and give.
const ANCHOR: &str = r#"
import boto3, os, sys, time, concurrent.futures as cf
url, size = sys.argv[1], int(sys.argv[2])
s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id="bench",
                  aws_secret_access_key="bench-secret", region_name="us-east-1")
part = 16 << 20
data = os.urandom(part)
started = time.time()
upload = s3.create_multipart_upload(Bucket="bench", Key="anchor.bin")["UploadId"]
def put(i):
    body = data[: min(part, size - i * part)]
    return s3.upload_part(Bucket="bench", Key="anchor.bin", UploadId=upload,
                          PartNumber=i + 1, Body=body)["ETag"]
with cf.ThreadPoolExecutor(8) as pool:
    etags = list(pool.map(put, range((size + part - 1) // part)))
s3.complete_multipart_upload(Bucket="bench", Key="anchor.bin", UploadId=upload,
    MultipartUpload={"Parts": [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]})
write = size / 1e6 / (time.time() - started)
started = time.time()
body = s3.get_object(Bucket="bench", Key="seed/big.bin")["Body"]
total = 0
while True:
    chunk = body.read(1 << 20)
    if not chunk:
        break
    total += len(chunk)
read = total / 1e6 / (time.time() - started)
print(f"{write} {read}")
"#;

/// (write MB/s, read MB/s) of the anchor, if the venv's python can run it.
fn anchor(url: &str, size: usize) -> Option<(f64, f64)> {
    let moto = std::env::var("FSD_MOTO").unwrap_or("/opt/moto/bin/moto_server".into());
    let python = Path::new(&moto).with_file_name("python3");
    let output = Command::new(python)
        .args(["-c", ANCHOR, url, &size.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut figures = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some((figures.next()??, figures.next()??))
}

struct Figures {
    write_mbs: f64,
    read_mbs: f64,
    creates_per_s: f64,
    ls_lr_s: f64,
}

fn measure(root: &Path, name: &str, sizes: &Sizes) -> Figures {
    // Sequential write: 1 MiB writes, then close (the upload is part of the figure).
    let data = noise(sizes.big, 11);
    let started = Instant::now();
    let mut file = std::fs::File::create(root.join(format!("{name}-big.bin"))).expect("create");
    for chunk in data.chunks(1 << 20) {
        file.write_all(chunk).expect("write");
    }
    file.sync_all().expect("fsync");
    drop(file);
    let write_mbs = sizes.big as f64 / MB / started.elapsed().as_secs_f64();
    drop(data);

    // Sequential read of an object neither mount has seen.
    let started = Instant::now();
    let mut file = std::fs::File::open(root.join("seed/big.bin")).expect("open");
    let mut buffer = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        let n = std::io::Read::read(&mut file, &mut buffer).expect("read");
        if n == 0 {
            break;
        }
        total += n;
    }
    assert_eq!(total, sizes.big, "{name}: short read");
    let read_mbs = total as f64 / MB / started.elapsed().as_secs_f64();

    // Small files, one after another, as a build or an agent writes them.
    let dir = root.join(format!("{name}-small"));
    std::fs::create_dir(&dir).expect("mkdir");
    let payload = noise(1024, 5);
    let started = Instant::now();
    for i in 0..sizes.small_files {
        std::fs::write(dir.join(format!("f{i:05}.txt")), &payload).expect("small write");
    }
    let creates_per_s = sizes.small_files as f64 / started.elapsed().as_secs_f64();

    // A cold recursive long listing.
    let started = Instant::now();
    let status = Command::new("ls")
        .arg("-lR")
        .arg(root.join("tree"))
        .stdout(Stdio::null())
        .status()
        .expect("ls");
    assert!(status.success(), "{name}: ls -lR failed");
    let ls_lr_s = started.elapsed().as_secs_f64();
    Figures {
        write_mbs,
        read_mbs,
        creates_per_s,
        ls_lr_s,
    }
}

async fn run(sizes: Sizes) {
    let Some(moto) = Moto::start() else {
        eprintln!("skipping: moto is needed");
        return;
    };
    let http = reqwest::Client::new();
    http.put(format!("{}/{BUCKET}", moto.url))
        .send()
        .await
        .expect("create bucket");
    let upstream = fsd_s3::Upstream {
        endpoint: moto.url.clone(),
        region: "us-east-1".into(),
        access_key: "bench".into(),
        secret_key: "bench-secret".into(),
    };
    let client = ObjectClient::new(&moto.url, BUCKET, Some(upstream)).expect("client");
    let started = Instant::now();
    seed(&client, &sizes).await;
    eprintln!("seeded in {:.1} s", started.elapsed().as_secs_f64());

    let dirs = tempfile::tempdir().expect("dirs");
    let daemon = Daemon::start();
    let fsd_root = dirs.path().join("fsd");
    let (status, body) = daemon
        .post(
            "/api/mounts",
            json!({ "bucket": BUCKET, "mountPath": fsd_root, "endpoint": moto.url,
                    "credentials": { "accessKeyId": "bench", "secretAccessKey": "bench-secret" } }),
        )
        .await;
    assert_eq!(status, 200, "fsd mount: {body}");
    let passwd = dirs.path().join("passwd");
    std::fs::write(&passwd, "bench:bench-secret\n").expect("passwd");
    std::fs::set_permissions(&passwd, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let s3fs_root = dirs.path().join("s3fs");
    let s3fs = S3fs::mount(&moto.url, &s3fs_root, &passwd);

    let fsd_root_owned = fsd_root.clone();
    let fsd = tokio::task::block_in_place(|| measure(&fsd_root_owned, "fsd", &sizes));
    let s3fs_figures = tokio::task::block_in_place(|| measure(&s3fs_root, "s3fs", &sizes));
    drop(s3fs);
    let ceiling = anchor(&moto.url, sizes.big);
    let rss_mib = peak_rss_kib(daemon.pid()) as f64 / 1024.0;

    let row = |figure: &str, ours: f64, theirs: f64, higher_better: bool| {
        let ratio = if higher_better {
            ours / theirs
        } else {
            theirs / ours
        };
        println!("| {figure} | {ours:.1} | {theirs:.1} | {ratio:.2}x |");
    };
    println!(
        "\nbucket mounts against moto ({} MiB file, {} small files, {} objects listed)\n",
        sizes.big >> 20,
        sizes.small_files,
        sizes.tree_dirs * sizes.tree_files
    );
    println!("| figure | fsd | s3fs | fsd vs s3fs |");
    println!("|---|---|---|---|");
    row(
        "sequential write MB/s",
        fsd.write_mbs,
        s3fs_figures.write_mbs,
        true,
    );
    row(
        "sequential read MB/s",
        fsd.read_mbs,
        s3fs_figures.read_mbs,
        true,
    );
    row(
        "creates/s (1 KiB files)",
        fsd.creates_per_s,
        s3fs_figures.creates_per_s,
        true,
    );
    row("ls -lR seconds", fsd.ls_lr_s, s3fs_figures.ls_lr_s, false);
    match ceiling {
        Some((write, read)) => println!(
            "\nserver ceiling (boto3 to moto): multipart write {write:.1} MB/s, one-GET read {read:.1} MB/s"
        ),
        None => println!("\nserver ceiling: boto3 anchor did not run"),
    }
    println!("fsd peak RSS: {rss_mib:.0} MiB");
}
