//! What crilet costs a node (issue 16), against one runtime, one run:
//!   1. process start: `crilet run` spawned → its first CRI call, i.e. the
//!      first bytes on the CRI socket (the bench puts a proxy between crilet
//!      and the runtime and notes when they arrive), CRILET_BENCH_STARTS
//!      (20) runs, min/median/max;
//!   2. memory with CRILET_BENCH_PODS (100) pods: VmRSS and VmHWM (the
//!      peak) read every 20 ms from the spawn through the start of the pods
//!      (all manifests written at once, until every container runs), then
//!      every second over CRILET_BENCH_IDLE_SECS (30) idle seconds after a
//!      10 s settle: RSS min/median/max with its anonymous and file-backed
//!      parts, threads, and the CPU of the window;
//!   3. `crilet pods` on that live agent: wall time of CRILET_BENCH_STARTS
//!      runs, min/median/max.
//!
//! Prints the figures beside the goals (RSS ≤ 20 MiB idle, peak ≤ 24 MiB,
//! first CRI call ≤ 20 ms, `crilet pods` ≤ 10 ms); asserts nothing, the
//! machines are shared and noisy. crilet removes its pods at the end; what
//! is left is swept over CRI.
//!
//! Run by `bash scripts/bench.sh` (CRILET_BENCH_ENDPOINT, CRILET_BIN,
//! CTRLAB_CGROUP_ROOT).

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;

use crilet::cri::*;
use crilet::kuberuntime::labels;

#[path = "common/agent.rs"]
mod agent;
mod common;
#[path = "common/procfs.rs"]
mod procfs;

use agent::{AgentProcess, sandboxes_of, sweep};
use common::{env_or, summary};
use procfs::{HZ, cpu_ticks, status_field};

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

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A unix socket in front of the runtime's that notes when each
/// connection's first bytes arrive, then forwards both ways.
struct CriProxy {
    path: PathBuf,
    first_bytes: Arc<Mutex<Vec<Instant>>>,
}

impl CriProxy {
    fn start(path: PathBuf, upstream: PathBuf) -> CriProxy {
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let first_bytes = Arc::new(Mutex::new(Vec::new()));
        let seen = first_bytes.clone();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let (seen, upstream) = (seen.clone(), upstream.clone());
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buf = vec![0u8; 16 * 1024];
                    let n = down.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.lock().unwrap().push(Instant::now());
                    let Ok(mut up) = tokio::net::UnixStream::connect(&upstream).await else {
                        return;
                    };
                    if up.write_all(&buf[..n]).await.is_ok() {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
            }
        });
        CriProxy { path, first_bytes }
    }

    fn endpoint(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    fn first_after(&self, t0: Instant) -> Option<Instant> {
        let seen = self.first_bytes.lock().unwrap();
        seen.iter().copied().filter(|t| *t >= t0).min()
    }
}

struct Setup<'a> {
    rt: &'a CriRuntime,
    bin: &'a Path,
    endpoint: &'a str,
    scratch: &'a Path,
    cgroup_root: &'a str,
    names: Vec<String>,
    starts: usize,
    idle: Duration,
}

/// Part 1: spawn → first bytes on the CRI socket, `runs` times.
async fn process_start(s: &Setup<'_>) -> Vec<Duration> {
    let socket = s.endpoint.strip_prefix("unix://").unwrap_or(s.endpoint);
    let proxy = CriProxy::start(s.scratch.join("cri-proxy.sock"), PathBuf::from(socket));
    let mut out = Vec::new();
    for i in 0..s.starts {
        let dir = s.scratch.join(format!("start-{i}"));
        std::fs::create_dir_all(dir.join("manifests")).unwrap();
        let t0 = Instant::now();
        let mut agent = AgentProcess::start(
            s.bin,
            &proxy.endpoint(),
            &dir,
            NODE,
            s.cgroup_root,
            &[],
            "crilet.log",
        );
        let first = loop {
            if let Some(t) = proxy.first_after(t0) {
                break t;
            }
            agent.check_alive();
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "no CRI call in 10 s"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        out.push(first - t0);
        agent.stop();
    }
    out
}

/// How many of the named pods have their container running.
async fn running(rt: &CriRuntime, names: &[String]) -> usize {
    let list = rt
        .list_containers(&ContainerFilter {
            state: Some(ContainerState::Running),
            ..Default::default()
        })
        .await
        .unwrap_or_default();
    let full: std::collections::HashSet<String> =
        names.iter().map(|n| format!("{n}-{NODE}")).collect();
    list.iter()
        .filter(|c| {
            c.labels
                .get(labels::POD_NAME_LABEL)
                .is_some_and(|n| full.contains(n))
        })
        .count()
}

#[derive(Default)]
struct Memory {
    before_pods_kib: u64,
    start_up_max_kib: u64,
    hwm_after_start_kib: u64,
    start_up: Duration,
    idle_kib: Vec<u64>,
    idle_anon_kib: u64,
    idle_file_kib: u64,
    hwm_end_kib: u64,
    threads: u64,
    cpu_cores: f64,
    pods_wall: Vec<Duration>,
}

/// Parts 2 and 3 on one agent.
async fn memory_and_pods(s: &Setup<'_>, agent: &mut AgentProcess) -> Memory {
    let pid = agent.pid();
    let rss = || status_field(pid, "VmRSS").unwrap_or(0);
    let mut m = Memory::default();
    // Up and idle with no pods (its first relist and stats round done).
    let t = Instant::now();
    let mut max = 0;
    while t.elapsed() < Duration::from_secs(3) {
        max = max.max(rss());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    agent.check_alive();
    m.before_pods_kib = rss();
    let manifests = s.scratch.join("manifests");
    let t = Instant::now();
    for name in &s.names {
        write(&manifests, name);
    }
    let mut last_check = Instant::now() - Duration::from_secs(1);
    loop {
        max = max.max(rss());
        if last_check.elapsed() >= Duration::from_millis(100) {
            last_check = Instant::now();
            if running(s.rt, &s.names).await == s.names.len() {
                break;
            }
            agent.check_alive();
            assert!(
                t.elapsed() < Duration::from_secs(600),
                "pods never all ran; crilet's log:\n{}",
                agent.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    m.start_up = t.elapsed();
    m.start_up_max_kib = max;
    m.hwm_after_start_kib = status_field(pid, "VmHWM").unwrap_or(0);

    // Settle, then the idle window.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (ticks0, _) = cpu_ticks(pid).unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < s.idle {
        m.idle_kib.push(rss());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (ticks1, _) = cpu_ticks(pid).unwrap();
    m.cpu_cores = (ticks1 - ticks0) as f64 / HZ / t0.elapsed().as_secs_f64();
    m.idle_anon_kib = status_field(pid, "RssAnon").unwrap_or(0);
    m.idle_file_kib = status_field(pid, "RssFile").unwrap_or(0);
    m.threads = status_field(pid, "Threads").unwrap_or(0);

    // `crilet pods` against the live agent.
    let socket = s.scratch.join("crilet.sock");
    for _ in 0..s.starts {
        let t = Instant::now();
        let out = std::process::Command::new(s.bin)
            .arg("pods")
            .arg("--socket")
            .arg(&socket)
            .output()
            .unwrap();
        m.pods_wall.push(t.elapsed());
        assert!(
            out.status.success(),
            "crilet pods: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines = String::from_utf8_lossy(&out.stdout).lines().count();
        assert!(lines > s.names.len(), "crilet pods listed {lines} lines");
    }
    m.hwm_end_kib = status_field(pid, "VmHWM").unwrap_or(0);

    // crilet removes its pods (a second each, in parallel).
    for name in &s.names {
        let _ = std::fs::remove_file(manifests.join(format!("{name}.yaml")));
    }
    let t = Instant::now();
    while !sandboxes_of(s.rt, &s.names, NODE).await.is_empty()
        && t.elapsed() < Duration::from_secs(120)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    m
}

fn print(endpoint: &str, pods: usize, starts: &[Duration], m: &Memory, idle: Duration) {
    let mut idle_rss = m.idle_kib.clone();
    idle_rss.sort_unstable();
    let (smin, smed, smax) = summary(starts);
    let (pmin, pmed, pmax) = summary(&m.pods_wall);
    println!("footprint on {endpoint}");
    println!(
        "1. crilet run spawned -> first CRI call ({} runs)",
        starts.len()
    );
    println!(
        "   first CRI call     min {smin:6.1} ms  median {smed:6.1} ms  max {smax:6.1} ms  (goal <= 20 ms)"
    );
    println!("2. memory, {pods} pods written at once");
    println!("   RSS before pods    {:6.1} MiB", mib(m.before_pods_kib));
    println!(
        "   start-up           {:6.1} s to all running; RSS max {:.1} MiB, VmHWM {:.1} MiB (goal <= 24 MiB)",
        m.start_up.as_secs_f64(),
        mib(m.start_up_max_kib),
        mib(m.hwm_after_start_kib)
    );
    if let (Some(lo), Some(hi)) = (idle_rss.first(), idle_rss.last()) {
        println!(
            "   RSS idle           min {:.1} MiB  median {:.1} MiB  max {:.1} MiB over {} s (goal <= 20 MiB)",
            mib(*lo),
            mib(idle_rss[idle_rss.len() / 2]),
            mib(*hi),
            idle.as_secs()
        );
    }
    println!(
        "   RSS idle parts     anon {:.1} MiB  file {:.1} MiB  threads {}",
        mib(m.idle_anon_kib),
        mib(m.idle_file_kib),
        m.threads
    );
    println!("   VmHWM at the end   {:6.1} MiB", mib(m.hwm_end_kib));
    println!("   idle CPU           {:.4} cores", m.cpu_cores);
    println!(
        "3. crilet pods on the live agent ({} runs)",
        m.pods_wall.len()
    );
    println!(
        "   wall               min {pmin:6.1} ms  median {pmed:6.1} ms  max {pmax:6.1} ms  (goal <= 10 ms)"
    );
}

#[tokio::main]
async fn main() {
    let (endpoint, bin) = common::endpoint_and_binary("footprint");
    let pods: usize = env_or("CRILET_BENCH_PODS", 100);
    let starts: usize = env_or("CRILET_BENCH_STARTS", 20);
    let idle = Duration::from_secs(env_or("CRILET_BENCH_IDLE_SECS", 30));
    let cgroup_root = format!(
        "/{}",
        std::env::var("CTRLAB_CGROUP_ROOT").unwrap_or_else(|_| "crilet-bench".into())
    );
    let rt = CriRuntime::connect_lazy(&endpoint, RuntimeOptions::default()).unwrap();
    rt.version().await.unwrap();
    let scratch = tempfile::Builder::new()
        .prefix("crilet-bench-footprint-")
        .tempdir()
        .unwrap();
    std::fs::create_dir_all(scratch.path().join("manifests")).unwrap();
    let setup = Setup {
        rt: &rt,
        bin: &bin,
        endpoint: &endpoint,
        scratch: scratch.path(),
        cgroup_root: &cgroup_root,
        names: (0..pods).map(|i| format!("fp-{i}")).collect(),
        starts,
        idle,
    };
    let start_times = process_start(&setup).await;
    let mut agent = AgentProcess::start(
        &bin,
        &endpoint,
        scratch.path(),
        NODE,
        &cgroup_root,
        &[],
        "crilet.log",
    );
    let outcome = AssertUnwindSafe(memory_and_pods(&setup, &mut agent))
        .catch_unwind()
        .await;
    agent.stop();
    let removed = sweep(&rt, &setup.names, NODE, &cgroup_root).await;
    if removed > 0 {
        eprintln!("footprint: {removed} sandboxes left by crilet removed");
    }
    match outcome {
        Ok(m) => print(&endpoint, pods, &start_times, &m, idle),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
