//! The S3 object client, path-style: through a credential proxy (unsigned; the proxy signs)
//! or, with explicit credentials, signed here. Retries transient failures.

use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;

use futures_util::{StreamExt, TryStreamExt};

use crate::retry::RetryPolicy;
use crate::sign::{encode_key, object_url, sign_headers};
use crate::store::{ByteStream, ObjectStore};
pub use crate::store::{ClientError, Listing, ObjectInfo};
use crate::upstream::Upstream;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListBucketResult {
    #[serde(default)]
    contents: Vec<Contents>,
    #[serde(default)]
    common_prefixes: Vec<CommonPrefix>,
    #[serde(default)]
    is_truncated: bool,
    #[serde(default)]
    next_continuation_token: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Contents {
    key: String,
    #[serde(default)]
    size: u64,
    #[serde(default, rename = "ETag")]
    etag: String,
    #[serde(default)]
    last_modified: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CommonPrefix {
    prefix: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InitiateMultipartUploadResult {
    upload_id: String,
}

#[derive(Deserialize, Default)]
struct CompleteMultipartUploadResult {
    #[serde(default, rename = "ETag")]
    etag: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct S3Error {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// A bucket, reached through a proxy or with explicit credentials.
#[derive(Clone)]
pub struct ObjectClient {
    http: reqwest::Client,
    endpoint: String,
    bucket: String,
    /// Signs requests itself when set; otherwise the endpoint is a credential proxy.
    credentials: Option<Upstream>,
}

impl ObjectClient {
    pub fn new(
        endpoint: &str,
        bucket: &str,
        credentials: Option<Upstream>,
    ) -> Result<ObjectClient, ClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .build()
            .map_err(|source| ClientError::Http {
                what: "client".into(),
                source,
            })?;
        Ok(ObjectClient {
            http,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            bucket: bucket.to_string(),
            credentials,
        })
    }

    fn url(&self, key: &str, query: &[(&str, &str)]) -> String {
        object_url(&self.endpoint, &self.bucket, key, query)
    }

    async fn send(
        &self,
        method: reqwest::Method,
        url: String,
        headers: Vec<(String, String)>,
        body: Option<Bytes>,
        what: &str,
    ) -> Result<reqwest::Response, ClientError> {
        let mut all = headers;
        let body = body.unwrap_or_default();
        all.push(("content-length".into(), body.len().to_string()));
        if let Some(credentials) = &self.credentials {
            let signed = sign_headers(credentials, method.as_str(), &url, &all)
                .map_err(ClientError::Sign)?;
            all.extend(signed);
        }
        let retry = RetryPolicy::default();
        let mut attempt = 1;
        loop {
            let result = self
                .send_once(&method, &url, &all, body.clone(), what)
                .await;
            match (result, retry.delay_after(attempt)) {
                (Err(error), Some(delay)) if error.is_transient() => {
                    tracing::debug!(%error, attempt, "retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                (other, _) => return other,
            }
        }
    }

    async fn send_once(
        &self,
        method: &reqwest::Method,
        url: &str,
        headers: &[(String, String)],
        body: Bytes,
        what: &str,
    ) -> Result<reqwest::Response, ClientError> {
        let mut request = self.http.request(method.clone(), url);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|source| ClientError::Http {
                what: what.to_string(),
                source,
            })?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let error: S3Error = quick_xml::de::from_str(&text).unwrap_or(S3Error {
            code: String::new(),
            message: text,
        });
        Err(ClientError::Status {
            what: what.to_string(),
            status,
            code: error.code,
            message: error.message,
        })
    }

    /// One ListObjectsV2 page for `query` (which holds `prefix`).
    async fn list_page(
        &self,
        prefix: &str,
        query: &[(&str, &str)],
    ) -> Result<ListBucketResult, ClientError> {
        let what = format!("list {prefix:?}");
        let response = self
            .send(
                reqwest::Method::GET,
                self.url("", query),
                Vec::new(),
                None,
                &what,
            )
            .await?;
        decode(response, &what).await
    }

    /// Bytes `start..end` of `key` as they arrive: the response, for streaming readers.
    pub async fn get_response(
        &self,
        key: &str,
        start: u64,
        end: u64,
    ) -> Result<reqwest::Response, ClientError> {
        let what = format!("get {key:?} {start}..{end}");
        let range = vec![(
            "range".to_string(),
            format!("bytes={start}-{}", end.saturating_sub(1)),
        )];
        self.send(reqwest::Method::GET, self.url(key, &[]), range, None, &what)
            .await
    }
}

impl ObjectStore for ObjectClient {
    /// Every object and sub-prefix directly under `prefix` (`/`-delimited), all pages.
    async fn list(&self, prefix: &str) -> Result<Listing, ClientError> {
        let mut listing = Listing::default();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![("list-type", "2"), ("delimiter", "/"), ("prefix", prefix)];
            if let Some(token) = &token {
                query.push(("continuation-token", token.as_str()));
            }
            let page = self.list_page(prefix, &query).await?;
            listing
                .objects
                .extend(page.contents.into_iter().map(|c| ObjectInfo {
                    key: c.key,
                    size: c.size,
                    etag: c.etag,
                    last_modified: c.last_modified,
                }));
            listing
                .prefixes
                .extend(page.common_prefixes.into_iter().map(|p| p.prefix));
            match page.next_continuation_token {
                Some(next) if page.is_truncated => token = Some(next),
                _ => return Ok(listing),
            }
        }
    }

    /// Size, ETag and modification time of `key`; `None` when there is no such object.
    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, ClientError> {
        match self
            .send(
                reqwest::Method::HEAD,
                self.url(key, &[]),
                Vec::new(),
                None,
                &format!("head {key:?}"),
            )
            .await
        {
            Ok(response) => {
                let header = |name| header(&response, name).unwrap_or_default();
                Ok(Some(ObjectInfo {
                    key: key.to_string(),
                    // A HEAD body is empty: the size is in the header, not the body length.
                    size: header("content-length").parse().unwrap_or(0),
                    etag: header("etag"),
                    last_modified: header("last-modified"),
                }))
            }
            Err(error) if error.status() == Some(404) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Whether any key starts with `prefix` (one LIST of at most one key).
    async fn has_keys_under(&self, prefix: &str) -> Result<bool, ClientError> {
        let query = [("list-type", "2"), ("prefix", prefix), ("max-keys", "1")];
        let page = self.list_page(prefix, &query).await?;
        Ok(!page.contents.is_empty() || !page.common_prefixes.is_empty())
    }

    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes, ClientError> {
        self.get_response(key, start, end)
            .await?
            .bytes()
            .await
            .map_err(|source| ClientError::Http {
                what: format!("get {key:?} {start}..{end}"),
                source,
            })
    }

    async fn get_stream(&self, key: &str, start: u64, end: u64) -> Result<ByteStream, ClientError> {
        let what = format!("get {key:?} {start}..{end}");
        let response = self.get_response(key, start, end).await?;
        Ok(response
            .bytes_stream()
            .map_err(move |source| ClientError::Http {
                what: what.clone(),
                source,
            })
            .boxed())
    }

    /// Writes `key` whole; returns the new object's ETag (empty if the store sent none).
    async fn put(&self, key: &str, body: Bytes) -> Result<String, ClientError> {
        let headers = vec![(
            "content-type".to_string(),
            "application/octet-stream".to_string(),
        )];
        let response = self
            .send(
                reqwest::Method::PUT,
                self.url(key, &[]),
                headers,
                Some(body),
                &format!("put {key:?}"),
            )
            .await?;
        Ok(header(&response, "etag").unwrap_or_default())
    }

    async fn delete(&self, key: &str) -> Result<(), ClientError> {
        self.send(
            reqwest::Method::DELETE,
            self.url(key, &[]),
            Vec::new(),
            None,
            &format!("delete {key:?}"),
        )
        .await?;
        Ok(())
    }

    /// Starts a multipart upload of `key`; returns its upload id.
    async fn create_multipart(&self, key: &str) -> Result<String, ClientError> {
        let what = format!("create multipart {key:?}");
        let headers = vec![(
            "content-type".to_string(),
            "application/octet-stream".to_string(),
        )];
        let response = self
            .send(
                reqwest::Method::POST,
                self.url(key, &[("uploads", "")]),
                headers,
                None,
                &what,
            )
            .await?;
        let created: InitiateMultipartUploadResult = decode(response, &what).await?;
        Ok(created.upload_id)
    }

    /// Uploads part `number` (from 1); returns its ETag.
    async fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: u32,
        body: Bytes,
    ) -> Result<String, ClientError> {
        let number_text = number.to_string();
        let query = [
            ("partNumber", number_text.as_str()),
            ("uploadId", upload_id),
        ];
        let response = self
            .send(
                reqwest::Method::PUT,
                self.url(key, &query),
                Vec::new(),
                Some(body),
                &format!("upload part {number} of {key:?}"),
            )
            .await?;
        header(&response, "etag").ok_or_else(|| ClientError::Decode {
            what: format!("upload part {number} of {key:?}"),
            reason: "no ETag".into(),
        })
    }

    /// Completes a multipart upload from its parts' ETags, in order.
    async fn complete_multipart(
        &self,
        key: &str,
        upload_id: &str,
        etags: &[String],
    ) -> Result<String, ClientError> {
        let mut xml = String::from("<CompleteMultipartUpload>");
        for (index, etag) in etags.iter().enumerate() {
            xml.push_str(&format!(
                "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
                index + 1,
                etag.replace('&', "&amp;").replace('<', "&lt;")
            ));
        }
        xml.push_str("</CompleteMultipartUpload>");
        let what = format!("complete multipart {key:?}");
        let response = self
            .send(
                reqwest::Method::POST,
                self.url(key, &[("uploadId", upload_id)]),
                vec![("content-type".into(), "application/xml".into())],
                Some(Bytes::from(xml)),
                &what,
            )
            .await?;
        // S3 may answer 200 with an error document when completion fails late.
        let text = response.text().await.map_err(|source| ClientError::Http {
            what: what.clone(),
            source,
        })?;
        if text.contains("<Error>") {
            let error: S3Error = quick_xml::de::from_str(&text).unwrap_or(S3Error {
                code: "InternalError".into(),
                message: text.clone(),
            });
            return Err(ClientError::Status {
                what,
                status: 500,
                code: error.code,
                message: error.message,
            });
        }
        let completed: CompleteMultipartUploadResult =
            quick_xml::de::from_str(&text).unwrap_or_default();
        Ok(completed.etag)
    }

    /// Abandons a multipart upload (best effort: the caller is already failing).
    async fn abort_multipart(&self, key: &str, upload_id: &str) {
        if let Err(error) = self
            .send(
                reqwest::Method::DELETE,
                self.url(key, &[("uploadId", upload_id)]),
                Vec::new(),
                None,
                &format!("abort multipart {key:?}"),
            )
            .await
        {
            tracing::warn!(%error, "abort multipart upload");
        }
    }

    /// Server-side copy of `from` to `to` (a file rename is a copy, then a delete).
    async fn copy(&self, from: &str, to: &str) -> Result<(), ClientError> {
        let source = format!("/{}/{}", self.bucket, encode_key(from));
        let headers = vec![("x-amz-copy-source".to_string(), source)];
        self.send(
            reqwest::Method::PUT,
            self.url(to, &[]),
            headers,
            None,
            &format!("copy {from:?} to {to:?}"),
        )
        .await?;
        Ok(())
    }
}

/// A response header as text, if present and readable.
fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// An XML answer body, parsed.
async fn decode<T: serde::de::DeserializeOwned>(
    response: reqwest::Response,
    what: &str,
) -> Result<T, ClientError> {
    let text = response.text().await.map_err(|source| ClientError::Http {
        what: what.to_string(),
        source,
    })?;
    quick_xml::de::from_str(&text).map_err(|e| ClientError::Decode {
        what: what.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_listing() {
        let xml = r#"<?xml version="1.0"?><ListBucketResult><Name>b</Name><Prefix>a/</Prefix>
            <Contents><Key>a/x.txt</Key><Size>5</Size><ETag>"e1"</ETag><LastModified>2026-01-01T00:00:00Z</LastModified></Contents>
            <CommonPrefixes><Prefix>a/sub/</Prefix></CommonPrefixes>
            <IsTruncated>true</IsTruncated><NextContinuationToken>t2</NextContinuationToken></ListBucketResult>"#;
        let page: ListBucketResult = quick_xml::de::from_str(xml).unwrap();
        assert_eq!(page.contents.len(), 1);
        assert_eq!(page.contents[0].size, 5);
        assert_eq!(page.common_prefixes[0].prefix, "a/sub/");
        assert!(page.is_truncated);
        assert_eq!(page.next_continuation_token.as_deref(), Some("t2"));
    }

    #[test]
    fn keys_are_encoded_per_segment() {
        let client = ObjectClient::new("http://h:1", "b", None).unwrap();
        assert_eq!(client.url("a b/c+d", &[]), "http://h:1/b/a%20b/c%2Bd");
        assert_eq!(
            client.url("", &[("prefix", "x/"), ("list-type", "2")]),
            "http://h:1/b?list-type=2&prefix=x%2F"
        );
    }
}
