//! crilet's kube-rs adapter (`KubeMirrorClient`) against the real
//! kube-apiserver, with a node's own credentials: each call the agent makes,
//! and what the server answers to it. No runtime and no agent: the server's
//! decisions on exactly the requests crilet sends.

use std::time::Duration;

use crilet::kubeapi::client::{KubeMirrorClient, MirrorClient, PodEvent};
use crilet::mirror::decide::mirror_pod_for;
use crilet::nodestatus::allocatable::NodeResources;
use crilet::nodestatus::node::{
    NodeRef, NodeStatusInputs, NodeSystem, new_node, node_lease, node_status,
};
use crilet::pod::defaults::{PodSource, apply_static_defaults};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;

use crate::kube::Lab;

/// A static pod of `node`, as the file source hands it to the agent.
fn static_pod(node: &str) -> Pod {
    let mut p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "main", "image": "docker.io/library/busybox:latest"}]}
    }))
    .unwrap();
    let now = jiff::Timestamp::now();
    apply_static_defaults(&mut p, node, &PodSource::File("/etc/pods/web.yaml"), now);
    p
}

/// The next event of the pod watch, within 10 s.
async fn next_event(
    watch: &mut futures::stream::BoxStream<'static, crilet::kubeapi::client::Result<PodEvent>>,
) -> PodEvent {
    let next = tokio::time::timeout(Duration::from_secs(10), watch.next()).await;
    let next = next
        .expect("a pod event within 10 s")
        .expect("the watch goes on");
    next.expect("no watch error")
}

#[tokio::test]
#[ignore = "needs the real kube-apiserver (scripts/test.sh)"]
async fn the_node_client_against_the_real_api_server() {
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-9").await;
    let client = KubeMirrorClient::from_kubeconfig(&node.kubeconfig)
        .await
        .expect("the node's kubeconfig");

    // Its own Node may be read (none yet); another node's may not.
    assert!(client.get_node(&node.name).await.unwrap().is_none());
    let refused = client.get_node("crilet-elsewhere").await.unwrap_err();
    assert_eq!(refused.code(), Some(403), "{refused}");
    let text = refused.to_string();
    assert!(
        text.contains("403 Forbidden") && text.contains("only its own Node object"),
        "{text}"
    );

    // Registered with its status: the server keeps it.
    let now = jiff::Timestamp::now();
    let system = NodeSystem {
        kernel_version: "6.1.0-test".into(),
        os_image: "Test Linux".into(),
        ..NodeSystem::default()
    };
    let capacity = NodeResources::from_machine(2, 4 << 30, 110);
    let none = std::collections::BTreeSet::new();
    let inputs = |port| NodeStatusInputs {
        name: &node.name,
        ip: "127.0.0.1",
        runtime_version: "containerd://test",
        system: &system,
        kubelet_port: port,
        capacity: &capacity,
        allocatable: &capacity,
        images: vec![],
        under_pressure: &none,
        runtime_handlers: &[],
        not_ready: &[],
    };
    let status = node_status(&inputs(10250), &[], now);
    let created = client
        .create_node(&new_node(&node.name, status, &[]))
        .await
        .unwrap();
    let node_uid = created.metadata.uid.clone().expect("a node uid");
    let stored = lab.node(&node.name).await.expect("the node");
    let stored = stored.status.expect("the status sent on create");
    let addresses: Vec<(String, String)> = stored
        .addresses
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        addresses,
        [
            ("InternalIP".to_string(), "127.0.0.1".to_string()),
            ("Hostname".to_string(), node.name.clone())
        ]
    );
    // Where the API server dials the kubelet server: the port kept.
    let port = |n: &k8s_openapi::api::core::v1::Node| {
        n.status
            .as_ref()
            .and_then(|s| s.daemon_endpoints.as_ref())
            .and_then(|d| d.kubelet_endpoint.as_ref())
            .map(|e| e.port)
    };
    let node_now = lab.node(&node.name).await.expect("the node");
    assert_eq!(port(&node_now), Some(10250), "{stored:?}");
    let info = stored.node_info.expect("nodeInfo");
    assert_eq!(
        (info.kernel_version.as_str(), info.os_image.as_str()),
        ("6.1.0-test", "Test Linux")
    );
    let later = now + jiff::SignedDuration::from_secs(5);
    let status = node_status(&inputs(0), &[], later);
    client.patch_node_status(&node.name, &status).await.unwrap();
    // A later run without a kubelet server (`--port 0`) clears the port:
    // the patch carries 0 instead of leaving 10250 behind.
    let patched = lab.node(&node.name).await.expect("the node");
    assert_eq!(port(&patched), Some(0), "{:?}", patched.status);
    // The lease is created, then renewed from the copy the server
    // returned (one PUT), and a stale copy (Conflict) is read again.
    let created = client
        .renew_lease(&node_lease(&node.name, &node_uid, now), None)
        .await
        .unwrap();
    let renewed = client
        .renew_lease(&node_lease(&node.name, &node_uid, later), Some(&created))
        .await
        .unwrap();
    assert_ne!(
        renewed.metadata.resource_version, created.metadata.resource_version,
        "written"
    );
    let latest = later + jiff::SignedDuration::from_secs(5);
    let again = client
        .renew_lease(&node_lease(&node.name, &node_uid, latest), Some(&created))
        .await
        .expect("a stale copy is read again, not an error");
    let lease = lab.lease(&node.name).await.expect("the lease");
    assert_eq!(
        lease.metadata.resource_version,
        again.metadata.resource_version
    );
    let renew_time = lease.spec.and_then(|s| s.renew_time).expect("renewTime");
    assert_eq!(renew_time.0.as_second(), latest.as_second());

    // The watch of this node's pods starts with an empty list.
    let mut watch = client.watch_pods(&node.name);
    match next_event(&mut watch).await {
        PodEvent::Restarted(pods) => assert!(pods.is_empty(), "{pods:?}"),
        other => panic!("{other:?}"),
    }

    // The mirror crilet builds is admitted as a mirror pod of this node...
    let pod = static_pod(&node.name);
    let ours = NodeRef {
        name: node.name.clone(),
        uid: node_uid.clone(),
    };
    let mirror = client
        .create_pod(&mirror_pod_for(&pod, &ours))
        .await
        .unwrap();
    let mirror_uid = mirror.metadata.uid.clone().unwrap();
    match next_event(&mut watch).await {
        PodEvent::Applied(p) => assert_eq!(p.metadata.uid.as_deref(), Some(&*mirror_uid)),
        other => panic!("{other:?}"),
    }
    // ...but not with a stale Node uid, nor for another node.
    let full = mirror.metadata.name.clone().unwrap();
    lab.delete_pod("default", &full, Some(0)).await;
    let stale = NodeRef {
        name: node.name.clone(),
        uid: "00000000-0000-4000-8000-000000000000".into(),
    };
    let e = client
        .create_pod(&mirror_pod_for(&pod, &stale))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(403), "{e}");
    assert!(e.to_string().contains("UID mismatch"), "{e}");
    let elsewhere = static_pod("crilet-elsewhere");
    let e = client
        .create_pod(&mirror_pod_for(
            &elsewhere,
            &NodeRef {
                name: "crilet-elsewhere".into(),
                uid: node_uid.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(403), "{e}");
    assert!(
        e.to_string()
            .contains("can only create pods with spec.nodeName set to itself"),
        "{e}"
    );

    // Status goes through the status subresource.
    let mirror = client
        .create_pod(&mirror_pod_for(&pod, &ours))
        .await
        .unwrap();
    let mirror_uid = mirror.metadata.uid.clone().unwrap();
    let status = k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Running".into()),
        ..Default::default()
    };
    let patch = serde_json::json!({ "status": status });
    client
        .patch_pod_status("default", &full, &patch)
        .await
        .unwrap();
    let stored = lab.pod("default", &full).await.unwrap();
    assert_eq!(crate::mirror::phase(&stored), Some("Running"));

    // A delete whose uid precondition fails leaves the pod (and counts as
    // done: the pod it meant is gone); the right uid removes it at once.
    client
        .delete_pod("default", &full, "00000000-0000-4000-8000-000000000001")
        .await
        .unwrap();
    let still = lab.pod("default", &full).await.expect("kept");
    assert_eq!(still.metadata.uid.as_deref(), Some(&*mirror_uid));
    assert!(still.metadata.deletion_timestamp.is_none());
    client
        .delete_pod("default", &full, &mirror_uid)
        .await
        .unwrap();
    assert!(
        lab.pod("default", &full).await.is_none(),
        "not removed at once: a graceful delete only marks a bound pod"
    );
    // Deleting what is gone is done too.
    client
        .delete_pod("default", &full, &mirror_uid)
        .await
        .unwrap();
}
