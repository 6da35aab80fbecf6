//! The preview gateway (`fsctl gateway`) of the trusted side: exposing sandbox ports at
//! preview URLs, and reaching a fleet's daemons through it ([`Gateway::sandbox`]). A
//! separate client from [`crate::Sandbox`]: the gateway is not the daemon.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::SdkError;

/// A client for one gateway.
#[derive(Debug, Clone)]
pub struct Gateway {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// An exposed port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExposedPort {
    pub url: String,
    pub port: u16,
    /// The port's token (given only when it is exposed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// `active`, or `stale` when the sandbox restarted since it was exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl Gateway {
    /// A client for the gateway at `base_url`; `token` is the trusted side's, if the
    /// gateway was started with one.
    pub fn connect(base_url: &str, token: Option<&str>) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: base_url.trim_end_matches('/').to_string(),
            token: token.map(str::to_string),
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Exposes `port` of sandbox `sandbox_id` (with `token`, or the port's stored or a
    /// new one) and returns its preview URL.
    pub async fn expose_port(
        &self,
        sandbox_id: &str,
        port: u16,
        token: Option<&str>,
    ) -> Result<ExposedPort, SdkError> {
        let body = json!({"sandboxId": sandbox_id, "port": port, "token": token});
        let response = self
            .request(reqwest::Method::POST, "/expose")
            .json(&body)
            .send()
            .await?;
        crate::client::decode(response).await
    }

    /// Ends a port's exposure (fine when it was not exposed).
    pub async fn unexpose_port(&self, sandbox_id: &str, port: u16) -> Result<(), SdkError> {
        let body = json!({"sandboxId": sandbox_id, "port": port});
        let response = self
            .request(reqwest::Method::POST, "/unexpose")
            .json(&body)
            .send()
            .await?;
        let _: serde_json::Value = crate::client::decode(response).await?;
        Ok(())
    }

    /// The sandbox's exposed ports, with whether each is active.
    pub async fn exposed_ports(&self, sandbox_id: &str) -> Result<Vec<ExposedPort>, SdkError> {
        #[derive(Deserialize)]
        struct Listed {
            ports: Vec<ExposedPort>,
        }
        let response = self
            .request(reqwest::Method::GET, "/exposed")
            .query(&[("sandboxId", sandbox_id)])
            .send()
            .await?;
        let listed: Listed = crate::client::decode(response).await?;
        Ok(listed.ports)
    }

    /// A client for sandbox `sandbox_id`'s route API through the gateway
    /// (`/sandboxes/<id>/…`, sent on to its daemon with the gateway's token), so one
    /// gateway and one token reach a whole fleet.
    pub fn sandbox(&self, sandbox_id: &str) -> Result<crate::Sandbox, SdkError> {
        let base = format!(
            "{}/sandboxes/{}",
            self.base,
            sandbox_id.to_ascii_lowercase()
        );
        crate::Sandbox::connect(&base, self.token.as_deref())
    }
}
