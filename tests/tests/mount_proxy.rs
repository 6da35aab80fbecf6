//! The credential proxy against the embedded store (s3s-fs checks SigV4, so a request
//! only succeeds if the proxy signed it right): unsigned requests inside the scope pass,
//! client credentials are dropped, anything outside is a 403 S3 `AccessDenied`.

use fsd_mounts::{CredentialProxy, Scope, Upstream};
use fsd_tests::s3::{ACCESS_KEY, BUCKET, SECRET_KEY, Store};

async fn proxy(store: &Store, prefix: &str, read_only: bool) -> CredentialProxy {
    let scope = Scope {
        bucket: BUCKET.into(),
        prefix: prefix.into(),
        read_only,
    };
    let upstream = Upstream {
        endpoint: store.url.clone(),
        region: "us-east-1".into(),
        access_key: ACCESS_KEY.into(),
        secret_key: SECRET_KEY.into(),
    };
    CredentialProxy::start("127.0.0.1:0".parse().unwrap(), scope, upstream)
        .await
        .expect("proxy")
}

async fn send(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signs_requests_inside_the_scope_and_refuses_the_rest() {
    let store = Store::start();
    let http = reqwest::Client::new();
    // The store refuses unsigned requests: whatever passes below was signed by the proxy.
    let (status, _) = send(
        http.put(format!("{}/{BUCKET}/team-a/direct", store.url))
            .body("x"),
    )
    .await;
    assert_eq!(status, 403, "the store checks signatures");

    let rw = proxy(&store, "team-a/", false).await;
    let url = |key: &str| format!("{}/{BUCKET}/{key}", rw.url());
    let (status, body) = send(http.put(url("team-a/hello world.txt")).body("hello\n")).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(http.get(url("team-a/hello%20world.txt"))).await;
    assert_eq!((status, body.as_str()), (200, "hello\n"));
    let (status, body) = send(
        http.get(url("team-a/hello%20world.txt"))
            .header("range", "bytes=1-3"),
    )
    .await;
    assert_eq!((status, body.as_str()), (206, "ell"));
    // Credentials a client sends are dropped, not forwarded.
    let (status, body) = send(
        http.put(url("team-a/nested/dir/x.bin"))
            .header("authorization", "AWS4-HMAC-SHA256 Credential=stolen")
            .body(vec![7u8; 70_000]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(http.get(format!(
        "{}/{BUCKET}?list-type=2&prefix=team-a%2F&delimiter=%2F",
        rw.url()
    )))
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("team-a/hello world.txt") && body.contains("team-a/nested/"),
        "{body}"
    );
    let (status, body) = send(http.post(format!("{}?uploads", url("team-a/big")))).await;
    assert_eq!(status, 200, "multipart create through the proxy: {body}");
    let (status, _) = send(http.delete(url("team-a/nested/dir/x.bin"))).await;
    assert_eq!(status, 204);

    for (request, what) in [
        (http.put(url("team-b/x")).body("x"), "another prefix"),
        (http.get(url("team-b/x")), "reading another prefix"),
        (
            http.get(format!("{}/other-bucket/team-a/x", rw.url())),
            "another bucket",
        ),
        (
            http.get(format!("{}/{BUCKET}?list-type=2&prefix=", rw.url())),
            "listing the whole bucket",
        ),
        (
            http.put(url("team-a/copy"))
                .header("x-amz-copy-source", format!("/{BUCKET}/team-b/secret")),
            "copying from outside",
        ),
        (http.get(url("team-a/../team-b/x")), "dot-dot"),
    ] {
        let (status, body) = send(request).await;
        assert_eq!(status, 403, "{what}: {body}");
        assert!(body.contains("<Code>AccessDenied</Code>"), "{what}: {body}");
    }

    let ro = proxy(&store, "team-a/", true).await;
    let (status, body) =
        send(http.get(format!("{}/{BUCKET}/team-a/hello%20world.txt", ro.url()))).await;
    assert_eq!((status, body.as_str()), (200, "hello\n"));
    for request in [
        http.put(format!("{}/{BUCKET}/team-a/new", ro.url()))
            .body("x"),
        http.delete(format!("{}/{BUCKET}/team-a/hello%20world.txt", ro.url())),
        http.post(format!("{}/{BUCKET}/team-a/big?uploads", ro.url())),
    ] {
        let (status, body) = send(request).await;
        assert_eq!(status, 403, "{body}");
    }
    let (status, _) =
        send(http.get(format!("{}/{BUCKET}/team-a/hello%20world.txt", rw.url()))).await;
    assert_eq!(status, 200, "the read-only proxy deleted nothing");
}
