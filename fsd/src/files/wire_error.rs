//! File errors on the wire: the reference's codes, and an errno's code for what the
//! machine refused.

use fsd_api::ErrorCode;
use serde_json::json;

use super::apply::ApplyError;
use super::error::FileError;
use super::special::is_stalled;
use crate::error::ApiError;

impl From<FileError> for ApiError {
    fn from(err: FileError) -> Self {
        let message = err.to_string();
        match err {
            FileError::Path(err) => err.into(),
            FileError::InvalidPermission { field, reason } => {
                Self::validation(field, reason, "INVALID_PERMISSION")
            }
            FileError::InvalidBase64 => Self::validation("content", message, "INVALID_BASE64"),
            FileError::InvalidQuery(_) => Self::validation("query", message, "INVALID_QUERY"),
            FileError::InvalidExclude(_) => Self::validation("exclude", message, "INVALID_PATTERN"),
            FileError::IncompleteBody { .. } => {
                Self::validation("body", message, "INCOMPLETE_BODY")
            }
            FileError::ApplyBody(ApplyError::Body { .. }) => {
                Self::validation("body", message, "INCOMPLETE_BODY")
            }
            FileError::ApplyBody(ApplyError::Part { .. }) => {
                Self::validation("body", message, "INVALID_JSON")
            }
            FileError::ApplyBody(ApplyError::Step { field, reason }) => {
                Self::validation(&field, reason, "INVALID_PATH")
            }
            FileError::InvalidStep { field, reason } => {
                Self::validation(&field, reason, "INVALID_PATH")
            }
            FileError::InvalidMove { field, .. } => {
                Self::validation(field, message, "INVALID_PATH")
            }
            FileError::NotFound { path, .. } => {
                Self::new(ErrorCode::FileNotFound, message).with_context(json!({ "path": path }))
            }
            FileError::IsDirectory { path, .. } => {
                Self::new(ErrorCode::IsDirectory, message).with_context(json!({ "path": path }))
            }
            FileError::NotDirectory { path } => {
                Self::new(ErrorCode::NotDirectory, message).with_context(json!({ "path": path }))
            }
            FileError::AlreadyExists { path } => {
                Self::new(ErrorCode::FileExists, message).with_context(json!({ "path": path }))
            }
            FileError::TooLarge {
                path,
                actual,
                max,
                operation,
            } => Self::new(ErrorCode::FileTooLarge, message)
                .with_context(json!({
                    "path": path, "operation": operation, "actualSize": actual, "maxSize": max
                }))
                .with_suggestion("Use GET /api/files/raw, which has no size limit"),
            FileError::Special { path, kind, .. } => {
                Self::new(ErrorCode::UnsupportedFileType, message)
                    .with_context(json!({ "path": path, "fileType": kind.wire_name() }))
            }
            FileError::NoReader { path } => Self::new(ErrorCode::NoReader, message)
                .with_context(json!({ "path": path, "fileType": "fifo" }))
                .with_suggestion("Start the process that reads the FIFO first"),
            FileError::Io { path, source, .. } if is_stalled(&source) => {
                Self::new(ErrorCode::FileBlocked, message).with_context(json!({ "path": path }))
            }
            FileError::Io { path, source, .. } => {
                let code = match source.raw_os_error().map(nix::errno::Errno::from_raw) {
                    Some(nix::errno::Errno::ENOSPC | nix::errno::Errno::EDQUOT) => {
                        ErrorCode::NoSpace
                    }
                    Some(nix::errno::Errno::EMFILE | nix::errno::Errno::ENFILE) => {
                        ErrorCode::TooManyFiles
                    }
                    Some(nix::errno::Errno::EMLINK) => ErrorCode::TooManyLinks,
                    Some(nix::errno::Errno::ELOOP) => ErrorCode::SymlinkLoop,
                    Some(nix::errno::Errno::ENXIO | nix::errno::Errno::ENODEV) => {
                        ErrorCode::NoSuchDevice
                    }
                    Some(nix::errno::Errno::ETXTBSY) => ErrorCode::ResourceBusy,
                    Some(nix::errno::Errno::EFBIG) => ErrorCode::FileTooLarge,
                    Some(nix::errno::Errno::EACCES | nix::errno::Errno::EPERM) => {
                        ErrorCode::PermissionDenied
                    }
                    Some(nix::errno::Errno::EROFS) => ErrorCode::ReadOnly,
                    Some(nix::errno::Errno::ENAMETOOLONG) => ErrorCode::NameTooLong,
                    Some(nix::errno::Errno::ENOENT) => ErrorCode::FileNotFound,
                    Some(nix::errno::Errno::ENOTDIR) => ErrorCode::NotDirectory,
                    Some(nix::errno::Errno::EISDIR) => ErrorCode::IsDirectory,
                    Some(nix::errno::Errno::ENOTEMPTY | nix::errno::Errno::EEXIST) => {
                        ErrorCode::FileExists
                    }
                    Some(nix::errno::Errno::EBUSY) => ErrorCode::ResourceBusy,
                    _ => ErrorCode::FilesystemError,
                };
                Self::new(code, message).with_context(json!({
                    "path": path,
                    "errno": source.raw_os_error(),
                }))
            }
        }
    }
}
