//! The plan of a hollow fleet: node names, each node's directories and
//! flags, its generated static pods, and the made-up machine it reports.
//!
//! Invariant: pure. The same index always gives the same node, the same
//! manifests and the same flags; nothing here reads the host.

use std::path::{Path, PathBuf};

use crate::agent::config::RunArgs;
use crate::nodestatus::allocatable::NodeResources;
use crate::nodestatus::eviction::{Observation, Observed};

/// The made-up machine of every hollow node: 4 cores, 16 GiB, a 100 GiB
/// disk, as kubemark's hollow nodes report a fixed machine too.
pub const CORES: u32 = 4;
pub const MEMORY_BYTES: i64 = 16 << 30;
pub const DISK_BYTES: i64 = 100 << 30;
pub const PID_MAX: i64 = 4_194_304;

/// Node `index` of the fleet: `<prefix>-<index>`.
pub fn node_name(prefix: &str, index: usize) -> String {
    format!("{prefix}-{index}")
}

/// Where one hollow node keeps its files, under the fleet's state dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDirs {
    pub base: PathBuf,
}

impl NodeDirs {
    pub fn new(state_dir: &Path, node: &str) -> Self {
        NodeDirs {
            base: state_dir.join(node),
        }
    }
    pub fn manifests(&self) -> PathBuf {
        self.base.join("manifests")
    }
    pub fn root(&self) -> PathBuf {
        self.base.join("root")
    }
    pub fn kubeconfig(&self) -> PathBuf {
        self.base.join("kubeconfig")
    }
    /// A directory standing for the cgroup filesystem: it holds only
    /// `cgroup.controllers`, so the agent takes it for cgroup v2 and finds
    /// no pod cgroups in it.
    pub fn cgroup_fs(&self) -> PathBuf {
        self.base.join("cgroup")
    }
    pub fn pod_logs(&self) -> PathBuf {
        self.base.join("logs/pods")
    }
    pub fn container_logs(&self) -> PathBuf {
        self.base.join("logs/containers")
    }
}

/// A hollow node's flags, as an operator would give `crilet run`: its own
/// name, directories and kubeconfig, the fleet's bootstrap kubeconfig and
/// certificate rotation, no kubelet server, and `config` (a kubelet
/// configuration file shared by the fleet) when given.
pub fn node_args(
    dirs: &NodeDirs,
    node: &str,
    bootstrap_kubeconfig: &Path,
    config: Option<&Path>,
) -> RunArgs {
    RunArgs {
        config: config.map(Path::to_path_buf),
        hostname_override: Some(node.to_string()),
        node_ip: Some("127.0.0.1".into()),
        pod_manifest_path: Some(dirs.manifests()),
        root_dir: Some(dirs.root()),
        pod_logs_dir: Some(dirs.pod_logs().display().to_string()),
        container_logs_dir: Some(dirs.container_logs().display().to_string()),
        kubeconfig: Some(dirs.kubeconfig()),
        bootstrap_kubeconfig: Some(bootstrap_kubeconfig.to_path_buf()),
        rotate_certificates: Some(true),
        socket: Some(dirs.base.join("crilet.sock")),
        port: Some(0),
        container_runtime_endpoint: Some("fake://hollow".into()),
        ..RunArgs::default()
    }
}

/// The file name of static pod `pod` of a node.
pub fn manifest_file(pod: usize) -> String {
    format!("hollow-{pod}.yaml")
}

/// Static pod `pod` of `node`: one container of `image` with small
/// requests and an exec readiness probe every 10 s, as a node daemon.
pub fn manifest(node: &str, pod: usize, image: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: hollow-{pod}
  namespace: default
  labels:
    app: hollow
    hollow-node: {node}
spec:
  containers:
  - name: main
    image: {image}
    imagePullPolicy: IfNotPresent
    resources:
      requests:
        cpu: 10m
        memory: 16Mi
    readinessProbe:
      exec:
        command: [\"true\"]
      periodSeconds: 10
"
    )
}

/// The made-up machine's capacity, for `pods` pods.
pub fn machine_capacity(pods: i64) -> NodeResources {
    let mut capacity = NodeResources::from_machine(CORES, MEMORY_BYTES, pods);
    capacity.ephemeral_storage_bytes = Some(DISK_BYTES);
    capacity.pid = Some(PID_MAX);
    capacity
}

/// The made-up machine's readings: far from every eviction threshold.
pub fn observation() -> Observation {
    let half = |capacity: i64| {
        Some(Observed {
            available: capacity / 2,
            capacity,
        })
    };
    Observation {
        memory: half(MEMORY_BYTES),
        allocatable_memory: half(MEMORY_BYTES),
        nodefs: half(DISK_BYTES),
        nodefs_inodes: half(6_553_600),
        imagefs: half(DISK_BYTES),
        imagefs_inodes: half(6_553_600),
        pid: half(PID_MAX),
    }
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
mod tests;
