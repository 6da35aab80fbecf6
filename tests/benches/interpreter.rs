//! Code context benchmark: the real release `fsd` over loopback HTTP. Context creation with
//! a warm pool (the default, one ready executor per interpreter) and without one
//! (`--interpreter-pool 0`), and the round trip of `1+1` in a warm context, for Python and
//! JavaScript, beside the interpreter started directly (`python3 -c`, `node -e`) as the
//! floor, in the same run.
//!
//! Run: `cargo build --release --workspace && cargo bench -p fsd-tests --bench interpreter`
//! Set `FSD_BENCH_QUICK=1` for a short smoke run. `FSD_BENCH_PYTHON` names the Python
//! (default `/usr/bin/python3`).

use std::time::{Duration, Instant};

use fsd_sdk::api::interpreter::{CreateContextRequest, ExecuteCodeRequest};
use fsd_tests::bench::{ms, pct};
use fsd_tests::{Daemon, Options};

fn main() {
    let quick = std::env::var_os("FSD_BENCH_QUICK").is_some();
    let (creates, calls, floors) = if quick { (5, 50, 10) } else { (30, 500, 50) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(creates, calls, floors));
}

fn python() -> String {
    std::env::var("FSD_BENCH_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into())
}

fn daemon(pool: usize) -> Daemon {
    Daemon::start_with(Options {
        extra_args: vec![
            "--python".into(),
            python(),
            "--interpreter-pool".into(),
            pool.to_string(),
        ],
        ..Options::default()
    })
}

async fn run(creates: usize, calls: usize, floors: usize) {
    println!("fsd code context benchmark (release build, loopback HTTP)");
    println!();
    let warm = daemon(1);
    let cold = daemon(0);
    let (warm_sandbox, cold_sandbox) = (warm.sandbox(), cold.sandbox());
    // Both pools have filled before anything is timed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!("context creation ({creates} each; a warm pool refills between creations)");
    for language in ["python", "javascript"] {
        let mut warm_times = Vec::new();
        let mut cold_times = Vec::new();
        for _ in 0..creates {
            warm_times.push(create(&warm_sandbox, language).await);
            cold_times.push(create(&cold_sandbox, language).await);
            // Let the warm pool refill, as it would between an agent's sessions.
            tokio::time::sleep(Duration::from_millis(if language == "python" {
                1500
            } else {
                500
            }))
            .await;
        }
        line(&format!("{language}: warm pool"), &mut warm_times);
        line(
            &format!("{language}: no pool (a cold start)"),
            &mut cold_times,
        );
    }
    println!();
    println!(
        "runCode(\"1+1\") in a warm context ({calls} round trips), beside the interpreter run directly"
    );
    for (language, program, flag) in [
        ("python", python(), "-c"),
        ("javascript", "node".to_string(), "-e"),
    ] {
        let id = warm_sandbox
            .create_context(&CreateContextRequest {
                language: Some(language.into()),
                ..CreateContextRequest::default()
            })
            .await
            .expect("context")
            .context_id;
        let mut trips = Vec::new();
        for i in 0..calls + 20 {
            let start = Instant::now();
            let execution = warm_sandbox
                .run_code_collected(&ExecuteCodeRequest {
                    context_id: id.clone(),
                    code: "1+1".into(),
                    ..ExecuteCodeRequest::default()
                })
                .await
                .expect("run");
            assert!(execution.error.is_none(), "{execution:?}");
            if i >= 20 {
                trips.push(start.elapsed());
            }
        }
        let mut floor: Vec<Duration> = (0..floors)
            .map(|_| {
                let start = Instant::now();
                let status = std::process::Command::new(&program)
                    .args([flag, "1+1"])
                    .status()
                    .expect("interpreter");
                assert!(status.success());
                start.elapsed()
            })
            .collect();
        line(&format!("{language}: fsd runCode"), &mut trips);
        line(
            &format!("{language}: floor `{program} {flag} 1+1`"),
            &mut floor,
        );
    }
}

async fn create(sandbox: &fsd_sdk::Sandbox, language: &str) -> Duration {
    let start = Instant::now();
    let created = sandbox
        .create_context(&CreateContextRequest {
            language: Some(language.into()),
            ..CreateContextRequest::default()
        })
        .await
        .expect("context");
    let took = start.elapsed();
    sandbox
        .delete_context(&created.context_id)
        .await
        .expect("delete");
    took
}

fn line(label: &str, samples: &mut [Duration]) {
    println!(
        "  {label:<44} p50 {:>8.3} ms   p99 {:>8.3} ms",
        ms(pct(samples, 50.0)),
        ms(pct(samples, 99.0))
    );
}
