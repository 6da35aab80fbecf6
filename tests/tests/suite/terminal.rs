//! Terminals over `/ws/pty` with a real WebSocket client: keystrokes in, screen bytes out,
//! resize, replay, several connections, isolation, exit and a fresh shell, full-screen
//! programs, a flood with a reader that does not keep up.

use std::time::Duration;

use fsd_tests::Daemon;
use fsd_tests::ws::WsClient;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// One terminal connection and everything it has shown so far.
struct Term {
    client: WsClient,
    screen: String,
    /// Text messages (ready, exit, error) in order.
    control: Vec<Value>,
    closed: Option<u16>,
}

impl Term {
    /// Connects and reads up to `ready` (the replay, if any, comes first).
    async fn open(daemon: &Daemon, session: &str) -> Term {
        let route = format!("/ws/pty?sessionId={session}&cols=100&rows=30");
        let mut term = Term {
            client: WsClient::connect(daemon, &route).await,
            screen: String::new(),
            control: Vec::new(),
            closed: None,
        };
        term.until(|t| t.control.iter().any(|c| c["type"] == "ready"))
            .await;
        term
    }

    async fn keys(&mut self, keys: &str) {
        self.client
            .socket
            .send(Message::Binary(keys.as_bytes().to_vec().into()))
            .await
            .unwrap();
    }

    async fn control(&mut self, message: Value) {
        self.client.send_json(&message).await;
    }

    /// Reads frames until `done` says so; panics after 15 s.
    async fn until(&mut self, done: impl Fn(&Term) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while !done(self) {
            let frame = tokio::time::timeout_at(deadline, self.client.socket.next())
                .await
                .unwrap_or_else(|_| panic!("timed out; screen so far: {:?}", self.screen));
            match frame {
                Some(Ok(Message::Binary(bytes))) => {
                    self.screen.push_str(&String::from_utf8_lossy(&bytes));
                }
                Some(Ok(Message::Text(text))) => {
                    self.control
                        .push(serde_json::from_str(text.as_str()).unwrap());
                }
                Some(Ok(Message::Close(frame))) => {
                    self.closed = Some(frame.map_or(1005, |f| u16::from(f.code)));
                    return;
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => {
                    self.closed.get_or_insert(1006);
                    return;
                }
            }
        }
    }

    /// Types `command` and waits for `expect` on the screen.
    async fn run(&mut self, command: &str, expect: &str) {
        self.keys(&format!("{command}\r")).await;
        self.until(|t| t.screen.contains(expect)).await;
    }
}

#[tokio::test]
async fn keystrokes_echo_resize_and_replay() {
    let daemon = Daemon::start();
    let mut term = Term::open(&daemon, "t1").await;
    // The expansion proves the shell ran it (the echo of the keys alone would not say 42).
    term.run("echo marker-$((40+2))", "marker-42").await;
    term.control(json!({"type": "resize", "cols": 120, "rows": 40}))
        .await;
    term.run("stty size", "40 120").await;
    // Ctrl-C reaches the foreground program: the terminal is the shell's controlling one.
    term.keys("sleep 100\r").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    term.keys("\u{3}").await;
    term.run("echo after-ctrl-c-$?", "after-ctrl-c-130").await;

    // A second connection gets the replay before `ready`, and both see what comes next.
    let mut second = Term::open(&daemon, "t1").await;
    assert!(second.screen.contains("marker-42"), "{:?}", second.screen);
    second.run("echo both-$((1+1))", "both-2").await;
    term.until(|t| t.screen.contains("both-2")).await;

    // Closing a connection leaves the shell running: a reconnect finds it.
    drop(term);
    let mut third = Term::open(&daemon, "t1").await;
    assert!(third.screen.contains("both-2"));
    third.run("echo $((6*7))-again", "42-again").await;
}

#[tokio::test]
async fn sessions_have_their_own_terminal_started_from_their_state() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.root().join("sub")).unwrap();
    let (status, _) = daemon
        .post(
            "/api/session/create",
            json!({"id": "env", "env": {"GREETING": "hi-from-session"}, "cwd": "sub"}),
        )
        .await;
    assert_eq!(status, 200);
    let mut term = Term::open(&daemon, "env").await;
    term.run(
        "echo $GREETING in $(basename $PWD)",
        "hi-from-session in sub",
    )
    .await;
    term.run("export ONLY_HERE=x; echo exported-$((3+4))", "exported-7")
        .await;
    let mut other = Term::open(&daemon, "other").await;
    other.run("echo [${ONLY_HERE:-unset}]", "[unset]").await;
    assert!(!other.screen.contains("hi-from-session"));
    // The shell is in the sandbox's process world: its pid is one commands see.
    other.run("echo shell-pid-$$", "shell-pid-").await;
    let (_, answer) = daemon
        .post("/api/execute", json!({"command": "ps -eo pid,args"}))
        .await;
    assert!(answer["stdout"].as_str().unwrap().contains("bash"));
}

#[tokio::test]
async fn an_exiting_shell_says_so_and_the_next_connect_starts_a_fresh_one() {
    let daemon = Daemon::start();
    let mut term = Term::open(&daemon, "x").await;
    term.run("echo first-pid-$$", "first-pid-").await;
    term.keys("exit 3\r").await;
    term.until(|t| t.closed.is_some()).await;
    let exit = term.control.iter().find(|c| c["type"] == "exit").cloned();
    assert_eq!(
        exit,
        Some(json!({"type": "exit", "code": 3})),
        "{:?}",
        term.control
    );
    assert_eq!(term.closed, Some(1000));

    let mut fresh = Term::open(&daemon, "x").await;
    assert!(
        !fresh.screen.contains("first-pid-"),
        "a fresh shell, a fresh screen"
    );
    fresh.run("echo alive-$((2+3))", "alive-5").await;

    // Deleting the session ends its terminal, with the same exit message.
    let (status, _) = daemon
        .post("/api/session/delete", json!({"sessionId": "x"}))
        .await;
    assert_eq!(status, 200);
    fresh.until(|t| t.closed.is_some()).await;
    assert!(
        fresh.control.iter().any(|c| c["type"] == "exit"),
        "{:?}",
        fresh.control
    );
}

#[tokio::test]
async fn full_screen_programs_and_bad_control_messages_do_not_wedge_it() {
    let daemon = Daemon::start();
    let mut term = Term::open(&daemon, "fs").await;
    // The alternate screen, cursor moves, a screenful, and back: what vim and top do.
    term.run(
        r"printf '\033[?1049h\033[2J\033[H'; for i in $(seq 1 200); do printf '\033[%d;1Hline %d' $((i % 30 + 1)) $i; done; printf '\033[?1049l'; echo done-$((5*5))",
        "done-25",
    )
    .await;
    term.run("top -b -n 1 | head -3; echo top-$((1+0))", "top-1")
        .await;

    term.control(json!({"type": "resize", "cols": 0, "rows": 10}))
        .await;
    term.client.send_text("not json").await;
    term.control(json!({"type": "something-else"})).await;
    term.run("echo still-$((9+1))", "still-10").await;
    let errors: Vec<&Value> = term
        .control
        .iter()
        .filter(|c| c["type"] == "error")
        .collect();
    assert_eq!(
        errors,
        [
            &json!({"type": "error", "message": "Invalid dimensions: cols and rows must be positive"}),
            &json!({"type": "error", "message": "Invalid control message"}),
        ]
    );
}

#[tokio::test]
async fn a_flood_with_a_reader_that_does_not_keep_up_stays_bounded() {
    let daemon = Daemon::start();
    let mut slow = Term::open(&daemon, "flood").await;
    slow.keys("head -c 200000000 /dev/zero | tr '\\0' x; echo; echo flood-$((8*8))\r")
        .await;
    // Not reading while 200 MB go by.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let peak = fsd_tests::rss_kib(daemon.pid()) / 1024;
    assert!(peak < 200, "the daemon grew to {peak} MiB");
    // The slow connection was dropped (it can reconnect for the replay) ...
    slow.until(|t| t.closed.is_some()).await;
    // ... and the terminal went on: a new connection sees the end of it.
    let mut fresh = Term::open(&daemon, "flood").await;
    fresh.until(|t| t.screen.contains("flood-64")).await;
}

#[tokio::test]
async fn the_terminal_route_checks_its_query_before_upgrading() {
    let daemon = Daemon::start();
    let (status, body) = daemon.get("/ws/pty?sessionId=a").await;
    assert_eq!(status, 404, "{body}");
    let refused = WsClient::connect_with(&daemon, "/ws/pty", None).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 400);
        }
        other => panic!("expected a 400, got {:?}", other.map(|_| "an upgrade")),
    }
}

/// `fsctl shell` in a real pseudo-terminal (`script` gives it one, 132×43): keys typed,
/// the window size forwarded, Ctrl-C delivered to the remote program, the remote shell's
/// exit code returned, the local terminal back in cooked mode afterwards.
#[test]
fn fsctl_shell_works_in_a_real_terminal() {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let daemon = Daemon::start();
    let fsctl = fsd_tests::binary("fsctl");
    let inner = format!(
        "stty cols 132 rows 43; {} --url {} shell --session sh; code=$?; \
         stty -a | grep -q ' icanon' && echo local-tty-restored; exit $code",
        fsctl.display(),
        daemon.url
    );
    let mut script = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env_remove("FSD_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    let mut stdin = script.stdin.take().unwrap();
    let mut stdout = script.stdout.take().unwrap();
    let (seen, screen) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = stdout.read(&mut buffer) {
            if read == 0
                || seen
                    .send(String::from_utf8_lossy(&buffer[..read]).into())
                    .is_err()
            {
                return;
            }
        }
    });
    let mut shown = String::new();
    let mut wait_for = |text: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while !shown.contains(text) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match screen.recv_timeout(left) {
                Ok(chunk) => shown.push_str(&chunk),
                Err(_) => panic!("{text:?} never showed; the screen: {shown:?}"),
            }
        }
    };
    let mut type_keys = |keys: &str| {
        stdin.write_all(keys.as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    type_keys("echo typed-$((20+3))\r");
    wait_for("typed-23");
    type_keys("stty size\r");
    wait_for("43 132");
    type_keys("sleep 100\r");
    std::thread::sleep(Duration::from_millis(300));
    type_keys("\u{3}");
    type_keys("echo after-ctrl-c-$?\r");
    wait_for("after-ctrl-c-130");
    type_keys("exit 7\r");
    wait_for("local-tty-restored");
    let status = script.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(7),
        "fsctl shell returns the remote exit code"
    );
}

/// The SDK's terminal handle: write, resize, the output stream, the exit status.
#[tokio::test]
async fn the_sdk_terminal_handle() {
    let daemon = Daemon::start();
    let sandbox = daemon.sandbox();
    let mut terminal = sandbox.terminal("sdk", 90, 20).await.unwrap();
    terminal.resize(101, 33).await.unwrap();
    terminal
        .write(b"stty size; echo sdk-$((4*4)); exit 9\r")
        .await
        .unwrap();
    let mut screen = String::new();
    let mut exit = None;
    while let Some(event) = terminal.next().await {
        match event {
            fsd_sdk::TerminalEvent::Output(bytes) => {
                screen.push_str(&String::from_utf8_lossy(&bytes))
            }
            fsd_sdk::TerminalEvent::Exit { code, signal } => exit = Some((code, signal)),
            fsd_sdk::TerminalEvent::Error(message) => panic!("{message}"),
        }
    }
    assert!(screen.contains("33 101"), "{screen:?}");
    assert!(screen.contains("sdk-16"), "{screen:?}");
    assert_eq!(exit, Some((9, None)));
}

/// A session's terminal is one of the terminals the SDK's next line sees: it keeps the
/// sandbox active while its shell runs, but is not listed, since no next-line caller made
/// it; a next-line terminal beside it is listed alone.
#[tokio::test]
async fn a_sessions_terminal_keeps_the_sandbox_active_but_is_not_listed_on_the_next_line() {
    let daemon = Daemon::start();
    let next =
        fsd_tests::rpc::RpcClient::next_activated(&daemon.url, daemon.token.as_deref()).await;
    let active = |answer: Value| answer[2].as_bool();
    assert_eq!(
        active(next.call("terminals", "hasActive", json!([])).await),
        Some(false)
    );
    let mut term = Term::open(&daemon, "listed").await;
    term.run("echo one-$((2+3))", "one-5").await;
    assert_eq!(
        active(next.call("terminals", "hasActive", json!([])).await),
        Some(true)
    );
    let created = next
        .call(
            "terminals",
            "create",
            json!([{"command": [["sleep", "30"]], "cols": 80, "rows": 24}]),
        )
        .await;
    fsd_tests::rpc::settled(&created);
    let listed = next.call("terminals", "list", json!([])).await;
    let ids: Vec<&Value> = listed[2][0]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|terminal| &terminal["id"])
        .collect();
    assert_eq!(ids, [&created[2]["id"]], "{listed}");
    term.keys("exit 4\r").await;
    term.until(|t| t.closed.is_some()).await;
    assert_eq!(
        term.control.iter().find(|c| c["type"] == "exit"),
        Some(&json!({"type": "exit", "code": 4}))
    );
    let id = created[2]["id"].clone();
    fsd_tests::rpc::settled(&next.call("terminals", "terminate", json!([id])).await);
    assert_eq!(
        active(next.call("terminals", "hasActive", json!([])).await),
        Some(false)
    );
}

/// Under `--confine` a session that moved out of the workspace opens its terminal in the
/// workspace, where a confined command may start; one inside opens where it is.
#[tokio::test]
async fn a_confined_sessions_terminal_starts_inside() {
    let daemon = Daemon::start_with(fsd_tests::Options {
        confine: true,
        ..fsd_tests::Options::default()
    });
    std::fs::create_dir(daemon.root().join("inside")).unwrap();
    let moved = |id: &str, to: &str| json!({"command": format!("cd {to}"), "sessionId": id});
    for (id, to) in [("out", "/tmp"), ("in", "inside")] {
        let (status, body) = daemon.post("/api/execute", moved(id, to)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["exitCode"], 0, "{body}");
    }
    let workspace = std::fs::canonicalize(daemon.root()).unwrap();
    let mut out = Term::open(&daemon, "out").await;
    out.run("echo at:$PWD:", "at:").await;
    out.until(|t| t.screen.contains(&format!("at:{}:", workspace.display())))
        .await;
    let mut inside = Term::open(&daemon, "in").await;
    inside
        .run(
            "echo at:$PWD:",
            &format!("at:{}:", workspace.join("inside").display()),
        )
        .await;
}
