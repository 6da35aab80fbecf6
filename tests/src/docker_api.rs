//! Docker's API in front of podman's, for workerd under `wrangler dev`.
//!
//! workerd drives a container through the Docker Engine API and reads Docker's status codes:
//! a create under a name in use is 409 (it then removes the holder and creates again), a stop
//! of a stopped container is 304 and a kill of one is 409 (both fine to it), and a forced
//! removal removes the container even when another shares its network (the networking
//! sidecar does). podman's compatible API answers each of those with a 500, which workerd
//! takes for a failure: a sandbox woken right after it slept (its container removed and
//! created again under the same name) failed to start when podman still held the name.
//!
//! This proxy passes every call through as it is, bytes both ways, except those four when
//! sent with a length: their answer is read whole, podman's 500 becomes Docker's answer, and
//! a forced removal that podman refused for its dependents is done by podman's own call that
//! takes them too. (workerd sends its kills, stops and removals with an empty chunked body:
//! they pass through.)
//!
//! And a removal takes the container's anonymous volumes with it (`v=true`). fsd's image
//! declares `/workspace` and `/var/lib/fsd` volumes (overlay mounts need a workspace that
//! is not itself on overlayfs), so each container workerd creates has two; workerd removes
//! containers without `v`, and nothing can reach such a volume once its container is gone
//! (a container made again under the same name gets new ones, as a Cloudflare container
//! gets a new disk). Left behind, they used podman's 2,048 locks up on a machine that ran
//! the suite a few dozen times, and then no container could be created at all.
//!
//! And a container's wait is answered by the proxy: podman's Docker-compatible wait polls
//! the container without a pause, a whole core for each call that waits (12 s of CPU in
//! 10 s, measured), and workerd keeps one waiting for every container it runs, so the stacks
//! took a core from the rest of the suite. libpod's own wait polls at an interval; a wait
//! for the removal polls the container's inspection. The answer is Docker's, at the end, as
//! podman's was.
//!
//! Nothing else is changed; `scripts/dev-cloudflare` points workerd's `DOCKER_HOST` here.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use crate::http_head::{HeadRead, lowercase_headers, read_body, read_request_head};

/// The longest request head read from a client.
const MAX_HEAD: usize = 64 * 1024;
/// The longest request body read whole (the calls read whole carry a container's config).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// A call whose podman answer may differ from Docker's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `POST /containers/create`.
    Create,
    /// `POST /containers/{id}/stop`.
    Stop,
    /// `POST /containers/{id}/kill`.
    Kill,
    /// `DELETE /containers/{id}`, forced (`force=true`) or not.
    Remove { container: String, force: bool },
    /// `POST /containers/{id}/wait`, until the container is not running or, with
    /// `condition=removed`, until it is gone.
    Wait { container: String, removed: bool },
    /// Anything else: passed through untouched.
    Other,
}

impl Call {
    /// The call a request line names; `path` may carry an API version (`/v1.43/…`) and a
    /// query.
    pub fn of(method: &str, path: &str) -> Call {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if segments.first().is_some_and(|first| is_version(first)) {
            segments.remove(0);
        }
        match (method, segments.as_slice()) {
            ("POST", ["containers", "create"]) => Call::Create,
            ("POST", ["containers", _, "stop"]) => Call::Stop,
            ("POST", ["containers", _, "kill"]) => Call::Kill,
            ("DELETE", ["containers", container]) => Call::Remove {
                container: container.to_string(),
                force: query
                    .split('&')
                    .any(|pair| pair == "force=true" || pair == "force=1"),
            },
            ("POST", ["containers", container, "wait"]) => Call::Wait {
                container: container.to_string(),
                removed: query.split('&').any(|pair| pair == "condition=removed"),
            },
            _ => Call::Other,
        }
    }
}

/// The path of a container removal that also removes the container's anonymous volumes:
/// `path` with `v=true` added, unless it says `v` itself.
pub fn with_volumes(path: &str) -> String {
    match path.split_once('?') {
        Some((_, query)) if query.split('&').any(|pair| pair.starts_with("v=")) => path.to_string(),
        Some(_) => format!("{path}&v=true"),
        None => format!("{path}?v=true"),
    }
}

/// `read` (a request's head and what followed it) with `path` in its request line.
pub fn with_request_path(read: &[u8], method: &str, path: &str) -> Vec<u8> {
    let line_end = read
        .windows(2)
        .position(|pair| pair == b"\r\n")
        .unwrap_or(read.len());
    let version = read[..line_end]
        .rsplit(|&byte| byte == b' ')
        .next()
        .unwrap_or(b"HTTP/1.1");
    let mut rewritten = format!("{method} {path} ").into_bytes();
    rewritten.extend_from_slice(version);
    rewritten.extend_from_slice(&read[line_end..]);
    rewritten
}

/// `v1.43`: an API version prefix.
fn is_version(segment: &str) -> bool {
    segment.strip_prefix('v').is_some_and(|rest| {
        !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '.')
    })
}

/// What Docker answers where podman answered `status` with `body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Docker {
    /// The same answer.
    Same,
    /// This status, with podman's body (or none for 304).
    Status(u16),
    /// Remove this container with what depends on it (podman's libpod call), as Docker's
    /// forced removal does.
    RemoveWithDependents(String),
}

/// How Docker answers `call` where podman answered `status` with `body`.
pub fn docker_answer(call: &Call, status: u16, body: &[u8]) -> Docker {
    if status != 500 {
        return Docker::Same;
    }
    let error: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let cause = error["cause"].as_str().unwrap_or_default();
    let message = error["message"].as_str().unwrap_or_default();
    match call {
        Call::Create if cause == "that name is already in use" => Docker::Status(409),
        Call::Stop if cause == "container state improper" => Docker::Status(304),
        Call::Kill if cause == "container state improper" => Docker::Status(409),
        Call::Remove {
            container,
            force: true,
        } if message.contains("has dependent containers") => {
            Docker::RemoveWithDependents(container.clone())
        }
        _ => Docker::Same,
    }
}

/// Serves the proxy on `listen` in front of `upstream` until no client has been connected
/// for `idle` (never, when `None`).
pub async fn serve(listen: &Path, upstream: PathBuf, idle: Option<Duration>) -> io::Result<()> {
    let _ = std::fs::remove_file(listen);
    let listener = UnixListener::bind(listen)?;
    let open = Arc::new(AtomicUsize::new(0));
    let mut last = Instant::now();
    let upstream = Arc::new(upstream);
    loop {
        let tick = tokio::time::sleep(Duration::from_secs(1));
        tokio::select! {
            accepted = listener.accept() => {
                let (client, _) = accepted?;
                let upstream = Arc::clone(&upstream);
                let open = Arc::clone(&open);
                open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    match proxy(client, &upstream).await {
                        // A client that went before its answer (a wait it cancelled).
                        Err(gone) if matches!(
                            gone.kind(),
                            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                        ) => {}
                        Err(failed) => eprintln!("docker-api-proxy: {failed}"),
                        Ok(()) => {}
                    }
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
            () = tick => {}
        }
        if open.load(Ordering::SeqCst) > 0 {
            last = Instant::now();
        } else if idle.is_some_and(|idle| last.elapsed() >= idle) {
            let _ = std::fs::remove_file(listen);
            return Ok(());
        }
    }
}

/// One client connection.
async fn proxy(mut client: UnixStream, upstream: &Path) -> io::Result<()> {
    let (head, head_len, mut buffer) = match read_request_head(&mut client, MAX_HEAD).await? {
        HeadRead::Complete { head, len, read } => (head, len, read),
        HeadRead::Closed => return Ok(()),
        HeadRead::Malformed => return answer(&mut client, 400, &[], b"").await,
    };
    let call = Call::of(&head.method, &head.path);
    if let Call::Wait { container, removed } = &call {
        return wait(&mut client, upstream, container, *removed).await;
    }
    // A removal takes the container's anonymous volumes, whichever way it goes.
    let path = match call {
        Call::Remove { .. } => with_volumes(&head.path),
        _ => head.path.clone(),
    };
    let length = head.header("content-length").and_then(|v| v.parse().ok());
    let whole = call != Call::Other
        && head.header("transfer-encoding").is_none()
        && length.unwrap_or(0) <= MAX_BODY;
    if !whole {
        // Passed through as it is (workerd sends its kills, stops and removals with an
        // empty chunked body), a removal with its volumes.
        if path != head.path {
            buffer = with_request_path(&buffer, &head.method, &path);
        }
        let mut podman = UnixStream::connect(upstream).await?;
        podman.write_all(&buffer).await?;
        tokio::io::copy_bidirectional(&mut client, &mut podman).await?;
        return Ok(());
    }
    let length = length.unwrap_or(0);
    let body = read_body(&mut client, buffer.split_off(head_len), length).await?;
    if body.len() < length {
        // The client ended before its body did.
        return Ok(());
    }
    let reply = exchange(upstream, &head.method, &path, &head.headers, &body).await?;
    let reply = match docker_answer(&call, reply.status, &reply.body) {
        Docker::Same => reply,
        Docker::Status(status) => {
            eprintln!(
                "docker-api-proxy: {} {}: podman's 500 answered as Docker's {status}",
                head.method, head.path
            );
            Reply {
                status,
                headers: reply.headers,
                body: if status == 304 {
                    Vec::new()
                } else {
                    reply.body
                },
            }
        }
        Docker::RemoveWithDependents(container) => {
            // libpod's name for Docker's `v`.
            let path = format!(
                "/v4.0.0/libpod/containers/{container}?force=true&depend=true&volumes=true"
            );
            let removed = exchange(upstream, "DELETE", &path, &[], b"").await?;
            eprintln!(
                "docker-api-proxy: {} {}: removed with what depends on it ({})",
                head.method, head.path, removed.status
            );
            if removed.status == 200 {
                Reply {
                    status: 204,
                    headers: Vec::new(),
                    body: Vec::new(),
                }
            } else {
                removed
            }
        }
    };
    answer(&mut client, reply.status, &reply.headers, &reply.body).await
}

/// How often a wait looks at its container.
const WAIT_INTERVAL: Duration = Duration::from_millis(100);

/// Answers a container's wait as Docker does (`{"StatusCode", "Error"}` once it holds),
/// without podman's busy wait; gives up when the client goes.
async fn wait(
    client: &mut UnixStream,
    upstream: &Path,
    container: &str,
    removed: bool,
) -> io::Result<()> {
    let reply = {
        let waited = async {
            match removed {
                true => wait_removed(upstream, container).await,
                false => wait_stopped(upstream, container).await,
            }
        };
        tokio::select! {
            reply = waited => reply?,
            () = gone(client) => return Ok(()),
        }
    };
    answer(client, reply.status, &reply.headers, &reply.body).await
}

/// Until the container is not running: libpod's wait, which polls at an interval.
async fn wait_stopped(upstream: &Path, container: &str) -> io::Result<Reply> {
    let path = format!(
        "/v4.0.0/libpod/containers/{container}/wait?condition=created&condition=exited\
         &condition=stopped&interval={}ms",
        WAIT_INTERVAL.as_millis()
    );
    let reply = exchange(upstream, "POST", &path, &[], b"").await?;
    Ok(match (reply.status, exit_code(&reply.body)) {
        (200, Some(code)) => waited(code),
        _ => reply,
    })
}

/// Until the container is gone: its inspection, at an interval.
async fn wait_removed(upstream: &Path, container: &str) -> io::Result<Reply> {
    let path = format!("/v1.41/containers/{container}/json");
    let mut code = 0;
    loop {
        let reply = exchange(upstream, "GET", &path, &[], b"").await?;
        match reply.status {
            404 => return Ok(waited(code)),
            200 => {
                let inspected: serde_json::Value =
                    serde_json::from_slice(&reply.body).unwrap_or_default();
                code = inspected["State"]["ExitCode"].as_i64().unwrap_or(code);
            }
            _ => return Ok(reply),
        }
        tokio::time::sleep(WAIT_INTERVAL).await;
    }
}

/// The exit code libpod's wait answers (a bare number).
pub fn exit_code(body: &[u8]) -> Option<i64> {
    std::str::from_utf8(body).ok()?.trim().parse().ok()
}

/// Docker's answer to a wait that ended with `code`.
fn waited(code: i64) -> Reply {
    Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::json!({"StatusCode": code, "Error": null})
            .to_string()
            .into_bytes(),
    }
}

/// Ends when the client's side of the connection does (what it sends is dropped).
async fn gone(client: &mut UnixStream) {
    let mut dropped = [0u8; 512];
    while let Ok(read) = client.read(&mut dropped).await {
        if read == 0 {
            return;
        }
    }
}

/// An answer read whole.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// One request to podman on a connection of its own, its answer read to the end: HTTP/1.0,
/// so the answer is neither chunked nor kept alive.
async fn exchange(
    upstream: &Path,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> io::Result<Reply> {
    let mut podman = UnixStream::connect(upstream).await?;
    let mut request = format!("{method} {path} HTTP/1.0\r\n");
    for (name, value) in passed_on(headers) {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !headers.iter().any(|(name, _)| name == "host") {
        request.push_str("host: localhost\r\n");
    }
    request.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    podman.write_all(request.as_bytes()).await?;
    podman.write_all(body).await?;
    let mut answer = Vec::new();
    podman.read_to_end(&mut answer).await?;
    let mut parsed_headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut parsed_headers);
    let Ok(httparse::Status::Complete(head_len)) = parsed.parse(&answer) else {
        return Err(io::Error::other(format!(
            "{method} {path}: podman's answer has no whole head"
        )));
    };
    let status = parsed.code.unwrap_or(502);
    let headers = lowercase_headers(parsed.headers);
    let mut body = answer.split_off(head_len);
    if let Some(length) = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
    {
        body.truncate(length);
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// Writes an answer whole and ends the connection.
async fn answer(
    client: &mut UnixStream,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> io::Result<()> {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("Unknown");
    let mut head = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in passed_on(headers) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    ));
    client.write_all(head.as_bytes()).await?;
    client.write_all(body).await?;
    client.shutdown().await
}

/// The headers passed on from one side to the other: not those about one connection or
/// the body's length, which the proxy sets itself.
fn passed_on(headers: &[(String, String)]) -> impl Iterator<Item = &(String, String)> {
    headers.iter().filter(|(name, _)| {
        !matches!(
            name.as_str(),
            "connection"
                | "keep-alive"
                | "transfer-encoding"
                | "upgrade"
                | "proxy-connection"
                | "content-length"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_told_by_method_and_path_with_or_without_a_version() {
        let remove = |force| Call::Remove {
            container: "x".into(),
            force,
        };
        let wait = |removed| Call::Wait {
            container: "x".into(),
            removed,
        };
        for (method, path, call) in [
            ("POST", "/containers/create?name=a", Call::Create),
            ("POST", "/v1.43/containers/create", Call::Create),
            ("POST", "/containers/a%2Fb/stop", Call::Stop),
            ("POST", "/containers/x/kill?signal=SIGTERM", Call::Kill),
            ("DELETE", "/v1.41/containers/x?force=true", remove(true)),
            ("DELETE", "/containers/x", remove(false)),
            ("DELETE", "/containers/x?force=false", remove(false)),
            ("POST", "/v1.43/containers/x/wait", wait(false)),
            ("POST", "/containers/x/wait?condition=removed", wait(true)),
            ("DELETE", "/containers/x/y", Call::Other),
            ("GET", "/containers/create", Call::Other),
            ("POST", "/containers/x/start", Call::Other),
            ("POST", "/exec/x/start", Call::Other),
            ("GET", "/containers/x/wait", Call::Other),
            ("POST", "/version/containers/create", Call::Other),
        ] {
            assert_eq!(Call::of(method, path), call, "{method} {path}");
        }
    }

    #[test]
    fn podmans_500s_become_dockers_answers() {
        let error = |cause: &str, message: &str| {
            serde_json::to_vec(
                &serde_json::json!({"cause": cause, "message": message, "response": 500}),
            )
            .unwrap()
        };
        let in_use = error(
            "that name is already in use",
            "creating container storage: the container name \"a\" is already in use",
        );
        let improper = error(
            "container state improper",
            "can only kill running containers",
        );
        let dependents = error(
            "container already exists",
            "container 4cb1 has dependent containers which must be removed before it: 4977",
        );
        let remove = Call::Remove {
            container: "a".into(),
            force: true,
        };
        assert_eq!(
            docker_answer(&Call::Create, 500, &in_use),
            Docker::Status(409)
        );
        assert_eq!(
            docker_answer(&Call::Stop, 500, &improper),
            Docker::Status(304)
        );
        assert_eq!(
            docker_answer(&Call::Kill, 500, &improper),
            Docker::Status(409)
        );
        assert_eq!(
            docker_answer(&remove, 500, &dependents),
            Docker::RemoveWithDependents("a".into())
        );
        // Anything else is podman's answer as it is.
        assert_eq!(docker_answer(&Call::Create, 201, b"{}"), Docker::Same);
        assert_eq!(docker_answer(&Call::Create, 500, &improper), Docker::Same);
        assert_eq!(docker_answer(&Call::Stop, 500, &in_use), Docker::Same);
        assert_eq!(docker_answer(&Call::Other, 500, &improper), Docker::Same);
        assert_eq!(docker_answer(&remove, 500, &improper), Docker::Same);
        assert_eq!(docker_answer(&Call::Kill, 500, b"not json"), Docker::Same);
        // Only a forced removal takes what depends on the container.
        let unforced = Call::Remove {
            container: "a".into(),
            force: false,
        };
        assert_eq!(docker_answer(&unforced, 500, &dependents), Docker::Same);
    }

    #[test]
    fn libpods_wait_answer_is_read_as_an_exit_code() {
        assert_eq!(exit_code(b"137"), Some(137));
        assert_eq!(exit_code(b"0\n"), Some(0));
        assert_eq!(exit_code(b"-1"), Some(-1));
        assert_eq!(exit_code(br#"{"cause":"no such container"}"#), None);
        assert_eq!(waited(3).body, br#"{"Error":null,"StatusCode":3}"#.to_vec());
    }

    #[test]
    fn a_removal_takes_the_containers_anonymous_volumes() {
        assert_eq!(
            with_volumes("/v1.41/containers/x?force=true"),
            "/v1.41/containers/x?force=true&v=true"
        );
        assert_eq!(with_volumes("/containers/x"), "/containers/x?v=true");
        // A caller that says `v` is left as it said.
        assert_eq!(
            with_volumes("/containers/x?v=false&force=true"),
            "/containers/x?v=false&force=true"
        );
        // A request passed through gets the path in its request line, the rest as it was.
        let sent = b"DELETE /containers/x?force=true HTTP/1.1\r\nHost: d\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(
            with_request_path(sent, "DELETE", "/containers/x?force=true&v=true"),
            b"DELETE /containers/x?force=true&v=true HTTP/1.1\r\nHost: d\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"
        );
    }
}
