//! Mirror pods on the real kube-apiserver (Node+RBAC, NodeRestriction), with
//! the real binary and real containerd: the cases of the kubelet's own
//! MirrorPod node tests, where the server decides what is allowed, what a
//! delete does and who owns what. crilet runs with its node's own
//! credentials (CN system:node:NAME). The faults a real server cannot
//! produce on cue are in `mirror_faults.rs`, on the double.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::agent::*;
use crate::kube::{Lab, NodeClaim, managers};
use crate::support::{eventually, runtime_kind};

const LIMIT: Duration = Duration::from_secs(30);

/// An agent on the claimed node, mirroring with that node's credentials.
pub fn start_on(node: &NodeClaim, extra_args: &[String]) -> AgentProcess {
    let mut args = node.kubeconfig_args();
    args.extend_from_slice(extra_args);
    AgentProcess::start_on(&node.name, &args)
}

/// Waits for the mirror pod of static pod `name` that passes `check`.
pub async fn mirror_of(
    lab: &Lab,
    agent: &AgentProcess,
    name: &str,
    what: &str,
    check: impl Fn(&Pod) -> bool,
) -> Pod {
    let full = agent.pod_name(name);
    let found = eventually(LIMIT, || async {
        lab.pod("default", &full).await.filter(|p| check(p))
    })
    .await;
    match found {
        Some(p) => p,
        None => panic!(
            "no mirror pod {full} that is {what}; the API server has {:#?}\ncrilet log:\n{}",
            lab.pod("default", &full).await.map(|p| p.metadata),
            agent.logs()
        ),
    }
}

/// Waits until the API server has no pod `name` of this agent.
async fn mirror_gone(lab: &Lab, agent: &AgentProcess, name: &str, what: &str) {
    let full = agent.pod_name(name);
    let gone = eventually(LIMIT, || async {
        lab.pod("default", &full).await.is_none().then_some(())
    })
    .await;
    assert!(gone.is_some(), "mirror {full} {what}:\n{}", agent.logs());
}

pub fn ann<'a>(p: &'a Pod, k: &str) -> Option<&'a str> {
    p.metadata.annotations.as_ref()?.get(k).map(String::as_str)
}

pub fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref()?.phase.as_deref()
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().expect("a uid from the server")
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn mirror_pod_lifecycle() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-1").await;
    let agent = start_on(&node, &[]);
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );
    let full = agent.pod_name("web");

    // Created, as the kubelet makes it, and Running.
    let m = mirror_of(&lab, &agent, "web", "Running", |p| {
        phase(p) == Some("Running")
    })
    .await;
    let hash = ann(&m, "kubernetes.io/config.hash")
        .expect("config.hash")
        .to_string();
    assert_eq!(ann(&m, "kubernetes.io/config.mirror"), Some(hash.as_str()));
    assert_eq!(ann(&m, "kubernetes.io/config.source"), Some("file"));
    assert_eq!(
        m.spec.as_ref().unwrap().node_name.as_deref(),
        Some(node.name.as_str())
    );
    // Owned by the Node crilet registered, by the uid the server gave it.
    let n = lab.node(&node.name).await.expect("the node registered");
    let owners = m.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        (owners[0].api_version.as_str(), owners[0].kind.as_str()),
        ("v1", "Node")
    );
    assert_eq!(owners[0].name, node.name);
    assert_eq!(Some(&owners[0].uid), n.metadata.uid.as_ref());
    assert_eq!(owners[0].controller, Some(true));
    // The Node: labelled, Ready, reachable at its address; its Lease held.
    let labels = n.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("kubernetes.io/hostname"),
        Some(&node.name),
        "{labels:?}"
    );
    let status = n.status.clone().expect("node status");
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready");
    assert_eq!(ready.map(|c| c.status.as_str()), Some("True"), "{status:?}");
    let internal = status
        .addresses
        .iter()
        .flatten()
        .find(|a| a.type_ == "InternalIP");
    assert_eq!(internal.map(|a| a.address.as_str()), Some("127.0.0.1"));
    let hostname = status
        .addresses
        .iter()
        .flatten()
        .find(|a| a.type_ == "Hostname");
    assert_eq!(hostname.map(|a| &a.address), Some(&node.name));
    // The port `crilet run` was given for its kubelet server; none here
    // (the flag is not wired yet), so the Node says 0.
    let port = status
        .daemon_endpoints
        .as_ref()
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .map(|e| e.port);
    assert_eq!(port, Some(0), "{status:?}");
    let info = status.node_info.expect("nodeInfo");
    // <runtime name>://<version>, as the kubelet writes it.
    let scheme = format!("{}://", runtime_kind().runtime_name());
    assert!(
        info.container_runtime_version.starts_with(&scheme),
        "{info:?}"
    );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(info.kernel_version, kernel.trim(), "{info:?}");
    assert!(!info.os_image.is_empty(), "{info:?}");
    let lease = lab.lease(&node.name).await.expect("a node lease");
    let spec = lease.spec.expect("lease spec");
    assert_eq!(spec.holder_identity.as_ref(), Some(&node.name));
    assert!(spec.renew_time.is_some());
    // Every write was crilet's: the server names each writer (its
    // User-Agent) in managedFields.
    for (what, writers) in [("mirror", managers(&m)), ("node", managers_of_node(&n))] {
        assert!(
            !writers.is_empty() && writers.iter().all(|w| w == "crilet"),
            "{what} written by {writers:?}"
        );
    }

    // A graceful delete (kubectl's default): the server only marks the
    // pod, for its grace period, and crilet finishes it (grace 0, its uid as
    // precondition) and makes a new one. With no kubelet to finish it, the
    // old one would stay for ever.
    let uid0 = uid(&m);
    let marked = lab.delete_pod("default", &full, None).await;
    let marked = marked.expect("the server's answer");
    assert!(marked.metadata.deletion_timestamp.is_some(), "{marked:?}");
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(1));
    let m1 = mirror_of(&lab, &agent, "web", "recreated", |p| {
        p.metadata.uid.as_deref() != Some(&uid0) && p.metadata.deletion_timestamp.is_none()
    })
    .await;
    assert!(
        agent.logs().contains("reason=BeingDeleted"),
        "{}",
        agent.logs()
    );
    // Deleted at once (grace 0): recreated with a new uid.
    let uid1 = uid(&m1);
    lab.delete_pod("default", &full, Some(0)).await;
    let m2 = mirror_of(&lab, &agent, "web", "recreated again", |p| {
        p.metadata.uid.as_deref() != Some(&uid1)
    })
    .await;

    // A label edit on the mirror changes nothing on the node, nor the mirror.
    let before = agent.view(&rt, "web").await;
    let uid2 = uid(&m2);
    lab.label_pod("default", &full, "edited", "yes").await;
    // Nothing must follow: a window in which a wrong reaction would show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = agent.view(&rt, "web").await;
    assert_eq!(
        before.running("main").map(|c| c.id.clone()),
        after.running("main").map(|c| c.id.clone())
    );
    let kept = lab.pod("default", &full).await.expect("the edited mirror");
    assert_eq!(kept.metadata.uid.as_deref(), Some(uid2.as_str()));

    // The manifest rewritten with another image (pulled from the harness's
    // loopback registry) replaces the mirror, and the new pod runs it.
    let other = "127.0.0.1:5000/crilet/pulltest:1";
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec busybox sleep 100000")
            .replace("docker.io/library/busybox:latest", other),
    );
    let m3 = mirror_of(&lab, &agent, "web", "replaced with the new image", |p| {
        ann(p, "kubernetes.io/config.mirror").is_some_and(|h| h != hash)
            && p.metadata.uid.as_deref() != Some(&uid2)
            && phase(p) == Some("Running")
    })
    .await;
    let spec_image = m3.spec.as_ref().unwrap().containers[0].image.clone();
    assert_eq!(spec_image.as_deref(), Some(other));
    // The container is created from the image's ID, as the kubelet
    // creates it (CreateContainer names the resolved image); the runtime
    // lists it by that ID (containerd) or by its repo digest (CRI-O).
    let pulled = (crilet::cri::Runtime::image_status(&rt, other)
        .await
        .unwrap())
    .expect("the new image, pulled");
    let names: Vec<String> = std::iter::once(pulled.id)
        .chain(pulled.repo_digests)
        .collect();
    let v = agent.view(&rt, "web").await;
    let image = v
        .running("main")
        .map(|c| c.image.clone())
        .unwrap_or_default();
    assert!(
        names.contains(&image),
        "{image} is none of {names:?}: {v:#?}"
    );

    // Removing the manifest removes the mirror.
    agent.remove("web.yaml");
    mirror_gone(&lab, &agent, "web", "left after its manifest went").await;
}

fn managers_of_node(n: &k8s_openapi::api::core::v1::Node) -> Vec<String> {
    let fields = n.metadata.managed_fields.iter().flatten();
    fields.filter_map(|f| f.manager.clone()).collect()
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn mirror_outlives_its_static_pod_for_the_grace_period() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-2").await;
    let agent = start_on(&node, &[]);
    // The container takes 3 s to stop after SIGTERM (grace period 20 s).
    let manifest = busybox_pod(
        "slow",
        "Always",
        "trap 'sleep 3; exit 0' TERM; while true; do sleep 0.2; done",
    )
    .replace(
        "terminationGracePeriodSeconds: 1",
        "terminationGracePeriodSeconds: 20",
    );
    agent.write("slow.yaml", &manifest);
    mirror_of(&lab, &agent, "slow", "Running", |p| {
        phase(p) == Some("Running")
    })
    .await;
    agent.remove("slow.yaml");
    // Watch both sides until the mirror goes: whenever it is seen gone, the
    // container has stopped already.
    let full = agent.pod_name("slow");
    let seen = eventually(LIMIT, || async {
        let mirror = lab.pod("default", &full).await;
        let view = agent.view(&rt, "slow").await;
        mirror.is_none().then_some(view)
    })
    .await;
    let view = seen.unwrap_or_else(|| panic!("mirror never removed:\n{}", agent.logs()));
    assert!(
        view.running("main").is_none(),
        "the mirror went while its static pod was still terminating: {view:#?}\n{}",
        agent.logs()
    );
    let logs = agent.logs();
    let terminated = logs.find("pod stopped");
    let deleted = logs.find("deleting mirror pod");
    assert!(
        terminated.is_some() && terminated < deleted,
        "mirror deleted before the pod terminated:\n{logs}"
    );
    // Removal follows the stop; nothing waits for it, but it happens.
    let removed = eventually(LIMIT, || async {
        agent
            .view(&rt, "slow")
            .await
            .sandboxes
            .is_empty()
            .then_some(())
    })
    .await;
    assert!(
        removed.is_some(),
        "sandbox never removed:\n{}",
        agent.logs()
    );
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn foreign_mirror_and_a_deleted_node_converge() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-3").await;
    // Someone else (an admin) made a mirror for our pod, with a wrong hash
    // and no owner, before the node registered.
    let full = format!("web-{}", node.name);
    let foreign: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": full, "namespace": "default",
                     "annotations": {"kubernetes.io/config.mirror": "not-the-hash"}},
        "spec": {"nodeName": node.name, "containers": [{"name": "main", "image": "other"}]}
    }))
    .unwrap();
    let foreign = lab.create_pod(&foreign).await;
    // The manifest is there at crilet's first read: a foreign mirror seen
    // before its static pod would rightly be deleted as an orphan instead.
    let mut agent = AgentProcess::prepare_on(&node.name, &node.kubeconfig_args());
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );
    agent.spawn();
    let correct = |p: &Pod| {
        ann(p, "kubernetes.io/config.mirror") == ann(p, "kubernetes.io/config.hash")
            && p.metadata
                .owner_references
                .as_ref()
                .is_some_and(|o| o.len() == 1)
    };
    let m = mirror_of(&lab, &agent, "web", "ours", |p| {
        correct(p) && p.metadata.uid != foreign.metadata.uid
    })
    .await;
    let logs = agent.logs();
    assert!(
        logs.lines().any(|l| l.contains("deleting mirror pod")
            && l.contains(&full)
            && l.contains("reason=Outdated")),
        "{logs}"
    );

    // The pod runs (its mirror may be written before its containers start).
    let v = wait_for(&rt, &agent, "web", LIMIT, "main running", |v| {
        v.running("main").is_some()
    })
    .await;
    let main_id = v.running("main").unwrap().id.clone();

    // An admin deletes the Node. No garbage collector runs here, so the
    // mirror stays, owned by a Node that is gone: crilet registers a new
    // Node and replaces the mirror with one the new Node owns.
    let old_node_uid = m.metadata.owner_references.as_ref().unwrap()[0].uid.clone();
    lab.delete_node(&node.name).await;
    let m2 = mirror_of(&lab, &agent, "web", "owned by the new Node", |p| {
        correct(p) && p.metadata.owner_references.as_ref().unwrap()[0].uid != old_node_uid
    })
    .await;
    let new_node = lab.node(&node.name).await.expect("the node back");
    assert_eq!(
        Some(&m2.metadata.owner_references.as_ref().unwrap()[0].uid),
        new_node.metadata.uid.as_ref()
    );
    assert!(
        agent.logs().contains("reason=NotOwnedByNode"),
        "{}",
        agent.logs()
    );
    // None of this touched the pod on the node.
    let v = agent.view(&rt, "web").await;
    let running = v.running("main").map(|c| c.id.as_str());
    assert_eq!(running, Some(main_id.as_str()), "{v:#?}\n{}", agent.logs());
    assert_eq!(v.named("main").len(), 1, "{v:#?}\n{}", agent.logs());
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn a_quiet_pod_watch_outlives_the_read_timeout() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-10").await;
    let agent = start_on(&node, &[]);
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );
    let m = mirror_of(&lab, &agent, "web", "Running", |p| {
        phase(p) == Some("Running")
    })
    .await;
    // Nothing changes on the node's pods for longer than crilet's read
    // timeout (30 s): a real server sends nothing on the watch meanwhile.
    // The quiet period is the condition under test, so it is waited out.
    let quiet = crilet::kubeapi::client::READ_TIMEOUT + Duration::from_secs(5);
    tokio::time::sleep(quiet).await;
    let logs = agent.logs();
    assert!(
        !logs.contains("pod watch failed"),
        "a quiet watch was cut:\n{logs}"
    );
    // And the watch is live: a forced delete is noticed at once.
    let started = std::time::Instant::now();
    lab.delete_pod("default", &agent.pod_name("web"), Some(0))
        .await;
    let old = uid(&m);
    mirror_of(&lab, &agent, "web", "recreated", |p| {
        p.metadata.uid.as_deref() != Some(&old)
    })
    .await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "recreated after {took:?}");
}
