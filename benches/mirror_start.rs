//! Manifest written → its mirror pod Running on the API server (the
//! in-repo double), one pod at a time over 20 pods: p50 and max.
//!
//! Run by `bash scripts/bench.sh` (CRILET_BENCH_ENDPOINT, CRILET_BIN);
//! CRILET_BENCH_MIRROR_PODS sets the count. Prints; asserts nothing.

#[allow(dead_code)]
#[path = "../integration/apiserver.rs"]
mod apiserver;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apiserver::ApiServer;

const NODE: &str = "bench-node";

fn manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n"
    )
}

#[tokio::main]
async fn main() {
    let Ok(endpoint) = std::env::var("CRILET_BENCH_ENDPOINT") else {
        eprintln!("mirror_start: CRILET_BENCH_ENDPOINT is not set; run `bash scripts/bench.sh`");
        std::process::exit(2);
    };
    // CRILET_BIN, else the release binary of the target directory cargo used.
    let bin = std::env::var("CRILET_BIN").unwrap_or_else(|_| {
        let dir = std::env::var("CARGO_TARGET_DIR")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target").into());
        format!("{dir}/release/crilet")
    });
    let n: usize = std::env::var("CRILET_BENCH_MIRROR_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let api = ApiServer::start().await;
    let scratch = tempfile::Builder::new()
        .prefix("crilet-bench-mirror-")
        .tempdir()
        .unwrap();
    let manifests = scratch.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let kubeconfig = api.kubeconfig(scratch.path(), NODE);
    let mut child = Command::new(&bin)
        .args([
            "run",
            "--port",
            "0",
            "--container-runtime-endpoint",
            &endpoint,
        ])
        .arg("--pod-manifest-path")
        .arg(&manifests)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "--hostname-override",
            NODE,
            "--cgroup-root",
            "/crilet-bench",
            "--node-ip",
            "127.0.0.1",
        ])
        .arg("--root-dir")
        .arg(scratch.path().join("root"))
        // Its own log directories, not the machine's /var/log.
        .arg("--pod-logs-dir")
        .arg(scratch.path().join("pod-logs"))
        .arg("--container-logs-dir")
        .arg(scratch.path().join("containers"))
        .arg("--socket")
        .arg(scratch.path().join("crilet.sock"))
        .env("CRILET_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start crilet");
    // Registered and watching before the clock starts.
    let start = Instant::now();
    while api.nodes().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "node never registered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut samples = Vec::new();
    for i in 0..n {
        let name = format!("m{i}");
        let t = Instant::now();
        let tmp = manifests.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, manifest(&name)).unwrap();
        std::fs::rename(&tmp, manifests.join(format!("{name}.yaml"))).unwrap();
        let full = format!("{name}-{NODE}");
        loop {
            let running = api
                .pod("default", &full)
                .and_then(|p| p.status)
                .and_then(|s| s.phase)
                .is_some_and(|p| p == "Running");
            if running {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "{full} never Running"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        samples.push(t.elapsed());
    }
    for i in 0..n {
        let _ = std::fs::remove_file(manifests.join(format!("m{i}.yaml")));
    }
    let t = Instant::now();
    while !api.pods().is_empty() && t.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();

    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "mirror_start: manifest written -> mirror pod Running on the API server double ({n} pods, one at a time)"
    );
    println!(
        "   p50 {:7.1} ms   max {:7.1} ms   min {:7.1} ms",
        ms(samples[n / 2]),
        ms(samples[n - 1]),
        ms(samples[0])
    );
}
