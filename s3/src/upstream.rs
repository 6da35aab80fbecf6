//! Where signed requests go, and the keys that sign them.

/// An S3-compatible endpoint and the keys that sign requests to it.
#[derive(Clone)]
pub struct Upstream {
    /// `https://<account>.r2.cloudflarestorage.com`, `http://127.0.0.1:9000`, …
    pub endpoint: String,
    pub region: String,
    pub access_key: String,
    pub secret_key: String,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}
