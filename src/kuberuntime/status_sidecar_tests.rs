//! The status of pods with sidecars (init containers with `restartPolicy:
//! Always`), row by row as the kubelet v1.32 showed them on `/pods` for
//! the same pods on containerd 1.6 (docs/running.md, "Sidecar containers").

use super::tests::{Case, app, condition, init, probes, rc, reading, state, waiting_reason};
use super::*;
use crate::prober::ProbeResult::{self, Failure, Success, Unknown};
use serde_json::json;

use ContainerState::{Exited, Running};

/// Pod "web": init containers `s1` (sidecar), `setup`, `s2` (sidecar),
/// app container `main`, restart policy `policy`.
fn pod(policy: &str) -> Pod {
    let c = |n: &str| json!({"name": n, "image": format!("img-{n}")});
    let side = |n: &str| json!({"name": n, "image": format!("img-{n}"), "restartPolicy": "Always"});
    serde_json::from_value(json!({
        "metadata": {"name": "web", "uid": "u1"},
        "spec": {
            "restartPolicy": policy,
            "initContainers": [side("s1"), c("setup"), side("s2")],
            "containers": [c("main")],
        }
    }))
    .unwrap()
}

/// (type, status, reason, message) of the conditions after the first.
fn conds(s: &PodStatus) -> Vec<(String, String, Option<String>, Option<String>)> {
    let list = s.conditions.as_ref().unwrap().iter().skip(1);
    list.map(|c| {
        let (t, st) = (c.type_.clone(), c.status.clone());
        (t, st, c.reason.clone(), c.message.clone())
    })
    .take(3)
    .collect()
}

fn c(
    t: &str,
    st: &str,
    reason: Option<&str>,
    message: Option<&str>,
) -> (String, String, Option<String>, Option<String>) {
    (
        t.into(),
        st.into(),
        reason.map(Into::into),
        message.map(Into::into),
    )
}

/// s1 has a readiness probe (reading `s1_ready` about instance s10), s2 a
/// startup probe (reading `s2_started` about s20).
fn with_probes(mut case: Case, s1_ready: ProbeResult, s2_started: ProbeResult) -> Case {
    case.probes
        .insert("s1".into(), probes(reading("s10", s1_ready), None));
    case.probes
        .insert("s2".into(), probes(None, reading("s20", s2_started)));
    case
}

#[test]
fn while_initializing_a_started_sidecar_counts_as_done_and_the_pod_is_pending() {
    // s1 runs (not ready), setup is done, s2 runs but its startup probe has
    // not passed: main waits.
    let containers = vec![
        rc("s1", 0, Running, 0),
        rc("setup", 0, Exited, 0),
        rc("s2", 0, Running, 0),
    ];
    let s = with_probes(Case::new(pod("Always"), containers), Failure, Unknown).run();
    assert_eq!(s.phase.as_deref(), Some(PENDING));
    let s1 = init(&s, "s1");
    assert_eq!((s1.started, s1.ready), (Some(true), false));
    let setup = init(&s, "setup");
    assert_eq!((setup.started, setup.ready), (Some(false), true));
    let s2 = init(&s, "s2");
    assert_eq!((s2.started, s2.ready), (Some(false), false));
    assert_eq!(waiting_reason(app(&s, "main")), Some(POD_INITIALIZING));
    assert_eq!(
        conds(&s),
        [
            c(
                INITIALIZED,
                "False",
                Some("ContainersNotInitialized"),
                Some("containers with incomplete status: [s2]")
            ),
            c(
                READY,
                "False",
                Some("ContainersNotReady"),
                Some("containers with unready status: [s1 s2 main]")
            ),
            c(
                CONTAINERS_READY,
                "False",
                Some("ContainersNotReady"),
                Some("containers with unready status: [s1 s2 main]")
            ),
        ]
    );
}

#[test]
fn a_sidecar_s_readiness_decides_the_pod_s_readiness() {
    let containers = vec![
        rc("s1", 0, Running, 0),
        rc("setup", 0, Exited, 0),
        rc("s2", 0, Running, 0),
        rc("main", 0, Running, 0),
    ];
    // s1 not ready: as the kubelet showed it, Initialized but not Ready.
    let s = with_probes(
        Case::new(pod("Always"), containers.clone()),
        Failure,
        Success,
    )
    .run();
    assert_eq!(s.phase.as_deref(), Some(RUNNING));
    assert_eq!(
        conds(&s),
        [
            c(INITIALIZED, "True", None, None),
            c(
                READY,
                "False",
                Some("ContainersNotReady"),
                Some("containers with unready status: [s1]")
            ),
            c(
                CONTAINERS_READY,
                "False",
                Some("ContainersNotReady"),
                Some("containers with unready status: [s1]")
            ),
        ]
    );
    let s2 = init(&s, "s2");
    assert_eq!((s2.started, s2.ready), (Some(true), true));
    // s1 ready: the pod is.
    let s = with_probes(Case::new(pod("Always"), containers), Success, Success).run();
    assert_eq!(condition(&s, READY).status, "True");
    assert_eq!(condition(&s, CONTAINERS_READY).status, "True");
    assert!(init(&s, "s1").ready);
}

#[test]
fn a_sidecar_that_died_leaves_the_pod_running_and_initialized() {
    let mut s1 = rc("s1", 0, Exited, 137);
    s1.reason = "Error".into();
    let containers = vec![
        s1,
        rc("setup", 0, Exited, 0),
        rc("s2", 0, Running, 0),
        rc("main", 0, Running, 0),
    ];
    let s = with_probes(
        Case::new(pod("Always"), containers.clone()),
        Failure,
        Success,
    )
    .run();
    assert_eq!(s.phase.as_deref(), Some(RUNNING));
    let s1 = init(&s, "s1");
    assert_eq!((s1.started, s1.ready), (Some(false), false));
    assert_eq!(state(s1).terminated.as_ref().unwrap().exit_code, 137);
    assert_eq!(condition(&s, INITIALIZED).status, "True");
    assert_eq!(
        condition(&s, READY).message.as_deref(),
        Some("containers with unready status: [s1]")
    );
    // In its back-off it shows CrashLoopBackOff (policy Always, exit 137),
    // and still does not change the phase.
    let case =
        Case::new(pod("Always"), containers.clone()).wait("s1", "CrashLoopBackOff", "back-off");
    let s = with_probes(case, Failure, Success).run();
    assert_eq!(waiting_reason(init(&s, "s1")), Some("CrashLoopBackOff"));
    assert_eq!(s.phase.as_deref(), Some(RUNNING));
    // Under restartPolicy Never the kubelet keeps showing it terminated.
    let case = Case::new(pod("Never"), containers).wait("s1", "CrashLoopBackOff", "back-off");
    let s = with_probes(case, Failure, Success).run();
    assert!(state(init(&s, "s1")).terminated.is_some());
    assert_eq!(s.phase.as_deref(), Some(RUNNING));
}

#[test]
fn a_never_pod_is_running_until_its_sidecars_stopped_then_succeeded() {
    let done = |main_exit: i32| {
        vec![
            rc("s1", 0, Running, 0),
            rc("setup", 0, Exited, 0),
            rc("s2", 0, Running, 0),
            rc("main", 0, Exited, main_exit),
        ]
    };
    // main exited 0, the sidecars still run: Running, not ready.
    let s = with_probes(Case::new(pod("Never"), done(0)), Success, Success).run();
    assert_eq!(s.phase.as_deref(), Some(RUNNING));
    assert_eq!(
        condition(&s, READY).message.as_deref(),
        Some("containers with unready status: [main]")
    );
    // The pod is killed: the sidecars end (SIGKILL) and count for nothing.
    let mut stopped = done(0);
    stopped[0] = rc("s1", 0, Exited, 137);
    stopped[2] = rc("s2", 0, Exited, 137);
    let s = with_probes(Case::new(pod("Never"), stopped.clone()), Success, Success).run();
    assert_eq!(s.phase.as_deref(), Some(SUCCEEDED));
    assert_eq!(
        conds(&s),
        [
            c(INITIALIZED, "True", Some("PodCompleted"), None),
            c(READY, "False", Some("PodCompleted"), None),
            c(CONTAINERS_READY, "False", Some("PodCompleted"), None),
        ]
    );
    let s1 = init(&s, "s1");
    assert_eq!((s1.started, s1.ready), (Some(false), false));
    // OnFailure alike; with main failed, Never is Failed.
    let s = Case::new(pod("OnFailure"), stopped).run();
    assert_eq!(s.phase.as_deref(), Some(SUCCEEDED));
    let mut failed = done(1);
    failed[0] = rc("s1", 0, Exited, 137);
    failed[2] = rc("s2", 0, Exited, 137);
    let s = Case::new(pod("Never"), failed).run();
    assert_eq!(s.phase.as_deref(), Some(FAILED));
}

#[test]
fn phase_rows_with_sidecars() {
    // (what, policy, containers, phase)
    let rows: Vec<(&str, &str, Vec<ContainerStatus>, &str)> = vec![
        ("nothing yet", "Always", vec![], PENDING),
        (
            "the first sidecar runs",
            "Always",
            vec![rc("s1", 0, Running, 0)],
            PENDING,
        ),
        (
            "the regular init container failed, Never",
            "Never",
            vec![rc("s1", 0, Running, 0), rc("setup", 0, Exited, 1)],
            FAILED,
        ),
        (
            "a sidecar exited 0 while main runs",
            "Never",
            vec![
                rc("s1", 0, Exited, 0),
                rc("setup", 0, Exited, 0),
                rc("s2", 0, Running, 0),
                rc("main", 0, Running, 0),
            ],
            RUNNING,
        ),
        (
            "a sidecar that failed does not fail a Never pod",
            "Never",
            vec![
                rc("s1", 0, Exited, 1),
                rc("setup", 0, Exited, 0),
                rc("s2", 0, Exited, 2),
                rc("main", 0, Exited, 0),
            ],
            SUCCEEDED,
        ),
        (
            "Always: main restarting, the sidecars gone",
            "Always",
            vec![
                rc("s1", 0, Exited, 137),
                rc("setup", 0, Exited, 0),
                rc("s2", 0, Exited, 137),
                rc("main", 0, Exited, 1),
            ],
            RUNNING,
        ),
    ];
    for (what, policy, containers, phase) in rows {
        let s = Case::new(pod(policy), containers).run();
        assert_eq!(s.phase.as_deref(), Some(phase), "{what}");
    }
}
