//! The raw CRI sequence for a one-container host-network pod, through the
//! `Runtime` trait: RunPodSandbox, CreateContainer, StartContainer, then
//! StopContainer (timeout 0), StopPodSandbox and RemovePodSandbox, N times.
//! The container is stopped first, as the kubelet does: CRI-O's
//! StopPodSandbox of a running container whose PID 1 ignores SIGTERM (the
//! bench's `sleep`) waits about 2 minutes before it kills it. Prints min, median and max
//! per step. This is the floor the agent's own pod start is compared with.
//!
//! Then the width sweep: CRILET_BENCH_PODS (50) pods started with the same
//! sequence, at most W at a time, for each W of CRILET_BENCH_WIDTHS
//! (default 1 to 16), timed from the first RunPodSandbox to the last
//! StartContainer; the pods are removed (untimed) between widths. Prints
//! the time per width and the best width (`best width W`), which
//! `agent_start` compares crilet with.
//!
//! Needs a runtime: `bash scripts/bench.sh` starts the private containerd
//! and runs this with CRILET_BENCH_ENDPOINT set. CRILET_BENCH_ITERATIONS
//! sets N (default 20).

use std::path::Path;
use std::time::{Duration, Instant};

mod common;

use common::{env_or, ms, pod, raw_remove, raw_start};
use crilet::cm::cgroup::{CGROUP_ROOT, remove_pod_cgroup};
use crilet::cri::*;
use futures::StreamExt;

const STEPS: [&str; 6] = [
    "RunPodSandbox",
    "CreateContainer",
    "StartContainer",
    "StopContainer",
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
        let mut t = [Duration::ZERO; STEPS.len()];
        let start = Instant::now();
        let s = Instant::now();
        let sb = rt.run_pod_sandbox(&sandbox).await?;
        t[0] = s.elapsed();
        // As the kubelet (and raw_start): the container's log directory
        // first; CRI-O fails CreateContainer without it ("write child:
        // broken pipe").
        if let Some(dir) = Path::new(&container.log_path).parent() {
            std::fs::create_dir_all(Path::new(&sandbox.log_directory).join(dir))?;
        }
        let s = Instant::now();
        let ctr = rt.create_container(&sb, &container, &sandbox).await?;
        t[1] = s.elapsed();
        let s = Instant::now();
        rt.start_container(&ctr).await?;
        t[2] = s.elapsed();
        let s = Instant::now();
        rt.stop_container(&ctr, Duration::ZERO).await?;
        t[3] = s.elapsed();
        let s = Instant::now();
        rt.stop_pod_sandbox(&sb).await?;
        t[4] = s.elapsed();
        let s = Instant::now();
        rt.remove_pod_sandbox(&sb).await?;
        t[5] = s.elapsed();
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
    sweep(&rt, log_dir.path()).await;
    Ok(())
}

/// `pods` pods at most `width` at a time, for each width; prints the times.
async fn sweep(rt: &CriRuntime, log_dir: &Path) {
    let pods: usize = env_or("CRILET_BENCH_PODS", 50);
    let widths: Vec<usize> = std::env::var("CRILET_BENCH_WIDTHS")
        .ok()
        .map(|v| v.split(',').filter_map(|w| w.trim().parse().ok()).collect())
        .unwrap_or_else(|| (1..=16).collect());
    println!(
        "{pods} pods started at most W at a time (RunPodSandbox + CreateContainer + StartContainer)"
    );
    let mut best: Option<(usize, Duration)> = None;
    for (round, &width) in widths.iter().enumerate() {
        let configs: Vec<_> = (0..pods)
            .map(|i| pod(100_000 * (round + 1) + i, log_dir))
            .collect();
        let t = Instant::now();
        let started: Vec<(String, String)> = futures::stream::iter(&configs)
            .map(|(sb, c)| async move { (raw_start(rt, sb, c).await, sb.cgroup_parent.clone()) })
            .buffer_unordered(width.max(1))
            .collect()
            .await;
        let took = t.elapsed();
        println!("width {width:>2}  {:8.1} ms", ms(took));
        if best.is_none_or(|(_, b)| took < b) {
            best = Some((width, took));
        }
        futures::stream::iter(&started)
            .for_each_concurrent(8, |(id, cg)| raw_remove(rt, id, cg))
            .await;
    }
    if let Some((width, took)) = best {
        println!("best width {width} ({:.1} ms for {pods} pods)", ms(took));
    }
}
