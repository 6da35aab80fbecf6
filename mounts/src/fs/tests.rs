//! The bucket filesystem against the in-memory store: no FUSE, no root, no network. Each
//! test drives the operations fuser would call and checks the store and the answers.

use std::time::Duration;

use fsd_s3::MemoryStore;
use fsd_s3::memory::Operation;
use fuser::{Errno, FileType};

use super::files::Content;
use super::lock::lock;
use super::tree::ROOT;
use super::{BucketFs, FsOptions};

const HOUR: Duration = Duration::from_secs(3600);

struct Mounted {
    fs: BucketFs<MemoryStore>,
    _spill: tempfile::TempDir,
}

fn mount(store: &MemoryStore, ttl: Duration) -> Mounted {
    let spill = tempfile::tempdir().unwrap();
    let options = FsOptions {
        prefix: "p/".into(),
        read_only: false,
        cache_ttl: ttl,
        uid: 0,
        gid: 0,
        spill_dir: spill.path().to_path_buf(),
    };
    Mounted {
        fs: BucketFs::new(store.clone(), options, tokio::runtime::Handle::current()),
        _spill: spill,
    }
}

fn names(entries: &[super::bucket::DirEntry]) -> Vec<&str> {
    entries.iter().map(|entry| entry.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_and_listing_show_files_and_prefixes_as_directories() {
    let store = MemoryStore::new();
    store.insert("p/a.txt", "hello");
    store.insert("p/d/b.txt", "bee");
    store.insert("outside.txt", "not under the prefix");
    let m = mount(&store, HOUR);
    let inner = &m.fs.inner;
    let (_, attr) = inner.lookup(ROOT, "a.txt").await.unwrap();
    assert_eq!((attr.kind, attr.size), (FileType::RegularFile, 5));
    let (d, attr) = inner.lookup(ROOT, "d").await.unwrap();
    assert_eq!(attr.kind, FileType::Directory);
    assert_eq!(names(&inner.list_dir(ROOT).await.unwrap()), ["a.txt", "d"]);
    assert_eq!(names(&inner.list_dir(d).await.unwrap()), ["b.txt"]);
    assert_eq!(
        inner.lookup(ROOT, "outside.txt").await.unwrap_err(),
        Errno::ENOENT
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_name_is_cached_for_the_ttl_and_asked_again_after() {
    let store = MemoryStore::new();
    let m = mount(&store, HOUR);
    let inner = &m.fs.inner;
    assert_eq!(
        inner.lookup(ROOT, "late.txt").await.unwrap_err(),
        Errno::ENOENT
    );
    let heads = store.calls(Operation::Head);
    store.insert("p/late.txt", "here now");
    // Within the TTL the negative answer stands, without asking the store.
    assert_eq!(
        inner.lookup(ROOT, "late.txt").await.unwrap_err(),
        Errno::ENOENT
    );
    assert_eq!(store.calls(Operation::Head), heads);
    // With no TTL, the store is asked and the name is found.
    let fresh = mount(&store, Duration::ZERO);
    let (_, attr) = fresh.fs.inner.lookup(ROOT, "late.txt").await.unwrap();
    assert_eq!(attr.size, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_file_reaches_the_store_on_flush() {
    let store = MemoryStore::new();
    let m = mount(&store, HOUR);
    let inner = &m.fs.inner;
    let (ino, _, fh) = inner.create(ROOT, "new.txt").unwrap();
    assert_eq!(inner.write(fh, 0, b"hello ").unwrap(), 6);
    assert_eq!(inner.write(fh, 6, b"world").unwrap(), 5);
    assert_eq!(
        store.object("p/new.txt"),
        None,
        "nothing is sent before a flush"
    );
    assert_eq!(inner.getattr(ino).await.unwrap().size, 11);
    inner.flush(fh).await.unwrap();
    assert_eq!(store.object("p/new.txt").unwrap(), "hello world");
    inner.release(fh).await.unwrap();
    assert_eq!(store.keys(), ["p/new.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_upload_is_eio_and_the_next_flush_tries_again() {
    let store = MemoryStore::new();
    let m = mount(&store, HOUR);
    let inner = &m.fs.inner;
    let (_, _, fh) = inner.create(ROOT, "f.txt").unwrap();
    inner.write(fh, 0, b"kept").unwrap();
    store.fail_next(Operation::Put, 2);
    assert_eq!(inner.flush(fh).await.unwrap_err(), Errno::EIO);
    // Close fails too, and the data stays in the mount for the next try.
    assert_eq!(inner.release(fh).await.unwrap_err(), Errno::EIO);
    assert_eq!(store.object("p/f.txt"), None);
    let (ino, _) = inner.lookup(ROOT, "f.txt").await.unwrap();
    let (fh, _) = inner.open(ino, true, false).await.unwrap();
    inner.flush(fh).await.unwrap();
    assert_eq!(store.object("p/f.txt").unwrap(), "kept");
    inner.release(fh).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_moves_a_file_and_refuses_directories() {
    let store = MemoryStore::new();
    store.insert("p/a.txt", "moved");
    store.insert("p/d/x", "x");
    let m = mount(&store, HOUR);
    let inner = &m.fs.inner;
    inner
        .rename(ROOT, "a.txt", ROOT, "b.txt", false)
        .await
        .unwrap();
    assert_eq!(store.keys(), ["p/b.txt", "p/d/x"]);
    assert_eq!(store.object("p/b.txt").unwrap(), "moved");
    assert_eq!(
        inner.lookup(ROOT, "a.txt").await.unwrap_err(),
        Errno::ENOENT
    );
    assert_eq!(inner.lookup(ROOT, "b.txt").await.unwrap().1.size, 5);
    assert_eq!(
        inner.rename(ROOT, "d", ROOT, "e", false).await.unwrap_err(),
        Errno::EXDEV
    );
    store.insert("p/c.txt", "c");
    assert_eq!(
        inner
            .rename(ROOT, "b.txt", ROOT, "c.txt", true)
            .await
            .unwrap_err(),
        Errno::EEXIST
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmdir_removes_empty_directories_only() {
    let store = MemoryStore::new();
    store.insert("p/full/x", "x");
    let m = mount(&store, HOUR);
    let inner = &m.fs.inner;
    assert_eq!(
        inner.rmdir(ROOT, "full").await.unwrap_err(),
        Errno::ENOTEMPTY
    );
    inner.mkdir(ROOT, "empty").await.unwrap();
    assert_eq!(store.object("p/empty/").unwrap(), "");
    inner.rmdir(ROOT, "empty").await.unwrap();
    assert_eq!(store.keys(), ["p/full/x"]);
    assert_eq!(
        inner.lookup(ROOT, "empty").await.unwrap_err(),
        Errno::ENOENT
    );
}

/// Regression: an empty directory made here is answered from the tree, even where the
/// store drops empty markers (s3s-fs does); asking the store said ENOENT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_directory_made_here_survives_a_store_that_drops_markers() {
    let store = MemoryStore::new();
    let m = mount(&store, Duration::ZERO);
    let inner = &m.fs.inner;
    inner.mkdir(ROOT, "made").await.unwrap();
    store.remove("p/made/");
    let heads = store.calls(Operation::Head);
    assert_eq!(
        inner.lookup(ROOT, "made").await.unwrap().1.kind,
        FileType::Directory
    );
    inner.rmdir(ROOT, "made").await.unwrap();
    assert_eq!(store.calls(Operation::Head), heads, "the store was asked");
}

/// Regression (lookup_fresh): getattr of a stale node asks the store through the store half
/// of lookup instead of back-dating the node (which subtracted twice the TTL from
/// `Instant::now`); a stale node is re-read, and a century-long TTL works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getattr_rereads_stale_attributes_and_long_ttls_do_not_panic() {
    let store = MemoryStore::new();
    store.insert("p/a.txt", "short");
    let m = mount(&store, Duration::ZERO);
    let (ino, _) = m.fs.inner.lookup(ROOT, "a.txt").await.unwrap();
    store.insert("p/a.txt", "a longer content");
    assert_eq!(m.fs.inner.getattr(ino).await.unwrap().size, 16);
    let century = Duration::from_secs(100 * 365 * 24 * 3600);
    let long = mount(&store, century);
    let (ino, _) = long.fs.inner.lookup(ROOT, "a.txt").await.unwrap();
    assert_eq!(long.fs.inner.getattr(ino).await.unwrap().size, 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_uploads_the_shortened_object() {
    let store = MemoryStore::new();
    store.insert("p/t.txt", "0123456789");
    let m = mount(&store, HOUR);
    let inner = &m.fs.inner;
    let (ino, _) = inner.lookup(ROOT, "t.txt").await.unwrap();
    inner.truncate(ino, None, 4).await.unwrap();
    assert_eq!(store.object("p/t.txt").unwrap(), "0123");
    assert_eq!(inner.getattr(ino).await.unwrap().size, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_stream_through_the_window_at_any_offset() {
    let store = MemoryStore::new();
    let body: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    store.insert("p/big.bin", body.clone());
    let m = mount(&store, HOUR);
    let inner = &m.fs.inner;
    let (ino, _) = inner.lookup(ROOT, "big.bin").await.unwrap();
    let (fh, _) = inner.open(ino, false, false).await.unwrap();
    let Content::Remote(reader) = inner.content(fh).unwrap() else {
        panic!("an unwritten file is read from the store");
    };
    for (offset, len) in [
        (0u64, 4096u64),
        (4096, 65536),
        (2_500_000, 100_000),
        (1_000, 10),
    ] {
        let got = reader.read(offset, len).await.unwrap();
        assert_eq!(
            &got[..],
            &body[offset as usize..(offset + len) as usize],
            "at {offset}"
        );
    }
    // Past the end: what is there.
    let tail = reader.read(body.len() as u64 - 3, 100).await.unwrap();
    assert_eq!(&tail[..], &body[body.len() - 3..]);
    inner.release(fh).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_name_is_asked_of_the_store_again() {
    let store = MemoryStore::new();
    store.insert("p/a.txt", "a");
    let m = mount(&store, HOUR);
    let inner = &m.fs.inner;
    let (ino, _) = inner.lookup(ROOT, "a.txt").await.unwrap();
    lock(&inner.tree).note_lookup(ino);
    let heads = store.calls(Operation::Head);
    lock(&inner.tree).forget(ino, 1);
    inner.lookup(ROOT, "a.txt").await.unwrap();
    assert_eq!(store.calls(Operation::Head), heads + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_errors_become_errnos() {
    let store = MemoryStore::new();
    let m = mount(&store, Duration::ZERO);
    store.fail_next(Operation::Head, 1);
    store.fail_next(Operation::List, 1);
    assert_eq!(m.fs.inner.lookup(ROOT, "x").await.unwrap_err(), Errno::EIO);
}
