//! One gateway in front of twenty daemons, found by its `{id}` template: each sandbox is a
//! loopback address of its own (`127.0.0.<id>`), as each pod of a fleet is a host of its
//! own, so the same port in two sandboxes is two servers.

use std::net::{Ipv4Addr, TcpListener};

use fsd_api::process::StartProcessRequest;
use fsd_tests::{Daemon, Options};
use futures_util::StreamExt;
use serde_json::json;

use super::{expose_as, gateway_with, get};

const SANDBOXES: u8 = 20;
const TOKEN: &str = "fleet-token";

/// The sandbox ids: 2..=21, so sandbox `n` is `127.0.0.n`.
fn ids() -> impl Iterator<Item = u8> {
    2..2 + SANDBOXES
}

/// A port free on every sandbox's address.
fn port_free_everywhere() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let free = ids().all(|n| TcpListener::bind((Ipv4Addr::new(127, 0, 0, n), port)).is_ok());
        if free {
            return port;
        }
    }
}

#[tokio::test]
async fn one_gateway_fronts_twenty_daemons_by_its_template() {
    let api_port = port_free_everywhere();
    let daemons: Vec<Daemon> = ids()
        .map(|n| {
            Daemon::start_with(Options {
                listen: Some(format!("127.0.0.{n}:{api_port}")),
                token: Some(TOKEN.into()),
                ..Options::default()
            })
        })
        .collect();
    let state = tempfile::tempdir().unwrap();
    let template = format!("http://127.0.0.{{id}}:{api_port}");
    let gateway = gateway_with(
        &["--token", TOKEN, "gateway", "--daemons", &template],
        &state.path().join("exposures.json"),
    );
    let fleet = fsd_sdk::Gateway::connect(&gateway.url, Some(TOKEN));

    // The route API of each sandbox reaches its own daemon, and only with the token.
    for (n, daemon) in ids().zip(&daemons) {
        let sandbox = fleet.sandbox(&n.to_string()).unwrap();
        let root = daemon.root().to_str().unwrap().to_string();
        sandbox
            .write_file(&format!("{root}/who.txt"), &format!("sandbox {n}"))
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(daemon.root().join("who.txt")).unwrap(),
            format!("sandbox {n}")
        );
        let ran = sandbox.exec("cat who.txt").await.unwrap();
        assert_eq!(ran.stdout, format!("sandbox {n}"));
    }
    let client = reqwest::Client::new();
    let anonymous = client
        .post(format!("{}/sandboxes/2/api/execute", gateway.url))
        .json(&json!({"command": "true"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let bad_id = client
        .get(format!(
            "{}/sandboxes/evil.example:80%2f/api/ping",
            gateway.url
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(bad_id.status(), 400);

    // A stream through the gateway arrives event by event, and the WebSocket transport
    // and the same calls over it work through `/sandboxes/<id>/ws`.
    let third = fleet.sandbox("3").unwrap();
    let mut events = third
        .exec_stream(&fsd_api::exec::ExecuteRequest {
            command: "echo one; echo two".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        seen.push(format!("{:?}", event.unwrap()));
    }
    assert!(seen.iter().any(|e| e.contains("one")), "{seen:?}");
    let over_socket =
        fsd_sdk::Sandbox::connect_websocket(&format!("{}/sandboxes/4", gateway.url), Some(TOKEN))
            .await
            .unwrap();
    assert!(over_socket.uses_websocket());
    assert_eq!(
        over_socket.exec("cat who.txt").await.unwrap().stdout,
        "sandbox 4"
    );

    // The same port in every sandbox is that sandbox's server, at its own preview URL.
    let web_port = port_free_everywhere();
    for n in ids() {
        let sandbox = fleet.sandbox(&n.to_string()).unwrap();
        sandbox
            .start_process(&StartProcessRequest {
                command: format!("python3 -m http.server {web_port} --bind 127.0.0.{n}"),
                ..StartProcessRequest::default()
            })
            .await
            .unwrap();
    }
    for n in ids() {
        let address = (Ipv4Addr::new(127, 0, 0, n), web_port).into();
        fsd_tests::wait_until_listening(address, &format!("sandbox {n}'s server")).await;
    }
    for n in ids() {
        let body = json!({"sandboxId": n.to_string(), "port": web_port});
        let exposed = expose_as(&gateway.url, Some(TOKEN), body).await;
        let url = exposed["url"].as_str().unwrap();
        assert!(
            url.starts_with(&format!("http://{web_port}-{n}-")),
            "{exposed}"
        );
        let answer = get(&gateway, url, "/who.txt").await;
        assert_eq!(answer.status(), 200, "sandbox {n}");
        assert_eq!(answer.text().await.unwrap(), format!("sandbox {n}"));
    }
    // The admin API asks for the token as well.
    let refused = super::expose(&gateway, json!({"sandboxId": "2", "port": web_port})).await;
    assert_eq!(refused["code"], "UNAUTHORIZED", "{refused}");
}
