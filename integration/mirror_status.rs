//! The status crilet writes to a mirror pod, on the real kube-apiserver: a
//! field crilet no longer sets is removed there too, as the kubelet's
//! two-way status patch removes it, and a condition someone else wrote is
//! kept, as the kubelet's `mergePodStatus` keeps it.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kube::api::{Patch, PatchParams};

use crate::agent::*;
use crate::kube::Lab;
use crate::mirror::{mirror_of, start_on};

fn condition<'a>(p: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    let conditions = p.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == type_)
}

fn is(p: &Pod, type_: &str, status: &str) -> bool {
    condition(p, type_).is_some_and(|c| c.status == status)
}

const GATE: &str = "example.com/gate";

#[tokio::test]
#[ignore = "needs the agent tests' runtime and the real kube-apiserver (scripts/test.sh)"]
async fn ready_conditions_lose_their_reason_once_the_readiness_probe_passes() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-13").await;
    let agent = start_on(&node, &[]);
    // Ready once /tmp/ready exists, which the test makes when it has seen
    // the pod unready.
    let pod = format!(
        "{}    readinessProbe:\n      exec:\n        command: [cat, /tmp/ready]\n      periodSeconds: 1\n",
        busybox_pod("gated", "Always", "exec sleep 100000")
    );
    agent.write("gated.yaml", &pod);
    let full = agent.pod_name("gated");

    let unready = mirror_of(&lab, &agent, "gated", "running and not ready", |p| {
        crate::mirror::phase(p) == Some("Running")
            && is(p, "Ready", "False")
            && is(p, "ContainersReady", "False")
    })
    .await;
    for type_ in ["Ready", "ContainersReady"] {
        let c = condition(&unready, type_).unwrap();
        assert_eq!(c.reason.as_deref(), Some("ContainersNotReady"), "{c:?}");
        assert_eq!(
            c.message.as_deref(),
            Some("containers with unready status: [main]"),
            "{c:?}"
        );
    }
    // Someone else's condition (a readiness gate's controller, say).
    let gate = serde_json::json!({"status": {"conditions": [{"type": GATE, "status": "True"}]}});
    lab.pods("default")
        .patch_status(&full, &PatchParams::default(), &Patch::Strategic(&gate))
        .await
        .unwrap_or_else(|e| panic!("adding a condition to {full}: {e}"));

    crate::probes::exec_in(&rt, &agent, "gated", "touch /tmp/ready").await;
    let ready = mirror_of(&lab, &agent, "gated", "ready", |p| {
        is(p, "Ready", "True") && is(p, "ContainersReady", "True")
    })
    .await;
    for type_ in ["Ready", "ContainersReady"] {
        let c = condition(&ready, type_).unwrap();
        assert_eq!(
            (c.reason.as_deref(), c.message.as_deref()),
            (None, None),
            "{type_} keeps what crilet no longer sets: {c:?}\ncrilet log:\n{}",
            agent.logs()
        );
    }
    assert!(
        is(&ready, GATE, "True"),
        "the condition crilet does not own was removed: {:?}",
        ready.status
    );
    let statuses = ready.status.as_ref().unwrap().container_statuses.clone();
    let main = statuses.unwrap_or_default();
    assert!(main.iter().all(|c| c.ready), "{main:?}");
}
