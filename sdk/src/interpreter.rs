//! Code contexts (long-lived Python, JavaScript and TypeScript interpreters) and git
//! checkout.

use std::pin::Pin;

use fsd_api::git::{GitCheckoutEvent, GitCheckoutRequest, GitCheckoutResponse};
use fsd_api::interpreter::{
    CodeEvent, ContextInfo, CreateContextRequest, CreateContextResponse, DeleteContextResponse,
    ExecuteCodeRequest, ListContextsResponse,
};
use futures_util::{Stream, StreamExt};
use reqwest::Method;

use crate::{Sandbox, SdkError};

/// A stream of typed events.
pub type EventStream<T> = Pin<Box<dyn Stream<Item = Result<T, SdkError>> + Send>>;

/// What a call produced, gathered ([`Sandbox::run_code_collected`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Execution {
    pub stdout: String,
    pub stderr: String,
    /// `result` events, in order.
    pub results: Vec<CodeEvent>,
    /// The `error` event, if the call failed.
    pub error: Option<CodeEvent>,
}

impl Sandbox {
    /// Starts a context: a long-lived interpreter whose state persists between calls.
    pub async fn create_context(
        &self,
        request: &CreateContextRequest,
    ) -> Result<CreateContextResponse, SdkError> {
        self.post_json("/api/contexts", request).await
    }

    pub async fn list_contexts(&self) -> Result<Vec<ContextInfo>, SdkError> {
        let list: ListContextsResponse = self.get_json("/api/contexts").await?;
        Ok(list.contexts)
    }

    /// Ends a context and its interpreter (a call in progress ends with an error).
    pub async fn delete_context(&self, id: &str) -> Result<(), SdkError> {
        let _: DeleteContextResponse = self.delete_json(&format!("/api/contexts/{id}")).await?;
        Ok(())
    }

    /// Runs code in a context: its events as they are produced, ending with
    /// `execution_complete` or `error`.
    pub async fn run_code(
        &self,
        request: &ExecuteCodeRequest,
    ) -> Result<EventStream<CodeEvent>, SdkError> {
        let body = crate::client::to_json(request)?;
        self.event_stream(Method::POST, "/api/execute/code", Some(body))
            .await
    }

    /// [`Sandbox::run_code`], gathered.
    pub async fn run_code_collected(
        &self,
        request: &ExecuteCodeRequest,
    ) -> Result<Execution, SdkError> {
        let mut events = self.run_code(request).await?;
        let mut execution = Execution::default();
        while let Some(event) = events.next().await {
            match event? {
                CodeEvent::Stdout { text } => execution.stdout.push_str(&text),
                CodeEvent::Stderr { text } => execution.stderr.push_str(&text),
                error @ CodeEvent::Error { .. } => execution.error = Some(error),
                CodeEvent::ExecutionComplete { .. } => {}
                result @ CodeEvent::Result { .. } => execution.results.push(result),
            }
        }
        Ok(execution)
    }

    /// Clones a repository into the sandbox.
    pub async fn git_checkout(
        &self,
        request: &GitCheckoutRequest,
    ) -> Result<GitCheckoutResponse, SdkError> {
        self.post_json("/api/git/checkout", request).await
    }

    /// [`Sandbox::git_checkout`] with git's progress lines as they come, ending in
    /// `complete` or `error`.
    pub async fn git_checkout_progress(
        &self,
        request: &GitCheckoutRequest,
    ) -> Result<EventStream<GitCheckoutEvent>, SdkError> {
        if self.uses_socket() {
            // The socket transport carries JSON answers; progress needs SSE.
            let answer = self.git_checkout(request).await?;
            return Ok(Box::pin(futures_util::stream::iter([Ok(
                GitCheckoutEvent::Complete(answer),
            )])));
        }
        let response = self
            .request(Method::POST, "/api/git/checkout")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(request)
            .send()
            .await?;
        Ok(Box::pin(crate::sse::events(
            crate::client::check(response).await?,
        )))
    }
}
