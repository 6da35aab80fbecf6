//! The container image, built with `scripts/build-image` from the fsd under test and run
//! with podman: the route API answers, an exec runs, a backup is created and restored
//! inside it, `podman stop` ends it cleanly, and with an image command (a plain `CMD`)
//! orphans are reaped by fsd as PID 1 and the command's exit code is the container's; an
//! image of a user's own with fsd copied in as its entry point runs its own `CMD`.

use std::process::Command;
use std::time::{Duration, Instant};

use fsctl::trusted::{BackupOptions, Backups};
use fsd_tests::s3::Store;
use fsd_tests::{available_or_skip, free_port, is_root, on_path, podman, repo_root};

const TAG: &str = "localhost/fsd:test";

/// A container that is removed when the test ends, with its anonymous volumes (the image
/// declares two).
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman(&["rm", "-f", "-v", "-t", "0", &self.0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_serves_backs_up_reaps_and_stops_cleanly() {
    let test = "the_image_serves_backs_up_reaps_and_stops_cleanly";
    if !available_or_skip(
        is_root() && on_path("podman") && on_path("mmdebstrap") && on_path("runc"),
        test,
        "root, podman, runc and mmdebstrap (.ci/run installs them)",
    ) {
        return;
    }
    let binary = fsd_tests::binary("fsd");
    let relative = binary
        .canonicalize()
        .unwrap()
        .strip_prefix(repo_root().canonicalize().unwrap())
        .unwrap()
        .to_path_buf();
    let built = Command::new(repo_root().join("scripts/build-image"))
        .arg(&relative)
        .env("FSD_IMAGE", TAG)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "scripts/build-image: {}",
        String::from_utf8_lossy(&built.stderr)
    );

    // The route API, on the host's network so the container reaches the loopback store.
    let started = Instant::now();
    let (container, url) = serving(TAG, &["--privileged"]).await;
    eprintln!("container start → /api/ping 200: {:?}", started.elapsed());
    let sandbox = fsd_sdk::Sandbox::connect(&url, None).unwrap();
    let ran = sandbox.exec("echo from-the-image; pwd").await.unwrap();
    assert_eq!(ran.stdout, "from-the-image\n/workspace\n");

    // Code contexts with the image's interpreters: Python (IPython) and TypeScript.
    for (language, code, expected) in [
        ("python", "x = 6\nx * 7", "42"),
        ("typescript", "const n: number = 6; n * 7", "42"),
    ] {
        assert_eq!(context_result(&sandbox, language, code).await, expected);
    }

    tools_of_the_reference_image(&sandbox, &url).await;

    // A backup made and restored inside the container (kernel mounts, privileged).
    sandbox
        .exec("mkdir -p project/src && echo hello > project/src/a.txt && seq 1000 > project/b.txt")
        .await
        .unwrap();
    let store = Store::start();
    let backups = Backups::new(store.object_store(None));
    let backup = backups
        .create_backup(&sandbox, "/workspace/project", BackupOptions::default())
        .await
        .expect("backup inside the image");
    sandbox.exec("rm -rf project").await.unwrap();
    backups
        .restore_backup(&sandbox, &backup.id, "/workspace/project", None)
        .await
        .expect("restore inside the image");
    let restored = sandbox
        .exec("cat project/src/a.txt; wc -l < project/b.txt")
        .await
        .unwrap();
    assert_eq!(restored.stdout, "hello\n1000\n");

    // The control server killed (the next suite's `runtime-incarnation`): the container
    // ends with it (PID 1 exits with the daemon's 128 + 9), and started again it answers
    // as a new incarnation of the runtime.
    let before = runtime_incarnation(&url).await;
    let killed = podman(&[
        "exec",
        &container.0,
        "sh",
        "-c",
        "kill -KILL $(cut -d' ' -f1 /proc/1/task/1/children)",
    ]);
    assert!(
        killed.status.success(),
        "{}",
        String::from_utf8_lossy(&killed.stderr)
    );
    let waited = podman(&["wait", &container.0]);
    assert_eq!(String::from_utf8_lossy(&waited.stdout).trim(), "137");
    let restarted = podman(&["start", &container.0]);
    assert!(
        restarted.status.success(),
        "{}",
        String::from_utf8_lossy(&restarted.stderr)
    );
    let after = runtime_incarnation(&url).await;
    assert_ne!(
        before, after,
        "a new incarnation after the control server ended"
    );

    // SIGTERM (podman stop, 10 s grace before SIGKILL): fsd ends cleanly, exit code 0.
    let stopped = podman(&["stop", "-t", "10", &container.0]);
    assert!(stopped.status.success());
    let code = podman(&["inspect", &container.0, "--format", "{{.State.ExitCode}}"]);
    assert_eq!(String::from_utf8_lossy(&code.stdout).trim(), "0");

    // An image command: its orphan is reaped by PID 1 (fsd), and its exit code is the
    // container's.
    let script = "sh -c 'sleep 1 &'; sleep 2; echo zombies=$(ps -eo stat= | grep -c '^Z'); \
                  echo pid1=$(cat /proc/1/comm); exit 7";
    let port = free_port();
    // No `--`: a CMD under fsd's entry point is the image's command as it stands.
    let exited = podman(&[
        "run",
        "--rm",
        "--network",
        "host",
        "-e",
        &format!("FSD_LISTEN=127.0.0.1:{port}"),
        TAG,
        "sh",
        "-c",
        script,
    ]);
    let out = String::from_utf8_lossy(&exited.stdout);
    assert_eq!(exited.status.code(), Some(7), "{out}");
    assert!(out.contains("zombies=0"), "{out}");
    assert!(out.contains("pid1=fsd"), "{out}");

    standalone_image_runs_its_own_command().await;
    the_python_image_has_the_data_stack(&relative).await;
}

/// What the reference's image gives every sandbox, present in fsd's: Node 24 with npm and
/// npx, Bun, and the tools users' commands call; `SANDBOX_VERSION` and `/api/version` name
/// the SDK release the image stands in for. A Bun server started as a background process
/// is found by the port watch and answers.
async fn tools_of_the_reference_image(sandbox: &fsd_sdk::Sandbox, url: &str) {
    let tools = [
        "node --version",
        "npm --version",
        "npx --version",
        "bun --version",
        "bunx --version",
        "jq --version",
        "file --version",
        "unzip -v",
        "zip -v",
        "wget --version",
        "curl --version",
        "git --version",
        "s3fs --version",
        "inotifywait --help 2>&1 | grep -q ^inotifywait",
        "ps --version",
        "python3 -c 'import IPython'",
    ];
    for tool in tools {
        let ran = sandbox
            .exec(&format!("{tool} >/dev/null 2>&1; echo $?"))
            .await
            .unwrap();
        assert_eq!(ran.stdout, "0\n", "{tool}: {ran:?}");
    }
    let node = sandbox.exec("node --version").await.unwrap().stdout;
    let major: u32 = node
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|major| major.parse().ok())
        .unwrap_or(0);
    assert!(major >= 24, "node {node}");
    let version = sandbox.exec("echo $SANDBOX_VERSION").await.unwrap().stdout;
    assert_eq!(version.trim(), fsd_api::system::COMPATIBLE_SDK_VERSION);
    let answer: serde_json::Value = reqwest::get(format!("{url}/api/version"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["version"], fsd_api::system::COMPATIBLE_SDK_VERSION);

    let port = free_port();
    let server = format!(
        "bun -e 'Bun.serve({{ port: {port}, hostname: \"127.0.0.1\", fetch: () => new Response(\"from bun\") }})'"
    );
    let started = sandbox
        .start_process(&fsd_sdk::api::process::StartProcessRequest {
            command: server,
            ..Default::default()
        })
        .await
        .unwrap();
    started
        .wait_for_port(
            port,
            fsd_sdk::PortProbe::http(),
            Some(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    let body = reqwest::get(format!("http://127.0.0.1:{port}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, "from bun");
    started.kill().await.unwrap();
}

/// The `-python` image: Python's data stack, in commands and in code contexts.
async fn the_python_image_has_the_data_stack(binary: &std::path::Path) {
    let tag = "localhost/fsd:test-python";
    let built = Command::new(repo_root().join("scripts/build-image"))
        .arg("--python")
        .arg(binary)
        .env("FSD_IMAGE", tag)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "scripts/build-image --python: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let (container, url) = serving(tag, &[]).await;
    let sandbox = fsd_sdk::Sandbox::connect(&url, None).unwrap();
    let imported = sandbox
        .exec("python3 -c 'import pandas, numpy, matplotlib; print(\"ok\")'")
        .await
        .unwrap();
    assert_eq!(imported.stdout, "ok\n", "{imported:?}");
    let sum = context_result(
        &sandbox,
        "python",
        "import pandas as pd\nint(pd.DataFrame({'a': [1, 2, 3]})['a'].sum())",
    )
    .await;
    assert_eq!(sum, "6");
    drop(container);
}

/// The reference's standalone way, as its own test image writes it: an image of the user's
/// own, `FROM` another base, with the runtime copied from where the reference's image keeps
/// it (`/container-server/sandbox`) to `/sandbox` as the entry point, none of fsd's
/// settings, and a `CMD` of its own (no `--`). It starts, serves without a token (as the
/// reference's runtime under its own name), and runs that command.
async fn standalone_image_runs_its_own_command() {
    let context = tempfile::tempdir().unwrap();
    std::fs::write(
        context.path().join("Containerfile"),
        format!(
            "FROM localhost/debian:bookworm-slim\n\
             COPY --from={TAG} /container-server/sandbox /sandbox\n\
             ENTRYPOINT [\"/sandbox\"]\n\
             CMD [\"sh\", \"-c\", \"echo ran > /tmp/standalone-command; exec sleep 600\"]\n"
        ),
    )
    .unwrap();
    let tag = "localhost/fsd-standalone:test";
    // Another test's `podman image prune` (scripts/build-image, run beside this one) can
    // take an image between its commit and its tag, and `run` then looks for it in a
    // registry: the image is built again (podman's race, not the image's).
    let mut tries = 0;
    let (container, url, started) = loop {
        let built = podman(&[
            "build",
            "--quiet",
            "-t",
            tag,
            context.path().to_str().unwrap(),
        ]);
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
        let started = Instant::now();
        match try_serving(tag, &[]).await {
            Ok((container, url)) => break (container, url, started),
            Err(why) if tries < 2 && why.contains("initializing source") => tries += 1,
            Err(why) => panic!("{why}"),
        }
    };
    let sandbox = fsd_sdk::Sandbox::connect(&url, None).unwrap();
    let mut seen = String::new();
    while seen != "ran\n" {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the image's command never ran: {seen:?}"
        );
        seen = sandbox
            .exec("cat /tmp/standalone-command 2>/dev/null")
            .await
            .unwrap()
            .stdout;
    }
    drop(container);
    let _ = podman(&["rmi", "-f", tag]);
}

/// The runtime's incarnation, as the next line's object asks for it on a new `/rpc`
/// socket (`utils.getRuntimeMetadata`), once the API answers (up to 30 s).
async fn runtime_incarnation(url: &str) -> String {
    let started = Instant::now();
    let ws = url.replacen("http", "ws", 1) + "/rpc";
    let mut socket = loop {
        match fsd_tests::ws::WsClient::connect_url(&ws, None).await {
            Ok(socket) => break socket,
            Err(err) => {
                assert!(started.elapsed() < Duration::from_secs(30), "{ws}: {err}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    socket
        .send_json(&serde_json::json!([
            "push",
            ["pipeline", 0, ["utils", "getRuntimeMetadata"], []]
        ]))
        .await;
    socket.send_json(&serde_json::json!(["pull", 1])).await;
    loop {
        let message = socket
            .next(Duration::from_secs(10))
            .await
            .expect("the runtime's metadata");
        if message[0] == "resolve" && message[1] == 1 {
            return message[2]["runtimeIncarnationID"]
                .as_str()
                .expect("an incarnation")
                .to_string();
        }
    }
}

/// Runs `image` detached on the host's network (with `extra` options) on a free port and
/// waits up to 30 s for its `/api/ping`; the container and its URL.
async fn serving(image: &str, extra: &[&str]) -> (Container, String) {
    try_serving(image, extra)
        .await
        .unwrap_or_else(|why| panic!("{why}"))
}

/// [`serving`], answering why `podman run` failed instead of failing.
async fn try_serving(image: &str, extra: &[&str]) -> Result<(Container, String), String> {
    let port = free_port();
    let listen = format!("FSD_LISTEN=127.0.0.1:{port}");
    let mut args = vec!["run", "-d", "--network", "host", "-e", &listen];
    args.extend_from_slice(extra);
    args.push(image);
    let run = podman(&args);
    if !run.status.success() {
        return Err(String::from_utf8_lossy(&run.stderr).into_owned());
    }
    let container = Container(String::from_utf8(run.stdout).unwrap().trim().to_string());
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let started = Instant::now();
    while http.get(format!("{url}/api/ping")).send().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no ping in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok((container, url))
}

/// The text result of `code` run in a fresh `language` context of `sandbox`.
async fn context_result(sandbox: &fsd_sdk::Sandbox, language: &str, code: &str) -> String {
    let context = sandbox
        .create_context(&fsd_sdk::api::interpreter::CreateContextRequest {
            language: Some(language.into()),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{language} context in the image: {e}"));
    let ran = sandbox
        .run_code_collected(&fsd_sdk::api::interpreter::ExecuteCodeRequest {
            context_id: context.context_id,
            code: code.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    ran.results
        .iter()
        .find_map(|r| r.result_format())
        .and_then(|(_, v)| v.as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{language}: no text result: {ran:?}"))
}
