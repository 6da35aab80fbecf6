//! The reference's path rules for backups (docs/api.md, Backups and restores), and the
//! request fields.

use std::path::{Path, PathBuf};

use fsd_api::MAX_PATH_BYTES;
use fsd_api::backup::{ALLOWED_DIR_PREFIXES, ARCHIVE_ROOT};

/// A request field that breaks the backup rules (its wire code is decided in `wire_error`).
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct BackupConfigError {
    pub field: String,
    pub message: String,
}

/// `field` breaks the rules.
pub fn invalid(field: &str, message: impl Into<String>) -> BackupConfigError {
    BackupConfigError {
        field: field.to_string(),
        message: message.into(),
    }
}

/// Absolute, no NUL, no `..` anywhere (as a substring, as the reference checks), ≤ 4096.
fn checked_path(field: &str, value: &str) -> Result<PathBuf, BackupConfigError> {
    if value.is_empty() {
        return Err(invalid(field, "is required"));
    }
    if value.len() > MAX_PATH_BYTES {
        return Err(invalid(
            field,
            format!("is longer than {MAX_PATH_BYTES} bytes"),
        ));
    }
    if value.contains('\0') {
        return Err(invalid(field, "contains a NUL byte"));
    }
    if !value.starts_with('/') {
        return Err(invalid(field, "must be an absolute path"));
    }
    if value.contains("..") {
        return Err(invalid(field, "must not contain '..'"));
    }
    Ok(PathBuf::from(value))
}

/// A directory to back up or restore onto: under an allowed prefix or the workspace.
pub fn dir(value: &str, workspace: &Path) -> Result<PathBuf, BackupConfigError> {
    let path = checked_path("dir", value)?;
    let allowed = ALLOWED_DIR_PREFIXES
        .iter()
        .any(|prefix| path.starts_with(prefix))
        || path.starts_with(workspace);
    if !allowed {
        return Err(invalid(
            "dir",
            format!(
                "must be under one of {} or the workspace",
                ALLOWED_DIR_PREFIXES.join(", ")
            ),
        ));
    }
    Ok(path)
}

/// An archive path: a file directly or deeper under /var/backups/.
pub fn archive(field: &str, value: &str) -> Result<PathBuf, BackupConfigError> {
    let path = checked_path(field, value)?;
    if !value.starts_with(ARCHIVE_ROOT) || value.len() == ARCHIVE_ROOT.len() {
        return Err(invalid(
            field,
            format!("must be a file under {ARCHIVE_ROOT}"),
        ));
    }
    Ok(path)
}

/// Which transfer URLs (parts, downloads, indexes) the daemon takes: https, or http to a
/// loopback host (the embedded store) or to a host the deployment named
/// (`--http-transfer-host`: the local Cloudflare stack's store on the host, which the
/// container reaches by the host's address). A presigned URL is a credential for its
/// object, so it is not sent in the clear anywhere else.
#[derive(Debug, Clone, Default)]
pub struct UrlRule {
    /// `host` or `host:port`.
    http_hosts: Vec<String>,
}

impl UrlRule {
    pub fn new(http_hosts: Vec<String>) -> UrlRule {
        UrlRule { http_hosts }
    }

    pub fn check(&self, field: &str, value: &str) -> Result<(), BackupConfigError> {
        let Ok(url) = reqwest::Url::parse(value) else {
            return Err(invalid(field, "is not a URL"));
        };
        let host = url.host_str().unwrap_or_default();
        let loopback = matches!(host, "localhost" | "[::1]") || host.starts_with("127.");
        let named = self.http_hosts.iter().any(|allowed| {
            allowed == host
                || url
                    .port_or_known_default()
                    .is_some_and(|port| *allowed == format!("{host}:{port}"))
        });
        match url.scheme() {
            "https" => Ok(()),
            "http" if loopback || named => Ok(()),
            _ => Err(invalid(
                field,
                "must be an https URL (http only to a loopback host or a --http-transfer-host)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_paths_follow_the_reference() {
        assert!(archive("archivePath", "/var/backups/a.sqsh").is_ok());
        assert!(archive("archivePath", "/var/backups/").is_err());
        assert!(archive("archivePath", "/tmp/a.sqsh").is_err());
        assert!(archive("archivePath", "/var/backups/a..b.sqsh").is_err());
        assert!(archive("archivePath", "var/backups/a.sqsh").is_err());
    }

    #[test]
    fn dirs_must_be_under_allowed_prefixes() {
        let ws = Path::new("/srv/ws");
        assert!(dir("/workspace/app", ws).is_ok());
        assert!(dir("/srv/ws/sub", ws).is_ok());
        assert!(dir("/etc", ws).is_err());
        assert!(dir("/workspacex", ws).is_err());
        assert!(dir("/tmp/a\0b", ws).is_err());
    }

    #[test]
    fn urls_are_https_or_loopback() {
        let url = |field: &str, value: &str| UrlRule::default().check(field, value);
        assert!(url("u", "https://x.r2.cloudflarestorage.com/b/k").is_ok());
        assert!(url("u", "http://127.0.0.1:9000/b/k").is_ok());
        assert!(url("u", "http://example.com/b/k").is_err());
        assert!(url("u", "ftp://127.0.0.1/x").is_err());
    }

    #[test]
    fn http_goes_only_to_the_hosts_named() {
        let rule = UrlRule::new(vec!["192.0.2.2:9000".into(), "store.lan".into()]);
        assert!(rule.check("u", "http://192.0.2.2:9000/b/k").is_ok());
        assert!(rule.check("u", "http://192.0.2.2:9001/b/k").is_err());
        assert!(rule.check("u", "http://store.lan:8080/b/k").is_ok());
        assert!(rule.check("u", "http://192.0.2.3:9000/b/k").is_err());
    }
}
