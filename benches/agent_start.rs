//! crilet against the raw CRI sequence, in one run on the same containerd:
//!   1. one manifest written → its container running, vs RunPodSandbox +
//!      CreateContainer + StartContainer done directly (ratio of medians).
//!      Both halves are timed by the same observer, a ListContainers poll
//!      every 5 ms that runs beside them, so the ratio compares like with
//!      like: the poll's own calls load the runtime under both, and its
//!      period rounds both up. The raw sequence's own clock (until
//!      StartContainer returned) is printed beside it;
//!   2. 50 manifests written at once → all running, vs crilet's own requests
//!      for 50 pods sent raw, W-wide (CRILET_BENCH_WIDTH, default 4: bench.sh
//!      passes the best width of `cri_sequence`'s sweep), alternating, 5 runs
//!      of each (CRILET_BENCH_RUNS), ratio of the medians;
//!   3. crilet's RSS and CPU while it holds those 50 pods idle for 30 s.
//!
//! Part 1's two halves run one after the other, before part 2's hundreds
//! of pods leave the runtime busier (its store, its GC) than it was for the
//! first half. Its raw sequence sends the requests crilet sends for the same
//! manifest (crilet's own mapping, `common/kubelet_pod.rs`): the kubelet's
//! sandbox runs RuntimeDefault seccomp and its container gets binds and
//! resources, all of which cost the runtime time a bare config does not
//! spend. The bare config's sequence runs alternately beside it and is
//! printed too. Part 1 also says where the time goes: the median of each
//! CRI call of the raw sequence beside the same call made by crilet (from
//! its `--v=4` lines), and crilet's own time (its total less its three
//! calls).
//!
//! CRILET_BENCH_AGENT_ARGS adds flags to `crilet run` (space-separated).
//!
//! Prints the figures; asserts nothing (the machines are shared and noisy).
//!
//! Run by `bash scripts/bench.sh`, which builds the release binary and sets
//! CRILET_BENCH_ENDPOINT. CRILET_BENCH_ITERATIONS (default 10) sets the
//! count for part 1; CRILET_BENCH_PODS (50) and CRILET_BENCH_IDLE_SECS (30)
//! the others.

mod common;
#[path = "common/kubelet_pod.rs"]
mod kubelet_pod;
#[path = "common/startup.rs"]
mod startup;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
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

fn unix_ns() -> i64 {
    jiff::Timestamp::now().as_nanosecond() as i64
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

/// Polls every `every`: often for one pod, less for many, whose
/// ListContainers replies are long and would slow the runtime under test.
async fn wait_until(rt: &dyn Runtime, names: &[String], want: usize, every: Duration) -> Duration {
    let start = Instant::now();
    while running(rt, names).await != want {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "pods never reached {want} running"
        );
        tokio::time::sleep(every).await;
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

/// The flags of the bench's `crilet run` (also those its raw requests are
/// built for).
fn agent_flags(endpoint: &str, manifests: &Path, root: &Path, extra: &[String]) -> Vec<String> {
    let path = |p: PathBuf| p.to_string_lossy().into_owned();
    let mut flags: Vec<String> = [
        "--port",
        "0",
        "--container-runtime-endpoint",
        endpoint,
        "--hostname-override",
        NODE,
        "--cgroup-root",
        "/crilet-bench",
    ]
    .map(String::from)
    .into();
    flags.extend([
        "--pod-manifest-path".into(),
        path(manifests.to_path_buf()),
        "--root-dir".into(),
        path(root.to_path_buf()),
        // Its own log directories, not the machine's /var/log.
        "--pod-logs-dir".into(),
        path(root.join("pod-logs")),
        "--container-logs-dir".into(),
        path(root.join("containers")),
        "--socket".into(),
        path(root.join("crilet.sock")),
    ]);
    flags.extend(extra.iter().cloned());
    flags
}

impl Agent {
    fn start(bin: &Path, endpoint: &str, manifests: &Path, root: &Path, extra: &[String]) -> Self {
        Self::start_logged(bin, endpoint, manifests, root, extra, None)
    }

    /// With its CRI calls logged (`--v=4`'s lines) to `log`.
    fn start_logged(
        bin: &Path,
        endpoint: &str,
        manifests: &Path,
        root: &Path,
        extra: &[String],
        log: Option<&Path>,
    ) -> Self {
        let (level, stderr) = match log {
            Some(path) => (
                startup::LOG_LEVEL,
                Stdio::from(std::fs::File::create(path).expect("crilet's log")),
            ),
            None => ("warn", Stdio::inherit()),
        };
        let child = Command::new(bin)
            .arg("run")
            .args(agent_flags(endpoint, manifests, root, extra))
            .env("CRILET_LOG", level)
            .stdout(Stdio::null())
            .stderr(stderr)
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

    /// SIGSTOP (`true`) or SIGCONT (`false`): a paused crilet sends the
    /// runtime nothing and acts on nothing it sees.
    fn pause(&self, pause: bool) {
        let signal = if pause { "-STOP" } else { "-CONT" };
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status();
        assert!(status.is_ok_and(|s| s.success()), "kill {signal} crilet");
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
        // A crilet paused when the bench panicked would hold SIGTERM, and
        // the wait, for ever.
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// The durations of crilet's logged CRI calls of `op` (`CRI call
/// op="X" elapsed=1.5ms`, Rust's Duration debug form).
fn logged_calls(log: &str, op: &str) -> Vec<Duration> {
    let key = format!("op=\"{op}\" elapsed=");
    (log.lines())
        .filter_map(|l| {
            let v = l.split(&key).nth(1)?.split_whitespace().next()?;
            let split = v.find(|c: char| !c.is_ascii_digit() && c != '.')?;
            let (n, unit) = v.split_at(split);
            let n: f64 = n.parse().ok()?;
            let secs = match unit {
                "s" => n,
                "ms" => n / 1e3,
                "µs" => n / 1e6,
                "ns" => n / 1e9,
                _ => return None,
            };
            Some(Duration::from_secs_f64(secs))
        })
        .collect()
}

/// Makes a raw pod's requests ones the crilet running beside them leaves
/// alone: it adopts (and removes) only sandboxes and containers with a pod
/// UID label, and sweeps only pod cgroups under `kubepods`. A runtime that
/// labels sandboxes from their metadata itself (CRI-O) defeats this: see
/// [`labels_sandboxes_itself`]. The requests
/// otherwise stay crilet's (the raw half's flags give them a root and log
/// directory of their own, out of reach of its directory sweep).
fn disown(sandbox: &mut PodSandboxConfig, container: &mut ContainerConfig) {
    sandbox.labels.remove(labels::POD_UID_LABEL);
    container.labels.remove(labels::POD_UID_LABEL);
    sandbox.cgroup_parent = sandbox.cgroup_parent.replace("kubepods", "crilet-raw");
}

/// Whether the runtime gave a disowned sandbox the pod UID label anyway.
/// CRI-O does (from the sandbox's metadata, as the kubelet's labels would),
/// so the crilet running beside the raw half sees its pods as pods no
/// manifest wants and removes them, as the kubelet would: on such a
/// runtime crilet is paused while the raw half runs.
async fn labels_sandboxes_itself(rt: &dyn Runtime, sandbox_id: &str) -> bool {
    let filter = PodSandboxFilter {
        id: Some(sandbox_id.to_string()),
        ..Default::default()
    };
    let listed = rt.list_pod_sandbox(&filter).await.expect("ListPodSandbox");
    (listed.iter()).any(|s| s.labels.contains_key(labels::POD_UID_LABEL))
}

/// Each run's crilet time over its raw time, `1.02 0.98 ...`.
fn per_run(raw: &[Duration], agent: &[Duration]) -> String {
    (raw.iter().zip(agent))
        .map(|(r, a)| format!("{:.2}", a.as_secs_f64() / r.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::main]
async fn main() {
    let (endpoint, bin) = common::endpoint_and_binary("agent_start");
    let n: usize = env_or("CRILET_BENCH_ITERATIONS", 10);
    let pods: usize = env_or("CRILET_BENCH_PODS", 50);
    let idle: u64 = env_or("CRILET_BENCH_IDLE_SECS", 30);
    let width: usize = env_or("CRILET_BENCH_WIDTH", 4).max(1);
    let runs: usize = env_or("CRILET_BENCH_RUNS", 5).max(1);
    // More `crilet run` flags, split on spaces (CRILET_BENCH_AGENT_ARGS).
    let extra: Vec<String> = std::env::var("CRILET_BENCH_AGENT_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    let rt: Arc<dyn Runtime> =
        Arc::new(CriRuntime::connect_lazy(&endpoint, RuntimeOptions::default()).unwrap());
    rt.version().await.unwrap();
    let scratch = tempfile::Builder::new()
        .prefix("crilet-bench-")
        .tempdir()
        .unwrap();

    // --- 1. one pod at a time, the raw sequence (crilet's requests, and a
    // bare config) and crilet alternately, with crilet running throughout:
    // both halves share its idle load (the relist) and the runtime's state.
    // On a runtime that labels the raw pods for crilet to see, crilet is
    // paused during the raw half instead (`labels_sandboxes_itself`).
    let manifests = scratch.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let root = scratch.path().join("root");
    let flags = agent_flags(&endpoint, &manifests, &root, &extra);
    let raw_flags = agent_flags(&endpoint, &manifests, &scratch.path().join("raw"), &extra);
    let calls_log = scratch.path().join("crilet-calls.log");
    let agent = Agent::start_logged(&bin, &endpoint, &manifests, &root, &extra, Some(&calls_log));
    tokio::time::sleep(Duration::from_secs(2)).await; // started, first SET sent
    let mut raw = Vec::new();
    let mut raw_seen = Vec::new();
    let mut bare = Vec::new();
    let mut raw_steps: [Vec<Duration>; 3] = Default::default();
    let mut via_agent = Vec::new();
    let mut written = HashMap::new();
    // Whether crilet must be paused during the raw half: found with the
    // first raw pod, made while it is paused.
    let mut pause = false;
    for i in 0..n {
        let (mut sb, mut c) = pod(10_000 + i, scratch.path());
        disown(&mut sb, &mut c);
        // Paused for the first pod in any case, until the runtime's labels
        // are known.
        agent.pause(pause || i == 0);
        let t = Instant::now();
        let id = raw_start(rt.as_ref(), &sb, &c).await;
        bare.push(t.elapsed());
        if i == 0 {
            pause = labels_sandboxes_itself(rt.as_ref(), &id).await;
        }
        if i == 0 && pause {
            println!(
                "(this runtime labels sandboxes with their pod UID itself: crilet is paused \
                 (SIGSTOP) while the raw half runs, or it would remove the raw pods)"
            );
        }
        raw_remove(rt.as_ref(), &id, &sb.cgroup_parent).await;
        agent.pause(pause);

        let name = format!("raw-{i}");
        let (mut sb, mut c) =
            kubelet_pod::kubelet_pod(rt.as_ref(), &raw_flags, &manifest(&name), NODE).await;
        disown(&mut sb, &mut c);
        let t = Instant::now();
        let sequence = async {
            let id = rt.run_pod_sandbox(&sb).await.expect("RunPodSandbox");
            raw_steps[0].push(t.elapsed());
            if let Some(dir) = Path::new(&c.log_path).parent() {
                std::fs::create_dir_all(Path::new(&sb.log_directory).join(dir)).unwrap();
            }
            let step = Instant::now();
            let ctr = (rt.create_container(&id, &c, &sb).await).expect("CreateContainer");
            raw_steps[1].push(step.elapsed());
            let step = Instant::now();
            rt.start_container(&ctr).await.expect("StartContainer");
            raw_steps[2].push(step.elapsed());
            raw.push(t.elapsed());
            id
        };
        // The observer crilet's half has, on this half too: the same 5 ms
        // ListContainers poll runs beside the sequence and times it as it
        // times crilet (its calls load the runtime, its period rounds up).
        let poll = wait_until(
            rt.as_ref(),
            std::slice::from_ref(&name),
            1,
            Duration::from_millis(5),
        );
        let (id, seen) = tokio::join!(sequence, poll);
        raw_seen.push(seen);
        raw_remove(rt.as_ref(), &id, &sb.cgroup_parent).await;
        agent.pause(false);

        let name = format!("one-{i}");
        let t = Instant::now();
        written.insert(name.clone(), unix_ns());
        write(&manifests, &name);
        wait_until(
            rt.as_ref(),
            std::slice::from_ref(&name),
            1,
            Duration::from_millis(5),
        )
        .await;
        via_agent.push(t.elapsed());
        std::fs::remove_file(manifests.join(format!("{name}.yaml"))).unwrap();
        wait_empty(rt.as_ref()).await;
    }

    // Its calls and start-up traces for the single pods.
    let logged = std::fs::read_to_string(&calls_log).unwrap_or_default();
    let one_traces = startup::parse(&logged);
    let one_watch = startup::watch_latency(&one_traces, &written);

    drop(agent);

    // --- 2. `pods` pods: the raw sequence `width` at a time, then crilet
    // with all manifests written at once, alternating `runs` times. crilet
    // runs only for its half (an agent removes kubelet-labelled pods that
    // no manifest wants), started 2 s before the manifests are written.
    let names: Vec<String> = (0..pods).map(|i| format!("many-{i}")).collect();
    let (mut raw_many, mut agent_many) = (Vec::new(), Vec::new());
    let (mut many_traces, mut many_watch) = (Vec::new(), Vec::new());
    for run in 0..runs {
        // crilet's requests for pods of their own, built before the clock.
        let mut configs = Vec::new();
        for i in 0..pods {
            let m = manifest(&format!("raw-{run}-{i}"));
            configs.push(kubelet_pod::kubelet_pod(rt.as_ref(), &flags, &m, NODE).await);
        }
        let t = Instant::now();
        let sem = Arc::new(tokio::sync::Semaphore::new(width));
        let mut tasks = Vec::new();
        for (sb, c) in configs {
            let (rt, sem) = (rt.clone(), sem.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = sem.acquire().await.unwrap();
                (raw_start(rt.as_ref(), &sb, &c).await, sb.cgroup_parent)
            }));
        }
        let mut started = Vec::new();
        for task in tasks {
            started.push(task.await.unwrap());
        }
        raw_many.push(t.elapsed());
        for (id, cg) in started {
            raw_remove(rt.as_ref(), &id, &cg).await;
        }

        let log = scratch.path().join(format!("crilet-many-{run}.log"));
        let agent = Agent::start_logged(
            &bin,
            &endpoint,
            &manifests,
            &scratch.path().join("root"),
            &extra,
            Some(&log),
        );
        tokio::time::sleep(Duration::from_secs(2)).await; // started, first SET sent
        let t = Instant::now();
        let mut written = HashMap::new();
        for name in &names {
            written.insert(name.clone(), unix_ns());
            write(&manifests, name);
        }
        wait_until(rt.as_ref(), &names, pods, Duration::from_millis(25)).await;
        agent_many.push(t.elapsed());
        // Its traces are written once the Running statuses are in.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let traces = startup::parse(&std::fs::read_to_string(&log).unwrap_or_default());
        many_watch.push(startup::watch_latency(&traces, &written));
        many_traces.extend(traces);
        for name in &names {
            std::fs::remove_file(manifests.join(format!("{name}.yaml"))).unwrap();
        }
        wait_empty(rt.as_ref()).await;
        drop(agent);
    }

    // Part 3 holds the pods with an agent of its own.
    let agent = Agent::start(
        &bin,
        &endpoint,
        &manifests,
        &scratch.path().join("root"),
        &extra,
    );
    tokio::time::sleep(Duration::from_secs(2)).await; // started, first SET sent

    // --- 3. idle with `pods` pods
    for name in &names {
        write(&manifests, name);
    }
    wait_until(rt.as_ref(), &names, pods, Duration::from_millis(25)).await;
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
    let (bmin, bmed, bmax) = summary(&bare);
    let (smin, smed, smax) = summary(&raw_seen);
    println!(
        "   raw CRI sequence   min {smin:7.1} ms  median {smed:7.1} ms  max {smax:7.1} ms  (crilet's requests; seen by the poll)"
    );
    println!(
        "   crilet             min {amin:7.1} ms  median {amed:7.1} ms  max {amax:7.1} ms  (seen by the same poll)"
    );
    println!(
        "   ratio of medians   {:.2}  (goal <= 1.05; per run {})",
        amed / smed,
        per_run(&raw_seen, &via_agent)
    );
    println!(
        "   raw, own clock     min {rmin:7.1} ms  median {rmed:7.1} ms  max {rmax:7.1} ms  (StartContainer returned; crilet at {:.2} of it)",
        amed / rmed
    );
    println!(
        "   raw, bare config   min {bmin:7.1} ms  median {bmed:7.1} ms  max {bmax:7.1} ms  (no seccomp, binds or resources; crilet at {:.2} of it)",
        amed / bmed
    );
    let mut own = amed;
    println!("   where it goes      raw median  crilet median (its --v=4 lines)");
    for (i, op) in ["RunPodSandbox", "CreateContainer", "StartContainer"]
        .into_iter()
        .enumerate()
    {
        let theirs = logged_calls(&logged, op);
        let (_, raw_med, _) = summary(&raw_steps[i]);
        let agent_med = if theirs.is_empty() {
            f64::NAN
        } else {
            summary(&theirs).1
        };
        own -= agent_med;
        println!(
            "     {op:<16} {raw_med:8.1} ms  {agent_med:8.1} ms ({} calls)",
            theirs.len()
        );
    }
    println!(
        "     crilet's own     {:>8}     {own:8.1} ms (its median less the three)",
        ""
    );
    let (wmin, wmed, wmax) = summary(&raw_many);
    let (cmin, cmed, cmax) = summary(&agent_many);
    println!("2. {pods} pods, {runs} alternating runs");
    println!(
        "   raw CRI, {width:>2}-wide   min {wmin:7.1} ms  median {wmed:7.1} ms  max {wmax:7.1} ms"
    );
    println!("   crilet, at once    min {cmin:7.1} ms  median {cmed:7.1} ms  max {cmax:7.1} ms");
    println!(
        "   ratio of medians   {:.2}  (goal <= 1.05; per run {})",
        cmed / wmed,
        per_run(&raw_many, &agent_many)
    );
    println!("   where the time goes: crilet's start-up traces (crilet::pod_startup), each step's");
    println!("   median, the part of it waited on the runtime, and crilet's own (the rest)");
    many_watch.sort_by(f64::total_cmp);
    let many_watch = many_watch
        .get(many_watch.len() / 2)
        .copied()
        .unwrap_or(f64::NAN);
    startup::print_table(&[
        ("1 pod", &one_traces, one_watch),
        (&format!("{pods} pods"), &many_traces, many_watch),
    ]);
    println!("3. crilet holding {pods} pods idle for {idle} s");
    println!("   max RSS            {:.1} MiB", rss_max as f64 / 1024.0);
    println!("   CPU                {cpu_pct:.2} % of one core");
}
