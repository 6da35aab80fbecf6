//! The hostile-input suite: every JSON route × every field (nested ones included) × hostile
//! values, plus malformed bodies and hostile path parameters, generated from one route
//! table. Every path a hostile value can name resolves inside the test's own workspace.

use serde_json::{Value, json};

/// A route and a body it accepts (or refuses for a reason unrelated to the field tried).
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub sample: Value,
    /// The response is a stream: only the status is read.
    pub streams: bool,
}

/// The route table. `ws` is the workspace (absolute), `tag` makes names unique to the run.
/// Samples that would reach the network point at a closed loopback port.
pub fn routes(ws: &str, tag: &str) -> Vec<Route> {
    let archive = format!("/var/backups/{tag}/suite.sqsh");
    let missing = format!("/var/backups/{tag}/missing.sqsh");
    let decoy = format!("{ws}/decoy");
    let restored = format!("{ws}/scratch/restored");
    let mnt = format!("{ws}/scratch/mnt");
    let closed = "http://127.0.0.1:9/x";
    let json = |method, path, sample: Value| Route {
        method,
        path,
        sample,
        streams: false,
    };
    let stream = |method, path, sample: Value| Route {
        method,
        path,
        sample,
        streams: true,
    };
    vec![
        json(
            "POST",
            "/api/read",
            json!({"path": "decoy/a.txt", "encoding": "utf-8", "sessionId": "s"}),
        ),
        stream(
            "POST",
            "/api/read/stream",
            json!({"path": "decoy/a.txt", "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/write",
            json!({"path": "scratch/w.txt", "content": "x", "encoding": "utf-8", "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/delete",
            json!({"path": "scratch/none.txt", "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/rename",
            json!({"oldPath": "scratch/none.txt", "newPath": "scratch/r.txt", "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/move",
            json!({"sourcePath": "scratch/none.txt", "destinationPath": "scratch/m.txt", "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/mkdir",
            json!({"path": "scratch/d", "recursive": true, "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/list-files",
            json!({"path": "decoy", "options": {"recursive": true, "includeHidden": false}, "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/exists",
            json!({"path": "decoy/a.txt", "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/stat",
            json!({"path": "decoy/a.txt", "followSymlinks": true, "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/session/create",
            json!({"id": "suite", "env": {"K": "v"}, "cwd": "scratch", "commandTimeoutMs": 5000}),
        ),
        json(
            "POST",
            "/api/session/delete",
            json!({"sessionId": "no-such-session"}),
        ),
        json(
            "POST",
            "/api/execute",
            json!({"command": "true", "sessionId": "suite-exec", "timeoutMs": 5000, "env": {"K": "v"}, "cwd": "scratch", "origin": "user", "background": false}),
        ),
        stream(
            "POST",
            "/api/execute/stream",
            json!({"command": "true", "sessionId": "suite-exec", "env": {"K": "v"}, "cwd": "scratch"}),
        ),
        json(
            "POST",
            "/api/process/start",
            json!({"command": "true", "sessionId": "suite-proc", "processId": "p", "timeoutMs": 5000, "env": {"K": "v"}, "cwd": "scratch"}),
        ),
        stream(
            "POST",
            "/api/port-watch",
            json!({"port": 1, "mode": "tcp", "path": "/", "statusMin": 200, "statusMax": 399, "processId": "p", "interval": 100}),
        ),
        stream(
            "POST",
            "/api/watch",
            json!({"path": "decoy", "recursive": true, "include": ["*.txt"], "events": ["create"], "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/watch/check",
            json!({"path": "decoy", "recursive": true, "exclude": ["x"], "events": ["create"], "since": "watch-1-abc:1", "paths": true, "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/backup/create",
            json!({"dir": decoy, "archivePath": archive, "gitignore": false, "excludes": ["x"], "compression": {"format": "zstd", "threads": 1}, "layer": false, "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/backup/restore",
            json!({"dir": restored, "archivePath": missing, "parentArchivePaths": [missing], "sessionId": "s"}),
        ),
        json(
            "POST",
            "/api/backup/upload-parts",
            json!({"archivePath": missing, "parts": [{"partNumber": 1, "url": closed, "offset": 0, "size": 1}], "sessionId": "s"}),
        ),
        stream(
            "POST",
            "/api/backup/upload",
            json!({"dir": decoy, "archivePath": archive, "upload": {"url": closed, "minPartSize": 1}}),
        ),
        stream(
            "POST",
            "/api/backup/download",
            json!({"dir": restored, "archives": [{"archivePath": missing, "url": closed, "sizeBytes": 1, "sha256": "00"}], "sessionId": "s"}),
        ),
        json("POST", "/api/backup/unmount", json!({"dir": restored})),
        json(
            "POST",
            "/api/mounts",
            json!({"bucket": "b", "mountPath": mnt, "endpoint": closed, "prefix": "/p/", "readOnly": true, "provider": "r2", "region": "auto", "cacheTtlMs": 1000}),
        ),
        json("DELETE", "/api/mounts", json!({"mountPath": mnt})),
    ]
}

/// Hostile values for a field, as raw JSON text (some are not valid JSON on purpose).
/// `ws` is the workspace's absolute path; `marker` a path inside it that a shell injection
/// would create. No string here names a path outside the workspace.
pub fn values(ws: &str, marker: &str, command_field: bool) -> Vec<Vec<u8>> {
    let mut strings: Vec<String> = vec![
        String::new(),
        " ".into(),
        "\u{0}".into(),
        "a\u{0}b".into(),
        "a".repeat(5000),
        "é".repeat(2500),
        "\u{202e}\u{feff}x".into(),
        "decoy/../../".to_string() + ws.rsplit('/').next().unwrap_or("") + "/scratch/dots",
        "../".repeat(40) + ws.trim_start_matches('/') + "/scratch/dots",
        "a/b/../../../".to_string() + ws.rsplit('/').next().unwrap_or("") + "/scratch",
        "scratch/./././/x".into(),
        "%2e%2e%2fscratch".into(),
        "~".into(),
        "-rf".into(),
        "--help".into(),
    ];
    if !command_field {
        // Data that a shell would run if it ever reached one unquoted.
        strings.extend([
            format!("$(touch {marker})"),
            format!("`touch {marker}`"),
            format!("'; touch {marker}; '"),
            format!("\"; touch {marker}; \""),
            format!("x\ntouch {marker}\n"),
            format!("x && touch {marker}"),
        ]);
    }
    let mut raw: Vec<Vec<u8>> = strings
        .iter()
        .map(|s| serde_json::to_vec(s).unwrap_or_default())
        .collect();
    for fragment in [
        "null",
        "true",
        "0",
        "-1",
        "-9223372036854775809",
        "18446744073709551616",
        "1e308",
        "-1e308",
        "1.5",
        "[]",
        "{}",
        "[1,\"a\",null]",
        "{\"a\":{\"b\":[]}}",
        "\"\\ud800\"",
        "\"\\udfff\\ud800\"",
        "\"\\u0000\"",
    ] {
        raw.push(fragment.as_bytes().to_vec());
    }
    // Invalid UTF-8 inside a string.
    raw.push(b"\"a\xff\xfeb\"".to_vec());
    raw
}

/// Whole bodies that are not what any route takes. `field` is one of the route's fields.
pub fn malformed_bodies(field: &str) -> Vec<Vec<u8>> {
    vec![
        Vec::new(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"{".to_vec(),
        b"not json".to_vec(),
        b"{}".to_vec(),
        "[".repeat(100_000).into_bytes(),
        "{\"a\":".repeat(50_000).into_bytes(),
        format!("{{\"{field}\":\"x\",\"{field}\":\"y\"}}").into_bytes(),
        b"\xff\xfe{}".to_vec(),
        format!("{{\"{field}\":\"x\"}} trailing").into_bytes(),
    ]
}

/// Every place in `value` a hostile value can go: object members and array items, at any
/// depth, as JSON-pointer-like key paths.
pub fn fields(value: &Value) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    walk(value, &mut Vec::new(), &mut found);
    found
}

fn walk(value: &Value, at: &mut Vec<String>, found: &mut Vec<Vec<String>>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                at.push(key.clone());
                found.push(at.clone());
                walk(child, at, found);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                at.push(i.to_string());
                found.push(at.clone());
                walk(child, at, found);
                at.pop();
            }
        }
        _ => {}
    }
}

const PLACEHOLDER: &str = "__fsd_hostile_value__";

/// `sample` with the value at `field` replaced by the raw bytes `raw`.
pub fn body_with(sample: &Value, field: &[String], raw: &[u8]) -> Vec<u8> {
    let mut body = sample.clone();
    let mut slot = &mut body;
    for key in field {
        slot = match slot {
            Value::Object(map) => map.get_mut(key).expect("field in sample"),
            Value::Array(items) => &mut items[key.parse::<usize>().expect("index")],
            _ => unreachable!("fields() only walks objects and arrays"),
        };
    }
    *slot = Value::String(PLACEHOLDER.into());
    let text = serde_json::to_vec(&body).expect("sample serializes");
    let needle = format!("\"{PLACEHOLDER}\"");
    let at = text
        .windows(needle.len())
        .position(|window| window == needle.as_bytes())
        .expect("placeholder in body");
    let mut out = text[..at].to_vec();
    out.extend_from_slice(raw);
    out.extend_from_slice(&text[at + needle.len()..]);
    out
}
