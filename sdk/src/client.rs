//! The connection to one daemon: base URL, token, and the request helpers every domain uses.

use reqwest::{Method, RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::SdkError;

/// A client for one fsd daemon. Cheap to clone; clones share the connection pool.
#[derive(Debug, Clone)]
pub struct Sandbox {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Sandbox {
    /// A client for the daemon at `base_url` (such as `http://127.0.0.1:3000`). No request is
    /// made until the first call.
    pub fn connect(base_url: &str, token: Option<&str>) -> Result<Self, SdkError> {
        let url = reqwest::Url::parse(base_url).map_err(|err| SdkError::InvalidUrl {
            url: base_url.to_string(),
            reason: err.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(SdkError::InvalidUrl {
                url: base_url.to_string(),
                reason: "the scheme must be http or https".into(),
            });
        }
        Ok(Self {
            http: reqwest::Client::new(),
            base: base_url.trim_end_matches('/').to_string(),
            token: token.map(str::to_string),
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub(crate) fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    pub(crate) fn request(&self, method: Method, route: &str) -> RequestBuilder {
        let builder = self.http.request(method, format!("{}{route}", self.base));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// POSTs `body` as JSON and decodes a JSON answer.
    pub(crate) async fn post_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        route: &str,
        body: &B,
    ) -> Result<T, SdkError> {
        let response = self.request(Method::POST, route).json(body).send().await?;
        decode(response).await
    }

    pub(crate) async fn get_json<T: DeserializeOwned>(&self, route: &str) -> Result<T, SdkError> {
        let response = self.request(Method::GET, route).send().await?;
        decode(response).await
    }
}

/// Decodes a success body, or turns the error envelope into [`SdkError::Api`].
pub(crate) async fn decode<T: DeserializeOwned>(response: Response) -> Result<T, SdkError> {
    let response = check(response).await?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await?;
    serde_json::from_slice(&bytes).map_err(|err| SdkError::Decode {
        status,
        message: format!(
            "{err}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
        ),
    })
}

/// Passes a success response through; reads a failure's error envelope.
pub(crate) async fn check(response: Response) -> Result<Response, SdkError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let bytes = response.bytes().await?;
    match serde_json::from_slice(&bytes) {
        Ok(body) => Err(SdkError::Api {
            status: status.as_u16(),
            body: Box::new(body),
        }),
        Err(_) => Err(SdkError::Decode {
            status: status.as_u16(),
            message: String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).into_owned(),
        }),
    }
}
