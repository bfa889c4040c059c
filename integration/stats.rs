//! Stats end to end: the real binary on the agent tests' containerd and the
//! real kube-apiserver (for the mirror pod's UID). A busy and an idle container; every lookup (static
//! UID, mirror UID, namespace/name) finds the same pod; `/stats/summary`
//! within the value bounds of the kubelet's own Summary API node test;
//! metrics, `/pods`, the watch stream and the CLI.

use std::time::Duration;

use crilet::api::stats::v1 as pb;
use crilet::cli::agent_client;
use serde_json::Value;

use crate::agent::*;
use crate::kube::Lab;
use crate::support::{RuntimeKind, eventually, http_get, runtime_kind};

const MB: u64 = 1_000_000;
const KB: u64 = 1_000;

fn stats_pod() -> String {
    // As the kubelet's Summary test: limited memory, a log line a second,
    // something written to the container's own filesystem.
    let limits = "    resources:\n      limits:\n        memory: 80M\n";
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: stats\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: spin\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"while :; do :; done\"]\n{limits}  - name: idle\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"head -c 4096 /dev/zero > /written; while :; do echo hello from idle; sleep 1; done\"]\n{limits}"
    )
}

fn by_uid(uid: &str) -> Option<pb::PodRef> {
    Some(pb::PodRef {
        r#ref: Some(pb::pod_ref::Ref::Uid(uid.into())),
    })
}

fn u(v: &Value, path: &str) -> u64 {
    let mut cur = v;
    for key in path.split('.') {
        cur = &cur[key];
    }
    cur.as_u64()
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

fn within(v: &Value, path: &str, lo: u64, hi: u64) {
    let x = u(v, path);
    assert!((lo..=hi).contains(&x), "{path} = {x}, want {lo}..={hi}");
}

/// The kubelet test's bounds of a filesystem of this node.
fn fs_bounds(v: &Value, what: &str, used: (u64, u64)) {
    for f in ["availableBytes", "capacityBytes"] {
        within(v, &format!("{what}.{f}"), 100 * MB, 10_000_000 * MB);
    }
    within(v, &format!("{what}.usedBytes"), used.0, used.1);
    within(v, &format!("{what}.inodesFree"), 10_000, 100_000_000);
    within(v, &format!("{what}.inodes"), 10_000, 100_000_000);
    within(v, &format!("{what}.inodesUsed"), 0, 100_000_000);
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn stats_by_every_uid_and_the_summary_api() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let claim = lab.claim("crilet-node-8").await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let agent = crate::mirror::start_on(
        &claim,
        &[
            "--stats-period".into(),
            "1s".into(),
            "--http-address".into(),
            format!("127.0.0.1:{port}"),
        ],
    );
    let socket = agent.socket();
    let full = agent.pod_name("stats");
    agent.write("stats.yaml", &stats_pod());

    // The pod, with its mirror's UID once the mirror exists.
    let info = eventually(Duration::from_secs(60), || async {
        let pods = agent_client::pods(&socket).await.ok()?;
        let p = pods.into_iter().next()?;
        let id = p.pod.clone()?;
        (p.phase == "Running" && !id.mirror_uid.is_empty()).then_some(p)
    })
    .await
    .unwrap_or_else(|| panic!("no running pod with a mirror\n{}", agent.logs()));
    let id = info.pod.clone().unwrap();
    let mirror = lab.pod("default", &full).await.expect("the mirror pod");
    assert_eq!(mirror.metadata.uid.as_deref(), Some(id.mirror_uid.as_str()));
    assert_ne!(id.mirror_uid, id.static_uid);
    assert_eq!(info.containers.len(), 2);

    // The busy container: above 0.1 core within two samples of appearing.
    let mut c = agent_client::connect(&socket).await.unwrap();
    let first = eventually(Duration::from_secs(30), || {
        let mut c = c.clone();
        let uid = id.static_uid.clone();
        async move {
            let s = c
                .get_pod_stats(pb::GetPodStatsRequest { pod: by_uid(&uid) })
                .await
                .ok()?;
            let s = s.into_inner();
            (s.containers.len() == 2).then_some(s)
        }
    })
    .await
    .unwrap_or_else(|| panic!("no stats with both containers\n{}", agent.logs()));
    let busy = eventually(Duration::from_secs(5), || {
        let mut c = c.clone();
        let uid = id.static_uid.clone();
        let t0 = first.sample_time_unix_nano;
        async move {
            let s = c
                .get_pod_stats(pb::GetPodStatsRequest { pod: by_uid(&uid) })
                .await
                .ok()?
                .into_inner();
            let rated = s
                .containers
                .iter()
                .all(|c| c.cpu.as_ref().is_some_and(|x| x.usage_nano_cores.is_some()));
            (s.sample_time_unix_nano > t0 && rated).then_some(s)
        }
    })
    .await;
    let s = busy.expect("a second sample within 5 s of a 1 s period");
    let cpu = |name: &str| {
        s.containers
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .cpu
            .as_ref()
            .unwrap()
            .usage_nano_cores
            .unwrap()
    };
    assert!(
        cpu("spin") > 100_000_000,
        "busy loop at {} nanocores",
        cpu("spin")
    );
    assert!(
        cpu("idle") < 50_000_000,
        "idle container at {} nanocores",
        cpu("idle")
    );
    for container in &s.containers {
        let ws = container
            .memory
            .as_ref()
            .unwrap()
            .working_set_bytes
            .unwrap();
        assert!(ws > 0, "{}: working set {ws}", container.name);
    }

    // Static UID, mirror UID and namespace/name: the same pod, both UIDs.
    let refs = [
        by_uid(&id.static_uid),
        by_uid(&id.mirror_uid),
        Some(pb::PodRef {
            r#ref: Some(pb::pod_ref::Ref::Name(pb::NamespacedName {
                namespace: "default".into(),
                name: full.clone(),
            })),
        }),
    ];
    for r in refs {
        let got = c
            .get_pod_stats(pb::GetPodStatsRequest { pod: r.clone() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.pod.as_ref(), Some(&id), "{r:?}");
        let cs = c
            .get_container_stats(pb::GetContainerStatsRequest {
                pod: r.clone(),
                container: "spin".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(cs.pod.as_ref(), Some(&id));
        assert_eq!(cs.container.unwrap().name, "spin");
    }
    let e = c
        .get_container_stats(pb::GetContainerStatsRequest {
            pod: by_uid(&id.mirror_uid),
            container: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);

    // The watch stream sends each new sample.
    let mut watch = c
        .watch_pod_stats(pb::WatchPodStatsRequest {
            pod: by_uid(&id.mirror_uid),
        })
        .await
        .unwrap()
        .into_inner();
    let a = watch.message().await.unwrap().unwrap();
    let b = watch.message().await.unwrap().unwrap();
    assert!(b.sample_time_unix_nano > a.sample_time_unix_nano);
    assert_eq!(b.pods.len(), 1);
    assert_eq!(b.pods[0].pod.as_ref().unwrap().mirror_uid, id.mirror_uid);

    // /stats/summary within the kubelet Summary test's bounds.
    let (code, body) = http_get(port, "/stats/summary");
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let node = &v["node"];
    assert_eq!(node["nodeName"], claim.name.as_str());
    let mem_limit = u(node, "memory.availableBytes") + u(node, "memory.workingSetBytes");
    within(node, "cpu.usageNanoCores", 100_000, 2_000_000_000 * 2);
    within(
        node,
        "cpu.usageCoreNanoSeconds",
        1_000_000_000,
        1_000_000_000_000_000,
    );
    within(node, "memory.availableBytes", 100 * MB, mem_limit);
    within(node, "memory.usageBytes", 10 * MB, mem_limit);
    within(node, "memory.workingSetBytes", 10 * MB, mem_limit);
    within(node, "memory.rssBytes", KB, mem_limit);
    within(node, "memory.pageFaults", 1000, 1_000_000_000_000);
    fs_bounds(node, "fs", (KB, 10_000_000 * MB));
    fs_bounds(node, "runtime.imageFs", (KB, 10_000_000 * MB));
    let pod = v["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["uid"] == id.static_uid.as_str())
        .unwrap_or_else(|| panic!("no pod {} in {v:#}", id.static_uid));
    assert_eq!(pod["podRef"]["name"], full.as_str());
    assert_eq!(pod["podRef"]["namespace"], "default");
    for c in pod["containers"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        if name == "spin" {
            within(c, "cpu.usageNanoCores", 100_000_000, 2_000_000_000);
        } else {
            within(c, "cpu.usageNanoCores", 0, 1_000_000_000);
        }
        within(c, "cpu.usageCoreNanoSeconds", 0, 100_000_000_000);
        within(c, "memory.availableBytes", KB, 80 * MB);
        within(c, "memory.usageBytes", 10 * KB, 80 * MB);
        within(c, "memory.workingSetBytes", 10 * KB, 80 * MB);
        within(c, "memory.rssBytes", KB, 80 * MB);
        if runtime_kind() == RuntimeKind::Crio {
            // CRI-O 1.32 on cgroup v1 reports page faults as 0; crilet
            // passes the runtime's figure through.
            within(c, "memory.pageFaults", 0, 0);
        } else {
            within(c, "memory.pageFaults", 100, 1_000_000_000);
        }
        // containerd counts the writable snapshot's blocks, CRI-O only the
        // bytes a container wrote there (a dozen for these).
        let rootfs_min = if runtime_kind() == RuntimeKind::Crio {
            0
        } else {
            KB
        };
        fs_bounds(c, "rootfs", (rootfs_min, 10 * MB));
        if name == "idle" {
            fs_bounds(c, "logs", (KB, 10 * MB));
        }
    }
    // The pod's own CPU and memory, never null: the sandbox's where the
    // runtime reports them (containerd), else the sum of its containers'
    // (CRI-O's PodSandboxStats have neither), as the kubelet falls back.
    within(pod, "cpu.usageNanoCores", 100_000_000, 2_000_000_000 * 2);
    within(
        pod,
        "cpu.usageCoreNanoSeconds",
        1_000_000,
        1_000_000_000_000,
    );
    within(pod, "memory.workingSetBytes", 20 * KB, 200 * MB);
    let (_, body) = http_get(port, "/stats/summary?only_cpu_and_memory=true");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["node"].get("fs").is_none() && v["pods"][0]["containers"][0].get("rootfs").is_none());

    // Metrics, /pods, /healthz.
    let (_, metrics) = http_get(port, "/metrics");
    for line in [
        "kubelet_running_pods 1",
        "kubelet_mirror_pods 1",
        "kubelet_running_containers{container_state=\"running\"} 2",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line:?} in\n{metrics}"
        );
    }
    assert!(
        metrics.contains("kubelet_runtime_operations_total{operation_type=\"run_podsandbox\"}")
    );
    // The serving process's own figures, as every component exports them.
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
    };
    let rss = value("process_resident_memory_bytes");
    assert!((1e6..4e9).contains(&rss), "RSS {rss}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!(
        started <= now + 1.0 && started > now - 86_400.0,
        "started {started}, now {now}"
    );
    assert!(value("process_cpu_seconds_total") > 0.0);
    assert!(value("process_open_fds") >= 3.0);
    let (_, pods) = http_get(port, "/pods");
    let pods: Value = serde_json::from_str(&pods).unwrap();
    assert_eq!(pods["kind"], "PodList");
    assert_eq!(pods["items"][0]["metadata"]["uid"], id.static_uid.as_str());
    assert_eq!(pods["items"][0]["status"]["phase"], "Running");
    assert_eq!(http_get(port, "/healthz"), (200, "ok".to_string()));
    assert_eq!(http_get(port, "/nope").0, 404);

    // The CLI, by mirror UID.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crilet"))
        .args(["stats", &id.mirror_uid, "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("default/{full}")) && l.contains(" spin ")),
        "{text}"
    );

    // Images and the GC plan through the same socket.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_crilet"))
            .args(args)
            .arg("--socket")
            .arg(&socket)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let images: Value = serde_json::from_str(&cli(&["images", "-o", "json"])).unwrap();
    let find = |tag: &str| {
        images
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["repoTags"].as_array().unwrap().iter().any(|t| t == tag))
            .unwrap_or_else(|| panic!("no {tag} in {images:#}"))
            .clone()
    };
    assert_eq!(find("docker.io/library/busybox:latest")["inUse"], true);
    // containerd 2 and CRI-O pin their sandbox image themselves (the
    // runtime's flag wins); containerd 1.6 does not, so crilet protects it.
    let pinned_by = match runtime_kind().pins_sandbox_image() {
        true => "runtime",
        false => "sandbox",
    };
    assert_eq!(find("registry.k8s.io/pause:3.6")["pinned"], pinned_by);
    let table = cli(&["images"]);
    assert!(
        table.contains("docker.io/library/busybox:latest"),
        "{table}"
    );
    let plan: Value = serde_json::from_str(&cli(&["gc", "--dry-run", "-o", "json"])).unwrap();
    assert_eq!(plan["highThresholdPercent"], 90);
    assert_eq!(plan["lowThresholdPercent"], 80);
    assert!(plan["capacityBytes"].as_u64().unwrap() > 0, "{plan:#}");
    let text = cli(&["gc", "--dry-run"]);
    assert!(!text.trim().is_empty());
    assert!(
        metrics.contains("kubelet_image_garbage_collected_total"),
        "{metrics}"
    );

    agent.remove("stats.yaml");
    wait_for(
        &rt,
        &agent,
        "stats",
        Duration::from_secs(30),
        "removal",
        |v| v.sandboxes.is_empty(),
    )
    .await;
}
