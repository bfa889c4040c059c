//! The real kubelet v1.32.13 and crilet side by side: one agent at a time
//! on the same runtime instance, node name, node IP, API server and flags
//! as the parity harness starts them (parity/agents.rs), alternating, and
//! each figure printed for both with its ratio (crilet / kubelet):
//!   1. one manifest written → its container running, and the manifest
//!      removed → its sandbox no longer ready (CRILET_BENCH_ITERATIONS per
//!      round, default 5);
//!   2. 50 manifests written at once → all running, and all removed → no
//!      sandbox ready (CRILET_BENCH_PODS);
//!   3. the agent's RSS (largest sample) and CPU while it holds those pods
//!      idle (CRILET_BENCH_IDLE_SECS, default 30);
//!   4. the raw CRI floor of parts 1 and 2, with no agent: one pod at a
//!      time, crilet's own requests for the same manifest (RunPodSandbox,
//!      CreateContainer, StartContainer, `common/kubelet_pod.rs`), timed by
//!      the same 5 ms poll; then the same 50 pods started by the sequence
//!      both agents send (at most crilet's default
//!      `--max-parallel-runtime-mutations` at once) and stopped
//!      (StopContainer with the agents' 2 s grace period, then
//!      StopPodSandbox), timed as the agents are;
//!   5. an idle node's API requests per second, with 5 static pods, over
//!      CRILET_BENCH_API_WINDOW seconds (default 120) after a warm-up of
//!      CRILET_BENCH_API_WARMUP (default 60), counted from the API server's
//!      own metrics by scripts/api_requests.py.
//!
//!   6. each agent's RSS (largest sample) and CPU holding
//!      CRILET_BENCH_PROBED_PODS pods (default 100; 0 skips it) with two
//!      exec probes each (liveness and readiness, `true` every 10 s), idle
//!      for CRILET_BENCH_IDLE_SECS, once per agent after the rounds.
//!
//! Parts 1-4 run CRILET_BENCH_RUNS rounds (default 3), the agents' order
//! alternating from round to round; the medians are printed.
//!
//! "Removed" is "no sandbox ready": the kubelet stops a removed pod's
//! sandbox at once but deletes it only at its next garbage collection,
//! crilet deletes it at once; both have stopped every container then.
//!
//! Run by `bash scripts/bench.sh` (part `kubelet_vs_crilet`), which starts
//! the runtime instance (scripts/parity-env.sh) and an API server of its
//! own, and exports their variables. Prints; asserts nothing.

#[path = "../parity/agents.rs"]
mod agents;
mod common;
#[path = "common/kubelet_pod.rs"]
mod kubelet_pod;
#[path = "../parity/lab.rs"]
mod lab;
#[path = "common/procfs.rs"]
mod procfs;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agents::Agent;
use common::{env_or, raw_start, summary};
use crilet::cri::*;
use crilet::kuberuntime::labels;
use lab::Lab;
use procfs::{HZ, cpu_ticks, rss_kib, status_field};

fn manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    \
         image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    \
         command: [sleep, \"3600\"]\n"
    )
}

/// A manifest probed twice by exec (liveness and readiness, every 10 s).
fn probed_manifest(name: &str) -> String {
    let probe = "      exec:\n        command: [\"true\"]\n      periodSeconds: 10\n";
    format!(
        "{}    livenessProbe:\n{probe}    readinessProbe:\n{probe}",
        manifest(name)
    )
}

fn write(lab: &Lab, name: &str) {
    write_text(lab, name, &manifest(name));
}

fn write_text(lab: &Lab, name: &str, text: &str) {
    let dir = lab.manifests();
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(format!("{name}.yaml"))).unwrap();
}

fn remove(lab: &Lab, name: &str) {
    std::fs::remove_file(lab.manifests().join(format!("{name}.yaml"))).unwrap();
}

/// How many of `names` have what `count` looks for, by their pod name label.
fn of(names: &[String], node: &str, labels: impl Iterator<Item = String>) -> usize {
    let seen: Vec<String> = labels.collect();
    names
        .iter()
        .filter(|n| seen.contains(&format!("{n}-{node}")))
        .count()
}

async fn running(rt: &dyn Runtime, names: &[String], node: &str) -> usize {
    let filter = ContainerFilter {
        state: Some(ContainerState::Running),
        ..Default::default()
    };
    let list = rt.list_containers(&filter).await.unwrap_or_default();
    let pods = list
        .into_iter()
        .filter_map(|c| c.labels.get(labels::POD_NAME_LABEL).cloned());
    of(names, node, pods)
}

async fn ready(rt: &dyn Runtime, names: &[String], node: &str) -> usize {
    let filter = PodSandboxFilter {
        state: Some(PodSandboxState::Ready),
        ..Default::default()
    };
    let list = rt.list_pod_sandbox(&filter).await.unwrap_or_default();
    of(names, node, list.into_iter().map(|s| s.metadata.name))
}

/// Polls every `every` until `count` gives `want`; the time it took.
async fn until<F, Fut>(want: usize, every: Duration, mut count: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let start = Instant::now();
    while count().await != want {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "never reached {want}"
        );
        tokio::time::sleep(every).await;
    }
    start.elapsed()
}

/// The grace period both agents give a container that ignores SIGTERM
/// (the manifests' 1 s, raised to their 2 s minimum).
const GRACE: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Figures {
    one_start: Vec<Duration>,
    one_stop: Vec<Duration>,
    many_start: Vec<Duration>,
    many_stop: Vec<Duration>,
    rss_kib: Vec<u64>,
    /// RssAnon and RssFile (the mapped binary and libraries) at the
    /// largest sample.
    anon_file_kib: Vec<(u64, u64)>,
    cpu_pct: Vec<f64>,
}

/// One agent's round: parts 1-3.
async fn round(
    lab: &Lab,
    rt: &dyn Runtime,
    agent: Agent,
    ones: usize,
    pods: usize,
    idle: u64,
    f: &mut Figures,
) {
    lab.remove_all_pods();
    lab.forget_node();
    let _ = std::fs::remove_dir_all(lab.manifests());
    std::fs::create_dir_all(lab.manifests()).unwrap();
    let mut running_agent = agents::start(lab, agent, &lab.runtime_socket);
    tokio::time::sleep(Duration::from_secs(3)).await; // its first sync is done
    let node = lab.node.clone();
    for i in 0..ones {
        let name = vec![format!("one-{i}")];
        write(lab, &name[0]);
        f.one_start
            .push(until(1, Duration::from_millis(5), || running(rt, &name, &node)).await);
        remove(lab, &name[0]);
        f.one_stop
            .push(until(0, Duration::from_millis(5), || ready(rt, &name, &node)).await);
    }
    let names: Vec<String> = (0..pods).map(|i| format!("many-{i}")).collect();
    for n in &names {
        write(lab, n);
    }
    let t = Instant::now();
    until(pods, Duration::from_millis(25), || {
        running(rt, &names, &node)
    })
    .await;
    f.many_start.push(t.elapsed());
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pid = running_agent.pid().expect("the agent's pid");
    let (ticks0, _) = cpu_ticks(pid).unwrap_or_default();
    let t0 = Instant::now();
    let (mut rss, mut split) = (0, (0, 0));
    while t0.elapsed() < Duration::from_secs(idle) {
        let now = rss_kib(pid).unwrap_or(0);
        if now > rss {
            rss = now;
            let field = |f| status_field(pid, f).unwrap_or(0);
            split = (field("RssAnon"), field("RssFile"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    f.anon_file_kib.push(split);
    let (ticks, _) = cpu_ticks(pid).unwrap_or_default();
    f.rss_kib.push(rss);
    f.cpu_pct
        .push(ticks.saturating_sub(ticks0) as f64 / HZ / t0.elapsed().as_secs_f64() * 100.0);
    let t = Instant::now();
    for n in &names {
        remove(lab, n);
    }
    until(0, Duration::from_millis(25), || ready(rt, &names, &node)).await;
    f.many_stop.push(t.elapsed());
    running_agent.stop();
}

/// Part 4, one pod: crilet's own requests for the manifest of part 1,
/// started raw `ones` times, each timed by the poll that times the agents.
async fn raw_ones(lab: &Lab, rt: &dyn Runtime, ones: usize) -> Vec<Duration> {
    lab.remove_all_pods();
    let root = lab.dir.join("raw-root");
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let flags: Vec<String> = [
        "--hostname-override".to_string(),
        lab.node.clone(),
        "--node-ip".into(),
        lab.node_ip.clone(),
        "--cgroup-root".into(),
        format!("/{}", lab.cgroup_root),
        "--pod-manifest-path".into(),
        path(&lab.manifests()),
        "--root-dir".into(),
        path(&root),
        "--pod-logs-dir".into(),
        path(&root.join("pod-logs")),
    ]
    .into();
    let mut took = Vec::new();
    for i in 0..ones {
        let name = vec![format!("raw-one-{i}")];
        let (sb, c) = kubelet_pod::kubelet_pod(rt, &flags, &manifest(&name[0]), &lab.node).await;
        let t = Instant::now();
        let node = lab.node.clone();
        let poll = until(1, Duration::from_millis(5), || running(rt, &name, &node));
        let (id, seen) = tokio::join!(raw_start(rt, &sb, &c), poll);
        assert!(t.elapsed() >= seen);
        took.push(seen);
        common::raw_remove(rt, &id, &sb.cgroup_parent).await;
    }
    let _ = std::fs::remove_dir_all(&root);
    took
}

/// Part 6: an agent's RSS (largest sample, KiB) and CPU (% of a core)
/// holding `pods` pods with two exec probes each, idle for `idle` s.
async fn probed(lab: &Lab, rt: &dyn Runtime, agent: Agent, pods: usize, idle: u64) -> (u64, f64) {
    lab.remove_all_pods();
    lab.forget_node();
    let _ = std::fs::remove_dir_all(lab.manifests());
    std::fs::create_dir_all(lab.manifests()).unwrap();
    let mut running_agent = agents::start(lab, agent, &lab.runtime_socket);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let names: Vec<String> = (0..pods).map(|i| format!("probed-{i}")).collect();
    for n in &names {
        write_text(lab, n, &probed_manifest(n));
    }
    let node = lab.node.clone();
    until(pods, Duration::from_millis(100), || {
        running(rt, &names, &node)
    })
    .await;
    // Every probe has run at least once.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let pid = running_agent.pid().expect("the agent's pid");
    let (ticks0, _) = cpu_ticks(pid).unwrap_or_default();
    let t0 = Instant::now();
    let mut rss = 0;
    while t0.elapsed() < Duration::from_secs(idle) {
        rss = rss.max(rss_kib(pid).unwrap_or(0));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (ticks, _) = cpu_ticks(pid).unwrap_or_default();
    let cpu = ticks.saturating_sub(ticks0) as f64 / HZ / t0.elapsed().as_secs_f64() * 100.0;
    for n in &names {
        remove(lab, n);
    }
    until(0, Duration::from_millis(100), || ready(rt, &names, &node)).await;
    running_agent.stop();
    (rss, cpu)
}

/// Part 4: the raw CRI floor for `pods` pods, `(start, stop)`: what any
/// agent on this runtime and machine waits for at the least, timed as
/// [`round`] times the agents (all running; no sandbox ready).
async fn raw_round(lab: &Lab, rt: Arc<dyn Runtime>, pods: usize) -> (Duration, Duration) {
    lab.remove_all_pods();
    let bounded: Arc<dyn Runtime> = Arc::new(BoundedRuntime::new(
        rt,
        crilet::agent::config::DEFAULT_MAX_PARALLEL_RUNTIME_MUTATIONS,
    ));
    let logs = lab.dir.join("raw-logs");
    let configs: Vec<_> = (0..pods).map(|i| common::pod(i, &logs)).collect();
    let t = Instant::now();
    let started = futures::future::join_all(configs.iter().map(|(sandbox, container)| {
        let rt = bounded.clone();
        async move { raw_start(rt.as_ref(), sandbox, container).await }
    }))
    .await;
    let start = t.elapsed();
    let t = Instant::now();
    futures::future::join_all(started.iter().map(|sandbox| {
        let rt = bounded.clone();
        async move {
            let of_pod = ContainerFilter {
                pod_sandbox_id: Some(sandbox.clone()),
                ..Default::default()
            };
            for c in rt.list_containers(&of_pod).await.unwrap_or_default() {
                rt.stop_container(&c.id, GRACE)
                    .await
                    .expect("StopContainer");
            }
            rt.stop_pod_sandbox(sandbox).await.expect("StopPodSandbox");
        }
    }))
    .await;
    let stop = t.elapsed();
    for ((sandbox, _), id) in configs.iter().zip(&started) {
        common::raw_remove(bounded.as_ref(), id, &sandbox.cgroup_parent).await;
    }
    let _ = std::fs::remove_dir_all(&logs);
    (start, stop)
}

/// Part 5: the requests/s of `agent` idle with 5 pods, as api_requests.py
/// counts them.
async fn api_requests(lab: &Lab, agent: Agent, warmup: u64, window: u64) -> String {
    lab.remove_all_pods();
    lab.forget_node();
    let _ = std::fs::remove_dir_all(lab.manifests());
    std::fs::create_dir_all(lab.manifests()).unwrap();
    let mut running_agent = agents::start(lab, agent, &lab.runtime_socket);
    for i in 0..5 {
        write(lab, &format!("idle-{i}"));
    }
    tokio::time::sleep(Duration::from_secs(warmup)).await;
    let scrape = |file: &std::path::Path| {
        let t = Instant::now();
        let text = lab
            .kubectl(&["get", "--raw", "/metrics"])
            .expect("/metrics");
        std::fs::write(file, text).unwrap();
        t
    };
    let (before, after) = (
        lab.dir.join("metrics.before"),
        lab.dir.join("metrics.after"),
    );
    let t0 = scrape(&before);
    tokio::time::sleep(Duration::from_secs(window)).await;
    let t1 = scrape(&after);
    running_agent.stop();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/api_requests.py");
    let out = lab::run(
        std::process::Command::new("python3")
            .arg("-B")
            .arg(script)
            .arg(&before)
            .arg(&after)
            .arg(format!("{}", (t1 - t0).as_secs_f64())),
    )
    .expect("api_requests.py");
    let total = out
        .lines()
        .find(|l| l.trim_start().starts_with("total"))
        .unwrap_or_default();
    total.split_whitespace().last().unwrap_or("?").to_string()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    if std::env::var("CRILET_PARITY_ENDPOINT").is_err() {
        eprintln!("kubelet_vs_crilet: run `bash scripts/bench.sh` (part kubelet_vs_crilet)");
        std::process::exit(2);
    }
    let lab = Lab::from_env();
    let ones: usize = env_or("CRILET_BENCH_ITERATIONS", 5);
    let pods: usize = env_or("CRILET_BENCH_PODS", 50);
    let idle: u64 = env_or("CRILET_BENCH_IDLE_SECS", 30);
    let rounds: usize = env_or("CRILET_BENCH_RUNS", 3).max(1);
    let warmup: u64 = env_or("CRILET_BENCH_API_WARMUP", 60);
    let window: u64 = env_or("CRILET_BENCH_API_WINDOW", 120);
    let probed_pods: usize = env_or("CRILET_BENCH_PROBED_PODS", 100);
    std::fs::create_dir_all(&lab.dir).unwrap();
    lab.make_cgroup_root();
    let endpoint = format!("unix://{}", lab.runtime_socket.display());
    let rt: Arc<dyn Runtime> =
        Arc::new(CriRuntime::connect_lazy(&endpoint, RuntimeOptions::default()).unwrap());
    rt.version().await.unwrap();

    let (mut kubelet, mut crilet) = (Figures::default(), Figures::default());
    let (mut raw_start_times, mut raw_stop_times) = (Vec::new(), Vec::new());
    let mut raw_one_times = Vec::new();
    for r in 0..rounds {
        let order = if r % 2 == 0 {
            [Agent::Kubelet, Agent::Crilet]
        } else {
            [Agent::Crilet, Agent::Kubelet]
        };
        for agent in order {
            let f = if agent == Agent::Kubelet {
                &mut kubelet
            } else {
                &mut crilet
            };
            round(&lab, rt.as_ref(), agent, ones, pods, idle, f).await;
            eprintln!(
                "kubelet_vs_crilet: round {} of {rounds}: {} done",
                r + 1,
                agent.name()
            );
        }
        raw_one_times.extend(raw_ones(&lab, rt.as_ref(), ones).await);
        let (start, stop) = raw_round(&lab, rt.clone(), pods).await;
        raw_start_times.push(start);
        raw_stop_times.push(stop);
    }
    let (mut probed_kubelet, mut probed_crilet) = ((0, f64::NAN), (0, f64::NAN));
    if probed_pods > 0 {
        probed_kubelet = probed(&lab, rt.as_ref(), Agent::Kubelet, probed_pods, idle).await;
        probed_crilet = probed(&lab, rt.as_ref(), Agent::Crilet, probed_pods, idle).await;
    }
    let api_kubelet = api_requests(&lab, Agent::Kubelet, warmup, window).await;
    let api_crilet = api_requests(&lab, Agent::Crilet, warmup, window).await;
    lab.remove_all_pods();
    lab.forget_node();

    println!(
        "kubelet_vs_crilet on {} ({}), {rounds} alternating rounds, medians",
        lab.runtime, endpoint
    );
    println!(
        "   {:<44} {:>11} {:>11} {:>7}",
        "figure", "kubelet", "crilet", "ratio"
    );
    let row = |what: &str, k: f64, c: f64, unit: &str, goal: &str| {
        println!(
            "   {what:<44} {k:>8.1} {unit:<2} {c:>8.1} {unit:<2} {:>7.2}  {goal}",
            c / k
        );
    };
    let med = |v: &[Duration]| summary(v).1;
    row(
        "1 pod: manifest -> running",
        med(&kubelet.one_start),
        med(&crilet.one_start),
        "ms",
        "(goal <= 0.90)",
    );
    let floor_one = med(&raw_one_times);
    println!(
        "   {:<44} {floor_one:>8.1} ms, {:.2} of the kubelet's; crilet {:.2} of it (goal <= 1.05)",
        "1 pod: the raw CRI sequence, same poll",
        floor_one / med(&kubelet.one_start),
        med(&crilet.one_start) / floor_one,
    );
    row(
        "1 pod: removed -> sandbox not ready",
        med(&kubelet.one_stop),
        med(&crilet.one_stop),
        "ms",
        "",
    );
    row(
        &format!("{pods} pods: manifests -> all running"),
        med(&kubelet.many_start),
        med(&crilet.many_start),
        "ms",
        "(goal <= 0.90)",
    );
    row(
        &format!("{pods} pods: removed -> no sandbox ready"),
        med(&kubelet.many_stop),
        med(&crilet.many_stop),
        "ms",
        "(goal <= 0.50)",
    );
    let (floor_start, floor_stop) = (med(&raw_start_times), med(&raw_stop_times));
    println!(
        "   {:<44} {floor_start:>8.1} ms, {:.2} of the kubelet's; crilet {:.2} of it (goal <= 1.05)",
        format!("{pods} pods: start by the raw CRI sequence"),
        floor_start / med(&kubelet.many_start),
        med(&crilet.many_start) / floor_start,
    );
    println!(
        "   {:<44} {floor_stop:>8.1} ms, {:.2} of the kubelet's; crilet {:.2} of it",
        format!("{pods} pods: raw CRI stop (2 s grace)"),
        floor_stop / med(&kubelet.many_stop),
        med(&crilet.many_stop) / floor_stop,
    );
    let mib = |v: &[u64]| median(&v.iter().map(|k| *k as f64 / 1024.0).collect::<Vec<_>>());
    row(
        &format!("RSS holding {pods} pods"),
        mib(&kubelet.rss_kib),
        mib(&crilet.rss_kib),
        "MiB",
        "(goal <= 0.15)",
    );
    let split = |f: &Figures| {
        let mut v = f.anon_file_kib.clone();
        v.sort();
        let (anon, file) = v[v.len() / 2];
        format!("{:.1} + {:.1}", anon as f64 / 1024.0, file as f64 / 1024.0)
    };
    println!(
        "   {:<44} kubelet {} MiB, crilet {} MiB",
        "  of which anonymous + file-backed",
        split(&kubelet),
        split(&crilet)
    );
    row(
        &format!("idle CPU holding {pods} pods, % of a core"),
        median(&kubelet.cpu_pct),
        median(&crilet.cpu_pct),
        "%",
        "(goal <= 0.10)",
    );
    if probed_pods > 0 {
        row(
            &format!("RSS holding {probed_pods} pods, 2 exec probes each"),
            probed_kubelet.0 as f64 / 1024.0,
            probed_crilet.0 as f64 / 1024.0,
            "MiB",
            "(goal: crilet <= 16 MiB)",
        );
        row(
            &format!("CPU holding {probed_pods} probed pods, % of a core"),
            probed_kubelet.1,
            probed_crilet.1,
            "%",
            "",
        );
    }
    let rate = |s: &str| s.trim_end_matches("/s").parse::<f64>().unwrap_or(f64::NAN);
    row(
        "idle node, 5 pods: API requests per second",
        rate(&api_kubelet),
        rate(&api_crilet),
        "/s",
        "",
    );
}
