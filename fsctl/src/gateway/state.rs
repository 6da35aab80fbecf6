//! What the gateway remembers: per sandbox, the exposed ports with their tokens (durable
//! authorization) and the run each was exposed in (the activation). Saved to a JSON file
//! after every change, so exposures survive a gateway restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fsd_control::preview::{Activation, PortTokens};
use serde::{Deserialize, Serialize};

/// One exposed port as it is saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedPort {
    port: u16,
    token: String,
    #[serde(default)]
    name: Option<String>,
    /// The sandbox run the port was exposed in.
    runtime_id: String,
}

/// The exposures of every sandbox.
#[derive(Debug, Default)]
pub struct Exposures {
    file: Option<PathBuf>,
    sandboxes: BTreeMap<String, Sandbox>,
}

/// One sandbox's exposures.
#[derive(Debug, Default, Clone)]
pub struct Sandbox {
    pub tokens: PortTokens,
    pub activations: BTreeMap<u16, Activation>,
}

impl Exposures {
    /// The exposures saved in `file` (none if it does not exist yet).
    pub fn load(file: Option<&Path>) -> std::io::Result<Exposures> {
        let mut exposures = Exposures {
            file: file.map(Path::to_path_buf),
            ..Exposures::default()
        };
        let Some(file) = file else {
            return Ok(exposures);
        };
        let saved: BTreeMap<String, Vec<SavedPort>> = match std::fs::read(file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other)?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => return Err(error),
        };
        for (id, ports) in saved {
            let sandbox = exposures.sandboxes.entry(id).or_default();
            for saved in ports {
                let token = saved.token.clone();
                let _ = sandbox
                    .tokens
                    .expose(saved.port, Some(&token), saved.name, || [0; 12]);
                sandbox.activations.insert(
                    saved.port,
                    Activation {
                        runtime_id: saved.runtime_id,
                        token: saved.token,
                    },
                );
            }
        }
        Ok(exposures)
    }

    pub fn sandbox(&self, id: &str) -> Option<&Sandbox> {
        self.sandboxes.get(id)
    }

    pub fn sandbox_mut(&mut self, id: &str) -> &mut Sandbox {
        self.sandboxes.entry(id.to_string()).or_default()
    }

    /// Writes the exposures to the file (atomically: a temp file renamed into place).
    pub fn save(&self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let mut saved: BTreeMap<&str, Vec<SavedPort>> = BTreeMap::new();
        for (id, sandbox) in &self.sandboxes {
            let ports = sandbox
                .tokens
                .ports()
                .map(|(port, exposure)| SavedPort {
                    port,
                    token: exposure.token.clone(),
                    name: exposure.name.clone(),
                    runtime_id: sandbox
                        .activations
                        .get(&port)
                        .map(|a| a.runtime_id.clone())
                        .unwrap_or_default(),
                })
                .collect();
            saved.insert(id, ports);
        }
        let bytes = serde_json::to_vec_pretty(&saved).map_err(std::io::Error::other)?;
        let temp = file.with_extension("tmp");
        std::fs::write(&temp, bytes)?;
        std::fs::rename(&temp, file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposures_survive_a_save_and_a_load() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("exposures.json");
        let mut exposures = Exposures::load(Some(&file)).unwrap();
        let sandbox = exposures.sandbox_mut("box");
        let token = sandbox.tokens.expose(8080, None, None, || [1; 12]).unwrap();
        sandbox.activations.insert(
            8080,
            Activation {
                runtime_id: "run-1".into(),
                token: token.clone(),
            },
        );
        exposures.save().unwrap();
        let loaded = Exposures::load(Some(&file)).unwrap();
        let sandbox = loaded.sandbox("box").unwrap();
        assert!(sandbox.tokens.authorizes(8080, &token));
        assert_eq!(sandbox.activations[&8080].runtime_id, "run-1");
    }
}
