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
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
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
    assert!(alive(info.pid));

    // The same run again shares it; a conflicting one is refused.
    let (again, started) = runs.ensure(quick("quick-a", "run-a", 8080)).await.unwrap();
    assert!(!started);
    assert_eq!(again, info);
    let conflicts = [
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
    assert!(!alive(info.pid));
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
    assert!(!alive(stubborn.pid) && !alive(plain.pid));
    assert!(runs.list().is_empty() && stubborn_runs.list().is_empty());
}
