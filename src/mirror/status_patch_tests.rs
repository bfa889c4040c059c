//! The status patch, row by row (old status on the mirror, new status →
//! patch), then the property: for the status shapes crilet writes, the
//! patch applied to the mirror's status, as the API server applies it,
//! gives the merged status.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, PodIP,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use proptest::prelude::*;

use super::*;
use crate::kubeapi::strategic_merge::apply;

fn ts(s: i64) -> Time {
    Time(jiff::Timestamp::from_second(s).unwrap())
}

fn cond(type_: &str, status: &str, reason: Option<&str>, message: Option<&str>) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.map(Into::into),
        message: message.map(Into::into),
        last_transition_time: Some(ts(1_700_000_000)),
        ..Default::default()
    }
}

fn not_ready(type_: &str) -> PodCondition {
    let unready = "containers with unready status: [main]";
    cond(type_, "False", Some("ContainersNotReady"), Some(unready))
}

fn container(state: ContainerState) -> ContainerStatus {
    ContainerStatus {
        name: "main".into(),
        image: "busybox".into(),
        image_id: "sha256:1".into(),
        container_id: Some("containerd://1".into()),
        state: Some(state),
        ..Default::default()
    }
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message: None,
        }),
        ..Default::default()
    }
}

fn running() -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(ts(1_700_000_001)),
        }),
        ..Default::default()
    }
}

fn status(conditions: Vec<PodCondition>, containers: Vec<ContainerStatus>) -> PodStatus {
    PodStatus {
        phase: Some("Running".into()),
        host_ip: Some("10.0.0.1".into()),
        host_ips: Some(vec![HostIP {
            ip: "10.0.0.1".into(),
        }]),
        conditions: Some(conditions),
        container_statuses: Some(containers),
        qos_class: Some("BestEffort".into()),
        ..Default::default()
    }
}

fn mirror(status: Option<PodStatus>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web-node-a".into()),
            namespace: Some("default".into()),
            uid: Some("mirror-uid".into()),
            resource_version: Some("42".into()),
            ..Default::default()
        },
        status,
        ..Default::default()
    }
}

const META: &str = r#"{"uid": "mirror-uid", "resourceVersion": "42"}"#;

#[test]
fn status_patch_rows() {
    let meta: Value = serde_json::from_str(META).unwrap();
    let unready = status(
        vec![not_ready("Ready"), not_ready("ContainersReady")],
        vec![container(running())],
    );
    let ready = status(
        vec![
            cond("Ready", "True", None, None),
            cond("ContainersReady", "True", None, None),
        ],
        vec![container(running())],
    );
    let gate = cond("example.com/gate", "True", None, None);
    let with_gate = |mut s: PodStatus| {
        s.conditions.as_mut().unwrap().insert(0, gate.clone());
        s
    };
    let rows: Vec<(&str, Option<PodStatus>, PodStatus, Option<Value>)> = vec![
        (
            "ready: the reason and message of the conditions are removed",
            Some(unready.clone()),
            ready.clone(),
            Some(json!({
                "metadata": meta,
                "status": {
                    "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "ContainersReady"}],
                    "conditions": [
                        {"type": "Ready", "status": "True", "reason": null, "message": null},
                        {"type": "ContainersReady", "status": "True", "reason": null, "message": null},
                    ],
                },
            })),
        ),
        (
            "the same status: nothing to write",
            Some(ready.clone()),
            ready.clone(),
            None,
        ),
        (
            "a condition the kubelet does not own stays, and needs no write",
            Some(with_gate(ready.clone())),
            ready.clone(),
            None,
        ),
        (
            "a condition crilet no longer sets is deleted by type",
            Some(status(
                vec![
                    cond("Ready", "True", None, None),
                    cond("Initialized", "True", None, None),
                ],
                vec![container(running())],
            )),
            status(
                vec![cond("Ready", "True", None, None)],
                vec![container(running())],
            ),
            Some(json!({
                "metadata": meta,
                "status": {
                    "$setElementOrder/conditions": [{"type": "Ready"}],
                    "conditions": [{"$patch": "delete", "type": "Initialized"}],
                },
            })),
        ),
        (
            "a pod-level reason and message go; container statuses are sent whole",
            Some(PodStatus {
                reason: Some("Evicted".into()),
                message: Some("gone".into()),
                ..status(vec![], vec![container(waiting("ContainerCreating"))])
            }),
            status(vec![], vec![container(running())]),
            Some(json!({
                "metadata": meta,
                "status": {
                    "reason": null,
                    "message": null,
                    "containerStatuses": [{
                        "name": "main", "image": "busybox", "imageID": "sha256:1",
                        "containerID": "containerd://1", "ready": false, "restartCount": 0,
                        "state": {"running": {"startedAt": "2023-11-14T22:13:21Z"}},
                    }],
                },
            })),
        ),
        (
            "a new pod IP",
            Some(status(vec![], vec![])),
            PodStatus {
                pod_ip: Some("10.1.0.5".into()),
                pod_ips: Some(vec![PodIP {
                    ip: "10.1.0.5".into(),
                }]),
                ..status(vec![], vec![])
            },
            Some(json!({
                "metadata": meta,
                "status": {
                    "podIP": "10.1.0.5",
                    "podIPs": [{"ip": "10.1.0.5"}],
                },
            })),
        ),
        (
            "no status on the mirror: the whole status",
            None,
            PodStatus {
                phase: Some("Pending".into()),
                ..Default::default()
            },
            Some(json!({"metadata": meta, "status": {"phase": "Pending"}})),
        ),
    ];
    for (what, old, new, want) in rows {
        let got = status_patch(&mirror(old.clone()), &new);
        assert_eq!(got, want, "{what}");
        if let Some(patch) = got {
            let old = json!({"status": old.as_ref().map(stored_json).unwrap_or(json!({}))});
            let merged = merge_pod_status(old_status(&old).as_ref(), &new);
            let applied = apply(&old, &patch, pod_merge_key);
            assert_eq!(applied["status"], stored_json(&merged), "{what}: applied");
        }
    }
}

fn old_status(old: &Value) -> Option<PodStatus> {
    serde_json::from_value(old["status"].clone()).ok()
}

#[test]
fn merge_keeps_foreign_conditions_first_and_drops_stale_owned_ones() {
    let old = status(
        vec![
            not_ready("Ready"),
            cond("example.com/gate", "True", None, None),
            cond(
                "DisruptionTarget",
                "True",
                Some("PreemptionByScheduler"),
                None,
            ),
        ],
        vec![],
    );
    let new = status(vec![cond("Ready", "True", None, None)], vec![]);
    let types: Vec<String> = merge_pod_status(Some(&old), &new)
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert_eq!(types, ["example.com/gate", "DisruptionTarget", "Ready"]);
    assert_eq!(merge_pod_status(None, &new), new);
}

#[test]
fn normalise_drops_what_the_server_omits() {
    let value = json!({"a": "", "b": [], "c": {}, "d": null, "e": [{"f": ""}], "g": false, "h": 0});
    assert_eq!(normalise(value), json!({"e": [{}], "g": false, "h": 0}));
}

// The property: the status shapes crilet writes.

fn time() -> impl Strategy<Value = Option<Time>> {
    prop::option::of((0i64..3).prop_map(|s| ts(1_700_000_000 + s)))
}

fn text(choices: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop::sample::select(choices).prop_map(String::from))
}

fn conditions() -> impl Strategy<Value = Vec<PodCondition>> {
    let types = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
        "example.com/gate",
    ];
    let types = prop::sample::subsequence(types.to_vec(), 0..=6).prop_shuffle();
    types
        .prop_flat_map(|types| {
            let one = (
                prop::bool::ANY,
                text(&["ContainersNotReady", "PodCompleted"]),
                text(&["containers with unready status: [main]", ""]),
                time(),
            );
            (Just(types.clone()), prop::collection::vec(one, types.len()))
        })
        .prop_map(|(types, fields)| {
            let each = types.into_iter().zip(fields);
            each.map(|(type_, (up, reason, message, at))| PodCondition {
                type_: type_.into(),
                status: if up { "True" } else { "False" }.into(),
                reason,
                message,
                last_transition_time: at,
                ..Default::default()
            })
            .collect()
        })
}

fn state() -> impl Strategy<Value = Option<ContainerState>> {
    let waiting =
        text(&["ContainerCreating", "CrashLoopBackOff"]).prop_map(|reason| ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason,
                message: None,
            }),
            ..Default::default()
        });
    let running = time().prop_map(|started_at| ContainerState {
        running: Some(ContainerStateRunning { started_at }),
        ..Default::default()
    });
    let terminated = (
        0i32..2,
        text(&["Error", "Completed"]),
        text(&["bye"]),
        time(),
    )
        .prop_map(|(exit_code, reason, message, finished_at)| ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code,
                reason,
                message,
                finished_at,
                ..Default::default()
            }),
            ..Default::default()
        });
    prop::option::of(prop_oneof![waiting, running, terminated])
}

fn container_status() -> impl Strategy<Value = ContainerStatus> {
    let names = prop::sample::select(vec!["main", "side"]);
    (
        names,
        prop::bool::ANY,
        0i32..3,
        text(&["sha256:1"]),
        state(),
        state(),
        prop::option::of(prop::bool::ANY),
    )
        .prop_map(
            |(name, ready, restart_count, image_id, state, last_state, started)| ContainerStatus {
                name: name.into(),
                ready,
                restart_count,
                image: "busybox".into(),
                image_id: image_id.unwrap_or_default(),
                state,
                last_state,
                started,
                ..Default::default()
            },
        )
}

fn pod_status() -> impl Strategy<Value = PodStatus> {
    let ips = prop::option::of(prop::sample::select(vec!["10.0.0.1", "10.0.0.2"]));
    (
        text(&["Pending", "Running", "Failed"]),
        text(&["Evicted", ""]),
        text(&["the node was low on memory"]),
        conditions(),
        prop::collection::vec(container_status(), 0..3),
        prop::collection::vec(container_status(), 0..2),
        (ips.clone(), ips),
        (time(), text(&["BestEffort", "Burstable"])),
    )
        .prop_map(
            |(phase, reason, message, conditions, containers, inits, (host, pod), (start, qos))| {
                PodStatus {
                    phase,
                    reason,
                    message,
                    conditions: Some(conditions),
                    container_statuses: Some(containers),
                    init_container_statuses: Some(inits),
                    host_ip: host.map(String::from),
                    host_ips: host.map(|ip| vec![HostIP { ip: ip.into() }]),
                    pod_ip: pod.map(String::from),
                    pod_ips: pod.map(|ip| vec![PodIP { ip: ip.into() }]),
                    start_time: start,
                    qos_class: qos,
                    ..Default::default()
                }
            },
        )
}

proptest! {
    #[test]
    fn the_patch_applied_to_the_mirror_gives_the_merged_status(
        old in prop::option::of(pod_status()),
        new in pod_status(),
    ) {
        let mirror = mirror(old.clone());
        let merged = merge_pod_status(old.as_ref(), &new);
        let stored = json!({"status": old.as_ref().map(stored_json).unwrap_or(json!({}))});
        match status_patch(&mirror, &new) {
            None => prop_assert_eq!(&stored["status"], &stored_json(&merged)),
            Some(patch) => {
                prop_assert_eq!(&patch["metadata"], &serde_json::from_str::<Value>(META).unwrap());
                let applied = apply(&stored, &patch, pod_merge_key);
                prop_assert_eq!(&applied["status"], &stored_json(&merged));
                prop_assert!(old.is_none() || stored["status"] != stored_json(&merged));
            }
        }
    }
}
