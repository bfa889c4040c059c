//! Mirror pods when the API server fails: down, 500s, a dropped watch, bad
//! credentials that start working. A real server cannot produce these on
//! cue, so these run on the in-repo double (`apiserver.rs`); everything the
//! server decides is tested on the real kube-apiserver (`mirror.rs`).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::agent::*;
use crate::apiserver::{ApiServer, Fault};
use crate::support::eventually;

const LIMIT: Duration = Duration::from_secs(30);

/// An agent that mirrors its pods to the double (a kubeconfig for the node).
pub fn start(api: &ApiServer) -> AgentProcess {
    let dir = tempfile::Builder::new()
        .prefix("crilet-kube-")
        .tempdir()
        .unwrap();
    let kubeconfig = api.kubeconfig(dir.path(), NODE);
    // The kubeconfig must outlive the agent: keep the directory.
    let path = kubeconfig.to_string_lossy().into_owned();
    std::mem::forget(dir);
    AgentProcess::start_with(&["--kubeconfig".to_string(), path])
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

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn api_server_down_leaves_pods_running_and_status_shows_restarts() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    api.set_fault(Fault::Down);
    let agent = start(&api);
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
async fn dropped_watch_resumes_and_a_forced_delete_is_still_seen() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    let agent = start(&api);
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );
    let m = mirror_of(&api, &agent, "web", "created", |_| true).await;
    // The pod runs first: what follows must leave this very container be.
    let v = wait_for(&rt, &agent, "web", LIMIT, "main running", |v| {
        v.running("main").is_some()
    })
    .await;
    let main_id = v.running("main").unwrap().id.clone();
    // The watch drops (once it is streaming: answered 200): it resumes,
    // and a forced delete is still noticed.
    let watches = || {
        let requests = api.requests().into_iter();
        requests
            .filter(|r| r.query.contains("watch=true") && r.status == 200)
            .count()
    };
    let streaming = eventually(LIMIT, || async { (watches() >= 1).then_some(()) }).await;
    assert!(streaming.is_some(), "no watch:\n{}", agent.logs());
    let before = watches();
    api.drop_watches();
    let resumed = eventually(LIMIT, || async { (watches() > before).then_some(()) }).await;
    assert!(
        resumed.is_some(),
        "the watch did not resume:\n{}",
        agent.logs()
    );
    let uid = m.metadata.uid.clone().unwrap();
    api.delete_pod("default", &format!("web-{NODE}"), Some(0));
    mirror_of(
        &api,
        &agent,
        "web",
        "recreated after the watch dropped",
        |p| p.metadata.uid.as_deref() != Some(&uid),
    )
    .await;
    // None of this touched the pod on the node: the same container runs.
    let v = pod_view(&rt, "web").await;
    let ids: Vec<&str> = v.named("main").iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, [main_id.as_str()], "main restarted:\n{}", agent.logs());
    assert!(
        v.running("main").is_some(),
        "main stopped:\n{}",
        agent.logs()
    );
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn wrong_credentials_are_logged_and_pods_run() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let api = ApiServer::start().await;
    api.set_token(Some("a-token-crilet-does-not-have".into()));
    let agent = start(&api);
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
