//! The credential proxy against the embedded store (s3s-fs checks SigV4, so a request
//! only succeeds if the proxy signed it right): unsigned requests inside the scope pass,
//! client credentials are dropped, anything outside (or without the mount's token) is a
//! 403 S3 `AccessDenied`.

use fsd_control::Scope;
use fsd_s3::{CredentialProxy, ObjectStore};
use fsd_tests::s3::{ACCESS_KEY, BUCKET, SECRET_KEY, Store};

async fn proxy(store: &Store, prefix: &str, read_only: bool) -> CredentialProxy {
    let scope = Scope {
        bucket: BUCKET.into(),
        prefix: prefix.into(),
        read_only,
    };
    let upstream = store.object_store(None).upstream();
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
        // The mount's token is the proxy URL's path: without it, or with another, nothing.
        (
            http.get(format!(
                "http://{}/{BUCKET}/team-a/hello%20world.txt",
                rw.address
            )),
            "no token",
        ),
        (
            http.get(format!(
                "http://{}/{}/{BUCKET}/team-a/hello%20world.txt",
                rw.address,
                "0".repeat(32)
            )),
            "another token",
        ),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_object_client_works_through_the_proxy_and_with_its_own_keys() {
    use fsd_s3::ObjectClient;
    let store = Store::start();
    let proxied = proxy(&store, "", false).await;
    let through_proxy = ObjectClient::new(&proxied.url(), BUCKET, None).unwrap();
    let own_keys = store.object_store(None).upstream();
    let direct = ObjectClient::new(&store.url, BUCKET, Some(own_keys)).unwrap();
    for client in [&through_proxy, &direct] {
        client
            .put("data/ä b/one.txt", bytes::Bytes::from_static(b"0123456789"))
            .await
            .expect("put");
        client
            .put("data/two.txt", bytes::Bytes::from_static(b"two"))
            .await
            .expect("put");
        let listing = client.list("data/").await.expect("list");
        assert_eq!(listing.prefixes, vec!["data/ä b/".to_string()]);
        assert_eq!(
            listing
                .objects
                .iter()
                .map(|o| o.key.as_str())
                .collect::<Vec<_>>(),
            vec!["data/two.txt"]
        );
        assert_eq!(listing.objects[0].size, 3);
        assert_eq!(
            client
                .head("data/ä b/one.txt")
                .await
                .unwrap()
                .map(|info| info.size),
            Some(10)
        );
        assert_eq!(client.head("data/missing").await.unwrap(), None);
        assert_eq!(
            &client.get_range("data/ä b/one.txt", 2, 5).await.unwrap()[..],
            b"234"
        );
        client
            .copy("data/two.txt", "data/three.txt")
            .await
            .expect("copy");
        client.delete("data/two.txt").await.expect("delete");
        let names: Vec<String> = client
            .list("data/")
            .await
            .unwrap()
            .objects
            .into_iter()
            .map(|o| o.key)
            .collect();
        assert_eq!(names, vec!["data/three.txt".to_string()]);
        client.delete("data/three.txt").await.unwrap();
        client.delete("data/ä b/one.txt").await.unwrap();
    }
    // Pages: more keys than one listing page holds.
    let many = 1_005;
    let puts = (0..many).map(|i| {
        let client = through_proxy.clone();
        async move {
            client
                .put(&format!("bulk/k{i:05}"), bytes::Bytes::from_static(b"x"))
                .await
        }
    });
    for result in futures_util::future::join_all(puts).await {
        result.expect("put");
    }
    let listing = through_proxy.list("bulk/").await.expect("list");
    assert_eq!(listing.objects.len(), many);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsctl_proxy_serves_a_read_only_scope() {
    let store = Store::start();
    let seed = fsd_s3::ObjectClient::new(
        &store.url,
        BUCKET,
        Some(store.object_store(None).upstream()),
    )
    .unwrap();
    seed.put("shared/readme.txt", bytes::Bytes::from_static(b"read me\n"))
        .await
        .unwrap();
    let mut child = std::process::Command::new(fsd_tests::binary("fsctl"))
        .args([
            "proxy",
            "--prefix",
            "shared/",
            "--read-only",
            "--s3-endpoint",
            &store.url,
            "--s3-bucket",
            BUCKET,
        ])
        .env("FSD_S3_ACCESS_KEY", ACCESS_KEY)
        .env("FSD_S3_SECRET_KEY", SECRET_KEY)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("fsctl proxy");
    let line = fsd_tests::first_line(&mut child, "fsctl proxy");
    let url = line
        .strip_prefix("fsd proxy listening on ")
        .expect("listen line")
        .to_string();
    let http = reqwest::Client::new();
    let (status, body) = send(http.get(format!("{url}/{BUCKET}/shared/readme.txt"))).await;
    assert_eq!((status, body.as_str()), (200, "read me\n"));
    let (status, body) = send(http.put(format!("{url}/{BUCKET}/shared/new.txt")).body("x")).await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = send(http.get(format!("{url}/{BUCKET}/private/x"))).await;
    assert_eq!(status, 403);
    let _ = child.kill();
    let _ = child.wait();
}
