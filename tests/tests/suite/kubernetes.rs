//! `deploy/kubernetes/*.yaml` under `podman kube play`, the closest thing to a cluster on
//! the project's machines: the sandbox pod and the gateway Deployment run from the files
//! as they are, with fsd's image and the gateway's built from the binaries under test, and
//! a preview request and a route-API call through the gateway reach the sandbox pod.
//!
//! What podman is not: a cluster's DNS. The gateway finds sandbox `demo` at
//! `sandbox-demo.sandboxes` (the headless Service's name); here that name is given to the
//! gateway pod as a host alias for the sandbox pod's address, the one change made to the
//! files. A second sandbox, `other`, is the same Pod with its id changed, as the file says
//! to make one (and another host port: podman publishes container ports on the host). The Secrets are created as podman reads one (`podman secret create` with
//! the Secret's data as JSON): the gateway's callers' token, its sandbox token key, and each
//! sandbox's own token as `fsctl sandbox-token` derives it; Services are not run (nothing
//! routes by them here). The pods
//! publish their container ports on the host (3000, 8787), as `kube play` does; the test
//! talks to the pods' own addresses.

use std::process::{Command, Output};
use std::time::Duration;

use base64::Engine;
use fsd_tests::{available_or_skip, binary, is_root, on_path, podman, repo_root};
use serde_json::json;

const TOKEN: &str = "kube-secret-2f9a";
const SANDBOX_KEY: &str = "kube-sandbox-key-71c3";
const SECRETS: [&str; 4] = [
    "fsd-gateway-token",
    "fsd-sandbox-token-key",
    "fsd-token-demo",
    "fsd-token-other",
];

/// A Secret as podman reads one: `key` holding `value`.
fn create_secret(dir: &std::path::Path, name: &str, key: &str, value: &str) {
    let _ = podman(&["secret", "rm", name]);
    let data = json!({ key: base64::engine::general_purpose::STANDARD.encode(value) });
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, data.to_string()).expect("secret");
    checked(
        "secret create",
        podman(&["secret", "create", name, &file.display().to_string()]),
    );
}

/// Sandbox `id`'s daemon token, as the trusted side makes it for the sandbox's Secret.
fn sandbox_token(id: &str) -> String {
    checked(
        "fsctl sandbox-token",
        Command::new(binary("fsctl"))
            .args(["sandbox-token", id])
            .env("FSD_SANDBOX_TOKEN_KEY", SANDBOX_KEY)
            .output()
            .expect("fsctl"),
    )
}

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
            // The pod's containers first, with their anonymous volumes (`pod rm` leaves
            // them, and each one holds one of podman's locks).
            let listed = podman(&["ps", "-a", "-q", "--filter", &format!("pod={pod}")]);
            let containers = String::from_utf8_lossy(&listed.stdout).into_owned();
            let mut remove = vec!["rm", "-f", "-v", "-t", "0", "--depend"];
            remove.extend(containers.lines());
            if remove.len() > 6 {
                let _ = podman(&remove);
            }
            let _ = podman(&["pod", "rm", "-f", "-t", "0", pod]);
        }
        for secret in SECRETS {
            let _ = podman(&["secret", "rm", secret]);
        }
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
    let played = Played(vec![
        "sandbox-demo".into(),
        "sandbox-other".into(),
        "fsd-gateway-pod-0".into(),
    ]);
    let dir = tempfile::tempdir().expect("temp dir");
    let (demo_token, other_token) = (sandbox_token("demo"), sandbox_token("other"));
    assert_eq!(demo_token.len(), 64, "{demo_token}");
    assert_ne!(demo_token, other_token);
    create_secret(dir.path(), "fsd-gateway-token", "token", TOKEN);
    create_secret(dir.path(), "fsd-sandbox-token-key", "key", SANDBOX_KEY);
    create_secret(dir.path(), "fsd-token-demo", "token", &demo_token);
    create_secret(dir.path(), "fsd-token-other", "token", &other_token);

    // The sandbox as the file has it, and another made from it as the file says.
    let sandbox_file = std::fs::read_to_string(repo_root().join("deploy/kubernetes/sandbox.yaml"))
        .expect("sandbox.yaml");
    let other_yaml = dir.path().join("other.yaml");
    // podman (4.3) publishes a pod's container ports on the host, where two sandboxes'
    // 3000 collide: the copy names another host port (a cluster publishes none).
    let other_file = sandbox_file.replace("demo", "other").replacen(
        "          containerPort: 3000\n",
        "          containerPort: 3000\n          hostPort: 3001\n",
        1,
    );
    assert_ne!(other_file, sandbox_file.replace("demo", "other"));
    std::fs::write(&other_yaml, other_file).expect("other yaml");
    for file in [
        repo_root().join("deploy/kubernetes/sandbox.yaml"),
        other_yaml,
    ] {
        checked(
            "kube play sandbox.yaml",
            podman(&["kube", "play", "--replace", &file.display().to_string()]),
        );
    }
    let sandbox_address = pod_address("sandbox-demo");
    let other_address = pod_address("sandbox-other");
    assert!(
        !sandbox_address.is_empty() && !other_address.is_empty(),
        "a sandbox pod has no address"
    );

    // The gateway as the file has it, with the cluster DNS name as a host alias.
    let gateway = std::fs::read_to_string(repo_root().join("deploy/kubernetes/gateway.yaml"))
        .expect("gateway.yaml");
    let aliased = gateway.replacen(
        "    spec:\n      containers:",
        &format!(
            "    spec:\n      hostAliases:\n        - ip: \"{sandbox_address}\"\n          hostnames: [\"sandbox-demo.sandboxes\"]\n        - ip: \"{other_address}\"\n          hostnames: [\"sandbox-other.sandboxes\"]\n      containers:"
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
    // The sandbox's API wants the Secret's token: its own, not another sandbox's, and not
    // the gateway callers' token.
    let other = format!("http://{other_address}:3000");
    for (daemon, token, expected) in [
        (&sandbox, None, 401),
        (&sandbox, Some(&demo_token), 200),
        (&sandbox, Some(&other_token), 401),
        (&sandbox, Some(&TOKEN.to_string()), 401),
        (&other, Some(&other_token), 200),
        (&other, Some(&demo_token), 401),
    ] {
        let mut request = http
            .post(format!("{daemon}/api/execute"))
            .json(&json!({"command": "true"}));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let answer = request.send().await.expect("request");
        assert_eq!(answer.status(), expected, "{daemon} with {token:?}");
    }
    // Through the gateway, its callers' token reaches each sandbox (the gateway derives
    // each daemon's own); a sandbox's token opens nothing there.
    for id in ["demo", "other"] {
        let (status, reply) = fsd_tests::reply(
            http.post(format!("{gateway}/sandboxes/{id}/api/execute"))
                .bearer_auth(TOKEN)
                .json(&json!({"command": "echo $HOSTNAME"})),
        )
        .await;
        assert_eq!(status, 200, "{id}: {reply}");
        assert_eq!(reply["stdout"], format!("sandbox-{id}\n"), "{reply}");
    }
    let refused = http
        .post(format!("{gateway}/sandboxes/other/api/execute"))
        .bearer_auth(&demo_token)
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
