//! What the gateway remembers: per sandbox, the exposed ports with their tokens (durable
//! authorization) and the run each was exposed in (the activation). Saved to a JSON file
//! after every change, so exposures survive a gateway restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fsd_control::exposures::{SandboxExposures, SavedPort};

/// The exposures of every sandbox.
#[derive(Debug, Default)]
pub struct Exposures {
    file: Option<PathBuf>,
    sandboxes: BTreeMap<String, SandboxExposures>,
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
            exposures
                .sandboxes
                .insert(id, SandboxExposures::from_saved(ports));
        }
        Ok(exposures)
    }

    pub fn sandbox(&self, id: &str) -> Option<&SandboxExposures> {
        self.sandboxes.get(id)
    }

    pub fn sandbox_mut(&mut self, id: &str) -> &mut SandboxExposures {
        self.sandboxes.entry(id.to_string()).or_default()
    }

    /// Writes the exposures to the file (atomically: a temp file renamed into place).
    pub fn save(&self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let saved: BTreeMap<&str, Vec<SavedPort>> = self
            .sandboxes
            .iter()
            .map(|(id, sandbox)| (id.as_str(), sandbox.saved()))
            .collect();
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
        let token = exposures
            .sandbox_mut("box")
            .expose(8080, None, None, "run-1", || [1; 12])
            .unwrap();
        exposures.save().unwrap();
        let loaded = Exposures::load(Some(&file)).unwrap();
        let sandbox = loaded.sandbox("box").unwrap();
        assert!(sandbox.authorizes(8080, &token));
        assert_eq!(sandbox.saved()[0].runtime_id, "run-1");
    }
}
