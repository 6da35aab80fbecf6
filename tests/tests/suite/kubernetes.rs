//! `deploy/kubernetes/*.yaml` under `podman kube play`, the closest thing to a cluster on
//! the project's machines: the sandbox pod and the gateway Deployment run from the files
//! as they are, with fsd's image and the gateway's built from the binaries under test, and
//! a preview request and a route-API call through the gateway reach the sandbox pod.
//!
//! What podman is not: a cluster's DNS. The gateway finds sandbox `demo` at
//! `sandbox-demo.sandboxes` (the headless Service's name); here that name is given to the
//! gateway pod as a host alias for the sandbox pod's address, the one change made to the
//! files. The Secret is created as podman reads one (`podman secret create` with the
//! Secret's data as JSON); Services are not run (nothing routes by them here). The pods
//! publish their container ports on the host (3000, 8787), as `kube play` does; the test
//! talks to the pods' own addresses.

use std::process::{Command, Output};
use std::time::Duration;

use base64::Engine;
use fsd_tests::{available_or_skip, binary, is_root, on_path, podman, repo_root};
use serde_json::json;

const TOKEN: &str = "kube-secret-2f9a";

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn checked(what: &str, output: Output) -> String {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout(&output)
}

/// The address of pod `pod` on its network.
fn pod_address(pod: &str) -> String {
    let infra = checked(
        "pod inspect",
        podman(&["pod", "inspect", pod, "--format", "{{.InfraContainerID}}"]),
    );
    checked(
        "inspect",
        podman(&[
            "inspect",
            &infra,
            "--format",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
        ]),
    )
}

/// Takes the pods and the secret down, whatever happened.
struct Played(Vec<String>);

impl Drop for Played {
    fn drop(&mut self) {
        for pod in &self.0 {
            let _ = podman(&["pod", "rm", "-f", "-t", "0", pod]);
        }
        let _ = podman(&["secret", "rm", "fsd-token"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_kubernetes_files_run_under_podman_kube_play() {
    if !available_or_skip(
        is_root() && on_path("podman") && on_path("mmdebstrap") && on_path("runc"),
        "kubernetes::the_kubernetes_files_run_under_podman_kube_play",
        "root, podman, runc and mmdebstrap (.ci/run installs them)",
    ) {
        return;
    }
    // The images the files name, from the binaries under test.
    for (args, what) in [
        (vec![binary("fsd").display().to_string()], "fsd's image"),
        (
            vec![
                "--gateway".to_string(),
                binary("fsctl").display().to_string(),
            ],
            "the gateway's image",
        ),
    ] {
        let built = Command::new(repo_root().join("scripts/build-image"))
            .args(&args)
            .output()
            .expect("scripts/build-image");
        checked(what, built);
    }
    let played = Played(vec!["sandbox-demo".into(), "fsd-gateway-pod-0".into()]);
    let _ = podman(&["secret", "rm", "fsd-token"]);
    let data = json!({"token": base64::engine::general_purpose::STANDARD.encode(TOKEN)});
    let dir = tempfile::tempdir().expect("temp dir");
    let secret = dir.path().join("secret.json");
    std::fs::write(&secret, data.to_string()).expect("secret");
    checked(
        "secret create",
        podman(&[
            "secret",
            "create",
            "fsd-token",
            &secret.display().to_string(),
        ]),
    );

    let sandbox_yaml = repo_root().join("deploy/kubernetes/sandbox.yaml");
    checked(
        "kube play sandbox.yaml",
        podman(&[
            "kube",
            "play",
            "--replace",
            &sandbox_yaml.display().to_string(),
        ]),
    );
    let sandbox_address = pod_address("sandbox-demo");
    assert!(
        !sandbox_address.is_empty(),
        "the sandbox pod has no address"
    );

    // The gateway as the file has it, with the cluster DNS name as a host alias.
    let gateway = std::fs::read_to_string(repo_root().join("deploy/kubernetes/gateway.yaml"))
        .expect("gateway.yaml");
    let aliased = gateway.replacen(
        "    spec:\n      containers:",
        &format!(
            "    spec:\n      hostAliases:\n        - ip: \"{sandbox_address}\"\n          hostnames: [\"sandbox-demo.sandboxes\"]\n      containers:"
        ),
        1,
    );
    assert_ne!(
        aliased, gateway,
        "gateway.yaml has no pod spec to add the alias to"
    );
    let gateway_yaml = dir.path().join("gateway.yaml");
    std::fs::write(&gateway_yaml, aliased).expect("gateway yaml");
    checked(
        "kube play gateway.yaml",
        podman(&[
            "kube",
            "play",
            "--replace",
            &gateway_yaml.display().to_string(),
        ]),
    );
    let gateway = format!("http://{}:8787", pod_address("fsd-gateway-pod-0"));
    let sandbox = format!("http://{sandbox_address}:3000");

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    // Both pods answer (the sandbox's readiness probe path, then the gateway).
    let mut up = false;
    for _ in 0..200 {
        let sandbox_up = http
            .get(format!("{sandbox}/api/ping"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        let gateway_up = http
            .get(format!("{gateway}/exposed?sandboxId=demo"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        if sandbox_up && gateway_up {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "the pods did not come up");
    // The sandbox's API wants the Secret's token.
    let refused = http
        .post(format!("{sandbox}/api/execute"))
        .json(&json!({"command": "true"}))
        .send()
        .await
        .expect("request");
    assert_eq!(refused.status(), 401);

    // The route API through the gateway, by sandbox id.
    let (status, started) = fsd_tests::reply(
        http.post(format!("{gateway}/sandboxes/demo/api/process/start"))
            .bearer_auth(TOKEN)
            .json(&json!({
                "command": "mkdir -p /workspace/site && cd /workspace/site && echo kube > index.txt && python3 -m http.server 8080",
                "processId": "web",
            })),
    )
    .await;
    assert_eq!(status, 200, "{started}");
    let (status, exposed) = fsd_tests::reply(
        http.post(format!("{gateway}/expose"))
            .bearer_auth(TOKEN)
            .json(&json!({"sandboxId": "demo", "port": 8080})),
    )
    .await;
    assert_eq!(status, 200, "{exposed}");
    let url = exposed["url"].as_str().expect("url");
    let host = url.trim_start_matches("https://").trim_end_matches('/');
    assert!(host.ends_with(".preview.example.com"), "{url}");
    // A preview request through the gateway reaches the sandbox pod's port.
    let mut page = String::new();
    for _ in 0..100 {
        let response = http
            .get(format!("{gateway}/index.txt"))
            .header("host", host)
            .send()
            .await
            .expect("preview request");
        if response.status() == 200 {
            page = response.text().await.unwrap_or_default();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(page, "kube\n");
    let wrong = host.replacen(
        exposed["token"].as_str().expect("token"),
        "wrongwrongwrong1",
        1,
    );
    let refused = http
        .get(format!("{gateway}/"))
        .header("host", wrong)
        .send()
        .await
        .expect("preview request");
    assert_eq!(refused.status(), 404);
    drop(played);
}
