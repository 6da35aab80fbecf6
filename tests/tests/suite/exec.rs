//! /api/execute and sessions: persistence, exact output, serialization, timeouts, torture.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use fsd_tests::{Daemon, assert_error, assert_validation, available_or_skip};
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn exec(daemon: &Daemon, body: Value) -> Value {
    let (status, reply) = daemon.post("/api/execute", body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body} -> {reply}");
    reply
}

async fn run(daemon: &Daemon, command: &str) -> Value {
    exec(daemon, json!({"command": command})).await
}

#[tokio::test]
async fn result_shape_and_exact_output() {
    let daemon = Daemon::start();
    let reply = run(&daemon, "echo out; echo err >&2; printf tail").await;
    assert_eq!(reply["success"], true);
    assert_eq!(reply["exitCode"], 0);
    assert_eq!(reply["stdout"], "out\ntail");
    assert_eq!(reply["stderr"], "err\n");
    assert_eq!(reply["command"], "echo out; echo err >&2; printf tail");
    assert_eq!(reply["sessionId"], "default");
    assert!(reply["duration"].is_u64());
    assert!(reply["timestamp"].as_str().unwrap().ends_with('Z'));
    let reply = run(&daemon, "exit_code() { return 7; }; exit_code").await;
    assert_eq!(reply["success"], false);
    assert_eq!(reply["exitCode"], 7);
}

#[tokio::test]
async fn session_state_persists_between_commands() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("sub")).unwrap();
    run(&daemon, "cd sub; export GREETING=hello; shout() { echo \"$1!\"; }; alias ll='echo listed'; plain=kept").await;
    let reply = run(&daemon, "pwd; echo $GREETING; shout hey; ll; echo $plain").await;
    let expected = format!(
        "{}\nhello\nhey!\nlisted\nkept\n",
        daemon.path("sub").display()
    );
    assert_eq!(reply["stdout"], expected);
}

#[tokio::test]
async fn cwd_and_env_apply_to_one_command_only() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("elsewhere")).unwrap();
    run(&daemon, "export KEEP=session").await;
    let reply = exec(
        &daemon,
        json!({"command": "pwd; echo $KEEP $ONE; cd /", "cwd": "elsewhere", "env": {"KEEP": "override", "ONE": "1", "SKIPPED": null}}),
    )
    .await;
    assert_eq!(
        reply["stdout"],
        format!("{}\noverride 1\n", daemon.path("elsewhere").display())
    );
    let reply = run(
        &daemon,
        "pwd; echo \"[$KEEP] [${ONE-unset}] [${SKIPPED-unset}]\"",
    )
    .await;
    assert_eq!(
        reply["stdout"],
        format!("{}\n[session] [unset] [unset]\n", daemon.root().display())
    );
    let reply = exec(
        &daemon,
        json!({"command": "printf %s \"$V\"", "env": {"V": "a'b\nc\\d"}}),
    )
    .await;
    assert_eq!(reply["stdout"], "a'b\nc\\d");
}

#[tokio::test]
async fn bad_cwd_and_env_fail_at_once() {
    let daemon = Daemon::start();
    let (status, body) = daemon
        .post(
            "/api/execute",
            json!({"command": "echo x", "cwd": "/does/not/exist"}),
        )
        .await;
    assert_validation(status, &body, "cwd");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("/does/not/exist")
    );
    let (status, body) = daemon
        .post(
            "/api/execute",
            json!({"command": "echo x", "env": {"BAD-NAME": "x"}}),
        )
        .await;
    assert_validation(status, &body, "env");
    let (status, body) = daemon.post("/api/execute", json!({"command": "   "})).await;
    assert_validation(status, &body, "command");
    let (status, body) = daemon.post("/api/execute", json!({"cmd": "ls"})).await;
    assert_validation(status, &body, "command");
}

#[tokio::test]
async fn torture_cases_never_wedge_the_session() {
    let daemon = Daemon::start();
    run(&daemon, "export MARK=alive").await;
    let cases: Vec<(&str, i64, &str)> = vec![
        ("set -e; false; echo not-reached", 1, ""),
        ("echo after-set-e", 0, "after-set-e\n"),
        ("echo \"unterminated", 2, ""),
        (
            "cat <<'EOF'\nline one\n$NOT_EXPANDED\nEOF",
            0,
            "line one\n$NOT_EXPANDED\n",
        ),
        ("cat", 0, ""),
        // errexit is still on from the first case: `read` at end of input stops the command.
        ("read -r line; echo \"[$line]\"", 1, ""),
        ("f() { false; echo in-f; }; set -e; f; echo after", 1, ""),
        ("set +e; echo errexit-off", 0, "errexit-off\n"),
        ("'", 2, ""),
        ("if then fi", 2, ""),
    ];
    for (command, code, stdout) in cases {
        let reply = run(&daemon, command).await;
        assert_eq!(reply["exitCode"], code, "{command}: {reply}");
        assert_eq!(reply["stdout"], stdout, "{command}: {reply}");
    }
    let reply = run(&daemon, "echo \"unterminated").await;
    assert!(
        reply["stderr"].as_str().unwrap().contains("unexpected EOF"),
        "{reply}"
    );
    assert_eq!(run(&daemon, "echo $MARK").await["stdout"], "alive\n");
}

#[tokio::test]
async fn background_leftovers_do_not_hold_a_command_open() {
    let daemon = Daemon::start();
    let started = Instant::now();
    let reply = run(&daemon, "nohup sleep 30 >/dev/null 2>&1 & echo started").await;
    assert_eq!(reply["stdout"], "started\n");
    let reply = run(&daemon, "sleep 30 & echo also").await;
    assert_eq!(reply["stdout"], "also\n");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "a leftover background job held the command"
    );
}

/// A session's commands reuse their output files while nothing else writes to them; a
/// process a command leaves running with its stdout and stderr must never write into a
/// later command's output.
#[tokio::test]
async fn output_of_a_process_left_running_never_reaches_a_later_command() {
    let daemon = Daemon::start();
    assert_eq!(run(&daemon, "echo first").await["stdout"], "first\n");
    // The leftover writes only once a later command has begun: what it printed while its
    // own command still ran would be that command's output, as in a terminal.
    let gate = daemon.root().join("leftover-gate");
    let gate = gate.display();
    let reply = run(
        &daemon,
        &format!(
            "(for w in $(seq 2000); do [ -e {gate} ] && break; sleep 0.005; done; \
             for i in $(seq 40); do echo late; echo late >&2; sleep 0.02; done) & echo second"
        ),
    )
    .await;
    assert_eq!(reply["stdout"], "second\n", "{reply}");
    let reply = run(&daemon, &format!("touch {gate}")).await;
    assert_eq!(
        (reply["stdout"].as_str(), reply["stderr"].as_str()),
        (Some(""), Some("")),
        "{reply}"
    );
    let started = Instant::now();
    let mut commands = 0;
    while started.elapsed() < Duration::from_millis(1200) {
        commands += 1;
        let reply = run(&daemon, &format!("echo {commands}")).await;
        assert_eq!(reply["stdout"], format!("{commands}\n"), "{reply}");
        assert_eq!(reply["stderr"], "", "{reply}");
    }
    // Once the leftover is gone, commands go on with their own output.
    let reply = run(&daemon, "echo last; echo err >&2").await;
    assert_eq!(
        (reply["stdout"].as_str(), reply["stderr"].as_str()),
        (Some("last\n"), Some("err\n"))
    );
}

/// A descriptor the daemon's parent left open without close-on-exec (as a shell or a
/// harness may) is the parent's: no command sees it.
#[tokio::test]
async fn descriptors_the_daemon_inherited_reach_no_command() {
    // A pipe without close-on-exec in this process, moved to a number of its own.
    let (read, write) = nix::unistd::pipe().unwrap();
    // SAFETY: F_DUPFD takes no pointer; `write` is open for the call.
    let leaked =
        unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&write), libc::F_DUPFD, 200) };
    assert!(leaked >= 200, "dup: {}", std::io::Error::last_os_error());
    let daemon = Daemon::start();
    // SAFETY: `leaked` is this test's own descriptor, closed once.
    unsafe { libc::close(leaked) };
    drop((read, write));
    let reply = run(&daemon, "ls /proc/self/fd").await;
    let fds: Vec<&str> = reply["stdout"].as_str().unwrap().lines().collect();
    assert!(
        !fds.contains(&leaked.to_string().as_str()),
        "fd {leaked} reached a command: {fds:?}"
    );
    assert!(fds.contains(&"0") && fds.contains(&"2"), "{fds:?}");
}

/// The sandbox's init ends once the daemon's end of its lifeline closes, whatever became
/// of `unshare` (whose parent-death signal is set too late in a daemon killed at once).
#[test]
fn the_sandbox_init_ends_when_its_lifeline_closes() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (reader, writer) = std::io::pipe().unwrap();
    let fd = reader.as_raw_fd();
    let mut command = std::process::Command::new(fsd_tests::binary("fsd"));
    command.args(["sandbox-init", "--lifeline", &fd.to_string()]);
    // SAFETY: fcntl is async-signal-safe; the read end is kept open across exec.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut init = command.spawn().unwrap();
    drop(reader);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        init.try_wait().unwrap().is_none(),
        "the init ended while its lifeline was open"
    );
    drop(writer);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = init.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the init outlived its lifeline"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn large_and_binary_output_is_exact() {
    let daemon = Daemon::start();
    let reply = run(&daemon, "head -c 1048576 /dev/zero | tr '\\0' x").await;
    let stdout = reply["stdout"].as_str().unwrap();
    assert_eq!(stdout.len(), 1_048_576);
    assert!(stdout.bytes().all(|b| b == b'x'));
    let reply = run(&daemon, "printf 'ok\\000\\377\\376end'").await;
    assert_eq!(
        BASE64
            .decode(reply["stdoutBase64"].as_str().unwrap())
            .unwrap(),
        b"ok\0\xff\xfeend"
    );
    let reply = run(&daemon, "printf 'plain'").await;
    assert!(reply.get("stdoutBase64").is_none());
}

#[tokio::test]
async fn timeouts_kill_the_command_and_keep_the_session() {
    let daemon = Daemon::start();
    run(&daemon, "export STATE=kept; cd /tmp").await;
    // Detached by a command that finished: not the business of a later timeout.
    run(
        &daemon,
        "setsid bash -c '(exec -a fsd-kept-3039 sleep 3039) & exit 0'",
    )
    .await;
    // 3031: a duration no other test uses, so pgrep below sees only these.
    for command in [
        "setsid bash -c '(trap \"\" INT TERM; exec -a fsd-escapee-3031 sleep 3031) & exit 0'; sleep 3031",
        "sleep 3031",
        "while true; do :; done",
        "for i in 1 2 3; do sleep 3031; done",
        "trap '' INT TERM; sleep 3031",
        "sleep 3031 | cat",
        "bash -c 'sleep 3031'",
    ] {
        let started = Instant::now();
        let (status, body) = daemon
            .post(
                "/api/execute",
                json!({"command": command, "timeoutMs": 300}),
            )
            .await;
        assert_error(status, &body, 500, "COMMAND_EXECUTION_ERROR");
        assert_eq!(body["context"]["timedOut"], true, "{command}: {body}");
        assert_eq!(body["context"]["sessionKept"], true, "{command}: {body}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{command} was not stopped"
        );
        let reply = run(&daemon, "echo $STATE; pwd").await;
        assert_eq!(reply["stdout"], "kept\n/tmp\n", "after {command}");
    }
    let reply = run(&daemon, "pgrep -f '(sleep|escapee-)303[1]' || echo none").await;
    assert_eq!(reply["stdout"], "none\n", "a timed-out sleep survived");
    let reply = run(&daemon, "pgrep -c -f 'fsd-kept-303[9]'").await;
    assert_eq!(
        reply["stdout"], "1\n",
        "an earlier detached process was killed"
    );
}

#[tokio::test]
async fn exit_terminates_the_session_and_the_next_call_starts_fresh() {
    let daemon = Daemon::start();
    run(&daemon, "export GONE=soon").await;
    let (status, body) = daemon
        .post("/api/execute", json!({"command": "exit 3"}))
        .await;
    assert_error(status, &body, 410, "SESSION_TERMINATED");
    assert_eq!(body["context"]["exitCode"], 3);
    assert_eq!(body["context"]["sessionId"], "default");
    let reply = run(&daemon, "echo \"[${GONE-}]\"").await;
    assert_eq!(reply["stdout"], "[]\n");
}

#[tokio::test]
async fn three_concurrent_commands_in_one_session_keep_their_output() {
    let daemon = std::sync::Arc::new(Daemon::start());
    let tasks: Vec<_> = (0..3)
        .map(|i| {
            let daemon = daemon.clone();
            tokio::spawn(async move {
                let command = format!("echo START-{i}; sleep 0.1; echo END-{i}");
                exec(&daemon, json!({"command": command, "sessionId": "shared"})).await
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let reply = task.await.unwrap();
        assert_eq!(reply["stdout"], format!("START-{i}\nEND-{i}\n"));
        assert_eq!(reply["sessionId"], "shared");
    }
}

#[tokio::test]
async fn different_sessions_run_in_parallel() {
    let daemon = std::sync::Arc::new(Daemon::start());
    // Warm both sessions so shell start-up is not measured.
    for id in ["a", "b"] {
        exec(&daemon, json!({"command": "true", "sessionId": id})).await;
    }
    let started = Instant::now();
    let tasks: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|id| {
            let daemon = daemon.clone();
            tokio::spawn(async move {
                exec(&daemon, json!({"command": "sleep 1", "sessionId": id})).await
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap()["exitCode"], 0);
    }
    assert!(
        started.elapsed() < Duration::from_millis(1800),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn sessions_create_list_delete() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("proj")).unwrap();
    let (status, body) = daemon
        .post(
            "/api/session/create",
            json!({"id": "s1", "env": {"TOKEN_X": "t"}, "cwd": "proj"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], true);
    assert_eq!(body["id"], "s1");
    assert!(body.get("containerPlacementId").is_some());
    let (status, body) = daemon
        .post("/api/session/create", json!({"id": "s1"}))
        .await;
    assert_error(status, &body, 409, "SESSION_ALREADY_EXISTS");

    let reply = exec(
        &daemon,
        json!({"command": "pwd; echo $TOKEN_X", "sessionId": "s1"}),
    )
    .await;
    assert_eq!(
        reply["stdout"],
        format!("{}\nt\n", daemon.path("proj").display())
    );

    let response = daemon
        .request(reqwest::Method::POST, "/api/session/create")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "an empty body creates a session with defaults"
    );
    let generated: Value = response.json().await.unwrap();
    assert!(generated["id"].as_str().unwrap().starts_with("session_"));

    let (_, list) = daemon.get("/api/session/list").await;
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(ids.contains(&"s1") && ids.len() == 2, "{list}");

    let (status, body) = daemon
        .post("/api/session/delete", json!({"sessionId": "s1"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["sessionId"], "s1");
    let (status, body) = daemon
        .post("/api/session/delete", json!({"sessionId": "s1"}))
        .await;
    assert_error(status, &body, 404, "SESSION_NOT_FOUND");
    let (status, body) = daemon.post("/api/session/delete", json!({})).await;
    assert_validation(status, &body, "sessionId");
}

#[tokio::test]
async fn session_timeout_default_applies() {
    let daemon = Daemon::start();
    daemon
        .post(
            "/api/session/create",
            json!({"id": "quick", "commandTimeoutMs": 300}),
        )
        .await;
    let (status, body) = daemon
        .post(
            "/api/execute",
            json!({"command": "sleep 30", "sessionId": "quick"}),
        )
        .await;
    assert_error(status, &body, 500, "COMMAND_EXECUTION_ERROR");
    assert_eq!(body["context"]["timeoutMs"], 300);
}

#[tokio::test]
async fn session_id_from_header_and_query() {
    let daemon = Daemon::start();
    let response = daemon
        .request(reqwest::Method::POST, "/api/execute")
        .header("X-Session-Id", "from-header")
        .json(&json!({"command": "echo hi"}))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["sessionId"], "from-header");
    let response = daemon
        .request(reqwest::Method::POST, "/api/execute?sessionId=from-query")
        .json(&json!({"command": "echo hi"}))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["sessionId"], "from-query");
}

#[tokio::test]
async fn sessionless_commands_are_exact_and_bounded() {
    let daemon = Daemon::start();
    let reply = exec(
        &daemon,
        json!({"command": "echo one; pwd; echo err >&2", "sessionId": "__DISABLE_SESSION__"}),
    )
    .await;
    assert_eq!(
        reply["stdout"],
        format!("one\n{}\n", daemon.root().display())
    );
    assert_eq!(reply["stderr"], "err\n");
    assert_eq!(reply["sessionId"], "__DISABLE_SESSION__");
    let started = Instant::now();
    let reply = exec(
        &daemon,
        json!({"command": "sleep 30 & echo left", "sessionId": "__DISABLE_SESSION__"}),
    )
    .await;
    assert_eq!(reply["stdout"], "left\n");
    assert!(started.elapsed() < Duration::from_secs(20));
    // A timeout ends the command and what it detached, even from TERM and its session,
    // and is a result as the reference answers it: exit 124, the reason on stderr's last line.
    let (status, body) = daemon
        .post(
            "/api/execute",
            json!({"command": "echo begun; echo partial >&2; setsid bash -c '(trap \"\" TERM; exec -a fsd-escapee-3035 sleep 3035) & exit 0'; sleep 3036",
                   "sessionId": "__DISABLE_SESSION__", "timeoutMs": 300}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (&body["success"], &body["exitCode"]),
        (&json!(false), &json!(124))
    );
    assert_eq!(body["stdout"], "begun\n");
    assert_eq!(body["stderr"], "partial\nCommand timed out after 300ms");
    for marker in ["fsd-escapee-3035", "sleep 3036"] {
        let left = fsd_tests::host_processes_gone(marker, Duration::from_secs(2)).await;
        assert!(left.is_empty(), "{marker} survived the timeout: {left:?}");
    }
}

#[tokio::test]
async fn user_commands_cannot_signal_the_daemon() {
    let daemon = Daemon::start();
    let (_, caps) = daemon.get("/api/capabilities").await;
    let isolated = caps["capabilities"]["commandIsolation"] == "pid-namespace";
    if !available_or_skip(
        isolated,
        "user_commands_cannot_signal_the_daemon",
        "PID namespaces for command isolation",
    ) {
        return;
    }
    let pid = daemon.pid();
    let shell = run(&daemon, "echo $$").await["stdout"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_string();
    // Every user command shares the sandbox's PID namespace, so `kill -9 -1` ends them all,
    // this command's own session included (410, as on any machine); never the daemon.
    let (status, body) = daemon
        .post(
            "/api/execute",
            json!({"command": format!("kill -9 {pid}; pkill -9 -f 'fsd serve'; kill -9 -1; echo tried")}),
        )
        .await;
    assert!(
        status == StatusCode::OK || status.as_u16() == 410,
        "{status}: {body}"
    );
    let (status, _) = daemon.get("/api/ping").await;
    assert_eq!(status, StatusCode::OK, "the daemon died");
    // The daemon is not in the sandbox's /proc, under any pid. A fresh session: `kill -9 -1`
    // spares the calling shell but not its supervisor, so the default session may answer its
    // next command with 410 once the daemon has seen the supervisor go.
    let reply = exec(
        &daemon,
        json!({
            "command": "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <\"$f\"; echo; done | grep -c '^[^ ]*fsd serve' || :",
            "sessionId": "after-kill",
        }),
    )
    .await;
    assert_eq!(reply["stdout"], "0\n", "{reply}");
    // The calling shell lost its supervisor and went with it: nothing of the old session
    // runs on where the daemon cannot find it (init reaps it within moments).
    let reply = exec(
        &daemon,
        json!({
            "command": format!("for i in $(seq 100); do kill -0 {shell} 2>/dev/null || break; sleep 0.02; done; kill -0 {shell} 2>/dev/null && echo alive || echo gone"),
            "sessionId": "after-kill",
        }),
    )
    .await;
    assert_eq!(reply["stdout"], "gone\n", "{reply}");
    assert!(
        std::process::Command::new("kill")
            .args(["-0", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

#[tokio::test]
async fn daemon_secrets_are_not_inherited() {
    // The harness's daemon inherits this test process's environment.
    let daemon = Daemon::start();
    let reply = run(&daemon, "env | cut -d= -f1 | sort | tr '\\n' ' '").await;
    let names = reply["stdout"].as_str().unwrap();
    for allowed in ["PATH", "HOME", "LANG", "LC_ALL"] {
        assert!(names.contains(allowed), "{names}");
    }
    for leaked in ["CARGO", "RUST_TEST_THREADS", "CARGO_MANIFEST_DIR"] {
        assert!(
            !names.split_whitespace().any(|n| n == leaked),
            "{leaked} leaked: {names}"
        );
    }
}

#[tokio::test]
async fn deleting_a_session_under_a_running_command_is_410_destroyed() {
    let daemon = std::sync::Arc::new(Daemon::start());
    daemon
        .post("/api/session/create", json!({"id": "doomed"}))
        .await;
    let running = {
        let daemon = daemon.clone();
        tokio::spawn(async move {
            daemon
                .post(
                    "/api/execute",
                    json!({"command": "sleep 3039", "sessionId": "doomed"}),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = daemon
        .post("/api/session/delete", json!({"sessionId": "doomed"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = running.await.unwrap();
    assert_error(status, &body, 410, "SESSION_DESTROYED");
}

#[tokio::test]
async fn file_routes_resolve_relative_paths_in_the_session_cwd() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("proj")).unwrap();
    daemon
        .post(
            "/api/execute",
            json!({"command": "cd proj", "sessionId": "s"}),
        )
        .await;
    let (status, body) = daemon
        .post(
            "/api/write",
            json!({"path": "note.txt", "content": "in proj", "sessionId": "s"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["path"], "note.txt");
    assert_eq!(
        std::fs::read_to_string(daemon.path("proj/note.txt")).unwrap(),
        "in proj"
    );
    let (_, body) = daemon
        .post("/api/read", json!({"path": "note.txt", "sessionId": "s"}))
        .await;
    assert_eq!(body["content"], "in proj");
    let (_, body) = daemon
        .post("/api/exists", json!({"path": "note.txt"}))
        .await;
    assert_eq!(
        body["exists"], false,
        "without a session, paths resolve in the workspace"
    );
    let (status, _) = daemon
        .post(
            "/api/rename",
            json!({"oldPath": "note.txt", "newPath": "renamed.txt", "sessionId": "s"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(daemon.path("proj/renamed.txt").exists());
    let (_, body) = daemon
        .post("/api/list-files", json!({"path": ".", "sessionId": "s"}))
        .await;
    assert_eq!(body["files"][0]["name"], "renamed.txt");
    let (status, body) = daemon
        .post("/api/read", json!({"path": "", "sessionId": "s"}))
        .await;
    assert_validation(status, &body, "path");
}
