//! Code contexts against the real daemon with real interpreters: Python (Debian's, with
//! matplotlib, pandas and IPython, which `.ci/run` installs) and Node (with `typescript`
//! from `tests/clients`).

use std::time::{Duration, Instant};

use base64::Engine;
use fsd_sdk::api::interpreter::{CodeEvent, CreateContextRequest, ExecuteCodeRequest};
use fsd_sdk::{Execution, Sandbox};
use fsd_tests::{Daemon, Options};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// The Python with the libraries the rich-output tests need.
const PYTHON: &str = "/usr/bin/python3";

/// A daemon whose contexts run Debian's Python and find `typescript`; `None` (a printed
/// skip, refused under CI) when that Python lacks matplotlib, pandas or IPython.
fn daemon(test: &str) -> Option<Daemon> {
    let ready = std::process::Command::new(PYTHON)
        .args(["-c", "import matplotlib, pandas, IPython"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !fsd_tests::available_or_skip(
        ready,
        test,
        "python3-matplotlib, python3-pandas and python3-ipython",
    ) {
        return None;
    }
    Some(Daemon::start_with(Options {
        extra_args: vec![
            "--interpreter-pool".into(),
            "1".into(),
            "--python".into(),
            PYTHON.into(),
            "--node-path".into(),
            concat!(env!("CARGO_MANIFEST_DIR"), "/clients/node_modules").into(),
        ],
        ..Options::default()
    }))
}

async fn context(sandbox: &Sandbox, language: &str) -> String {
    sandbox
        .create_context(&CreateContextRequest {
            language: Some(language.into()),
            ..CreateContextRequest::default()
        })
        .await
        .expect("context")
        .context_id
}

async fn run(sandbox: &Sandbox, id: &str, code: &str) -> Execution {
    run_with(sandbox, id, code, None).await
}

async fn run_with(sandbox: &Sandbox, id: &str, code: &str, timeout_ms: Option<u64>) -> Execution {
    sandbox
        .run_code_collected(&ExecuteCodeRequest {
            context_id: id.into(),
            code: code.into(),
            language: None,
            timeout_ms,
        })
        .await
        .expect("run")
}

/// The data of the one result of `format`.
fn result<'a>(execution: &'a Execution, format: &str) -> &'a Value {
    execution
        .results
        .iter()
        .find_map(|event| event.result_format().filter(|(f, _)| *f == format))
        .map(|(_, data)| data)
        .unwrap_or_else(|| panic!("no {format} result in {execution:?}"))
}

fn error_name(execution: &Execution) -> Option<(&str, &str, &[String])> {
    match &execution.error {
        Some(CodeEvent::Error {
            ename,
            evalue,
            traceback,
        }) => Some((ename, evalue, traceback)),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_rich_results_state_and_errors() {
    let Some(daemon) = daemon("interpreter::python_rich_results_state_and_errors") else {
        return;
    };
    let sandbox = daemon.sandbox();
    let id = context(&sandbox, "python").await;

    let plot = run(
        &sandbox,
        &id,
        "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title('squares')\nplt.show()",
    )
    .await;
    assert!(plot.error.is_none(), "{plot:?}");
    let png = base64::engine::general_purpose::STANDARD
        .decode(result(&plot, "png").as_str().expect("base64 text"))
        .expect("valid base64");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG signature");
    assert_eq!(&png[12..16], b"IHDR");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(width > 100 && height > 100, "{width}x{height}");

    let frame = run(
        &sandbox,
        &id,
        "import pandas as pd\npd.DataFrame({'name': ['a', 'b'], 'n': [1, 2]})",
    )
    .await;
    let html = result(&frame, "html").as_str().unwrap();
    assert!(
        html.contains("<table") && html.contains("<td>a</td>"),
        "{html}"
    );

    let dict = run(&sandbox, &id, "{'a': [1, 2], 'b': None}").await;
    assert_eq!(result(&dict, "json"), &json!({"a": [1, 2], "b": null}));

    // State persists; printing streams as stdout; the last value is the result.
    run(
        &sandbox,
        &id,
        "counter = 40\ndef bump():\n    global counter\n    counter += 1\n    return counter",
    )
    .await;
    let bumped = run(&sandbox, &id, "print('bumping')\nbump()\nbump()").await;
    assert_eq!(bumped.stdout, "bumping\n");
    assert_eq!(result(&bumped, "text"), "42");

    let failed = run(&sandbox, &id, "def f():\n    return 1 / 0\nf()").await;
    let (ename, evalue, traceback) = error_name(&failed).expect("an error event");
    assert_eq!((ename, evalue), ("ZeroDivisionError", "division by zero"));
    assert!(
        traceback.iter().any(|line| line.contains("in f")),
        "the traceback names the user's frames: {traceback:?}"
    );
    assert!(
        !traceback
            .iter()
            .any(|line| line.contains("python_executor")),
        "and not the executor's: {traceback:?}"
    );
    let syntax = run(&sandbox, &id, "x = (1,").await;
    assert_eq!(error_name(&syntax).map(|(n, _, _)| n), Some("SyntaxError"));
    // The context survived both.
    assert_eq!(result(&run(&sandbox, &id, "counter").await, "text"), "42");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_are_isolated_serialized_and_parallel() {
    let Some(daemon) = daemon("interpreter::contexts_are_isolated_serialized_and_parallel") else {
        return;
    };
    let sandbox = daemon.sandbox();
    let a = context(&sandbox, "python").await;
    let b = context(&sandbox, "python").await;
    run(&sandbox, &a, "secret = 'only in a'").await;
    let other = run(&sandbox, &b, "secret").await;
    assert_eq!(error_name(&other).map(|(n, _, _)| n), Some("NameError"));

    // Five concurrent calls in one context run one after another.
    run(&sandbox, &a, "import time\nn = 0").await;
    let calls = (0..5).map(|_| {
        let sandbox = sandbox.clone();
        let a = a.clone();
        async move {
            let execution = run(
                &sandbox,
                &a,
                "import time\nm = n\ntime.sleep(0.05)\nn = m + 1\nn",
            )
            .await;
            result(&execution, "text").as_str().unwrap().to_string()
        }
    });
    let mut seen: Vec<String> = futures_util::future::join_all(calls).await;
    seen.sort();
    assert_eq!(seen, ["1", "2", "3", "4", "5"], "no two calls overlapped");

    // Twelve contexts in parallel, each with its own state.
    let twelve = (0..12).map(|i| {
        let sandbox = sandbox.clone();
        async move {
            let language = if i % 2 == 0 { "python" } else { "javascript" };
            let id = context(&sandbox, language).await;
            let set = if language == "python" {
                format!("mine = {i}")
            } else {
                format!("var mine = {i}")
            };
            run(&sandbox, &id, &set).await;
            let got = run(&sandbox, &id, "mine").await;
            (i, result(&got, "text").as_str().unwrap().to_string())
        }
    });
    for (i, got) in futures_util::future::join_all(twelve).await {
        assert_eq!(got, i.to_string());
    }
    let listed = sandbox.list_contexts().await.unwrap();
    assert_eq!(listed.len(), 14);
    sandbox.delete_context(&b).await.unwrap();
    assert_eq!(sandbox.list_contexts().await.unwrap().len(), 13);
    let gone = sandbox
        .run_code_collected(&ExecuteCodeRequest {
            context_id: b.clone(),
            code: "1".into(),
            ..ExecuteCodeRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        gone.code(),
        Some(&fsd_sdk::ErrorCode::ContextNotFound),
        "{gone}"
    );
}

/// With nothing installed beside Node (no `typescript` package, as `fsctl up` on a fresh
/// machine runs it), a JavaScript cell with a top-level `await` runs with Node's own REPL
/// transform (it failed: `Cannot find module 'typescript'`), and a TypeScript cell says
/// what it needs where Node cannot strip types itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_top_level_await_runs_with_node_alone() {
    if !fsd_tests::available_or_skip(
        fsd_tests::on_path("node"),
        "interpreter::a_top_level_await_runs_with_node_alone",
        "node",
    ) {
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(Options {
        extra_args: vec![
            "--interpreter-pool".into(),
            "0".into(),
            "--node-path".into(),
            empty.path().to_str().unwrap().into(),
        ],
        ..Options::default()
    });
    let sandbox = daemon.sandbox();
    let js = context(&sandbox, "javascript").await;
    for (code, expected) in [
        ("await Promise.resolve(7)", "7"),
        ("const x = await Promise.resolve(41);\nx + 1", "42"),
        ("x", "41"),
        (
            "let { a, b: [c] } = await Promise.resolve({ a: 1, b: [2] });\nfunction sum() { return a + c }\nsum()",
            "3",
        ),
        ("[sum(), a, c].join(' ')", "'3 1 2'"),
        // Node's REPL refuses a top-level return; it runs as an async function.
        ("await Promise.resolve(); return 'returned'", "'returned'"),
    ] {
        let ran = run(&sandbox, &js, code).await;
        assert!(ran.error.is_none(), "{code}: {ran:?}");
        assert_eq!(result(&ran, "text"), expected, "{code}");
    }
    let ts = context(&sandbox, "typescript").await;
    let typed = run(&sandbox, &ts, "const n: number = 5;\nn").await;
    let node = std::process::Command::new("node")
        .args(["-p", "typeof require('module').stripTypeScriptTypes"])
        .output()
        .unwrap();
    if String::from_utf8_lossy(&node.stdout).trim() == "function" {
        assert!(typed.error.is_none(), "{typed:?}");
        assert_eq!(result(&typed, "text"), "5");
    } else {
        let (_, message, _) = error_name(&typed).expect("an error event");
        assert!(message.contains("Node 22.13"), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_and_typescript() {
    let Some(daemon) = daemon("interpreter::javascript_and_typescript") else {
        return;
    };
    let sandbox = daemon.sandbox();
    let js = context(&sandbox, "js").await;
    let first = run(
        &sandbox,
        &js,
        "const base = 40; console.log('set'); ({ base })",
    )
    .await;
    assert_eq!(first.stdout, "set\n");
    assert_eq!(result(&first, "json"), &json!({"base": 40}));
    assert_eq!(result(&run(&sandbox, &js, "base + 2").await, "text"), "42");
    let awaited = run(
        &sandbox,
        &js,
        "await new Promise((r) => setTimeout(r, 20)); globalThis.later = 'kept'; return 'awaited'",
    )
    .await;
    assert_eq!(result(&awaited, "text"), "'awaited'");
    assert_eq!(result(&run(&sandbox, &js, "later").await, "text"), "'kept'");
    // A top-level `await` cell as the reference (and Node's REPL) runs it: the last
    // statement's value is the result, a last declaration's value too, and declarations
    // stay for the next call, functions and classes included.
    for (code, expected) in [
        ("await Promise.resolve(7)", "7"),
        ("const result = await Promise.resolve(42);\nresult", "42"),
        ("const persistedValue = await Promise.resolve(99);", "99"),
        ("persistedValue", "99"),
        (
            "let { a, b: [c] } = await Promise.resolve({ a: 1, b: [2] });\nfunction sum() { return a + c }\nclass Kept {}\nsum()",
            "3",
        ),
        ("[sum(), typeof Kept, a, c].join(' ')", "'3 function 1 2'"),
    ] {
        let ran = run(&sandbox, &js, code).await;
        assert!(ran.error.is_none(), "{code}: {ran:?}");
        assert_eq!(result(&ran, "text"), expected, "{code}");
    }
    let thrown = run(
        &sandbox,
        &js,
        "function boom() { throw new TypeError('bad input') }\nboom()",
    )
    .await;
    let (ename, evalue, traceback) = error_name(&thrown).expect("an error event");
    assert_eq!((ename, evalue), ("TypeError", "bad input"));
    assert!(
        traceback.iter().any(|l| l.contains("boom")),
        "{traceback:?}"
    );
    assert!(
        !traceback.iter().any(|l| l.contains("node_executor")),
        "{traceback:?}"
    );

    let ts = context(&sandbox, "typescript").await;
    let typed = run(
        &sandbox,
        &ts,
        "interface Point { x: number; y: number }\nconst p: Point = { x: 3, y: 4 };\nconst len = (q: Point): number => Math.hypot(q.x, q.y);\nlen(p)",
    )
    .await;
    assert!(typed.error.is_none(), "{typed:?}");
    assert_eq!(result(&typed, "text"), "5");
    let awaited = run(
        &sandbox,
        &ts,
        "const later: number = await Promise.resolve(len(p) * 2);",
    )
    .await;
    assert_eq!(result(&awaited, "text"), "10", "{awaited:?}");
    assert_eq!(result(&run(&sandbox, &ts, "later + 1").await, "text"), "11");
    let wrong = sandbox
        .run_code_collected(&ExecuteCodeRequest {
            context_id: ts.clone(),
            code: "1".into(),
            language: Some("python".into()),
            timeout_ms: None,
        })
        .await
        .unwrap_err();
    assert_eq!(wrong.code(), Some(&fsd_sdk::ErrorCode::CodeExecutionError));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_streams_and_cwd_and_env_apply() {
    let Some(daemon) = daemon("interpreter::output_streams_and_cwd_and_env_apply") else {
        return;
    };
    std::fs::create_dir(daemon.path("proj")).unwrap();
    let sandbox = daemon.sandbox();
    let id = sandbox
        .create_context(&CreateContextRequest {
            language: Some("python".into()),
            cwd: Some("proj".into()),
            env_vars: Some([("GREETING".to_string(), "hello".to_string())].into()),
        })
        .await
        .unwrap();
    assert_eq!(id.cwd, daemon.path("proj").display().to_string());
    let here = run(&sandbox, &id.context_id, "import os, subprocess\nprint(os.getcwd())\nprint(subprocess.run(['sh', '-c', 'echo $GREETING'], capture_output=True, text=True).stdout.strip())").await;
    assert_eq!(
        here.stdout,
        format!("{}\nhello\n", daemon.path("proj").display())
    );

    // The first line arrives while the cell still sleeps.
    let started = Instant::now();
    let mut events = sandbox
        .run_code(&ExecuteCodeRequest {
            context_id: id.context_id.clone(),
            code: "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')"
                .into(),
            ..ExecuteCodeRequest::default()
        })
        .await
        .unwrap();
    let mut first_at = None;
    let mut end_at = None;
    while let Some(event) = events.next().await {
        match event.unwrap() {
            CodeEvent::Stdout { text } if text.contains("first") && first_at.is_none() => {
                first_at = Some(started.elapsed())
            }
            CodeEvent::ExecutionComplete { .. } => end_at = Some(started.elapsed()),
            _ => {}
        }
    }
    let (first_at, end_at) = (first_at.expect("first line"), end_at.expect("completion"));
    assert!(
        end_at >= first_at + Duration::from_millis(1000),
        "the first line came at {first_at:?}, before the call ended at {end_at:?}"
    );

    // Output written after a call returned (a thread, a timer) cannot break the protocol.
    let late = run(
        &sandbox,
        &id.context_id,
        "import threading, os, time\nthreading.Thread(target=lambda: (time.sleep(0.2), os.write(1, b'late\\n'), os.write(2, b'late\\n'))).start()\n'returned'",
    )
    .await;
    assert_eq!(result(&late, "text"), "'returned'");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        result(&run(&sandbox, &id.context_id, "6 * 7").await, "text"),
        "42"
    );
    let js = context(&sandbox, "javascript").await;
    run(&sandbox, &js, "setTimeout(() => { console.log('late'); process.stdout.write('{\"type\":\"done\"}\\n') }, 100); 1").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(result(&run(&sandbox, &js, "6 * 7").await, "text"), "42");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_interrupt_and_dead_executors_say_so() {
    let Some(daemon) = daemon("interpreter::timeouts_interrupt_and_dead_executors_say_so") else {
        return;
    };
    let sandbox = daemon.sandbox();
    let id = context(&sandbox, "python").await;
    run(&sandbox, &id, "kept = 'state'").await;
    let looped = run_with(&sandbox, &id, "while True:\n    pass", Some(500)).await;
    let (ename, evalue, _) = error_name(&looped).expect("a timeout error");
    assert_eq!(ename, "TimeoutError");
    assert!(evalue.contains("keeps its state"), "{evalue}");
    assert_eq!(result(&run(&sandbox, &id, "kept").await, "text"), "'state'");

    // Code that ignores the interrupt: the executor is replaced and says so.
    let stubborn = run_with(
        &sandbox,
        &id,
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.01)",
        Some(500),
    )
    .await;
    let (ename, evalue, _) = error_name(&stubborn).expect("a timeout error");
    assert_eq!(ename, "TimeoutError");
    assert!(evalue.contains("restarted"), "{evalue}");
    let after = run(&sandbox, &id, "kept").await;
    assert_eq!(
        error_name(&after).map(|(n, _, _)| n),
        Some("NameError"),
        "fresh state"
    );

    // The executor is in the sandbox's process world: a command sees it and can kill it.
    let js = context(&sandbox, "javascript").await;
    let mut events = sandbox
        .run_code(&ExecuteCodeRequest {
            context_id: js.clone(),
            code: "await new Promise(() => {})".into(),
            ..ExecuteCodeRequest::default()
        })
        .await
        .unwrap();
    let (status, body) = daemon
        .post(
            "/api/execute",
            json!({"command": "pkill -9 -f '[n]ode .*node_executor' && echo killed", "sessionId": "__DISABLE_SESSION__"}),
        )
        .await;
    assert_eq!(body["stdout"], "killed\n", "{status} {body}");
    let mut last = None;
    while let Some(event) = events.next().await {
        last = Some(event.unwrap());
    }
    match last {
        Some(CodeEvent::Error { ename, .. }) => assert_eq!(ename, "ExecutorDied"),
        other => panic!("the call ended with {other:?}"),
    }
    let dead = sandbox
        .run_code_collected(&ExecuteCodeRequest {
            context_id: js.clone(),
            code: "1".into(),
            ..ExecuteCodeRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        dead.code(),
        Some(&fsd_sdk::ErrorCode::InternalError),
        "{dead}"
    );
    assert!(dead.to_string().contains("recreate"), "{dead}");

    // Deleting a context ends a call in progress.
    let busy = context(&sandbox, "python").await;
    let call = {
        let sandbox = sandbox.clone();
        let busy = busy.clone();
        tokio::spawn(async move { run(&sandbox, &busy, "import time\ntime.sleep(60)").await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    sandbox.delete_context(&busy).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call ended with its context")
        .unwrap();
    assert!(ended.error.is_some(), "{ended:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsctl_run_prints_text_and_saves_images() {
    let Some(daemon) = daemon("interpreter::fsctl_run_prints_text_and_saves_images") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let script = out.path().join("plot.py");
    std::fs::write(
        &script,
        "import matplotlib.pyplot as plt\nprint('plotting')\nplt.bar([1, 2], [3, 4])\nplt.show()\n'done'\n",
    )
    .unwrap();
    let output = std::process::Command::new(fsd_tests::binary("fsctl"))
        .args(["--url", &daemon.url, "run", "--out"])
        .arg(out.path())
        .arg(&script)
        .output()
        .unwrap();
    let stdout = fsd_tests::succeeded(&output);
    assert_eq!(stdout, "plotting\n'done'\n");
    let png = std::fs::read(out.path().join("result-1.png")).expect("the saved plot");
    assert_eq!(&png[..4], b"\x89PNG");
    let failed = std::process::Command::new(fsd_tests::binary("fsctl"))
        .args(["--url", &daemon.url, "run", "--lang", "js", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"throw new Error('nope')")?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(failed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&failed.stderr).contains("Error: nope"));
    assert!(
        daemon.sandbox().list_contexts().await.unwrap().is_empty(),
        "fsctl run cleans up"
    );
}

/// A call's events as `out:…` (consecutive output joined), `result:…` and the end, in the
/// order they came.
async fn ordered(sandbox: &Sandbox, id: &str, code: &str) -> Vec<String> {
    let mut events = sandbox
        .run_code(&ExecuteCodeRequest {
            context_id: id.into(),
            code: code.into(),
            ..ExecuteCodeRequest::default()
        })
        .await
        .unwrap();
    let mut seen: Vec<String> = Vec::new();
    while let Some(event) = events.next().await {
        let event = event.unwrap();
        let entry = match &event {
            CodeEvent::Stdout { text } => format!("out:{text}"),
            CodeEvent::ExecutionComplete { .. } => "complete".to_string(),
            CodeEvent::Error { ename, .. } => format!("error:{ename}"),
            other => match other.result_format() {
                Some((_, data)) => format!("result:{}", data.as_str().unwrap_or_default()),
                None => continue,
            },
        };
        match (seen.last_mut(), entry.strip_prefix("out:")) {
            (Some(last), Some(more)) if last.starts_with("out:") => last.push_str(more),
            _ => seen.push(entry),
        }
    }
    seen
}

#[tokio::test]
async fn results_come_after_the_output_printed_before_them() {
    let Some(daemon) = daemon("interpreter::results_come_after_the_output_printed_before_them")
    else {
        return;
    };
    let sandbox = daemon.sandbox();
    let python = context(&sandbox, "python").await;
    let js = context(&sandbox, "javascript").await;
    // Repeated: the frame and the output come on different pipes, so an order that held
    // by luck would show here.
    for _ in 0..20 {
        let seen = ordered(
            &sandbox,
            &python,
            "print('before')\ndisplay('shown')\nprint('after')\n'last'",
        )
        .await;
        assert_eq!(
            seen,
            [
                "out:before\n",
                "result:'shown'",
                "out:after\n",
                "result:'last'",
                "complete"
            ]
        );
        let seen = ordered(&sandbox, &js, "console.log('before'); 6 * 7").await;
        assert_eq!(seen, ["out:before\n", "result:42", "complete"]);
    }
    // Code that takes fd 1 away still gets its result, at the end.
    let seen = ordered(&sandbox, &python, "import os\nos.close(1)\n7").await;
    assert_eq!(seen, ["result:7", "complete"]);
    // A context's dates: made once, used at each call.
    let listed = sandbox.list_contexts().await.unwrap();
    let info = listed.iter().find(|c| c.id == python).unwrap();
    assert!(
        info.created_at.ends_with('Z') && info.last_used > info.created_at,
        "{info:?}"
    );
}

/// A code context standing in a directory when a restore is mounted on it works in what the
/// restore shows from its next cell on (Python and JavaScript alike): it reads the restored
/// files and what it writes is seen by everyone else, where its own directory, hidden by
/// the mount, would have given it the replaced files and kept its writes out of sight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_standing_in_a_restored_directory_works_in_what_it_shows() {
    let test = "interpreter::a_context_standing_in_a_restored_directory_works_in_what_it_shows";
    if !fsd_tests::require_mount_privilege(test) {
        return;
    }
    let Some(daemon) = daemon(test) else {
        return;
    };
    let dir = daemon.path("w");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "snapshot").unwrap();
    let archive = format!("/var/backups/context-standing-{}.sqsh", std::process::id());
    daemon
        .posted(
            "/api/backup/create",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    std::fs::write(dir.join("a.txt"), "after").unwrap();
    let sandbox = daemon.sandbox();
    let mut contexts = Vec::new();
    for (language, read) in [
        ("python", "print(open('a.txt').read())"),
        (
            "javascript",
            "console.log(require('fs').readFileSync('a.txt', 'utf8'))",
        ),
    ] {
        let id = sandbox
            .create_context(&CreateContextRequest {
                language: Some(language.into()),
                cwd: Some("w".into()),
                env_vars: None,
            })
            .await
            .unwrap()
            .context_id;
        assert_eq!(
            run(&sandbox, &id, read).await.stdout,
            "after\n",
            "{language}"
        );
        contexts.push((language, id, read));
    }
    let answer = daemon
        .posted(
            "/api/backup/restore",
            json!({"dir": dir, "archivePath": archive}),
        )
        .await;
    assert!(
        answer.get("processesLeftBehind").is_none(),
        "contexts follow their directory: none is left behind: {answer}"
    );
    for (language, id, read) in &contexts {
        assert_eq!(
            run(&sandbox, id, read).await.stdout,
            "snapshot\n",
            "{language} reads what the restore shows"
        );
        let write = if *language == "python" {
            format!("open('{language}.txt', 'w').write('made')")
        } else {
            format!("require('fs').writeFileSync('{language}.txt', 'made')")
        };
        let made = run(&sandbox, id, &write).await;
        assert!(made.error.is_none(), "{language}: {made:?}");
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("{language}.txt"))).unwrap_or_default(),
            "made",
            "{language}'s write is in what the directory shows"
        );
    }
    daemon
        .posted("/api/backup/unmount", json!({"dir": dir}))
        .await;
    for (language, id, read) in &contexts {
        assert_eq!(
            run(&sandbox, id, read).await.stdout,
            "after\n",
            "{language}: after the release, what the directory held before"
        );
    }
    fsd_tests::remove_archive(&archive);
}
