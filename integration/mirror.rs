//! Mirror pods on the API server double: the cases of the kubelet's own
//! MirrorPod node tests, with the real binary and real containerd.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::agent::*;
use crate::apiserver::{ApiServer, Fault};
use crate::support::eventually;

const LIMIT: Duration = Duration::from_secs(30);

/// An agent that mirrors its pods to `api` (a kubeconfig for the node).
pub async fn start(api: &ApiServer) -> AgentProcess {
    start_with(api, &[])
}

/// As [`start`], with more flags.
pub fn start_with(api: &ApiServer, extra_args: &[String]) -> AgentProcess {
    let dir = tempfile::Builder::new()
        .prefix("crilet-kube-")
        .tempdir()
        .unwrap();
    let kubeconfig = api.kubeconfig(dir.path(), NODE);
    // The kubeconfig must outlive the agent: keep the directory.
    let path = kubeconfig.to_string_lossy().into_owned();
    std::mem::forget(dir);
    let mut args = vec!["--kubeconfig".to_string(), path];
    args.extend_from_slice(extra_args);
    AgentProcess::start_with(&args)
}

/// Waits for the mirror pod of static pod `name` that passes `check`.
pub async fn mirror_of(
    api: &ApiServer,
    agent: &AgentProcess,
    name: &str,
    what: &str,
    check: impl Fn(&Pod) -> bool,
) -> Pod {
    let full = format!("{name}-{NODE}");
    eventually(LIMIT, || async {
        api.pod("default", &full).filter(|p| check(p))
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "no mirror pod {full} that is {what}; API server has {:#?}\ncrilet log:\n{}",
            api.pods()
                .iter()
                .map(|p| (p.metadata.name.clone(), p.metadata.uid.clone()))
                .collect::<Vec<_>>(),
            agent.logs()
        )
    })
}

fn ann<'a>(p: &'a Pod, k: &str) -> Option<&'a str> {
    p.metadata.annotations.as_ref()?.get(k).map(String::as_str)
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn mirror_pod_lifecycle() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    let agent = start(&api).await;
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );

    // Created, as the kubelet makes it, and Running.
    let m = mirror_of(&api, &agent, "web", "Running", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    let hash = ann(&m, "kubernetes.io/config.hash")
        .expect("config.hash")
        .to_string();
    assert_eq!(ann(&m, "kubernetes.io/config.mirror"), Some(hash.as_str()));
    assert_eq!(ann(&m, "kubernetes.io/config.source"), Some("file"));
    let owners = m.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    let node = api
        .nodes()
        .into_iter()
        .find(|n| n.metadata.name.as_deref() == Some(NODE))
        .expect("node registered");
    assert_eq!(owners[0].kind, "Node");
    assert_eq!(owners[0].name, NODE);
    assert_eq!(Some(&owners[0].uid), node.metadata.uid.as_ref());
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(m.spec.as_ref().unwrap().node_name.as_deref(), Some(NODE));
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("kubernetes.io/hostname").map(String::as_str),
        Some(NODE)
    );
    assert!(
        api.leases()
            .iter()
            .any(|l| l.metadata.name.as_deref() == Some(NODE)),
        "no lease"
    );
    assert!(
        api.requests()
            .iter()
            .all(|r| r.user_agent.starts_with("crilet/")),
        "user agent"
    );

    // Deleted gracefully, and then forcibly: recreated with a new UID each time.
    let uid0 = m.metadata.uid.clone().unwrap();
    api.delete_pod("default", &format!("web-{NODE}"), Some(30));
    let m1 = mirror_of(&api, &agent, "web", "recreated", |p| {
        p.metadata.uid.as_deref() != Some(&uid0) && p.metadata.deletion_timestamp.is_none()
    })
    .await;
    let uid1 = m1.metadata.uid.clone().unwrap();
    api.delete_pod("default", &format!("web-{NODE}"), Some(0));
    mirror_of(&api, &agent, "web", "recreated again", |p| {
        p.metadata.uid.as_deref() != Some(&uid1)
    })
    .await;

    // A label edit on the mirror changes nothing on the node.
    let before = pod_view(&rt, "web").await;
    let mut edited = api.pod("default", &format!("web-{NODE}")).unwrap();
    let uid2 = edited.metadata.uid.clone().unwrap();
    edited
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("edited".into(), "yes".into());
    api.update_pod(edited);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = pod_view(&rt, "web").await;
    assert_eq!(
        before.running("main").map(|c| c.id.clone()),
        after.running("main").map(|c| c.id.clone())
    );
    assert_eq!(
        api.pod("default", &format!("web-{NODE}"))
            .and_then(|p| p.metadata.uid),
        Some(uid2.clone())
    );

    // The manifest rewritten with another image (pulled from the harness's
    // loopback registry) replaces the mirror, and the new pod runs it.
    let other = "127.0.0.1:5000/crilet/pulltest:1";
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec busybox sleep 100000")
            .replace("docker.io/library/busybox:latest", other),
    );
    let m3 = mirror_of(&api, &agent, "web", "replaced with the new image", |p| {
        ann(p, "kubernetes.io/config.mirror").is_some_and(|h| h != hash)
            && p.metadata.uid.as_deref() != Some(&uid2)
            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    let spec_image = m3.spec.as_ref().unwrap().containers[0].image.clone();
    assert_eq!(spec_image.as_deref(), Some(other));
    let v = pod_view(&rt, "web").await;
    assert_eq!(
        v.running("main").map(|c| c.image.as_str()),
        Some(other),
        "{v:#?}"
    );

    // Removing the manifest removes the mirror.
    agent.remove("web.yaml");
    let gone = eventually(LIMIT, || async {
        api.pod("default", &format!("web-{NODE}"))
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "mirror left after its manifest went:\n{}",
        agent.logs()
    );
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn api_server_down_leaves_pods_running_and_status_shows_restarts() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    api.set_fault(Fault::Down);
    let agent = start(&api).await;
    agent.write(
        "crash.yaml",
        &busybox_pod("crash", "Always", "sleep 1; exit 1"),
    );
    agent.write("up.yaml", &busybox_pod("up", "Always", "exec sleep 100000"));
    // The API server is down: pods run all the same.
    wait_for(
        &rt,
        &agent,
        "up",
        LIMIT,
        "running while the API server is down",
        |v| v.running("main").is_some(),
    )
    .await;
    // Down for 30 s, as in the kubelet's test.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(api.pods().is_empty());
    api.clear_fault();
    mirror_of(&api, &agent, "up", "Running", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    // The crash-looping container's restarts reach the mirror's status.
    mirror_of(&api, &agent, "crash", "showing a restart", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .is_some_and(|c| c.restart_count >= 1)
    })
    .await;
    let v = pod_view(&rt, "up").await;
    assert_eq!(
        v.named("main").len(),
        1,
        "the API server outage restarted a pod: {v:#?}"
    );
    // A 500 on every call: logged, retried, pods untouched.
    api.set_fault(Fault::Status500);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(pod_view(&rt, "up").await.running("main").is_some());
    api.clear_fault();
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn mirror_outlives_its_static_pod_for_the_grace_period() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    let agent = start(&api).await;
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
    mirror_of(&api, &agent, "slow", "Running", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    agent.remove("slow.yaml");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        api.pod("default", &format!("slow-{NODE}")).is_some(),
        "the mirror went before its static pod finished terminating:\n{}",
        agent.logs()
    );
    let gone = eventually(LIMIT, || async {
        api.pod("default", &format!("slow-{NODE}"))
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "mirror never removed:\n{}", agent.logs());
    assert!(pod_view(&rt, "slow").await.sandboxes.is_empty());
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn foreign_mirror_deleted_node_and_dropped_watch_converge() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    // Someone else made a mirror for our pod, with a wrong hash and no owner.
    let foreign: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("web-{NODE}"), "namespace": "default",
                     "annotations": {"kubernetes.io/config.mirror": "not-the-hash"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "other"}]}
    }))
    .unwrap();
    let foreign = api.create_pod(foreign);
    let agent = start(&api).await;
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );
    let correct = |p: &Pod| {
        ann(p, "kubernetes.io/config.mirror") == ann(p, "kubernetes.io/config.hash")
            && p.metadata
                .owner_references
                .as_ref()
                .is_some_and(|o| o.len() == 1)
    };
    let m = mirror_of(&api, &agent, "web", "ours", |p| {
        correct(p) && p.metadata.uid != foreign.metadata.uid
    })
    .await;
    let logs = agent.logs();
    assert!(
        logs.contains("deleting mirror pod") && logs.contains(&format!("web-{NODE}")),
        "{logs}"
    );

    // The Node is deleted by someone else: re-registered, mirror re-owned.
    let old_node_uid = m.metadata.owner_references.as_ref().unwrap()[0].uid.clone();
    api.delete_node(NODE);
    let m2 = mirror_of(&api, &agent, "web", "owned by the new Node", |p| {
        correct(p) && p.metadata.owner_references.as_ref().unwrap()[0].uid != old_node_uid
    })
    .await;
    let new_node = api
        .nodes()
        .into_iter()
        .find(|n| n.metadata.name.as_deref() == Some(NODE))
        .expect("node back");
    assert_eq!(
        Some(&m2.metadata.owner_references.as_ref().unwrap()[0].uid),
        new_node.metadata.uid.as_ref()
    );

    // The watch drops: it resumes, and a forced delete is still noticed.
    api.drop_watches();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let uid = m2.metadata.uid.clone().unwrap();
    api.delete_pod("default", &format!("web-{NODE}"), Some(0));
    mirror_of(
        &api,
        &agent,
        "web",
        "recreated after the watch dropped",
        |p| p.metadata.uid.as_deref() != Some(&uid),
    )
    .await;
    // None of this touched the pod on the node.
    assert_eq!(pod_view(&rt, "web").await.named("main").len(), 1);
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn wrong_credentials_are_logged_and_pods_run() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    api.set_token(Some("a-token-crilet-does-not-have".into()));
    let agent = start(&api).await;
    agent.write("a.yaml", &busybox_pod("a", "Always", "exec sleep 100000"));
    wait_for(&rt, &agent, "a", LIMIT, "running without API access", |v| {
        v.running("main").is_some()
    })
    .await;
    let logged = eventually(LIMIT, || async {
        let l = agent.logs();
        (l.contains("401") || l.contains("Unauthorized")).then_some(())
    })
    .await;
    assert!(logged.is_some(), "401 not logged:\n{}", agent.logs());
    assert!(api.pods().is_empty());
    // Forbidden on every call: logged too, the pod untouched.
    api.set_token(None);
    api.set_fault(Fault::Forbidden403);
    let logged = eventually(LIMIT, || async {
        let l = agent.logs();
        (l.contains("403") || l.contains("Forbidden")).then_some(())
    })
    .await;
    assert!(logged.is_some(), "403 not logged:\n{}", agent.logs());
    api.clear_fault();
    api.set_token(None);
    mirror_of(&api, &agent, "a", "created once credentials work", |_| true).await;
    assert_eq!(pod_view(&rt, "a").await.named("main").len(), 1);
}
