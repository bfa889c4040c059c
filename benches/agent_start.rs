//! crilet against the raw CRI sequence, in one run on the same containerd:
//!   1. one manifest written → its container running, vs RunPodSandbox +
//!      CreateContainer + StartContainer done directly (ratio of medians);
//!   2. 50 manifests written at once → all running, vs the raw sequence for
//!      50 pods run 4-wide;
//!   3. crilet's RSS and CPU while it holds those 50 pods idle for 30 s.
//!
//! Prints the figures; asserts nothing (the machines are shared and noisy).
//!
//! Run by `bash scripts/bench.sh`, which builds the release binary and sets
//! CRILET_BENCH_ENDPOINT. CRILET_BENCH_ITERATIONS (default 10) sets the
//! count for part 1; CRILET_BENCH_PODS (50) and CRILET_BENCH_IDLE_SECS (30)
//! the others.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_or, pod, raw_remove, raw_start, summary};
use crilet::cri::*;
use crilet::kuberuntime::labels;

const NODE: &str = "bench-node";

fn manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n"
    )
}

fn write(dir: &Path, name: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, manifest(name)).unwrap();
    std::fs::rename(&tmp, dir.join(format!("{name}.yaml"))).unwrap();
}

/// How many of the named agent pods have a running container.
async fn running(rt: &dyn Runtime, names: &[String]) -> usize {
    let list = rt
        .list_containers(&ContainerFilter {
            state: Some(ContainerState::Running),
            ..Default::default()
        })
        .await
        .unwrap();
    names
        .iter()
        .filter(|n| {
            let full = format!("{n}-{NODE}");
            list.iter()
                .any(|c| c.labels.get(labels::POD_NAME_LABEL) == Some(&full))
        })
        .count()
}

async fn wait_until(rt: &dyn Runtime, names: &[String], want: usize) -> Duration {
    let start = Instant::now();
    while running(rt, names).await != want {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "pods never reached {want} running"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

async fn wait_empty(rt: &dyn Runtime) {
    let start = Instant::now();
    loop {
        let left = rt
            .list_pod_sandbox(&PodSandboxFilter::default())
            .await
            .unwrap();
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "pods not removed: {}",
            left.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Agent {
    child: Child,
}

impl Agent {
    fn start(bin: &Path, endpoint: &str, manifests: &Path, root: &Path) -> Self {
        let child = Command::new(bin)
            .args([
                "run",
                "--port",
                "0",
                "--container-runtime-endpoint",
                endpoint,
            ])
            .arg("--pod-manifest-path")
            .arg(manifests)
            .args([
                "--hostname-override",
                NODE,
                "--cgroup-root",
                "/crilet-bench",
            ])
            .arg("--root-dir")
            .arg(root)
            .arg("--socket")
            .arg(root.join("crilet.sock"))
            .env("CRILET_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start crilet");
        Agent { child }
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// utime + stime in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after.split_whitespace().collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

#[tokio::main]
async fn main() {
    let (endpoint, bin) = common::endpoint_and_binary("agent_start");
    let n: usize = env_or("CRILET_BENCH_ITERATIONS", 10);
    let pods: usize = env_or("CRILET_BENCH_PODS", 50);
    let idle: u64 = env_or("CRILET_BENCH_IDLE_SECS", 30);
    let rt: Arc<dyn Runtime> =
        Arc::new(CriRuntime::connect_lazy(&endpoint, RuntimeOptions::default()).unwrap());
    rt.version().await.unwrap();
    let scratch = tempfile::Builder::new()
        .prefix("crilet-bench-")
        .tempdir()
        .unwrap();

    // --- 1a. raw: one pod at a time
    let mut raw = Vec::new();
    for i in 0..n {
        let (sb, c) = pod(10_000 + i, scratch.path());
        let t = Instant::now();
        let id = raw_start(rt.as_ref(), &sb, &c).await;
        raw.push(t.elapsed());
        raw_remove(rt.as_ref(), &id, &sb.cgroup_parent).await;
    }

    // --- 2a. raw: `pods` pods, 4 at a time (before crilet starts: an agent
    // removes kubelet-labelled pods that no manifest wants)
    let t = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(4));
    let mut tasks = Vec::new();
    for i in 0..pods {
        let (rt, sem) = (rt.clone(), sem.clone());
        let (sb, c) = pod(20_000 + i, scratch.path());
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire().await.unwrap();
            (raw_start(rt.as_ref(), &sb, &c).await, sb.cgroup_parent)
        }));
    }
    let mut started = Vec::new();
    for task in tasks {
        started.push(task.await.unwrap());
    }
    let raw_many = t.elapsed();
    for (id, cg) in started {
        raw_remove(rt.as_ref(), &id, &cg).await;
    }

    // --- 1b. crilet: one manifest at a time
    let manifests = scratch.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let agent = Agent::start(&bin, &endpoint, &manifests, &scratch.path().join("root"));
    tokio::time::sleep(Duration::from_secs(2)).await; // started, first SET sent
    let mut via_agent = Vec::new();
    for i in 0..n {
        let name = format!("one-{i}");
        let t = Instant::now();
        write(&manifests, &name);
        wait_until(rt.as_ref(), std::slice::from_ref(&name), 1).await;
        via_agent.push(t.elapsed());
        std::fs::remove_file(manifests.join(format!("{name}.yaml"))).unwrap();
        wait_empty(rt.as_ref()).await;
    }

    // --- 2b. crilet: `pods` manifests at once
    let names: Vec<String> = (0..pods).map(|i| format!("many-{i}")).collect();
    let t = Instant::now();
    for name in &names {
        write(&manifests, name);
    }
    wait_until(rt.as_ref(), &names, pods).await;
    let agent_many = t.elapsed();

    // --- 3. idle with `pods` pods
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ticks0 = agent.cpu_ticks();
    let t0 = Instant::now();
    let mut rss_max = 0;
    while t0.elapsed() < Duration::from_secs(idle) {
        rss_max = rss_max.max(agent.rss_kib());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let ticks = agent.cpu_ticks() - ticks0;
    let hz = 100.0; // USER_HZ on Linux
    let cpu_pct = ticks as f64 / hz / t0.elapsed().as_secs_f64() * 100.0;

    for name in &names {
        std::fs::remove_file(manifests.join(format!("{name}.yaml"))).unwrap();
    }
    wait_empty(rt.as_ref()).await;
    drop(agent);

    let (rmin, rmed, rmax) = summary(&raw);
    let (amin, amed, amax) = summary(&via_agent);
    println!("agent_start on {endpoint}");
    println!("1. one pod, manifest written -> container running ({n} runs)");
    println!("   raw CRI sequence   min {rmin:7.1} ms  median {rmed:7.1} ms  max {rmax:7.1} ms");
    println!("   crilet             min {amin:7.1} ms  median {amed:7.1} ms  max {amax:7.1} ms");
    println!("   ratio of medians   {:.2}", amed / rmed);
    println!("2. {pods} pods");
    println!("   raw CRI, 4-wide    {:7.1} ms", common::ms(raw_many));
    println!("   crilet, all at once {:6.1} ms", common::ms(agent_many));
    println!(
        "   ratio              {:.2}",
        agent_many.as_secs_f64() / raw_many.as_secs_f64()
    );
    println!("3. crilet holding {pods} pods idle for {idle} s");
    println!("   max RSS            {:.1} MiB", rss_max as f64 / 1024.0);
    println!("   CPU                {cpu_pct:.2} % of one core");
}
