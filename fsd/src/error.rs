//! The one place where errors become wire errors.
//!
//! Handlers return [`ApiError`]; domain services return their own enums, converted here, so
//! a reader finds every code-and-status decision in this file.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use fsd_api::{ErrorBody, ErrorCode, Operation, ValidationIssue};
use serde_json::{Value, json};

use crate::backup::BackupConfigError;
use crate::exec::{ExecError, RequestError};
use crate::files::FileError;
use crate::git::{Failure, GitError};
use crate::interpreter::InterpreterError;
use crate::mounts::{MountConfigError, MountServiceError};
use crate::ports::PortWatchRequestError;
use crate::process::ProcessError;
use crate::tunnels::TunnelRequestError;
use crate::watch::WatchRequestError;
use crate::wire::json::BodyError;
use crate::wire::time::now_rfc3339;
use fsd_backup::BackupError;
use fsd_mounts::MountError;

/// An error on its way to the caller as the reference's error envelope.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub context: Value,
    pub operation: Option<Operation>,
    pub suggestion: Option<String>,
    /// Normally the code's status; the unknown-route 404 is the one exception.
    pub http_status: u16,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            http_status: code.http_status(),
            code,
            message: message.into(),
            context: json!({}),
            operation: None,
            suggestion: None,
        }
    }

    /// A 400 VALIDATION_FAILED naming the field, with the reference's `validationErrors` shape.
    pub fn validation(field: &str, message: impl Into<String>, issue_code: &str) -> Self {
        let message = message.into();
        let issue = ValidationIssue {
            field: field.to_string(),
            message: message.clone(),
            code: issue_code.to_string(),
        };
        Self::new(ErrorCode::ValidationFailed, format!("{field}: {message}"))
            .with_context(json!({ "validationErrors": [issue] }))
    }

    /// A 400 with a domain's own code (INVALID_BACKUP_CONFIG, INVALID_MOUNT_CONFIG) naming
    /// the field, in both `context.field` and the reference's `validationErrors`.
    pub fn invalid_field(code: ErrorCode, field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let issue = ValidationIssue {
            field: field.to_string(),
            message: message.clone(),
            code: code.as_str().to_string(),
        };
        Self::new(code, format!("{field}: {message}"))
            .with_context(json!({ "field": field, "validationErrors": [issue] }))
    }

    /// Parses a JSON body for a domain whose type errors carry its own code instead of
    /// VALIDATION_FAILED, as the reference answers them.
    pub fn parse_as<T: serde::de::DeserializeOwned>(
        body: &[u8],
        code: ErrorCode,
        operation: Operation,
    ) -> Result<T, ApiError> {
        crate::wire::json::parse(body).map_err(|error| {
            let mut error = ApiError::from(error);
            if error.code == ErrorCode::ValidationFailed {
                error.http_status = code.http_status();
                error.code = code;
            }
            error.with_operation(operation)
        })
    }

    pub fn with_context(mut self, context: Value) -> Self {
        self.context = context;
        self
    }

    pub fn with_operation(mut self, operation: Operation) -> Self {
        self.operation = Some(operation);
        self
    }

    pub fn with_suggestion(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }

    /// The reference answers unknown routes 404 with code UNKNOWN_ERROR (otherwise a 500 code).
    pub fn not_found_route() -> Self {
        let mut err = Self::new(
            ErrorCode::UnknownError,
            "The requested endpoint was not found",
        );
        err.http_status = 404;
        err
    }

    /// A WebSocket upgrade whose handshake is malformed (the reference answers 503, which
    /// its clients retry; a malformed handshake does not get better by retrying).
    pub fn bad_upgrade(reason: String) -> Self {
        Self::validation("headers", reason, "INVALID_UPGRADE")
    }

    /// `/ws/pty` without a usable `sessionId` (before the upgrade, as the reference).
    pub fn terminal_query(message: &str) -> Self {
        Self::validation("sessionId", message, "INVALID_QUERY")
    }

    pub fn unauthorized() -> Self {
        Self::new(ErrorCode::Unauthorized, "Missing or invalid API token")
            .with_suggestion("Send `Authorization: Bearer <token>` or `X-Fsd-Token: <token>`")
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            code: self.code.clone(),
            message: self.message.clone(),
            context: self.context.clone(),
            operation: self.operation,
            http_status: self.http_status,
            timestamp: now_rfc3339(),
            suggestion: self.suggestion.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.http_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::error!(code = %self.code, message = %self.message, "request failed");
        } else {
            tracing::debug!(code = %self.code, message = %self.message, "request refused");
        }
        let mut response = (status, axum::Json(self.body())).into_response();
        if self.code == ErrorCode::Unauthorized {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Attaches the operation to a service error as it becomes a wire error.
pub trait OperationExt<T> {
    fn op(self, operation: Operation) -> Result<T, ApiError>;
}

impl<T, E: Into<ApiError>> OperationExt<T> for Result<T, E> {
    fn op(self, operation: Operation) -> Result<T, ApiError> {
        self.map_err(|err| err.into().with_operation(operation))
    }
}

impl From<FileError> for ApiError {
    fn from(err: FileError) -> Self {
        let message = err.to_string();
        match err {
            FileError::InvalidPath { field, reason, .. } => {
                Self::validation(field, reason, "INVALID_PATH")
            }
            FileError::InvalidBase64 => Self::validation("content", message, "INVALID_BASE64"),
            FileError::InvalidQuery(_) => Self::validation("query", message, "INVALID_QUERY"),
            FileError::IncompleteBody { .. } => {
                Self::validation("body", message, "INCOMPLETE_BODY")
            }
            FileError::InvalidMove { field, .. } => {
                Self::validation(field, message, "INVALID_PATH")
            }
            FileError::OutsideRoots { path } => Self::new(ErrorCode::PermissionDenied, message)
                .with_context(json!({ "path": path }))
                .with_suggestion("The daemon runs with --confine; use a path inside the workspace"),
            FileError::DaemonProc { path } => Self::new(ErrorCode::PermissionDenied, message)
                .with_context(json!({ "path": path }))
                .with_suggestion("The /proc entries of the sandbox's own processes are readable"),
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
            FileError::Io { path, source, .. } if crate::files::is_stalled(&source) => {
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

impl From<TunnelRequestError> for ApiError {
    fn from(err: TunnelRequestError) -> Self {
        let message = err.to_string();
        let field = match err {
            TunnelRequestError::Mode => "mode",
            TunnelRequestError::Port => "port",
            TunnelRequestError::TokenMissing | TunnelRequestError::TokenUnexpected => "token",
            TunnelRequestError::Id { field } => field,
        };
        Self::validation(field, message, "INVALID_TUNNEL_REQUEST")
    }
}

impl From<fsd_tunnels::TunnelError> for ApiError {
    fn from(err: fsd_tunnels::TunnelError) -> Self {
        let message = err.to_string();
        match err {
            fsd_tunnels::TunnelError::NotFound { binary } => {
                Self::new(ErrorCode::CloudflaredNotFound, message)
                    .with_context(json!({ "binary": binary }))
            }
            fsd_tunnels::TunnelError::Start(_) => Self::new(ErrorCode::TunnelStartError, message),
            fsd_tunnels::TunnelError::Conflict(_) => {
                Self::new(ErrorCode::TunnelRunConflict, message)
            }
        }
    }
}

impl From<GitError> for ApiError {
    fn from(err: GitError) -> Self {
        let message = err.to_string();
        match err {
            GitError::InvalidUrl { url, .. } => {
                Self::new(ErrorCode::InvalidGitUrl, message).with_context(json!({ "repoUrl": url }))
            }
            GitError::Invalid { field, issue, .. } => Self::validation(field, message, issue),
            GitError::TargetExists(path) => {
                Self::new(ErrorCode::FileExists, message).with_context(json!({ "path": path }))
            }
            GitError::Spawn(_) => Self::new(ErrorCode::GitCloneFailed, message),
            GitError::Failed {
                failure,
                repository,
                target_dir,
                exit_code,
                stderr,
                ..
            } => {
                let (code, suggestion) = match failure {
                    Failure::TimedOut => (ErrorCode::GitNetworkError, None),
                    Failure::Network => (
                        ErrorCode::GitNetworkError,
                        Some("The repository's host could not be reached from the sandbox"),
                    ),
                    Failure::RepositoryNotFound => (
                        ErrorCode::GitRepositoryNotFound,
                        Some("Verify the repository URL is correct and accessible"),
                    ),
                    Failure::BranchNotFound => (
                        ErrorCode::GitBranchNotFound,
                        Some("The branch does not exist in the repository; check its name"),
                    ),
                    Failure::AuthFailed => (
                        ErrorCode::GitAuthFailed,
                        Some("Check authentication credentials or use a public repository"),
                    ),
                    Failure::CloneFailed => (ErrorCode::GitCloneFailed, None),
                };
                let error = Self::new(code, message).with_context(json!({
                    "repository": repository,
                    "targetDir": target_dir,
                    "exitCode": exit_code,
                    "stderr": stderr,
                }));
                match suggestion {
                    Some(suggestion) => error.with_suggestion(suggestion),
                    None => error,
                }
            }
        }
    }
}

impl From<InterpreterError> for ApiError {
    fn from(err: InterpreterError) -> Self {
        let message = err.to_string();
        match err {
            InterpreterError::Spawn { kind, reason } if kind.name() == "python" => Self::new(
                ErrorCode::PythonNotAvailable,
                format!("Python interpreter not available: {reason}"),
            )
            .with_context(json!({ "originalError": reason })),
            InterpreterError::Spawn { reason, .. } => Self::new(
                ErrorCode::InternalError,
                format!("Failed to create code context: {reason}"),
            ),
            InterpreterError::Init(_) | InterpreterError::Protocol(_) => Self::new(
                ErrorCode::InternalError,
                format!("Failed to create code context: {message}"),
            ),
            InterpreterError::NotFound(id) => Self::new(ErrorCode::ContextNotFound, message)
                .with_context(json!({ "contextId": id })),
            InterpreterError::Dead(id) => Self::new(ErrorCode::InternalError, message)
                .with_context(json!({ "contextId": id })),
            InterpreterError::WrongLanguage { ref id, .. } => Self::new(
                ErrorCode::CodeExecutionError,
                format!("Failed to execute code in context '{id}': {message}"),
            )
            .with_context(json!({ "contextId": id, "evalue": message })),
            InterpreterError::Invalid { field, .. } => {
                Self::validation(field, message, "INVALID_VALUE")
            }
        }
    }
}

/// `POST /api/execute/code` answers failures in the reference's own body,
/// `{error, code, details}`, not the envelope (its clients read those fields).
pub fn code_execution_error(err: InterpreterError) -> Response {
    let not_found = match &err {
        InterpreterError::NotFound(id) => Some(id.clone()),
        _ => None,
    };
    let api = ApiError::from(err);
    let message = match not_found {
        Some(id) => format!("Context {id} not found"),
        None => api.message.clone(),
    };
    let status = StatusCode::from_u16(api.http_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = fsd_api::interpreter::CodeErrorBody {
        error: message,
        code: api.code,
        details: api.context,
    };
    (status, axum::Json(body)).into_response()
}

impl From<PortWatchRequestError> for ApiError {
    fn from(err: PortWatchRequestError) -> Self {
        let message = err.to_string();
        match err {
            PortWatchRequestError::Port => Self::validation("port", message, "INVALID_PORT"),
            PortWatchRequestError::Path => Self::validation("path", message, "INVALID_PATH"),
            PortWatchRequestError::StatusRange => {
                Self::validation("statusMin", message, "INVALID_RANGE")
            }
        }
    }
}

impl From<WatchRequestError> for ApiError {
    fn from(err: WatchRequestError) -> Self {
        let message = err.to_string();
        match err {
            WatchRequestError::Path => Self::validation("path", message, "INVALID_PATH"),
            WatchRequestError::IncludeAndExclude => {
                Self::validation("include", message, "INVALID_PATTERN")
            }
            WatchRequestError::Pattern { field, .. } => {
                Self::validation(field, message, "INVALID_PATTERN")
            }
            WatchRequestError::EventType(_) => Self::validation("events", message, "INVALID_EVENT"),
            WatchRequestError::Token | WatchRequestError::FutureToken => {
                Self::validation("since", message, "INVALID_VERSION")
            }
            WatchRequestError::Outside { found: None } => {
                Self::new(ErrorCode::PermissionDenied, message)
            }
            WatchRequestError::Outside {
                found: Some((path, workspace)),
            } => Self::new(ErrorCode::PermissionDenied, message)
                .with_context(json!({ "path": path, "workspace": workspace })),
            WatchRequestError::Missing(_) => Self::new(ErrorCode::FileNotFound, message),
            WatchRequestError::Start(_) => Self::new(ErrorCode::WatchStartError, message),
        }
    }
}

impl From<fsd_watch::WatchError> for ApiError {
    fn from(err: fsd_watch::WatchError) -> Self {
        match err {
            fsd_watch::WatchError::NotFound(path) => Self::new(
                ErrorCode::FileNotFound,
                format!("Path does not exist: {}", path.display()),
            ),
            fsd_watch::WatchError::NotDirectory(path) => Self::new(
                ErrorCode::NotDirectory,
                format!("Path is not a directory: {}", path.display()),
            ),
            other => Self::new(ErrorCode::WatchStartError, other.to_string()),
        }
    }
}

impl From<RequestError> for ApiError {
    fn from(err: RequestError) -> Self {
        let message = err.to_string();
        match err {
            RequestError::EmptyCommand | RequestError::NulInCommand => {
                let reason = message.trim_start_matches("command: ").to_string();
                Self::validation("command", reason, "INVALID_COMMAND")
            }
            // The reference's code for this case (its clients map it to InvalidCommandError).
            RequestError::EmptyProcessCommand => Self::new(ErrorCode::InvalidCommand, message)
                .with_context(json!({"validationErrors": [{
                    "field": "command", "message": "must not be empty", "code": "INVALID_COMMAND"
                }]})),
            RequestError::EnvName(_) | RequestError::EnvNul(_) => {
                Self::validation("env", message, "INVALID_ENV")
            }
            RequestError::Cwd => Self::validation("cwd", message, "INVALID_PATH"),
            RequestError::SessionId { field } => {
                Self::validation(field, message, "INVALID_SESSION")
            }
            RequestError::SessionToDelete => {
                Self::validation("sessionId", message, "INVALID_SESSION")
            }
        }
    }
}

impl From<ExecError> for ApiError {
    fn from(err: ExecError) -> Self {
        let message = err.to_string();
        match err {
            ExecError::CwdNotFound { cwd } => Self::validation("cwd", message, "CWD_NOT_FOUND")
                .with_context(json!({
                    "validationErrors": [{"field": "cwd", "message": format!("Directory not found: {cwd}"), "code": "CWD_NOT_FOUND"}],
                    "cwd": cwd,
                })),
            ExecError::SessionExists { id } => Self::new(ErrorCode::SessionAlreadyExists, message)
                .with_context(json!({ "sessionId": id, "containerPlacementId": crate::config::environment().placement_id })),
            ExecError::SessionNotFound { id } => {
                Self::new(ErrorCode::SessionNotFound, message).with_context(json!({ "sessionId": id }))
            }
            ExecError::ShellExited { id, code } => Self::new(ErrorCode::SessionTerminated, message)
                .with_context(json!({ "sessionId": id, "exitCode": code }))
                .with_suggestion("The next command on this session id starts a fresh shell"),
            ExecError::SessionDestroyed { id } => {
                Self::new(ErrorCode::SessionDestroyed, message).with_context(json!({ "sessionId": id }))
            }
            ExecError::Timeout { timeout_ms, stdout, stderr, session_kept } => {
                Self::new(ErrorCode::CommandExecutionError, message).with_context(json!({
                    "timeoutMs": timeout_ms,
                    "timedOut": true,
                    "sessionKept": session_kept,
                    "stdout": stdout,
                    "stderr": stderr,
                }))
            }
            ExecError::Spawn(_) | ExecError::Io(_) => Self::new(ErrorCode::CommandExecutionError, message),
            ExecError::Request(err) => err.into(),
            ExecError::Path(err) => err.into(),
        }
    }
}

impl From<ProcessError> for ApiError {
    fn from(err: ProcessError) -> Self {
        let message = err.to_string();
        match err {
            ProcessError::NotFound { id } => Self::new(ErrorCode::ProcessNotFound, message)
                .with_context(json!({ "processId": id })),
            ProcessError::AlreadyFinished { id, session_id } => {
                Self::new(ErrorCode::CommandNotFound, message)
                    .with_context(json!({ "processId": id, "sessionId": session_id }))
            }
            ProcessError::InvalidId { reason } => {
                Self::validation("processId", reason, "INVALID_PROCESS_ID")
            }
            ProcessError::DuplicateId { id } => {
                Self::new(ErrorCode::ResourceBusy, message).with_context(json!({ "processId": id }))
            }
            ProcessError::InvalidStatus => Self::validation("status", message, "INVALID_STATUS"),
            ProcessError::Exec(err) => err.into(),
        }
    }
}

/// Backup errors: caller mistakes are 4xx (a missing source directory is
/// INVALID_BACKUP_CONFIG, a missing archive BACKUP_NOT_FOUND, where the reference answers
/// 500); what fails on the machine is BACKUP_CREATE_FAILED or BACKUP_RESTORE_FAILED.
pub fn backup_error(err: BackupError, operation: Operation) -> ApiError {
    let message = err.to_string();
    let failed = match operation {
        Operation::BackupRestore => ErrorCode::BackupRestoreFailed,
        _ => ErrorCode::BackupCreateFailed,
    };
    let error = match &err {
        BackupError::NotADirectory(path) => ApiError::new(ErrorCode::InvalidBackupConfig, message)
            .with_context(json!({ "field": "dir", "path": path })),
        BackupError::InvalidExclude { pattern, .. } => {
            ApiError::new(ErrorCode::InvalidBackupConfig, message)
                .with_context(json!({ "field": "excludes", "pattern": pattern }))
        }
        BackupError::ArchiveMissing(path) => ApiError::new(ErrorCode::BackupNotFound, message)
            .with_context(json!({ "archivePath": path })),
        BackupError::NotMounted(path) => ApiError::new(ErrorCode::BackupNotFound, message)
            .with_context(json!({ "dir": path }))
            .with_suggestion("Layers are taken of a directory restored with /api/backup/restore"),
        BackupError::Index(_) => ApiError::new(ErrorCode::InvalidBackupConfig, message)
            .with_context(json!({ "field": "indexUrl" })),
        BackupError::NotInSnapshot(path) => ApiError::new(ErrorCode::FileNotFound, message)
            .with_context(json!({ "field": "paths", "path": path })),
        BackupError::TransferStatus { status, .. } => {
            ApiError::new(failed, message).with_context(json!({ "upstreamStatus": status }))
        }
        _ => ApiError::new(failed, message),
    };
    error.with_operation(operation)
}

/// Bucket mount failures: a caller's mistake is INVALID_MOUNT_CONFIG; a store that does not
/// answer or a mount that fails is BUCKET_MOUNT_ERROR; a busy unmount BUCKET_UNMOUNT_ERROR.
/// Bodies that are not JSON are `body` errors; a bad field is named by its path.
impl From<BodyError> for ApiError {
    fn from(err: BodyError) -> Self {
        let message = err.to_string();
        match err {
            BodyError::TooLarge => Self::new(ErrorCode::FileTooLarge, message)
                .with_suggestion("Use PUT /api/files/raw to upload large files without base64"),
            BodyError::Unreadable(_) => Self::validation("body", message, "INVALID_BODY"),
            BodyError::NotObject | BodyError::Syntax(_) => {
                Self::validation("body", message, "INVALID_JSON")
            }
            BodyError::Field { field, message } => {
                Self::validation(&field, message, "INVALID_FIELD")
            }
        }
    }
}

impl IntoResponse for BodyError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

impl From<BackupConfigError> for ApiError {
    fn from(err: BackupConfigError) -> Self {
        Self::invalid_field(ErrorCode::InvalidBackupConfig, &err.field, err.message)
    }
}

impl From<MountConfigError> for ApiError {
    fn from(err: MountConfigError) -> Self {
        match err {
            MountConfigError::Invalid { field, message } => {
                Self::invalid_field(ErrorCode::InvalidMountConfig, field, message)
            }
            MountConfigError::MissingCredentials => {
                Self::new(ErrorCode::MissingCredentials, err.to_string())
            }
        }
    }
}

/// Parses a mount request; type errors are INVALID_MOUNT_CONFIG too.
pub fn parse_mount_request<T: serde::de::DeserializeOwned>(
    body: &[u8],
    operation: Operation,
) -> Result<T, ApiError> {
    ApiError::parse_as(body, ErrorCode::InvalidMountConfig, operation)
}

/// Parses a backup request; type errors are INVALID_BACKUP_CONFIG, as the reference has it.
pub fn parse_backup_request<T: serde::de::DeserializeOwned>(
    body: &[u8],
    operation: Operation,
) -> Result<T, ApiError> {
    ApiError::parse_as(body, ErrorCode::InvalidBackupConfig, operation)
}

pub fn mount_error(err: MountServiceError, operation: Operation) -> ApiError {
    let message = err.to_string();
    let error = match &err {
        MountServiceError::AlreadyMounted(path)
        | MountServiceError::NotADirectory(path)
        | MountServiceError::NotMounted(path) => {
            ApiError::new(ErrorCode::InvalidMountConfig, message)
                .with_context(json!({ "field": "mountPath", "path": path }))
        }
        MountServiceError::Mount(MountError::Store(store)) => {
            ApiError::new(ErrorCode::BucketMountError, message)
                .with_context(json!({ "upstreamStatus": store.status() }))
        }
        MountServiceError::Mount(MountError::Unmount { path, .. }) => {
            ApiError::new(ErrorCode::BucketUnmountError, message)
                .with_context(json!({ "path": path }))
                .with_suggestion("Something still uses the mount; close it and unmount again")
        }
        _ => ApiError::new(ErrorCode::BucketMountError, message),
    };
    error.with_operation(operation)
}
