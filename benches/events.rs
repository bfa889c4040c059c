//! What container events buy (issue 13), on the runtime of
//! CRILET_BENCH_ENDPOINT, with crilet following events (the default) and
//! with `--feature-gates EventedPLEG=false` (relist every second):
//!
//!   A. exit → restart: CRILET_BENCH_EVENT_PODS (20) host-network pods
//!      whose container exits 3 s after it starts (restartPolicy Always,
//!      so the first restart is immediate), their manifests written 150 ms
//!      apart so the exits fall anywhere in the relist period. Per pod, from
//!      the runtime's own timestamps: the first container's `finished_at`
//!      to the second's `created_at` (crilet has reacted and created the
//!      restart) and to its `started_at`. min / median / p90 / max.
//!   B. idle CPU: CRILET_BENCH_PODS (100) pods that only sleep, all running;
//!      their start at once is also the burst: with events, crilet's
//!      `/metrics` counts the container events it received, coalesced and
//!      missed (a change its relist found that no event announced), and
//!      the events lost, against the two (CREATED, STARTED) that each
//!      container's start sends at least;
//!      after 10 s of settling, crilet's utime+stime over
//!      CRILET_BENCH_WINDOW_SECS (120) s as % of one core (and its RSS, and
//!      containerd's CPU where there is one), first with events, then with
//!      a relisting crilet restarted on the same pods (it adopts them).
//!      The window spans the 60 s worker resync and the 10 s stats rounds.
//!
//! Prints the figures beside the goal (idle CPU with events at most 0.1 %
//! of a core at 100 pods) and which mode crilet said it was in (on
//! containerd 1.6 both runs relist). Asserts nothing: the machines are
//! shared and noisy. Pods are removed over CRI at the end of each part,
//! after a failure too.
//!
//! Run by `bash scripts/bench.sh` (CRILET_BENCH_ENDPOINT, CRILET_BIN,
//! CTRLAB_CGROUP_ROOT).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::FutureExt;

use crilet::cri::*;
use crilet::kuberuntime::labels;

#[path = "common/agent.rs"]
mod agent;
mod common;
#[path = "common/procfs.rs"]
mod procfs;

use agent::{AgentProcess, sweep};
use common::{env_or, ms};
use procfs::{Figures, Targets, containerd_pid, measure};

const NODE: &str = "bench-node";
const SETTLE: Duration = Duration::from_secs(10);
const RELIST_ONLY: &str = "EventedPLEG=false";
/// crilet's `/metrics` in the events mode (loopback, this bench only).
const METRICS_ADDRESS: &str = "127.0.0.1:19355";

const HEAD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  hostNetwork: true\n  restartPolicy: Always\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n";

fn manifest(name: &str, script: &str) -> String {
    HEAD.replace("NAME", name) + &format!("    command: [sh, -c, {script:?}]\n")
}

fn write(dir: &Path, name: &str, body: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, dir.join(format!("{name}.yaml"))).unwrap();
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Events,
    Relist,
}

impl Mode {
    fn flags(self) -> Vec<String> {
        match self {
            // The gate set explicitly: on CRI-O 1.32 crilet does not
            // subscribe by default (cri-o/cri-o#9004, see pleg::event_choice).
            Mode::Events => vec![
                "--http-address".into(),
                METRICS_ADDRESS.into(),
                "--feature-gates".into(),
                "EventedPLEG=true".into(),
            ],
            Mode::Relist => vec!["--feature-gates".into(), RELIST_ONLY.into()],
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Events => "events",
            Mode::Relist => "relist",
        }
    }
}

/// What crilet said about its mode.
fn said_mode(agent: &AgentProcess) -> &'static str {
    let log = agent.log();
    if log.contains("subscribed to the runtime's container events") {
        "subscribed to events"
    } else if log.contains("crilet falls back to relist") {
        "fell back to relist (no events from this runtime)"
    } else if log.contains("container events are off") {
        "relist (events off)"
    } else {
        "mode not logged"
    }
}

struct Setup<'a> {
    rt: &'a dyn Runtime,
    endpoint: &'a str,
    bin: &'a Path,
    socket: &'a Path,
    cgroup_root: &'a str,
    scratch: PathBuf,
}

impl Setup<'_> {
    /// A fresh directory (manifests, root, log) for one part of the run.
    fn part(&self, name: &str) -> PathBuf {
        let dir = self.scratch.join(name);
        std::fs::create_dir_all(dir.join("manifests")).unwrap();
        dir
    }

    fn agent(&self, dir: &Path, mode: Mode) -> AgentProcess {
        let log = format!("crilet-{}.log", mode.name());
        let flags = mode.flags();
        AgentProcess::start(
            self.bin,
            self.endpoint,
            dir,
            NODE,
            self.cgroup_root,
            &flags,
            &log,
        )
    }
}

/// The containers of each named pod, by pod name.
async fn containers_by_pod(rt: &dyn Runtime, names: &[String]) -> HashMap<String, Vec<Container>> {
    let mut by_pod: HashMap<String, Vec<Container>> = names
        .iter()
        .map(|n| (format!("{n}-{NODE}"), Vec::new()))
        .collect();
    for c in rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap_or_default()
    {
        if let Some(list) = (c.labels.get(labels::POD_NAME_LABEL)).and_then(|n| by_pod.get_mut(n)) {
            list.push(c);
        }
    }
    by_pod
}

/// Waits until `done` holds for every named pod's containers.
async fn wait_all(
    agent: &mut AgentProcess,
    rt: &dyn Runtime,
    names: &[String],
    limit: Duration,
    what: &str,
    done: impl Fn(&[Container]) -> bool,
) -> Duration {
    let start = Instant::now();
    loop {
        agent.check_alive();
        let by_pod = containers_by_pod(rt, names).await;
        let ready = by_pod.values().filter(|cs| done(cs)).count();
        if ready == names.len() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "only {ready}/{} pods reached {what} after {limit:?}; crilet log:\n{}",
            names.len(),
            agent.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ---------------------------------------------------------------- part A

/// Exit → restart created, exit → restart started, per pod.
type Latencies = Vec<(Duration, Duration)>;

async fn restart_latencies(s: &Setup<'_>, mode: Mode, pods: usize) -> (Latencies, &'static str) {
    let names: Vec<String> = (0..pods)
        .map(|i| format!("exit-{}-{i}", mode.name()))
        .collect();
    let dir = s.part(&format!("exit-{}", mode.name()));
    let mut agent = s.agent(&dir, mode);
    let outcome = AssertUnwindSafe(async {
        for name in &names {
            write(
                &dir.join("manifests"),
                name,
                &manifest(name, "sleep 3; exit 1"),
            );
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        let restarted = |cs: &[Container]| cs.iter().any(|c| c.metadata.attempt == 1);
        let limit = Duration::from_secs(60 + pods as u64);
        wait_all(&mut agent, s.rt, &names, limit, "a restart", restarted).await;
        // Started, too (the restart may still be starting).
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut out = Vec::new();
        for (pod, cs) in containers_by_pod(s.rt, &names).await {
            let mut statuses = Vec::new();
            for attempt in [0, 1] {
                let c = cs.iter().find(|c| c.metadata.attempt == attempt);
                statuses.push(match c {
                    Some(c) => s.rt.container_status(&c.id).await.ok(),
                    None => None,
                });
            }
            let (Some(first), Some(second)) = (statuses[0].take(), statuses[1].take()) else {
                eprintln!("events: {pod}: no status of attempts 0 and 1");
                continue;
            };
            let gap =
                |to: i64| Duration::from_nanos(to.saturating_sub(first.finished_at).max(0) as u64);
            out.push((gap(second.created_at), gap(second.started_at)));
        }
        out
    })
    .catch_unwind()
    .await;
    let said = said_mode(&agent);
    agent.stop();
    sweep(s.rt, &names, NODE, s.cgroup_root).await;
    match outcome {
        Ok(out) => (out, said),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// min / median / p90 / max in ms.
fn quantiles(v: &[Duration]) -> String {
    if v.is_empty() {
        return "no samples".into();
    }
    let mut v = v.to_vec();
    v.sort();
    let at = |q: f64| ms(v[((v.len() - 1) as f64 * q).round() as usize]);
    format!(
        "{:>7.0} {:>7.0} {:>7.0} {:>7.0}",
        at(0.0),
        at(0.5),
        at(0.9),
        at(1.0)
    )
}

// ---------------------------------------------------------------- part B

async fn idle_cpu(
    s: &Setup<'_>,
    pods: usize,
    window: Duration,
) -> Vec<(Mode, Figures, &'static str)> {
    let names: Vec<String> = (0..pods).map(|i| format!("idle-{i}")).collect();
    let dir = s.part("idle");
    let outcome = AssertUnwindSafe(async {
        let mut figures = Vec::new();
        for (i, mode) in [Mode::Events, Mode::Relist].into_iter().enumerate() {
            let mut agent = s.agent(&dir, mode);
            if i == 0 {
                for name in &names {
                    write(
                        &dir.join("manifests"),
                        name,
                        &manifest(name, "exec sleep 3600"),
                    );
                }
            }
            let running = |cs: &[Container]| cs.iter().any(|c| c.state == ContainerState::Running);
            let limit = Duration::from_secs(60 + 3 * pods as u64);
            wait_all(&mut agent, s.rt, &names, limit, "running", running).await;
            tokio::time::sleep(SETTLE).await;
            if mode == Mode::Events {
                burst_report(pods);
            }
            let targets = Targets {
                crilet: agent.pid(),
                containerd: containerd_pid(s.socket),
                socket: s.socket,
                cgroup_root: s.cgroup_root,
            };
            let f = measure(&targets, window).await;
            agent.check_alive();
            // The relisting crilet adopted the pods: nothing restarted.
            let restarted = (containers_by_pod(s.rt, &names).await.values())
                .filter(|cs| cs.iter().any(|c| c.metadata.attempt > 0))
                .count();
            if restarted > 0 {
                eprintln!(
                    "events: {restarted} idle pods were restarted during the {} run",
                    mode.name()
                );
            }
            figures.push((mode, f, said_mode(&agent)));
            agent.stop();
        }
        figures
    })
    .catch_unwind()
    .await;
    sweep(s.rt, &names, NODE, s.cgroup_root).await;
    outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The container events of the 100-pod start, from crilet's `/metrics`.
fn burst_report(pods: usize) {
    let text = match scrape(METRICS_ADDRESS) {
        Ok(text) => text,
        Err(e) => {
            println!("     burst: no /metrics from crilet at {METRICS_ADDRESS}: {e}");
            return;
        }
    };
    let value = |name: &str| {
        (text.lines())
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    };
    let received = value("crilet_container_events_total");
    let coalesced = value("crilet_container_events_coalesced_total");
    let missed = value("crilet_container_events_missed_total");
    // Each container's start sends CREATED and STARTED at least.
    let short = (2 * pods as u64).saturating_sub(received);
    let lost = missed + short;
    println!(
        "     burst of {pods} pod starts (events): received {received}, coalesced {coalesced}, missed {missed}; lost {lost}   goal 0: {}",
        if lost == 0 { "met" } else { "not met" }
    );
}

/// GET /metrics over plain HTTP/1.0.
fn scrape(address: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: crilet\r\n\r\n")?;
    let mut out = String::new();
    stream.read_to_string(&mut out)?;
    Ok(out)
}

#[tokio::main]
async fn main() {
    let (endpoint, bin) = common::endpoint_and_binary("events");
    let exit_pods: usize = env_or("CRILET_BENCH_EVENT_PODS", 20);
    let pods: usize = env_or("CRILET_BENCH_PODS", 100);
    let window = Duration::from_secs(env_or("CRILET_BENCH_WINDOW_SECS", 120));
    let cgroup_root = format!(
        "/{}",
        std::env::var("CTRLAB_CGROUP_ROOT").unwrap_or_else(|_| "crilet-bench".into())
    );
    let socket = PathBuf::from(endpoint.strip_prefix("unix://").unwrap_or(&endpoint));
    let rt = CriRuntime::connect_lazy(&endpoint, RuntimeOptions::default()).unwrap();
    let version = rt.version().await.unwrap();
    let scratch = tempfile::Builder::new()
        .prefix("crilet-bench-events-")
        .tempdir()
        .unwrap();
    let setup = Setup {
        rt: &rt,
        endpoint: &endpoint,
        bin: &bin,
        socket: &socket,
        cgroup_root: &cgroup_root,
        scratch: scratch.path().to_path_buf(),
    };
    println!(
        "events: {} {} at {endpoint}",
        version.runtime_name, version.runtime_version
    );

    println!("  A. exit -> restart, {exit_pods} pods per mode (ms: min median p90 max)");
    for mode in [Mode::Events, Mode::Relist] {
        let (lat, said) = restart_latencies(&setup, mode, exit_pods).await;
        let created: Vec<Duration> = lat.iter().map(|l| l.0).collect();
        let started: Vec<Duration> = lat.iter().map(|l| l.1).collect();
        println!("     {:<7} ({said}, {} samples)", mode.name(), lat.len());
        println!("       exit -> restart created  {}", quantiles(&created));
        println!("       exit -> restart started  {}", quantiles(&started));
    }

    println!(
        "  B. idle, {pods} pods running, window {} s after {} s settling (CPU in % of one core)",
        window.as_secs(),
        SETTLE.as_secs()
    );
    let opt = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3}"));
    for (mode, f, said) in idle_cpu(&setup, pods, window).await {
        let goal = match mode {
            Mode::Events => format!(
                "   goal <= 0.100: {}",
                if f.crilet_cpu <= 0.1 {
                    "within"
                } else {
                    "over"
                }
            ),
            Mode::Relist => String::new(),
        };
        println!(
            "     {:<7} crilet CPU {:.3}{goal}; RSS {:.1} MiB; containerd CPU {}; load {} ({said})",
            mode.name(),
            f.crilet_cpu,
            f.rss_end_mib,
            opt(f.containerd_cpu),
            f.load
        );
    }
}
