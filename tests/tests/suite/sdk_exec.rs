//! The typed client's exec, session and process calls against the real daemon.

use std::time::Duration;

use fsd_sdk::api::exec::{CreateSessionRequest, ExecEvent, ExecuteRequest};
use fsd_sdk::api::process::{ProcessStatus, StartProcessRequest};
use fsd_sdk::{ErrorCode, LogPattern, PortProbe, Regex};
use fsd_tests::Daemon;
use futures_util::TryStreamExt;

fn process(command: &str, id: &str) -> StartProcessRequest {
    StartProcessRequest {
        command: command.into(),
        process_id: Some(id.into()),
        ..StartProcessRequest::default()
    }
}

#[tokio::test]
async fn exec_sessions_and_streams() {
    let daemon = Daemon::start();
    let sandbox = daemon.client().await;
    let result = sandbox.exec("echo hi; sh -c 'exit 3'").await.unwrap();
    assert_eq!(
        (result.stdout.as_str(), result.exit_code, result.success),
        ("hi\n", 3, false)
    );

    sandbox
        .create_session(&CreateSessionRequest {
            id: Some("work".into()),
            ..CreateSessionRequest::default()
        })
        .await
        .unwrap();
    let in_session = |command: &str| ExecuteRequest {
        command: command.into(),
        session_id: Some("work".into()),
        ..ExecuteRequest::default()
    };
    sandbox.exec_with(&in_session("export X=1")).await.unwrap();
    assert_eq!(
        sandbox
            .exec_with(&in_session("echo $X"))
            .await
            .unwrap()
            .stdout,
        "1\n"
    );
    assert!(
        sandbox
            .list_sessions()
            .await
            .unwrap()
            .contains(&"work".to_string())
    );
    sandbox.delete_session("work").await.unwrap();
    let err = sandbox.delete_session("work").await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::SessionNotFound));

    let events: Vec<ExecEvent> = sandbox
        .exec_stream(&ExecuteRequest {
            command: "echo a; echo b >&2; exit 2".into(),
            ..ExecuteRequest::default()
        })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(matches!(
        events.first(),
        Some(ExecEvent::Start { pid: Some(_), .. })
    ));
    assert!(matches!(
        events.last(),
        Some(ExecEvent::Complete { exit_code: 2, .. })
    ));

    let err = sandbox.exec("exit 9").await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::SessionTerminated));
}

#[tokio::test]
async fn process_handles() {
    let daemon = Daemon::start();
    let sandbox = daemon.client().await;
    let server = sandbox
        .start_process(&process(
            "echo booting; sleep 0.2; echo 'listening on port 8080'; sleep 3036",
            "server",
        ))
        .await
        .unwrap();
    assert!(server.pid > 1);
    let line = server
        .wait_for_log(
            &LogPattern::Substring("listening".into()),
            Some(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert_eq!(line, "listening on port 8080");
    let regex = LogPattern::Regex(Regex::new(r"port (\d+)").unwrap());
    assert_eq!(
        server
            .wait_for_log(&regex, Some(Duration::from_secs(10)))
            .await
            .unwrap(),
        "listening on port 8080"
    );
    let running = sandbox
        .list_processes(Some(ProcessStatus::Running))
        .await
        .unwrap();
    assert!(running.iter().any(|p| p.id == "server"));
    server.kill().await.unwrap();
    assert_eq!(
        server
            .wait_for_exit(Some(Duration::from_secs(10)))
            .await
            .unwrap(),
        143
    );
    assert_eq!(server.info().await.unwrap().status, ProcessStatus::Killed);
    assert_eq!(
        server.logs().await.unwrap().stdout,
        "booting\nlistening on port 8080\n"
    );

    let quitter = sandbox
        .start_process(&process("echo nothing useful; exit 1", "quitter"))
        .await
        .unwrap();
    let err = quitter
        .wait_for_log(&LogPattern::Substring("ready".into()), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::ProcessExitedBeforeReady));

    let slow = sandbox
        .start_process(&process("sleep 3036", "slow"))
        .await
        .unwrap();
    let err = slow
        .wait_for_log(
            &LogPattern::Substring("never".into()),
            Some(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::ProcessReadyTimeout));
    assert_eq!(sandbox.kill_all_processes().await.unwrap(), 1);
    let err = sandbox.get_process("missing").await.unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::ProcessNotFound));
}

#[tokio::test]
async fn wait_for_port() {
    let daemon = Daemon::start();
    let sandbox = daemon.client().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let command = format!("sleep 0.2; exec python3 -m http.server {port} --bind 127.0.0.1");
    let web = sandbox
        .start_process(&process(&command, "web"))
        .await
        .unwrap();
    web.wait_for_port(port, PortProbe::http(), Some(Duration::from_secs(20)))
        .await
        .unwrap();
    web.wait_for_port(port, PortProbe::Tcp, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    web.kill().await.unwrap();
    let dying = sandbox
        .start_process(&process("sleep 0.1", "dying"))
        .await
        .unwrap();
    let err = dying
        .wait_for_port(port, PortProbe::http(), Some(Duration::from_secs(20)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&ErrorCode::ProcessExitedBeforeReady));
}

#[tokio::test]
async fn a_process_stdin_is_an_async_write_and_signals_reach_it() {
    use tokio::io::AsyncWriteExt;
    let daemon = Daemon::start();
    let sandbox = daemon.client().await;
    let target = daemon.path("from-stdin.bin");
    let handle = sandbox
        .start_process(&StartProcessRequest {
            stdin: Some("pipe".into()),
            ..process(&format!("cat > '{}'", target.display()), "sink")
        })
        .await
        .unwrap();
    // More than one write's worth and more than the pipe holds, copied as a stream.
    let bytes: Vec<u8> = (0..2_500_000u32).map(|i| (i % 253) as u8).collect();
    let mut stdin = handle.stdin();
    tokio::io::copy(&mut bytes.as_slice(), &mut stdin)
        .await
        .unwrap();
    stdin.shutdown().await.unwrap();
    let code = handle
        .wait_for_exit(Some(Duration::from_secs(20)))
        .await
        .unwrap();
    assert_eq!(code, 0);
    assert!(std::fs::read(&target).unwrap() == bytes, "the copy differs");
    // The process has ended: its stdin is a broken pipe.
    let err = handle.stdin().write_all(b"late").await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "{err}");

    let trapper = sandbox
        .start_process(&process(
            "trap 'echo usr2' USR2; echo ready; while :; do sleep 0.05; done",
            "trapper",
        ))
        .await
        .unwrap();
    trapper
        .wait_for_log(&LogPattern::Substring("ready".into()), None)
        .await
        .unwrap();
    let reply = trapper.signal("usr2").await.unwrap();
    assert_eq!(reply.signal, "SIGUSR2");
    trapper
        .wait_for_log(&LogPattern::Substring("usr2".into()), None)
        .await
        .unwrap();
    let err = sandbox.signal_process("trapper", "NOPE").await.unwrap_err();
    assert_eq!(err.status(), Some(400), "{err}");
    trapper.kill().await.unwrap();
}

#[tokio::test]
async fn logs_and_streams_resume_from_offsets() {
    use fsd_sdk::api::process::ProcessEvent;
    let daemon = Daemon::start();
    let sandbox = daemon.client().await;
    let handle = sandbox
        .start_process(&process("echo first; echo err >&2; echo second", "twice"))
        .await
        .unwrap();
    handle.wait_for_exit(None).await.unwrap();
    let all = handle.logs().await.unwrap();
    assert_eq!(
        (all.stdout.as_str(), all.stdout_offset),
        ("first\nsecond\n", 13)
    );
    assert_eq!(all.stderr_offset, 4);
    let rest = sandbox.process_logs_since("twice", 6, 4).await.unwrap();
    assert_eq!(
        (rest.stdout.as_str(), rest.stderr.as_str()),
        ("second\n", "")
    );
    let events: Vec<ProcessEvent> = sandbox
        .stream_process_since("twice", 6, 0)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let outputs: Vec<(String, Option<u64>)> = events
        .into_iter()
        .filter_map(|event| match event {
            ProcessEvent::Stdout { data, offset, .. } => Some((format!("out:{data}"), offset)),
            ProcessEvent::Stderr { data, offset, .. } => Some((format!("err:{data}"), offset)),
            _ => None,
        })
        .collect();
    assert_eq!(
        outputs,
        [
            ("out:second\n".to_string(), Some(13)),
            ("err:err\n".to_string(), Some(4))
        ]
    );
}
