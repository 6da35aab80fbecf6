//! Where a bucket is and the credentials for it: what every trusted-side part starts from.

use std::time::Duration;

use aws_sdk_s3::config::{
    Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};

/// An S3-compatible endpoint and the credentials for it.
#[derive(Debug, Clone)]
pub struct BucketAccess {
    /// `http://127.0.0.1:9000`, `https://<account>.r2.cloudflarestorage.com`, …
    pub endpoint: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
    /// `us-east-1` for most; `auto` for R2.
    pub region: String,
    /// How long presigned URLs stay valid.
    pub presign_expiry: Duration,
}

impl BucketAccess {
    pub fn new(endpoint: &str, bucket: &str, access_key: &str, secret_key: &str) -> BucketAccess {
        BucketAccess {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            bucket: bucket.to_string(),
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
            region: "us-east-1".into(),
            presign_expiry: Duration::from_secs(3600),
        }
    }

    /// The endpoint and keys, as a credential proxy or a signing mount client takes them.
    pub fn upstream(&self) -> fsd_s3::Upstream {
        fsd_s3::Upstream {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            access_key: self.access_key.clone(),
            secret_key: self.secret_key.clone(),
        }
    }

    /// A presigned URL for `method` on object `key` (path-style), with `query` (such as a
    /// part's `partNumber` and `uploadId`) signed in, valid for `presign_expiry`. The
    /// signing is `fsd_s3::sign::presign`, the same code a Worker presigns with.
    pub fn presign(
        &self,
        method: &str,
        key: &str,
        query: &[(&str, &str)],
    ) -> Result<String, String> {
        let url = fsd_s3::sign::object_url(&self.endpoint, &self.bucket, key, query);
        fsd_s3::sign::presign(
            &self.upstream(),
            method,
            &url,
            self.presign_expiry,
            std::time::SystemTime::now(),
        )
    }

    /// An S3 client: path-style addressing, checksums only where required (presigned URLs
    /// must not demand headers the daemon does not send), and the SDK's standard retries
    /// (three attempts, exponential backoff with jitter): the trusted side's one retry
    /// policy, named here rather than left to the SDK's defaults.
    pub fn client(&self) -> aws_sdk_s3::Client {
        let config = aws_sdk_s3::Config::builder()
            .behavior_version_latest()
            .endpoint_url(&self.endpoint)
            .region(Region::new(self.region.clone()))
            .credentials_provider(Credentials::new(
                &self.access_key,
                &self.secret_key,
                None,
                None,
                "fsd",
            ))
            .force_path_style(true)
            .retry_config(aws_sdk_s3::config::retry::RetryConfig::standard())
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }
}
