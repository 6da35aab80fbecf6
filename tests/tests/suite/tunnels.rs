//! Tunnel supervision against real processes: a stand-in for cloudflared (which cannot be
//! installed here; `cloudflared-stand-in` behaves as it does on the wire fsd reads: its
//! arguments, its log lines, its metrics `/ready`, its end on SIGTERM).

use std::time::Duration;

use fsd_tunnels::{Config, Mode, RunSpec, Runs, TunnelError};

/// Tunnel runs whose cloudflared is the stand-in, told how to behave.
fn runs(behaviour: &str) -> std::sync::Arc<Runs> {
    Runs::new(config(behaviour, &[]))
}

fn config(behaviour: &str, more: &[(&str, &str)]) -> Config {
    let mut env = vec![("FSD_STAND_IN".to_string(), behaviour.to_string())];
    env.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Config {
        binary: fsd_tests::binary("cloudflared-stand-in"),
        start_timeout: Duration::from_secs(10),
        stop_grace: Duration::from_millis(500),
        env,
    }
}

fn quick(tunnel: &str, run: &str, port: u16) -> RunSpec {
    RunSpec {
        tunnel_id: tunnel.into(),
        run_id: run.into(),
        port,
        mode: Mode::Quick,
        ready_timeout: None,
        stop_grace: None,
    }
}

#[tokio::test]
async fn tunnel_runs_start_share_conflict_stop_and_notice_exits() {
    let runs = self::runs("ok");
    let mut exits = runs.exits();

    // A quick tunnel: ready, with its URL.
    let (info, started) = runs.ensure(quick("quick-a", "run-a", 8080)).await.unwrap();
    assert!(started);
    let url = info.url.clone().unwrap();
    assert!(
        url.starts_with("https://") && url.ends_with(".trycloudflare.com"),
        "{url}"
    );
    assert!(fsd_tests::host_alive(info.pid));

    // The same run again shares it; a conflicting one is refused.
    let (again, started) = runs.ensure(quick("quick-a", "run-a", 8080)).await.unwrap();
    assert!(!started);
    assert_eq!(again, info);
    // The timeouts are part of a run's identity: the defaults named are the same run.
    let named_defaults = RunSpec {
        ready_timeout: Some(Duration::from_secs(10)),
        stop_grace: Some(Duration::from_millis(500)),
        ..quick("quick-a", "run-a", 8080)
    };
    let (again, started) = runs.ensure(named_defaults).await.unwrap();
    assert!(!started);
    assert_eq!(again, info);
    let conflicts = [
        (
            RunSpec {
                ready_timeout: Some(Duration::from_secs(5)),
                ..quick("quick-a", "run-a", 8080)
            },
            "Run run-a already active with different params",
        ),
        (
            RunSpec {
                stop_grace: Some(Duration::from_secs(1)),
                ..quick("quick-a", "run-a", 8080)
            },
            "Run run-a already active with different params",
        ),
        (
            quick("quick-a", "run-a", 9090),
            "Run run-a already active with different params",
        ),
        (
            quick("quick-b", "run-b", 8080),
            "Port 8080 already active under run run-a",
        ),
        (
            quick("quick-a", "run-c", 9091),
            "Tunnel quick-a already active under run run-a",
        ),
    ];
    for (spec, message) in conflicts {
        assert_eq!(
            runs.ensure(spec).await.unwrap_err(),
            TunnelError::Conflict(message.into())
        );
    }
    assert_eq!(runs.list(), std::slice::from_ref(&info));

    // Stopping ends the process; stopping again finds nothing.
    assert!(runs.stop("quick-a", "run-a").await);
    assert!(!fsd_tests::host_alive(info.pid));
    assert!(!runs.stop("quick-a", "run-a").await);
    assert!(runs.list().is_empty());
    let exit = tokio::time::timeout(Duration::from_secs(5), exits.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit.run_id, "run-a");

    // A named tunnel: its token goes to cloudflared and nowhere else.
    let args_file = tempfile::NamedTempFile::new().unwrap();
    let args_path = args_file.path().display().to_string();
    let recording = Runs::new(config("ok", &[("FSD_STAND_IN_ARGS", &args_path)]));
    let mut named_exits = recording.exits();
    let named = RunSpec {
        tunnel_id: "uuid-1".into(),
        run_id: "run-n".into(),
        port: 5173,
        mode: Mode::Named {
            token: "eyJsecret-token".into(),
        },
        ready_timeout: None,
        stop_grace: None,
    };
    let (info, _) = recording.ensure(named.clone()).await.unwrap();
    assert_eq!(info.url, None);
    let args = std::fs::read_to_string(args_file.path()).unwrap();
    assert!(
        args.contains("run\n--token\neyJsecret-token\n--url\nhttp://localhost:5173"),
        "{args}"
    );
    assert!(!format!("{info:?} {named:?}").contains("secret-token"));

    // A crash of cloudflared is noticed: the run goes and its exit is announced.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(info.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(5), named_exits.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((exit.run_id.as_str(), exit.exit_code), ("run-n", None));
    assert!(recording.list().is_empty());

    // One that dies on its own a moment after it is ready: exit code 3.
    let dying = self::runs("die");
    let mut dying_exits = dying.exits();
    dying.ensure(quick("quick-d", "run-d", 7000)).await.unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(5), dying_exits.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((exit.run_id.as_str(), exit.exit_code), ("run-d", Some(3)));

    // Failing at once, never ready (the start timeout), and a missing binary.
    let failing = self::runs("fail");
    let failed = failing
        .ensure(quick("quick-f", "run-f", 7001))
        .await
        .unwrap_err();
    assert_eq!(
        failed,
        TunnelError::Start("cloudflared exited before becoming ready (code=1)".into())
    );
    // A failed start is not kept.
    assert!(failing.list().is_empty());
    let hanging = Runs::new(Config {
        start_timeout: Duration::from_millis(800),
        ..config("hang", &[])
    });
    let timed_out = hanging
        .ensure(quick("quick-h", "run-h", 7002))
        .await
        .unwrap_err();
    assert_eq!(
        timed_out,
        TunnelError::Start("Timed out waiting for cloudflared to become ready after 800ms".into())
    );
    let missing = Runs::new(Config {
        binary: "/nonexistent/cloudflared".into(),
        ..config("ok", &[])
    });
    assert_eq!(
        missing
            .ensure(quick("quick-m", "run-m", 7003))
            .await
            .unwrap_err()
            .to_string(),
        "cloudflared binary not found at '/nonexistent/cloudflared'. Install cloudflared and ensure it is reachable on PATH inside the container."
    );

    // One that ignores SIGTERM is killed after the grace period; shutdown ends them all.
    let stubborn_runs = self::runs("stubborn");
    let (stubborn, _) = stubborn_runs
        .ensure(quick("quick-s", "run-s", 7004))
        .await
        .unwrap();
    let (plain, _) = runs.ensure(quick("quick-p", "run-p", 7005)).await.unwrap();
    stubborn_runs.shutdown().await;
    runs.shutdown().await;
    assert!(!fsd_tests::host_alive(stubborn.pid) && !fsd_tests::host_alive(plain.pid));
    assert!(runs.list().is_empty() && stubborn_runs.list().is_empty());
}

/// Children of `pid` (spawned from any of its threads) running the stand-in.
fn stand_ins_below(pid: u32) -> Vec<u32> {
    let children: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .map(|task| {
                    std::fs::read_to_string(task.path().join("children")).unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default();
    children
        .join(" ")
        .split_whitespace()
        .filter_map(|child| child.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/comm"))
                .is_ok_and(|comm| comm.starts_with("cloudflared-sta"))
        })
        .collect()
}

#[tokio::test]
async fn the_daemon_serves_tunnels_over_its_routes() {
    let stand_in = fsd_tests::binary("cloudflared-stand-in");
    let mut daemon = fsd_tests::Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--cloudflared".into(), stand_in.display().to_string()],
        env: vec![("FSD_STAND_IN".into(), "ok".into())],
        ..fsd_tests::Options::default()
    });
    let mut events = daemon
        .request(reqwest::Method::GET, "/api/tunnels/events")
        .send()
        .await
        .unwrap();
    let (status, body) = daemon
        .post(
            "/api/tunnels",
            serde_json::json!({"mode": "quick", "port": 8080}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["started"], true);
    assert_eq!(body["run"]["tunnelId"], "quick-8080");
    let url = body["run"]["url"].as_str().unwrap();
    assert!(url.ends_with(".trycloudflare.com"), "{url}");
    let (_, again) = daemon
        .post(
            "/api/tunnels",
            serde_json::json!({"mode": "quick", "port": 8080}),
        )
        .await;
    assert_eq!(
        (again["started"].clone(), again["run"]["url"].clone()),
        (false.into(), url.into())
    );

    // A named tunnel's token is in no answer.
    let (status, named) = daemon
        .post(
            "/api/tunnels",
            serde_json::json!({"mode": "named", "port": 5173, "token": "eyJsecret-token-123", "tunnelId": "uuid-1"}),
        )
        .await;
    assert_eq!(status, 200, "{named}");
    let (_, list) = daemon.get("/api/tunnels").await;
    assert_eq!(list["tunnels"].as_array().unwrap().len(), 2);
    assert!(!format!("{named}{list}").contains("secret"));

    // Refusals name what is wrong.
    for (body, code, field) in [
        (
            serde_json::json!({"mode": "fast", "port": 1}),
            "VALIDATION_FAILED",
            "mode",
        ),
        (
            serde_json::json!({"mode": "named", "port": 1}),
            "VALIDATION_FAILED",
            "token",
        ),
        (
            serde_json::json!({"mode": "quick", "port": 0}),
            "VALIDATION_FAILED",
            "port",
        ),
        (
            serde_json::json!({"mode": "quick", "port": 9, "runId": "a b"}),
            "VALIDATION_FAILED",
            "runId",
        ),
    ] {
        let (status, answer) = daemon.post("/api/tunnels", body).await;
        assert_eq!(
            (status.as_u16(), answer["code"].as_str()),
            (400, Some(code)),
            "{answer}"
        );
        assert_eq!(answer["context"]["validationErrors"][0]["field"], field);
    }
    let (status, conflict) = daemon
        .post(
            "/api/tunnels",
            serde_json::json!({"mode": "quick", "port": 8080, "tunnelId": "other"}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), conflict["code"].as_str()),
        (409, Some("TUNNEL_RUN_CONFLICT"))
    );

    // Stopping one announces its exit to the events stream.
    let (_, stopped) = daemon
        .post(
            "/api/tunnels/stop",
            serde_json::json!({"tunnelId": "quick-8080", "runId": "quick-8080"}),
        )
        .await;
    assert_eq!(stopped["stopped"], true);
    let mut seen = String::new();
    while !seen.contains("\"runId\":\"quick-8080\"") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), events.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("\"type\":\"exited\""), "{seen}");

    // Shutdown ends the tunnels still running.
    let pid = daemon.pid();
    let (_, list) = daemon.get("/api/tunnels").await;
    assert_eq!(stand_ins_below(pid).len(), 1, "{list}");
    let left: Vec<u32> = stand_ins_below(pid);
    let status = daemon.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        left.iter().all(|&p| !fsd_tests::host_alive(p)),
        "cloudflared outlived the daemon"
    );
}

#[tokio::test]
async fn a_missing_cloudflared_is_named() {
    let daemon = fsd_tests::Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--cloudflared".into(), "/nonexistent/cloudflared".into()],
        ..fsd_tests::Options::default()
    });
    let (status, body) = daemon
        .post(
            "/api/tunnels",
            serde_json::json!({"mode": "quick", "port": 8080}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (501, Some("CLOUDFLARED_NOT_FOUND"))
    );
    assert_eq!(body["context"]["binary"], "/nonexistent/cloudflared");
}

/// The SDK's tunnel calls, and `fsctl tunnel` (prints the URL, stops the run on Ctrl-C).
#[tokio::test]
async fn the_sdk_and_fsctl_drive_tunnels() {
    let stand_in = fsd_tests::binary("cloudflared-stand-in");
    let daemon = fsd_tests::Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--cloudflared".into(), stand_in.display().to_string()],
        env: vec![("FSD_STAND_IN".into(), "ok".into())],
        ..fsd_tests::Options::default()
    });
    let sandbox = daemon.client().await;
    let request = fsd_sdk::api::tunnels::EnsureTunnelRequest {
        mode: "quick".into(),
        port: 6006,
        ..Default::default()
    };
    let answer = sandbox.ensure_tunnel(&request).await.unwrap();
    assert!(answer.started && answer.run.url.is_some());
    assert_eq!(
        sandbox.tunnels().await.unwrap(),
        std::slice::from_ref(&answer.run)
    );
    assert!(
        sandbox
            .stop_tunnel("quick-6006", "quick-6006")
            .await
            .unwrap()
    );
    assert!(
        !sandbox
            .stop_tunnel("quick-6006", "quick-6006")
            .await
            .unwrap()
    );

    let mut fsctl = std::process::Command::new(fsd_tests::binary("fsctl"))
        .args(["--url", &daemon.url, "tunnel", "7007"])
        .env_remove("FSD_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let line = fsd_tests::first_line(&mut fsctl, "fsctl tunnel");
    assert!(line.ends_with(".trycloudflare.com"), "{line:?}");
    assert_eq!(sandbox.tunnels().await.unwrap().len(), 1);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(fsctl.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert!(fsctl.wait().unwrap().success());
    assert!(sandbox.tunnels().await.unwrap().is_empty());
}
