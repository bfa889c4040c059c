//! The Node object and Lease crilet keeps for its node (pure builders).

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};

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

/// A new Node object for `name`, labelled as the kubelet labels its node,
/// with its first `status` (the API server keeps a status sent on create)
/// and its registration `taints`. The taints go only here: NodeRestriction
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
            ])),
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

/// What the node reports: Ready, its addresses (`InternalIP` = `ip`,
/// `Hostname` = `name`: crilet's node name is its hostname, or
/// `--hostname-override`, as the kubelet's), the port of its kubelet
/// server and its software.
///
/// `kubelet_port` 0 means no kubelet server (`--port 0`): the kubelet
/// reports its configured port as it is, so 0 is sent too, explicitly. A
/// status patch without it would leave a port from an earlier run in
/// place, and the API server would keep dialling it; with 0 it falls back
/// to its own `--kubelet-port` default, as for a node that never said.
pub fn node_status(
    name: &str,
    ip: &str,
    runtime_version: &str,
    system: &NodeSystem,
    kubelet_port: u16,
    now: jiff::Timestamp,
    ready_since: jiff::Timestamp,
) -> NodeStatus {
    NodeStatus {
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(kubelet_port),
            }),
        }),
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            message: Some("crilet is posting ready status".into()),
            last_heartbeat_time: Some(Time(now)),
            last_transition_time: Some(Time(ready_since)),
        }]),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: ip.to_string(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: name.to_string(),
            },
        ]),
        node_info: Some(NodeSystemInfo {
            architecture: kube_arch().into(),
            operating_system: std::env::consts::OS.into(),
            container_runtime_version: runtime_version.to_string(),
            kubelet_version: format!("crilet/{}", env!("CARGO_PKG_VERSION")),
            kernel_version: system.kernel_version.clone(),
            os_image: system.os_image.clone(),
            machine_id: system.machine_id.clone(),
            boot_id: system.boot_id.clone(),
            system_uuid: system.system_uuid.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }
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
mod tests {
    use super::*;

    #[test]
    fn node_is_labelled_like_the_kubelets_and_carries_its_status() {
        let t = jiff::Timestamp::from_second(100).unwrap();
        let status = node_status(
            "node-a",
            "192.0.2.7",
            "containerd://1.6.20",
            &NodeSystem::default(),
            10250,
            t,
            t,
        );
        let n = new_node("node-a", status.clone(), &[]);
        assert_eq!(n.status, Some(status), "registered with its status");
        assert_eq!(n.spec, None, "no taints: no spec");
        let l = n.metadata.labels.unwrap();
        assert_eq!(l["kubernetes.io/hostname"], "node-a");
        assert_eq!(l["kubernetes.io/os"], "linux");
        assert_eq!(l["kubernetes.io/arch"], kube_arch());
        // Kubernetes names, not Rust's.
        #[cfg(target_arch = "x86_64")]
        assert_eq!(kube_arch(), "amd64");
        #[cfg(target_arch = "aarch64")]
        assert_eq!(kube_arch(), "arm64");
    }

    #[test]
    fn node_is_created_with_its_registration_taints_in_order() {
        let t = jiff::Timestamp::from_second(100).unwrap();
        let status = node_status("n", "192.0.2.7", "c", &NodeSystem::default(), 0, t, t);
        let taints = [
            Taint {
                key: "crilet.dev/static-pods-only".into(),
                value: Some("true".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            },
            Taint {
                key: "b".into(),
                effect: "NoExecute".into(),
                ..Default::default()
            },
        ];
        let n = new_node("n", status, &taints);
        let spec = serde_json::to_value(n.spec).unwrap();
        assert_eq!(
            spec,
            serde_json::json!({"taints": [
                {"key": "crilet.dev/static-pods-only", "value": "true", "effect": "NoSchedule"},
                {"key": "b", "effect": "NoExecute"},
            ]})
        );
    }

    #[test]
    fn status_is_ready_with_addresses_and_the_system() {
        let t = jiff::Timestamp::from_second(100).unwrap();
        let system = NodeSystem {
            kernel_version: "6.1.0-18-amd64".into(),
            os_image: "Debian GNU/Linux 12 (bookworm)".into(),
            machine_id: "m".into(),
            boot_id: "b".into(),
            system_uuid: "u".into(),
        };
        let s = node_status(
            "node-a",
            "192.0.2.7",
            "containerd://1.6.20",
            &system,
            10250,
            t,
            t,
        );
        let c = &s.conditions.unwrap()[0];
        assert_eq!((c.type_.as_str(), c.status.as_str()), ("Ready", "True"));
        let a: Vec<(String, String)> = s
            .addresses
            .unwrap()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        assert_eq!(
            a,
            [
                ("InternalIP".to_string(), "192.0.2.7".to_string()),
                ("Hostname".to_string(), "node-a".to_string())
            ]
        );
        let info = s.node_info.unwrap();
        assert_eq!(info.container_runtime_version, "containerd://1.6.20");
        assert_eq!(info.kernel_version, "6.1.0-18-amd64");
        assert_eq!(info.os_image, "Debian GNU/Linux 12 (bookworm)");
        let ids = (info.machine_id, info.boot_id, info.system_uuid);
        assert_eq!(ids, ("m".into(), "b".into(), "u".into()));
    }

    fn kubelet_port(s: &NodeStatus) -> Option<i32> {
        Some(s.daemon_endpoints.as_ref()?.kubelet_endpoint.as_ref()?.port)
    }

    #[test]
    fn the_kubelet_endpoint_carries_the_servers_port() {
        let t = jiff::Timestamp::from_second(100).unwrap();
        let s = |port| node_status("n", "192.0.2.7", "c", &NodeSystem::default(), port, t, t);
        for port in [10250, 1, 65535, 12345] {
            assert_eq!(kubelet_port(&s(port)), Some(i32::from(port)), "{port}");
        }
        // No server: 0 is sent, not left out, so a patch clears an old port.
        assert_eq!(kubelet_port(&s(0)), Some(0));
        let patch = serde_json::json!({ "status": s(0) });
        assert_eq!(
            patch["status"]["daemonEndpoints"],
            serde_json::json!({ "kubeletEndpoint": { "Port": 0 } })
        );
        let patch = serde_json::json!({ "status": s(10250) });
        assert_eq!(
            patch["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
            10250
        );
    }

    #[test]
    fn lease_is_held_by_the_node_and_owned_by_it() {
        let t = jiff::Timestamp::from_second(100).unwrap();
        let l = node_lease("node-a", "uid-1", t);
        assert_eq!(l.metadata.namespace.as_deref(), Some("kube-node-lease"));
        assert_eq!(l.metadata.owner_references.unwrap()[0].uid, "uid-1");
        let spec = l.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("node-a"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
    }
}
