//! fsd as a container's entry point: the image's command run beside the API (`fsd serve --
//! CMD`), its failure as the exit code, SIGTERM ending both, and, as PID 1 of a PID
//! namespace (as in a container), orphans reaped and signals forwarded.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use fsd_tests::{available_or_skip, free_port, host_alive, is_root};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A started fsd (or the `unshare` holding it), killed if the test ends first.
pub(crate) struct Started(pub(crate) Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `fsd serve` on `port` over `dir`'s workspace and state, then `-- command…`; with
/// `as_pid_1`, inside a new PID namespace (`unshare --pid --fork`, which takes the
/// namespace down with it when killed), where it is PID 1.
pub(crate) fn serve(dir: &Path, port: u16, command: &[&str], as_pid_1: bool) -> Started {
    let fsd = fsd_tests::binary("fsd");
    let mut argv: Vec<String> = Vec::new();
    if as_pid_1 {
        argv.extend(["--pid", "--fork", "--mount-proc", "--kill-child"].map(String::from));
        argv.push(fsd.display().to_string());
    }
    argv.extend(
        [
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--log-level",
            "warn",
            "--workspace",
            &dir.join("w").display().to_string(),
            "--state-dir",
            &dir.join("s").display().to_string(),
            "--",
        ]
        .map(String::from),
    );
    argv.extend(command.iter().map(|s| s.to_string()));
    let program = if as_pid_1 {
        "unshare".into()
    } else {
        fsd.display().to_string()
    };
    let child = Command::new(program)
        .args(argv)
        .env_remove("FSD_TOKEN")
        .env("FSD_INTERPRETER_POOL", "0")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Started(child)
}

/// Waits (10 s at most) for `started` to exit.
pub(crate) fn exit_of(started: &mut Started) -> ExitStatus {
    let child = &mut started.0;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "fsd did not exit within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (10 s at most) for `path` to hold a pid, and returns it.
fn pid_in(path: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never held a pid",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Host pids of the children of `parent`, with their state letter and name.
pub(crate) fn children(parent: i32) -> Vec<(i32, char, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let mut rest = stat[close + 1..].split_whitespace();
        let state = rest.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if rest.next().and_then(|p| p.parse().ok()) == Some(parent) {
            found.push((pid, state, name));
        }
    }
    found
}

#[test]
fn the_image_command_runs_once_the_api_listens_and_its_failure_ends_fsd() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // The command checks for itself that the API listens, then fails with 3.
    let script = format!("echo > /dev/tcp/127.0.0.1/{port} && pwd > api-was-up; sleep 0.2; exit 3");
    let mut fsd = serve(dir.path(), port, &["bash", "-c", &script], false);
    assert_eq!(exit_of(&mut fsd).code(), Some(3));
    let workspace = std::fs::canonicalize(dir.path().join("w")).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("w/api-was-up"))
            .unwrap()
            .trim(),
        workspace.display().to_string(),
        "the command runs in the workspace, after the API listens"
    );
    // A command that ends on a signal: 128 + N.
    let mut fsd = serve(dir.path(), free_port(), &["sh", "-c", "kill -9 $$"], false);
    assert_eq!(exit_of(&mut fsd).code(), Some(137));
}

#[test]
fn a_command_that_exits_0_leaves_fsd_serving_and_sigterm_ends_everything() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut fsd = serve(dir.path(), port, &["true"], false);
    // Listening first (a loaded machine may take a while), then still serving once the
    // command has surely exited.
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            fsd.0.try_wait().unwrap().is_none(),
            "fsd ended before it listened"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "fsd never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        fsd.0.try_wait().unwrap().is_none(),
        "fsd ended with its command"
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    kill(Pid::from_raw(fsd.0.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(exit_of(&mut fsd).code(), Some(0));

    // A command still running at SIGTERM is ended with it (its whole group).
    let port = free_port();
    let script = "sleep 1000 & echo $! > child.pid; echo $$ > command.pid; wait";
    let mut fsd = serve(dir.path(), port, &["bash", "-c", script], false);
    let command = pid_in(&dir.path().join("w/command.pid"));
    let child = pid_in(&dir.path().join("w/child.pid"));
    kill(Pid::from_raw(fsd.0.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(exit_of(&mut fsd).code(), Some(0));
    assert!(
        !host_alive(command) && !host_alive(child),
        "the command outlived fsd"
    );
}

#[test]
fn as_pid_1_it_reaps_orphans_and_forwards_signals() {
    if !available_or_skip(
        is_root(),
        "as_pid_1_it_reaps_orphans_and_forwards_signals",
        "root for a PID namespace",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // The inner shell exits at once, so its `sleep 1` is orphaned to PID 1.
    let script = "sh -c 'sleep 1 &'; echo $$ > command.pid; exec sleep 1000";
    let mut unshare = serve(dir.path(), port, &["bash", "-c", script], true);
    pid_in(&dir.path().join("w/command.pid"));
    // PID 1 of the namespace: unshare's only child.
    let deadline = Instant::now() + Duration::from_secs(10);
    let init = loop {
        if let Some((pid, _, _)) = children(unshare.0.id() as i32).first() {
            break *pid;
        }
        assert!(Instant::now() < deadline, "unshare started nothing");
        std::thread::sleep(Duration::from_millis(20));
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let orphan = loop {
        let adopted = children(init)
            .into_iter()
            .find(|(_, _, name)| name == "sleep");
        if let Some((pid, _, _)) = adopted {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "no orphan was adopted by PID 1: {:?}",
            children(init)
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    // Once it has exited, PID 1 has reaped it: no zombie left.
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{orphan}")).exists() {
        assert!(
            Instant::now() < deadline,
            "the orphan stayed a zombie: {:?}",
            children(init)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGTERM to PID 1 reaches the daemon, which ends the command and exits 0.
    kill(Pid::from_raw(init), Signal::SIGTERM).unwrap();
    assert_eq!(exit_of(&mut unshare).code(), Some(0));

    // The image's command's exit code is the container's.
    let mut unshare = serve(dir.path(), free_port(), &["sh", "-c", "exit 7"], true);
    assert_eq!(exit_of(&mut unshare).code(), Some(7));
}

#[tokio::test]
async fn an_intercepting_ca_is_trusted_by_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let bundle = dir.path().join("bundle.pem");
    let ca_pem = "-----BEGIN CERTIFICATE-----\nMIIBinterceptor\n-----END CERTIFICATE-----\n";
    let system_pem = "-----BEGIN CERTIFICATE-----\nMIIBsystem\n-----END CERTIFICATE-----";
    std::fs::write(&ca, ca_pem).unwrap();
    std::fs::write(&bundle, system_pem).unwrap();
    let mut daemon = fsd_tests::Daemon::start_with(fsd_tests::Options {
        env: vec![
            ("SANDBOX_INTERCEPT_HTTPS".into(), "1".into()),
            ("SANDBOX_CA_CERT".into(), ca.display().to_string()),
            ("FSD_CA_BUNDLE".into(), bundle.display().to_string()),
        ],
        ..fsd_tests::Options::default()
    });
    let names =
        "$NODE_EXTRA_CA_CERTS $SSL_CERT_FILE $CURL_CA_BUNDLE $REQUESTS_CA_BUNDLE $GIT_SSL_CAINFO";
    let (status, ran) = daemon
        .post(
            "/api/execute",
            serde_json::json!({"command": format!("echo {names}")}),
        )
        .await;
    assert_eq!(status, 200, "{ran}");
    let (ca, bundle_name) = (ca.display().to_string(), bundle.display().to_string());
    assert_eq!(
        ran["stdout"].as_str().unwrap().trim(),
        format!("{ca} {bundle_name} {bundle_name} {bundle_name} {bundle_name}")
    );
    let expected = format!("{system_pem}\n{ca_pem}");
    assert_eq!(std::fs::read_to_string(&bundle).unwrap(), expected);
    // A restart adds it no second time.
    daemon.restart();
    assert_eq!(std::fs::read_to_string(&bundle).unwrap(), expected);
}

#[test]
fn an_intercepting_ca_that_never_comes_stops_fsd() {
    let dir = tempfile::tempdir().unwrap();
    let mut fsd = Started(
        Command::new(fsd_tests::binary("fsd"))
            .args(["serve", "--listen", "127.0.0.1:0", "--workspace"])
            .arg(dir.path().join("w"))
            .arg("--state-dir")
            .arg(dir.path().join("s"))
            .env("SANDBOX_INTERCEPT_HTTPS", "1")
            .env("SANDBOX_CA_CERT", dir.path().join("never.pem"))
            .env("FSD_CA_BUNDLE", dir.path().join("bundle.pem"))
            .env_remove("FSD_TOKEN")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert_eq!(exit_of(&mut fsd).code(), Some(1));
    assert!(!dir.path().join("bundle.pem").exists());
}
