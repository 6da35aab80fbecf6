//! fsd's Worker and Durable Object under workerd (`wrangler dev`), with fsd's image as the
//! container on podman: the route API, streams, WebSockets and terminals through the Worker,
//! preview URLs, lifecycle, backups through the object against an S3-compatible store
//! standing in for R2, the credential proxy's refusals, and where the Worker's secrets go.
//!
//! One stack serves most tests (each its own sandbox, so its own container); the lifecycle
//! tests run a second one with a short `SLEEP_AFTER` and no R2 secrets. Without the
//! toolchain (`scripts/dev-cloudflare tools`) they skip, unless `CI=true`.

use std::sync::OnceLock;
use std::time::Duration;

use fsd_tests::cloudflare::{self, Stack, Worker};
use fsd_tests::s3::{self, Store};
use fsd_tests::ws::WsClient;
use futures_util::{SinkExt, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// What callers of the Worker present (its `FSD_TOKEN`).
const WORKER_TOKEN: &str = "worker-secret-7f3a9c1e5b2d4f60";

/// The stack most tests share, with its store; stopped when the test process exits.
struct Main {
    stack: Stack,
    store: Store,
}

fn main_stack(test: &str) -> Option<&'static Main> {
    static MAIN: OnceLock<Main> = OnceLock::new();
    if !cloudflare::available(test) {
        return None;
    }
    Some(MAIN.get_or_init(|| {
        // The object signs for this endpoint and the container PUTs to it: an address both
        // the host and the containers reach.
        let host = cloudflare::host_address();
        let store = Store::start_on(&format!("{host}:0"));
        cloudflare::at_exit::stop(store.pid());
        let stack = Stack::start(
            Worker::Fsd,
            &[
                ("FSD_TOKEN", WORKER_TOKEN),
                ("R2_ENDPOINT", &store.url),
                ("R2_ACCESS_KEY_ID", s3::ACCESS_KEY),
                ("R2_SECRET_ACCESS_KEY", s3::SECRET_KEY),
                ("R2_BUCKET", s3::BUCKET),
            ],
        );
        Main { stack, store }
    }))
}

/// Calls to one sandbox behind the Worker.
struct Sandbox {
    base: String,
    http: reqwest::Client,
}

impl Sandbox {
    fn new(stack: &Stack, id: &str) -> Sandbox {
        Sandbox {
            base: format!("{}/sandboxes/{id}", stack.url),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(180))
                .build()
                .expect("client"),
        }
    }

    fn url(&self, route: &str) -> String {
        format!("{}{route}", self.base)
    }

    fn request(&self, method: Method, route: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(route))
            .bearer_auth(WORKER_TOKEN)
    }

    async fn post(&self, route: &str, body: Value) -> (StatusCode, Value) {
        fsd_tests::reply(self.request(Method::POST, route).json(&body)).await
    }

    async fn get(&self, route: &str) -> (StatusCode, Value) {
        fsd_tests::reply(self.request(Method::GET, route)).await
    }

    /// Runs `command` and answers its stdout; panics unless it exits 0.
    async fn run(&self, command: &str) -> String {
        let (status, body) = self.post("/api/execute", json!({"command": command})).await;
        assert_eq!(status, 200, "{command}: {body}");
        assert_eq!(body["exitCode"], 0, "{command}: {body}");
        body["stdout"].as_str().unwrap_or_default().to_string()
    }

    /// An SSE answer's events, read until `done` says so (or the stream ends).
    async fn events(
        &self,
        request: reqwest::RequestBuilder,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let response = request.send().await.expect("request");
        assert_eq!(response.status(), 200);
        let mut stream = response.bytes_stream();
        let mut text = String::new();
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !done(&events) {
            let Ok(Some(chunk)) = tokio::time::timeout_at(deadline, stream.next()).await else {
                break;
            };
            text.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                for line in block.lines() {
                    if let Some(data) = line.strip_prefix("data:") {
                        events.push(serde_json::from_str(data.trim()).expect("event JSON"));
                    }
                }
            }
        }
        events
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_and_its_stream_run_through_the_worker() {
    let Some(main) = main_stack("worker_stack::exec") else {
        return;
    };
    let sandbox = Sandbox::new(&main.stack, "exec");
    let (status, body) = sandbox
        .post(
            "/api/execute",
            json!({"command": "printf 'a\\nb'; echo oops >&2; sh -c 'exit 3'"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stdout"], "a\nb");
    assert_eq!(body["stderr"], "oops\n");
    assert_eq!(body["exitCode"], 3);

    let request = sandbox
        .request(Method::POST, "/api/execute/stream")
        .json(&json!({"command": "echo one; sleep 0.2; echo two"}));
    let events = sandbox
        .events(request, |events| {
            events.iter().any(|e| e["type"] == "complete")
        })
        .await;
    let stdout: String = events
        .iter()
        .filter(|e| e["type"] == "stdout")
        .filter_map(|e| e["data"].as_str())
        .collect();
    assert_eq!(stdout, "one\ntwo\n");
    let complete = events.iter().find(|e| e["type"] == "complete").unwrap();
    assert_eq!(complete["exitCode"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn file_routes_json_and_raw_run_through_the_worker() {
    let Some(main) = main_stack("worker_stack::files") else {
        return;
    };
    let sandbox = Sandbox::new(&main.stack, "files");
    let (status, body) = sandbox
        .post(
            "/api/write",
            json!({"path": "notes/todo.txt", "content": "ship it\n"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = sandbox
        .post("/api/read", json!({"path": "notes/todo.txt"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["content"], "ship it\n");

    // 1 MiB raw, up and down, whole and ranged.
    let bytes = fsd_tests::noise(1 << 20, 29);
    let put = sandbox
        .request(Method::PUT, "/api/files/raw?path=data/big.bin")
        .body(bytes.clone())
        .send()
        .await
        .expect("raw PUT");
    assert_eq!(put.status(), 200);
    let got = sandbox
        .request(Method::GET, "/api/files/raw?path=data/big.bin")
        .send()
        .await
        .expect("raw GET");
    assert_eq!(got.status(), 200);
    assert!(got.bytes().await.unwrap() == bytes);
    let ranged = sandbox
        .request(Method::GET, "/api/files/raw?path=data/big.bin")
        .header("range", "bytes=1000-1999")
        .send()
        .await
        .expect("ranged GET");
    assert_eq!(ranged.status(), 206);
    assert!(ranged.bytes().await.unwrap() == bytes[1000..2000]);

    let (status, body) = sandbox
        .post(
            "/api/list-files",
            json!({"path": ".", "options": {"recursive": true}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut names: Vec<&str> = body["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["relativePath"].as_str())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["data", "data/big.bin", "notes", "notes/todo.txt"],
        "{body}"
    );
    // What one route wrote, a command sees.
    assert_eq!(
        sandbox.run("cat /workspace/notes/todo.txt").await,
        "ship it\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn processes_start_log_and_die_through_the_worker() {
    let Some(main) = main_stack("worker_stack::processes") else {
        return;
    };
    let sandbox = Sandbox::new(&main.stack, "processes");
    let (status, body) = sandbox
        .post(
            "/api/process/start",
            json!({"command": "echo started; sleep 600", "processId": "sleeper"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let pid = body["pid"].as_u64().expect("pid");
    // Another route sees it: a command in the sandbox finds the pid.
    let found = sandbox.run(&format!("kill -0 {pid} && echo alive")).await;
    assert_eq!(found, "alive\n");
    let mut logs = Value::Null;
    for _ in 0..50 {
        logs = sandbox.get("/api/process/sleeper/logs").await.1;
        if logs["stdout"] == "started\n" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(logs["stdout"], "started\n", "{logs}");
    let (status, body) =
        fsd_tests::reply(sandbox.request(Method::DELETE, "/api/process/sleeper")).await;
    assert_eq!(status, 200, "{body}");
    let mut state = Value::Null;
    for _ in 0..100 {
        state = sandbox.get("/api/process/sleeper").await.1;
        if state["process"]["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(state["process"]["status"], "killed", "{state}");
    let gone = sandbox
        .post("/api/execute", json!({"command": format!("kill -0 {pid}")}))
        .await
        .1;
    assert_ne!(gone["exitCode"], 0, "{gone}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_streams_an_api_write_through_the_worker() {
    let Some(main) = main_stack("worker_stack::watch") else {
        return;
    };
    let sandbox = Sandbox::new(&main.stack, "watch");
    sandbox.run("mkdir -p /workspace/watched").await;
    let request = sandbox
        .request(Method::POST, "/api/watch")
        .json(&json!({"path": "/workspace/watched", "recursive": true}));
    let response = request.send().await.expect("watch");
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut wrote = false;
    while !text.contains("hello.txt") {
        if !wrote && text.contains("\"watching\"") {
            let (status, body) = sandbox
                .post(
                    "/api/write",
                    json!({"path": "/workspace/watched/hello.txt", "content": "x"}),
                )
                .await;
            assert_eq!(status, 200, "{body}");
            wrote = true;
        }
        let chunk = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("no event for the write; stream so far: {text}"))
            .expect("stream open")
            .expect("chunk");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(wrote, "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_carries_requests_and_streams_through_the_worker() {
    let Some(main) = main_stack("worker_stack::ws") else {
        return;
    };
    let sandbox = Sandbox::new(&main.stack, "ws");
    let mut client = WsClient::connect_url(&sandbox.url("/ws"), Some(WORKER_TOKEN))
        .await
        .expect("WebSocket upgrade through the Worker");
    let answer = client
        .call(
            "1",
            "POST",
            "/api/execute",
            Some(json!({"command": "echo through"})),
        )
        .await;
    assert_eq!(answer.last["type"], "response", "{:?}", answer.last);
    assert_eq!(answer.last["body"]["stdout"], "through\n");
    let answer = client
        .call(
            "2",
            "POST",
            "/api/execute/stream",
            Some(json!({"command": "echo a; echo b"})),
        )
        .await;
    let stdout: String = answer
        .events
        .iter()
        .filter(|e| e["type"] == "stdout")
        .filter_map(|e| e["data"].as_str())
        .collect();
    assert_eq!(stdout, "a\nb\n", "{:?}", answer.events);
    // Without the Worker's token there is no socket.
    assert!(
        WsClient::connect_url(&sandbox.url("/ws"), None)
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_echoes_resizes_and_exits_through_the_worker() {
    let Some(main) = main_stack("worker_stack::terminal") else {
        return;
    };
    let sandbox = Sandbox::new(&main.stack, "terminal");
    let url = sandbox.url("/ws/pty?sessionId=term&cols=80&rows=24");
    let mut client = WsClient::connect_url(&url, Some(WORKER_TOKEN))
        .await
        .expect("terminal upgrade through the Worker");
    let mut screen = String::new();
    let mut control: Vec<Value> = Vec::new();
    let mut closed = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut step = 0;
    while closed.is_none() {
        let ready = control.iter().any(|c| c["type"] == "ready");
        if step == 0 && ready {
            client
                .socket
                .send(Message::Binary(b"echo hi-$((40+2))\r".to_vec().into()))
                .await
                .unwrap();
            step = 1;
        } else if step == 1 && screen.contains("hi-42") {
            client
                .send_json(&json!({"type": "resize", "cols": 123, "rows": 45}))
                .await;
            client
                .socket
                .send(Message::Binary(b"stty size\r".to_vec().into()))
                .await
                .unwrap();
            step = 2;
        } else if step == 2 && screen.contains("45 123") {
            client
                .socket
                .send(Message::Binary(b"exit 7\r".to_vec().into()))
                .await
                .unwrap();
            step = 3;
        }
        let frame = tokio::time::timeout_at(deadline, client.socket.next())
            .await
            .unwrap_or_else(|_| panic!("terminal stalled at step {step}; screen: {screen:?}"));
        match frame {
            Some(Ok(Message::Binary(bytes))) => screen.push_str(&String::from_utf8_lossy(&bytes)),
            Some(Ok(Message::Text(text))) => control.push(serde_json::from_str(&text).unwrap()),
            Some(Ok(Message::Close(frame))) => {
                closed = Some(frame.map_or(1005, |f| u16::from(f.code)));
            }
            Some(Ok(_)) => {}
            None | Some(Err(_)) => closed = Some(1006),
        }
    }
    assert_eq!(step, 3, "screen: {screen:?}");
    let exit = control
        .iter()
        .find(|c| c["type"] == "exit")
        .unwrap_or_else(|| panic!("no exit message: {control:?}"));
    assert_eq!(exit["code"], 7, "{exit}");
    assert_eq!(closed, Some(1000));
}

/// A request to a preview host, through the Worker's port.
async fn preview(stack: &Stack, url: &str, headers: &[(&str, &str)]) -> (StatusCode, String) {
    let host = url
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let mut request = reqwest::Client::new()
        .get(format!("{}/", stack.url))
        .header("host", host)
        .timeout(Duration::from_secs(120));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("preview request");
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

/// Serves, on `port` in the sandbox, the request headers each request brought (and logs
/// them in `log`).
const HEADER_LOGGER: &str = r#"
import http.server, sys
log = open(sys.argv[2], "a")
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        text = str(self.headers)
        log.write(text); log.flush()
        body = ("served " + self.path + "\n" + text).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
"#;

/// The header logger on `port`, exposed on `hostname`: its preview URL and token.
async fn exposed_logger(sandbox: &Sandbox, port: u16, hostname: &str) -> (String, String) {
    start_header_logger(sandbox, port).await;
    let (status, exposed) = sandbox
        .post("/expose", json!({"port": port, "hostname": hostname}))
        .await;
    assert_eq!(status, 200, "{exposed}");
    let url = exposed["url"].as_str().expect("url").to_string();
    let token = exposed["token"].as_str().expect("token").to_string();
    (url, token)
}

async fn start_header_logger(sandbox: &Sandbox, port: u16) {
    let (status, body) = sandbox
        .post(
            "/api/write",
            json!({"path": "/opt/logger.py", "content": HEADER_LOGGER}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = sandbox
        .post(
            "/api/process/start",
            json!({
                "command": format!("python3 /opt/logger.py {port} /tmp/headers-{port}.log"),
                "processId": format!("logger-{port}"),
            }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = sandbox
        .post(
            &format!("/api/process/logger-{port}/wait-for-port"),
            json!({"port": port, "timeout": 30000}),
        )
        .await;
    assert!(
        status == 200 || status == 404,
        "wait-for-port: {status} {body}"
    );
    for _ in 0..100 {
        let up = sandbox
            .post(
                "/api/execute",
                json!({"command": format!("curl -sf localhost:{port}/ >/dev/null")}),
            )
            .await
            .1;
        if up["exitCode"] == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the header logger did not come up on {port}");
}

#[tokio::test(flavor = "multi_thread")]
async fn preview_urls_open_with_their_token_only_and_go_stale_with_their_run() {
    let Some(main) = main_stack("worker_stack::preview") else {
        return;
    };
    let stack = &main.stack;
    let sandbox = Sandbox::new(stack, "preview");
    let (url, token) = exposed_logger(&sandbox, 8080, "preview.example.test").await;
    assert_eq!(
        url,
        format!("https://8080-preview-{token}.preview.example.test/")
    );
    let (status, page) = preview(stack, &url, &[]).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.starts_with("served /"), "{page}");

    // Listed on the host the expose named, with or without ?hostname=.
    let (status, listed) = sandbox.get("/exposed").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["ports"][0]["url"], url.as_str(), "{listed}");
    assert_eq!(listed["ports"][0]["status"], "active");
    let (_, elsewhere) = sandbox.get("/exposed?hostname=other.example.test").await;
    assert_eq!(
        elsewhere["ports"][0]["url"],
        format!("https://8080-preview-{token}.other.example.test/")
    );

    // A wrong token: 404 INVALID_TOKEN.
    let wrong = url.replace(&token, "wrongtoken000000");
    let (status, body) = preview(stack, &wrong, &[]).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("INVALID_TOKEN"), "{body}");

    // Destroyed: the sandbox's exposures are forgotten, and neither a wrong token nor the
    // old URL wakes it.
    let (status, body) = sandbox.post("/destroy", json!({})).await;
    assert_eq!(status, 200, "{body}");
    for refused in [&wrong, &url] {
        let (status, body) = preview(stack, refused, &[]).await;
        assert_eq!(status, 404, "{refused}: {body}");
        assert!(body.contains("INVALID_TOKEN"), "{body}");
    }
    let (status, state) = sandbox.get("/status").await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(
        state["running"], false,
        "a refused preview started the container"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_port_exposed_in_an_earlier_run_is_stale() {
    let Some(main) = main_stack("worker_stack::stale") else {
        return;
    };
    let stack = &main.stack;
    let sandbox = Sandbox::new(stack, "stale");
    let (url, _) = exposed_logger(&sandbox, 8081, "stale.example.test").await;
    assert_eq!(preview(stack, &url, &[]).await.0, 200);
    // The container ends (as an idle one is put to sleep) and the next call starts a new run.
    // (PID 1 is fsd's init under local containers, which forwards SIGTERM to the daemon.)
    let first = runtime_id(&sandbox).await;
    let (status, body) = sandbox
        .post(
            "/api/execute",
            json!({"command": "(sleep 0.3; kill -TERM 1) >/dev/null 2>&1 &"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut restarted = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (status, body) = sandbox.get("/api/capabilities").await;
        if status == 200 && body["capabilities"]["runtimeId"] != first.as_str() {
            restarted = true;
            break;
        }
    }
    assert!(restarted, "the sandbox did not come back in a new run");
    let (status, body) = preview(stack, &url, &[]).await;
    assert_eq!(status, 410, "{body}");
    assert!(body.contains("STALE_PREVIEW_URL"), "{body}");
    let (_, listed) = sandbox.get("/exposed").await;
    assert_eq!(listed["ports"][0]["status"], "stale", "{listed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_secret_of_the_worker_reaches_the_sandbox() {
    let Some(main) = main_stack("worker_stack::secrets") else {
        return;
    };
    let stack = &main.stack;
    let sandbox = Sandbox::new(stack, "secrets");
    let (url, _) = exposed_logger(&sandbox, 8082, "secrets.example.test").await;
    // A caller that sends the Worker's token everywhere, to a preview URL too.
    let bearer = format!("Bearer {WORKER_TOKEN}");
    let (status, page) = preview(stack, &url, &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{page}");
    let (status, page) = preview(stack, &url, &[("x-fsd-token", WORKER_TOKEN)]).await;
    assert_eq!(status, 200, "{page}");
    // The app's own authorization goes through untouched.
    let (_, page) = preview(stack, &url, &[("authorization", "Bearer the-apps-own")]).await;
    assert!(page.contains("Bearer the-apps-own"), "{page}");
    // API calls of every kind, with the token as a bearer and as X-Fsd-Token.
    sandbox.run("echo seen").await;
    let (status, _) = fsd_tests::reply(
        reqwest::Client::new()
            .post(sandbox.url("/api/execute"))
            .header("x-fsd-token", WORKER_TOKEN)
            .json(&json!({"command": "true"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = sandbox.post("/backups", json!({"dir": "/workspace"})).await;
    assert_eq!(status, 200, "{body}");

    // Everything a process in the sandbox can look at: its environment, every process's
    // environment and command line (fsd's too, when commands share its PID namespace), the
    // state directory, temp files, the workspace, backups, and the header logger's log.
    for secret in [WORKER_TOKEN, s3::SECRET_KEY] {
        let (head, tail) = secret.split_at(secret.len() / 2);
        // The secret is put together only inside grep's pattern pipe, so no command line
        // or file of this search holds it.
        let search = format!(
            "a='{head}'; b='{tail}'; pattern() {{ printf '%s%s\\n' \"$a\" \"$b\"; }}; \
             n=$({{ env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do \
                   tr '\\0' '\\n' < $f 2>/dev/null; done; }} | grep -cF -f <(pattern)); \
             files=$(grep -rlF -f <(pattern) /var/lib/fsd /tmp /workspace /var/backups /root \
                   2>/dev/null | tr '\\n' ' '); \
             echo \"in processes: $n; in files: $files\""
        );
        let found = sandbox.run(&search).await;
        assert_eq!(
            found, "in processes: 0; in files: \n",
            "a secret of the Worker reached the sandbox"
        );
    }
    // fsd's auth is on in the container (the object's own token), so a process there
    // cannot drive its daemon's API as the object does without finding that token.
    let code = sandbox
        .run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:3000/api/session/list")
        .await;
    assert_eq!(code, "401");
    let (_, sessions) = sandbox.get("/api/session/list").await;
    let (_, processes) = sandbox.get("/api/process/list").await;
    for listed in [sessions.to_string(), processes.to_string()] {
        assert!(!listed.contains(WORKER_TOKEN), "{listed}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn backups_through_the_object_restore_what_was_saved() {
    let Some(main) = main_stack("worker_stack::backups") else {
        return;
    };
    let sandbox = Sandbox::new(&main.stack, "backups");
    sandbox
        .run("mkdir -p /workspace/app && echo one > /workspace/app/a.txt && echo two > /workspace/app/b.txt")
        .await;
    let (status, made) = sandbox
        .post(
            "/backups",
            json!({"dir": "/workspace/app", "name": "first"}),
        )
        .await;
    assert_eq!(status, 200, "{made}");
    let id = made["id"].as_str().expect("id").to_string();
    let keys = main.store.keys(&format!("backups/{id}/"));
    assert!(
        keys.iter().any(|k| k.ends_with("meta.json"))
            && keys.iter().any(|k| k.ends_with("data.sqsh")),
        "{keys:?}"
    );
    sandbox
        .run("echo changed > /workspace/app/a.txt && rm /workspace/app/b.txt")
        .await;
    let (status, restored) = sandbox
        .post("/restore", json!({"id": id, "dir": "/workspace/app"}))
        .await;
    let (_, capabilities) = sandbox.get("/api/capabilities").await;
    if capabilities["capabilities"]["restoreDriver"] == "none" {
        // Local containers get neither mounts nor /dev/fuse: the daemon's refusal comes
        // through the object as it gave it, naming what is missing.
        assert_eq!(status, 500, "{restored}");
        assert_eq!(restored["code"], "BACKUP_RESTORE_FAILED", "{restored}");
        assert!(
            restored["message"]
                .as_str()
                .unwrap_or_default()
                .contains("/dev/fuse"),
            "{restored}"
        );
    } else {
        assert_eq!(status, 200, "{restored}");
        assert_eq!(
            sandbox
                .run("cat /workspace/app/a.txt /workspace/app/b.txt")
                .await,
            "one\ntwo\n"
        );
    }
    // Refusals name what is wrong.
    let (status, body) = sandbox
        .post(
            "/restore",
            json!({"id": "no-such-backup", "dir": "/workspace/app"}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["code"], "BACKUP_NOT_FOUND");
    let (status, body) = sandbox.post("/backups", json!({})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "INVALID_BACKUP_CONFIG");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mount_proxy_refuses_what_no_mount_allows() {
    let Some(main) = main_stack("worker_stack::mount_proxy") else {
        return;
    };
    let stack = &main.stack;
    // A request for the credential proxy's host that names no mount (no such object, or
    // an object without that token) is refused as S3 refuses.
    let client = reqwest::Client::new();
    for path in [
        "/",
        "/not-an-object-id/token/fsd/key",
        &format!("/{}/token/fsd/key", "0".repeat(64)),
    ] {
        let response = client
            .get(format!("{}{path}", stack.url))
            .header("host", fsd_control::mounts::PROXY_HOST)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .expect("proxy request");
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("<Code>AccessDenied</Code>"), "{path}: {body}");
    }
    // A mount under local containers (no /dev/fuse) fails with fsd's error, not a bare 500.
    let sandbox = Sandbox::new(stack, "mounts");
    let (status, body) = sandbox
        .post(
            "/mounts",
            json!({"bucket": "fsd", "mountPath": "/mnt/data"}),
        )
        .await;
    assert_ne!(status, 200, "{body}");
    assert!(body["code"].is_string(), "{status} {body}");
    let (status, body) = sandbox.post("/mounts", json!({"bucket": "fsd"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "INVALID_MOUNT_CONFIG");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_worker_refuses_callers_without_its_token_and_bad_ids() {
    let Some(main) = main_stack("worker_stack::auth") else {
        return;
    };
    let stack = &main.stack;
    let client = reqwest::Client::new();
    let url = format!("{}/sandboxes/auth/api/execute", stack.url);
    for auth in [None, Some("Bearer wrong"), Some(WORKER_TOKEN)] {
        let mut request = client.post(&url).json(&json!({"command": "true"}));
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let (status, body) = fsd_tests::reply(request).await;
        assert_eq!(status, 401, "{auth:?}: {body}");
        assert_eq!(body["code"], "UNAUTHORIZED");
    }
    let (status, body) = fsd_tests::reply(
        client
            .post(format!("{}/sandboxes/-bad-/api/execute", stack.url))
            .bearer_auth(WORKER_TOKEN)
            .json(&json!({"command": "true"})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    // POSTs with bodies, answered before the body is read (the 401s above, a destroy) or
    // forwarded, leave nothing wrong behind in the runtime. (When the object answered 500
    // to every forwarded request before reading it, workerd logged "Can't read from
    // request stream after response has been sent" for each.)
    let sandbox = Sandbox::new(stack, "auth");
    let big = "x".repeat(256 * 1024);
    let (status, body) = sandbox
        .post("/api/write", json!({"path": "big.txt", "content": big}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = sandbox.post("/destroy", json!({"padding": big})).await;
    assert_eq!(status, 200, "{body}");
    let logs = stack.logs();
    assert!(
        !logs.contains("Can't read from request stream"),
        "workerd: {logs}"
    );
}

/// A stack whose sandboxes sleep after 3 s idle, with no R2 secrets.
fn sleepy_stack(test: &str) -> Option<Stack> {
    cloudflare::available(test).then(|| {
        Stack::start(
            Worker::Fsd,
            &[("FSD_TOKEN", WORKER_TOKEN), ("SLEEP_AFTER", "3s")],
        )
    })
}

async fn runtime_id(sandbox: &Sandbox) -> String {
    let (status, body) = sandbox.get("/api/capabilities").await;
    assert_eq!(status, 200, "{body}");
    body["capabilities"]["runtimeId"]
        .as_str()
        .expect("runtimeId")
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_sandbox_sleeps_wakes_and_survives_a_runtime_restart() {
    let Some(mut stack) = sleepy_stack("worker_stack::lifecycle") else {
        return;
    };
    let sandbox = Sandbox::new(&stack, "sleepy");
    let first = runtime_id(&sandbox).await;
    assert_eq!(stack.containers().len(), 1);
    let running = |stack: &Stack| {
        let filter = format!("name=-{}-", stack.name);
        let output = fsd_tests::podman(&["ps", "--format", "{{.Names}}", "--filter", &filter]);
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|name| !name.ends_with("-proxy"))
            .count()
    };
    // Idle past SLEEP_AFTER: the alarm sends SIGTERM and fsd ends the container with
    // exit code 0 (workerd destroying an evicted object's container would remove it).
    let mut slept = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if running(&stack) == 0 {
            slept = true;
            break;
        }
    }
    assert!(slept, "the idle container was not put to sleep");
    let containers = stack.containers();
    assert_eq!(containers.len(), 1, "{containers:?}");
    let exit = fsd_tests::podman(&["inspect", &containers[0], "--format", "{{.State.ExitCode}}"]);
    assert_eq!(String::from_utf8_lossy(&exit.stdout).trim(), "0");
    // The next request wakes it, in a new run.
    let second = runtime_id(&sandbox).await;
    assert_ne!(first, second);

    // Routes that need R2's secrets say which are missing.
    for (route, body) in [
        ("/backups", json!({"dir": "/workspace"})),
        ("/restore", json!({"id": "x", "dir": "/workspace"})),
        ("/mounts", json!({"bucket": "b", "mountPath": "/mnt/b"})),
    ] {
        let (status, answer) = sandbox.post(route, body).await;
        assert_eq!(status, 503, "{route}: {answer}");
        assert_eq!(answer["code"], "NOT_CONFIGURED", "{route}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains("R2_ACCESS_KEY_ID"), "{route}: {message}");
    }

    // The object outlives workerd: its exposures are still there after a restart, and the
    // sandbox answers.
    let (status, body) = sandbox
        .post(
            "/expose",
            json!({"port": 8085, "hostname": "life.example.test"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    stack.restart();
    let sandbox = Sandbox::new(&stack, "sleepy");
    assert_eq!(sandbox.run("echo back").await, "back\n");
    let (_, listed) = sandbox.get("/exposed").await;
    assert_eq!(listed["ports"][0]["port"], 8085, "{listed}");

    // A runtime that crashed leaves its container, which then stops (as a machine's restart
    // leaves it): the next runtime starts the sandbox in a new run beside it (workerd names
    // its containers per runtime, so the one left holds no name the next one needs).
    let before = runtime_id(&sandbox).await;
    stack.crash_and_restart(|stack| {
        let left = stack.containers();
        assert_eq!(left.len(), 1, "the crashed runtime's container: {left:?}");
        fsd_tests::podman(&["stop", "-t", "0", &left[0]]);
    });
    let sandbox = Sandbox::new(&stack, "sleepy");
    // The first call after the restart starts a container: when it does not come, the
    // stack's log says why.
    let answered = sandbox
        .request(Method::GET, "/api/capabilities")
        .send()
        .await;
    if let Err(error) = answered {
        panic!(
            "the first call after the restart: {error}\n{}",
            stack.log_tail()
        );
    }
    assert_ne!(
        runtime_id(&sandbox).await,
        before,
        "not a new run\n{}",
        stack.log_tail()
    );
    assert_eq!(sandbox.run("echo again").await, "again\n");

    // Destroy removes the container.
    let (status, body) = sandbox.post("/destroy", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(running(&stack), 0, "destroy left the container running");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_time_machine_runs_through_the_object() {
    let Some(main) = main_stack("worker_stack::time_machine") else {
        return;
    };
    let sandbox = Sandbox::new(&main.stack, "history");
    let dir = "/workspace/tm";
    sandbox
        .run(&format!(
            "mkdir -p {dir}/src && echo one > {dir}/a.txt && echo two > {dir}/b.txt && echo fn > {dir}/src/main.rs"
        ))
        .await;
    let (status, full) = sandbox
        .post("/backups", json!({"dir": dir, "name": "first"}))
        .await;
    assert_eq!(status, 200, "{full}");
    assert!(
        full["parent"].is_null(),
        "the first snapshot is full: {full}"
    );
    assert_eq!(full["indexed"], true, "{full}");
    let first = full["id"].as_str().expect("id").to_string();

    sandbox
        .run(&format!(
            "echo 'one v2' > {dir}/a.txt && rm {dir}/b.txt && echo three > {dir}/c.txt"
        ))
        .await;
    let (status, incremental) = sandbox.post("/backups", json!({"dir": dir})).await;
    assert_eq!(status, 200, "{incremental}");
    assert_eq!(incremental["parent"], first.as_str(), "{incremental}");
    assert_eq!(incremental["depth"], 1, "{incremental}");
    assert_eq!(
        incremental["changes"],
        json!({"created": 1, "deleted": 1, "modified": 1}),
        "{incremental}"
    );
    let second = incremental["id"].as_str().expect("id").to_string();

    // The log: newest first, for the directory asked.
    let (status, log) = sandbox.get(&format!("/backups?dir={dir}")).await;
    assert_eq!(status, 200, "{log}");
    let ids: Vec<&str> = log["backups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|meta| meta["id"].as_str())
        .collect();
    assert_eq!(ids, [second.as_str(), first.as_str()], "{log}");

    // Paths of the first snapshot brought back in place; nothing else touched.
    let (status, restored) = sandbox
        .post(
            "/restore",
            json!({"id": first, "dir": dir, "paths": ["a.txt", "b.txt"]}),
        )
        .await;
    assert_eq!(status, 200, "{restored}");
    assert_eq!(restored["files"], 2, "{restored}");
    assert_eq!(
        sandbox
            .run(&format!("cat {dir}/a.txt {dir}/b.txt {dir}/c.txt"))
            .await,
        "one\ntwo\nthree\n"
    );
    // And from the incremental one, through its chain.
    let (status, restored) = sandbox
        .post(
            "/restore",
            json!({"id": second, "dir": dir, "paths": ["a.txt", "src"]}),
        )
        .await;
    assert_eq!(status, 200, "{restored}");
    assert_eq!(sandbox.run(&format!("cat {dir}/a.txt")).await, "one v2\n");

    // Retention: the newest is kept and so is what it stacks on; after a full snapshot,
    // keeping one removes both.
    let (status, decision) = sandbox
        .post(
            "/backups/forget",
            json!({"dir": dir, "policy": {"keepLast": 1}}),
        )
        .await;
    assert_eq!(status, 200, "{decision}");
    assert_eq!(decision["remove"], json!([]), "{decision}");
    let (status, newest) = sandbox
        .post("/backups", json!({"dir": dir, "full": true}))
        .await;
    assert_eq!(status, 200, "{newest}");
    assert!(newest["parent"].is_null(), "{newest}");
    let (status, decision) = sandbox
        .post(
            "/backups/forget",
            json!({"dir": dir, "policy": {"keepLast": 1}}),
        )
        .await;
    assert_eq!(status, 200, "{decision}");
    let mut removed: Vec<&str> = decision["remove"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|id| id.as_str())
        .collect();
    removed.sort();
    let mut expected = vec![first.as_str(), second.as_str()];
    expected.sort();
    assert_eq!(removed, expected, "{decision}");
    for id in [&first, &second] {
        assert!(
            main.store.keys(&format!("backups/{id}/")).is_empty(),
            "{id} left objects behind"
        );
    }
    let (status, body) =
        fsd_tests::reply(sandbox.request(Method::DELETE, &format!("/backups/{first}"))).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["code"], "BACKUP_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduled_snapshots_run_from_the_objects_alarm() {
    let Some(main) = main_stack("worker_stack::schedule") else {
        return;
    };
    let sandbox = Sandbox::new(&main.stack, "scheduled");
    let dir = "/workspace/sched";
    sandbox
        .run(&format!("mkdir -p {dir} && echo v0 > {dir}/f.txt"))
        .await;
    let (status, body) = fsd_tests::reply(
        sandbox
            .request(Method::PUT, "/schedule")
            .json(&json!({"dir": dir, "every": "x"})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "INVALID_BACKUP_CONFIG");
    let (status, body) = fsd_tests::reply(
        sandbox
            .request(Method::PUT, "/schedule")
            .json(&json!({"dir": dir, "every": 2, "policy": {"keepLast": 1}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Two rounds, a change between them.
    let mut rounds: Vec<Value> = Vec::new();
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (_, now) = sandbox.get("/schedule").await;
        let last = now["schedule"]["last"].clone();
        if !last.is_null() && rounds.last() != Some(&last) {
            assert!(last["error"].is_null(), "a scheduled round failed: {last}");
            rounds.push(last);
            sandbox
                .run(&format!("echo v{} > {dir}/f.txt", rounds.len()))
                .await;
        }
        if rounds.len() == 2 {
            break;
        }
    }
    assert_eq!(
        rounds.len(),
        2,
        "the alarm did not take two snapshots: {rounds:?}"
    );
    let (_, log) = sandbox.get(&format!("/backups?dir={dir}")).await;
    let ids: Vec<&str> = log["backups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|meta| meta["id"].as_str())
        .collect();
    for round in &rounds {
        assert!(
            ids.contains(&round["id"].as_str().unwrap()),
            "{round} not in {log}"
        );
    }
    let (status, _) = fsd_tests::reply(sandbox.request(Method::DELETE, "/schedule")).await;
    assert_eq!(status, 200);
    let (_, now) = sandbox.get("/schedule").await;
    assert!(now["schedule"].is_null(), "{now}");
}

/// One call to a Docker API socket: its status and body (HTTP/1.0, read to the end).
fn docker_call(socket: &std::path::Path, method: &str, path: &str, body: &Value) -> (u16, String) {
    use std::io::{Read, Write};
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let mut stream = std::os::unix::net::UnixStream::connect(socket).expect("the API's socket");
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nhost: d\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A process killed (its group) when dropped.
struct Service(std::process::Child);

impl Drop for Service {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(-(self.0.id() as i32));
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

fn service(
    program: &std::path::Path,
    args: &[&std::ffi::OsStr],
    socket: &std::path::Path,
) -> Service {
    use std::os::unix::process::CommandExt;
    let child = std::process::Command::new(program)
        .args(args)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    cloudflare::at_exit::stop_group(child.id());
    let service = Service(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let answers = || {
        std::os::unix::net::UnixStream::connect(socket).is_ok()
            && docker_call(socket, "GET", "/_ping", &Value::Null).0 == 200
    };
    while !answers() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} does not answer",
            program.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    service
}

/// podman's compatible API answers a create under a name in use, a kill of a stopped
/// container and a forced removal of a container whose network another shares with 500s,
/// where Docker answers 409, 409 and removes both; workerd reads the 500s as failures (a
/// sandbox woken right after it slept could not start while podman still held its name).
/// The stacks' proxy answers as Docker does and passes everything else through.
#[test]
fn the_stacks_docker_api_answers_as_docker_does() {
    if !cloudflare::available("worker_stack::docker_api") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let podman_socket = dir.path().join("podman.sock");
    let docker_socket = dir.path().join("docker.sock");
    let root = fsd_tests::repo_root();
    let _podman = service(
        &root.join("scripts/podman"),
        &[
            "system".as_ref(),
            "service".as_ref(),
            "--time=0".as_ref(),
            format!("unix://{}", podman_socket.display()).as_ref(),
        ],
        &podman_socket,
    );
    let _proxy = service(
        &fsd_tests::binary("docker-api-proxy"),
        &[
            "--listen".as_ref(),
            docker_socket.as_os_str(),
            "--upstream".as_ref(),
            podman_socket.as_os_str(),
        ],
        &docker_socket,
    );
    // Named as this process's stacks' containers are, so what a failure leaves is removed.
    let name = format!("docker-api-fsd-test-{}-probe", std::process::id());
    let sidecar = format!("{name}-proxy");
    let sleeper = |network: Option<&str>| {
        let mut config = json!({
            "Image": "localhost/fsd-egress-stand-in:latest",
            "Entrypoint": ["/bin/sleep"],
            "Cmd": ["1000"],
        });
        if let Some(network) = network {
            config["HostConfig"] = json!({"NetworkMode": network, "AutoRemove": true});
        }
        config
    };
    let call =
        |method: &str, path: &str, body: Value| docker_call(&docker_socket, method, path, &body);
    let create = format!("/containers/create?name={name}");
    let (status, body) = call("POST", &create, sleeper(None));
    assert_eq!(status, 201, "{body}");
    // What podman answers as Docker does passes through: a create under a name in use is
    // 409 (podman: 500).
    let (status, body) = call("POST", &create, sleeper(None));
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("already in use"), "{body}");
    let (status, body) = call("POST", &format!("/containers/{name}/start"), Value::Null);
    assert_eq!(status, 204, "{body}");
    let network = format!("container:{name}");
    let (status, body) = call(
        "POST",
        &format!("/containers/create?name={sidecar}"),
        sleeper(Some(&network)),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = call("POST", &format!("/containers/{sidecar}/start"), Value::Null);
    assert_eq!(status, 204, "{body}");
    // A stop, then another (304, as podman answers too), and a kill of the stopped
    // container: 409 (podman: 500).
    let (status, body) = call("POST", &format!("/containers/{name}/stop?t=0"), Value::Null);
    assert_eq!(status, 204, "{body}");
    let (status, _) = call(
        "POST",
        &format!("/v1.43/containers/{name}/stop?t=0"),
        Value::Null,
    );
    assert_eq!(status, 304);
    let (status, body) = call(
        "POST",
        &format!("/containers/{name}/kill?signal=SIGKILL"),
        Value::Null,
    );
    assert_eq!(status, 409, "{body}");
    // A forced removal takes the sidecar that shares its network with it (podman: 500).
    let (status, body) = call(
        "DELETE",
        &format!("/containers/{name}?force=true"),
        Value::Null,
    );
    assert_eq!(status, 204, "{body}");
    for gone in [&name, &sidecar] {
        let (status, body) = call("GET", &format!("/containers/{gone}/json"), Value::Null);
        assert_eq!(status, 404, "{gone}: {body}");
    }
    // The name is free again.
    let (status, body) = call("POST", &create, sleeper(None));
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        "DELETE",
        &format!("/containers/{name}?force=true"),
        Value::Null,
    );
    assert_eq!(status, 204, "{body}");
}
