//! The pinned Node clients in `tests/clients` (the official route clients, capnweb): whether
//! they can run here, and running one of their scripts, which print one JSON line per call.

use std::path::PathBuf;
use std::time::Duration;

/// One call a script made: whether it went as expected, and what it said.
#[derive(Debug)]
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
/// it printed is printed again as it comes, for the test's log, so a script that hangs
/// past `limit` has told which calls it finished (the hung one is the next).
pub async fn run_script(
    script: &str,
    args: &[String],
    env: &[(&str, &str)],
    limit: Duration,
) -> Vec<Reported> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut child = tokio::process::Command::new("node")
        .current_dir(clients_dir())
        .envs(env.iter().copied())
        .arg("--no-warnings")
        .args(["--import", "./register.mjs", script])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut stderr = child.stderr.take().expect("stderr");
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut reported = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await.expect("node's output") {
            let result: serde_json::Value =
                serde_json::from_str(&line).expect("a JSON result line");
            let call = Reported {
                method: result["method"].as_str().unwrap_or_default().to_string(),
                ok: result["ok"] == true,
                detail: result["detail"].as_str().unwrap_or_default().to_string(),
            };
            println!("{}: {} {}", call.method, call.ok, call.detail);
            reported.push(call);
        }
        child.wait().await.expect("node exits")
    };
    let status = match tokio::time::timeout(limit, read).await {
        Ok(status) => status,
        Err(_) => panic!("{script} finished within {limit:?} (the calls it finished are above)"),
    };
    assert!(
        status.success(),
        "node {script} failed: {}",
        errors.await.unwrap_or_default()
    );
    reported
}
