//! One sandbox's exposed ports as the gateway and the Worker's Durable Object keep them:
//! each port's token (the lasting authorization) and the sandbox run it was exposed in
//! (the activation), saved as one list (the gateway in its state file, the object in its
//! storage), and the decisions made from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::preview::{self, Activation, Admission, PortTokens, PreviewError, PreviewTarget};

/// One exposed port as it is saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedPort {
    pub port: u16,
    pub token: String,
    #[serde(default)]
    pub name: Option<String>,
    /// The sandbox run the port was exposed in.
    pub runtime_id: String,
    /// The host its preview URL was made for, where the keeper does not have one of its own
    /// (the Worker's object: each expose names it), so a listing can rebuild the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

/// A sandbox's exposed ports with their tokens and activations.
#[derive(Debug, Clone, Default)]
pub struct SandboxExposures {
    tokens: PortTokens,
    activations: BTreeMap<u16, Activation>,
    hostnames: BTreeMap<u16, String>,
}

impl SandboxExposures {
    pub fn from_saved(saved: Vec<SavedPort>) -> SandboxExposures {
        let mut exposures = SandboxExposures::default();
        for port in saved {
            let token = port.token.clone();
            let _ = exposures
                .tokens
                .expose(port.port, Some(&token), port.name, || [0; 12]);
            if let Some(hostname) = port.hostname {
                exposures.hostnames.insert(port.port, hostname);
            }
            exposures.activations.insert(
                port.port,
                Activation {
                    runtime_id: port.runtime_id,
                    token: port.token,
                },
            );
        }
        exposures
    }

    pub fn saved(&self) -> Vec<SavedPort> {
        self.tokens
            .ports()
            .map(|(port, exposure)| SavedPort {
                port,
                token: exposure.token.clone(),
                name: exposure.name.clone(),
                runtime_id: self
                    .activations
                    .get(&port)
                    .map(|a| a.runtime_id.clone())
                    .unwrap_or_default(),
                hostname: self.hostnames.get(&port).cloned(),
            })
            .collect()
    }

    /// Exposes `port` (already validated) in sandbox run `runtime_id` and returns its token,
    /// as [`PortTokens::expose`] chooses it.
    pub fn expose(
        &mut self,
        port: u16,
        token: Option<&str>,
        name: Option<String>,
        runtime_id: &str,
        random: impl FnOnce() -> [u8; 12],
    ) -> Result<String, PreviewError> {
        let token = self.tokens.expose(port, token, name, random)?;
        self.activations.insert(
            port,
            Activation {
                runtime_id: runtime_id.to_string(),
                token: token.clone(),
            },
        );
        Ok(token)
    }

    pub fn unexpose(&mut self, port: u16) {
        self.tokens.unexpose(port);
        self.activations.remove(&port);
        self.hostnames.remove(&port);
    }

    /// Keeps the host `port`'s preview URL was made for (see [`SavedPort::hostname`]).
    pub fn remember_hostname(&mut self, port: u16, hostname: &str) {
        self.hostnames.insert(port, hostname.to_string());
    }

    /// The host `port`'s preview URL was made for, if it was kept.
    pub fn hostname(&self, port: u16) -> Option<&str> {
        self.hostnames.get(&port).map(String::as_str)
    }

    /// Whether `token` opens `port`; checked before anything is asked of the sandbox.
    pub fn authorizes(&self, port: u16, token: &str) -> bool {
        self.tokens.authorizes(port, token)
    }

    /// The decision for `target` while the sandbox's run is `runtime` (`None`: not running).
    pub fn admit(&self, target: &PreviewTarget, runtime: Option<&str>) -> Admission {
        preview::admit(
            target,
            &self.tokens,
            self.activations.get(&target.port),
            runtime,
        )
    }

    /// Each exposed port with its token and whether it is active in run `runtime`.
    pub fn ports<'a>(
        &'a self,
        runtime: Option<&'a str>,
    ) -> impl Iterator<Item = (u16, &'a str, bool)> + 'a {
        self.tokens.ports().map(move |(port, exposure)| {
            let active = self.activations.get(&port).is_some_and(|a| {
                Some(a.runtime_id.as_str()) == runtime && a.token == exposure.token
            });
            (port, exposure.token.as_str(), active)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposures_round_trip_and_turn_stale_in_another_run() {
        let mut exposures = SandboxExposures::default();
        let token = exposures
            .expose(8080, None, Some("web".into()), "run-1", || [1; 12])
            .unwrap();
        exposures.remember_hostname(8080, "preview.example.com");
        let loaded = SandboxExposures::from_saved(exposures.saved());
        assert_eq!(loaded.saved(), exposures.saved());
        assert_eq!(loaded.hostname(8080), Some("preview.example.com"));
        let target = PreviewTarget {
            port: 8080,
            sandbox_id: "box".into(),
            token: token.clone(),
        };
        assert_eq!(loaded.admit(&target, Some("run-1")), Admission::Forward);
        assert_eq!(loaded.admit(&target, Some("run-2")), Admission::Stale);
        assert_eq!(loaded.admit(&target, None), Admission::Stale);
        let listed: Vec<_> = loaded.ports(Some("run-2")).collect();
        assert_eq!(listed, [(8080, token.as_str(), false)]);
        let mut loaded = loaded;
        loaded.unexpose(8080);
        assert!(!loaded.authorizes(8080, &token));
        assert_eq!(loaded.hostname(8080), None);
        assert!(loaded.saved().is_empty());
    }
}
