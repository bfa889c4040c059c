//! Conversions between domain types and generated CRI messages.
//!
//! Invariant: this is the only place (with `cri`) that names `pb` types.
//! Enum values the runtime sends that we do not know map to a safe default
//! (Unknown / NotReady) rather than failing the whole call.

use super::types::*;
use crate::proto::runtime::v1 as pb;

fn int64(v: Option<i64>) -> Option<pb::Int64Value> {
    v.map(|value| pb::Int64Value { value })
}

fn uint64(v: Option<pb::UInt64Value>) -> Option<u64> {
    v.map(|v| v.value)
}

fn ns_mode_to(m: NamespaceMode) -> i32 {
    (match m {
        NamespaceMode::Pod => pb::NamespaceMode::Pod,
        NamespaceMode::Container => pb::NamespaceMode::Container,
        NamespaceMode::Node => pb::NamespaceMode::Node,
        NamespaceMode::Target => pb::NamespaceMode::Target,
    }) as i32
}

fn ns_mode_from(m: i32) -> NamespaceMode {
    match pb::NamespaceMode::try_from(m) {
        Ok(pb::NamespaceMode::Container) => NamespaceMode::Container,
        Ok(pb::NamespaceMode::Node) => NamespaceMode::Node,
        Ok(pb::NamespaceMode::Target) => NamespaceMode::Target,
        _ => NamespaceMode::Pod,
    }
}

fn ns_options_to(o: &NamespaceOptions) -> pb::NamespaceOption {
    pb::NamespaceOption {
        network: ns_mode_to(o.network),
        pid: ns_mode_to(o.pid),
        ipc: ns_mode_to(o.ipc),
        target_id: o.target_id.clone(),
    }
}

fn ns_options_from(o: Option<pb::NamespaceOption>) -> NamespaceOptions {
    let o = o.unwrap_or_default();
    NamespaceOptions {
        network: ns_mode_from(o.network),
        pid: ns_mode_from(o.pid),
        ipc: ns_mode_from(o.ipc),
        target_id: o.target_id,
    }
}

fn profile_to(p: &SecurityProfile) -> pb::SecurityProfile {
    use pb::security_profile::ProfileType;
    let (t, r) = match p {
        SecurityProfile::RuntimeDefault => (ProfileType::RuntimeDefault, String::new()),
        SecurityProfile::Unconfined => (ProfileType::Unconfined, String::new()),
        SecurityProfile::Localhost(path) => (ProfileType::Localhost, path.clone()),
    };
    pb::SecurityProfile {
        profile_type: t as i32,
        localhost_ref: r,
    }
}

fn sandbox_metadata_to(m: &PodSandboxMetadata) -> pb::PodSandboxMetadata {
    pb::PodSandboxMetadata {
        name: m.name.clone(),
        uid: m.uid.clone(),
        namespace: m.namespace.clone(),
        attempt: m.attempt,
    }
}

fn sandbox_metadata_from(m: Option<pb::PodSandboxMetadata>) -> PodSandboxMetadata {
    let m = m.unwrap_or_default();
    PodSandboxMetadata {
        name: m.name,
        uid: m.uid,
        namespace: m.namespace,
        attempt: m.attempt,
    }
}

fn container_metadata_from(m: Option<pb::ContainerMetadata>) -> ContainerMetadata {
    let m = m.unwrap_or_default();
    ContainerMetadata {
        name: m.name,
        attempt: m.attempt,
    }
}

pub(super) fn sandbox_config_to(c: &PodSandboxConfig) -> pb::PodSandboxConfig {
    let s = &c.security;
    pb::PodSandboxConfig {
        metadata: Some(sandbox_metadata_to(&c.metadata)),
        hostname: c.hostname.clone(),
        log_directory: c.log_directory.clone(),
        dns_config: c.dns_config.as_ref().map(|d| pb::DnsConfig {
            servers: d.servers.clone(),
            searches: d.searches.clone(),
            options: d.options.clone(),
        }),
        port_mappings: c
            .port_mappings
            .iter()
            .map(|p| pb::PortMapping {
                protocol: (match p.protocol {
                    Protocol::Tcp => pb::Protocol::Tcp,
                    Protocol::Udp => pb::Protocol::Udp,
                    Protocol::Sctp => pb::Protocol::Sctp,
                }) as i32,
                container_port: p.container_port,
                host_port: p.host_port,
                host_ip: p.host_ip.clone(),
            })
            .collect(),
        labels: c.labels.clone(),
        annotations: c.annotations.clone(),
        linux: Some(pb::LinuxPodSandboxConfig {
            cgroup_parent: c.cgroup_parent.clone(),
            security_context: Some(pb::LinuxSandboxSecurityContext {
                namespace_options: Some(ns_options_to(&s.namespace_options)),
                run_as_user: int64(s.run_as_user),
                run_as_group: int64(s.run_as_group),
                readonly_rootfs: s.readonly_rootfs,
                supplemental_groups: s.supplemental_groups.clone(),
                privileged: s.privileged,
                seccomp: s.seccomp.as_ref().map(profile_to),
                ..Default::default()
            }),
            sysctls: c.sysctls.clone(),
            overhead: c.overhead.as_ref().map(resources_to),
            resources: c.resources.as_ref().map(resources_to),
        }),
    }
}

fn sandbox_state_from(s: i32) -> PodSandboxState {
    match pb::PodSandboxState::try_from(s) {
        Ok(pb::PodSandboxState::SandboxReady) => PodSandboxState::Ready,
        _ => PodSandboxState::NotReady,
    }
}

fn sandbox_state_to(s: PodSandboxState) -> i32 {
    (match s {
        PodSandboxState::Ready => pb::PodSandboxState::SandboxReady,
        PodSandboxState::NotReady => pb::PodSandboxState::SandboxNotready,
    }) as i32
}

pub(super) fn sandbox_status_from(s: pb::PodSandboxStatus) -> PodSandboxStatus {
    let network = s.network.unwrap_or_default();
    let linux = s.linux.unwrap_or_default();
    PodSandboxStatus {
        id: s.id,
        metadata: sandbox_metadata_from(s.metadata),
        state: sandbox_state_from(s.state),
        created_at: s.created_at,
        ip: network.ip,
        additional_ips: network.additional_ips.into_iter().map(|i| i.ip).collect(),
        namespace_options: ns_options_from(linux.namespaces.and_then(|n| n.options)),
        labels: s.labels,
        annotations: s.annotations,
        runtime_handler: s.runtime_handler,
    }
}

pub(super) fn sandbox_from(s: pb::PodSandbox) -> PodSandbox {
    PodSandbox {
        id: s.id,
        metadata: sandbox_metadata_from(s.metadata),
        state: sandbox_state_from(s.state),
        created_at: s.created_at,
        labels: s.labels,
        annotations: s.annotations,
        runtime_handler: s.runtime_handler,
    }
}

pub(super) fn sandbox_filter_to(f: &PodSandboxFilter) -> pb::PodSandboxFilter {
    pb::PodSandboxFilter {
        id: f.id.clone().unwrap_or_default(),
        state: f.state.map(|s| pb::PodSandboxStateValue {
            state: sandbox_state_to(s),
        }),
        label_selector: f.label_selector.clone(),
    }
}

/// An image as a request names it, with `user_specified_image` the name
/// the user gave (`image` itself when none is given). CRI-O refuses
/// CreateContainer without it ("user specified image not specified, cannot
/// verify image signature").
pub(super) fn image_spec(image: &str, user_specified: &str) -> pb::ImageSpec {
    let user_specified = if user_specified.is_empty() {
        image
    } else {
        user_specified
    };
    pb::ImageSpec {
        image: image.to_string(),
        user_specified_image: user_specified.to_string(),
        ..Default::default()
    }
}

fn mount_to(m: &Mount) -> pb::Mount {
    pb::Mount {
        container_path: m.container_path.clone(),
        host_path: m.host_path.clone(),
        readonly: m.readonly,
        selinux_relabel: m.selinux_relabel,
        propagation: (match m.propagation {
            MountPropagation::Private => pb::MountPropagation::PropagationPrivate,
            MountPropagation::HostToContainer => pb::MountPropagation::PropagationHostToContainer,
            MountPropagation::Bidirectional => pb::MountPropagation::PropagationBidirectional,
        }) as i32,
        recursive_read_only: m.recursive_read_only,
        ..Default::default()
    }
}

fn mount_from(m: pb::Mount) -> Mount {
    Mount {
        container_path: m.container_path,
        host_path: m.host_path,
        readonly: m.readonly,
        selinux_relabel: m.selinux_relabel,
        propagation: match pb::MountPropagation::try_from(m.propagation) {
            Ok(pb::MountPropagation::PropagationHostToContainer) => {
                MountPropagation::HostToContainer
            }
            Ok(pb::MountPropagation::PropagationBidirectional) => MountPropagation::Bidirectional,
            _ => MountPropagation::Private,
        },
        recursive_read_only: m.recursive_read_only,
    }
}

fn resources_to(r: &LinuxContainerResources) -> pb::LinuxContainerResources {
    pb::LinuxContainerResources {
        cpu_period: r.cpu_period,
        cpu_quota: r.cpu_quota,
        cpu_shares: r.cpu_shares,
        memory_limit_in_bytes: r.memory_limit_in_bytes,
        oom_score_adj: r.oom_score_adj,
        cpuset_cpus: r.cpuset_cpus.clone(),
        cpuset_mems: r.cpuset_mems.clone(),
        hugepage_limits: (r.hugepage_limits.iter())
            .map(|h| pb::HugepageLimit {
                page_size: h.page_size.clone(),
                limit: h.limit,
            })
            .collect(),
        unified: (r.unified.iter())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        memory_swap_limit_in_bytes: r.memory_swap_limit_in_bytes,
    }
}

fn resources_from(r: pb::LinuxContainerResources) -> LinuxContainerResources {
    LinuxContainerResources {
        cpu_period: r.cpu_period,
        cpu_quota: r.cpu_quota,
        cpu_shares: r.cpu_shares,
        memory_limit_in_bytes: r.memory_limit_in_bytes,
        oom_score_adj: r.oom_score_adj,
        cpuset_cpus: r.cpuset_cpus,
        cpuset_mems: r.cpuset_mems,
        hugepage_limits: (r.hugepage_limits.into_iter())
            .map(|h| HugepageLimit {
                page_size: h.page_size,
                limit: h.limit,
            })
            .collect(),
        unified: r.unified.into_iter().collect(),
        memory_swap_limit_in_bytes: r.memory_swap_limit_in_bytes,
    }
}

fn container_security_to(s: &ContainerSecurity) -> pb::LinuxContainerSecurityContext {
    pb::LinuxContainerSecurityContext {
        // None without capabilities to add or drop, as the kubelet sends
        // none when the spec sets none.
        capabilities: (!s.capabilities_add.is_empty() || !s.capabilities_drop.is_empty()).then(
            || pb::Capability {
                add_capabilities: s.capabilities_add.clone(),
                drop_capabilities: s.capabilities_drop.clone(),
                ..Default::default()
            },
        ),
        privileged: s.privileged,
        namespace_options: Some(ns_options_to(&s.namespace_options)),
        run_as_user: int64(s.run_as_user),
        run_as_group: int64(s.run_as_group),
        run_as_username: s.run_as_username.clone(),
        readonly_rootfs: s.readonly_rootfs,
        supplemental_groups: s.supplemental_groups.clone(),
        no_new_privs: s.no_new_privs,
        masked_paths: s.masked_paths.clone(),
        readonly_paths: s.readonly_paths.clone(),
        seccomp: s.seccomp.as_ref().map(profile_to),
        apparmor: s.apparmor.as_ref().map(profile_to),
        ..Default::default()
    }
}

pub(super) fn container_config_to(c: &ContainerConfig) -> pb::ContainerConfig {
    let linux = if c.resources.is_some() || c.security.is_some() {
        Some(pb::LinuxContainerConfig {
            resources: c.resources.as_ref().map(resources_to),
            security_context: c.security.as_ref().map(container_security_to),
        })
    } else {
        None
    };
    pb::ContainerConfig {
        metadata: Some(pb::ContainerMetadata {
            name: c.metadata.name.clone(),
            attempt: c.metadata.attempt,
        }),
        image: Some(image_spec(&c.image, &c.user_specified_image)),
        command: c.command.clone(),
        args: c.args.clone(),
        working_dir: c.working_dir.clone(),
        envs: c
            .envs
            .iter()
            .map(|(key, value)| pb::KeyValue {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
        mounts: c.mounts.iter().map(mount_to).collect(),
        labels: c.labels.clone(),
        annotations: c.annotations.clone(),
        log_path: c.log_path.clone(),
        stdin: c.stdin,
        stdin_once: c.stdin_once,
        tty: c.tty,
        linux,
        ..Default::default()
    }
}

fn container_state_from(s: i32) -> ContainerState {
    match pb::ContainerState::try_from(s) {
        Ok(pb::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(pb::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(pb::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

fn container_state_to(s: ContainerState) -> i32 {
    (match s {
        ContainerState::Created => pb::ContainerState::ContainerCreated,
        ContainerState::Running => pb::ContainerState::ContainerRunning,
        ContainerState::Exited => pb::ContainerState::ContainerExited,
        ContainerState::Unknown => pb::ContainerState::ContainerUnknown,
    }) as i32
}

pub(super) fn container_from(c: pb::Container) -> Container {
    Container {
        id: c.id,
        pod_sandbox_id: c.pod_sandbox_id,
        metadata: container_metadata_from(c.metadata),
        image: c.image.map(|i| i.image).unwrap_or_default(),
        image_ref: c.image_ref,
        state: container_state_from(c.state),
        created_at: c.created_at,
        labels: c.labels,
        annotations: c.annotations,
    }
}

pub(super) fn container_filter_to(f: &ContainerFilter) -> pb::ContainerFilter {
    pb::ContainerFilter {
        id: f.id.clone().unwrap_or_default(),
        state: f.state.map(|s| pb::ContainerStateValue {
            state: container_state_to(s),
        }),
        pod_sandbox_id: f.pod_sandbox_id.clone().unwrap_or_default(),
        label_selector: f.label_selector.clone(),
    }
}

pub(super) fn container_status_from(s: pb::ContainerStatus) -> ContainerStatus {
    ContainerStatus {
        id: s.id,
        metadata: container_metadata_from(s.metadata),
        state: container_state_from(s.state),
        created_at: s.created_at,
        started_at: s.started_at,
        finished_at: s.finished_at,
        exit_code: s.exit_code,
        image: s.image.map(|i| i.image).unwrap_or_default(),
        image_ref: s.image_ref,
        reason: s.reason,
        message: s.message,
        labels: s.labels,
        annotations: s.annotations,
        mounts: s.mounts.into_iter().map(mount_from).collect(),
        log_path: s.log_path,
        resources: s.resources.and_then(|r| r.linux).map(resources_from),
    }
}

fn cpu_from(c: pb::CpuUsage) -> CpuUsage {
    CpuUsage {
        timestamp: c.timestamp,
        usage_core_nano_seconds: uint64(c.usage_core_nano_seconds),
        usage_nano_cores: uint64(c.usage_nano_cores),
    }
}

fn memory_from(m: pb::MemoryUsage) -> MemoryUsage {
    MemoryUsage {
        timestamp: m.timestamp,
        working_set_bytes: uint64(m.working_set_bytes),
        available_bytes: uint64(m.available_bytes),
        usage_bytes: uint64(m.usage_bytes),
        rss_bytes: uint64(m.rss_bytes),
        page_faults: uint64(m.page_faults),
        major_page_faults: uint64(m.major_page_faults),
    }
}

pub(super) fn fs_usage_from(f: pb::FilesystemUsage) -> FilesystemUsage {
    FilesystemUsage {
        timestamp: f.timestamp,
        mountpoint: f.fs_id.map(|i| i.mountpoint).unwrap_or_default(),
        used_bytes: uint64(f.used_bytes),
        inodes_used: uint64(f.inodes_used),
    }
}

pub(super) fn container_stats_from(s: pb::ContainerStats) -> ContainerStats {
    let attrs = s.attributes.unwrap_or_default();
    ContainerStats {
        id: attrs.id,
        metadata: container_metadata_from(attrs.metadata),
        labels: attrs.labels,
        annotations: attrs.annotations,
        cpu: s.cpu.map(cpu_from),
        memory: s.memory.map(memory_from),
        writable_layer: s.writable_layer.map(fs_usage_from),
    }
}

pub(super) fn container_stats_filter_to(f: &ContainerStatsFilter) -> pb::ContainerStatsFilter {
    pb::ContainerStatsFilter {
        id: f.id.clone().unwrap_or_default(),
        pod_sandbox_id: f.pod_sandbox_id.clone().unwrap_or_default(),
        label_selector: f.label_selector.clone(),
    }
}

fn interface_from(i: pb::NetworkInterfaceUsage) -> InterfaceUsage {
    InterfaceUsage {
        name: i.name,
        rx_bytes: uint64(i.rx_bytes),
        rx_errors: uint64(i.rx_errors),
        tx_bytes: uint64(i.tx_bytes),
        tx_errors: uint64(i.tx_errors),
    }
}

pub(super) fn sandbox_stats_from(s: pb::PodSandboxStats) -> PodSandboxStats {
    let attrs = s.attributes.unwrap_or_default();
    let linux = s.linux.unwrap_or_default();
    PodSandboxStats {
        id: attrs.id,
        metadata: sandbox_metadata_from(attrs.metadata),
        labels: attrs.labels,
        annotations: attrs.annotations,
        cpu: linux.cpu.map(cpu_from),
        memory: linux.memory.map(memory_from),
        network: linux.network.map(|n| NetworkUsage {
            timestamp: n.timestamp,
            default_interface: n.default_interface.map(interface_from),
            interfaces: n.interfaces.into_iter().map(interface_from).collect(),
        }),
        process_count: linux.process.and_then(|p| uint64(p.process_count)),
        containers: linux
            .containers
            .into_iter()
            .map(container_stats_from)
            .collect(),
    }
}

pub(super) fn sandbox_stats_filter_to(f: &PodSandboxStatsFilter) -> pb::PodSandboxStatsFilter {
    pb::PodSandboxStatsFilter {
        id: f.id.clone().unwrap_or_default(),
        label_selector: f.label_selector.clone(),
    }
}

pub(super) fn image_from(i: pb::Image) -> Image {
    Image {
        id: i.id,
        repo_tags: i.repo_tags,
        repo_digests: i.repo_digests,
        size: i.size,
        uid: i.uid.map(|u| u.value),
        username: i.username,
        pinned: i.pinned,
    }
}

pub(super) fn auth_to(a: &AuthConfig) -> pb::AuthConfig {
    pb::AuthConfig {
        username: a.username.clone(),
        password: a.password.clone(),
        auth: a.auth.clone(),
        server_address: a.server_address.clone(),
        identity_token: a.identity_token.clone(),
        registry_token: a.registry_token.clone(),
    }
}

pub(super) fn runtime_status_from(
    s: pb::RuntimeStatus,
    handlers: Vec<pb::RuntimeHandler>,
) -> RuntimeStatus {
    RuntimeStatus {
        conditions: s
            .conditions
            .into_iter()
            .map(|c| RuntimeCondition {
                kind: c.r#type,
                status: c.status,
                reason: c.reason,
                message: c.message,
            })
            .collect(),
        handlers: (handlers.into_iter())
            .map(|h| {
                let features = h.features.unwrap_or_default();
                RuntimeHandler {
                    name: h.name,
                    recursive_read_only_mounts: features.recursive_read_only_mounts,
                    user_namespaces: features.user_namespaces,
                }
            })
            .collect(),
    }
}

pub(super) fn cgroup_driver_from(d: pb::CgroupDriver) -> CgroupDriver {
    match d {
        pb::CgroupDriver::Systemd => CgroupDriver::Systemd,
        pb::CgroupDriver::Cgroupfs => CgroupDriver::Cgroupfs,
    }
}

pub(super) fn container_event_from(e: pb::ContainerEventResponse) -> ContainerEvent {
    let event_type = match pb::ContainerEventType::try_from(e.container_event_type) {
        Ok(pb::ContainerEventType::ContainerCreatedEvent) => ContainerEventType::Created,
        Ok(pb::ContainerEventType::ContainerStartedEvent) => ContainerEventType::Started,
        Ok(pb::ContainerEventType::ContainerStoppedEvent) => ContainerEventType::Stopped,
        Ok(pb::ContainerEventType::ContainerDeletedEvent) => ContainerEventType::Deleted,
        Err(_) => ContainerEventType::Unknown(e.container_event_type),
    };
    let non_empty = |s: String| Some(s).filter(|s| !s.is_empty());
    let sandbox = e.pod_sandbox_status;
    ContainerEvent {
        container_id: e.container_id,
        event_type,
        created_at: e.created_at,
        pod_sandbox_id: sandbox.as_ref().and_then(|s| non_empty(s.id.clone())),
        pod_uid: sandbox
            .and_then(|s| s.metadata)
            .and_then(|m| non_empty(m.uid)),
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
