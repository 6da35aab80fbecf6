//! Large /api/write bodies: base64 content is written while the body arrives, and every
//! body that is not that simple shape gets exactly the ordinary path's answer.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use fsd_tests::{Daemon, assert_validation};
use reqwest::StatusCode;
use serde_json::Value;

/// Large enough that the daemon writes while receiving (it does from 64 KiB).
const LEN: usize = 300 * 1024;

/// POSTs a body given as text, so the test decides the order of its fields.
async fn post_text(daemon: &Daemon, body: String) -> (StatusCode, Value) {
    let response = daemon
        .request(reqwest::Method::POST, "/api/write")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap())
}

/// Names in `dir` that are fsd's temp files.
fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".fsd-"))
        .collect()
}

#[tokio::test]
async fn base64_lands_exactly_whatever_the_order_of_the_fields() {
    let daemon = Daemon::start();
    let bytes = fsd_tests::noise(LEN, 11);
    let text = BASE64.encode(&bytes);
    let absolute = daemon.path("abs.bin").display().to_string();
    let bodies = [
        (
            "in-order.bin",
            format!(r#"{{"path":"in-order.bin","content":"{text}","encoding":"base64"}}"#),
        ),
        (
            "first.bin",
            format!(r#"{{"encoding":"base64","path":"first.bin","content":"{text}"}}"#),
        ),
        (
            "after.bin",
            format!(r#"{{"content":"{text}","path":"after.bin","encoding":"base64"}}"#),
        ),
        (
            "abs.bin",
            format!(
                r#"{{ "path" : "{absolute}" , "content" : "{text}" , "encoding" : "base64" }}"#
            ),
        ),
    ];
    for (name, body) in bodies {
        // Written twice: a new file, then a replacement of it.
        for _ in 0..2 {
            let (status, reply) = post_text(&daemon, body.clone()).await;
            assert_eq!(status, StatusCode::OK, "{name}: {reply}");
            assert_eq!(reply["bytesWritten"], LEN, "{name}");
            assert_eq!(std::fs::read(daemon.path(name)).unwrap(), bytes, "{name}");
        }
    }
    assert_eq!(temp_files(&daemon.root()), Vec::<String>::new());
}

#[tokio::test]
async fn a_session_named_after_the_content_decides_where_a_relative_path_goes() {
    let daemon = Daemon::start();
    std::fs::create_dir(daemon.path("proj")).unwrap();
    let (status, reply) = daemon
        .post(
            "/api/session/create",
            serde_json::json!({"id": "s1", "cwd": "proj"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let bytes = fsd_tests::noise(LEN, 12);
    let text = BASE64.encode(&bytes);
    let (status, reply) = post_text(
        &daemon,
        format!(r#"{{"path":"s.bin","content":"{text}","sessionId":"s1","encoding":"base64"}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(std::fs::read(daemon.path("proj/s.bin")).unwrap(), bytes);
    assert!(
        !daemon.path("s.bin").exists(),
        "written outside the session's cwd"
    );
    assert_eq!(temp_files(&daemon.root()), Vec::<String>::new());
}

#[tokio::test]
async fn text_that_looks_like_base64_is_written_as_text() {
    let daemon = Daemon::start();
    let text = "QUJD".repeat(LEN / 4);
    for (name, encoding) in [("plain.txt", ""), ("utf8.txt", r#","encoding":"utf-8""#)] {
        let (status, reply) = post_text(
            &daemon,
            format!(r#"{{"path":"{name}","content":"{text}"{encoding}}}"#),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{name}: {reply}");
        assert_eq!(std::fs::read_to_string(daemon.path(name)).unwrap(), text);
    }
    assert_eq!(temp_files(&daemon.root()), Vec::<String>::new());
}

#[tokio::test]
async fn base64_with_line_breaks_or_escapes_is_decoded_as_small_bodies_are() {
    let daemon = Daemon::start();
    let bytes = fsd_tests::noise(LEN, 13);
    let text = BASE64.encode(&bytes);
    // Wrapped at 76 columns, as `base64` prints it; the JSON escape arrives after 4 KiB.
    let wrapped: Vec<&str> = text
        .as_bytes()
        .chunks(76)
        .map(|line| std::str::from_utf8(line).unwrap())
        .collect();
    let slash = 8000 + text[8000..].find('/').expect("a slash after 8 kB");
    let late_escape = format!("{}\\/{}", &text[..slash], &text[slash + 1..]);
    for (name, content) in [
        ("wrapped.bin", wrapped.join("\\n")),
        ("escaped.bin", late_escape),
    ] {
        let (status, reply) = post_text(
            &daemon,
            format!(r#"{{"path":"{name}","content":"{content}","encoding":"base64"}}"#),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{name}: {reply}");
        assert_eq!(std::fs::read(daemon.path(name)).unwrap(), bytes, "{name}");
    }
    assert_eq!(temp_files(&daemon.root()), Vec::<String>::new());
}

#[tokio::test]
async fn bad_base64_is_refused_and_the_old_file_kept() {
    let daemon = Daemon::start();
    std::fs::write(daemon.path("kept.bin"), "old").unwrap();
    let text = BASE64.encode(fsd_tests::noise(LEN, 14));
    // Padding in the middle, a character outside the alphabet late, a cut last group.
    let bodies = [
        format!("{}QQ=={}", &text[..LEN], &text[LEN..]),
        format!("{}*{}", &text[..200_000], &text[200_001..]),
        text[..text.len() - 1].to_string(),
    ];
    for content in bodies {
        let (status, reply) = post_text(
            &daemon,
            format!(r#"{{"path":"kept.bin","content":"{content}","encoding":"base64"}}"#),
        )
        .await;
        assert_validation(status, &reply, "content");
        assert_eq!(
            reply["context"]["validationErrors"][0]["code"],
            "INVALID_BASE64"
        );
        assert_eq!(std::fs::read(daemon.path("kept.bin")).unwrap(), b"old");
    }
    // Other fields are checked as in small bodies, after the content.
    let (status, reply) = post_text(
        &daemon,
        format!(r#"{{"path":"kept.bin","content":"{text}","encoding":"base64","sessionId":7}}"#),
    )
    .await;
    assert_validation(status, &reply, "sessionId");
    assert_eq!(std::fs::read(daemon.path("kept.bin")).unwrap(), b"old");
    assert_eq!(temp_files(&daemon.root()), Vec::<String>::new());
}
