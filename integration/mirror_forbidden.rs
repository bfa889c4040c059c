//! What the real kube-apiserver refuses a node (Node authorizer and
//! NodeRestriction), met by the real binary: crilet logs the server's own
//! reason once, keeps its pods running, and does everything else it may.

use std::time::{Duration, Instant};

use crate::agent::*;
use crate::kube::Lab;
use crate::mirror::{mirror_of, phase, start_on};
use crate::support::eventually;

const LIMIT: Duration = Duration::from_secs(30);

/// Waits until the agent's log holds every one of `needles`.
async fn logged(agent: &AgentProcess, what: &str, needles: &[&str]) -> String {
    let found = eventually(LIMIT, || async {
        let logs = agent.logs();
        needles.iter().all(|n| logs.contains(n)).then_some(logs)
    })
    .await;
    found.unwrap_or_else(|| panic!("{what} not logged ({needles:?}):\n{}", agent.logs()))
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn another_nodes_credentials_are_refused_and_pods_run() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    // crilet runs as crilet-node-5 with crilet-node-4's certificate.
    let own = lab.claim("crilet-node-4").await;
    let other = lab.claim("crilet-node-5").await;
    let started = Instant::now();
    let agent = AgentProcess::start_on(&other.name, &own.kubeconfig_args());
    agent.write("a.yaml", &busybox_pod("a", "Always", "exec sleep 100000"));
    wait_for(&rt, &agent, "a", LIMIT, "running without API access", |v| {
        v.running("main").is_some()
    })
    .await;
    // The server's reasons, each in one crilet line.
    let cannot_read = format!(
        "403 Forbidden: nodes \"{}\" is forbidden: User \"system:node:{}\" cannot get resource \"nodes\"",
        other.name, own.name
    );
    let logs = logged(
        &agent,
        "the refusals",
        &[
            &cannot_read,
            "can only list/watch pods with spec.nodeName field selector",
        ],
    )
    .await;
    let crilet_lines = |needle: &str| {
        (logs.lines())
            .filter(|l| l.contains("crilet::") && l.contains(needle))
            .count()
    };
    assert_eq!(
        crilet_lines("cannot register or update the node"),
        1,
        "a repeated refusal is logged once:\n{logs}"
    );
    assert_eq!(crilet_lines("pod watch failed"), 1, "{logs}");
    // The refused list is retried with a growing delay (0.5 s doubling to
    // 5 s): at most 5 attempts in the first 8 s. This needs a window of time.
    tokio::time::sleep(Duration::from_secs(8).saturating_sub(started.elapsed())).await;
    let attempts = (agent.logs().lines())
        .filter(|l| l.contains("watch list error with 403"))
        .count();
    let window = started.elapsed().as_secs_f64();
    let bound = 5 + ((window - 7.5).max(0.0) / 5.0).ceil() as usize;
    assert!(
        attempts <= bound,
        "{attempts} refused lists in {window:.1} s (at most {bound}):\n{}",
        agent.logs()
    );
    // Nothing was written for either node, and the pod never stopped.
    assert!(lab.node(&other.name).await.is_none());
    assert!(lab.node(&own.name).await.is_none());
    assert!(lab.pods_on(&other.name).await.is_empty());
    assert_eq!(agent.view(&rt, "a").await.named("main").len(), 1);
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd and the real kube-apiserver (scripts/test.sh)"]
async fn a_mirror_pod_node_restriction_refuses_is_logged_and_its_pod_runs() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-6").await;
    let agent = start_on(&node, &[]);
    // NodeRestriction refuses a mirror pod that names a service account;
    // the node runs the static pod all the same, as the kubelet does.
    agent.write(
        "robot.yaml",
        &busybox_pod("robot", "Always", "exec sleep 100000").replace(
            "  restartPolicy: Always\n",
            "  restartPolicy: Always\n  serviceAccountName: robot\n",
        ),
    );
    agent.write(
        "web.yaml",
        &busybox_pod("web", "Always", "exec sleep 100000"),
    );
    mirror_of(&lab, &agent, "web", "Running", |p| {
        phase(p) == Some("Running")
    })
    .await;
    wait_for(
        &rt,
        &agent,
        "robot",
        LIMIT,
        "running without a mirror",
        |v| v.running("main").is_some(),
    )
    .await;
    let robot = agent.pod_name("robot");
    let logs = logged(
        &agent,
        "the refused mirror",
        &[&format!(
            "creating mirror pod default/{robot}: 403 Forbidden: pods \"{robot}\" is forbidden: \
             a mirror pod may not reference service accounts"
        )],
    )
    .await;
    assert!(lab.pod("default", &robot).await.is_none());
    let refusals = logs
        .lines()
        .filter(|l| l.contains("mirror pod reconcile failed"))
        .count();
    assert_eq!(refusals, 1, "a repeated refusal is logged once:\n{logs}");
    assert_eq!(agent.view(&rt, "robot").await.named("main").len(), 1);
}
