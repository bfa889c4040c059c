//! Domain types of the container runtime, as the rest of crilet sees it.
//!
//! Invariant: no generated (prost) type appears here; the CRI adapter converts
//! at its boundary, so the core and its fakes never depend on the wire format.
//! Times are nanoseconds since the Unix epoch, as CRI reports them.

use std::collections::{BTreeMap, HashMap};

/// Labels and annotations, as CRI carries them.
pub type Labels = HashMap<String, String>;

/// The runtime's answer to Version.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VersionInfo {
    pub runtime_name: String,
    pub runtime_version: String,
    pub runtime_api_version: String,
}

/// One condition the runtime reports (RuntimeReady, NetworkReady, ...).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeCondition {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

pub const RUNTIME_READY: &str = "RuntimeReady";
pub const NETWORK_READY: &str = "NetworkReady";

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeStatus {
    pub conditions: Vec<RuntimeCondition>,
    /// The runtime handlers the runtime lists (empty on runtimes that list
    /// none, such as containerd 1.6); `""` is the default handler.
    pub handlers: Vec<RuntimeHandler>,
}

/// One runtime handler and what it supports.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeHandler {
    pub name: String,
    pub recursive_read_only_mounts: bool,
    pub user_namespaces: bool,
}

impl RuntimeStatus {
    /// The status of condition `kind`, `None` when the runtime did not report it.
    pub fn condition(&self, kind: &str) -> Option<bool> {
        self.conditions
            .iter()
            .find(|c| c.kind == kind)
            .map(|c| c.status)
    }
}

/// How pod cgroups are named and made: plain cgroupfs directories, or
/// systemd slices. The kubelet and the runtime must use the same one
/// (the kubelet's `--cgroup-driver`, CRI `RuntimeConfig`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupDriver {
    /// The kubelet's default.
    #[default]
    Cgroupfs,
    Systemd,
}

impl CgroupDriver {
    /// The name used by the flag, the config file and the runtimes' configs.
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupDriver::Cgroupfs => "cgroupfs",
            CgroupDriver::Systemd => "systemd",
        }
    }
}

impl std::fmt::Display for CgroupDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CgroupDriver {
    type Err = String;

    /// Exactly `cgroupfs` or `systemd`, as the kubelet accepts.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "cgroupfs" => Ok(CgroupDriver::Cgroupfs),
            "systemd" => Ok(CgroupDriver::Systemd),
            _ => Err(format!(
                "unknown cgroup driver {s:?}: expected cgroupfs or systemd"
            )),
        }
    }
}

/// How a pod or container shares a Linux namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub enum NamespaceMode {
    /// Shared by the containers of the pod (the CRI default).
    #[default]
    Pod,
    /// Private to each container.
    Container,
    /// The node's (host) namespace.
    Node,
    /// The namespace of another container (`target_id`).
    Target,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceOptions {
    pub network: NamespaceMode,
    pub pid: NamespaceMode,
    pub ipc: NamespaceMode,
    pub target_id: String,
}

impl NamespaceOptions {
    /// What the kubelet sends for a pod: private PID namespace per container
    /// (unless shareProcessNamespace), and the node's network when asked.
    pub fn for_pod(host_network: bool, host_pid: bool, host_ipc: bool) -> Self {
        let pick = |host, otherwise| if host { NamespaceMode::Node } else { otherwise };
        NamespaceOptions {
            network: pick(host_network, NamespaceMode::Pod),
            pid: pick(host_pid, NamespaceMode::Container),
            ipc: pick(host_ipc, NamespaceMode::Pod),
            target_id: String::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
    Sctp,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortMapping {
    pub protocol: Protocol,
    pub container_port: i32,
    pub host_port: i32,
    pub host_ip: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsConfig {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// A seccomp or AppArmor profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecurityProfile {
    RuntimeDefault,
    Unconfined,
    Localhost(String),
}

/// Identity of a sandbox; the runtime reserves its name per attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodSandboxMetadata {
    pub name: String,
    pub uid: String,
    pub namespace: String,
    pub attempt: u32,
}

/// Linux security settings shared by the whole sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSecurity {
    pub namespace_options: NamespaceOptions,
    pub privileged: bool,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub readonly_rootfs: bool,
    pub supplemental_groups: Vec<i64>,
    pub seccomp: Option<SecurityProfile>,
}

/// Everything RunPodSandbox needs. CreateContainer is sent the same value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSandboxConfig {
    pub metadata: PodSandboxMetadata,
    /// Must stay empty for host-network pods (runc refuses it otherwise).
    pub hostname: String,
    /// Directory for container logs; without it the runtime writes none.
    pub log_directory: String,
    pub dns_config: Option<DnsConfig>,
    pub port_mappings: Vec<PortMapping>,
    pub labels: Labels,
    pub annotations: Labels,
    /// The pod's cgroup in cgroupfs form, e.g. `/kubepods/pod<uid>`, or with
    /// the systemd driver `/kubepods.slice/kubepods-pod<uid>.slice`. Always set it:
    /// containerd 1.6 fails sandbox stats for every pod if one lacks it.
    pub cgroup_parent: String,
    pub security: SandboxSecurity,
    pub sysctls: HashMap<String, String>,
    pub runtime_handler: String,
    /// The pod's resources summed over its containers (`linux.resources`).
    pub resources: Option<LinuxContainerResources>,
    /// `spec.overhead` as resources (`linux.overhead`); empty without one.
    pub overhead: Option<LinuxContainerResources>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum PodSandboxState {
    Ready,
    NotReady,
}

/// An entry of ListPodSandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSandbox {
    pub id: String,
    pub metadata: PodSandboxMetadata,
    pub state: PodSandboxState,
    pub created_at: i64,
    pub labels: Labels,
    pub annotations: Labels,
    pub runtime_handler: String,
}

/// The answer of PodSandboxStatus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSandboxStatus {
    pub id: String,
    pub metadata: PodSandboxMetadata,
    pub state: PodSandboxState,
    pub created_at: i64,
    /// Primary pod IP; empty for host-network pods.
    pub ip: String,
    pub additional_ips: Vec<String>,
    pub namespace_options: NamespaceOptions,
    pub labels: Labels,
    pub annotations: Labels,
    pub runtime_handler: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSandboxFilter {
    pub id: Option<String>,
    pub state: Option<PodSandboxState>,
    pub label_selector: Labels,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ContainerMetadata {
    pub name: String,
    pub attempt: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MountPropagation {
    #[default]
    Private,
    HostToContainer,
    Bidirectional,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mount {
    pub container_path: String,
    pub host_path: String,
    pub readonly: bool,
    pub selinux_relabel: bool,
    pub propagation: MountPropagation,
    /// Read-only all the way down (submounts too); only with `readonly`,
    /// on a runtime handler that supports it.
    pub recursive_read_only: bool,
}

/// cgroup limits of a container (cgroupfs values, as the kubelet computes them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinuxContainerResources {
    pub cpu_period: i64,
    pub cpu_quota: i64,
    pub cpu_shares: i64,
    pub memory_limit_in_bytes: i64,
    pub oom_score_adj: i64,
    pub cpuset_cpus: String,
    pub cpuset_mems: String,
    /// One limit per hugepage size of the node, in the node's order.
    pub hugepage_limits: Vec<HugepageLimit>,
    /// cgroup v2 files written as they are (`memory.swap.max`, ...).
    pub unified: BTreeMap<String, String>,
    /// memory + swap (cgroup v1 `memory.memsw.limit_in_bytes`); 0 is unset.
    pub memory_swap_limit_in_bytes: i64,
}

/// The limit of one hugepage size: `page_size` as the kernel's hugetlb
/// cgroup names it ("2MB", "1GB"), `limit` in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HugepageLimit {
    pub page_size: String,
    pub limit: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSecurity {
    pub capabilities_add: Vec<String>,
    pub capabilities_drop: Vec<String>,
    pub privileged: bool,
    pub namespace_options: NamespaceOptions,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub run_as_username: String,
    pub readonly_rootfs: bool,
    pub supplemental_groups: Vec<i64>,
    pub no_new_privs: bool,
    pub masked_paths: Vec<String>,
    pub readonly_paths: Vec<String>,
    pub seccomp: Option<SecurityProfile>,
    pub apparmor: Option<SecurityProfile>,
}

/// Everything CreateContainer needs besides the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerConfig {
    pub metadata: ContainerMetadata,
    /// The image to run: the kubelet names it by its resolved reference
    /// (the image ID), so a moved tag does not change a container.
    pub image: String,
    /// The image as the pod spec names it (CRI `user_specified_image`);
    /// empty means `image`.
    pub user_specified_image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub envs: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    pub labels: Labels,
    pub annotations: Labels,
    /// Relative to the sandbox's log directory.
    pub log_path: String,
    pub stdin: bool,
    pub stdin_once: bool,
    pub tty: bool,
    pub resources: Option<LinuxContainerResources>,
    pub security: Option<ContainerSecurity>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    #[default]
    Unknown,
}

/// An entry of ListContainers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub id: String,
    pub pod_sandbox_id: String,
    pub metadata: ContainerMetadata,
    /// The image as the container was created with it.
    pub image: String,
    /// The resolved image (an image ID or digest).
    pub image_ref: String,
    pub state: ContainerState,
    pub created_at: i64,
    pub labels: Labels,
    pub annotations: Labels,
}

/// The answer of ContainerStatus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerStatus {
    pub id: String,
    pub metadata: ContainerMetadata,
    pub state: ContainerState,
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
    pub image: String,
    pub image_ref: String,
    pub reason: String,
    pub message: String,
    pub labels: Labels,
    pub annotations: Labels,
    pub mounts: Vec<Mount>,
    pub log_path: String,
    /// The limits the runtime applied, when it reports them.
    pub resources: Option<LinuxContainerResources>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerFilter {
    pub id: Option<String>,
    pub state: Option<ContainerState>,
    pub pod_sandbox_id: Option<String>,
    pub label_selector: Labels,
}

/// A streaming exec (CRI `ExecRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRequest {
    pub container_id: String,
    pub cmd: Vec<String>,
    pub tty: bool,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

/// A streaming attach (CRI `AttachRequest`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachRequest {
    pub container_id: String,
    pub stdin: bool,
    pub tty: bool,
    pub stdout: bool,
    pub stderr: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSyncResult {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CpuUsage {
    pub timestamp: i64,
    pub usage_core_nano_seconds: Option<u64>,
    pub usage_nano_cores: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemoryUsage {
    pub timestamp: i64,
    pub working_set_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    pub usage_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
}

/// Usage of one filesystem (an image filesystem or a writable layer).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FilesystemUsage {
    pub timestamp: i64,
    pub mountpoint: String,
    pub used_bytes: Option<u64>,
    pub inodes_used: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerStats {
    pub id: String,
    pub metadata: ContainerMetadata,
    pub labels: Labels,
    pub annotations: Labels,
    pub cpu: Option<CpuUsage>,
    pub memory: Option<MemoryUsage>,
    pub writable_layer: Option<FilesystemUsage>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerStatsFilter {
    pub id: Option<String>,
    pub pod_sandbox_id: Option<String>,
    pub label_selector: Labels,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceUsage {
    pub name: String,
    pub rx_bytes: Option<u64>,
    pub rx_errors: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub tx_errors: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkUsage {
    pub timestamp: i64,
    pub default_interface: Option<InterfaceUsage>,
    pub interfaces: Vec<InterfaceUsage>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSandboxStats {
    pub id: String,
    pub metadata: PodSandboxMetadata,
    pub labels: Labels,
    pub annotations: Labels,
    pub cpu: Option<CpuUsage>,
    pub memory: Option<MemoryUsage>,
    pub network: Option<NetworkUsage>,
    pub process_count: Option<u64>,
    pub containers: Vec<ContainerStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSandboxStatsFilter {
    pub id: Option<String>,
    pub label_selector: Labels,
}

/// An image the runtime holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Image {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size: u64,
    pub uid: Option<i64>,
    pub username: String,
    /// The runtime asks that this image never be garbage collected.
    pub pinned: bool,
}

/// Credentials for one pull.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthConfig {
    pub username: String,
    pub password: String,
    pub auth: String,
    pub server_address: String,
    pub identity_token: String,
    pub registry_token: String,
}

/// The answer of ImageFsInfo: what the runtime knows of its filesystems
/// (containerd reports usage and mountpoint, no capacity).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ImageFsInfo {
    pub image_filesystems: Vec<FilesystemUsage>,
    pub container_filesystems: Vec<FilesystemUsage>,
}

/// What a container event reports (CRI `ContainerEventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerEventType {
    Created,
    Started,
    Stopped,
    Deleted,
    /// A value this crilet does not know (a newer CRI).
    Unknown(i32),
}

/// One entry of the GetContainerEvents stream. Only a hint that something
/// changed: crilet re-reads the pod rather than trusting the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEvent {
    /// The container, or the sandbox itself for a sandbox event
    /// (containerd 2 and CRI-O report sandboxes too).
    pub container_id: String,
    pub event_type: ContainerEventType,
    pub created_at: i64,
    /// The container's sandbox, when the runtime sends its status.
    pub pod_sandbox_id: Option<String>,
    /// The pod UID from the sandbox metadata, when the runtime sends it.
    pub pod_uid: Option<String>,
}

impl ContainerEvent {
    /// True when the event is about the sandbox rather than a container.
    pub fn is_sandbox(&self) -> bool {
        self.pod_sandbox_id.as_deref() == Some(self.container_id.as_str())
    }
}
