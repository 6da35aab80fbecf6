//! What a bucket filesystem needs from a bucket, as a trait: the HTTP client implements it
//! for real stores, [`crate::MemoryStore`] for tests that run without a network or root.

use std::future::Future;

use bytes::Bytes;
use futures_util::stream::BoxStream;

/// What went wrong talking to a store: its status, S3 code and message when it answered.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{what}: {source}")]
    Http {
        what: String,
        source: reqwest::Error,
    },
    #[error("{what}: HTTP {status} {code}: {message}")]
    Status {
        what: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("{what}: unreadable answer: {reason}")]
    Decode { what: String, reason: String },
    #[error("signing failed: {0}")]
    Sign(String),
}

impl ClientError {
    /// The HTTP status, when the store answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Worth another try: the connection failed, or the store said it was busy or broken.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            ClientError::Http { .. } => true,
            ClientError::Status { status, .. } => crate::retry::transient_status(*status),
            _ => false,
        }
    }
}

/// One object of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    pub etag: String,
    /// RFC 3339, as the store wrote it.
    pub last_modified: String,
}

/// A listing under a prefix with `/` as delimiter: objects, and sub-prefixes ("directories").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub objects: Vec<ObjectInfo>,
    pub prefixes: Vec<String>,
}

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
