//! `crilet run --manifest-url` end to end, against the agent tests' own
//! containerd and a manifest server on 127.0.0.1: a pod from the URL runs,
//! survives the server going away, and is removed when the server comes
//! back without it; a name in both sources; and an unanswered URL that
//! holds back the deletion of its own pods only.

use std::time::Duration;

use crilet::pod::defaults::{PodSource, apply_api_defaults, static_pod_uid};
use crilet::pod::model::parse_pod;

use crate::agent::*;
use crate::manifest_server::{ManifestServer, Reply};
use crate::support::eventually;
use crate::url_source::pod_list;

const LIMIT: Duration = Duration::from_secs(30);

fn url_agent(url: &str) -> AgentProcess {
    AgentProcess::start_with(&[
        "--manifest-url".into(),
        url.into(),
        "--http-check-frequency".into(),
        "1s".into(),
    ])
}

fn sleeper(name: &str) -> String {
    busybox_pod(name, "Always", "exec sleep 100000")
}

/// Waits for `needle` to appear in the agent's log `count` times.
async fn log_shows(agent: &AgentProcess, needle: &str, count: usize) {
    let found = eventually(LIMIT, || async {
        (agent.logs().matches(needle).count() >= count).then_some(())
    })
    .await;
    assert!(
        found.is_some(),
        "no {count} × {needle:?} in the log:\n{}",
        agent.logs()
    );
}

fn source_of(v: &PodView) -> Option<String> {
    v.sandboxes
        .first()
        .and_then(|s| s.annotations.get("kubernetes.io/config.source").cloned())
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn url_pod_runs_outlives_the_server_and_goes_when_dropped() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let mut server = ManifestServer::start(Reply::manifest(sleeper("fromurl"))).await;
    let url = server.url();
    let agent = url_agent(&url);

    let v = wait_for(&rt, &agent, "fromurl", LIMIT, "a running container", |v| {
        v.running("main").is_some()
    })
    .await;
    assert_eq!(source_of(&v).as_deref(), Some("http"));
    // The UID recipe hashes url:<url>.
    let mut pod = parse_pod(&url, sleeper("fromurl").as_bytes()).unwrap();
    apply_api_defaults(&mut pod);
    assert_eq!(
        v.uid(),
        Some(static_pod_uid(&pod, NODE, &PodSource::Url(&url)))
    );
    let container = v.running("main").unwrap().id.clone();

    // The server goes away: polls fail, the pod keeps running as it was.
    server.stop().await;
    log_shows(&agent, "manifest URL poll failed", 3).await;
    let v = pod_view(&rt, "fromurl").await;
    assert_eq!(
        v.running("main").map(|c| c.id.clone()),
        Some(container),
        "the pod was touched while the server was away: {v:#?}\n{}",
        agent.logs()
    );

    // It comes back without the pod: the pod is removed.
    let _back = ManifestServer::start_on(server.addr, Reply::manifest(pod_list(&[]))).await;
    wait_for(&rt, &agent, "fromurl", LIMIT, "removal", |v| {
        v.sandboxes.is_empty() && v.containers.is_empty()
    })
    .await;
    log_shows(&agent, "manifest URL answers again", 1).await;
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn url_and_directory_defining_one_name_refuse_the_later() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let server = ManifestServer::start(Reply::manifest(pod_list(&[]))).await;
    let agent = url_agent(&server.url());
    agent.write("twice.yaml", &sleeper("twice"));
    let v = wait_for(&rt, &agent, "twice", LIMIT, "the file's pod", |v| {
        v.running("main").is_some()
    })
    .await;
    let container = v.running("main").unwrap().id.clone();

    // The URL defines the same name later: refused, naming both origins.
    server.set(Reply::manifest(busybox_pod(
        "twice",
        "Always",
        "echo from the URL; exec sleep 100000",
    )));
    let path = agent.manifests.path().join("twice.yaml");
    let needle = format!(
        "origin={} pod=twice-{NODE}_default kept={}",
        server.url(),
        path.display()
    );
    log_shows(&agent, &needle, 1).await;
    let v = pod_view(&rt, "twice").await;
    assert_eq!(source_of(&v).as_deref(), Some("file"));
    assert_eq!(v.running("main").map(|c| c.id.clone()), Some(container));
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn unanswered_url_holds_back_only_its_own_deletions() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let mut server = ManifestServer::start(Reply::manifest(sleeper("byurl"))).await;
    let mut agent = url_agent(&server.url());
    agent.write("byfile.yaml", &sleeper("byfile"));
    for name in ["byurl", "byfile"] {
        wait_for(&rt, &agent, name, LIMIT, "a running container", |v| {
            v.running("main").is_some()
        })
        .await;
    }

    // Restarted while the URL is down and the file is gone: the file's pod
    // is an orphan of a source that reported, the URL's pod of one that
    // did not. Both are found by the same relist.
    agent.kill9();
    server.stop().await;
    agent.remove("byfile.yaml");
    agent.spawn();
    wait_for(
        &rt,
        &agent,
        "byfile",
        LIMIT,
        "removal of the file's orphan",
        |v| v.sandboxes.is_empty() && v.containers.is_empty(),
    )
    .await;
    let v = pod_view(&rt, "byurl").await;
    assert!(
        v.running("main").is_some(),
        "the URL's pod was removed before the URL answered: {v:#?}\n{}",
        agent.logs()
    );
}
