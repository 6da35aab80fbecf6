//! The pinned Node clients in `tests/clients` (the official route clients, capnweb): whether
//! they can run here, and running one of their scripts, which print one JSON line per call.

use std::path::PathBuf;
use std::time::Duration;

/// One call a script made: whether it went as expected, and what it said.
pub struct Reported {
    pub method: String,
    pub ok: bool,
    pub detail: String,
}

/// Where the clients are installed (`npm ci --prefix tests/clients`).
pub fn clients_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("clients")
}

/// Whether `node` runs and `package` is installed among the clients.
pub fn installed(package: &str) -> bool {
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    node && clients_dir().join("node_modules").join(package).is_dir()
}

/// Runs `script` with `args` (and `env`) within `limit`; panics if node fails. Each line
/// it printed is printed again, for the test's log.
pub async fn run_script(
    script: &str,
    args: &[String],
    env: &[(&str, &str)],
    limit: Duration,
) -> Vec<Reported> {
    let mut command = tokio::process::Command::new("node");
    command
        .current_dir(clients_dir())
        .envs(env.iter().copied())
        .arg("--no-warnings")
        .args(["--import", "./register.mjs", script])
        .args(args)
        .kill_on_drop(true);
    let output = tokio::time::timeout(limit, command.output())
        .await
        .unwrap_or_else(|_| panic!("{script} finished within {limit:?}"))
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reported: Vec<Reported> = stdout
        .lines()
        .map(|line| {
            let result: serde_json::Value = serde_json::from_str(line).expect("a JSON result line");
            let reported = Reported {
                method: result["method"].as_str().unwrap_or_default().to_string(),
                ok: result["ok"] == true,
                detail: result["detail"].as_str().unwrap_or_default().to_string(),
            };
            println!("{}: {} {}", reported.method, reported.ok, reported.detail);
            reported
        })
        .collect();
    assert!(
        output.status.success(),
        "node {script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    reported
}
