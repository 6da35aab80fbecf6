//! Git errors on the wire: what a failed clone was (network, repository, branch,
//! credentials) decides the code and the suggestion.

use fsd_api::ErrorCode;
use serde_json::json;

use super::classify::Failure;
use super::service::GitError;
use crate::error::ApiError;

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
            GitError::Outside(path) => ApiError::outside_roots(message, path),
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
