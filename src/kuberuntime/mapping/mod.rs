//! From a Pod to the CRI requests that run it: the sandbox config for
//! RunPodSandbox and one container config per CreateContainer, computed as
//! the kubelet computes them, so that `crictl pods`/`crictl ps` look alike.
//!
//! Invariant: pure. No I/O and no clock; node facts arrive in
//! [`NodeContext`]. The same pod and context always map to the same
//! configs. A changed manifest is a new static pod (its UID hashes the whole
//! pod); within one pod the container hash is the kubelet's
//! ([`container_hash`]: name and image), so each agent knows the other's
//! containers.
//!
//! What the kubelet makes on the host before a container starts is named
//! here deterministically and made by the worker: the emptyDir directories
//! ([`empty_dir_path`], with their set-up marks under
//! [`empty_dir_plugin_dir`], before the sandbox), the pod's managed hosts
//! file ([`etc_hosts_file`], written before CreateContainer and handed to
//! [`container_config`], which mounts it at `/etc/hosts` after the volume
//! mounts) and the termination-message file of each container instance
//! ([`termination_message_file`], before CreateContainer, mounted
//! read-write at `terminationMessagePath`). That file is named by the
//! attempt where the kubelet draws random hex, so the mapping stays pure;
//! the spec hash does not cover it.
//!
//! The Services a container's environment names come from the caller too:
//! [`service_env`] picks a pod's among those the node knows of and makes
//! their variables, [`container_config`] appends them to the container's
//! own env.
//!
//! Kubelet behaviour deliberately left out (a pure mapping cannot do it, or
//! crilet has no use for it):
//! - RuntimeClass: `runtime_handler` stays empty here; the worker sets it
//!   from the API server's RuntimeClass (`kubeapi::runtime_class`);
//! - a cluster DNS: crilet has none, so ClusterFirst and
//!   ClusterFirstWithHostNet fall back to the node's resolver, as the
//!   kubelet does when started without `--cluster-dns`;
//! - hostPath `type` checks (the worker runs them before the sandbox, see
//!   `volume::hostpath`), and creating subPath directories. emptyDir
//!   `medium: Memory` and `sizeLimit` are not honoured (a plain directory).

mod annotations;
mod container;
mod container_hash;
mod downward;
mod env;
mod pod_resources;
mod ports;
pub use crate::units::quantity;
mod resources;
mod sandbox;
mod security;
mod service_env;

pub use crate::logs::layout::container_log_path;
use crate::logs::layout::{LogDirs, pod_log_dir_under};
pub(crate) use crate::units::expansion::expand;
pub use env::{SubPathBind, volume_subpaths_dir};
use env::{environment, mounts_and_binds};
use resources::{amounts, resources};
use sandbox::{namespace_options, supplemental_groups};
use security::{
    SECCOMP_PROFILE, container_security, is_privileged, seccomp_spec, security_profile,
};

pub use container::{ContainerStart, ImageUser, container_config, subpath_binds};
pub use container_hash::{container_hash, legacy_container_hash};
pub use pod_resources::admission_requests;
pub use resources::hugepage_unit_size;
pub use sandbox::{host_name_and_domain, sandbox_config, wants_cluster_dns};
pub use service_env::service_env;

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use k8s_openapi::api::core::v1::{
    AppArmorProfile, Container, EnvVarSource, Pod, PodSpec, SeccompProfile,
};

use super::labels::{
    ContainerLabels, DEFAULT_TERMINATION_MESSAGE_PATH, PodSandboxLabels,
    TERMINATION_MESSAGE_POLICY_FILE,
};
use crate::cri::types::{
    CgroupDriver, ContainerConfig, ContainerMetadata, ContainerSecurity, DnsConfig,
    LinuxContainerResources, Mount, MountPropagation, NamespaceMode, NamespaceOptions,
    PodSandboxConfig, PodSandboxMetadata, PortMapping, Protocol, SandboxSecurity, SecurityProfile,
};
use crate::pod::{full_name, name, namespace, uid};

/// What the mapping needs to know about the node (gathered by the caller).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeContext {
    pub node_name: String,
    /// `--root-dir`: emptyDirs go to
    /// `<root_dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>`,
    /// Localhost seccomp profiles are looked up under `<root_dir>/seccomp`.
    pub root_dir: PathBuf,
    /// `--pod-logs-dir` (logs go to `<pod_logs_dir>/<ns>_<name>_<uid>/`)
    /// and `--container-logs-dir` (their symlinks).
    pub log_dirs: LogDirs,
    /// `--cgroup-root`, e.g. "/" or "/crilet-test".
    pub cgroup_root: String,
    /// `--cgroup-driver`: how [`pod_cgroup_parent`] names the pod cgroup.
    pub cgroup_driver: CgroupDriver,
    /// The node's resolver (from /etc/resolv.conf), for host-network pods,
    /// dnsPolicy Default and the ClusterFirst fallback.
    pub host_dns: DnsConfig,
    pub host_ip: String,
    /// Node memory capacity in bytes, for the burstable oom_score_adj.
    pub memory_capacity: u64,
    /// `--restrict-oom-score-adj`: no container gets an oom_score_adj
    /// below this (crilet's own score).
    pub oom_score_adj_floor: Option<i64>,
    /// The node's hugepage sizes as the hugetlb cgroup names them ("2MB",
    /// "1GB"), in the order the kernel lists `/sys/kernel/mm/hugepages`:
    /// every container gets a limit for each, 0 unless it asks for pages.
    /// Empty when the node has no hugetlb controller: the kubelet sends the
    /// limits anyway, and CRI-O's runc then fails every container ("cannot
    /// set hugetlb limit"); containerd drops them.
    pub hugepage_sizes: Vec<String>,
    /// What the node's cgroups can do, for the swap limit and cgroup v2
    /// settings the kubelet sends.
    pub cgroups: NodeCgroups,
    /// The Node's allocatable, which a `resourceFieldRef` reads when the
    /// container sets no limit.
    pub allocatable: NodeAllocatable,
    /// The runtime's default handler makes recursive read-only mounts (its
    /// status says so), as `recursiveReadOnly` needs.
    pub recursive_read_only_mounts: bool,
}

/// The node's cgroup facts the kubelet reads once at start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCgroups {
    /// cgroup v2 (the unified hierarchy) rather than v1.
    pub v2: bool,
    /// A swap limit can be set: v1 `memory.memsw.limit_in_bytes`, or v2
    /// `memory.swap.max` in crilet's own cgroup.
    pub swap_controller: bool,
}

/// The Node's allocatable cpu, memory, ephemeral storage and pods, as
/// `status.allocatable` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeAllocatable {
    pub cpu_millicores: i64,
    pub memory_bytes: i64,
    /// `None` when the Node reports no ephemeral-storage.
    pub ephemeral_storage_bytes: Option<i64>,
    /// How many pods the node admits (`--max-pods`, `--pods-per-core`).
    pub pods: i64,
}

/// Why a pod cannot be mapped; each names the pod full name and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// Valid Kubernetes, but not something a static pod on crilet can use.
    #[error("pod {pod}: {field}: not supported for static pods: {detail}")]
    Unsupported {
        pod: String,
        field: String,
        detail: String,
    },
    #[error("pod {pod}: {field}: invalid value {value:?}: {reason}")]
    Invalid {
        pod: String,
        field: String,
        value: String,
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;
const CPU_PERIOD_US: i64 = 100_000;
const MIN_CPU_QUOTA_US: i64 = 1_000;
const MIN_CPU_SHARES: i64 = 2;
const MAX_CPU_SHARES: i64 = 262_144;
const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;

/// The kubelet's QoS rules over cpu and memory of every container, init
/// containers included. A missing request counts as its limit (the API
/// defaulting static pods get). Unparsable quantities count as absent:
/// [`sandbox_config`] refuses them before anything is created.
pub fn qos_class(pod: &Pod) -> QosClass {
    let (mut requests, mut limits) = (BTreeMap::new(), BTreeMap::new());
    let mut guaranteed = true;
    for c in all_containers(pod) {
        let a = amounts(pod, c).unwrap_or_default();
        for (res, request, limit) in [
            ("cpu", a.cpu_request, a.cpu_limit),
            ("memory", a.memory_request, a.memory_limit),
        ] {
            if let Some(v) = request.filter(|v| *v > 0) {
                *requests.entry(res).or_insert(0i128) += i128::from(v);
            }
            match limit.filter(|v| *v > 0) {
                Some(v) => *limits.entry(res).or_insert(0i128) += i128::from(v),
                None => guaranteed = false,
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        QosClass::BestEffort
    } else if guaranteed && requests == limits {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// The pod's cgroup, as the kubelet names it for its cgroup driver, in
/// cgroupfs form (the path under the cgroup mount): with cgroupfs
/// `<root>/kubepods[/burstable|/besteffort]/pod<uid>`; with systemd the same
/// components as nested slices, e.g.
/// `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice`.
pub fn pod_cgroup_parent(ctx: &NodeContext, pod: &Pod) -> String {
    cgroup_path(ctx, qos_class(pod), uid(pod))
}

/// Every cgroup directory a pod of this UID may have used (one per QoS
/// class), for cleaning up after a pod whose spec is gone or has changed.
pub fn cgroup_parent_candidates(ctx: &NodeContext, pod_uid: &str) -> Vec<String> {
    [
        QosClass::Guaranteed,
        QosClass::Burstable,
        QosClass::BestEffort,
    ]
    .map(|qos| cgroup_path(ctx, qos, pod_uid))
    .into()
}

/// The kubelet's cgroup name (the root's components, `kubepods`, the QoS
/// class unless Guaranteed, `pod<uid>`) in the driver's cgroupfs form.
fn cgroup_path(ctx: &NodeContext, qos: QosClass, pod_uid: &str) -> String {
    let pod = format!("pod{pod_uid}");
    let mut name: Vec<&str> = ctx
        .cgroup_root
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    name.push("kubepods");
    match qos {
        QosClass::Guaranteed => {}
        QosClass::Burstable => name.push("burstable"),
        QosClass::BestEffort => name.push("besteffort"),
    }
    name.push(&pod);
    match ctx.cgroup_driver {
        CgroupDriver::Cgroupfs => name.iter().flat_map(|s| ["/", s]).collect(),
        CgroupDriver::Systemd => systemd_slices(&name),
    }
}

/// The kubelet's `CgroupName.ToSystemd`: each component becomes a slice
/// nested in the one before, named by the components so far joined with
/// `-` (systemd's hierarchy separator), so a `-` inside a component (a UID)
/// is escaped as `_`, as the kubelet does.
fn systemd_slices(name: &[&str]) -> String {
    let (mut path, mut unit) = (String::new(), String::new());
    for component in name {
        if !unit.is_empty() {
            unit.push('-');
        }
        unit.push_str(&component.replace('-', "_"));
        path.push('/');
        path.push_str(&unit);
        path.push_str(".slice");
    }
    path
}

/// `<pod logs dir>/<namespace>_<name>_<uid>` (see [`pod_log_dir_under`]).
pub fn pod_log_dir(ctx: &NodeContext, pod: &Pod) -> PathBuf {
    pod_log_dir_under(&ctx.log_dirs.pod_logs_dir, pod)
}

/// The kubelet's name for the emptyDir plugin, escaped for a path.
const EMPTY_DIR_PLUGIN: &str = "kubernetes.io~empty-dir";

/// `<root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>`.
pub fn empty_dir_path(ctx: &NodeContext, pod: &Pod, volume: &str) -> PathBuf {
    let volumes = ctx.root_dir.join("pods").join(uid(pod)).join("volumes");
    volumes.join(EMPTY_DIR_PLUGIN).join(volume)
}

/// `<root>/pods/<uid>/plugins/kubernetes.io~empty-dir/<volume>`: where the
/// kubelet marks an emptyDir set up (its `ready` file).
pub fn empty_dir_plugin_dir(ctx: &NodeContext, pod: &Pod, volume: &str) -> PathBuf {
    let plugins = ctx.root_dir.join("pods").join(uid(pod)).join("plugins");
    plugins.join(EMPTY_DIR_PLUGIN).join(volume)
}

/// `<root>/pods/<uid>/etc-hosts`: the pod's managed hosts file.
pub fn etc_hosts_file(ctx: &NodeContext, pod_uid: &str) -> PathBuf {
    ctx.root_dir.join("pods").join(pod_uid).join("etc-hosts")
}

/// Where the container writes its termination message: its
/// `terminationMessagePath`, the default when unset (what the API
/// defaulting would give it), none when set to "" (then nothing is mounted).
pub fn termination_message_path(container: &Container) -> Option<&str> {
    match container.termination_message_path.as_deref() {
        Some("") => None,
        Some(path) => Some(path),
        None => Some(DEFAULT_TERMINATION_MESSAGE_PATH),
    }
}

/// The host file behind one container instance's termination message:
/// `<root>/pods/<uid>/containers/<container>/<attempt>`. The kubelet names
/// it with 8 random hex digits; the attempt keeps the mapping pure and is
/// still new for every instance (CRI reserves a name per attempt), and it
/// can be recomputed from a runtime container's metadata alone.
pub fn termination_message_file(
    ctx: &NodeContext,
    pod_uid: &str,
    container: &str,
    attempt: u32,
) -> PathBuf {
    let dir = ctx.root_dir.join("pods").join(pod_uid).join("containers");
    dir.join(container).join(attempt.to_string())
}

pub fn termination_grace_period(pod: &Pod) -> i64 {
    spec(pod)
        .termination_grace_period_seconds
        .unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS)
}

/// The pod IP crilet reports in `status.podIP`, and what `status.podIP`
/// reads in the environment: the sandbox's IP, or for a host-network pod
/// (whose sandbox has none) the node's IP. The kubelet gives such a pod
/// the node's IPs in status only when it has an API server, and its env
/// reads the runtime's IP on a container's first start; crilet keeps the
/// two equal.
pub fn reported_pod_ip<'a>(pod: &Pod, sandbox_ip: &'a str, host_ip: &'a str) -> &'a str {
    match sandbox_ip {
        "" if spec(pod).host_network == Some(true) => host_ip,
        ip => ip,
    }
}

fn spec(pod: &Pod) -> &PodSpec {
    static EMPTY: LazyLock<PodSpec> = LazyLock::new(PodSpec::default);
    pod.spec.as_ref().unwrap_or(&EMPTY)
}

/// Every spec container, init containers first.
pub(crate) fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = spec(pod);
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
}

/// `spec.containers{name}` (or `spec.initContainers{name}`), as kubelet events name it.
fn container_field(pod: &Pod, container: &str) -> String {
    let init = (spec(pod).init_containers.iter().flatten()).any(|c| c.name == container);
    let list = if init { "initContainers" } else { "containers" };
    format!("spec.{list}{{{container}}}")
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

fn unsupported(pod: &Pod, field: impl Into<String>, detail: impl Into<String>) -> MappingError {
    MappingError::Unsupported {
        pod: full_name(pod),
        field: field.into(),
        detail: detail.into(),
    }
}

fn invalid(pod: &Pod, field: impl Into<String>, value: &str, reason: &str) -> MappingError {
    MappingError::Invalid {
        pod: full_name(pod),
        field: field.into(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
#[path = "mapping_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "parity_tests.rs"]
mod parity_tests;

#[cfg(test)]
#[path = "downward_tests.rs"]
mod downward_tests;

#[cfg(test)]
#[path = "annotations_tests.rs"]
mod annotations_tests;
