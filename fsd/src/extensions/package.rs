//! Provisioning one extension package (docs/api.md, RPC: `extensions`): the tarball checked
//! against its hash, its `package.json` read, `bun add` into a directory of its own, the
//! entry found inside the package, and a manifest written last, so a provisioned package
//! (also after a restart) is one whose manifest is there.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ExtensionError;

/// The manifest's name in a package's directory.
const MANIFEST: &str = ".sandbox-extension.json";
/// How long `bun add` may take.
const INSTALL_LIMIT: Duration = Duration::from_secs(120);
/// How long a sidecar may take to listen when neither the call nor the package says.
const DEFAULT_READINESS_MS: u64 = 10_000;

/// What a provisioned package is, as its manifest records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub package_hash: String,
    pub id: String,
    pub name: String,
    pub version: String,
    /// The program the sidecar runs, relative to the package's directory.
    pub entry: PathBuf,
    pub readiness_timeout_ms: u64,
}

/// What the object's `connect` may set.
#[derive(Debug, Default, Clone)]
pub struct ConnectOptions {
    pub tarball: Option<Vec<u8>>,
    pub bin: Option<String>,
    pub readiness_timeout_ms: Option<u64>,
    pub allow_install_scripts: bool,
}

/// Whether `hash` names a package (64 lowercase hex digits).
pub fn valid_hash(hash: &str) -> bool {
    hash.len() == 64
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The manifest of a package provisioned in `dir`, if there is one.
pub fn load(dir: &Path) -> Option<Manifest> {
    let text = std::fs::read(dir.join(MANIFEST)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Provisions `tarball` (declared as `hash`) into `dir` with `bun`.
pub async fn provision(
    dir: &Path,
    hash: &str,
    options: &ConnectOptions,
    tarball: &[u8],
    bun: &Path,
    path_env: &str,
) -> Result<Manifest, ExtensionError> {
    let computed = crate::random::hex(&Sha256::digest(tarball));
    if computed != hash {
        return Err(ExtensionError::HashMismatch {
            declared: hash.chars().take(12).collect(),
            computed: computed.chars().take(12).collect(),
        });
    }
    let package = read_package_json(tarball)?;
    let name = package
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ExtensionError::Package("package.json names no package".into()))?
        .to_string();
    let id = name.trim_start_matches('@').replace('/', "-");
    let id_ok = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !id_ok {
        return Err(ExtensionError::Package(format!(
            "the package name {name:?} is not usable as an extension id"
        )));
    }
    let version = package
        .get("version")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let declared = package.get("sandboxExtension");
    let target = bin_target(&package, &name, options.bin.as_deref(), declared)?;
    let readiness_timeout_ms = options
        .readiness_timeout_ms
        .or_else(|| {
            declared
                .and_then(|d| d.get("readinessTimeoutMs"))
                .and_then(Value::as_u64)
        })
        .unwrap_or(DEFAULT_READINESS_MS);

    std::fs::create_dir_all(dir)?;
    let _ = std::fs::remove_file(dir.join(MANIFEST));
    std::fs::write(dir.join("extension.tgz"), tarball)?;
    install(dir, &id, options.allow_install_scripts, bun, path_env).await?;

    let package_dir = dir.join("node_modules").join(&name);
    let entry = package_dir.join(&target);
    let inside = match (entry.canonicalize(), package_dir.canonicalize()) {
        (Ok(entry), Ok(package_dir)) => entry.starts_with(&package_dir) && entry.is_file(),
        _ => false,
    };
    if !inside {
        return Err(ExtensionError::Package(format!(
            "the bin {target:?} is not a file inside the package"
        )));
    }
    let manifest = Manifest {
        package_hash: hash.to_string(),
        id,
        name: name.clone(),
        version,
        entry: Path::new("node_modules").join(&name).join(&target),
        readiness_timeout_ms,
    };
    let text = serde_json::to_vec_pretty(&manifest)
        .map_err(|error| ExtensionError::Package(error.to_string()))?;
    let scratch = dir.join(format!("{MANIFEST}.tmp"));
    std::fs::write(&scratch, text)?;
    std::fs::rename(&scratch, dir.join(MANIFEST))?;
    Ok(manifest)
}

/// `package/package.json` out of the gzip tarball.
fn read_package_json(tarball: &[u8]) -> Result<Value, ExtensionError> {
    let bad = |reason: String| ExtensionError::Package(reason);
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tarball));
    let entries = archive
        .entries()
        .map_err(|error| bad(format!("not a gzip tarball: {error}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|error| bad(format!("not a gzip tarball: {error}")))?;
        let is_manifest = entry
            .path()
            .is_ok_and(|path| path == Path::new("package/package.json"));
        if !is_manifest {
            continue;
        }
        let mut text = Vec::new();
        entry
            .by_ref()
            .take(1 << 20)
            .read_to_end(&mut text)
            .map_err(|error| bad(error.to_string()))?;
        return serde_json::from_slice(&text)
            .map_err(|error| bad(format!("package.json is not JSON: {error}")));
    }
    Err(bad("the tarball has no package/package.json".into()))
}

/// The file the sidecar runs: the call's `bin` › `sandboxExtension.bin` › the package's
/// only bin (a string `bin` is named after the package).
fn bin_target(
    package: &Value,
    name: &str,
    requested: Option<&str>,
    declared: Option<&Value>,
) -> Result<String, ExtensionError> {
    let slug = name.rsplit('/').next().unwrap_or(name).to_string();
    let bins: Vec<(String, String)> = match package.get("bin") {
        Some(Value::String(target)) => vec![(slug, target.clone())],
        Some(Value::Object(map)) => map
            .iter()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
            .collect(),
        _ => Vec::new(),
    };
    let wanted = requested.map(str::to_string).or_else(|| {
        declared
            .and_then(|d| d.get("bin"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let found = match wanted {
        Some(wanted) => bins.into_iter().find(|(key, _)| *key == wanted),
        None if bins.len() == 1 => bins.into_iter().next(),
        None => None,
    };
    found.map(|(_, target)| target).ok_or_else(|| {
        ExtensionError::Package("no bin to run: name one with `bin` (one is needed)".into())
    })
}

/// `bun add ./extension.tgz` in `dir`, with nothing of the daemon's environment but `PATH`.
async fn install(
    dir: &Path,
    id: &str,
    allow_scripts: bool,
    bun: &Path,
    path_env: &str,
) -> Result<(), ExtensionError> {
    let mut command = tokio::process::Command::new(bun);
    command
        .args(["add", "./extension.tgz", "--no-summary"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", path_env)
        .env("HOME", dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    if !allow_scripts {
        command.arg("--ignore-scripts");
    }
    let failed = |reason: String| ExtensionError::Install {
        id: id.to_string(),
        reason,
    };
    let output = tokio::time::timeout(INSTALL_LIMIT, command.output())
        .await
        .map_err(|_| failed(format!("bun add took more than {INSTALL_LIMIT:?}")))?
        .map_err(|error| failed(format!("{}: {error}", bun.display())))?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        let tail: String = said.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        return Err(failed(format!(
            "bun add ended with {}: {tail}",
            output.status
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bin_comes_from_the_call_the_package_or_its_only_entry() {
        let package = json!({"bin": {"a": "a.mjs", "b": "b.mjs"}});
        assert_eq!(bin_target(&package, "p", Some("b"), None).unwrap(), "b.mjs");
        let declared = json!({"bin": "a"});
        assert_eq!(
            bin_target(&package, "p", None, Some(&declared)).unwrap(),
            "a.mjs"
        );
        assert!(
            bin_target(&package, "p", None, None).is_err(),
            "two bins, none named"
        );
        let single = json!({"bin": "server.mjs"});
        assert_eq!(
            bin_target(&single, "@scope/tool", None, None).unwrap(),
            "server.mjs"
        );
        assert!(bin_target(&single, "@scope/tool", Some("tool"), None).is_ok());
        assert!(valid_hash(&"ab".repeat(32)));
        assert!(!valid_hash(&"AB".repeat(32)) && !valid_hash("../x"));
    }
}
