//! The raw CRI sequence for a one-container host-network pod, through the
//! `Runtime` trait: RunPodSandbox, CreateContainer, StartContainer, then
//! StopPodSandbox and RemovePodSandbox, N times. Prints min, median and max
//! per step. This is the floor the agent's own pod start is compared with.
//!
//! Needs a runtime: `bash scripts/bench.sh` starts the private containerd
//! and runs this with CRILET_BENCH_ENDPOINT set. CRILET_BENCH_ITERATIONS
//! sets N (default 20).

use std::path::Path;
use std::time::{Duration, Instant};

mod common;

use common::{ms, pod};
use crilet::agent::cgroup::{CGROUP_ROOT, remove_pod_cgroup};
use crilet::cri::*;

const STEPS: [&str; 5] = [
    "RunPodSandbox",
    "CreateContainer",
    "StartContainer",
    "StopPodSandbox",
    "RemovePodSandbox",
];

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let Ok(endpoint) = std::env::var("CRILET_BENCH_ENDPOINT") else {
        eprintln!(
            "cri_sequence: CRILET_BENCH_ENDPOINT is not set; run `bash scripts/bench.sh`, \
             which starts the private containerd first"
        );
        std::process::exit(2);
    };
    let n: usize = std::env::var("CRILET_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let rt = CriRuntime::connect_lazy(&endpoint, RuntimeOptions::default())?;
    let log_dir = tempfile::Builder::new().prefix("crilet-bench-").tempdir()?;
    rt.version().await?; // connect outside the measurement

    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); STEPS.len()];
    let mut totals = Vec::with_capacity(n);
    for i in 0..n {
        let (sandbox, container) = pod(i, log_dir.path());
        let mut t = [Duration::ZERO; 5];
        let start = Instant::now();
        let s = Instant::now();
        let sb = rt.run_pod_sandbox(&sandbox).await?;
        t[0] = s.elapsed();
        let s = Instant::now();
        let ctr = rt.create_container(&sb, &container, &sandbox).await?;
        t[1] = s.elapsed();
        let s = Instant::now();
        rt.start_container(&ctr).await?;
        t[2] = s.elapsed();
        let s = Instant::now();
        rt.stop_pod_sandbox(&sb).await?;
        t[3] = s.elapsed();
        let s = Instant::now();
        rt.remove_pod_sandbox(&sb).await?;
        t[4] = s.elapsed();
        totals.push(start.elapsed());
        for (k, d) in t.into_iter().enumerate() {
            samples[k].push(d);
        }
        remove_pod_cgroup(Path::new(CGROUP_ROOT), &sandbox.cgroup_parent)?;
    }

    println!("cri_sequence: {n} one-container host-network pods on {endpoint}");
    println!(
        "{:<18} {:>9} {:>9} {:>9}",
        "step", "min ms", "median ms", "max ms"
    );
    let mut rows: Vec<(&str, Vec<Duration>)> = STEPS.iter().copied().zip(samples).collect();
    rows.push(("total", totals));
    for (name, mut v) in rows {
        v.sort();
        println!(
            "{:<18} {:>9.1} {:>9.1} {:>9.1}",
            name,
            ms(v[0]),
            ms(v[v.len() / 2]),
            ms(v[v.len() - 1])
        );
    }
    Ok(())
}
