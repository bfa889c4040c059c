//! The Node object and Lease crilet keeps for its node (pure builders):
//! its labels, its status (capacity, allocatable, conditions, node info,
//! images) and its heartbeat lease.
//!
//! Invariant: pure; a condition's `lastTransitionTime` moves only when its
//! status does.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    ContainerImage, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints,
    NodeRuntimeHandler, NodeRuntimeHandlerFeatures, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};

use super::allocatable::NodeResources;
use super::pressure::{PressureCondition, pressure_conditions};
use crate::cri::Image;

/// The Node a mirror pod is owned by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub name: String,
    pub uid: String,
}

/// Namespace of node heartbeats.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// How long a lease stays valid without renewal (the kubelet's default).
pub const LEASE_DURATION_SECONDS: i32 = 40;

/// The architecture as Kubernetes names it.
pub fn kube_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The annotation that hands attaching and detaching the node's volumes to
/// the attach/detach controller, as the kubelet's default
/// `enableControllerAttachDetach` does (crilet attaches nothing itself).
pub const CONTROLLER_MANAGED_ATTACH_DETACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";

/// A new Node object for `name`, labelled and annotated as the kubelet
/// registers its node (`initialNode`: the hostname, OS and architecture
/// labels, the deprecated `beta.kubernetes.io/` pair included, and
/// [`CONTROLLER_MANAGED_ATTACH_DETACH`]), with its first `status` (the API
/// server keeps a status sent on create) and its registration `taints`. The taints go only here: NodeRestriction
/// refuses a node's own later change of them ("is not allowed to modify
/// taints"), so a changed `--register-with-taints` reaches an existing
/// Node only through an admin (`kubectl taint`) or a new Node.
pub fn new_node(name: &str, status: NodeStatus, taints: &[Taint]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), name.to_string()),
                (
                    "kubernetes.io/os".to_string(),
                    std::env::consts::OS.to_string(),
                ),
                ("kubernetes.io/arch".to_string(), kube_arch().to_string()),
                (
                    "beta.kubernetes.io/os".to_string(),
                    std::env::consts::OS.to_string(),
                ),
                (
                    "beta.kubernetes.io/arch".to_string(),
                    kube_arch().to_string(),
                ),
            ])),
            annotations: Some(BTreeMap::from([(
                CONTROLLER_MANAGED_ATTACH_DETACH.to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        },
        spec: (!taints.is_empty()).then(|| NodeSpec {
            taints: Some(taints.to_vec()),
            ..Default::default()
        }),
        status: Some(status),
    }
}

/// What the node says about its OS and machine, for `status.nodeInfo`
/// (the kubelet reads these through cadvisor). Empty when unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSystem {
    pub kernel_version: String,
    /// The distribution's PRETTY_NAME, e.g. "Debian GNU/Linux 12 (bookworm)".
    pub os_image: String,
    pub machine_id: String,
    pub boot_id: String,
    pub system_uuid: String,
}

/// The Kubernetes release whose kubelet crilet behaves as: the API and the
/// node-side semantics it implements and is tested against (the lab's
/// kube-apiserver 1.32).
pub const KUBERNETES_VERSION: &str = "v1.32.0";

/// `nodeInfo.kubeletVersion`: [`KUBERNETES_VERSION`] with crilet's own
/// version as semver build metadata, `v1.32.0+crilet.0.1.0`, as k3s
/// (`v1.32.0+k3s1`) and RKE2 do. Build metadata, not a pre-release: it
/// parses as a Kubernetes version (client-go's `ParseGeneric` and
/// `ParseSemantic`) and compares equal to v1.32.0, where a pre-release
/// (`v1.32.0-crilet…`) would sort before the release it implements.
pub fn kubelet_version() -> String {
    format!("{KUBERNETES_VERSION}+crilet.{}", env!("CARGO_PKG_VERSION"))
}

/// `nodeInfo.containerRuntimeVersion` as the kubelet writes it:
/// `<runtime name>://<version>`, the version read as a generic version
/// (`ParseGeneric`: an optional `v`, then at least two dot-separated
/// numbers, the first without a leading zero; whatever follows dropped), so Debian's containerd `1.6.20~ds1` is `1.6.20`; `Unknown`
/// when the runtime's version does not start with two numbers.
pub fn container_runtime_version(runtime_name: &str, runtime_version: &str) -> String {
    let text = runtime_version.trim_start();
    let text = text.strip_prefix('v').unwrap_or(text);
    // The numbers run until the first character that is not a digit or a
    // dot; a dot with no number after it belongs to the rest.
    let end = (text.find(|c: char| !c.is_ascii_digit() && c != '.')).unwrap_or(text.len());
    let numbers: Vec<&str> = text[..end]
        .split('.')
        .take_while(|n| !n.is_empty())
        .collect();
    let first_ok = numbers
        .first()
        .is_some_and(|n| *n == "0" || !n.starts_with('0'));
    let version = match numbers
        .iter()
        .map(|n| n.parse::<u64>())
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(parsed) if parsed.len() >= 2 && first_ok => parsed
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
        _ => "Unknown".to_string(),
    };
    format!("{runtime_name}://{version}")
}

/// The kubelet's `MaxNamesPerImageInNodeStatus`.
pub const MAX_NAMES_PER_IMAGE: usize = 5;

/// `status.images` as the kubelet's setter lists them: largest first (a
/// tie by id, descending), at most `max_images` of them (-1: all), each
/// named by its digests then its tags, at most five names.
pub fn node_images(images: &[Image], max_images: i32) -> Vec<ContainerImage> {
    let mut sorted: Vec<&Image> = images.iter().collect();
    sorted.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| b.id.cmp(&a.id)));
    if let Ok(max) = usize::try_from(max_images) {
        sorted.truncate(max);
    }
    sorted
        .into_iter()
        .map(|image| {
            let names: Vec<String> = (image.repo_digests.iter())
                .chain(&image.repo_tags)
                .take(MAX_NAMES_PER_IMAGE)
                .cloned()
                .collect();
            ContainerImage {
                names: (!names.is_empty()).then_some(names),
                size_bytes: i64::try_from(image.size).ok(),
            }
        })
        .collect()
}

/// Everything one status update is made of.
#[derive(Debug, Clone)]
pub struct NodeStatusInputs<'a> {
    pub name: &'a str,
    pub ip: &'a str,
    pub runtime_version: &'a str,
    pub system: &'a NodeSystem,
    /// The kubelet server's port for `daemonEndpoints`; 0: none.
    pub kubelet_port: u16,
    pub capacity: &'a NodeResources,
    pub allocatable: &'a NodeResources,
    pub images: Vec<ContainerImage>,
    pub under_pressure: &'a BTreeSet<PressureCondition>,
    /// The runtime's handlers, in its order (none on a runtime that lists
    /// none, such as containerd 1.6).
    pub runtime_handlers: &'a [crate::cri::RuntimeHandler],
    /// What keeps the node NotReady (`runtime_state`); none: Ready.
    pub not_ready: &'a [String],
}

/// What the node reports: capacity and allocatable, the pressure
/// conditions and Ready, its addresses (`InternalIP` = `ip`, `Hostname` =
/// `name`: crilet's node name is its hostname, or `--hostname-override`, as
/// the kubelet's), the port of its kubelet server, its software and images.
/// Each condition is updated from its namesake in `previous` (the status
/// last written, or the Node's on the server), so `lastTransitionTime`
/// moves only when its status does.
///
/// `kubelet_port` 0 means no kubelet server (`--port 0`): the kubelet
/// reports its configured port as it is, so 0 is sent too, explicitly. A
/// status patch without it would leave a port from an earlier run in
/// place, and the API server would keep dialling it; with 0 it falls back
/// to its own `--kubelet-port` default, as for a node that never said.
pub fn node_status(
    inputs: &NodeStatusInputs,
    previous: &[NodeCondition],
    now: jiff::Timestamp,
) -> NodeStatus {
    let mut conditions: Vec<NodeCondition> = previous
        .iter()
        .filter(|c| c.type_ == "Ready")
        .cloned()
        .collect();
    let ready = ready_condition(conditions.first(), inputs.not_ready, now);
    conditions = vec![ready];
    let pressure = pressure_conditions(previous, inputs.under_pressure, now);
    conditions.splice(0..0, pressure);
    NodeStatus {
        capacity: Some(inputs.capacity.to_resource_list()),
        allocatable: Some(inputs.allocatable.to_resource_list()),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(inputs.kubelet_port),
            }),
        }),
        conditions: Some(conditions),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: inputs.ip.to_string(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: inputs.name.to_string(),
            },
        ]),
        node_info: Some(NodeSystemInfo {
            architecture: kube_arch().into(),
            operating_system: std::env::consts::OS.into(),
            container_runtime_version: inputs.runtime_version.to_string(),
            kubelet_version: kubelet_version(),
            // Deprecated, but still set by kubelet v1.32 (its
            // DisableNodeKubeProxyVersion gate is off): the kubelet's own
            // version.
            kube_proxy_version: kubelet_version(),
            kernel_version: inputs.system.kernel_version.clone(),
            os_image: inputs.system.os_image.clone(),
            machine_id: inputs.system.machine_id.clone(),
            boot_id: inputs.system.boot_id.clone(),
            system_uuid: inputs.system.system_uuid.clone(),
            ..Default::default()
        }),
        images: Some(inputs.images.clone()),
        runtime_handlers: runtime_handlers(inputs.runtime_handlers),
        ..Default::default()
    }
}

/// `runtimeHandlers`, as the kubelet v1.32 copies them from the runtime's
/// status (its RecursiveReadOnlyMounts gate is on): each handler with its
/// recursive read-only and user namespace support, in the runtime's order.
fn runtime_handlers(handlers: &[crate::cri::RuntimeHandler]) -> Option<Vec<NodeRuntimeHandler>> {
    let list: Vec<NodeRuntimeHandler> = (handlers.iter())
        .map(|h| NodeRuntimeHandler {
            name: Some(h.name.clone()),
            features: Some(NodeRuntimeHandlerFeatures {
                recursive_read_only_mounts: Some(h.recursive_read_only_mounts),
                user_namespaces: Some(h.user_namespaces),
            }),
        })
        .collect();
    (!list.is_empty()).then_some(list)
}

/// `Ready`: True while crilet posts status (its heartbeat now), False
/// (`KubeletNotReady`, the errors as Go aggregates them) while `not_ready`
/// names any; its transition time kept from a previous condition of the
/// same status.
fn ready_condition(
    previous: Option<&NodeCondition>,
    not_ready: &[String],
    now: jiff::Timestamp,
) -> NodeCondition {
    let (status, reason, message) = match super::runtime_state::aggregate(not_ready) {
        None => (
            "True",
            "KubeletReady",
            "crilet is posting ready status".to_string(),
        ),
        Some(errors) => ("False", "KubeletNotReady", errors),
    };
    let since = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => None,
    };
    NodeCondition {
        type_: "Ready".into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: since.or(Some(Time(now))),
    }
}

/// `nodeStatusHasChanged`: whether two statuses differ in more than their
/// conditions' heartbeat times; an unchanged status is written only every
/// `nodeStatusReportFrequency`.
pub fn status_has_changed(old: &NodeStatus, new: &NodeStatus) -> bool {
    fn beatless(s: &NodeStatus) -> NodeStatus {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
        s
    }
    beatless(old) != beatless(new)
}

/// The pressure conditions that are True in a status, for events.
pub fn pressure_of(status: &NodeStatus) -> BTreeSet<String> {
    (status.conditions.iter().flatten())
        .filter(|c| c.status == "True" && c.type_ != "Ready")
        .map(|c| c.type_.clone())
        .collect()
}

/// The node's heartbeat lease, owned by the Node so it goes with it.
pub fn node_lease(name: &str, node_uid: &str, now: jiff::Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NODE_LEASE_NAMESPACE.to_string()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: name.to_string(),
                uid: node_uid.to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name.to_string()),
            lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
