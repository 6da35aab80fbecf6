//! `SANDBOX_INTERCEPT_HTTPS=1`: the platform intercepts the sandbox's HTTPS egress and
//! hands over the CA that signs it, which every tool in the sandbox must then trust, as
//! the reference arranges it. The CA (at `SANDBOX_CA_CERT`, else the platform's path) is
//! waited for up to 5 s (fsd exits 1 without it), appended once to the system bundle, and
//! named by the variables Node, OpenSSL, curl, Python requests and git read; commands of
//! every session inherit them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PLATFORM_CA: &str = "/etc/cloudflare/certs/cloudflare-containers-ca.crt";
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
const WAIT: Duration = Duration::from_secs(5);

/// The variables set, for session shells to inherit; empty when interception is off.
/// Must run before any thread is started (it sets the process's environment).
pub fn trust_intercepting_ca() -> Result<Vec<String>, String> {
    let on = std::env::var("SANDBOX_INTERCEPT_HTTPS")
        .is_ok_and(|value| matches!(value.trim(), "1" | "true"));
    if !on {
        return Ok(Vec::new());
    }
    let cert =
        PathBuf::from(std::env::var("SANDBOX_CA_CERT").unwrap_or_else(|_| PLATFORM_CA.to_string()));
    // The bundle is the system's; FSD_CA_BUNDLE names another (tests use their own).
    let bundle =
        PathBuf::from(std::env::var("FSD_CA_BUNDLE").unwrap_or_else(|_| SYSTEM_BUNDLE.to_string()));
    let pem = wait_for(&cert)?;
    append_once(&bundle, &pem)
        .map_err(|error| format!("cannot add the CA to {}: {error}", bundle.display()))?;
    let cert = cert.display().to_string();
    let bundle = bundle.display().to_string();
    let set = [
        ("NODE_EXTRA_CA_CERTS", &cert),
        ("SSL_CERT_FILE", &bundle),
        ("CURL_CA_BUNDLE", &bundle),
        ("REQUESTS_CA_BUNDLE", &bundle),
        ("GIT_SSL_CAINFO", &bundle),
    ];
    for (name, value) in set {
        // SAFETY: called from main before the runtime or any other thread exists.
        unsafe { std::env::set_var(name, value) };
    }
    Ok(set.iter().map(|(name, _)| name.to_string()).collect())
}

fn wait_for(cert: &Path) -> Result<String, String> {
    let deadline = Instant::now() + WAIT;
    loop {
        match std::fs::read_to_string(cert) {
            Ok(pem) if pem.contains("-----BEGIN CERTIFICATE-----") => return Ok(pem),
            _ if Instant::now() >= deadline => {
                return Err(format!(
                    "SANDBOX_INTERCEPT_HTTPS is set but no certificate is at {} after {} s",
                    cert.display(),
                    WAIT.as_secs()
                ));
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Appends `pem` to `bundle` unless the bundle holds it already (a restart adds nothing).
fn append_once(bundle: &Path, pem: &str) -> std::io::Result<()> {
    let held = std::fs::read_to_string(bundle).unwrap_or_default();
    if held.contains(pem.trim()) {
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(bundle)?;
    if !held.is_empty() && !held.ends_with('\n') {
        file.write_all(b"\n")?;
    }
    file.write_all(pem.trim().as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}
