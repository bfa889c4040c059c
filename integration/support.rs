//! Shared fixtures: the harness endpoint, and pods built as the kubelet
//! builds them (labels, cgroup parent, log directory).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crilet::cri::*;
use crilet::kuberuntime::labels::{ContainerLabels, PodSandboxLabels};

/// Images the harness imports.
pub const BUSYBOX: &str = "docker.io/library/busybox:latest";
pub const PAUSE: &str = "registry.k8s.io/pause:3.6";
/// An image that only the harness's local registry holds.
pub const PULLTEST: &str = "127.0.0.1:5000/crilet/pulltest:1";
/// cgroupfs root under which the tests' pods live.
pub const CGROUP_ROOT_NAME: &str = "crilet-test";

/// The CRI tests' cgroup root: CRILET_TEST_CGROUP_ROOT, or
/// [`CGROUP_ROOT_NAME`], so that the runtime passes that run at once never
/// share one.
pub fn cgroup_root_name() -> String {
    std::env::var("CRILET_TEST_CGROUP_ROOT").unwrap_or_else(|_| CGROUP_ROOT_NAME.into())
}

pub fn endpoint() -> String {
    std::env::var("CRILET_TEST_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "CRILET_TEST_ENDPOINT is not set: this test needs the private containerd. \
             Run `bash scripts/test.sh`, or start it with `scripts/containerd-up.sh \
             /tmp/crilet-test --registry` and export \
             CRILET_TEST_ENDPOINT=unix:///tmp/crilet-test/containerd.sock"
        )
    })
}

/// The runtime the suite runs against (CRILET_TEST_RUNTIME, set by
/// scripts/test.sh). Tests use it only where the runtimes differ by
/// design; each difference is named here or at its assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    /// Debian's containerd 1.6.
    Containerd1,
    /// containerd 2.1.
    Containerd2,
    /// CRI-O 1.32.
    Crio,
}

impl RuntimeKind {
    /// `VersionResponse.runtime_name`.
    pub fn runtime_name(self) -> &'static str {
        match self {
            RuntimeKind::Containerd1 | RuntimeKind::Containerd2 => "containerd",
            RuntimeKind::Crio => "cri-o",
        }
    }

    /// The name CRILET_TEST_RUNTIME and scripts/runtime.sh use.
    pub fn test_name(self) -> &'static str {
        match self {
            RuntimeKind::Containerd1 => "containerd1",
            RuntimeKind::Containerd2 => "containerd2",
            RuntimeKind::Crio => "crio",
        }
    }

    /// Whether the runtime serves GetContainerEvents (containerd 1.6 does not).
    pub fn serves_events(self) -> bool {
        self != RuntimeKind::Containerd1
    }

    /// Whether the runtime answers RuntimeConfig (containerd 1.6 does not).
    pub fn reports_cgroup_driver(self) -> bool {
        self != RuntimeKind::Containerd1
    }

    /// Whether the runtime marks its sandbox image `pinned` (containerd 2's
    /// `pinned_images.sandbox`, CRI-O's `pause_image`); on containerd 1.6
    /// crilet protects it from the runtime's sandbox_image setting.
    pub fn pins_sandbox_image(self) -> bool {
        self != RuntimeKind::Containerd1
    }

    /// containerd lists image IDs as `sha256:<hex>`, CRI-O as `<hex>`.
    pub fn image_id(self, hex: &str) -> String {
        match self {
            RuntimeKind::Crio => hex.to_string(),
            _ => format!("sha256:{hex}"),
        }
    }
}

pub fn runtime_kind() -> RuntimeKind {
    match std::env::var("CRILET_TEST_RUNTIME").as_deref() {
        Ok("containerd1") => RuntimeKind::Containerd1,
        Ok("containerd2") => RuntimeKind::Containerd2,
        Ok("crio") => RuntimeKind::Crio,
        other => panic!(
            "CRILET_TEST_RUNTIME is {other:?}: set it to containerd1, containerd2 or crio \
             (scripts/test.sh does), naming the runtime behind CRILET_TEST_ENDPOINT"
        ),
    }
}

/// An image ID without its algorithm, for comparing IDs across runtimes.
pub fn bare_id(id: &str) -> &str {
    id.strip_prefix("sha256:").unwrap_or(id)
}

pub fn runtime() -> CriRuntime {
    CriRuntime::connect_lazy(
        &endpoint(),
        RuntimeOptions {
            request_timeout: Duration::from_secs(30),
            image_pull_timeout: Duration::from_secs(120),
        },
    )
    .expect("harness endpoint is valid")
}

/// A pod name unique to this test process and call, so tests run in parallel.
pub fn unique(prefix: &str) -> (String, String) {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    (
        format!("{prefix}-{pid}-{n}"),
        format!("{:08x}-0000-4000-8000-{:012x}", pid, n),
    )
}

/// A pod as the kubelet would hand it to the runtime.
pub struct PodFixture {
    pub labels: PodSandboxLabels,
    pub config: PodSandboxConfig,
    pub log_dir: tempfile::TempDir,
}

impl PodFixture {
    pub fn new(prefix: &str, host_network: bool) -> Self {
        let (name, uid) = unique(prefix);
        let labels = PodSandboxLabels {
            pod_name: name.clone(),
            pod_namespace: "crilet-test".into(),
            pod_uid: uid.clone(),
            pod_labels: BTreeMap::from([("app".to_string(), prefix.to_string())]),
            pod_annotations: BTreeMap::from([(
                "kubernetes.io/config.source".to_string(),
                "file".to_string(),
            )]),
        };
        let log_dir = tempfile::Builder::new()
            .prefix("crilet-test-logs-")
            .tempdir()
            .unwrap();
        let config = PodSandboxConfig {
            metadata: PodSandboxMetadata {
                name: name.clone(),
                uid: uid.clone(),
                namespace: "crilet-test".into(),
                attempt: 0,
            },
            hostname: if host_network {
                String::new()
            } else {
                name.clone()
            },
            log_directory: log_dir.path().to_string_lossy().into_owned(),
            labels: labels.to_labels(),
            annotations: labels.to_annotations(),
            cgroup_parent: format!("/{}/pod{uid}", cgroup_root_name()),
            security: SandboxSecurity {
                namespace_options: NamespaceOptions::for_pod(host_network, false, false),
                ..Default::default()
            },
            ..Default::default()
        };
        PodFixture {
            labels,
            config,
            log_dir,
        }
    }

    /// A busybox container of this pod running `script` with `sh -c`.
    pub fn container(&self, name: &str, script: &str) -> (ContainerLabels, ContainerConfig) {
        let labels = ContainerLabels {
            pod_name: self.labels.pod_name.clone(),
            pod_namespace: self.labels.pod_namespace.clone(),
            pod_uid: self.labels.pod_uid.clone(),
            container_name: name.into(),
            hash: 0x5eed_c0de,
            restart_count: 0,
            termination_message_path: "/dev/termination-log".into(),
            termination_message_policy: "File".into(),
            termination_grace_period: Some(1),
            deletion_grace_period: None,
        };
        // As the kubelet does: CRI-O's conmon does not make the directory.
        std::fs::create_dir_all(self.log_dir.path().join(name)).unwrap();
        let config = ContainerConfig {
            metadata: ContainerMetadata {
                name: name.into(),
                attempt: 0,
            },
            image: BUSYBOX.into(),
            command: vec!["sh".into(), "-c".into(), script.into()],
            labels: labels.to_labels(),
            annotations: labels.to_annotations(),
            log_path: format!("{name}/0.log"),
            envs: vec![("CRILET_TEST".into(), "1".into())],
            security: Some(ContainerSecurity {
                namespace_options: self.config.security.namespace_options.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        (labels, config)
    }

    pub fn log_file(&self, container: &str) -> PathBuf {
        self.log_dir.path().join(container).join("0.log")
    }

    pub fn cgroup_parent(&self) -> &str {
        &self.config.cgroup_parent
    }
}

/// Polls `f` every 100 ms until it returns Some, for at most `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// GET over plain HTTP/1.1 on 127.0.0.1: (status code, body).
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    try_http_get(port, path).unwrap_or_else(|e| panic!("GET {path} on port {port}: {e}"))
}

/// As [`http_get`], with the connection's error instead of a panic (a
/// server still starting refuses).
pub fn try_http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

/// A port free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `--port 0` unless `args` name a kubelet server port: the default port
/// (10250) would make every `crilet run` of the tests clash.
pub fn no_kubelet_port<S: AsRef<str>>(args: &[S]) -> &'static [&'static str] {
    let asks = args.iter().any(|a| {
        let a = a.as_ref();
        a == "--port" || a.starts_with("--port=")
    });
    if asks { &[] } else { &["--port", "0"] }
}

/// `--pod-logs-dir DIR/pod-logs --container-logs-dir DIR/containers`:
/// every `crilet run` of the tests keeps its container logs and their
/// symlinks under a directory of its own, never in the node's
/// /var/log/pods and /var/log/containers. An agent removes the log
/// directories of pods it does not know and the dead symlinks there, and
/// the three runtime passes run at once.
pub fn private_log_dirs(dir: &std::path::Path) -> Vec<String> {
    private_log_dirs_unless::<&str>(&[], dir)
}

/// [`private_log_dirs`], without the flags `args` already name.
pub fn private_log_dirs_unless<S: AsRef<str>>(args: &[S], dir: &std::path::Path) -> Vec<String> {
    let names = |flag: &str| {
        args.iter().any(|a| {
            let a = a.as_ref();
            a == flag || a.starts_with(&format!("{flag}="))
        })
    };
    let mut flags = Vec::new();
    for (flag, sub) in [
        ("--pod-logs-dir", "pod-logs"),
        ("--container-logs-dir", "containers"),
    ] {
        if !names(flag) {
            flags.extend([flag.to_owned(), dir.join(sub).display().to_string()]);
        }
    }
    flags
}

/// [`private_log_dirs`] under a directory of this test process, for a
/// `crilet run` that names none and no config file: such runs stop before
/// they write.
fn cli_log_dirs<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    if args.iter().any(|a| a.as_ref().starts_with("--config")) {
        return Vec::new();
    }
    let dir = std::env::temp_dir().join(format!("crilet-cli-run-{}", std::process::id()));
    private_log_dirs_unless(args, &dir)
}

/// Runs the crilet binary: (success, stdout, stderr). `crilet run` gets
/// `--port 0` unless it asks for a port, and log directories of its own
/// ([`private_log_dirs`]) unless it names some or a config file.
pub fn cli(args: &[&str]) -> (bool, String, String) {
    let (port, dirs): (&[&str], Vec<String>) = if args.first() == Some(&"run") {
        (no_kubelet_port(args), cli_log_dirs(args))
    } else {
        (&[], Vec::new())
    };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crilet"))
        .args(args)
        .args(port)
        .args(dirs)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
