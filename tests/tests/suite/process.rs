//! Background processes, /api/execute/stream and `background: true`.

use std::time::{Duration, Instant};

use fsd_tests::sse::Sse;
use fsd_tests::{
    Daemon, assert_error, assert_validation, available_or_skip, host_processes_gone,
    host_processes_started, reply,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// The JSON frames of an SSE body.
fn frames(body: &str) -> Vec<Value> {
    body.split_terminator("\n\n")
        .map(|frame| {
            serde_json::from_str(frame.strip_prefix("data: ").expect("data frame")).unwrap()
        })
        .collect()
}

async fn start(daemon: &Daemon, body: Value) -> Value {
    let (status, reply) = daemon.post("/api/process/start", body).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    reply
}

async fn wait_status(daemon: &Daemon, id: &str, wanted: &str) -> Value {
    for _ in 0..500 {
        let (_, body) = daemon.get(&format!("/api/process/{id}")).await;
        if body["process"]["status"] == wanted {
            return body["process"].clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{id} never reached {wanted}");
}

async fn stream(daemon: &Daemon, route: &str, method: Method, body: Option<Value>) -> Vec<Value> {
    let mut request = daemon.request(method, route);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    frames(&response.text().await.unwrap())
}

#[tokio::test]
async fn start_stream_get_logs_list() {
    let daemon = Daemon::start();
    let started = start(&daemon, json!({"command": "echo hello; sleep 0.2; echo oops >&2; echo bye; exit 3", "processId": "job-1"})).await;
    assert_eq!(started["processId"], "job-1");
    assert!(started["pid"].as_u64().unwrap() > 1);

    let events = stream(&daemon, "/api/process/job-1/stream", Method::GET, None).await;
    assert_eq!(events[0]["type"], "process_info");
    assert_eq!(events[0]["processId"], "job-1");
    let exit = events.last().unwrap();
    assert_eq!(exit["type"], "exit");
    assert_eq!(exit["exitCode"], 3);
    assert_eq!(exit["data"], "Process failed with exit code 3");
    let text = |kind: &str| -> String {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| e["data"].as_str().unwrap())
            .collect()
    };
    assert_eq!(text("stdout"), "hello\nbye\n");
    assert_eq!(text("stderr"), "oops\n");

    let (_, body) = daemon.get("/api/process/job-1").await;
    let process = &body["process"];
    assert_eq!(process["status"], "failed");
    assert_eq!(process["exitCode"], 3);
    assert!(process["endTime"].as_str().is_some());
    assert_eq!(process["sessionId"], "default");

    let (_, logs) = daemon.get("/api/process/job-1/logs").await;
    assert_eq!(logs["stdout"], "hello\nbye\n");
    assert_eq!(logs["stderr"], "oops\n");
    assert!(logs["outputCapBytes"].as_u64().unwrap() > 0);

    // A finished process streams its whole history and ends.
    let replay = stream(&daemon, "/api/process/job-1/stream", Method::GET, None).await;
    assert_eq!(replay.last().unwrap()["exitCode"], 3);

    let (_, list) = daemon.get("/api/process/list?status=failed").await;
    assert_eq!(list["processes"].as_array().unwrap().len(), 1);
    let (_, list) = daemon.get("/api/process/list?status=running").await;
    assert_eq!(list["processes"].as_array().unwrap().len(), 0);
    let (status, body) = daemon.get("/api/process/list?status=sleeping").await;
    assert_validation(status, &body, "status");
}

#[tokio::test]
async fn a_fast_process_has_its_output_when_it_is_done() {
    let daemon = Daemon::start();
    start(
        &daemon,
        json!({"command": "echo quick", "processId": "quick"}),
    )
    .await;
    wait_status(&daemon, "quick", "completed").await;
    let (_, logs) = daemon.get("/api/process/quick/logs").await;
    assert_eq!(logs["stdout"], "quick\n");
}

/// Logs read right after a command printed hold what it printed, whether it has ended
/// or still runs, beside a busy core: a read copies what the output files hold
/// first (output is otherwise copied on inotify's wake-ups and a 20 ms tick). Each command
/// prints, then makes a marker; the marker seen, its logs are read at once.
#[tokio::test]
async fn logs_read_right_after_output_hold_it_beside_a_busy_core() {
    const COMMANDS: usize = 1000;
    const AT_ONCE: usize = 8;
    let daemon = std::sync::Arc::new(Daemon::start());
    let busy = fsd_tests::BusyCores::start(1);
    let markers = daemon.path("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let tasks: Vec<_> = (0..AT_ONCE)
        .map(|lane| {
            let daemon = daemon.clone();
            let markers = markers.clone();
            tokio::spawn(async move {
                for i in (lane..COMMANDS).step_by(AT_ONCE) {
                    let marker = markers.join(format!("m{i}"));
                    // Every other one still runs when its logs are read.
                    let rest = if i % 2 == 0 { "" } else { "; sleep 1" };
                    let command = format!("echo line-{i}; : > {}{rest}", marker.display());
                    let id = format!("p{i}");
                    start(&daemon, json!({"command": command, "processId": id})).await;
                    let waited = Instant::now();
                    while !marker.exists() {
                        assert!(waited.elapsed() < Duration::from_secs(30), "{id} never ran");
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    let (status, logs) = daemon.get(&format!("/api/process/{id}/logs")).await;
                    assert_eq!(status, StatusCode::OK, "{logs}");
                    assert_eq!(logs["stdout"], format!("line-{i}\n"), "{id}: {logs}");
                }
            })
        })
        .collect();
    let mut failed = None;
    for task in tasks {
        if let Err(err) = task.await {
            failed.get_or_insert(err);
        }
    }
    drop(busy);
    if let Some(err) = failed {
        std::panic::resume_unwind(err.into_panic());
    }
}

/// Two starts asking for one id at the same moment start one process: the other is
/// refused as a duplicate, and the one that runs is the one its id reads, lists and kills
/// (neither replaces the other's log, nor is left running where no id reaches it).
#[tokio::test]
async fn two_starts_racing_for_one_id_start_one_process() {
    const PAIRS: usize = 12;
    let daemon = Daemon::start();
    let marks = daemon.path("racing");
    std::fs::create_dir_all(&marks).unwrap();
    for pair in 0..PAIRS {
        let id = format!("race-{pair}");
        let body = |who: &str| {
            let mark = marks.join(format!("{pair}-{who}"));
            json!({"command": format!("echo {who}; : > {}; sleep 30", mark.display()), "processId": id})
        };
        let (a, b) = tokio::join!(
            daemon.post("/api/process/start", body("a")),
            daemon.post("/api/process/start", body("b")),
        );
        let (won, (lost_status, lost)) = match (a.0, b.0) {
            (StatusCode::OK, StatusCode::OK) => panic!("{id}: both starts ran: {} {}", a.1, b.1),
            (StatusCode::OK, _) => ("a", b),
            (_, StatusCode::OK) => ("b", a),
            _ => panic!("{id}: neither start ran: {} {}", a.1, b.1),
        };
        assert_error(lost_status, &lost, 409, "RESOURCE_BUSY");
        let output = format!("{won}\n");
        let waited = Instant::now();
        loop {
            let (_, logs) = daemon.get(&format!("/api/process/{id}/logs")).await;
            if logs["stdout"] == output.as_str() {
                break;
            }
            assert!(waited.elapsed() < Duration::from_secs(30), "{id}: {logs}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (_, killed) = daemon.delete(&format!("/api/process/{id}")).await;
        assert_eq!(killed["success"], true, "{id}: {killed}");
        wait_status(&daemon, &id, "killed").await;
    }
    let (_, list) = daemon.get("/api/process/list").await;
    let listed = list["processes"].as_array().unwrap();
    assert_eq!(listed.len(), PAIRS, "one process per id: {list}");
    assert!(listed.iter().all(|p| p["status"] == "killed"), "{list}");
    // Only the winners ever ran.
    let ran = std::fs::read_dir(&marks).unwrap().count();
    assert_eq!(ran, PAIRS, "one command per id ran");
}

#[tokio::test]
async fn kill_escalates_and_kills_the_whole_tree() {
    let daemon = Daemon::start();
    start(
        &daemon,
        json!({"command": "sleep 3032", "processId": "polite"}),
    )
    .await;
    let (status, _) = daemon
        .request(Method::DELETE, "/api/process/polite")
        .send()
        .await
        .map(|r| (r.status(), ()))
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    let process = wait_status(&daemon, "polite", "killed").await;
    assert_eq!(process["exitCode"], 143);

    start(
        &daemon,
        json!({"command": "trap '' TERM; sleep 3033 & sleep 3033 & wait", "processId": "stubborn"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let (status, body) = reply(daemon.request(Method::DELETE, "/api/process/stubborn")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "SIGKILL came before the grace period"
    );
    let process = wait_status(&daemon, "stubborn", "killed").await;
    assert_eq!(process["exitCode"], 137);
    // SIGKILL is delivered asynchronously: give the kernel a moment to finish the teardown.
    let mut leftover = Vec::new();
    for _ in 0..100 {
        leftover = std::process::Command::new("pgrep")
            .args(["-f", "sleep 303[23]"])
            .output()
            .unwrap()
            .stdout;
        if leftover.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        leftover.is_empty(),
        "survivors: {}",
        String::from_utf8_lossy(&leftover)
    );

    let (status, body) = reply(daemon.request(Method::DELETE, "/api/process/stubborn")).await;
    assert_error(status, &body, 404, "COMMAND_NOT_FOUND");
    let (status, body) = reply(daemon.request(Method::DELETE, "/api/process/nope")).await;
    assert_error(status, &body, 404, "PROCESS_NOT_FOUND");
}

#[tokio::test]
async fn kill_all_counts_running_processes() {
    let daemon = Daemon::start();
    for id in ["a", "b"] {
        start(&daemon, json!({"command": "sleep 3034", "processId": id})).await;
    }
    start(&daemon, json!({"command": "true", "processId": "done"})).await;
    wait_status(&daemon, "done", "completed").await;
    let (status, body) = reply(daemon.request(Method::DELETE, "/api/process/kill-all")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["cleanedCount"], 2);
    for id in ["a", "b"] {
        wait_status(&daemon, id, "killed").await;
    }
}

#[tokio::test]
async fn execute_stream_completes_with_the_real_exit_code_after_exit() {
    let daemon = Daemon::start();
    let events = stream(
        &daemon,
        "/api/execute/stream",
        Method::POST,
        Some(json!({"command": "for i in 1 2 3; do echo line $i; sleep 0.05; done; echo warn >&2; exit 4"})),
    )
    .await;
    let start = &events[0];
    assert_eq!(start["type"], "start");
    assert!(start["pid"].as_u64().is_some());
    let process_id = start["processId"].as_str().unwrap().to_string();
    assert!(process_id.starts_with("proc_"));
    let complete = events.last().unwrap();
    assert_eq!(complete["type"], "complete");
    assert_eq!(complete["exitCode"], 4);
    // By the time `complete` arrives, the daemon already holds the process as finished.
    let (_, body) = daemon.get(&format!("/api/process/{process_id}")).await;
    assert_eq!(
        body["process"]["status"], "failed",
        "complete was sent while the process ran"
    );
    assert_eq!(body["process"]["exitCode"], 4);
    let stdout: String = events
        .iter()
        .filter(|e| e["type"] == "stdout")
        .map(|e| e["data"].as_str().unwrap())
        .collect();
    assert_eq!(stdout, "line 1\nline 2\nline 3\n");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "stderr" && e["data"] == "warn\n")
    );
}

#[tokio::test]
async fn background_execute_and_sessions_stay_free() {
    let daemon = Daemon::start();
    let (status, body) = daemon
        .post(
            "/api/execute",
            json!({"command": "sleep 3035", "background": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["processId"].as_str().is_some());
    assert!(body["pid"].as_u64().is_some());
    let started = Instant::now();
    let (status, reply) = daemon
        .post("/api/execute", json!({"command": "echo free"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reply["stdout"], "free\n");
    assert!(started.elapsed() < Duration::from_secs(4));
    daemon
        .request(Method::DELETE, "/api/process/kill-all")
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn background_commands_see_session_state_and_fail_fast_on_bad_cwd() {
    let daemon = Daemon::start();
    daemon
        .post(
            "/api/execute",
            json!({"command": "export FROM_SESSION=yes; cd /tmp"}),
        )
        .await;
    start(&daemon, json!({"command": "echo $FROM_SESSION $(pwd) $EXTRA", "processId": "env", "env": {"EXTRA": "x"}})).await;
    wait_status(&daemon, "env", "completed").await;
    let (_, logs) = daemon.get("/api/process/env/logs").await;
    assert_eq!(logs["stdout"], "yes /tmp x\n");

    let (status, body) = daemon
        .post(
            "/api/process/start",
            json!({"command": "echo x", "cwd": "/no/such/dir"}),
        )
        .await;
    assert_validation(status, &body, "cwd");
    let (status, body) = daemon
        .post("/api/process/start", json!({"command": " "}))
        .await;
    assert_error(status, &body, 400, "INVALID_COMMAND");
    assert_eq!(body["context"]["validationErrors"][0]["field"], "command");
    let (status, body) = daemon
        .post(
            "/api/process/start",
            json!({"command": "true", "processId": "../evil"}),
        )
        .await;
    assert_validation(status, &body, "processId");
    let (status, body) = daemon
        .post(
            "/api/execute/stream",
            json!({"command": "echo x", "cwd": "/no/such/dir"}),
        )
        .await;
    assert_validation(status, &body, "cwd");
}

#[tokio::test]
async fn sessionless_background_processes_run() {
    let daemon = Daemon::start();
    start(&daemon, json!({"command": "echo alone; pwd", "processId": "alone", "sessionId": "__DISABLE_SESSION__"})).await;
    let process = wait_status(&daemon, "alone", "completed").await;
    assert_eq!(process["sessionId"], "__DISABLE_SESSION__");
    let (_, logs) = daemon.get("/api/process/alone/logs").await;
    assert_eq!(
        logs["stdout"],
        format!("alone\n{}\n", daemon.root().display())
    );
    let (_, sessions) = daemon.get("/api/session/list").await;
    assert_eq!(
        sessions["data"],
        json!([]),
        "the internal host session is listed"
    );
}

#[tokio::test]
async fn finished_records_survive_a_restart() {
    let mut daemon = Daemon::start();
    start(
        &daemon,
        json!({"command": "echo persisted; exit 2", "processId": "keep-me"}),
    )
    .await;
    wait_status(&daemon, "keep-me", "failed").await;
    daemon.restart();
    let (status, body) = daemon.get("/api/process/keep-me").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["process"]["exitCode"], 2);
    let (_, logs) = daemon.get("/api/process/keep-me/logs").await;
    assert_eq!(logs["stdout"], "persisted\n");
}

/// The next line's processes stay readable by id through the 0.12 routes after a daemon
/// restart (a new runtime: the next line's calls no longer see them): an ended one with
/// its exit code and output, and one that ran when the daemon stopped, as the stop ended
/// it (a stop kills every process of the one table, whichever line started it, and
/// records how each ended).
#[tokio::test]
async fn next_line_records_survive_a_restart_for_the_routes() {
    use fsd_tests::rpc::{RpcClient, settled};
    let mut daemon = Daemon::start();
    let next = RpcClient::next_activated(&daemon.url, daemon.token.as_deref()).await;
    let ended = next
        .call(
            "processes",
            "start",
            // capnweb escapes an array literal by wrapping it in another.
            json!([[["sh", "-c", "echo out; echo err >&2; exit 3"]], {}]),
        )
        .await;
    settled(&ended);
    let ended = ended[2]["id"].as_str().expect("an id").to_string();
    let running = next
        .call("processes", "start", json!([[["sleep", "600"]], {}]))
        .await;
    settled(&running);
    let running = running[2]["id"].as_str().expect("an id").to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = daemon.get(&format!("/api/process/{ended}")).await;
        if body["process"]["status"] == "failed" {
            assert_eq!(body["process"]["exitCode"], 3, "{body}");
            assert_eq!(
                body["process"]["command"],
                "sh -c echo out; echo err >&2; exit 3"
            );
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, body) = daemon.get(&format!("/api/process/{running}")).await;
    assert_eq!(body["process"]["status"], "running", "{body}");
    drop(next);

    daemon.restart();
    let (status, body) = daemon.get(&format!("/api/process/{ended}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["process"]["status"], "failed", "{body}");
    assert_eq!(body["process"]["exitCode"], 3, "{body}");
    let (_, logs) = daemon.get(&format!("/api/process/{ended}/logs")).await;
    assert_eq!(
        (&logs["stdout"], &logs["stderr"]),
        (&json!("out\n"), &json!("err\n"))
    );
    let (_, logs) = daemon
        .get(&format!("/api/process/{ended}/logs?stdoutSince=2"))
        .await;
    assert_eq!(logs["stdout"], "t\n", "{logs}");
    let (_, body) = daemon.get(&format!("/api/process/{running}")).await;
    assert_eq!(body["process"]["status"], "killed", "{body}");
    assert_eq!(body["process"]["exitCode"], 143, "{body}");
    assert!(body["process"]["endTime"].is_string(), "{body}");
    // The new runtime's own calls do not see them.
    let next = RpcClient::next_activated(&daemon.url, daemon.token.as_deref()).await;
    let got = next.call("processes", "get", json!([ended])).await;
    assert_eq!(got[2], Value::Null, "{got}");
    let (status, _) = daemon.get("/api/process/no-such-process").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Both lines' processes are one table: each line reads, follows and kills the other's by
/// id, lists show both, and one bound keeps the latest ended of either line.
#[tokio::test]
async fn both_lines_read_and_kill_each_others_processes_by_id() {
    use fsd_tests::rpc::{RpcClient, settled};
    let daemon = Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--max-process-records".into(), "3".into()],
        ..fsd_tests::Options::default()
    });
    let next = RpcClient::next_activated(&daemon.url, daemon.token.as_deref()).await;

    // A 0.12 process as the next line sees it: its status, and its log to the end.
    start(
        &daemon,
        json!({"command": "echo from-0.12; exit 4", "processId": "old-line"}),
    )
    .await;
    wait_status(&daemon, "old-line", "failed").await;
    let got = next.call("processes", "get", json!(["old-line"])).await;
    settled(&got);
    assert_eq!(got[2]["state"], "exited", "{got}");
    assert_eq!(got[2]["exit"]["code"], 4, "{got}");
    assert_eq!(
        got[2]["command"],
        json!([["bash", "-c", "echo from-0.12; exit 4"]]),
        "an array, escaped as capnweb does: {got}"
    );
    assert_eq!(got[2]["cwd"], daemon.root().display().to_string(), "{got}");
    let logs = next
        .call("processes", "openLogs", json!(["old-line", {}]))
        .await;
    let export = logs[2][1].as_i64().expect("a subscription");
    settled(&next.call_on(export, "stream", json!([])).await);
    let mut stdout = Vec::new();
    let terminal = loop {
        let event = next.next_write().await.expect("an event");
        if event["type"] == "terminal" {
            break event;
        }
        if event["type"] == "stdout" {
            let text = event["data"][1].as_str().unwrap_or_default();
            stdout.extend(base64_simd::forgiving_decode_to_vec(text.as_bytes()).unwrap());
        }
    };
    next.release(export, 1);
    assert_eq!(stdout, b"from-0.12\n");
    assert_eq!(terminal["state"], "exited", "{terminal}");
    assert_eq!(terminal["exit"]["code"], 4, "{terminal}");

    // A next-line process as 0.12 sees it: read, followed live, signalled, killed.
    let started = next
        .call(
            "processes",
            "start",
            json!([[["sh", "-c", "echo up; exec sleep 600"]], {}]),
        )
        .await;
    settled(&started);
    let sleeper = started[2]["id"].as_str().expect("an id").to_string();
    let process = wait_status(&daemon, &sleeper, "running").await;
    assert_eq!(process["command"], "sh -c echo up; exec sleep 600");
    assert_eq!(process["sessionId"], "");
    let (_, list) = daemon.get("/api/process/list?status=running").await;
    assert!(
        list["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == sleeper.as_str()),
        "{list}"
    );
    let (status, body) = daemon
        .post(
            &format!("/api/process/{sleeper}/stdin"),
            json!({"data": "x"}),
        )
        .await;
    assert_error(status, &body, 409, "STDIN_NOT_PIPED");
    let killer = {
        let request = daemon.request(Method::DELETE, &format!("/api/process/{sleeper}"));
        tokio::spawn(async move { request.send().await.unwrap().status() })
    };
    let events = stream(
        &daemon,
        &format!("/api/process/{sleeper}/stream"),
        Method::GET,
        None,
    )
    .await;
    assert_eq!(killer.await.unwrap(), StatusCode::OK);
    assert_eq!(events[0]["type"], "process_info", "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "stdout" && e["data"] == "up\n"),
        "{events:?}"
    );
    let exit = events.last().unwrap();
    assert_eq!(exit["type"], "exit", "{events:?}");
    assert_eq!(exit["exitCode"], 143, "{events:?}");
    let process = wait_status(&daemon, &sleeper, "killed").await;
    assert_eq!(process["exitCode"], 143);
    let got = next.call("processes", "get", json!([sleeper])).await;
    assert_eq!(got[2]["exit"]["signal"], 15, "{got}");

    // The next line kills a 0.12 process (its shell acts on TERM as its command did).
    start(
        &daemon,
        json!({"command": "sleep 600", "processId": "old-sleeper"}),
    )
    .await;
    wait_status(&daemon, "old-sleeper", "running").await;
    let active = next.call("processes", "hasActive", json!([])).await;
    assert_eq!(active[2], true, "{active}");
    settled(
        &next
            .call("processes", "kill", json!(["old-sleeper", 15]))
            .await,
    );
    let process = wait_status(&daemon, "old-sleeper", "killed").await;
    assert_eq!(process["exitCode"], 143, "{process}");

    // One bound: three ended kept, whichever line started them; a fourth end drops the
    // oldest (the first 0.12 process) from both lines, its directory too.
    let (_, list) = daemon.get("/api/process/list").await;
    let ids: Vec<&str> = list["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["old-line", sleeper.as_str(), "old-sleeper"], "{list}");
    let more = next
        .call("processes", "start", json!([[["true"]], {}]))
        .await;
    settled(&more);
    let more = more[2]["id"].as_str().unwrap().to_string();
    wait_status(&daemon, &more, "completed").await;
    let (status, _) = daemon.get("/api/process/old-line").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let got = next.call("processes", "get", json!(["old-line"])).await;
    assert_eq!(got[2], Value::Null, "{got}");
    let listed = next.call("processes", "list", json!([])).await;
    assert_eq!(listed[2][0].as_array().map(Vec::len), Some(3), "{listed}");
    for _ in 0..100 {
        if !daemon.state_dir().join("processes/old-line").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!daemon.state_dir().join("processes/old-line").exists());
}

/// What a next-line process of `argv` wrote to its stdout, run to its exit.
async fn next_stdout(next: &fsd_tests::rpc::RpcClient, argv: Value) -> String {
    let events = next.run_to_exit(json!([argv])).await;
    let bytes: Vec<u8> = events
        .iter()
        .filter(|event| event["type"] == "stdout")
        .flat_map(|event| {
            let text = event["data"][1].as_str().unwrap_or_default();
            base64_simd::forgiving_decode_to_vec(text.as_bytes()).unwrap_or_default()
        })
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The spawner that forks the next line's supervisors lives in the sandbox, where a
/// command can kill it: the next start gets a new one, and what the old one started runs on.
#[tokio::test]
async fn a_spawner_killed_from_inside_the_sandbox_is_replaced() {
    part_of_the_spawner_killed_is_replaced("pkill -9 -o -f 'fsd [s]pawner' && echo killed").await;
}

/// The spawner keeps a fork of itself ready (its spare) that takes the next start: a
/// spare killed from inside the sandbox ends the spawner with it, and the next start gets
/// a new one, what the old one started running on.
#[tokio::test]
async fn a_spare_killed_from_inside_the_sandbox_is_replaced() {
    // The spare: the spawner's child still named `fsd` (the supervisors it becomes are
    // named `fsd-supervise`); waited for, as the spawner forks it after the start before.
    part_of_the_spawner_killed_is_replaced(
        "spawner=$(pgrep -o -f 'fsd [s]pawner'); for i in $(seq 100); do \
         p=$(pgrep -n -x -P \"$spawner\" fsd) && kill -9 \"$p\" && echo killed && exit 0; \
         sleep 0.05; done",
    )
    .await;
}

/// Starts a sleeper, runs `kill` (a shell script that prints `killed` once it has killed
/// a part of the spawner), then three more processes: each runs, under a new spawner, and
/// the sleeper runs on.
async fn part_of_the_spawner_killed_is_replaced(kill: &str) {
    use fsd_tests::rpc::{RpcClient, settled};
    let daemon = Daemon::start();
    let next = RpcClient::next_activated(&daemon.url, daemon.token.as_deref()).await;
    let stdout = |argv: Value| next_stdout(&next, argv);
    let sleeper = next
        .call("processes", "start", json!([[["sleep", "30"]], {}]))
        .await;
    settled(&sleeper);
    let sleeper = sleeper[2]["id"].clone();
    // The oldest process of that command line is the spawner (the supervisors it forked
    // carry it too); `[s]` keeps the pattern from matching the shell that runs it.
    let spawner = || stdout(json!(["pgrep", "-o", "-f", "fsd [s]pawner"]));
    let before = spawner().await;
    assert!(!before.trim().is_empty(), "no spawner in the sandbox");
    assert_eq!(stdout(json!(["sh", "-c", kill])).await, "killed\n");
    for round in 0..3 {
        let out = stdout(json!(["echo", format!("again {round}")])).await;
        assert_eq!(out, format!("again {round}\n"));
    }
    let after = spawner().await;
    assert!(
        !after.trim().is_empty() && after != before,
        "{before} → {after}"
    );
    let status = next.call("processes", "get", json!([sleeper])).await;
    assert_eq!(status[2]["state"], "running", "{status}");
}

#[tokio::test]
async fn finished_records_are_pruned_past_the_limit() {
    let mut daemon = Daemon::start_with(fsd_tests::Options {
        extra_args: vec!["--max-process-records".into(), "3".into()],
        ..fsd_tests::Options::default()
    });
    for i in 0..5 {
        let id = format!("r{i}");
        start(&daemon, json!({"command": "true", "processId": id})).await;
        wait_status(&daemon, &id, "completed").await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ids = |list: &Value| -> Vec<String> {
        list["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, list) = daemon.get("/api/process/list").await;
    assert_eq!(ids(&list), ["r2", "r3", "r4"]);
    daemon.restart();
    let (_, list) = daemon.get("/api/process/list").await;
    assert_eq!(
        ids(&list),
        ["r2", "r3", "r4"],
        "pruned records came back after a restart"
    );
}

#[tokio::test]
async fn stored_output_is_capped_and_says_so() {
    let daemon = Daemon::start();
    start(&daemon, json!({"command": "head -c 9000000 /dev/zero | tr '\\0' y; echo tail-marker >&2", "processId": "loud"})).await;
    wait_status(&daemon, "loud", "completed").await;
    let (_, logs) = daemon.get("/api/process/loud/logs").await;
    let cap = logs["outputCapBytes"].as_u64().unwrap();
    assert_eq!(
        logs["truncated"],
        true,
        "stored {} bytes of stdout",
        logs["stdout"].as_str().unwrap().len()
    );
    assert_eq!(logs["stdout"].as_str().unwrap().len() as u64, cap);
    assert_eq!(logs["stderr"], "tail-marker\n");
    // The latest output is kept, at absolute offsets that survive a restart.
    assert_eq!(logs["stdoutOffset"], 9_000_000, "{}", logs["stdoutOffset"]);
    assert_eq!(logs["stdoutSkipped"], 9_000_000 - cap);
    let mut daemon = daemon;
    daemon.restart();
    let (_, tail) = daemon
        .get("/api/process/loud/logs?stdoutSince=8999990&stderrSince=12")
        .await;
    assert_eq!(tail["stdout"], "yyyyyyyyyy");
    assert_eq!(
        (tail["stdoutOffset"].as_u64(), tail["stderr"].as_str()),
        (Some(9_000_000), Some(""))
    );
    assert!(
        tail.get("stdoutSkipped").is_none(),
        "{}",
        tail["stdoutSkipped"]
    );
}

#[tokio::test]
async fn output_resumes_from_the_offset_a_client_last_saw() {
    let daemon = Daemon::start();
    // Each line waits for a line on stdin, so the test decides when output grows; the
    // third cuts a character in two across writes.
    let command =
        "echo one; read; echo two; read; printf 'caf\\xc3'; read; printf '\\xa9\\n'; read";
    start(
        &daemon,
        json!({"command": command, "processId": "resumer", "stdin": "pipe"}),
    )
    .await;
    let logs_from = |since: u64| {
        let daemon = &daemon;
        async move {
            daemon
                .get(&format!("/api/process/resumer/logs?stdoutSince={since}"))
                .await
                .1
        }
    };
    let wait_for = |since: u64, wanted: &'static str| async move {
        for _ in 0..500 {
            let logs = logs_from(since).await;
            if logs["stdout"] == wanted {
                return logs;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "stdout from {since} never became {wanted:?}: {}",
            logs_from(since).await
        );
    };
    let first = wait_for(0, "one\n").await;
    assert_eq!(first["stdoutOffset"], 4);
    let next = || async {
        let (status, reply) = daemon
            .post("/api/process/resumer/stdin", json!({"data": "\n"}))
            .await;
        assert_eq!(status, StatusCode::OK, "{reply}");
    };
    next().await;
    let second = wait_for(4, "two\n").await;
    assert_eq!(second["stdoutOffset"], 8);
    next().await;
    // The cut character waits for its last byte instead of arriving as U+FFFD.
    let third = wait_for(8, "caf").await;
    assert_eq!(third["stdoutOffset"], 11);
    next().await;
    let fourth = wait_for(11, "\u{e9}\n").await;
    assert_eq!(fourth["stdoutOffset"], 14);

    // The stream takes the same cursor: the kept output from there, then live output, each
    // event with the offset after it.
    let mut events = daemon
        .request(Method::GET, "/api/process/resumer/stream?stdoutSince=8")
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    next().await;
    let mut body = String::new();
    while let Some(chunk) = events.chunk().await.unwrap() {
        body.push_str(&String::from_utf8_lossy(&chunk));
    }
    let frames = frames(&body);
    assert_eq!(frames[0]["type"], "process_info");
    let stdout: Vec<(&str, u64)> = frames
        .iter()
        .filter(|f| f["type"] == "stdout")
        .map(|f| (f["data"].as_str().unwrap(), f["offset"].as_u64().unwrap()))
        .collect();
    assert_eq!(stdout, [("caf\u{e9}\n", 14)], "{body}");
    assert_eq!(frames.last().unwrap()["type"], "exit", "{body}");
    let all = logs_from(0).await;
    assert_eq!(all["stdout"], "one\ntwo\ncaf\u{e9}\n");
    for (query, field) in [
        ("stdoutSince=-1", "stdoutSince"),
        ("stderrSince=x", "stderrSince"),
    ] {
        let (status, reply) = daemon
            .get(&format!("/api/process/resumer/logs?{query}"))
            .await;
        assert_validation(status, &reply, field);
        let (status, reply) = daemon
            .get(&format!("/api/process/resumer/stream?{query}"))
            .await;
        assert_validation(status, &reply, field);
    }
}

#[tokio::test]
async fn a_running_process_id_cannot_be_reused() {
    let daemon = Daemon::start();
    start(
        &daemon,
        json!({"command": "sleep 3038", "processId": "one"}),
    )
    .await;
    let (status, body) = daemon
        .post(
            "/api/process/start",
            json!({"command": "true", "processId": "one"}),
        )
        .await;
    assert_error(status, &body, 409, "RESOURCE_BUSY");
    daemon
        .request(Method::DELETE, "/api/process/one")
        .send()
        .await
        .unwrap();
    wait_status(&daemon, "one", "killed").await;
    start(&daemon, json!({"command": "true", "processId": "one"})).await;
}

async fn exec_in(daemon: &Daemon, session: &str, command: &str) -> Value {
    let (status, body) = daemon
        .post(
            "/api/execute",
            json!({"command": command, "sessionId": session}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{command}: {body}");
    body
}

#[tokio::test]
async fn a_pid_from_the_api_is_valid_in_every_command() {
    let daemon = Daemon::start();
    let started = start(
        &daemon,
        json!({"command": "sleep 3041", "processId": "server", "sessionId": "starter"}),
    )
    .await;
    let pid = started["pid"].as_u64().unwrap();
    let (_, created) = daemon
        .post("/api/session/create", json!({"id": "watcher"}))
        .await;
    let shell_pid = created["data"]["shellPid"].as_u64().unwrap();
    let (_, background) = daemon
        .post(
            "/api/execute",
            json!({"command": "sleep 3042", "background": true, "sessionId": "third"}),
        )
        .await;
    let background_pid = background["pid"].as_u64().unwrap();
    // The background command and the process are shells that start `sleep`; they may not
    // have yet (CI under load counted one sleep, and once found no `sleep 3041`): wait until
    // both have, at most 5 s.
    let started_sleep = format!(
        "pgrep -P {background_pid} -x sleep >/dev/null && pgrep -P {pid} -f 'sleep 3041' >/dev/null"
    );
    let became = exec_in(
        &daemon,
        "default",
        &format!(
            "for i in $(seq 250); do {started_sleep} && break; sleep 0.02; done; {started_sleep}"
        ),
    )
    .await;
    assert_eq!(
        became["exitCode"], 0,
        "the background command's and the process's sleep: {became}"
    );
    // From a sessionless command, the default session, and sessions that did not start them.
    for session in ["__DISABLE_SESSION__", "default", "watcher", "starter"] {
        let check = format!(
            "kill -0 {pid} && kill -0 {shell_pid} && kill -0 {background_pid} && \
             ps -p {pid} -o pid= && test -r /proc/{pid}/stat && pgrep -P {pid} -f 'sleep 3041' >/dev/null && \
             grep -q driver.sh /proc/{shell_pid}/cmdline && pgrep -c -x sleep"
        );
        let reply = exec_in(&daemon, session, &check).await;
        assert_eq!(reply["exitCode"], 0, "{session}: {reply}");
        assert_eq!(
            reply["stdout"],
            format!("{pid:>7}\n2\n"),
            "{session}: {reply}"
        );
    }
    // The pid the API gave is the one a kill from a command reaches.
    exec_in(&daemon, "watcher", &format!("kill -9 {pid}")).await;
    let process = wait_status(&daemon, "server", "killed").await;
    assert_eq!(process["exitCode"], 137);
    let reply = exec_in(
        &daemon,
        "default",
        &format!("kill -0 {pid} 2>/dev/null || echo gone"),
    )
    .await;
    assert_eq!(reply["stdout"], "gone\n");
}

/// Starts `command` as process `id`, kills it through the API, and checks on the host that
/// nothing of it runs once the kill has answered.
async fn kill_and_check(
    daemon: &Daemon,
    id: &str,
    command: &str,
    markers: &[&str],
    exit_code: i64,
) {
    let started = start(daemon, json!({"command": command, "processId": id})).await;
    let pid = started["pid"].as_u64().unwrap() as u32;
    // Commands print `ready` once their traps are set; every level of the tree must have
    // started (and the escapees detached) before the kill.
    for _ in 0..250 {
        let (_, logs) = daemon.get(&format!("/api/process/{id}/logs")).await;
        if logs["stdout"]
            .as_str()
            .is_some_and(|out| out.contains("ready"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for marker in markers {
        assert!(
            host_processes_started(marker).await > 0,
            "{id}: {marker} never started"
        );
    }
    let host_pid = daemon
        .host_pid_of(pid)
        .expect("the tracked process on the host");
    let (status, body) = reply(daemon.request(Method::DELETE, &format!("/api/process/{id}"))).await;
    assert_eq!(status, StatusCode::OK, "{id}: {body}");
    // The kill answers once the record is terminal, and the record once the tree is gone.
    let (_, process) = daemon.get(&format!("/api/process/{id}")).await;
    assert_eq!(process["process"]["status"], "killed", "{id}: {process}");
    assert_eq!(process["process"]["exitCode"], exit_code, "{id}: {process}");
    assert!(
        !fsd_tests::host_alive(host_pid),
        "{id}: the tracked process survived"
    );
    for marker in markers {
        let left = fsd_tests::host_processes_with(marker);
        assert!(left.is_empty(), "{id}: {marker} survived as {left:?}");
    }
}

#[tokio::test]
async fn kills_leave_nothing_of_the_tree_running() {
    let daemon = Daemon::start();
    std::fs::write(
        daemon.path("stubborn-child-3052.sh"),
        "trap '' TERM; echo ready; while :; do :; done\n",
    )
    .unwrap();
    let busy = kill_and_check(
        &daemon,
        "busy",
        "trap '' TERM; echo ready; while :; do :; done",
        &[],
        137,
    );
    let child = kill_and_check(
        &daemon,
        "child",
        "bash stubborn-child-3052.sh",
        &["stubborn-child-3052"],
        137,
    );
    let escapee = kill_and_check(
        &daemon,
        "escapee",
        "setsid bash -c '(trap \"\" TERM; exec -a fsd-escapee-3053 sleep 3053) & exit 0'; echo ready; sleep 3054",
        &["fsd-escapee-3053", "sleep 3054"],
        137,
    );
    let polite = async {
        let started = Instant::now();
        kill_and_check(
            &daemon,
            "polite",
            "echo ready; sleep 3055 | cat",
            &["sleep 3055"],
            143,
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "TERM was enough"
        );
    };
    tokio::join!(busy, child, escapee, polite);
}

#[tokio::test]
async fn deleting_a_session_ends_its_processes_and_what_they_detached() {
    let daemon = Daemon::start();
    exec_in(
        &daemon,
        "doomed",
        "setsid bash -c '(trap \"\" TERM; exec -a fsd-detached-3061 sleep 3061) & exit 0'",
    )
    .await;
    start(
        &daemon,
        json!({"sessionId": "doomed", "processId": "doomed-bg",
               "command": "setsid bash -c '(exec -a fsd-escapee-3062 sleep 3062) & exit 0'; sleep 3063"}),
    )
    .await;
    // Another session's process is not the doomed session's to end.
    start(
        &daemon,
        json!({"sessionId": "spared", "processId": "spared-bg", "command": "sleep 3064"}),
    )
    .await;
    for marker in [
        "fsd-detached-3061",
        "fsd-escapee-3062",
        "sleep 3063",
        "sleep 3064",
    ] {
        assert!(
            host_processes_started(marker).await > 0,
            "{marker} never started"
        );
    }
    let (status, body) = daemon
        .post("/api/session/delete", json!({"sessionId": "doomed"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for marker in ["fsd-detached-3061", "fsd-escapee-3062", "sleep 3063"] {
        let left = fsd_tests::host_processes_with(marker);
        assert!(
            left.is_empty(),
            "{marker} survived the session's deletion: {left:?}"
        );
    }
    let process = wait_status(&daemon, "doomed-bg", "killed").await;
    assert_eq!(process["exitCode"], 137);
    assert_eq!(fsd_tests::host_processes_with("sleep 3064").len(), 1);
    let (_, process) = daemon.get("/api/process/spared-bg").await;
    assert_eq!(process["process"]["status"], "running");
}

#[tokio::test]
async fn a_crashed_daemon_leaves_no_command_running() {
    let mut daemon = Daemon::start();
    let (_, caps) = daemon.get("/api/capabilities").await;
    // Without a PID namespace nothing ends commands with a SIGKILLed daemon.
    if !available_or_skip(
        caps["capabilities"]["commandIsolation"] == "pid-namespace",
        "a_crashed_daemon_leaves_no_command_running",
        "PID namespaces",
    ) {
        return;
    }
    start(
        &daemon,
        json!({"processId": "orphan", "command": "setsid bash -c '(exec -a fsd-crash-3071 sleep 3071) & exit 0'; sleep 3072"}),
    )
    .await;
    let running = {
        let request = daemon
            .request(Method::POST, "/api/execute")
            .json(&json!({"command": "sleep 3073", "sessionId": "busy"}));
        tokio::spawn(request.send())
    };
    for marker in ["fsd-crash-3071", "sleep 3072", "sleep 3073"] {
        assert!(
            host_processes_started(marker).await > 0,
            "{marker} never started"
        );
    }
    daemon.crash();
    let _ = running.await;
    for marker in ["fsd-crash-3071", "sleep 3072", "sleep 3073"] {
        let left = host_processes_gone(marker, Duration::from_secs(5)).await;
        assert!(left.is_empty(), "{marker} outlived the daemon: {left:?}");
    }
    daemon.resume();
    let reply = exec_in(&daemon, "default", "echo back").await;
    assert_eq!(reply["stdout"], "back\n");
}

#[tokio::test]
async fn signals_reach_the_process_by_name_or_number() {
    let daemon = Daemon::start();
    let command = "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.05; done";
    start(&daemon, json!({"command": command, "processId": "trapper"})).await;
    for _ in 0..250 {
        if stdout_of(&daemon, "trapper").await.contains("ready") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // One at a time: a signal sent while the same one is pending merges with it.
    for (sent, signal) in [json!("SIGUSR1"), json!("usr1"), json!(10)]
        .into_iter()
        .enumerate()
    {
        let (status, reply) = daemon
            .post("/api/process/trapper/signal", json!({"signal": signal}))
            .await;
        assert_eq!(status, StatusCode::OK, "{reply}");
        assert_eq!(reply["signal"], "SIGUSR1", "{reply}");
        assert!(reply["signalled"].as_u64().unwrap() >= 1, "{reply}");
        let mut got = 0;
        for _ in 0..250 {
            got = stdout_of(&daemon, "trapper")
                .await
                .matches("got-usr1")
                .count();
            if got > sent {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(got, sent + 1, "signal {signal} ran the trap");
    }
    for (signal, field) in [
        (json!("SIGNOPE"), "signal"),
        (json!(999), "signal"),
        (json!([1]), "signal"),
    ] {
        let (status, reply) = daemon
            .post("/api/process/trapper/signal", json!({"signal": signal}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
        assert_eq!(
            reply["context"]["validationErrors"][0]["field"], field,
            "{reply}"
        );
    }
    let (status, reply) = daemon
        .post("/api/process/trapper/signal", json!({"signal": "TERM"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let mut ended = Value::Null;
    for _ in 0..250 {
        let (_, body) = daemon.get("/api/process/trapper").await;
        ended = body;
        if ended["process"]["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Once in a loaded .ci/run the process was still running 5 s after the TERM: the
    // processes left then say what held it.
    let left = if ended["process"]["status"] == "running" {
        let listed = std::process::Command::new("ps")
            .args(["-eo", "pid,ppid,stat,wchan:20,args"])
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default();
        listed
            .lines()
            .filter(|line| line.contains("got-usr1") || line.contains("sleep 0.05"))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        String::new()
    };
    assert_eq!(
        ended["process"]["exitCode"], 143,
        "TERM ended it: {ended}\n{left}"
    );
    let (status, reply) = daemon
        .post("/api/process/trapper/signal", json!({"signal": "USR1"}))
        .await;
    assert!(
        status.is_client_error(),
        "a finished process takes no signal: {reply}"
    );
    let (status, _) = daemon
        .post("/api/process/nope/signal", json!({"signal": "USR1"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A polite signal that comes while the command's shell runs no command (between two of a
/// loop's commands) ends it, as it ends any shell: the shell's traps, which follow the
/// command's fate, took the status of the command that had ended before the signal for a
/// signal handled, and the loop ran on (about one TERM in ten, with 1 ms sleeps).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_between_a_loops_commands_ends_it_every_time() {
    let daemon = Daemon::start();
    for round in 0..20 {
        let id = format!("loop-{round}");
        let command = "echo ready; while :; do sleep 0.001; done";
        start(&daemon, json!({"command": command, "processId": id})).await;
        for _ in 0..250 {
            if stdout_of(&daemon, &id).await.contains("ready") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, reply) = daemon
            .post(
                &format!("/api/process/{id}/signal"),
                json!({"signal": "TERM"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{reply}");
        let mut body = Value::Null;
        for _ in 0..250 {
            body = daemon.get(&format!("/api/process/{id}")).await.1;
            if body["process"]["status"] != "running" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(body["process"]["exitCode"], 143, "round {round}: {body}");
    }
}

/// A program that handles a signal keeps running, and so does its record: the shell fsd runs
/// it in no longer dies of the signal the program handled (before, the record ended as
/// `failed 138` while the program ran on out of reach), and the program is still the
/// process's, to signal again and to kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_the_program_handles_keeps_it_and_its_record_running() {
    if !available_or_skip(
        fsd_tests::on_path("python3"),
        "a_signal_the_program_handles_keeps_it_and_its_record_running",
        "python3",
    ) {
        return;
    }
    let daemon = Daemon::start();
    std::fs::write(
        daemon.path("handler-4412.py"),
        "import signal, time\n\
         signal.signal(signal.SIGUSR1, lambda *a: print('got usr1', flush=True))\n\
         print('ready', flush=True)\n\
         while True:\n    time.sleep(0.05)\n",
    )
    .unwrap();
    start(
        &daemon,
        json!({"command": "python3 -u handler-4412.py", "processId": "py"}),
    )
    .await;
    let wait_for = |text: &'static str, count: usize| {
        let daemon = &daemon;
        async move {
            for _ in 0..250 {
                if stdout_of(daemon, "py").await.matches(text).count() >= count {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("never printed {text:?} {count} times");
        }
    };
    wait_for("ready", 1).await;
    for round in 1..=3 {
        let (status, reply) = daemon
            .post("/api/process/py/signal", json!({"signal": "USR1"}))
            .await;
        assert_eq!(status, StatusCode::OK, "round {round}: {reply}");
        wait_for("got usr1", round).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (_, body) = daemon.get("/api/process/py").await;
        assert_eq!(
            body["process"]["status"], "running",
            "round {round}: {body}"
        );
    }
    let (status, reply) = daemon.delete("/api/process/py").await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let ended = wait_status(&daemon, "py", "killed").await;
    assert_eq!(ended["status"], "killed", "{ended}");
    let left = host_processes_gone("handler-4412.py", Duration::from_secs(5)).await;
    assert!(left.is_empty(), "the program outlived its kill: {left:?}");
}

async fn stdout_of(daemon: &Daemon, id: &str) -> String {
    let (_, logs) = daemon.get(&format!("/api/process/{id}/logs")).await;
    logs["stdout"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_follower_resumes_across_a_daemon_restart_without_repeats() {
    use fsd_sdk::api::process::ProcessEvent;
    use futures_util::StreamExt;
    // A fixed port, so the client finds the daemon again after the restart.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut daemon = Daemon::start_with(fsd_tests::Options {
        listen: Some(format!("127.0.0.1:{port}")),
        ..fsd_tests::Options::default()
    });
    start(
        &daemon,
        json!({"command": "for i in $(seq 1 200); do echo line-$i; sleep 0.05; done", "processId": "talkative"}),
    )
    .await;
    let sandbox = daemon.sandbox();
    let mut events = sandbox.follow_process("talkative");
    let mut stdout = String::new();
    while stdout.matches('\n').count() < 5 {
        match events.next().await.unwrap().unwrap() {
            ProcessEvent::Stdout { data, .. } => stdout.push_str(&data),
            ProcessEvent::ProcessInfo { .. } => {}
            other => panic!("{other:?} before the restart"),
        }
    }
    // Down for a while (the follower retries meanwhile), then up again on the same port:
    // the process was ended with the daemon, and its record says what it printed.
    daemon.stop();
    let reading = tokio::spawn(async move {
        let mut infos = 0;
        let mut exit = None;
        while let Some(event) = events.next().await {
            match event.unwrap() {
                ProcessEvent::Stdout { data, .. } => stdout.push_str(&data),
                ProcessEvent::ProcessInfo { .. } => infos += 1,
                ProcessEvent::Exit { exit_code, .. } => exit = Some(exit_code),
                ProcessEvent::Stderr { .. } => {}
            }
        }
        (stdout, infos, exit)
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    daemon.resume();
    let (stdout, infos, exit) = reading.await.unwrap();
    assert_eq!(
        infos, 0,
        "process_info is told once, not again on each reconnect"
    );
    assert!(exit.is_some(), "the exit came after the reconnect");
    let lines: Vec<&str> = stdout.lines().collect();
    let expected: Vec<String> = (1..=lines.len()).map(|i| format!("line-{i}")).collect();
    assert_eq!(lines, expected, "every line once, in order");
    let (_, logs) = daemon.get("/api/process/talkative/logs").await;
    assert_eq!(
        logs["stdout"], stdout,
        "the follower has all the daemon kept"
    );
}

/// The body of a chunked HTTP/1.1 response read whole from `raw`.
fn dechunked(raw: &[u8]) -> Vec<u8> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let mut rest = &raw[head_end..];
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size");
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16).unwrap();
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
        rest = &rest[line_end + 2 + size + 2..];
    }
}

#[tokio::test]
async fn a_reader_that_falls_behind_a_stream_loses_nothing() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let daemon = Daemon::start();
    start(&daemon, json!({"command": "sleep 0.5; for i in $(seq 1 150000); do echo \"line-$i $i $i\"; done", "processId": "chatty"})).await;
    // A reader with a small receive buffer that reads nothing while the process runs: the
    // stream is held back far beyond the follower's queue of live events.
    let address: std::net::SocketAddr = daemon
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(address).await.unwrap();
    stream
        .write_all(
            b"GET /api/process/chatty/stream HTTP/1.1\r\nHost: fsd\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
    wait_status(&daemon, "chatty", "completed").await;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let body = String::from_utf8(dechunked(&raw)).unwrap();
    let frames = frames(&body);
    let stdout: String = frames
        .iter()
        .filter(|f| f["type"] == "stdout")
        .map(|f| f["data"].as_str().unwrap())
        .collect();
    let expected: String = (1..=150000)
        .map(|i| format!("line-{i} {i} {i}\n"))
        .collect();
    assert!(
        stdout == expected,
        "{} bytes of {}",
        stdout.len(),
        expected.len()
    );
    // Offsets only grow, each event's after the one before.
    let offsets: Vec<u64> = frames
        .iter()
        .filter(|f| f["type"] == "stdout")
        .map(|f| f["offset"].as_u64().unwrap())
        .collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets go back");
    assert_eq!(frames.last().unwrap()["type"], "exit");
}

/// How long a test waits for a frame of a stream it follows.
const FRAME_WAIT: Duration = Duration::from_secs(20);

/// Frames of `sse` up to the first `stdout` one holding `text`; the stdout data so far.
async fn stdout_until(sse: &mut Sse, text: &str) -> String {
    let mut stdout = String::new();
    while !stdout.contains(text) {
        let frame = sse.next(FRAME_WAIT).await.expect("the stream ended first");
        assert_ne!(frame["type"], "complete", "ended before {text:?}: {stdout}");
        if frame["type"] == "stdout" {
            stdout.push_str(frame["data"].as_str().unwrap());
        }
    }
    stdout
}

/// `foreground: true` runs a streamed command in the session's shell: `cd` and `export`
/// persist, output arrives while it runs, no process record is made. Without it, the stream
/// keeps the reference's background behaviour.
#[tokio::test]
async fn a_foreground_stream_runs_in_the_sessions_shell() {
    let daemon = Daemon::start();
    let dir = daemon.path("fg-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let gate = dir.join("gate-fg");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut live = Sse::open(
        &daemon,
        "/api/execute/stream",
        json!({
            "command": format!("cd {}; export FG=kept; echo first; read -r _ < gate-fg; echo second; echo err >&2", dir.display()),
            "sessionId": "fg",
            "foreground": true,
        }),
    )
    .await;
    let start = live.next(FRAME_WAIT).await.unwrap();
    assert_eq!(start["type"], "start");
    assert_eq!(start["sessionId"], "fg");
    assert!(start["commandId"].is_string(), "{start}");
    assert!(start.get("processId").is_none(), "{start}");
    // The first line comes while the command still waits at its gate.
    let stdout = stdout_until(&mut live, "first\n").await;
    assert_eq!(stdout, "first\n");
    std::fs::write(&gate, "go\n").unwrap();
    let rest = live.drain(FRAME_WAIT).await;
    let text = |kind: &str| -> String {
        rest.iter()
            .filter(|f| f["type"] == kind)
            .map(|f| f["data"].as_str().unwrap())
            .collect()
    };
    assert_eq!(text("stdout"), "second\n");
    assert_eq!(text("stderr"), "err\n");
    let last = rest.last().unwrap();
    assert_eq!(
        (&last["type"], &last["exitCode"]),
        (&json!("complete"), &json!(0))
    );

    let (_, after) = daemon
        .post(
            "/api/execute",
            json!({"command": "pwd; echo $FG", "sessionId": "fg"}),
        )
        .await;
    assert_eq!(after["stdout"], format!("{}\nkept\n", dir.display()));
    let (_, list) = daemon.get("/api/process/list").await;
    assert_eq!(list["processes"], json!([]), "{list}");

    // The reference's stream: a background copy of the session, which changes nothing in it.
    let frames = frames(
        &daemon
            .post_text(
                "/api/execute/stream",
                &json!({"command": "cd /; export FG=copy", "sessionId": "fg"}),
            )
            .await,
    );
    assert!(frames[0]["processId"].is_string());
    let (_, after) = daemon
        .post(
            "/api/execute",
            json!({"command": "pwd; echo $FG", "sessionId": "fg"}),
        )
        .await;
    assert_eq!(after["stdout"], format!("{}\nkept\n", dir.display()));
}

/// A foreground stream past its `timeoutMs` is stopped and says so in an `error` event with
/// the wire code; one whose reader goes away is stopped too, so the session is free again.
#[tokio::test]
async fn a_foreground_stream_is_stopped_at_its_timeout_or_when_its_reader_goes() {
    let daemon = Daemon::start();
    let frames = frames(
        &daemon
            .post_text(
                "/api/execute/stream",
                &json!({"command": "echo begun; sleep 30", "sessionId": "t", "foreground": true, "timeoutMs": 300}),
            )
            .await,
    );
    assert_eq!(frames[1]["data"], "begun\n", "{frames:?}");
    let last = frames.last().unwrap();
    assert_eq!(last["type"], "error", "{frames:?}");
    assert_eq!(last["code"], "COMMAND_EXECUTION_ERROR");
    assert_eq!(last["timedOut"], true);
    assert!(
        last["error"].as_str().unwrap().contains("timeout"),
        "{last}"
    );

    let marker = daemon.path("abandoned-marker");
    let mut live = Sse::open(
        &daemon,
        "/api/execute/stream",
        json!({"command": format!("echo begun; sleep 30; touch {}", marker.display()), "sessionId": "t", "foreground": true}),
    )
    .await;
    stdout_until(&mut live, "begun").await;
    drop(live);
    // The session answers its next command: the abandoned one was stopped, not waited for.
    let (status, after) = tokio::time::timeout(
        Duration::from_secs(15),
        daemon.post(
            "/api/execute",
            json!({"command": "echo free", "sessionId": "t"}),
        ),
    )
    .await
    .expect("the session is free again");
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(after["stdout"], "free\n");
    assert!(!marker.exists(), "the abandoned command ran on");
}

/// `/api/execute/stdin` writes the stdin of the command a foreground stream runs with
/// `stdinPipe`, as it comes (the command has started and answers each line), and `close`
/// is its end of file; the errors say which command, session or field.
#[tokio::test]
async fn a_foreground_streams_stdin_is_written_as_it_comes() {
    let daemon = Daemon::start();
    let mut live = Sse::open(
        &daemon,
        "/api/execute/stream",
        json!({"command": "while read l; do echo \"got $l\"; done; echo eof",
               "sessionId": "in", "foreground": true, "stdinPipe": true}),
    )
    .await;
    let start = live.next(FRAME_WAIT).await.unwrap();
    let command_id = start["commandId"].as_str().unwrap().to_string();
    let write = |data: &str, close: bool| json!({"sessionId": "in", "commandId": command_id, "data": data, "close": close});
    let (status, reply) = daemon
        .post("/api/execute/stdin", write("one\n", false))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(
        (&reply["written"], &reply["closed"]),
        (&json!(4), &json!(false))
    );
    stdout_until(&mut live, "got one").await;
    let (status, reply) = daemon
        .post(
            "/api/execute/stdin",
            json!({"sessionId": "in", "commandId": command_id, "data": "dHdvCg==",
                   "encoding": "base64", "close": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["closed"], true);
    let told = stdout_until(&mut live, "eof").await;
    assert_eq!(told, "got two\neof\n");
    let rest = live.drain(FRAME_WAIT).await;
    assert_eq!(rest.last().unwrap()["exitCode"], 0, "{rest:?}");
    // The command has ended: nothing more goes in.
    let (status, reply) = daemon
        .post("/api/execute/stdin", write("late", false))
        .await;
    assert_error(status, &reply, 409, "PROCESS_EXITED");
    assert_eq!(
        reply["context"]["commandId"],
        command_id.as_str(),
        "{reply}"
    );

    // A stream without stdinPipe reads no pipe.
    let mut live = Sse::open(
        &daemon,
        "/api/execute/stream",
        json!({"command": "echo waiting; sleep 30", "sessionId": "in", "foreground": true}),
    )
    .await;
    let start = live.next(FRAME_WAIT).await.unwrap();
    let other = start["commandId"].as_str().unwrap().to_string();
    stdout_until(&mut live, "waiting").await;
    let (status, reply) = daemon
        .post(
            "/api/execute/stdin",
            json!({"sessionId": "in", "commandId": other, "data": "x"}),
        )
        .await;
    assert_error(status, &reply, 409, "STDIN_NOT_PIPED");
    drop(live);

    // A command answered whole cannot be written to; a pipe is not also content.
    let (status, reply) = daemon
        .post("/api/execute", json!({"command": "cat", "stdinPipe": true}))
        .await;
    assert_validation(status, &reply, "stdinPipe");
    let (status, reply) = daemon
        .post(
            "/api/execute/stream",
            json!({"command": "cat", "foreground": true, "stdinPipe": true, "stdin": "x"}),
        )
        .await;
    assert_validation(status, &reply, "stdinPipe");
    let (status, reply) = daemon
        .post(
            "/api/execute/stdin",
            json!({"sessionId": "in", "commandId": "1", "data": "x", "encoding": "hex"}),
        )
        .await;
    assert_validation(status, &reply, "encoding");
    let (status, reply) = daemon
        .post(
            "/api/execute/stdin",
            json!({"sessionId": "none-such", "commandId": "1", "data": "x"}),
        )
        .await;
    assert_error(status, &reply, 404, "SESSION_NOT_FOUND");
}

/// `/api/execute/signal` reaches the command a foreground stream runs: a program that
/// handles SIGINT keeps running and printing; a signal for a command that has ended, or a
/// bad one, is said so.
#[tokio::test]
async fn a_signal_reaches_the_command_a_foreground_stream_runs() {
    if !available_or_skip(
        fsd_tests::on_path("python3"),
        "a_signal_reaches_the_command_a_foreground_stream_runs",
        "python3",
    ) {
        return;
    }
    let daemon = Daemon::start();
    std::fs::write(
        daemon.path("int-handler-7731.py"),
        "import signal, time\n\
         hits = []\n\
         signal.signal(signal.SIGINT, lambda *_: (hits.append(1), print('caught', len(hits), flush=True)))\n\
         print('ready', flush=True)\n\
         while len(hits) < 2:\n    time.sleep(0.01)\n\
         print('done', flush=True)\n",
    )
    .unwrap();
    let mut live = Sse::open(
        &daemon,
        "/api/execute/stream",
        json!({"command": "python3 -u int-handler-7731.py", "sessionId": "sig", "foreground": true}),
    )
    .await;
    let start = live.next(FRAME_WAIT).await.unwrap();
    let command_id = start["commandId"].as_str().unwrap().to_string();
    stdout_until(&mut live, "ready").await;
    let signal =
        |signal: Value| json!({"sessionId": "sig", "commandId": command_id, "signal": signal});
    let (status, reply) = daemon
        .post("/api/execute/signal", signal(json!("INT")))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(
        (&reply["signal"], &reply["running"]),
        (&json!("SIGINT"), &json!(true))
    );
    stdout_until(&mut live, "caught 1").await;
    // Still running after it: the program decides what SIGINT means.
    assert_eq!(fsd_tests::host_processes_with("int-handler-7731").len(), 1);
    daemon.post("/api/execute/signal", signal(json!(2))).await;
    stdout_until(&mut live, "done").await;
    let rest = live.drain(FRAME_WAIT).await;
    // The interrupt ends the command line once the program has ended, as in a terminal.
    assert_eq!(rest.last().unwrap()["exitCode"], 130, "{rest:?}");

    let (status, reply) = daemon
        .post("/api/execute/signal", signal(json!("INT")))
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["running"], false);
    let (status, reply) = daemon
        .post("/api/execute/signal", signal(json!("NOPE")))
        .await;
    assert_validation(status, &reply, "signal");
    let (status, reply) = daemon
        .post(
            "/api/execute/signal",
            json!({"sessionId": "sig", "commandId": "x", "signal": "INT"}),
        )
        .await;
    assert_validation(status, &reply, "commandId");
    let (status, reply) = daemon
        .post(
            "/api/execute/signal",
            json!({"sessionId": "none-such", "commandId": "1", "signal": "INT"}),
        )
        .await;
    assert_error(status, &reply, 404, "SESSION_NOT_FOUND");
}

/// bash's own errors read as `bash -c` prints them, not naming the files the session ran
/// the command from (its script, the driver's syntax check), with the command's own line
/// numbers: in the answer, the stream and a background process's logs.
#[tokio::test]
async fn bash_errors_read_as_bash_c_prints_them() {
    let daemon = Daemon::start();
    let state = daemon.state_dir().display().to_string();
    let run = |command: &str| {
        daemon.post(
            "/api/execute",
            json!({"command": command, "sessionId": "names"}),
        )
    };
    let (_, reply) = run("true\nnot_a_command_here").await;
    assert_eq!(
        reply["stderr"], "bash: line 2: not_a_command_here: command not found\n",
        "{reply}"
    );
    let (_, reply) = run("echo a\necho b\nif ( ; then").await;
    assert_eq!(reply["exitCode"], 2, "{reply}");
    assert_eq!(
        reply["stderr"],
        "bash: line 3: syntax error near unexpected token `;'\nbash: line 3: `if ( ; then'\n",
        "{reply}"
    );
    assert_eq!(
        reply["stdout"], "",
        "nothing of a command that does not parse runs"
    );
    let (_, reply) = run("if ( ; then").await;
    assert_eq!(
        reply["stderr"],
        "bash: line 1: syntax error near unexpected token `;'\nbash: line 1: `if ( ; then'\n",
        "{reply}"
    );
    let (_, reply) = run("f() { missing_in_a_function; }; f").await;
    assert_eq!(
        reply["stderr"], "bash: line 1: missing_in_a_function: command not found\n",
        "{reply}"
    );

    let mut live = Sse::open(
        &daemon,
        "/api/execute/stream",
        json!({"command": "echo out\nstreamed_missing", "sessionId": "names", "foreground": true}),
    )
    .await;
    let frames = live.drain(FRAME_WAIT).await;
    let stderr: String = frames
        .iter()
        .filter(|f| f["type"] == "stderr")
        .map(|f| f["data"].as_str().unwrap())
        .collect();
    assert_eq!(
        stderr,
        "bash: line 2: streamed_missing: command not found\n"
    );

    start(
        &daemon,
        json!({"command": "echo x\n\nbackground_missing", "processId": "names-bg"}),
    )
    .await;
    wait_status(&daemon, "names-bg", "failed").await;
    let (_, logs) = daemon.get("/api/process/names-bg/logs").await;
    assert_eq!(
        logs["stderr"], "bash: line 3: background_missing: command not found\n",
        "{logs}"
    );
    assert!(!logs.to_string().contains(&state), "{logs}");
}
