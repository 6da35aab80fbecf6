//! Search: file names by glob and contents by regex or literal, as `rg` finds them.

use fsd_api::search::{
    ReplaceRequest, ReplaceResponse, SearchEvent, SearchRequest, SearchResponse,
};
use futures_util::Stream;
use reqwest::Method;

use crate::client::to_json;
use crate::{Sandbox, SdkError};

impl Sandbox {
    /// Everything `request` finds, in one answer sorted by path and line (bounded by its
    /// `maxResults`, `maxLineBytes` and `timeoutMs`; `truncated` says when it stopped).
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResponse, SdkError> {
        self.post_json("/api/search", request).await
    }

    /// Replaces what `request.pattern` matches in the files the same search finds, each
    /// rewritten atomically; with `dryRun`, changes nothing and answers each file's diff.
    pub async fn replace(&self, request: &ReplaceRequest) -> Result<ReplaceResponse, SdkError> {
        self.post_json("/api/replace", request).await
    }

    /// What `request` finds, as it is found, then `Complete`.
    pub async fn search_stream(
        &self,
        request: &SearchRequest,
    ) -> Result<impl Stream<Item = Result<SearchEvent, SdkError>> + Send + Unpin + use<>, SdkError>
    {
        self.event_stream(Method::POST, "/api/search/stream", Some(to_json(request)?))
            .await
    }
}
