//! An in-memory [`ObjectStore`]: a bucket in a map, with failures that tests can inject.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures_util::StreamExt;

use crate::store::{ByteStream, ObjectStore};
use crate::store::{ClientError, Listing, ObjectInfo};

/// An operation whose next calls can be made to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    List,
    Head,
    Get,
    Put,
    Delete,
    Multipart,
    Copy,
}

#[derive(Default)]
struct Bucket {
    objects: BTreeMap<String, Stored>,
    uploads: HashMap<String, Upload>,
    next_id: u64,
    failures: HashMap<Operation, u32>,
    calls: HashMap<Operation, u32>,
}

#[derive(Clone)]
struct Stored {
    body: Bytes,
    etag: String,
    last_modified: String,
}

struct Upload {
    key: String,
    parts: BTreeMap<u32, Bytes>,
}

/// A bucket held in memory. Clones share the bucket.
#[derive(Clone, Default)]
pub struct MemoryStore {
    bucket: Arc<Mutex<Bucket>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next `times` calls of `operation` fail with a 500 `InternalError`.
    pub fn fail_next(&self, operation: Operation, times: u32) {
        self.lock().failures.insert(operation, times);
    }

    /// How many calls of `operation` were made (failed ones included).
    pub fn calls(&self, operation: Operation) -> u32 {
        self.lock().calls.get(&operation).copied().unwrap_or(0)
    }

    /// The object at `key`, if any.
    pub fn object(&self, key: &str) -> Option<Bytes> {
        self.lock().objects.get(key).map(|o| o.body.clone())
    }

    /// Every key, in order.
    pub fn keys(&self) -> Vec<String> {
        self.lock().objects.keys().cloned().collect()
    }

    /// Puts an object directly (test setup; no failure injection, not counted).
    pub fn insert(&self, key: &str, body: impl Into<Bytes>) {
        let mut bucket = self.lock();
        let stored = stored(&mut bucket, body.into());
        bucket.objects.insert(key.to_string(), stored);
    }

    /// Removes an object directly (test setup: a store that dropped it, say an empty
    /// directory marker); not counted.
    pub fn remove(&self, key: &str) {
        self.lock().objects.remove(key);
    }

    fn lock(&self) -> MutexGuard<'_, Bucket> {
        self.bucket.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts the call and fails it if a failure is due.
    fn enter(
        &self,
        operation: Operation,
        what: &str,
    ) -> Result<MutexGuard<'_, Bucket>, ClientError> {
        let mut bucket = self.lock();
        *bucket.calls.entry(operation).or_default() += 1;
        if let Some(left) = bucket.failures.get_mut(&operation)
            && *left > 0
        {
            *left -= 1;
            return Err(ClientError::Status {
                what: what.to_string(),
                status: 500,
                code: "InternalError".into(),
                message: "injected failure".into(),
            });
        }
        Ok(bucket)
    }
}

fn stored(bucket: &mut Bucket, body: Bytes) -> Stored {
    bucket.next_id += 1;
    Stored {
        etag: format!("\"{:x}-{}\"", body.len(), bucket.next_id),
        body,
        last_modified: "2026-01-01T00:00:00.000Z".into(),
    }
}

fn info(key: &str, object: &Stored) -> ObjectInfo {
    ObjectInfo {
        key: key.to_string(),
        size: object.body.len() as u64,
        etag: object.etag.clone(),
        last_modified: object.last_modified.clone(),
    }
}

fn not_found(what: &str) -> ClientError {
    ClientError::Status {
        what: what.to_string(),
        status: 404,
        code: "NoSuchKey".into(),
        message: "The specified key does not exist.".into(),
    }
}

fn slice(body: &Bytes, start: u64, end: u64) -> Bytes {
    let len = body.len() as u64;
    let (start, end) = (start.min(len), end.min(len).max(start.min(len)));
    body.slice(start as usize..end as usize)
}

impl ObjectStore for MemoryStore {
    async fn list(&self, prefix: &str) -> Result<Listing, ClientError> {
        let bucket = self.enter(Operation::List, &format!("list {prefix:?}"))?;
        let mut listing = Listing::default();
        for (key, object) in bucket.objects.range(prefix.to_string()..) {
            let Some(rest) = key.strip_prefix(prefix) else {
                break;
            };
            match rest.find('/') {
                Some(slash) => {
                    let sub = format!("{prefix}{}", &rest[..=slash]);
                    if listing.prefixes.last() != Some(&sub) {
                        listing.prefixes.push(sub);
                    }
                }
                None => listing.objects.push(info(key, object)),
            }
        }
        Ok(listing)
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, ClientError> {
        let bucket = self.enter(Operation::Head, &format!("head {key:?}"))?;
        Ok(bucket.objects.get(key).map(|object| info(key, object)))
    }

    async fn has_keys_under(&self, prefix: &str) -> Result<bool, ClientError> {
        let bucket = self.enter(Operation::List, &format!("list {prefix:?}"))?;
        Ok(bucket
            .objects
            .range(prefix.to_string()..)
            .next()
            .is_some_and(|(key, _)| key.starts_with(prefix)))
    }

    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes, ClientError> {
        let what = format!("get {key:?} {start}..{end}");
        let bucket = self.enter(Operation::Get, &what)?;
        let object = bucket.objects.get(key).ok_or_else(|| not_found(&what))?;
        Ok(slice(&object.body, start, end))
    }

    async fn get_stream(&self, key: &str, start: u64, end: u64) -> Result<ByteStream, ClientError> {
        let bytes = self.get_range(key, start, end).await?;
        // In pieces, as a network would deliver them.
        let pieces: Vec<Result<Bytes, ClientError>> = (0..bytes.len())
            .step_by(64 * 1024)
            .map(|at| Ok(bytes.slice(at..(at + 64 * 1024).min(bytes.len()))))
            .collect();
        Ok(futures_util::stream::iter(pieces).boxed())
    }

    async fn put(&self, key: &str, body: Bytes) -> Result<String, ClientError> {
        let mut bucket = self.enter(Operation::Put, &format!("put {key:?}"))?;
        let object = stored(&mut bucket, body);
        let etag = object.etag.clone();
        bucket.objects.insert(key.to_string(), object);
        Ok(etag)
    }

    async fn delete(&self, key: &str) -> Result<(), ClientError> {
        let mut bucket = self.enter(Operation::Delete, &format!("delete {key:?}"))?;
        bucket.objects.remove(key);
        Ok(())
    }

    async fn create_multipart(&self, key: &str) -> Result<String, ClientError> {
        let mut bucket = self.enter(Operation::Multipart, &format!("create multipart {key:?}"))?;
        bucket.next_id += 1;
        let id = format!("upload-{}", bucket.next_id);
        bucket.uploads.insert(
            id.clone(),
            Upload {
                key: key.to_string(),
                parts: BTreeMap::new(),
            },
        );
        Ok(id)
    }

    async fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: u32,
        body: Bytes,
    ) -> Result<String, ClientError> {
        let what = format!("upload part {number} of {key:?}");
        let mut bucket = self.enter(Operation::Multipart, &what)?;
        let upload = bucket
            .uploads
            .get_mut(upload_id)
            .filter(|upload| upload.key == key)
            .ok_or_else(|| not_found(&what))?;
        upload.parts.insert(number, body);
        Ok(format!("\"part-{number}\""))
    }

    async fn complete_multipart(
        &self,
        key: &str,
        upload_id: &str,
        etags: &[String],
    ) -> Result<String, ClientError> {
        let what = format!("complete multipart {key:?}");
        let mut bucket = self.enter(Operation::Multipart, &what)?;
        let upload = bucket
            .uploads
            .remove(upload_id)
            .filter(|upload| upload.key == key)
            .ok_or_else(|| not_found(&what))?;
        if upload.parts.len() != etags.len() {
            return Err(ClientError::Status {
                what,
                status: 400,
                code: "InvalidPart".into(),
                message: format!(
                    "{} parts uploaded, {} listed",
                    upload.parts.len(),
                    etags.len()
                ),
            });
        }
        let mut body = Vec::new();
        for part in upload.parts.values() {
            body.extend_from_slice(part);
        }
        let object = stored(&mut bucket, Bytes::from(body));
        let etag = object.etag.clone();
        bucket.objects.insert(key.to_string(), object);
        Ok(etag)
    }

    async fn abort_multipart(&self, _key: &str, upload_id: &str) {
        if let Ok(mut bucket) = self.enter(Operation::Multipart, "abort multipart") {
            bucket.uploads.remove(upload_id);
        }
    }

    async fn copy(&self, from: &str, to: &str) -> Result<(), ClientError> {
        let what = format!("copy {from:?} to {to:?}");
        let mut bucket = self.enter(Operation::Copy, &what)?;
        let object = bucket
            .objects
            .get(from)
            .cloned()
            .ok_or_else(|| not_found(&what))?;
        let copy = stored(&mut bucket, object.body);
        bucket.objects.insert(to.to_string(), copy);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lists_one_level_with_prefixes() {
        let store = MemoryStore::new();
        for key in ["a/x.txt", "a/sub/y.txt", "a/sub/z.txt", "a/sub2/w", "b.txt"] {
            store.insert(key, "data");
        }
        let listing = store.list("a/").await.unwrap();
        let keys: Vec<_> = listing.objects.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["a/x.txt"]);
        assert_eq!(listing.prefixes, ["a/sub/", "a/sub2/"]);
        assert!(store.has_keys_under("a/sub/").await.unwrap());
        assert!(!store.has_keys_under("c/").await.unwrap());
    }

    #[tokio::test]
    async fn multipart_uploads_assemble_in_part_order() {
        let store = MemoryStore::new();
        let id = store.create_multipart("k").await.unwrap();
        let second = store
            .upload_part("k", &id, 2, Bytes::from("world"))
            .await
            .unwrap();
        let first = store
            .upload_part("k", &id, 1, Bytes::from("hello "))
            .await
            .unwrap();
        store
            .complete_multipart("k", &id, &[first, second])
            .await
            .unwrap();
        assert_eq!(store.object("k").unwrap(), "hello world");
        assert_eq!(store.get_range("k", 6, 11).await.unwrap(), "world");
    }

    #[tokio::test]
    async fn injected_failures_fail_then_clear() {
        let store = MemoryStore::new();
        store.fail_next(Operation::Put, 1);
        let error = store.put("k", Bytes::from("x")).await.unwrap_err();
        assert_eq!(error.status(), Some(500));
        store.put("k", Bytes::from("x")).await.unwrap();
        assert_eq!(store.calls(Operation::Put), 2);
    }
}
