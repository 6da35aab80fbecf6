//! The typed client against the real daemon.

use bytes::Bytes;
use fsd_sdk::api::files::{FileStreamEvent, FileType};
use fsd_sdk::{ErrorCode, ListOptions, Sandbox, SdkError};
use fsd_tests::{Daemon, Options};
use futures_util::{StreamExt, TryStreamExt};

#[tokio::test]
async fn system_calls() {
    let daemon = Daemon::start();
    let sandbox = daemon.client().await;
    assert!(sandbox.ping().await.unwrap());
    assert!(!sandbox.version().await.unwrap().is_empty());
    let caps = sandbox.capabilities().await.unwrap();
    assert_eq!(caps.workspace, daemon.root().display().to_string());
}

#[tokio::test]
async fn file_round_trips() {
    let daemon = Daemon::start_with(Options {
        token: Some("tok".into()),
        ..Options::default()
    });
    let sandbox = daemon.client().await;
    let written = sandbox.write_file("dir/a.txt", "hello\n").await.unwrap();
    assert_eq!(written.bytes_written, 6);
    assert_eq!(
        sandbox.read_file("dir/a.txt").await.unwrap().content,
        "hello\n"
    );
    sandbox
        .write_file_bytes("bin", &[0, 159, 146, 150])
        .await
        .unwrap();
    assert_eq!(
        sandbox.read_file_bytes("bin").await.unwrap(),
        [0, 159, 146, 150]
    );
    assert!(sandbox.exists("dir/a.txt").await.unwrap());
    sandbox.mkdir("x/y", true).await.unwrap();
    sandbox.rename_file("dir/a.txt", "dir/b.txt").await.unwrap();
    sandbox.move_file("dir/b.txt", "x/y/c.txt").await.unwrap();
    let files = sandbox
        .list_files(
            ".",
            ListOptions {
                recursive: true,
                include_hidden: false,
            },
        )
        .await
        .unwrap();
    let paths: Vec<_> = files.iter().map(|f| f.relative_path.as_str()).collect();
    assert_eq!(paths, ["bin", "dir", "x", "x/y", "x/y/c.txt"]);
    let stat = sandbox.stat("x/y/c.txt", false).await.unwrap();
    assert_eq!(stat.file_type, FileType::File);
    assert_eq!(stat.size, 6);
    sandbox.delete_file("x/y/c.txt").await.unwrap();
    assert!(!sandbox.exists("x/y/c.txt").await.unwrap());
}

#[tokio::test]
async fn errors_carry_the_wire_code() {
    let daemon = Daemon::start();
    let sandbox = daemon.client().await;
    let err = sandbox.read_file("missing").await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::FileNotFound));
    assert_eq!(err.status(), Some(404));
    let err = sandbox.read_file("").await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::ValidationFailed));
    let err = sandbox.download("missing").await.err().unwrap();
    assert_eq!(err.code(), Some(&ErrorCode::FileNotFound));

    let wrong = Sandbox::connect(&daemon.url, Some("nope")).unwrap();
    // No token configured: any token is accepted.
    assert!(wrong.ping().await.unwrap());
    let locked = Daemon::start_with(Options {
        token: Some("right".into()),
        ..Options::default()
    });
    let err = Sandbox::connect(&locked.url, Some("wrong"))
        .unwrap()
        .version()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::Unauthorized));

    assert!(matches!(
        Sandbox::connect("ftp://x", None),
        Err(SdkError::InvalidUrl { .. })
    ));
    let refused = Sandbox::connect("http://127.0.0.1:1", None).unwrap();
    assert!(matches!(refused.ping().await, Err(SdkError::Transport(_))));
}

#[tokio::test]
async fn read_stream_events() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("s.txt"), "streamed").unwrap();
    let sandbox = daemon.client().await;
    let events: Vec<_> = sandbox
        .read_file_stream("s.txt")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(matches!(
        &events[0],
        FileStreamEvent::Metadata {
            size: 8,
            is_binary: false,
            ..
        }
    ));
    assert_eq!(
        events[1],
        FileStreamEvent::Chunk {
            data: "streamed".into()
        }
    );
    assert_eq!(events[2], FileStreamEvent::Complete { bytes_read: 8 });
}

#[tokio::test]
async fn raw_streams_and_ranges() {
    let daemon = Daemon::start();
    let sandbox = daemon.client().await;
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    let chunks: Vec<Result<Bytes, std::io::Error>> = data
        .chunks(100_000)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let reply = sandbox
        .upload("raw.bin", futures_util::stream::iter(chunks))
        .await
        .unwrap();
    assert_eq!(reply.bytes_written, data.len() as u64);
    let back: Vec<u8> = sandbox
        .download("raw.bin")
        .await
        .unwrap()
        .try_fold(Vec::new(), |mut acc, chunk| async move {
            acc.extend_from_slice(&chunk);
            Ok(acc)
        })
        .await
        .unwrap();
    assert_eq!(back, data);
    let slice: Vec<Bytes> = sandbox
        .download_range("raw.bin", Some((10, Some(5))))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(slice.concat(), &data[10..15]);

    let local_dir = tempfile::tempdir().unwrap();
    let local = local_dir.path().join("copy.bin");
    assert_eq!(
        sandbox.download_to("raw.bin", &local).await.unwrap(),
        data.len() as u64
    );
    assert_eq!(std::fs::read(&local).unwrap(), data);
    sandbox.upload_file("again.bin", &local).await.unwrap();
    assert_eq!(std::fs::read(daemon.path("again.bin")).unwrap(), data);
    let mut stream = sandbox.download("again.bin").await.unwrap();
    assert!(stream.next().await.is_some());
}

/// The client builds anywhere: nothing Linux-only, no store and no credential code is in
/// its dependency tree (those are `fsctl`'s and the daemon's).
#[test]
fn the_client_crate_depends_on_nothing_linux_only() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args([
            "tree",
            "-p",
            "fsd-sdk",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--locked",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
    let crates: std::collections::BTreeSet<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(
        crates.contains("fsd-sdk") && crates.contains("reqwest"),
        "{tree}"
    );
    for forbidden in [
        "fuser",
        "nix",
        "inotify",
        "s3s",
        "s3s-fs",
        "aws-sdk-s3",
        "fsd-mounts",
        "fsd-backup",
        "fsd-watch",
        "fsd-s3",
        "fsctl",
    ] {
        assert!(
            !crates.contains(forbidden),
            "fsd-sdk depends on {forbidden}:\n{tree}"
        );
    }
}

/// A caller that blocks its runtime past the daemon's idle limit (the daemon closes the
/// pooled connection meanwhile, and the client cannot see it) carries on: the SDK drops
/// pooled connections before the daemon's limit instead of sending on one being closed.
#[tokio::test]
async fn a_client_idle_past_the_daemons_idle_limit_carries_on() {
    let daemon = Daemon::start_with(Options {
        extra_args: vec!["--header-timeout-secs".into(), "6".into()],
        ..Options::default()
    });
    let sandbox = daemon.sandbox();
    sandbox.ping().await.unwrap();
    // Blocking on purpose: the connection's task cannot run and notice the daemon's close.
    std::thread::sleep(std::time::Duration::from_millis(6_500));
    sandbox
        .ping()
        .await
        .expect("a request after the daemon closed the idle connection");
}
