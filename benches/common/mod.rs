//! Shared by the benchmarks: a one-container host-network pod as the
//! kubelet would send it, and small statistics helpers.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crilet::cri::*;
use crilet::kuberuntime::labels::{ContainerLabels, PodSandboxLabels};

/// The i-th benchmark pod (names unique per process).
pub fn pod(i: usize, log_dir: &Path) -> (PodSandboxConfig, ContainerConfig) {
    let name = format!("bench-{}-{i}", std::process::id());
    let uid = format!("{:08x}-0000-4000-8000-{:012x}", std::process::id(), i);
    let labels = PodSandboxLabels {
        pod_name: name.clone(),
        pod_namespace: "crilet-bench".into(),
        pod_uid: uid.clone(),
        pod_labels: Default::default(),
        pod_annotations: Default::default(),
    };
    let sandbox = PodSandboxConfig {
        metadata: PodSandboxMetadata {
            name: name.clone(),
            uid: uid.clone(),
            namespace: "crilet-bench".into(),
            attempt: 0,
        },
        log_directory: log_dir.join(&uid).to_string_lossy().into_owned(),
        labels: labels.to_labels(),
        annotations: labels.to_annotations(),
        cgroup_parent: format!("/crilet-bench/pod{uid}"),
        security: SandboxSecurity {
            namespace_options: NamespaceOptions::for_pod(true, false, false),
            ..Default::default()
        },
        ..Default::default()
    };
    let clabels = ContainerLabels {
        pod_name: name,
        pod_namespace: "crilet-bench".into(),
        pod_uid: uid,
        container_name: "main".into(),
        hash: 1,
        restart_count: 0,
        termination_message_path: "/dev/termination-log".into(),
        termination_message_policy: "File".into(),
        termination_grace_period: Some(30),
        deletion_grace_period: None,
    };
    let container = ContainerConfig {
        metadata: ContainerMetadata {
            name: "main".into(),
            attempt: 0,
        },
        image: "docker.io/library/busybox:latest".into(),
        command: vec!["sleep".into(), "3600".into()],
        labels: clabels.to_labels(),
        annotations: clabels.to_annotations(),
        log_path: "main/0.log".into(),
        security: Some(ContainerSecurity {
            namespace_options: sandbox.security.namespace_options.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    (sandbox, container)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// (min, median, max) of a sample, in milliseconds.
pub fn summary(v: &[Duration]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort();
    (ms(v[0]), ms(v[v.len() / 2]), ms(v[v.len() - 1]))
}

/// Starts a pod the raw way: RunPodSandbox, CreateContainer, StartContainer.
pub async fn raw_start(
    rt: &dyn Runtime,
    sandbox: &PodSandboxConfig,
    container: &ContainerConfig,
) -> String {
    let sb = rt.run_pod_sandbox(sandbox).await.expect("RunPodSandbox");
    // As the kubelet: the container's log directory first (CRI-O needs it).
    if let Some(dir) = Path::new(&container.log_path).parent() {
        std::fs::create_dir_all(Path::new(&sandbox.log_directory).join(dir))
            .expect("container log directory");
    }
    let ctr = rt
        .create_container(&sb, container, sandbox)
        .await
        .expect("CreateContainer");
    rt.start_container(&ctr).await.expect("StartContainer");
    sb
}

/// Stops and removes a sandbox and its cgroup.
pub async fn raw_remove(rt: &dyn Runtime, sandbox_id: &str, cgroup_parent: &str) {
    // Containers first, as the kubelet: CRI-O's StopPodSandbox waits 2 min
    // for a PID 1 that ignores SIGTERM.
    let of_pod = ContainerFilter {
        pod_sandbox_id: Some(sandbox_id.to_string()),
        ..Default::default()
    };
    for c in rt.list_containers(&of_pod).await.unwrap_or_default() {
        let _ = rt.stop_container(&c.id, Duration::ZERO).await;
    }
    rt.stop_pod_sandbox(sandbox_id)
        .await
        .expect("StopPodSandbox");
    rt.remove_pod_sandbox(sandbox_id)
        .await
        .expect("RemovePodSandbox");
    let _ = crilet::cm::cgroup::remove_pod_cgroup(
        Path::new(crilet::cm::cgroup::CGROUP_ROOT),
        cgroup_parent,
    );
}

/// An environment variable parsed, or `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The release binary in the target directory cargo used (CARGO_TARGET_DIR,
/// as scripts/lib.sh exports it, else the checkout's `target`).
pub fn release_binary() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target")))
        .join("release/crilet")
}

/// What a bench that runs the agent needs from `scripts/bench.sh`: the
/// runtime endpoint and the release binary. Exits with a hint when run
/// without them.
pub fn endpoint_and_binary(bench: &str) -> (String, PathBuf) {
    let Ok(endpoint) = std::env::var("CRILET_BENCH_ENDPOINT") else {
        eprintln!("{bench}: CRILET_BENCH_ENDPOINT is not set; run `bash scripts/bench.sh`");
        std::process::exit(2);
    };
    let bin = std::env::var_os("CRILET_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(release_binary);
    assert!(
        bin.exists(),
        "{} missing: build it with cargo build --release",
        bin.display()
    );
    (endpoint, bin)
}
