//! The reference's rules for mount requests (docs/api.md, Bucket mounts): INVALID_MOUNT_CONFIG
//! naming the field, MISSING_CREDENTIALS when nothing can sign.

use std::path::PathBuf;

use fsd_api::MAX_PATH_BYTES;
use fsd_api::mounts::MountBucketRequest;
use fsd_s3::Upstream;

/// Why a mount request was refused (its wire code is decided in `wire_error`).
#[derive(Debug, thiserror::Error)]
pub enum MountConfigError {
    /// A field breaks the rules: INVALID_MOUNT_CONFIG naming it.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// Nothing could sign requests to the bucket.
    #[error(
        "No credentials for the bucket: pass credentials, set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or R2_ACCESS_KEY_ID/R2_SECRET_ACCESS_KEY, or mount through a credential proxy (proxyUrl)"
    )]
    MissingCredentials,
}

fn invalid(field: &'static str, message: impl Into<String>) -> MountConfigError {
    MountConfigError::Invalid {
        field,
        message: message.into(),
    }
}

/// A checked mount request.
#[derive(Debug)]
pub struct MountPlan {
    pub mount_path: PathBuf,
    pub bucket: String,
    pub prefix: String,
    pub read_only: bool,
    pub endpoint: String,
    pub provider: String,
    /// `None`: `endpoint` is a credential proxy.
    pub credentials: Option<Upstream>,
    pub cache_ttl_ms: u64,
}

/// Absolute, no NUL, no `..` segment, at most 4096 bytes.
pub fn mount_path(value: &str) -> Result<PathBuf, MountConfigError> {
    let field = "mountPath";
    if value.is_empty() {
        return Err(invalid(field, "is required"));
    }
    if value.len() > MAX_PATH_BYTES || value.contains('\0') {
        return Err(invalid(field, "is not a usable path"));
    }
    if !value.starts_with('/') {
        return Err(invalid(field, "must be an absolute path"));
    }
    if value.split('/').any(|segment| segment == "..") {
        return Err(invalid(field, "must not contain '..'"));
    }
    let trimmed = value.trim_end_matches('/');
    if trimmed.is_empty() {
        return Err(invalid(field, "cannot be /"));
    }
    Ok(PathBuf::from(trimmed))
}

fn url(field: &'static str, value: &str) -> Result<String, MountConfigError> {
    match reqwest::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
            Ok(value.trim_end_matches('/').to_string())
        }
        _ => Err(invalid(field, "must be an http(s) URL")),
    }
}

/// The provider named, or the one the endpoint's host shows.
fn provider(named: Option<&str>, endpoint: &str) -> String {
    if let Some(named) = named {
        return named.to_ascii_lowercase();
    }
    if endpoint.contains(".r2.cloudflarestorage.com") {
        "r2".into()
    } else if endpoint.contains(".amazonaws.com") {
        "s3".into()
    } else if endpoint.contains("storage.googleapis.com") {
        "gcs".into()
    } else {
        "s3-compatible".into()
    }
}

/// Checks `req`; `env` looks up the daemon's environment (for default credentials).
pub fn plan(
    req: &MountBucketRequest,
    env: impl Fn(&str) -> Option<String>,
) -> Result<MountPlan, MountConfigError> {
    let mount_path = mount_path(&req.mount_path)?;
    if req.bucket.contains(':') || !fsd_control::mounts::valid_bucket(&req.bucket) {
        return Err(invalid(
            "bucket",
            "must be 1-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit",
        ));
    }
    let prefix = match req.prefix.as_deref() {
        None | Some("") => String::new(),
        Some(prefix) if !prefix.starts_with('/') => {
            return Err(invalid("prefix", "must start with '/'"));
        }
        Some(prefix) if prefix.split('/').any(|s| s == "..") => {
            return Err(invalid("prefix", "must not contain '..'"));
        }
        Some(prefix) => fsd_mounts::fs::keys::normalize_prefix(prefix),
    };
    let (endpoint, via_proxy) = match (&req.endpoint, &req.proxy_url) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "proxyUrl",
                "give either endpoint or proxyUrl, not both",
            ));
        }
        (None, None) => return Err(invalid("endpoint", "is required (or proxyUrl)")),
        (Some(endpoint), None) => (url("endpoint", endpoint)?, false),
        (None, Some(proxy)) => (url("proxyUrl", proxy)?, true),
    };
    let provider = provider(req.provider.as_deref(), &endpoint);
    let credentials = if via_proxy {
        if req.credentials.is_some() {
            return Err(invalid(
                "credentials",
                "a credential proxy signs; no credentials go with proxyUrl",
            ));
        }
        None
    } else {
        let keys = match &req.credentials {
            Some(given) if given.access_key_id.is_empty() || given.secret_access_key.is_empty() => {
                return Err(invalid(
                    "credentials",
                    "accessKeyId and secretAccessKey must both be set",
                ));
            }
            Some(given) => Some((given.access_key_id.clone(), given.secret_access_key.clone())),
            None => [
                ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
                ("R2_ACCESS_KEY_ID", "R2_SECRET_ACCESS_KEY"),
            ]
            .iter()
            .find_map(|(id, secret)| Some((env(id)?, env(secret)?))),
        };
        let Some((access_key, secret_key)) = keys else {
            return Err(MountConfigError::MissingCredentials);
        };
        let region = req.region.clone().unwrap_or_else(|| {
            if provider == "r2" {
                "auto"
            } else {
                "us-east-1"
            }
            .to_string()
        });
        Some(Upstream {
            endpoint: endpoint.clone(),
            region,
            access_key,
            secret_key,
        })
    };
    let cache_ttl_ms = req.cache_ttl_ms.unwrap_or(1000);
    if cache_ttl_ms > 3_600_000 {
        return Err(invalid("cacheTtlMs", "must be at most 3600000 (one hour)"));
    }
    Ok(MountPlan {
        mount_path,
        bucket: req.bucket.clone(),
        prefix,
        read_only: req.read_only.unwrap_or(false),
        endpoint,
        provider,
        credentials,
        cache_ttl_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> MountBucketRequest {
        MountBucketRequest {
            bucket: "data".into(),
            mount_path: "/mnt/data/".into(),
            proxy_url: Some("http://127.0.0.1:9/".into()),
            ..MountBucketRequest::default()
        }
    }

    fn field_of(error: MountConfigError) -> &'static str {
        match error {
            MountConfigError::Invalid { field, .. } => field,
            MountConfigError::MissingCredentials => "",
        }
    }

    #[test]
    fn a_proxy_mount_needs_no_keys() {
        let plan = plan(&request(), |_| None).unwrap();
        assert_eq!(plan.mount_path, PathBuf::from("/mnt/data"));
        assert_eq!(plan.endpoint, "http://127.0.0.1:9");
        assert!(plan.credentials.is_none());
    }

    #[test]
    fn fields_are_named() {
        let mut bad = request();
        bad.mount_path = "relative".into();
        assert_eq!(field_of(plan(&bad, |_| None).unwrap_err()), "mountPath");
        let mut bad = request();
        bad.bucket = "Bad_Bucket".into();
        assert_eq!(field_of(plan(&bad, |_| None).unwrap_err()), "bucket");
        let mut bad = request();
        bad.prefix = Some("data".into());
        assert_eq!(field_of(plan(&bad, |_| None).unwrap_err()), "prefix");
        let mut bad = request();
        bad.proxy_url = Some("not a url".into());
        assert_eq!(field_of(plan(&bad, |_| None).unwrap_err()), "proxyUrl");
    }

    #[test]
    fn endpoint_mounts_take_keys_from_the_request_or_the_environment() {
        let mut req = request();
        req.proxy_url = None;
        req.endpoint = Some("https://acct.r2.cloudflarestorage.com".into());
        let missing = plan(&req, |_| None).unwrap_err();
        assert!(matches!(missing, MountConfigError::MissingCredentials));
        let from_env = plan(&req, |name| {
            name.starts_with("R2_").then(|| "k".to_string())
        })
        .unwrap();
        let upstream = from_env.credentials.unwrap();
        assert_eq!(upstream.region, "auto");
        assert_eq!(from_env.provider, "r2");
    }
}
