//! What probes cost (issue 12), in one run on the same containerd and the
//! same crilet process:
//!   A. `CRILET_BENCH_PODS` (100) host-network busybox pods without probes
//!      (`sleep 3600`);
//!   B. as many host-network pods, each running busybox `httpd` on its own
//!      loopback port, with an httpGet readiness probe every second against
//!      it and an exec liveness probe (`true`) every 10 s: 100 HTTP requests
//!      and 10 ExecSync calls a second for 100 pods.
//!
//! Each phase waits until every pod is Ready on crilet's `/pods`, settles
//! for 10 s, then reads /proc over a window of CRILET_BENCH_WINDOW_SECS
//! (30) s, with nothing else talking to crilet:
//!   * crilet: utime+stime of the process (all threads) as % of one core;
//!     VmRSS at the start and the end of the window and its max (read every
//!     second); the goal is checked on the end values;
//!   * containerd: utime+stime of the private containerd (pid from
//!     `containerd.pid` beside the socket of CRILET_BENCH_ENDPOINT);
//!   * its shims: the `containerd-shim-runc-v2` processes whose command line
//!     names that socket (`-address SOCK`), their own utime+stime, and
//!     apart from it the cutime+cstime of the children they reaped: the
//!     `runc exec` of each ExecSync and the exec'd probe command, and in both
//!     phases the `runc ps` containerd has them run for the
//!     ListPodSandboxStats of crilet's stats collector;
//!   * the pods: the CPU usage of crilet's cgroup root (cpuacct, or cpu.stat
//!     under cgroup v2), i.e. `sleep`/`httpd` and the processes it forks per
//!     request, and what `runc exec` runs inside the container.
//!
//! Prints the figures and the B − A deltas for crilet beside the goal (at
//! most 2 % of a core and 3 MiB RSS more); asserts nothing, the machines
//! are shared and noisy. At the end (also after a failure) crilet is
//! stopped and the sandboxes it made are removed over CRI.
//!
//! Run by `bash scripts/bench.sh` (CRILET_BENCH_ENDPOINT, CRILET_BIN,
//! CTRLAB_CGROUP_ROOT). CRILET_BENCH_PODS (100) and CRILET_BENCH_WINDOW_SECS
//! (30) tune it.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;

use crilet::cri::*;

#[path = "common/agent.rs"]
mod agent;
mod common;
#[path = "common/procfs.rs"]
mod procfs;

use agent::{AgentProcess, sandboxes_of, sweep};
use common::env_or;
use procfs::{Figures, Targets, containerd_pid, measure};

const NODE: &str = "bench-node";
const SETTLE: Duration = Duration::from_secs(10);

const HEAD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n";

/// Phase A: a pod that only sleeps.
fn idle_manifest(name: &str) -> String {
    HEAD.replace("NAME", name) + "    command: [sleep, \"3600\"]\n"
}

/// Phase B: httpd on `port` of the host network, probed over HTTP every
/// second (no host: the pod IP, i.e. --node-ip) and by exec every 10 s.
/// `/hostname` is the /etc/hostname containerd mounts into the container.
fn probed_manifest(name: &str, port: u16) -> String {
    HEAD.replace("NAME", name)
        + &format!(
            "    command: [httpd, -f, -p, '127.0.0.1:{port}', -h, /etc]\n    readinessProbe:\n      httpGet:\n        port: {port}\n        path: /hostname\n      periodSeconds: 1\n    livenessProbe:\n      exec:\n        command: [\"true\"]\n      periodSeconds: 10\n"
        )
}

fn write(dir: &Path, name: &str, body: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, dir.join(format!("{name}.yaml"))).unwrap();
}

/// `n` ports free on 127.0.0.1, all different (held together while chosen).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

// ------------------------------------------------------------------ crilet

struct Agent {
    process: AgentProcess,
    http_port: u16,
}

impl Agent {
    fn start(
        bin: &Path,
        endpoint: &str,
        scratch: &Path,
        cgroup_root: &str,
        http_port: u16,
    ) -> Self {
        let http = vec!["--http-address".into(), format!("127.0.0.1:{http_port}")];
        Agent {
            process: AgentProcess::start(
                bin,
                endpoint,
                scratch,
                NODE,
                cgroup_root,
                &http,
                "crilet.log",
            ),
            http_port,
        }
    }

    fn pid(&self) -> u32 {
        self.process.pid()
    }

    fn check_alive(&mut self) {
        self.process.check_alive();
    }

    fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    fn stop(&mut self) {
        self.process.stop();
    }

    /// Per pod full name on `/pods`: (Ready condition True, restarts).
    fn pods(&self) -> Option<HashMap<String, (bool, i64)>> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.http_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(
            s,
            "GET /pods HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut raw = String::new();
        s.read_to_string(&mut raw).ok()?;
        let (head, body) = raw.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.1 200") {
            return None;
        }
        let list: Value = serde_json::from_str(body).ok()?;
        let mut out = HashMap::new();
        for p in list["items"].as_array()? {
            let Some(name) = p["metadata"]["name"].as_str() else {
                continue;
            };
            let ready = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            let restarts = p["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["restartCount"].as_i64())
                .sum();
            out.insert(name.to_owned(), (ready, restarts));
        }
        Some(out)
    }

    /// (Ready, total restarts) over `names`.
    fn ready(&self, names: &[String]) -> (usize, i64) {
        let pods = self.pods().unwrap_or_default();
        names
            .iter()
            .filter_map(|n| pods.get(&format!("{n}-{NODE}")))
            .fold((0, 0), |(r, c), (ready, restarts)| {
                (r + usize::from(*ready), c + restarts)
            })
    }
}

async fn wait_ready(agent: &mut Agent, names: &[String], limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        agent.check_alive();
        let (ready, _) = agent.ready(names);
        if ready == names.len() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "only {ready}/{} pods Ready after {limit:?}; crilet log:\n{}",
            names.len(),
            agent.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn wait_gone(agent: &mut Agent, rt: &dyn Runtime, names: &[String], limit: Duration) {
    let start = Instant::now();
    loop {
        agent.check_alive();
        let left = sandboxes_of(rt, names, NODE).await.len();
        if left == 0 {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{left} sandboxes left after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

// -------------------------------------------------------------------- run

struct Setup<'a> {
    rt: &'a dyn Runtime,
    manifests: PathBuf,
    socket: &'a Path,
    cgroup_root: &'a str,
    pods: usize,
    window: Duration,
    idle: Vec<String>,
    probed: Vec<String>,
}

async fn run(s: &Setup<'_>, agent: &mut Agent) {
    let limit = Duration::from_secs(60 + 3 * s.pods as u64);
    let probe = Targets {
        crilet: agent.pid(),
        containerd: containerd_pid(s.socket),
        socket: s.socket,
        cgroup_root: s.cgroup_root,
    };

    // --- A. no probes
    for name in &s.idle {
        write(&s.manifests, name, &idle_manifest(name));
    }
    let up_a = wait_ready(agent, &s.idle, limit).await;
    tokio::time::sleep(SETTLE).await;
    let a = measure(&probe, s.window).await;

    // --- B. the same count with probes, in place of A's pods
    for name in &s.idle {
        std::fs::remove_file(s.manifests.join(format!("{name}.yaml"))).unwrap();
    }
    wait_gone(agent, s.rt, &s.idle, limit).await;
    let ports = free_ports(s.pods);
    for (name, port) in s.probed.iter().zip(ports) {
        write(&s.manifests, name, &probed_manifest(name, port));
    }
    let up_b = wait_ready(agent, &s.probed, limit).await;
    tokio::time::sleep(SETTLE).await;
    let b = measure(&probe, s.window).await;
    agent.check_alive();
    let (ready_end, restarts) = agent.ready(&s.probed);

    report(s, &probe, (&a, up_a), (&b, up_b), ready_end, restarts);
}

fn report(
    s: &Setup<'_>,
    probe: &Targets<'_>,
    (a, up_a): (&Figures, Duration),
    (b, up_b): (&Figures, Duration),
    ready_end: usize,
    restarts: i64,
) {
    let n = s.pods;
    let opt = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2}"));
    let containerd = probe
        .containerd
        .map_or_else(|| "not found".to_owned(), |p| format!("pid {p}"));
    println!(
        "probes: {n} host-network pods per phase, window {} s after {} s settling; crilet pid {}, containerd {containerd}",
        s.window.as_secs(),
        SETTLE.as_secs(),
        probe.crilet,
    );
    println!(
        "  A: no probes ({n} × sleep), all Ready in {:.1} s; load average at the window {}",
        up_a.as_secs_f64(),
        a.load
    );
    println!(
        "  B: httpd + httpGet readiness every 1 s + exec liveness (true) every 10 s, all Ready in {:.1} s; load average {}",
        up_b.as_secs_f64(),
        b.load
    );
    println!("     after B's window: {ready_end}/{n} Ready, {restarts} restarts");
    println!();
    println!(
        "  {:<46} {:>10} {:>10} {:>10}",
        "(CPU in % of one core)", "A", "B", "B - A"
    );
    let row = |what: &str, x: f64, y: f64, goal: &str| {
        println!("  {what:<46} {x:>10.2} {y:>10.2} {:>+10.2}{goal}", y - x);
    };
    let d_cpu = b.crilet_cpu - a.crilet_cpu;
    let d_rss = b.rss_end_mib - a.rss_end_mib;
    let within = |ok: bool| if ok { "within" } else { "over" };
    row(
        "crilet CPU",
        a.crilet_cpu,
        b.crilet_cpu,
        &format!("   goal <= +2.00: {}", within(d_cpu <= 2.0)),
    );
    row(
        "crilet RSS at the start of the window (MiB)",
        a.rss_start_mib,
        b.rss_start_mib,
        "",
    );
    row(
        "crilet RSS at the end of the window (MiB)",
        a.rss_end_mib,
        b.rss_end_mib,
        &format!("   goal <= +3.00: {}", within(d_rss <= 3.0)),
    );
    row(
        "crilet RSS, max over the window (MiB)",
        a.rss_max_mib,
        b.rss_max_mib,
        "",
    );
    println!(
        "  {:<46} {:>10} {:>10}",
        "containerd CPU (own)",
        opt(a.containerd_cpu),
        opt(b.containerd_cpu)
    );
    let shims = |f: &Figures| format!("{} shims", f.shims_counted);
    println!(
        "  {:<46} {:>10.2} {:>10.2}   ({} / {})",
        "shims CPU (own)",
        a.shims_cpu,
        b.shims_cpu,
        shims(a),
        shims(b)
    );
    println!(
        "  {:<46} {:>10.2} {:>10.2}",
        "shims' reaped children (runc ps/exec, probes)", a.shims_children_cpu, b.shims_children_cpu
    );
    println!(
        "  {:<46} {:>10} {:>10}",
        format!("pods' cgroups ({}/...)", s.cgroup_root),
        opt(a.pods_cpu),
        opt(b.pods_cpu)
    );
    if a.shims_changed + b.shims_changed > 0 {
        println!(
            "  ({} shims came or went during the windows and are not counted)",
            a.shims_changed + b.shims_changed
        );
    }
}

#[tokio::main]
async fn main() {
    let (endpoint, bin) = common::endpoint_and_binary("probes");
    let pods: usize = env_or("CRILET_BENCH_PODS", 100);
    let window = Duration::from_secs(env_or("CRILET_BENCH_WINDOW_SECS", 30));
    // The cgroup root containerd-down.sh cleans (bench.sh exports it).
    let cgroup_root = format!(
        "/{}",
        std::env::var("CTRLAB_CGROUP_ROOT").unwrap_or_else(|_| "crilet-bench".into())
    );
    let socket = PathBuf::from(endpoint.strip_prefix("unix://").unwrap_or(&endpoint));
    let rt = CriRuntime::connect_lazy(&endpoint, RuntimeOptions::default()).unwrap();
    rt.version().await.unwrap();
    let scratch = tempfile::Builder::new()
        .prefix("crilet-bench-probes-")
        .tempdir()
        .unwrap();
    let manifests = scratch.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let setup = Setup {
        rt: &rt,
        manifests,
        socket: &socket,
        cgroup_root: &cgroup_root,
        pods,
        window,
        idle: (0..pods).map(|i| format!("idle-{i}")).collect(),
        probed: (0..pods).map(|i| format!("probed-{i}")).collect(),
    };

    let mut agent = Agent::start(
        &bin,
        &endpoint,
        scratch.path(),
        &cgroup_root,
        free_ports(1)[0],
    );
    let outcome = AssertUnwindSafe(run(&setup, &mut agent))
        .catch_unwind()
        .await;

    // crilet leaves its pods running when stopped: remove them over CRI.
    agent.stop();
    let all: Vec<String> = setup.idle.iter().chain(&setup.probed).cloned().collect();
    let removed = sweep(&rt, &all, NODE, &cgroup_root).await;
    eprintln!("probes: crilet stopped, {removed} sandboxes removed");
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
