//! `fsd_s3::sign::presign` (the signing the Worker can do, no runtime needed) against the
//! real S3-compatible store, which checks presigned signatures: a PUT and a GET through
//! presigned URLs, and refusals for a changed key, a changed method and an expired URL.

use std::time::{Duration, SystemTime};

use fsd_s3::Upstream;
use fsd_s3::sign::{object_url, presign};
use fsd_tests::s3::{ACCESS_KEY, BUCKET, SECRET_KEY, Store};

#[tokio::test]
async fn presigned_urls_are_accepted_by_the_store_and_only_for_what_they_sign() {
    let store = Store::start();
    let upstream = Upstream {
        endpoint: store.url.clone(),
        region: "us-east-1".into(),
        access_key: ACCESS_KEY.into(),
        secret_key: SECRET_KEY.into(),
    };
    let key = "backups/presign test/data.sqsh";
    let object = object_url(&store.url, BUCKET, key, &[]);
    let hour = Duration::from_secs(3600);
    let now = SystemTime::now();
    let http = reqwest::Client::new();

    let put = presign(&upstream, "PUT", &object, hour, now).unwrap();
    let stored = http.put(&put).body("archive bytes").send().await.unwrap();
    assert_eq!(stored.status(), 200, "{}", stored.text().await.unwrap());
    assert_eq!(
        std::fs::read(store.dir.path().join(BUCKET).join(key)).unwrap(),
        b"archive bytes"
    );

    let get = presign(&upstream, "GET", &object, hour, now).unwrap();
    let got = http.get(&get).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.bytes().await.unwrap().as_ref(), b"archive bytes");

    // Another key with the same signature, another method, an expired URL: refused.
    let other = get.replace("data.sqsh", "meta.json");
    assert_eq!(http.get(&other).send().await.unwrap().status(), 403);
    assert_eq!(http.delete(&get).send().await.unwrap().status(), 403);
    let long_ago = now - Duration::from_secs(7200);
    let expired = presign(&upstream, "GET", &object, hour, long_ago).unwrap();
    assert_eq!(http.get(&expired).send().await.unwrap().status(), 403);
}
