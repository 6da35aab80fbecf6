//! What a bucket filesystem needs from a bucket, as a trait: the HTTP client implements it
//! for real stores, [`crate::MemoryStore`] for tests that run without a network or root.

use std::future::Future;

use bytes::Bytes;
use futures_util::stream::BoxStream;

use crate::client::{ClientError, Listing, ObjectInfo};

/// An object's bytes as they arrive.
pub type ByteStream = BoxStream<'static, Result<Bytes, ClientError>>;

/// The object calls of S3 that bucket mounts use. Keys are full keys (prefix included);
/// listings use `/` as the delimiter.
pub trait ObjectStore: Clone + Send + Sync + 'static {
    /// Objects directly under `prefix`, and its sub-prefixes, all pages.
    fn list(&self, prefix: &str) -> impl Future<Output = Result<Listing, ClientError>> + Send;
    /// The object at `key`, or `None`.
    fn head(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<ObjectInfo>, ClientError>> + Send;
    /// Whether any key starts with `prefix`.
    fn has_keys_under(
        &self,
        prefix: &str,
    ) -> impl Future<Output = Result<bool, ClientError>> + Send;
    /// Bytes `start..end` of `key`.
    fn get_range(
        &self,
        key: &str,
        start: u64,
        end: u64,
    ) -> impl Future<Output = Result<Bytes, ClientError>> + Send;
    /// Bytes `start..end` of `key`, streamed.
    fn get_stream(
        &self,
        key: &str,
        start: u64,
        end: u64,
    ) -> impl Future<Output = Result<ByteStream, ClientError>> + Send;
    /// Writes `key` whole; returns its ETag.
    fn put(
        &self,
        key: &str,
        body: Bytes,
    ) -> impl Future<Output = Result<String, ClientError>> + Send;
    fn delete(&self, key: &str) -> impl Future<Output = Result<(), ClientError>> + Send;
    /// Starts a multipart upload; returns its id.
    fn create_multipart(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<String, ClientError>> + Send;
    /// Uploads part `number` (from 1); returns its ETag.
    fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: u32,
        body: Bytes,
    ) -> impl Future<Output = Result<String, ClientError>> + Send;
    /// Completes an upload from its parts' ETags, in order; returns the object's ETag.
    fn complete_multipart(
        &self,
        key: &str,
        upload_id: &str,
        etags: &[String],
    ) -> impl Future<Output = Result<String, ClientError>> + Send;
    /// Abandons an upload; failures are only logged.
    fn abort_multipart(&self, key: &str, upload_id: &str) -> impl Future<Output = ()> + Send;
    /// Server-side copy of `from` to `to`.
    fn copy(&self, from: &str, to: &str) -> impl Future<Output = Result<(), ClientError>> + Send;
}
