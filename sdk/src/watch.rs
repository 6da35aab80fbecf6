//! Watches and change tokens.

use fsd_api::watch::{CheckChangesRequest, CheckChangesResponse, WatchEvent, WatchRequest};
use futures_util::Stream;
use reqwest::Method;

use crate::client::to_json;
use crate::{Sandbox, SdkError};

impl Sandbox {
    /// Watches a directory: `Watching` once the watches are in place, then `Event`s (and
    /// `Resync` if events were lost).
    pub async fn watch(
        &self,
        request: &WatchRequest,
    ) -> Result<impl Stream<Item = Result<WatchEvent, SdkError>> + Send + Unpin + use<>, SdkError>
    {
        self.event_stream(Method::POST, "/api/watch", Some(to_json(request)?))
            .await
    }

    /// Whether `path` changed since `since` (a `version` from an earlier answer; `None` for a
    /// baseline), with the coalesced change list when `paths` is true.
    pub async fn check_changes(
        &self,
        path: &str,
        since: Option<&str>,
        paths: bool,
    ) -> Result<CheckChangesResponse, SdkError> {
        let request = CheckChangesRequest {
            path: path.into(),
            since: since.map(str::to_string),
            paths: Some(paths),
            ..CheckChangesRequest::default()
        };
        self.post_json("/api/watch/check", &request).await
    }
}
