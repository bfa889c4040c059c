//! From a Pod to the CRI requests that run it: the sandbox config for
//! RunPodSandbox and one container config per CreateContainer, computed as
//! the kubelet computes them, so that `crictl pods`/`crictl ps` look alike.
//!
//! Invariant: pure. No I/O and no clock; node facts arrive in
//! [`NodeContext`]. The same pod and context always map to the same
//! configs, which is what lets [`container_hash`] stand for "spec changed".
//!
//! Kubelet behaviour deliberately left out (a pure mapping cannot do it, or
//! crilet has no use for it):
//! - the `/etc/hosts` and termination-log bind mounts: the kubelet writes
//!   those files on the host first; here the image's `/etc/hosts` is used
//!   and `/dev/termination-log` stays inside the container;
//! - RuntimeClass: `runtime_handler` stays empty (the default handler);
//! - a cluster DNS: crilet has none, so ClusterFirst and
//!   ClusterFirstWithHostNet fall back to the node's resolver, as the
//!   kubelet does when started without `--cluster-dns`;
//! - service-link environment variables, and the image-user check behind
//!   `runAsNonRoot` (only an explicit `runAsUser: 0` is refused);
//! - hostPath `type` checks, and creating emptyDir or subPath directories:
//!   the worker creates [`empty_dir_path`] before CreateContainer. emptyDir
//!   `medium: Memory` and `sizeLimit` are not honoured (a plain directory).

mod env;
mod quantity;
mod resources;

use env::{environment, expand, mounts};
use resources::{amounts, container_security, resources};

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
    ContainerConfig, ContainerMetadata, ContainerSecurity, DnsConfig, LinuxContainerResources,
    Mount, MountPropagation, NamespaceMode, NamespaceOptions, PodSandboxConfig, PodSandboxMetadata,
    PortMapping, Protocol, SandboxSecurity, SecurityProfile,
};
use crate::pod::{full_name, name, namespace, uid};

/// What the mapping needs to know about the node (gathered by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContext {
    pub node_name: String,
    /// `--root-dir`: logs go to `<root_dir>/logs/<ns>_<name>_<uid>/`,
    /// emptyDirs to `<root_dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>`,
    /// Localhost seccomp profiles are looked up under `<root_dir>/seccomp`.
    pub root_dir: PathBuf,
    /// `--cgroup-root`, e.g. "/" or "/crilet-test".
    pub cgroup_root: String,
    /// The node's resolver (from /etc/resolv.conf), for host-network pods,
    /// dnsPolicy Default and the ClusterFirst fallback.
    pub host_dns: DnsConfig,
    pub host_ip: String,
    /// Node memory capacity in bytes, for the burstable oom_score_adj.
    pub memory_capacity: u64,
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
const MAX_HOSTNAME_LEN: usize = 63;
const MAX_DNS_SERVERS: usize = 3;
const MAX_DNS_SEARCHES: usize = 32;
const MAX_DNS_SEARCH_LEN: usize = 253;
const MAX_DNS_SEARCH_LINE: usize = 2048;
const CPU_PERIOD_US: i64 = 100_000;
const MIN_CPU_QUOTA_US: i64 = 1_000;
const MIN_CPU_SHARES: i64 = 2;
const MAX_CPU_SHARES: i64 = 262_144;
const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;
const SECCOMP_PROFILE: &str = "seccompProfile";
const APPARMOR_PROFILE: &str = "appArmorProfile";
/// The kubelet's masked and read-only /proc and /sys paths (moby's defaults).
const DEFAULT_MASKED_PATHS: [&str; 11] = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];
const DEFAULT_READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

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

/// The pod's cgroupfs directory: `<root>/kubepods[/burstable|/besteffort]/pod<uid>`.
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

fn cgroup_path(ctx: &NodeContext, qos: QosClass, pod_uid: &str) -> String {
    let root = ctx.cgroup_root.split('/').filter(|s| !s.is_empty());
    let mut path: String = root.flat_map(|s| ["/", s]).collect();
    path.push_str(match qos {
        QosClass::Guaranteed => "/kubepods/pod",
        QosClass::Burstable => "/kubepods/burstable/pod",
        QosClass::BestEffort => "/kubepods/besteffort/pod",
    });
    path.push_str(pod_uid);
    path
}

pub fn pod_log_dir(ctx: &NodeContext, pod: &Pod) -> PathBuf {
    let dir = format!("{}_{}_{}", namespace(pod), name(pod), uid(pod));
    ctx.root_dir.join("logs").join(dir)
}

/// `<container>/<restart>.log`, relative to [`pod_log_dir`].
pub fn container_log_path(container_name: &str, restart_count: u32) -> String {
    format!("{container_name}/{restart_count}.log")
}

pub fn empty_dir_path(ctx: &NodeContext, pod: &Pod, volume: &str) -> PathBuf {
    let volumes = ctx.root_dir.join("pods").join(uid(pod)).join("volumes");
    volumes.join("kubernetes.io~empty-dir").join(volume)
}

/// FNV-1a (64 bit) over the container's JSON: any spec change changes it,
/// and a changed hash is what makes the worker restart the container.
pub fn container_hash(container: &Container) -> u64 {
    let bytes = serde_json::to_vec(container).unwrap_or_default();
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

pub fn termination_grace_period(pod: &Pod) -> i64 {
    spec(pod)
        .termination_grace_period_seconds
        .unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS)
}

pub fn sandbox_config(
    ctx: &NodeContext,
    pod: &Pod,
    attempt: u32,
) -> Result<PodSandboxConfig, MappingError> {
    let spec = spec(pod);
    // Refuse bad quantities now: QoS (and so the cgroup path) depends on them.
    for c in all_containers(pod) {
        amounts(pod, c)?;
    }
    let psc = spec.security_context.clone().unwrap_or_default();
    let labels = PodSandboxLabels {
        pod_name: name(pod).to_owned(),
        pod_namespace: namespace(pod).to_owned(),
        pod_uid: uid(pod).to_owned(),
        pod_labels: pod.metadata.labels.clone().unwrap_or_default(),
        pod_annotations: pod.metadata.annotations.clone().unwrap_or_default(),
    };
    let seccomp = seccomp_spec(&psc.seccomp_profile);
    Ok(PodSandboxConfig {
        metadata: PodSandboxMetadata {
            name: name(pod).to_owned(),
            uid: uid(pod).to_owned(),
            namespace: namespace(pod).to_owned(),
            attempt,
        },
        // runc cannot set a hostname without its own UTS namespace.
        hostname: if spec.host_network == Some(true) {
            String::new()
        } else {
            pod_hostname(pod)
        },
        log_directory: pod_log_dir(ctx, pod).to_string_lossy().into_owned(),
        dns_config: Some(dns_config(ctx, pod)?),
        port_mappings: port_mappings(spec),
        labels: labels.to_labels(),
        annotations: labels.to_annotations(),
        cgroup_parent: pod_cgroup_parent(ctx, pod),
        security: SandboxSecurity {
            namespace_options: namespace_options(spec),
            privileged: all_containers(pod).any(is_privileged),
            run_as_user: psc.run_as_user,
            run_as_group: psc.run_as_group,
            readonly_rootfs: false,
            supplemental_groups: supplemental_groups(spec),
            seccomp: security_profile(ctx, pod, "", SECCOMP_PROFILE, None, seccomp)?,
        },
        sysctls: (psc.sysctls.into_iter().flatten())
            .map(|s| (s.name, s.value))
            .collect::<HashMap<_, _>>(),
        runtime_handler: String::new(),
    })
}

pub fn container_config(
    ctx: &NodeContext,
    pod: &Pod,
    container: &Container,
    restart_count: u32,
    attempt: u32,
    pod_ip: &str,
) -> Result<ContainerConfig, MappingError> {
    let field = container_field(pod, &container.name);
    let envs = environment(ctx, pod, container, pod_ip, &field)?;
    let expand_all = |list: &Option<Vec<String>>| -> Vec<String> {
        list.iter().flatten().map(|s| expand(s, &envs)).collect()
    };
    let security = container_security(ctx, pod, container, &field)?;
    let labels = ContainerLabels {
        pod_name: name(pod).to_owned(),
        pod_namespace: namespace(pod).to_owned(),
        pod_uid: uid(pod).to_owned(),
        container_name: container.name.clone(),
        hash: container_hash(container),
        restart_count,
        termination_message_path: non_empty(&container.termination_message_path)
            .unwrap_or(DEFAULT_TERMINATION_MESSAGE_PATH)
            .to_owned(),
        termination_message_policy: non_empty(&container.termination_message_policy)
            .unwrap_or(TERMINATION_MESSAGE_POLICY_FILE)
            .to_owned(),
        termination_grace_period: spec(pod).termination_grace_period_seconds,
        deletion_grace_period: pod.metadata.deletion_grace_period_seconds,
    };
    Ok(ContainerConfig {
        metadata: ContainerMetadata {
            name: container.name.clone(),
            attempt,
        },
        image: container.image.clone().unwrap_or_default(),
        command: expand_all(&container.command),
        args: expand_all(&container.args),
        working_dir: container.working_dir.clone().unwrap_or_default(),
        mounts: mounts(ctx, pod, container, &envs, security.privileged, &field)?,
        envs,
        labels: labels.to_labels(),
        annotations: labels.to_annotations(),
        log_path: container_log_path(&container.name, restart_count),
        stdin: container.stdin.unwrap_or(false),
        stdin_once: container.stdin_once.unwrap_or(false),
        tty: container.tty.unwrap_or(false),
        resources: Some(resources(ctx, pod, container)?),
        security: Some(security),
    })
}

fn spec(pod: &Pod) -> &PodSpec {
    static EMPTY: LazyLock<PodSpec> = LazyLock::new(PodSpec::default);
    pod.spec.as_ref().unwrap_or(&EMPTY)
}

fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
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

/// spec.hostname or the pod name; past 63 bytes it is cut and trailing
/// '-'/'.' dropped (the kubelet's rule, applied only when truncating).
fn pod_hostname(pod: &Pod) -> String {
    let host = non_empty(&spec(pod).hostname).unwrap_or(name(pod));
    if host.len() <= MAX_HOSTNAME_LEN {
        return host.to_owned();
    }
    let cut = (0..=MAX_HOSTNAME_LEN)
        .rev()
        .find(|i| host.is_char_boundary(*i));
    host[..cut.unwrap_or(0)]
        .trim_end_matches(['-', '.'])
        .to_owned()
}

/// dnsPolicy None starts empty; every other policy starts from the node's
/// resolver (see the module notes on ClusterFirst). spec.dnsConfig is then
/// appended without duplicates, its options overriding same-named ones in
/// place, and the kubelet's limits applied: 3 servers; 32 searches, none
/// over 253 chars, the search line at most 2048 chars (dropping from the end).
fn dns_config(ctx: &NodeContext, pod: &Pod) -> Result<DnsConfig, MappingError> {
    let spec = spec(pod);
    let mut dns = match spec.dns_policy.as_deref().unwrap_or("ClusterFirst") {
        "None" => DnsConfig::default(),
        "Default" | "ClusterFirst" | "ClusterFirstWithHostNet" => ctx.host_dns.clone(),
        other => {
            let reason = "expected ClusterFirst, ClusterFirstWithHostNet, Default or None";
            return Err(invalid(pod, "spec.dnsPolicy", other, reason));
        }
    };
    let extra = spec.dns_config.clone().unwrap_or_default();
    let mut servers = std::mem::take(&mut dns.servers);
    servers.extend(extra.nameservers.into_iter().flatten());
    let mut searches = std::mem::take(&mut dns.searches);
    searches.extend(extra.searches.into_iter().flatten());
    dns.servers = dedup(servers);
    dns.servers.truncate(MAX_DNS_SERVERS);
    dns.searches = dedup(searches);
    dns.searches.truncate(MAX_DNS_SEARCHES);
    dns.searches.retain(|s| s.len() <= MAX_DNS_SEARCH_LEN);
    while dns.searches.join(" ").len() > MAX_DNS_SEARCH_LINE {
        dns.searches.pop();
    }
    for opt in extra.options.into_iter().flatten() {
        let Some(key) = opt.name else { continue };
        let text = match opt.value {
            Some(v) if !v.is_empty() => format!("{key}:{v}"),
            _ => key.clone(),
        };
        let same = |o: &String| o.split(':').next() == Some(key.as_str());
        match dns.options.iter_mut().find(|o| same(o)) {
            Some(slot) => *slot = text,
            None => dns.options.push(text),
        }
    }
    Ok(dns)
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Every port of a (non-init) container that asks for a hostPort.
fn port_mappings(spec: &PodSpec) -> Vec<PortMapping> {
    let ports = spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten());
    ports
        .filter_map(|p| {
            let host_port = p.host_port.filter(|h| *h > 0)?;
            Some(PortMapping {
                protocol: match p.protocol.as_deref() {
                    Some("UDP") => Protocol::Udp,
                    Some("SCTP") => Protocol::Sctp,
                    _ => Protocol::Tcp,
                },
                container_port: p.container_port,
                host_port,
                host_ip: p.host_ip.clone().unwrap_or_default(),
            })
        })
        .collect()
}

fn namespace_options(spec: &PodSpec) -> NamespaceOptions {
    let flag = |f: Option<bool>| f.unwrap_or(false);
    let host_pid = flag(spec.host_pid);
    let mut ns = NamespaceOptions::for_pod(flag(spec.host_network), host_pid, flag(spec.host_ipc));
    if !host_pid && flag(spec.share_process_namespace) {
        ns.pid = NamespaceMode::Pod;
    }
    ns
}

/// fsGroup first, then supplementalGroups, as the kubelet appends them.
fn supplemental_groups(spec: &PodSpec) -> Vec<i64> {
    let Some(psc) = &spec.security_context else {
        return Vec::new();
    };
    let groups = psc.supplemental_groups.iter().flatten().copied();
    psc.fs_group.into_iter().chain(groups).collect()
}

fn is_privileged(c: &Container) -> bool {
    c.security_context.as_ref().and_then(|s| s.privileged) == Some(true)
}

/// A profile as the spec gives it: (type, localhostProfile).
type ProfileSpec<'a> = Option<(&'a str, Option<&'a str>)>;

fn seccomp_spec(p: &Option<SeccompProfile>) -> ProfileSpec<'_> {
    (p.as_ref()).map(|p| (p.type_.as_str(), p.localhost_profile.as_deref()))
}

fn apparmor_spec(p: &Option<AppArmorProfile>) -> ProfileSpec<'_> {
    (p.as_ref()).map(|p| (p.type_.as_str(), p.localhost_profile.as_deref()))
}

/// The container's profile if it sets one, else the pod's. For
/// seccompProfile a Localhost profile is a path under `<root_dir>/seccomp`
/// (as the kubelet resolves it); for appArmorProfile it is a profile name.
fn security_profile(
    ctx: &NodeContext,
    pod: &Pod,
    container_field: &str,
    key: &str,
    container: ProfileSpec,
    pod_level: ProfileSpec,
) -> Result<Option<SecurityProfile>, MappingError> {
    let (field, (kind, localhost)) = match (container, pod_level) {
        (Some(p), _) => (format!("{container_field}.securityContext.{key}"), p),
        (None, Some(p)) => (format!("spec.securityContext.{key}"), p),
        (None, None) => return Ok(None),
    };
    let profile = match (kind, localhost.filter(|p| !p.is_empty())) {
        ("RuntimeDefault", _) => SecurityProfile::RuntimeDefault,
        ("Unconfined", _) => SecurityProfile::Unconfined,
        ("Localhost", Some(p)) if key == SECCOMP_PROFILE => {
            let path = ctx.root_dir.join("seccomp").join(p);
            SecurityProfile::Localhost(path.to_string_lossy().into_owned())
        }
        ("Localhost", Some(p)) => SecurityProfile::Localhost(p.to_owned()),
        ("Localhost", None) => {
            let reason = "required for type Localhost";
            return Err(invalid(
                pod,
                format!("{field}.localhostProfile"),
                "",
                reason,
            ));
        }
        (other, _) => {
            let reason = "expected RuntimeDefault, Unconfined or Localhost";
            return Err(invalid(pod, format!("{field}.type"), other, reason));
        }
    };
    Ok(Some(profile))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kuberuntime::labels::{
        CONTAINER_HASH_ANNOTATION, CONTAINER_NAME_LABEL, CONTAINER_RESTART_COUNT_ANNOTATION,
        POD_DELETION_GRACE_PERIOD_ANNOTATION, POD_NAME_LABEL, POD_NAMESPACE_LABEL,
        POD_TERMINATION_GRACE_PERIOD_ANNOTATION, POD_UID_LABEL,
        TERMINATION_MESSAGE_PATH_ANNOTATION, TERMINATION_MESSAGE_POLICY_ANNOTATION,
    };
    use proptest::prelude::*;
    use serde_json::{Value, json};

    const UID: &str = "6f1c0ffee0ddf00d6f1c0ffee0ddf00d";
    const GIB: u64 = 1 << 30;

    fn ctx() -> NodeContext {
        NodeContext {
            node_name: "node-1".into(),
            root_dir: "/var/lib/crilet".into(),
            cgroup_root: "/".into(),
            host_dns: DnsConfig {
                servers: vec!["10.0.0.2".into()],
                searches: vec!["lan".into()],
                options: vec!["ndots:1".into()],
            },
            host_ip: "192.168.1.10".into(),
            memory_capacity: 8 * GIB,
        }
    }

    fn pod(spec: Value) -> Pod {
        pod_with(json!({}), spec)
    }

    /// A pod named web-node-1 in default; `meta` is merged into its metadata.
    fn pod_with(meta: Value, spec: Value) -> Pod {
        let mut metadata = json!({"name": "web-node-1", "namespace": "default", "uid": UID});
        for (k, v) in meta.as_object().unwrap() {
            metadata[k] = v.clone();
        }
        serde_json::from_value(json!({"metadata": metadata, "spec": spec})).unwrap()
    }

    /// A pod whose single container "app" has the given fields.
    fn pod_one(container: Value, spec_extra: Value) -> Pod {
        let mut c = json!({"name": "app", "image": "busybox"});
        for (k, v) in container.as_object().unwrap() {
            c[k] = v.clone();
        }
        let mut spec = json!({"containers": [c]});
        for (k, v) in spec_extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        pod(spec)
    }

    fn app(p: &Pod) -> &Container {
        &spec(p).containers[0]
    }

    fn map_app(p: &Pod) -> Result<ContainerConfig, MappingError> {
        container_config(&ctx(), p, app(p), 0, 0, "10.88.0.5")
    }

    fn resources_of(req: Value, lim: Value) -> Value {
        json!({"resources": {"requests": req, "limits": lim}})
    }

    fn field_of(err: &MappingError) -> &str {
        match err {
            MappingError::Unsupported { field, .. } | MappingError::Invalid { field, .. } => field,
        }
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn qos_class_follows_kubelet_rules() {
        use QosClass::*;
        let full = json!({"cpu": "500m", "memory": "128Mi"});
        let rows = [
            ("nothing set", json!([{"name": "a"}]), json!([]), BestEffort),
            (
                "zero requests",
                json!([{"name": "a", "resources": {"requests": {"cpu": "0"}}}]),
                json!([]),
                BestEffort,
            ),
            (
                "other resources only",
                json!([{"name": "a", "resources": {"limits": {"ephemeral-storage": "1Gi"}}}]),
                json!([]),
                BestEffort,
            ),
            (
                "limits only",
                json!([{"name": "a", "resources": {"limits": full}}]),
                json!([]),
                Guaranteed,
            ),
            (
                "requests equal limits",
                json!([{"name": "a", "resources": {"requests": full, "limits": full}}]),
                json!([]),
                Guaranteed,
            ),
            (
                "equal in other units",
                json!([{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1073741824"}}}]),
                json!([]),
                Guaranteed,
            ),
            (
                "requests below limits",
                json!([{"name": "a", "resources": {"requests": {"cpu": "100m"}, "limits": full}}]),
                json!([]),
                Burstable,
            ),
            (
                "cpu request only",
                json!([{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]),
                json!([]),
                Burstable,
            ),
            (
                "memory limit only",
                json!([{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}]),
                json!([]),
                Burstable,
            ),
            (
                "one container without",
                json!([{"name": "a", "resources": {"limits": full}}, {"name": "b"}]),
                json!([]),
                Burstable,
            ),
            (
                "init container without",
                json!([{"name": "a", "resources": {"limits": full}}]),
                json!([{"name": "i"}]),
                Burstable,
            ),
            (
                "init container guaranteed too",
                json!([{"name": "a", "resources": {"limits": full}}]),
                json!([{"name": "i", "resources": {"limits": full}}]),
                Guaranteed,
            ),
            (
                "burstable init, nothing else",
                json!([{"name": "a"}]),
                json!([{"name": "i", "resources": {"requests": {"memory": "1Mi"}}}]),
                Burstable,
            ),
        ];
        for (what, containers, init, want) in rows {
            let p = pod(json!({"containers": containers, "initContainers": init}));
            assert_eq!(qos_class(&p), want, "{what}");
        }
        assert_eq!(
            [Guaranteed, Burstable, BestEffort].map(QosClass::as_str),
            ["Guaranteed", "Burstable", "BestEffort"]
        );
    }

    #[test]
    fn cgroup_parent_by_root_and_qos() {
        let guaranteed = pod_one(
            resources_of(json!({}), json!({"cpu": "1", "memory": "1Gi"})),
            json!({}),
        );
        let burstable = pod_one(resources_of(json!({"cpu": "1"}), json!({})), json!({}));
        let best_effort = pod_one(json!({}), json!({}));
        let rows = [
            ("/", &guaranteed, format!("/kubepods/pod{UID}")),
            ("/", &burstable, format!("/kubepods/burstable/pod{UID}")),
            ("/", &best_effort, format!("/kubepods/besteffort/pod{UID}")),
            ("", &guaranteed, format!("/kubepods/pod{UID}")),
            (
                "/crilet-test",
                &burstable,
                format!("/crilet-test/kubepods/burstable/pod{UID}"),
            ),
            (
                "crilet-test/",
                &best_effort,
                format!("/crilet-test/kubepods/besteffort/pod{UID}"),
            ),
            ("//a//b/", &guaranteed, format!("/a/b/kubepods/pod{UID}")),
        ];
        for (root, p, want) in rows {
            let ctx = NodeContext {
                cgroup_root: root.into(),
                ..ctx()
            };
            assert_eq!(pod_cgroup_parent(&ctx, p), want, "root {root:?}");
            assert!(cgroup_parent_candidates(&ctx, UID).contains(&want));
        }
        let ctx = NodeContext {
            cgroup_root: "/crilet-test".into(),
            ..ctx()
        };
        assert_eq!(
            cgroup_parent_candidates(&ctx, "u1"),
            strings(&[
                "/crilet-test/kubepods/podu1",
                "/crilet-test/kubepods/burstable/podu1",
                "/crilet-test/kubepods/besteffort/podu1",
            ])
        );
    }

    #[test]
    fn paths_and_grace_period() {
        let p = pod(json!({"containers": []}));
        assert_eq!(
            pod_log_dir(&ctx(), &p),
            PathBuf::from(format!("/var/lib/crilet/logs/default_web-node-1_{UID}"))
        );
        assert_eq!(
            empty_dir_path(&ctx(), &p, "cache"),
            PathBuf::from(format!(
                "/var/lib/crilet/pods/{UID}/volumes/kubernetes.io~empty-dir/cache"
            ))
        );
        for (name, restarts, want) in [("app", 0, "app/0.log"), ("side-car", 12, "side-car/12.log")]
        {
            assert_eq!(container_log_path(name, restarts), want);
        }
        for (spec, want) in [
            (json!({"containers": []}), 30),
            (
                json!({"containers": [], "terminationGracePeriodSeconds": 0}),
                0,
            ),
            (
                json!({"containers": [], "terminationGracePeriodSeconds": 5}),
                5,
            ),
        ] {
            assert_eq!(termination_grace_period(&pod(spec)), want);
        }
        assert_eq!(termination_grace_period(&Pod::default()), 30);
    }

    #[test]
    fn sandbox_hostname() {
        let long = "a".repeat(62) + "-.b";
        let rows = [
            (json!({}), "web-node-1".to_owned()),
            (json!({"hostNetwork": true}), String::new()),
            (json!({"hostNetwork": true, "hostname": "x"}), String::new()),
            (json!({"hostname": "custom"}), "custom".into()),
            (json!({"hostname": ""}), "web-node-1".into()),
            (json!({"hostname": long}), "a".repeat(62)),
            (json!({"hostname": "b".repeat(63)}), "b".repeat(63)),
            (json!({"hostname": "c".repeat(70)}), "c".repeat(63)),
            (
                json!({"hostname": "ends-with-dash-"}),
                "ends-with-dash-".into(),
            ),
        ];
        for (extra, want) in rows {
            let got = sandbox_config(&ctx(), &pod_one(json!({}), extra.clone()), 0).unwrap();
            assert_eq!(got.hostname, want, "{extra}");
        }
    }

    #[test]
    fn sandbox_dns() {
        let host = ctx().host_dns;
        let dns = |servers: &[&str], searches: &[&str], options: &[&str]| DnsConfig {
            servers: strings(servers),
            searches: strings(searches),
            options: strings(options),
        };
        let extra = json!({
            "nameservers": ["1.1.1.1", "10.0.0.2"],
            "searches": ["svc.example", "lan"],
            "options": [{"name": "ndots", "value": "5"}, {"name": "edns0"}]
        });
        let many_searches: Vec<String> = (0..40).map(|i| format!("s{i}.example")).collect();
        let rows = [
            (json!({}), host.clone()),
            (json!({"dnsPolicy": "ClusterFirst"}), host.clone()),
            (
                json!({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": true}),
                host.clone(),
            ),
            (json!({"dnsPolicy": "Default"}), host.clone()),
            (
                json!({"dnsPolicy": "ClusterFirst", "hostNetwork": true}),
                host.clone(),
            ),
            (json!({"dnsPolicy": "None"}), DnsConfig::default()),
            (
                json!({"dnsPolicy": "None", "hostNetwork": true, "dnsConfig": {"nameservers": ["9.9.9.9"]}}),
                dns(&["9.9.9.9"], &[], &[]),
            ),
            (
                json!({"dnsPolicy": "Default", "dnsConfig": extra}),
                dns(
                    &["10.0.0.2", "1.1.1.1"],
                    &["lan", "svc.example"],
                    &["ndots:5", "edns0"],
                ),
            ),
            (
                json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]}}),
                dns(&["1.1.1.1", "2.2.2.2", "3.3.3.3"], &[], &[]),
            ),
            (
                json!({"dnsPolicy": "None", "dnsConfig": {"searches": many_searches}}),
                dns(
                    &[],
                    &many_searches[..32]
                        .iter()
                        .map(String::as_str)
                        .collect::<Vec<_>>(),
                    &[],
                ),
            ),
            (
                json!({"dnsPolicy": "None", "dnsConfig": {"searches": ["x".repeat(254), "ok"]}}),
                dns(&[], &["ok"], &[]),
            ),
            (
                json!({"dnsPolicy": "None", "dnsConfig": {"searches": (0..12).map(|i| format!("{i}{}", "y".repeat(199))).collect::<Vec<_>>()}}),
                dns(
                    &[],
                    &(0..10)
                        .map(|i| format!("{i}{}", "y".repeat(199)))
                        .collect::<Vec<_>>()
                        .iter()
                        .map(String::as_str)
                        .collect::<Vec<_>>(),
                    &[],
                ),
            ),
            (
                json!({"dnsPolicy": "None", "dnsConfig": {"options": [{"name": "timeout", "value": "2"}, {"name": "timeout", "value": "3"}]}}),
                dns(&[], &[], &["timeout:3"]),
            ),
        ];
        for (extra, want) in rows {
            let got = sandbox_config(&ctx(), &pod_one(json!({}), extra.clone()), 0).unwrap();
            assert_eq!(got.dns_config, Some(want), "{extra}");
        }
        let err = sandbox_config(
            &ctx(),
            &pod_one(json!({}), json!({"dnsPolicy": "Bogus"})),
            0,
        )
        .unwrap_err();
        assert_eq!(field_of(&err), "spec.dnsPolicy");
    }

    #[test]
    fn sandbox_port_mappings() {
        let mapping = |protocol, container_port, host_port, host_ip: &str| PortMapping {
            protocol,
            container_port,
            host_port,
            host_ip: host_ip.into(),
        };
        let rows = [
            (json!([{"containerPort": 80}]), vec![]),
            (json!([{"containerPort": 80, "hostPort": 0}]), vec![]),
            (
                json!([{"containerPort": 80, "hostPort": 8080}]),
                vec![mapping(Protocol::Tcp, 80, 8080, "")],
            ),
            (
                json!([{"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "127.0.0.1"}, {"containerPort": 9, "hostPort": 9, "protocol": "SCTP"}, {"containerPort": 81, "hostPort": 81, "protocol": "TCP"}]),
                vec![
                    mapping(Protocol::Udp, 53, 5353, "127.0.0.1"),
                    mapping(Protocol::Sctp, 9, 9, ""),
                    mapping(Protocol::Tcp, 81, 81, ""),
                ],
            ),
        ];
        for (ports, want) in rows {
            let p = pod_one(json!({"ports": ports}), json!({}));
            assert_eq!(
                sandbox_config(&ctx(), &p, 0).unwrap().port_mappings,
                want,
                "{ports}"
            );
        }
        // Init containers' ports are not published.
        let p = pod(
            json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i", "ports": [{"containerPort": 1, "hostPort": 1}]}]}),
        );
        assert!(
            sandbox_config(&ctx(), &p, 0)
                .unwrap()
                .port_mappings
                .is_empty()
        );
    }

    #[test]
    fn sandbox_identity_labels_and_layout() {
        let p = pod_with(
            json!({"labels": {"app": "web"}, "annotations": {"kubernetes.io/config.source": "file"}}),
            json!({"containers": [{"name": "a"}], "securityContext": {"sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}]}}),
        );
        let got = sandbox_config(&ctx(), &p, 3).unwrap();
        assert_eq!(
            got.metadata,
            PodSandboxMetadata {
                name: "web-node-1".into(),
                uid: UID.into(),
                namespace: "default".into(),
                attempt: 3
            }
        );
        let back = PodSandboxLabels::from_labels(&got.labels, &got.annotations).unwrap();
        assert_eq!(
            back.pod_labels,
            BTreeMap::from([("app".to_owned(), "web".to_owned())])
        );
        assert_eq!(got.labels[POD_UID_LABEL], UID);
        assert_eq!(got.annotations["kubernetes.io/config.source"], "file");
        assert_eq!(
            got.log_directory,
            format!("/var/lib/crilet/logs/default_web-node-1_{UID}")
        );
        assert_eq!(got.cgroup_parent, format!("/kubepods/besteffort/pod{UID}"));
        assert_eq!(
            got.sysctls,
            HashMap::from([("net.ipv4.ip_forward".to_owned(), "1".to_owned())])
        );
        assert_eq!(got.runtime_handler, "");
    }

    #[test]
    fn sandbox_security() {
        use NamespaceMode::*;
        let ns = |network, pid, ipc| NamespaceOptions {
            network,
            pid,
            ipc,
            target_id: String::new(),
        };
        let base = SandboxSecurity {
            namespace_options: ns(Pod, Container, Pod),
            ..Default::default()
        };
        let rows = [
            (json!({}), json!({}), base.clone()),
            (
                json!({"hostNetwork": true}),
                json!({}),
                SandboxSecurity {
                    namespace_options: ns(Node, Container, Pod),
                    ..base.clone()
                },
            ),
            (
                json!({"hostPID": true, "hostIPC": true, "shareProcessNamespace": true}),
                json!({}),
                SandboxSecurity {
                    namespace_options: ns(Pod, Node, Node),
                    ..base.clone()
                },
            ),
            (
                json!({"shareProcessNamespace": true}),
                json!({}),
                SandboxSecurity {
                    namespace_options: ns(Pod, Pod, Pod),
                    ..base.clone()
                },
            ),
            (
                json!({}),
                json!({"securityContext": {"privileged": true}}),
                SandboxSecurity {
                    privileged: true,
                    ..base.clone()
                },
            ),
            (
                json!({"securityContext": {"runAsUser": 1000, "runAsGroup": 2000, "fsGroup": 3000, "supplementalGroups": [4000, 5000]}}),
                json!({}),
                SandboxSecurity {
                    run_as_user: Some(1000),
                    run_as_group: Some(2000),
                    supplemental_groups: vec![3000, 4000, 5000],
                    ..base.clone()
                },
            ),
            (
                json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
                json!({}),
                SandboxSecurity {
                    seccomp: Some(SecurityProfile::RuntimeDefault),
                    ..base.clone()
                },
            ),
            (
                json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
                json!({}),
                SandboxSecurity {
                    seccomp: Some(SecurityProfile::Unconfined),
                    ..base.clone()
                },
            ),
            (
                json!({"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"}}}),
                json!({}),
                SandboxSecurity {
                    seccomp: Some(SecurityProfile::Localhost(
                        "/var/lib/crilet/seccomp/profiles/audit.json".into(),
                    )),
                    ..base.clone()
                },
            ),
        ];
        for (spec_extra, container, want) in rows {
            let p = pod_one(container.clone(), spec_extra.clone());
            assert_eq!(
                sandbox_config(&ctx(), &p, 0).unwrap().security,
                want,
                "{spec_extra} {container}"
            );
        }
        // A privileged init container makes the sandbox privileged too.
        let p = pod(
            json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i", "securityContext": {"privileged": true}}]}),
        );
        assert!(sandbox_config(&ctx(), &p, 0).unwrap().security.privileged);
        for (profile, field) in [
            (
                json!({"type": "Localhost"}),
                "spec.securityContext.seccompProfile.localhostProfile",
            ),
            (
                json!({"type": "Strict"}),
                "spec.securityContext.seccompProfile.type",
            ),
        ] {
            let p = pod_one(
                json!({}),
                json!({"securityContext": {"seccompProfile": profile}}),
            );
            assert_eq!(field_of(&sandbox_config(&ctx(), &p, 0).unwrap_err()), field);
        }
    }

    #[test]
    fn variable_expansion() {
        let vars = vec![
            ("A".to_owned(), "x".to_owned()),
            ("EMPTY".to_owned(), String::new()),
            ("B".to_owned(), "$(A)".to_owned()),
        ];
        let rows = [
            ("plain", "plain"),
            ("$(A)", "x"),
            ("pre-$(A)-post", "pre-x-post"),
            ("$(A)$(A)", "xx"),
            ("$(EMPTY)|", "|"),
            ("$(B)", "$(A)"),
            ("$(UNDEFINED)", "$(UNDEFINED)"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$x"),
            ("$$", "$"),
            ("$", "$"),
            ("a$", "a$"),
            ("$A", "$A"),
            ("$(A", "$(A"),
            ("$()", "$()"),
            ("$(é)ü$", "$(é)ü$"),
            ("100$ and $(A)", "100$ and x"),
        ];
        for (input, want) in rows {
            assert_eq!(expand(input, &vars), want, "{input:?}");
        }
    }

    #[test]
    fn container_env() {
        let p = pod_with(
            json!({"labels": {"app": "web"}, "annotations": {"note": "hi"}}),
            json!({"containers": [{"name": "app"}], "serviceAccountName": "sa"}),
        );
        let field_ref = |path: &str| json!({"fieldRef": {"fieldPath": path}});
        let rows: Vec<(Value, Vec<(&str, &str)>)> = vec![
            (
                json!([{"name": "A", "value": "1"}, {"name": "B"}]),
                vec![("A", "1"), ("B", "")],
            ),
            (
                json!([{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)-$(C)"}, {"name": "C", "value": "3"}]),
                vec![("A", "1"), ("B", "1-$(C)"), ("C", "3")],
            ),
            (
                json!([{"name": "A", "value": "1"}, {"name": "B", "value": "x"}, {"name": "A", "value": "$(A)2"}]),
                vec![("A", "12"), ("B", "x")],
            ),
            (
                json!([{"name": "P", "value": "$$(HOME)"}]),
                vec![("P", "$(HOME)")],
            ),
            (
                json!([
                    {"name": "N", "valueFrom": field_ref("metadata.name")},
                    {"name": "NS", "valueFrom": field_ref("metadata.namespace")},
                    {"name": "U", "valueFrom": field_ref("metadata.uid")},
                    {"name": "NODE", "valueFrom": field_ref("spec.nodeName")},
                    {"name": "SA", "valueFrom": field_ref("spec.serviceAccountName")},
                    {"name": "IP", "valueFrom": field_ref("status.podIP")},
                    {"name": "HIP", "valueFrom": field_ref("status.hostIP")},
                    {"name": "L", "valueFrom": field_ref("metadata.labels['app']")},
                    {"name": "AN", "valueFrom": field_ref("metadata.annotations['note']")},
                    {"name": "MISSING", "valueFrom": field_ref("metadata.labels['nope']")},
                    {"name": "RAW", "value": "$(N)@$(NODE)"},
                ]),
                vec![
                    ("N", "web-node-1"),
                    ("NS", "default"),
                    ("U", UID),
                    ("NODE", "node-1"),
                    ("SA", "sa"),
                    ("IP", "10.88.0.5"),
                    ("HIP", "192.168.1.10"),
                    ("L", "web"),
                    ("AN", "hi"),
                    ("MISSING", ""),
                    ("RAW", "web-node-1@node-1"),
                ],
            ),
        ];
        for (env, want) in rows {
            let mut p = p.clone();
            p.spec.as_mut().unwrap().containers[0].env =
                serde_json::from_value(env.clone()).unwrap();
            let got = map_app(&p).unwrap().envs;
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect();
            assert_eq!(got, want, "{env}");
        }
        let mut on_node = p.clone();
        on_node.spec.as_mut().unwrap().node_name = Some("other".into());
        on_node.spec.as_mut().unwrap().containers[0].env = serde_json::from_value(
            json!([{"name": "NODE", "valueFrom": field_ref("spec.nodeName")}]),
        )
        .unwrap();
        assert_eq!(
            map_app(&on_node).unwrap().envs,
            vec![("NODE".into(), "other".into())]
        );

        let errors = [
            (
                json!({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}),
                "spec.containers{app}.env{X}.valueFrom.configMapKeyRef",
            ),
            (
                json!({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}),
                "spec.containers{app}.env{X}.valueFrom.secretKeyRef",
            ),
            (
                json!({"env": [{"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]}),
                "spec.containers{app}.env{X}.valueFrom.resourceFieldRef",
            ),
            (
                json!({"env": [{"name": "X", "valueFrom": field_ref("metadata.generateName")}]}),
                "spec.containers{app}.env{X}.valueFrom.fieldRef",
            ),
            (
                json!({"env": [{"name": "X", "valueFrom": {}}]}),
                "spec.containers{app}.env{X}.valueFrom",
            ),
            (
                json!({"envFrom": [{"configMapRef": {"name": "cm"}}]}),
                "spec.containers{app}.envFrom",
            ),
        ];
        for (container, field) in errors {
            let err = map_app(&pod_one(container.clone(), json!({}))).unwrap_err();
            assert_eq!(field_of(&err), field, "{container}");
            let text = err.to_string();
            assert!(
                text.contains("web-node-1_default") && text.contains(field),
                "{text}"
            );
        }
    }

    #[test]
    fn container_command_and_args_are_expanded() {
        let p = pod_one(
            json!({
                "env": [{"name": "MSG", "value": "hi"}],
                "command": ["sh", "-c", "echo $(MSG) $$(MSG) $(NOPE)"],
                "args": ["$(MSG)"],
                "workingDir": "/work/$(MSG)"
            }),
            json!({}),
        );
        let got = map_app(&p).unwrap();
        assert_eq!(
            got.command,
            strings(&["sh", "-c", "echo hi $(MSG) $(NOPE)"])
        );
        assert_eq!(got.args, strings(&["hi"]));
        assert_eq!(
            got.working_dir, "/work/$(MSG)",
            "workingDir is not expanded"
        );
    }

    #[test]
    fn container_mounts() {
        let volumes = json!([
            {"name": "host", "hostPath": {"path": "/srv/data"}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "bare"},
            {"name": "cm", "configMap": {"name": "x"}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": "c"}},
        ]);
        let empty = format!("/var/lib/crilet/pods/{UID}/volumes/kubernetes.io~empty-dir");
        let mount = |container_path: &str, host_path: String, readonly, propagation| Mount {
            container_path: container_path.into(),
            host_path,
            readonly,
            selinux_relabel: false,
            propagation,
        };
        let rows = [
            (
                json!({"name": "host", "mountPath": "/data"}),
                mount(
                    "/data",
                    "/srv/data".into(),
                    false,
                    MountPropagation::Private,
                ),
            ),
            (
                json!({"name": "host", "mountPath": "/data", "readOnly": true, "subPath": "a/b"}),
                mount(
                    "/data",
                    "/srv/data/a/b".into(),
                    true,
                    MountPropagation::Private,
                ),
            ),
            (
                json!({"name": "host", "mountPath": "/d", "subPathExpr": "logs/$(POD)"}),
                mount(
                    "/d",
                    "/srv/data/logs/web-node-1".into(),
                    false,
                    MountPropagation::Private,
                ),
            ),
            (
                json!({"name": "host", "mountPath": "/d", "mountPropagation": "HostToContainer"}),
                mount(
                    "/d",
                    "/srv/data".into(),
                    false,
                    MountPropagation::HostToContainer,
                ),
            ),
            (
                json!({"name": "scratch", "mountPath": "/tmp"}),
                mount(
                    "/tmp",
                    format!("{empty}/scratch"),
                    false,
                    MountPropagation::Private,
                ),
            ),
            (
                json!({"name": "bare", "mountPath": "/b", "subPath": "x"}),
                mount(
                    "/b",
                    format!("{empty}/bare/x"),
                    false,
                    MountPropagation::Private,
                ),
            ),
        ];
        let env =
            json!([{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
        for (vm, want) in rows {
            let p = pod_one(
                json!({"volumeMounts": [vm], "env": env}),
                json!({"volumes": volumes}),
            );
            assert_eq!(map_app(&p).unwrap().mounts, vec![want], "{vm}");
        }
        let privileged = pod_one(
            json!({"volumeMounts": [{"name": "host", "mountPath": "/d", "mountPropagation": "Bidirectional"}], "securityContext": {"privileged": true}}),
            json!({"volumes": volumes}),
        );
        assert_eq!(
            map_app(&privileged).unwrap().mounts[0].propagation,
            MountPropagation::Bidirectional
        );

        let errors = [
            (
                json!({"name": "cm", "mountPath": "/c"}),
                "spec.volumes{cm}",
                "configMap",
            ),
            (
                json!({"name": "claim", "mountPath": "/c"}),
                "spec.volumes{claim}",
                "persistentVolumeClaim",
            ),
            (
                json!({"name": "ghost", "mountPath": "/g"}),
                "spec.containers{app}.volumeMounts{ghost}.name",
                "ghost",
            ),
            (
                json!({"name": "host", "mountPath": "/d", "subPath": "../etc"}),
                "spec.containers{app}.volumeMounts{host}.subPath",
                "../etc",
            ),
            (
                json!({"name": "host", "mountPath": "/d", "subPath": "/etc"}),
                "spec.containers{app}.volumeMounts{host}.subPath",
                "/etc",
            ),
            (
                json!({"name": "host", "mountPath": "/d", "mountPropagation": "Bidirectional"}),
                "spec.containers{app}.volumeMounts{host}.mountPropagation",
                "Bidirectional",
            ),
            (
                json!({"name": "host", "mountPath": "/d", "mountPropagation": "Sideways"}),
                "spec.containers{app}.volumeMounts{host}.mountPropagation",
                "Sideways",
            ),
        ];
        for (vm, field, mentioned) in errors {
            let p = pod_one(json!({"volumeMounts": [vm]}), json!({"volumes": volumes}));
            let err = map_app(&p).unwrap_err();
            assert_eq!(field_of(&err), field, "{vm}");
            assert!(err.to_string().contains(mentioned), "{err}");
        }
    }

    #[test]
    fn container_resources() {
        let res = |shares, period, quota, memory, oom| LinuxContainerResources {
            cpu_shares: shares,
            cpu_period: period,
            cpu_quota: quota,
            memory_limit_in_bytes: memory,
            oom_score_adj: oom,
            ..Default::default()
        };
        let gi = GIB as i64;
        let rows = [
            ("nothing", json!({}), json!({}), res(2, 0, 0, 0, 1000)),
            (
                "cpu request",
                json!({"cpu": "100m"}),
                json!({}),
                res(102, 0, 0, 0, 999),
            ),
            (
                "tiny cpu request",
                json!({"cpu": "1m"}),
                json!({}),
                res(2, 0, 0, 0, 999),
            ),
            (
                "cpu limit only",
                json!({}),
                json!({"cpu": "500m"}),
                res(512, 100_000, 50_000, 0, 999),
            ),
            (
                "zero request, limit",
                json!({"cpu": "0"}),
                json!({"cpu": "2"}),
                res(2048, 100_000, 200_000, 0, 999),
            ),
            (
                "tiny limit",
                json!({}),
                json!({"cpu": "5m"}),
                res(5, 100_000, 1_000, 0, 999),
            ),
            (
                "huge cpu",
                json!({"cpu": "1000"}),
                json!({}),
                res(262_144, 0, 0, 0, 999),
            ),
            (
                "guaranteed",
                json!({}),
                json!({"cpu": "1", "memory": "1Gi"}),
                res(1024, 100_000, 100_000, gi, -997),
            ),
            (
                "burstable 1Gi of 8Gi",
                json!({"memory": "1Gi"}),
                json!({"memory": "2Gi"}),
                res(2, 0, 0, 2 * gi, 875),
            ),
            (
                "burstable whole node",
                json!({"memory": "8Gi"}),
                json!({}),
                res(2, 0, 0, 0, 3),
            ),
            (
                "burstable over node",
                json!({"memory": "16Gi"}),
                json!({}),
                res(2, 0, 0, 0, 3),
            ),
            (
                "burstable tiny memory",
                json!({"memory": "1"}),
                json!({}),
                res(2, 0, 0, 0, 999),
            ),
            (
                "memory limit in G",
                json!({"cpu": "1"}),
                json!({"memory": "1.5G"}),
                res(1024, 0, 0, 1_500_000_000, 826),
            ),
        ];
        for (what, req, lim, want) in rows {
            let p = pod_one(resources_of(req, lim), json!({}));
            assert_eq!(map_app(&p).unwrap().resources, Some(want), "{what}");
        }
        let no_capacity = NodeContext {
            memory_capacity: 0,
            ..ctx()
        };
        let p = pod_one(resources_of(json!({"memory": "1Gi"}), json!({})), json!({}));
        let got = container_config(&no_capacity, &p, app(&p), 0, 0, "").unwrap();
        assert_eq!(got.resources.unwrap().oom_score_adj, 999);
        let critical = pod_one(
            json!({}),
            json!({"priorityClassName": "system-node-critical"}),
        );
        assert_eq!(
            map_app(&critical).unwrap().resources.unwrap().oom_score_adj,
            -997
        );

        for (req, lim, field) in [
            (
                json!({"cpu": "lots"}),
                json!({}),
                "spec.containers{app}.resources.requests.cpu",
            ),
            (
                json!({}),
                json!({"memory": "12XB"}),
                "spec.containers{app}.resources.limits.memory",
            ),
            (
                json!({"memory": "-1Gi"}),
                json!({}),
                "spec.containers{app}.resources.requests.memory",
            ),
            (
                json!({}),
                json!({"cpu": "1e30"}),
                "spec.containers{app}.resources.limits.cpu",
            ),
        ] {
            let p = pod_one(resources_of(req, lim), json!({}));
            assert_eq!(field_of(&map_app(&p).unwrap_err()), field);
            // The sandbox refuses it too: QoS and the cgroup path depend on it.
            assert_eq!(field_of(&sandbox_config(&ctx(), &p, 0).unwrap_err()), field);
        }
        let init = pod(
            json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "x"}}}]}),
        );
        let err = sandbox_config(&ctx(), &init, 0).unwrap_err();
        assert_eq!(
            field_of(&err),
            "spec.initContainers{i}.resources.limits.cpu"
        );
    }

    #[test]
    fn container_security_context() {
        use NamespaceMode::*;
        let masked = strings(&DEFAULT_MASKED_PATHS);
        let readonly = strings(&DEFAULT_READONLY_PATHS);
        let base = ContainerSecurity {
            namespace_options: NamespaceOptions {
                network: Pod,
                pid: Container,
                ipc: Pod,
                target_id: String::new(),
            },
            masked_paths: masked.clone(),
            readonly_paths: readonly.clone(),
            ..Default::default()
        };
        let rows = [
            (json!({}), json!({}), base.clone()),
            (
                json!({"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}, "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false}),
                json!({}),
                ContainerSecurity {
                    capabilities_add: strings(&["NET_ADMIN"]),
                    capabilities_drop: strings(&["ALL"]),
                    readonly_rootfs: true,
                    no_new_privs: true,
                    ..base.clone()
                },
            ),
            (
                json!({"allowPrivilegeEscalation": true}),
                json!({}),
                base.clone(),
            ),
            (
                json!({"privileged": true}),
                json!({}),
                ContainerSecurity {
                    privileged: true,
                    masked_paths: vec![],
                    readonly_paths: vec![],
                    ..base.clone()
                },
            ),
            (
                json!({"procMount": "Unmasked"}),
                json!({}),
                ContainerSecurity {
                    masked_paths: vec![],
                    readonly_paths: vec![],
                    ..base.clone()
                },
            ),
            (
                json!({}),
                json!({"runAsUser": 1000, "runAsGroup": 100, "supplementalGroups": [5], "fsGroup": 7}),
                ContainerSecurity {
                    run_as_user: Some(1000),
                    run_as_group: Some(100),
                    supplemental_groups: vec![7, 5],
                    ..base.clone()
                },
            ),
            (
                json!({"runAsUser": 0, "runAsGroup": 0}),
                json!({"runAsUser": 1000, "runAsGroup": 100}),
                ContainerSecurity {
                    run_as_user: Some(0),
                    run_as_group: Some(0),
                    ..base.clone()
                },
            ),
            (
                json!({"runAsNonRoot": true, "runAsUser": 1}),
                json!({}),
                ContainerSecurity {
                    run_as_user: Some(1),
                    ..base.clone()
                },
            ),
            (
                json!({}),
                json!({"seccompProfile": {"type": "RuntimeDefault"}, "appArmorProfile": {"type": "Unconfined"}}),
                ContainerSecurity {
                    seccomp: Some(SecurityProfile::RuntimeDefault),
                    apparmor: Some(SecurityProfile::Unconfined),
                    ..base.clone()
                },
            ),
            (
                json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}, "appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-nginx"}}),
                json!({"seccompProfile": {"type": "RuntimeDefault"}, "appArmorProfile": {"type": "RuntimeDefault"}}),
                ContainerSecurity {
                    seccomp: Some(SecurityProfile::Localhost(
                        "/var/lib/crilet/seccomp/p.json".into(),
                    )),
                    apparmor: Some(SecurityProfile::Localhost("k8s-nginx".into())),
                    ..base.clone()
                },
            ),
        ];
        for (csc, psc, want) in rows {
            let p = pod_one(
                json!({"securityContext": csc}),
                json!({"securityContext": psc}),
            );
            assert_eq!(map_app(&p).unwrap().security, Some(want), "{csc} / {psc}");
        }
        let host = pod_one(
            json!({}),
            json!({"hostNetwork": true, "hostPID": true, "shareProcessNamespace": true}),
        );
        let ns = map_app(&host).unwrap().security.unwrap().namespace_options;
        assert_eq!((ns.network, ns.pid, ns.ipc), (Node, Node, Pod));
        let shared = pod_one(json!({}), json!({"shareProcessNamespace": true}));
        assert_eq!(
            map_app(&shared)
                .unwrap()
                .security
                .unwrap()
                .namespace_options
                .pid,
            Pod
        );

        let errors = [
            (
                json!({"runAsUser": 0}),
                json!({"runAsNonRoot": true}),
                "spec.containers{app}.securityContext.runAsUser",
            ),
            (
                json!({"runAsNonRoot": true}),
                json!({"runAsUser": 0}),
                "spec.containers{app}.securityContext.runAsUser",
            ),
            (
                json!({"seccompProfile": {"type": "Localhost"}}),
                json!({}),
                "spec.containers{app}.securityContext.seccompProfile.localhostProfile",
            ),
            (
                json!({"appArmorProfile": {"type": "Maybe"}}),
                json!({}),
                "spec.containers{app}.securityContext.appArmorProfile.type",
            ),
            (
                json!({}),
                json!({"appArmorProfile": {"type": "Localhost"}}),
                "spec.securityContext.appArmorProfile.localhostProfile",
            ),
        ];
        for (csc, psc, field) in errors {
            let p = pod_one(
                json!({"securityContext": csc}),
                json!({"securityContext": psc}),
            );
            assert_eq!(field_of(&map_app(&p).unwrap_err()), field, "{csc} / {psc}");
        }
    }

    #[test]
    fn container_identity_labels_and_flags() {
        let rows = [
            (
                json!({}),
                json!({}),
                json!({}),
                "/dev/termination-log",
                "File",
                None,
                None,
            ),
            (
                json!({"terminationMessagePath": "/tmp/msg", "terminationMessagePolicy": "FallbackToLogsOnError", "stdin": true, "stdinOnce": true, "tty": true}),
                json!({"terminationGracePeriodSeconds": 10}),
                json!({"deletionGracePeriodSeconds": 4}),
                "/tmp/msg",
                "FallbackToLogsOnError",
                Some(10),
                Some(4),
            ),
        ];
        for (container, spec_extra, meta, path, policy, grace, deletion) in rows {
            let mut c = json!({"name": "app", "image": "busybox:1.36"});
            for (k, v) in container.as_object().unwrap() {
                c[k] = v.clone();
            }
            let mut s = json!({"containers": [c]});
            for (k, v) in spec_extra.as_object().unwrap() {
                s[k] = v.clone();
            }
            let p = pod_with(meta, s);
            let got = container_config(&ctx(), &p, app(&p), 7, 2, "").unwrap();
            assert_eq!(
                got.metadata,
                ContainerMetadata {
                    name: "app".into(),
                    attempt: 2
                }
            );
            assert_eq!(got.image, "busybox:1.36");
            assert_eq!(got.log_path, "app/7.log");
            let flag = |k: &str| container[k] == true;
            assert_eq!(
                (got.stdin, got.stdin_once, got.tty),
                (flag("stdin"), flag("stdinOnce"), flag("tty"))
            );
            let back = ContainerLabels::from_labels(&got.labels, &got.annotations).unwrap();
            let want = ContainerLabels {
                pod_name: "web-node-1".into(),
                pod_namespace: "default".into(),
                pod_uid: UID.into(),
                container_name: "app".into(),
                hash: container_hash(app(&p)),
                restart_count: 7,
                termination_message_path: path.into(),
                termination_message_policy: policy.into(),
                termination_grace_period: grace,
                deletion_grace_period: deletion,
            };
            assert_eq!(back, want);
            assert_eq!(
                got.labels.len(),
                4,
                "only the identity labels: {:?}",
                got.labels
            );
        }
    }

    /// A realistic static pod: host-network busybox with env, an emptyDir,
    /// a read-only hostPath, a hostPort and burstable resources.
    #[test]
    fn exact_output_for_host_network_busybox() {
        let p: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "hello-node-1",
                "namespace": "default",
                "uid": UID,
                "labels": {"app": "hello"},
                "annotations": {"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": UID}
            },
            "spec": {
                "hostNetwork": true,
                "nodeName": "node-1",
                "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 5,
                "containers": [{
                    "name": "hello",
                    "image": "docker.io/library/busybox:latest",
                    "command": ["sh", "-c", "echo $(GREETING) from $(NODE); sleep 3600"],
                    "env": [
                        {"name": "GREETING", "value": "hi"},
                        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
                    ],
                    "ports": [{"containerPort": 8080, "hostPort": 8080}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/data"},
                        {"name": "host-etc", "mountPath": "/host/etc", "readOnly": true}
                    ]
                }],
                "volumes": [
                    {"name": "data", "emptyDir": {}},
                    {"name": "host-etc", "hostPath": {"path": "/etc", "type": "Directory"}}
                ]
            }
        }))
        .unwrap();
        let map = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let log_dir = format!("/var/lib/crilet/logs/default_hello-node-1_{UID}");

        let sandbox = sandbox_config(&ctx(), &p, 0).unwrap();
        let want_sandbox = PodSandboxConfig {
            metadata: PodSandboxMetadata {
                name: "hello-node-1".into(),
                uid: UID.into(),
                namespace: "default".into(),
                attempt: 0,
            },
            hostname: String::new(),
            log_directory: log_dir.clone(),
            dns_config: Some(ctx().host_dns),
            port_mappings: vec![PortMapping {
                protocol: Protocol::Tcp,
                container_port: 8080,
                host_port: 8080,
                host_ip: String::new(),
            }],
            labels: map(&[
                ("app", "hello"),
                (POD_NAME_LABEL, "hello-node-1"),
                (POD_NAMESPACE_LABEL, "default"),
                (POD_UID_LABEL, UID),
            ]),
            annotations: map(&[
                ("kubernetes.io/config.source", "file"),
                ("kubernetes.io/config.hash", UID),
            ]),
            cgroup_parent: format!("/kubepods/burstable/pod{UID}"),
            security: SandboxSecurity {
                namespace_options: NamespaceOptions {
                    network: NamespaceMode::Node,
                    pid: NamespaceMode::Container,
                    ipc: NamespaceMode::Pod,
                    target_id: String::new(),
                },
                ..Default::default()
            },
            sysctls: HashMap::new(),
            runtime_handler: String::new(),
        };
        assert_eq!(sandbox, want_sandbox);

        let container = container_config(&ctx(), &p, &spec(&p).containers[0], 0, 0, "").unwrap();
        let hash = container_hash(&spec(&p).containers[0]);
        // Pinned: a change here means every running container restarts on upgrade.
        assert_eq!(format!("{hash:x}"), "27e56ae684b0a7c2");
        let want_container = ContainerConfig {
            metadata: ContainerMetadata {
                name: "hello".into(),
                attempt: 0,
            },
            image: "docker.io/library/busybox:latest".into(),
            command: strings(&["sh", "-c", "echo hi from node-1; sleep 3600"]),
            args: vec![],
            working_dir: String::new(),
            envs: vec![
                ("GREETING".into(), "hi".into()),
                ("NODE".into(), "node-1".into()),
            ],
            mounts: vec![
                Mount {
                    container_path: "/data".into(),
                    host_path: format!(
                        "/var/lib/crilet/pods/{UID}/volumes/kubernetes.io~empty-dir/data"
                    ),
                    ..Default::default()
                },
                Mount {
                    container_path: "/host/etc".into(),
                    host_path: "/etc".into(),
                    readonly: true,
                    ..Default::default()
                },
            ],
            labels: map(&[
                (POD_NAME_LABEL, "hello-node-1"),
                (POD_NAMESPACE_LABEL, "default"),
                (POD_UID_LABEL, UID),
                (CONTAINER_NAME_LABEL, "hello"),
            ]),
            annotations: map(&[
                (CONTAINER_HASH_ANNOTATION, &format!("{hash:x}")),
                (CONTAINER_RESTART_COUNT_ANNOTATION, "0"),
                (TERMINATION_MESSAGE_PATH_ANNOTATION, "/dev/termination-log"),
                (TERMINATION_MESSAGE_POLICY_ANNOTATION, "File"),
                (POD_TERMINATION_GRACE_PERIOD_ANNOTATION, "5"),
            ]),
            log_path: "hello/0.log".into(),
            stdin: false,
            stdin_once: false,
            tty: false,
            resources: Some(LinuxContainerResources {
                cpu_period: 100_000,
                cpu_quota: 50_000,
                cpu_shares: 102,
                memory_limit_in_bytes: 128 << 20,
                oom_score_adj: 993,
                cpuset_cpus: String::new(),
                cpuset_mems: String::new(),
            }),
            security: Some(ContainerSecurity {
                namespace_options: want_sandbox.security.namespace_options.clone(),
                masked_paths: strings(&DEFAULT_MASKED_PATHS),
                readonly_paths: strings(&DEFAULT_READONLY_PATHS),
                ..Default::default()
            }),
        };
        assert_eq!(container, want_container);
        assert!(
            !container
                .annotations
                .contains_key(POD_DELETION_GRACE_PERIOD_ANNOTATION)
        );
    }

    fn hashed_container() -> impl Strategy<Value = (String, Vec<String>)> {
        (
            "[a-z0-9./:-]{1,30}",
            proptest::collection::vec(".{0,12}", 0..4),
        )
    }

    proptest! {
        #[test]
        fn container_hash_is_deterministic_and_sensitive(
            (image, command) in hashed_container(),
            (other_image, other_command) in hashed_container(),
        ) {
            let make = |image: &str, command: &[String]| Container {
                name: "app".into(),
                image: Some(image.into()),
                command: Some(command.to_vec()),
                ..Default::default()
            };
            let c = make(&image, &command);
            prop_assert_eq!(container_hash(&c), container_hash(&c.clone()));
            if other_image != image {
                prop_assert_ne!(container_hash(&c), container_hash(&make(&other_image, &command)));
            }
            if other_command != command {
                prop_assert_ne!(container_hash(&c), container_hash(&make(&image, &other_command)));
            }
        }

        #[test]
        fn expansion_never_panics_and_keeps_plain_text(
            input in "[a-z$()]{0,24}",
            value in "[a-z]{0,4}",
        ) {
            let out = expand(&input, &[("a".into(), value)]);
            if !input.contains('$') {
                prop_assert_eq!(out, input);
            }
        }
    }
}
