//! `wrangler.toml` agrees with what it deploys: the Durable Object class and binding the
//! Worker crate defines and uses, the container image's Dockerfile, its port and entry
//! point, and the variables the object reads.

use std::path::Path;

fn read(relative: &str) -> String {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn wrangler_toml_matches_the_worker_crate_and_the_dockerfile() {
    let wrangler: toml_edit::DocumentMut = read("wrangler.toml").parse().expect("wrangler.toml");
    let worker = read("worker/src/lib.rs");
    let object = read("worker/src/sandbox.rs");
    let dockerfile = read("Dockerfile");

    // The container: class Sandbox, built from the root Dockerfile.
    let container = &wrangler["containers"][0];
    assert_eq!(container["class_name"].as_str(), Some("Sandbox"));
    assert_eq!(container["image"].as_str(), Some("./Dockerfile"));
    // An instance type Cloudflare still names (wrangler warns that "standard" is now
    // "standard-1").
    assert!(matches!(
        container["instance_type"].as_str(),
        Some("lite" | "basic" | "standard-1" | "standard-2" | "standard-3" | "standard-4")
    ));
    assert!(object.contains("#[durable_object]\npub struct Sandbox"));

    // The binding the Worker looks objects up by, and a migration creating the class.
    let binding = &wrangler["durable_objects"]["bindings"][0];
    assert_eq!(binding["class_name"].as_str(), Some("Sandbox"));
    let name = binding["name"].as_str().unwrap();
    assert!(
        worker.contains(&format!("pub const BINDING: &str = \"{name}\";")),
        "the Worker uses another binding than {name}"
    );
    let migration = wrangler["migrations"][0]["new_sqlite_classes"]
        .as_array()
        .unwrap();
    assert!(
        migration
            .iter()
            .any(|class| class.as_str() == Some("Sandbox"))
    );

    // The port the object talks to is the one the image exposes and fsd listens on.
    let port = fsd_control::sandbox::DAEMON_PORT;
    assert!(dockerfile.contains(&format!("EXPOSE {port}")));
    assert!(dockerfile.contains(&format!("FSD_LISTEN=0.0.0.0:{port}")));
    assert!(dockerfile.contains(r#"ENTRYPOINT ["/usr/local/bin/fsd", "serve"]"#));

    // The variables the object reads are declared, with values its parsers accept.
    let vars = &wrangler["vars"];
    let sleep_after = vars["SLEEP_AFTER"].as_str().unwrap();
    assert!(fsd_control::sandbox::parse_sleep_after(sleep_after).is_ok());
    assert!(matches!(
        vars["KEEP_ALIVE"].as_str(),
        Some("true" | "false")
    ));
    for var in ["SLEEP_AFTER", "KEEP_ALIVE"] {
        assert!(object.contains(&format!("var(\"{var}\")")), "{var} unread");
    }
    // Secrets are read, never declared; R2's are read (secret, else var) in one place.
    let r2 = read("worker/src/r2.rs");
    assert!(worker.contains("secret(\"FSD_TOKEN\")"));
    for secret in ["R2_ACCOUNT_ID", "R2_ACCESS_KEY_ID", "R2_SECRET_ACCESS_KEY"] {
        assert!(
            r2.contains(&format!("value(\"{secret}\")")),
            "{secret} unread"
        );
    }
    // Bucket mounts route the container's requests back through `ctx.exports`, which needs
    // a compatibility date of 2025-11-17 or later.
    let mounts = read("worker/src/mounts.rs");
    assert!(mounts.contains("\"exports\"") && mounts.contains("interceptOutboundHttp"));
    let date = wrangler["compatibility_date"].as_str().unwrap();
    assert!(
        date >= "2025-11-17",
        "compatibility_date {date} has no ctx.exports"
    );
    for secret in [
        "FSD_TOKEN",
        "R2_ACCOUNT_ID",
        "R2_ACCESS_KEY_ID",
        "R2_SECRET_ACCESS_KEY",
    ] {
        assert!(vars.get(secret).is_none(), "{secret} declared as a var");
    }
    // Backups go to the bucket the R2 binding names, through the S3 API.
    assert!(r2.contains("var(\"R2_BUCKET\")"));
    assert_eq!(
        vars["R2_BUCKET"].as_str(),
        wrangler["r2_buckets"][0]["bucket_name"].as_str()
    );

    // The build is the Rust Worker's, and its output is what `main` names.
    let build = wrangler["build"]["command"].as_str().unwrap();
    assert!(build.contains("worker-build --release"));
    assert_eq!(
        wrangler["main"].as_str(),
        Some("worker/build/worker/shim.mjs")
    );
}
