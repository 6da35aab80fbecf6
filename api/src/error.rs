//! Error codes, their HTTP statuses, and the error envelope every failed request returns.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

macro_rules! error_codes {
    ($($variant:ident = $wire:literal => $status:literal,)*) => {
        /// A wire error code. Unknown codes from a newer server survive as [`ErrorCode::Other`].
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($variant,)*
            /// A code this version does not know; carried verbatim.
            Other(String),
        }

        impl ErrorCode {
            /// The code as it appears on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $wire,)*
                    Self::Other(code) => code,
                }
            }

            /// The HTTP status the code is sent with; unknown codes are 500, as in the reference.
            pub fn http_status(&self) -> u16 {
                match self {
                    $(Self::$variant => $status,)*
                    Self::Other(_) => 500,
                }
            }

            /// Parses a wire code; never fails.
            pub fn from_wire(code: &str) -> Self {
                match code {
                    $($wire => Self::$variant,)*
                    other => Self::Other(other.to_string()),
                }
            }
        }
    };
}

error_codes! {
    IsDirectory = "IS_DIRECTORY" => 400,
    NotDirectory = "NOT_DIRECTORY" => 400,
    InvalidCommand = "INVALID_COMMAND" => 400,
    InvalidPortNumber = "INVALID_PORT_NUMBER" => 400,
    InvalidPort = "INVALID_PORT" => 400,
    InvalidGitUrl = "INVALID_GIT_URL" => 400,
    CustomDomainRequired = "CUSTOM_DOMAIN_REQUIRED" => 400,
    InvalidJsonResponse = "INVALID_JSON_RESPONSE" => 400,
    NameTooLong = "NAME_TOO_LONG" => 400,
    ValidationFailed = "VALIDATION_FAILED" => 400,
    MissingCredentials = "MISSING_CREDENTIALS" => 400,
    InvalidMountConfig = "INVALID_MOUNT_CONFIG" => 400,
    BackupExpired = "BACKUP_EXPIRED" => 400,
    InvalidBackupConfig = "INVALID_BACKUP_CONFIG" => 400,
    Unauthorized = "UNAUTHORIZED" => 401,
    GitAuthFailed = "GIT_AUTH_FAILED" => 401,
    PermissionDenied = "PERMISSION_DENIED" => 403,
    CommandPermissionDenied = "COMMAND_PERMISSION_DENIED" => 403,
    ProcessPermissionDenied = "PROCESS_PERMISSION_DENIED" => 403,
    ReadOnly = "READ_ONLY" => 403,
    FileNotFound = "FILE_NOT_FOUND" => 404,
    CommandNotFound = "COMMAND_NOT_FOUND" => 404,
    ProcessNotFound = "PROCESS_NOT_FOUND" => 404,
    PortNotExposed = "PORT_NOT_EXPOSED" => 404,
    GitRepositoryNotFound = "GIT_REPOSITORY_NOT_FOUND" => 404,
    GitBranchNotFound = "GIT_BRANCH_NOT_FOUND" => 404,
    ContextNotFound = "CONTEXT_NOT_FOUND" => 404,
    WatchNotFound = "WATCH_NOT_FOUND" => 404,
    BackupNotFound = "BACKUP_NOT_FOUND" => 404,
    // fsd's own: no branch of a fork at the path given.
    BranchNotFound = "BRANCH_NOT_FOUND" => 404,
    // fsd's own: a FIFO, socket or block device where the route needs a regular file or
    // something it writes into (`context.fileType`); a symlink loop; a missing device (ENXIO,
    // ENODEV); a FIFO without a reader; a device or FIFO that moved no data for 10 s.
    UnsupportedFileType = "UNSUPPORTED_FILE_TYPE" => 400,
    SymlinkLoop = "SYMLINK_LOOP" => 400,
    NoSuchDevice = "NO_SUCH_DEVICE" => 400,
    ProcessReadyTimeout = "PROCESS_READY_TIMEOUT" => 408,
    NoReader = "NO_READER" => 409,
    FileBlocked = "FILE_BLOCKED" => 409,
    FileExists = "FILE_EXISTS" => 409,
    PortAlreadyExposed = "PORT_ALREADY_EXPOSED" => 409,
    PortInUse = "PORT_IN_USE" => 409,
    ResourceBusy = "RESOURCE_BUSY" => 409,
    SyncHalted = "SYNC_HALTED" => 409,
    SessionAlreadyExists = "SESSION_ALREADY_EXISTS" => 409,
    SessionNotFound = "SESSION_NOT_FOUND" => 404,
    OperationInterrupted = "OPERATION_INTERRUPTED" => 409,
    TunnelRunConflict = "TUNNEL_RUN_CONFLICT" => 409,
    // fsd's own: a delete of a snapshot others are built on (`context.dependents`).
    BackupHasDependents = "BACKUP_HAS_DEPENDENTS" => 409,
    // fsd's own, for a process's stdin: it has no pipe, it was closed, the process has
    // exited, the pipe stayed full for the write's wait.
    StdinNotPiped = "STDIN_NOT_PIPED" => 409,
    StdinClosed = "STDIN_CLOSED" => 409,
    ProcessExited = "PROCESS_EXITED" => 409,
    StdinFull = "STDIN_FULL" => 409,
    SessionDestroyed = "SESSION_DESTROYED" => 410,
    SessionTerminated = "SESSION_TERMINATED" => 410,
    FileTooLarge = "FILE_TOO_LARGE" => 413,
    PythonNotAvailable = "PYTHON_NOT_AVAILABLE" => 501,
    JavascriptNotAvailable = "JAVASCRIPT_NOT_AVAILABLE" => 501,
    CloudflaredNotFound = "CLOUDFLARED_NOT_FOUND" => 501,
    TunnelStartError = "TUNNEL_START_ERROR" => 502,
    ServiceNotResponding = "SERVICE_NOT_RESPONDING" => 502,
    GitNetworkError = "GIT_NETWORK_ERROR" => 502,
    InterpreterNotReady = "INTERPRETER_NOT_READY" => 503,
    OpencodeStartupFailed = "OPENCODE_STARTUP_FAILED" => 503,
    RpcTransportError = "RPC_TRANSPORT_ERROR" => 503,
    ContainerUnavailable = "CONTAINER_UNAVAILABLE" => 503,
    ProcessExitedBeforeReady = "PROCESS_EXITED_BEFORE_READY" => 500,
    NoSpace = "NO_SPACE" => 500,
    TooManyFiles = "TOO_MANY_FILES" => 500,
    TooManyLinks = "TOO_MANY_LINKS" => 500,
    FilesystemError = "FILESYSTEM_ERROR" => 500,
    CommandExecutionError = "COMMAND_EXECUTION_ERROR" => 500,
    StreamStartError = "STREAM_START_ERROR" => 500,
    ProcessError = "PROCESS_ERROR" => 500,
    PortOperationError = "PORT_OPERATION_ERROR" => 500,
    GitCloneFailed = "GIT_CLONE_FAILED" => 500,
    GitCheckoutFailed = "GIT_CHECKOUT_FAILED" => 500,
    GitOperationFailed = "GIT_OPERATION_FAILED" => 500,
    CodeExecutionError = "CODE_EXECUTION_ERROR" => 500,
    BucketMountError = "BUCKET_MOUNT_ERROR" => 500,
    BucketUnmountError = "BUCKET_UNMOUNT_ERROR" => 500,
    S3fsMountError = "S3FS_MOUNT_ERROR" => 500,
    WatchStartError = "WATCH_START_ERROR" => 500,
    WatchStopError = "WATCH_STOP_ERROR" => 500,
    UnknownError = "UNKNOWN_ERROR" => 500,
    InternalError = "INTERNAL_ERROR" => 500,
    BackupCreateFailed = "BACKUP_CREATE_FAILED" => 500,
    BackupRestoreFailed = "BACKUP_RESTORE_FAILED" => 500,
    // fsd's own: a fork or a branch's discard failed on the machine.
    ForkFailed = "FORK_FAILED" => 500,
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        Ok(Self::from_wire(&code))
    }
}

/// The operation a failed request was performing, as the reference names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operation {
    #[serde(rename = "file.read")]
    FileRead,
    #[serde(rename = "file.write")]
    FileWrite,
    #[serde(rename = "file.delete")]
    FileDelete,
    #[serde(rename = "file.move")]
    FileMove,
    #[serde(rename = "file.rename")]
    FileRename,
    #[serde(rename = "file.stat")]
    FileStat,
    #[serde(rename = "directory.create")]
    DirectoryCreate,
    #[serde(rename = "directory.list")]
    DirectoryList,
    #[serde(rename = "backup.create")]
    BackupCreate,
    #[serde(rename = "backup.restore")]
    BackupRestore,
    /// fsd's own.
    #[serde(rename = "workspace.fork")]
    WorkspaceFork,
    /// fsd's own.
    #[serde(rename = "workspace.merge")]
    WorkspaceMerge,
    #[serde(rename = "bucket.mount")]
    BucketMount,
    #[serde(rename = "bucket.unmount")]
    BucketUnmount,
}

/// The error envelope: the body of every non-2xx JSON response.
///
/// There is no `success: false` field; the reference's clients key on `code` and `httpStatus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// Details that depend on the code; `{validationErrors: [...]}` for validation failures.
    #[serde(default)]
    pub context: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
    pub http_status: u16,
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
}

/// One entry of `context.validationErrors`: which field was wrong and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationIssue {
    pub field: String,
    pub message: String,
    pub code: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_map_to_reference_statuses() {
        for (wire, status) in [
            ("FILE_NOT_FOUND", 404),
            ("VALIDATION_FAILED", 400),
            ("FILE_TOO_LARGE", 413),
            ("SESSION_TERMINATED", 410),
            ("PERMISSION_DENIED", 403),
            ("FILESYSTEM_ERROR", 500),
        ] {
            let code = ErrorCode::from_wire(wire);
            assert_eq!(code.as_str(), wire);
            assert_eq!(code.http_status(), status);
        }
    }

    #[test]
    fn unknown_codes_are_kept_and_are_500() {
        let code: ErrorCode = serde_json::from_str("\"TUNNEL_NOT_FOUND\"").unwrap();
        assert_eq!(code, ErrorCode::Other("TUNNEL_NOT_FOUND".into()));
        assert_eq!(code.http_status(), 500);
        assert_eq!(
            serde_json::to_string(&code).unwrap(),
            "\"TUNNEL_NOT_FOUND\""
        );
    }

    #[test]
    fn envelope_has_reference_field_names() {
        let body = ErrorBody {
            code: ErrorCode::FileNotFound,
            message: "File not found: /x".into(),
            context: serde_json::json!({}),
            operation: Some(Operation::FileRead),
            http_status: 404,
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            suggestion: None,
        };
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["httpStatus"], 404);
        assert_eq!(json["operation"], "file.read");
        assert!(json.get("success").is_none());
        assert!(json.get("suggestion").is_none());
    }
}
