//! The Node's registration taints and the rejection of API pods, on the
//! real kube-apiserver (Node+RBAC, NodeRestriction) with the real binary
//! and real containerd: crilet registers its Node tainted
//! `crilet.dev/static-pods-only=true:NoSchedule` (or as
//! `--register-with-taints` says), the server refuses the node a later
//! change of its taints, and a pod bound to the node anyway goes `Failed`
//! with crilet's reason, once, and never reaches the runtime.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};

use crate::agent::*;
use crate::kube::{Lab, NodeClaim, client_from};
use crate::mirror::{mirror_of, phase, start_on};
use crate::support::{cli, eventually};

const LIMIT: Duration = Duration::from_secs(30);
const REASON: &str = "NodeRunsStaticPodsOnly";
/// What crilet logs, once, for each pod it rejects.
const REJECTED_LOG: &str = "pod rejected: the node runs static pods only";

/// The Node's taints as (key, value, effect), once it is registered,
/// without the one the API server adds.
async fn registered_taints(
    lab: &Lab,
    agent: &AgentProcess,
    node: &str,
) -> Vec<(String, String, String)> {
    let n = eventually(LIMIT, || lab.node(node)).await;
    let n = n.unwrap_or_else(|| panic!("{node} did not register:\n{}", agent.logs()));
    let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
    let t = taints.into_iter();
    let mut taints: Vec<_> = (t.map(|t| (t.key, t.value.unwrap_or_default(), t.effect))).collect();
    // The API server's own: its TaintNodesByCondition admission adds
    // not-ready to every new Node (the node lifecycle controller, which
    // the lab does not run, lifts it once the node is Ready).
    let server = triple("node.kubernetes.io/not-ready", "", "NoSchedule");
    let at = taints.iter().position(|t| *t == server);
    at.map(|i| taints.remove(i))
        .unwrap_or_else(|| panic!("no {server:?} from the server: {taints:?}"));
    taints
}

fn triple(k: &str, v: &str, e: &str) -> (String, String, String) {
    (k.into(), v.into(), e.into())
}

/// A pod the admin creates bound to `node` (no scheduler involved).
fn api_pod(name: &str, node: &str, tolerate_all: bool) -> Pod {
    let tolerations = if tolerate_all {
        serde_json::json!([{"operator": "Exists"}])
    } else {
        serde_json::json!([])
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "tolerations": tolerations,
            "containers": [{"name": "main", "image": crate::support::BUSYBOX,
                            "command": ["sleep", "100000"]}]
        }
    }))
    .unwrap()
}

/// Whether the runtime holds any sandbox or container of pod `uid`.
async fn in_runtime(rt: &crilet::cri::CriRuntime, uid: &str) -> bool {
    use crilet::cri::{ContainerFilter, PodSandboxFilter, Runtime};
    let sandboxes = rt.list_pod_sandbox(&PodSandboxFilter::default()).await;
    let containers = rt.list_containers(&ContainerFilter::default()).await;
    sandboxes.unwrap().iter().any(|s| s.metadata.uid == uid)
        || (containers.unwrap().iter())
            .any(|c| c.labels.get("io.kubernetes.pod.uid").map(String::as_str) == Some(uid))
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn the_default_taint_is_registered_and_api_pods_are_rejected_once() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-14").await;
    let mut agent = start_on(&node, &[]);
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );

    // (1) Registered with crilet's taint, and only that.
    let taints = registered_taints(&lab, &agent, &node.name).await;
    assert_eq!(
        taints,
        [triple("crilet.dev/static-pods-only", "true", "NoSchedule")]
    );
    // Only at the create: NodeRestriction refuses the node's own change.
    refused_taint_change(&node).await;

    // (3) Two pods bound anyway: one named to the node, one that
    // tolerates everything (as a DaemonSet's). Each goes Failed in 5 s.
    let mut rejected = Vec::new();
    for (what, tolerate_all) in [("bound", false), ("tolerates-all", true)] {
        // Named after the node: other tests share the server's `default`.
        let name = format!("{what}-{}", node.name);
        let name = name.as_str();
        let created = lab
            .create_pod(&api_pod(name, &node.name, tolerate_all))
            .await;
        let uid = created.metadata.uid.clone().unwrap();
        let start = Instant::now();
        let failed = eventually(Duration::from_secs(5), || async {
            let p = lab.pod("default", name).await?;
            (phase(&p) == Some("Failed")).then_some(p)
        })
        .await;
        let p = failed.unwrap_or_else(|| panic!("{name} not Failed within 5 s:\n{}", agent.logs()));
        eprintln!("{name}: Failed after {:?}", start.elapsed());
        let status = p.status.clone().unwrap();
        assert_eq!(status.reason.as_deref(), Some(REASON), "{status:?}");
        let message = status.message.clone().unwrap_or_default();
        assert!(
            message.starts_with("Pod was rejected: ") && message.contains("static pods only"),
            "{message}"
        );
        // The server's QoS class stays; the write was the node's own.
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
        assert!(crate::kube::managers(&p).iter().any(|m| m == "crilet"));
        // And a Warning Event on the pod, as the kubelet's rejectPod records.
        let event = eventually(LIMIT, || async {
            let events = lab.events_of("default", &uid).await;
            events
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(REASON))
        })
        .await
        .unwrap_or_else(|| panic!("no {REASON} Event for {name}:\n{}", agent.logs()));
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert!(
            event
                .message
                .unwrap_or_default()
                .contains("static pods only")
        );
        rejected.push((name.to_string(), uid, p.metadata.resource_version.clone()));
    }
    // The static pod beside them is mirrored and runs as ever.
    mirror_of(&lab, &agent, "web", "Running", |p| {
        phase(p) == Some("Running")
    })
    .await;

    // Never run: no sandbox or container of either, over some seconds.
    for _ in 0..10 {
        for (name, uid, _) in &rejected {
            assert!(!in_runtime(&rt, uid).await, "{name} reached the runtime");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let logs = agent.logs();
    for (name, _, _) in &rejected {
        let lines = logs
            .lines()
            .filter(|l| l.contains(REJECTED_LOG) && l.contains(&format!("{name}_default")));
        assert_eq!(lines.count(), 1, "{name} logged once:\n{logs}");
    }

    // A restarted crilet does not write them again, nor log them.
    agent.kill9();
    agent.spawn();
    mirror_of(&lab, &agent, "web", "Running again", |p| {
        phase(p) == Some("Running")
    })
    .await;
    // A window in which a rewrite, a log line or a sandbox would show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (name, uid, version) in &rejected {
        let p = lab.pod("default", name).await.expect("still there");
        assert_eq!(&p.metadata.resource_version, version, "{name} rewritten");
        assert!(!in_runtime(&rt, uid).await, "{name} reached the runtime");
    }
    let logs = agent.logs();
    assert_eq!(logs.matches(REJECTED_LOG).count(), 2, "{logs}");
    for (name, _, _) in &rejected {
        lab.delete_pod("default", name, Some(0)).await;
    }
}

/// The node's own credentials may not change its taints.
async fn refused_taint_change(node: &NodeClaim) {
    let nodes: Api<Node> = Api::all(client_from(&node.kubeconfig).await);
    let patch = serde_json::json!({"spec": {"taints": []}});
    let err = (nodes
        .patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await)
        .expect_err("NodeRestriction lets a node drop its taints");
    let text = err.to_string();
    assert!(text.contains("is not allowed to modify taints"), "{text}");
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn register_with_taints_replaces_the_default_and_empty_means_none() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-15").await;

    // (2) Two taints in the kubelet's form: those two, crilet's gone.
    let flag = "--register-with-taints=example.com/one=1:NoSchedule,two:PreferNoSchedule";
    let mut agent = start_on(&node, &[flag.into()]);
    let taints = registered_taints(&lab, &agent, &node.name).await;
    assert_eq!(
        taints,
        [
            triple("example.com/one", "1", "NoSchedule"),
            triple("two", "", "PreferNoSchedule")
        ]
    );
    agent.terminate();
    lab.delete_node(&node.name).await;

    // An explicitly empty list: no taint at all.
    let mut agent = start_on(&node, &["--register-with-taints=".into()]);
    let taints = registered_taints(&lab, &agent, &node.name).await;
    assert_eq!(taints, []);
    agent.terminate();
}

#[test]
fn a_bad_taint_fails_the_start_naming_the_flag_or_the_field() {
    let (ok, _, err) = cli(&["run", "--register-with-taints=a=b:Sometimes"]);
    assert!(!ok);
    for want in [
        "--register-with-taints",
        "unknown taint effect \"Sometimes\"",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    let (ok, _, err) = cli(&["run", "--register-with-taints=bad key:NoSchedule"]);
    assert!(
        !ok && err.contains("--register-with-taints") && err.contains("bad key"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubelet.yaml");
    let text = "kind: KubeletConfiguration\nregisterWithTaints:\n- key: a\n  effect: NoSchedule\n- key: b\n  effect: Never\n";
    std::fs::write(&config, text).unwrap();
    let (ok, _, err) = cli(&["run", "--config", config.to_str().unwrap()]);
    assert!(!ok);
    let path = config.display().to_string();
    for want in [path.as_str(), "registerWithTaints[1].effect", "\"Never\""] {
        assert!(err.contains(want), "{want}: {err}");
    }
}
