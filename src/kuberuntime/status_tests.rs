use super::*;
use crate::cri::types::ContainerMetadata;
use crate::kuberuntime::labels::{
    CONTAINER_HASH_ANNOTATION, CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL,
    POD_UID_LABEL,
};
use proptest::prelude::*;
use serde_json::json;

pub(super) const S: i64 = 1_000_000_000;

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

pub(super) fn t(secs: i64) -> Option<Time> {
    Some(Time(ts(secs)))
}

/// A pod from JSON: `inits`/`apps` are container names, images "img-<name>".
fn pod_with(policy: &str, inits: &[&str], apps: &[&str], extra: serde_json::Value) -> Pod {
    let ctrs = |names: &[&str]| -> Vec<serde_json::Value> {
        names
            .iter()
            .map(|n| json!({"name": n, "image": format!("img-{n}")}))
            .collect()
    };
    let mut spec = json!({"restartPolicy": policy, "containers": ctrs(apps)});
    if !inits.is_empty() {
        spec["initContainers"] = json!(ctrs(inits));
    }
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": "web", "uid": "u1"}, "spec": spec})).unwrap()
}

fn pod(policy: &str, inits: &[&str], apps: &[&str]) -> Pod {
    pod_with(policy, inits, apps, json!({}))
}

/// A runtime container; attempt n is created at second 100+n, carries a
/// restartCount annotation of n, and (if exited) finished at 200+n.
pub(super) fn rc(
    name: &str,
    attempt: u32,
    state: ContainerState,
    exit_code: i32,
) -> ContainerStatus {
    let labels = [
        (POD_NAME_LABEL, "web"),
        (POD_NAMESPACE_LABEL, "default"),
        (POD_UID_LABEL, "u1"),
        (CONTAINER_NAME_LABEL, name),
    ];
    let restart = attempt.to_string();
    let annotations = [
        (CONTAINER_HASH_ANNOTATION, "1f"),
        (CONTAINER_RESTART_COUNT_ANNOTATION, restart.as_str()),
    ];
    let map = |kv: &[(&str, &str)]| {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let attempt_i = i64::from(attempt);
    ContainerStatus {
        id: format!("{name}{attempt}"),
        metadata: ContainerMetadata {
            name: name.into(),
            attempt,
        },
        state,
        created_at: (100 + attempt_i) * S,
        started_at: if state == ContainerState::Created {
            0
        } else {
            (100 + attempt_i) * S + 5
        },
        finished_at: if state == ContainerState::Exited {
            (200 + attempt_i) * S
        } else {
            0
        },
        exit_code,
        image: format!("img-{name}"),
        image_ref: format!("sha256:{name}"),
        reason: String::new(),
        message: String::new(),
        labels: map(&labels),
        annotations: map(&annotations),
        mounts: vec![],
        log_path: String::new(),
        resources: None,
    }
}

use ContainerState::{Created, Exited, Running, Unknown};

pub(super) struct Case<'a> {
    pod: Pod,
    containers: Vec<ContainerStatus>,
    waiting: HashMap<String, WaitingReason>,
    pub(super) probes: HashMap<String, ContainerProbeResults>,
    messages: HashMap<String, String>,
    sandbox_ready: bool,
    pod_ip: &'a str,
    previous: Option<PodStatus>,
    now: i64,
}

impl<'a> Case<'a> {
    pub(super) fn new(pod: Pod, containers: Vec<ContainerStatus>) -> Self {
        Case {
            pod,
            containers,
            waiting: HashMap::new(),
            probes: HashMap::new(),
            messages: HashMap::new(),
            sandbox_ready: true,
            pod_ip: "10.0.0.7",
            previous: None,
            now: 1_000,
        }
    }

    pub(super) fn wait(mut self, name: &str, reason: &str, message: &str) -> Self {
        let w = WaitingReason {
            reason: reason.into(),
            message: message.into(),
        };
        self.waiting.insert(name.into(), w);
        self
    }

    pub(super) fn run(&self) -> PodStatus {
        pod_status(&StatusInput {
            pod: &self.pod,
            sandbox_ready: self.sandbox_ready,
            pod_ip: self.pod_ip,
            host_ip: "192.168.1.5",
            containers: &self.containers,
            waiting: &self.waiting,
            probes: &self.probes,
            messages: &self.messages,
            start_time: Timestamp::from_nanosecond(50 * i128::from(S) + 123).unwrap(),
            runtime_name: "containerd",
            previous: self.previous.as_ref(),
            now: ts(self.now),
        })
    }
}

pub(super) fn app<'s>(s: &'s PodStatus, name: &str) -> &'s K8sContainerStatus {
    find(s.container_statuses.as_deref().unwrap(), name).unwrap()
}

pub(super) fn init<'s>(s: &'s PodStatus, name: &str) -> &'s K8sContainerStatus {
    find(s.init_container_statuses.as_deref().unwrap(), name).unwrap()
}

pub(super) fn state(s: &K8sContainerStatus) -> &K8sContainerState {
    s.state.as_ref().unwrap()
}

pub(super) fn waiting_reason(s: &K8sContainerStatus) -> Option<&str> {
    state(s).waiting.as_ref().unwrap().reason.as_deref()
}

pub(super) fn terminated(st: Option<&K8sContainerState>) -> &ContainerStateTerminated {
    st.unwrap().terminated.as_ref().unwrap()
}

pub(super) fn condition<'s>(s: &'s PodStatus, kind: &str) -> &'s PodCondition {
    s.conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == kind)
        .unwrap()
}

// ---- state mapping

#[test]
fn running_container() {
    let s = Case::new(pod("Always", &[], &["a"]), vec![rc("a", 0, Running, 0)]).run();
    let a = app(&s, "a");
    let running = state(a).running.as_ref().unwrap();
    assert_eq!(running.started_at, t(100), "truncated to seconds");
    assert!(a.ready);
    assert_eq!(a.started, Some(true));
    assert_eq!(a.container_id.as_deref(), Some("containerd://a0"));
    assert_eq!(a.image, "img-a");
    assert_eq!(a.image_id, "sha256:a");
    assert_eq!(a.restart_count, 0);
    assert_eq!(a.last_state, None);
}

/// The image is the runtime's once a container exists, as the kubelet
/// reports it: measured on containerd 1.6, a tag moved away from the
/// running image turns `image` into the image's other tag, or its ID.
#[test]
fn the_image_is_what_the_runtime_reports() {
    let with_image = |image: &str| {
        let mut c = rc("a", 0, Running, 0);
        c.image = image.into();
        c
    };
    let rows = [
        ("img-a", "img-a"),
        (
            "docker.io/library/busybox:keep",
            "docker.io/library/busybox:keep",
        ),
        ("sha256:14035b6f", "sha256:14035b6f"),
        // A runtime that names no image: the spec's name.
        ("", "img-a"),
    ];
    for (reported, want) in rows {
        let s = Case::new(pod("Always", &[], &["a"]), vec![with_image(reported)]).run();
        assert_eq!(app(&s, "a").image, want, "{reported:?}");
        assert_eq!(app(&s, "a").image_id, "sha256:a");
    }
    // No container yet: the spec's name, no ID.
    let s = Case::new(pod("Always", &[], &["a"]), vec![]).run();
    assert_eq!(
        (app(&s, "a").image.as_str(), app(&s, "a").image_id.as_str()),
        ("img-a", "")
    );
}

#[test]
fn exited_container_reasons() {
    let cases = [
        (0, "", "Completed"),
        (1, "", "Error"),
        (137, "OOMKilled", "OOMKilled"),
        (0, "Custom", "Custom"),
    ];
    for (code, given, want) in cases {
        let mut c = rc("a", 2, Exited, code);
        c.reason = given.into();
        c.message = "bye".into();
        let s = Case::new(pod("Never", &[], &["a"]), vec![c]).run();
        let a = app(&s, "a");
        let term = terminated(a.state.as_ref());
        assert_eq!(term.exit_code, code);
        assert_eq!(
            term.reason.as_deref(),
            Some(want),
            "exit {code} reason {given:?}"
        );
        assert_eq!(term.message.as_deref(), Some("bye"));
        assert_eq!(term.started_at, t(102));
        assert_eq!(term.finished_at, t(202));
        assert_eq!(term.container_id.as_deref(), Some("containerd://a2"));
        assert!(!a.ready);
        assert_eq!(a.started, Some(false));
    }
}

#[test]
fn termination_message_follows_the_runtime_message() {
    let rows = [
        ("", None, None),
        ("", Some(""), None),
        ("bye", None, Some("bye")),
        ("", Some("disk full"), Some("disk full")),
        ("OOM", Some("disk full"), Some("OOM: disk full")),
    ];
    for (runtime, own, want) in rows {
        let mut c = rc("a", 0, Exited, 1);
        c.message = runtime.into();
        let mut case = Case::new(pod("Never", &[], &["a"]), vec![c]);
        if let Some(own) = own {
            case.messages.insert("a0".into(), own.into());
        }
        let s = case.run();
        let term = terminated(app(&s, "a").state.as_ref());
        assert_eq!(term.message.as_deref(), want, "{runtime:?} {own:?}");
    }
}

#[test]
fn termination_message_reaches_last_state() {
    // Restarted and running: the previous instance's message is in lastState.
    let mut case = Case::new(
        pod("Always", &[], &["a"]),
        vec![rc("a", 1, Running, 0), rc("a", 0, Exited, 3)],
    );
    case.messages.insert("a0".into(), "config invalid".into());
    let s = case.run();
    let last = terminated(app(&s, "a").last_state.as_ref());
    assert_eq!(last.message.as_deref(), Some("config invalid"));
    assert_eq!(last.container_id.as_deref(), Some("containerd://a0"));

    // Waiting in back-off: the exited instance moves to lastState with it.
    let mut case = Case::new(pod("Always", &[], &["a"]), vec![rc("a", 0, Exited, 3)]).wait(
        "a",
        "CrashLoopBackOff",
        "back-off",
    );
    case.messages.insert("a0".into(), "config invalid".into());
    let s = case.run();
    let a = app(&s, "a");
    assert_eq!(waiting_reason(a), Some("CrashLoopBackOff"));
    let last = terminated(a.last_state.as_ref());
    assert_eq!(last.message.as_deref(), Some("config invalid"));
}

#[test]
fn termination_messages_share_12k_among_containers() {
    // Three containers: 4096 bytes each, the start of the message kept.
    let long = format!("{}{}", "a".repeat(4096), "b".repeat(100));
    let mut case = Case::new(
        pod("Never", &["i"], &["a", "b"]),
        vec![
            rc("i", 0, Exited, 0),
            rc("a", 0, Exited, 1),
            rc("b", 0, Exited, 1),
        ],
    );
    case.messages.insert("a0".into(), long.clone());
    case.messages.insert("b0".into(), "short".into());
    case.messages.insert("i0".into(), "€".repeat(2000));
    let s = case.run();
    let message = |st: &K8sContainerStatus| terminated(st.state.as_ref()).message.clone();
    assert_eq!(message(app(&s, "a")), Some("a".repeat(4096)));
    assert_eq!(message(app(&s, "b")).as_deref(), Some("short"));
    // Cut at a character boundary: 1365 three-byte characters fit in 4096.
    assert_eq!(message(init(&s, "i")), Some("€".repeat(1365)));

    // One container alone may use all 12 KiB.
    let mut case = Case::new(pod("Never", &[], &["a"]), vec![rc("a", 0, Exited, 1)]);
    case.messages.insert("a0".into(), "x".repeat(20_000));
    let s = case.run();
    assert_eq!(message(app(&s, "a")).map(|m| m.len()), Some(12 * 1024));
}

#[test]
fn created_container_is_container_creating() {
    let s = Case::new(pod("Always", &[], &["a"]), vec![rc("a", 0, Created, 0)]).run();
    let a = app(&s, "a");
    assert_eq!(waiting_reason(a), Some(CONTAINER_CREATING));
    assert_eq!(a.container_id.as_deref(), Some("containerd://a0"));
    assert!(!a.ready);
}

#[test]
fn unknown_container_is_bare_waiting() {
    let s = Case::new(pod("Always", &[], &["a"]), vec![rc("a", 0, Unknown, 0)]).run();
    assert_eq!(
        state(app(&s, "a")).waiting,
        Some(ContainerStateWaiting::default())
    );
}

#[test]
fn volume_mounts_come_from_the_spec_as_the_kubelet_reports_them() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "uid": "u1"},
        "spec": {
            "initContainers": [{"name": "init", "image": "i",
                "volumeMounts": [{"name": "work", "mountPath": "/work"}]}],
            "containers": [
                {"name": "app", "image": "i", "volumeMounts": [
                    {"name": "work", "mountPath": "/work", "readOnly": false},
                    {"name": "ro", "mountPath": "/ro", "readOnly": true},
                    {"name": "ro", "mountPath": "/ro2", "readOnly": true,
                     "recursiveReadOnly": "IfPossible", "subPath": "x"},
                    {"name": "work", "mountPath": "/w2", "recursiveReadOnly": "Disabled",
                     "mountPropagation": "HostToContainer"}]},
                {"name": "bare", "image": "i"},
                {"name": "empty", "image": "i", "volumeMounts": []}
            ]
        }
    }))
    .unwrap();
    // What the kubelet v1.32 put in /pods for these mounts.
    let want_app = json!([
        {"name": "work", "mountPath": "/work"},
        {"name": "ro", "mountPath": "/ro", "readOnly": true, "recursiveReadOnly": "Disabled"},
        {"name": "ro", "mountPath": "/ro2", "readOnly": true, "recursiveReadOnly": "Disabled"},
        {"name": "work", "mountPath": "/w2"}
    ]);
    let want_init = json!([{"name": "work", "mountPath": "/work"}]);
    // Before any container exists, while they run, and once they exited.
    let runs = [
        vec![],
        vec![rc("init", 0, Exited, 0), rc("app", 0, Running, 0)],
        vec![rc("init", 0, Exited, 0), rc("app", 1, Exited, 1)],
    ];
    for containers in runs {
        let s = Case::new(pod.clone(), containers).run();
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["containerStatuses"][0]["volumeMounts"], want_app);
        assert_eq!(json["initContainerStatuses"][0]["volumeMounts"], want_init);
        for c in [&json["containerStatuses"][1], &json["containerStatuses"][2]] {
            assert!(c.get("volumeMounts").is_none(), "{c}");
        }
    }
}

#[test]
fn missing_container_defaults() {
    let s = Case::new(pod("Always", &[], &["a"]), vec![]).run();
    let a = app(&s, "a");
    assert_eq!(waiting_reason(a), Some(CONTAINER_CREATING));
    assert_eq!(
        (
            a.container_id.as_deref(),
            a.image_id.as_str(),
            a.restart_count
        ),
        (None, "", 0)
    );
    assert_eq!(a.image, "img-a");

    let s = Case::new(pod("Always", &[], &["a"]), vec![])
        .wait("a", "ErrImagePull", "no such image")
        .run();
    let w = state(app(&s, "a")).waiting.as_ref().unwrap();
    assert_eq!(
        (w.reason.as_deref(), w.message.as_deref()),
        (Some("ErrImagePull"), Some("no such image"))
    );
}

#[test]
fn pod_initializing_while_init_containers_pending() {
    let s = Case::new(
        pod("Always", &["i1", "i2"], &["a"]),
        vec![rc("i1", 0, Running, 0)],
    )
    .run();
    assert!(state(init(&s, "i1")).running.is_some());
    assert_eq!(waiting_reason(init(&s, "i2")), Some(POD_INITIALIZING));
    assert_eq!(waiting_reason(app(&s, "a")), Some(POD_INITIALIZING));
}

#[test]
fn init_statuses_only_with_init_containers() {
    let s = Case::new(pod("Always", &[], &["a"]), vec![]).run();
    assert_eq!(s.init_container_statuses, None);
    let s = Case::new(pod("Always", &["i"], &["a"]), vec![rc("i", 0, Exited, 0)]).run();
    assert_eq!(s.init_container_statuses.as_ref().map(Vec::len), Some(1));
    assert_eq!(
        terminated(init(&s, "i").state.as_ref()).reason.as_deref(),
        Some("Completed")
    );
}

#[test]
fn current_is_highest_attempt_then_newest() {
    let mut late = rc("a", 1, Running, 0);
    late.id = "late".into();
    late.created_at = 500 * S;
    let s = Case::new(
        pod("Always", &[], &["a", "b"]),
        vec![
            rc("a", 1, Exited, 1),
            late,
            rc("a", 0, Exited, 2),
            rc("b", 0, Running, 0),
        ],
    )
    .run();
    let a = app(&s, "a");
    assert_eq!(a.container_id.as_deref(), Some("containerd://late"));
    // previous: the other attempt 1, not attempt 0
    assert_eq!(
        terminated(a.last_state.as_ref()).container_id.as_deref(),
        Some("containerd://a1")
    );
    assert_eq!(
        app(&s, "b").container_id.as_deref(),
        Some("containerd://b0")
    );

    // The attempt decides before the creation time does.
    let mut old = rc("a", 0, Exited, 9);
    old.created_at = 900 * S;
    let s = Case::new(
        pod("Always", &[], &["a"]),
        vec![old, rc("a", 1, Running, 0)],
    )
    .run();
    let a = app(&s, "a");
    assert_eq!(a.container_id.as_deref(), Some("containerd://a1"));
    assert_eq!(terminated(a.last_state.as_ref()).exit_code, 9);
}

// ---- lastState and the waiting override

#[test]
fn last_state_from_previous_attempt() {
    let s = Case::new(
        pod("Always", &[], &["a"]),
        vec![rc("a", 0, Exited, 3), rc("a", 1, Running, 0)],
    )
    .run();
    let last = terminated(app(&s, "a").last_state.as_ref());
    assert_eq!((last.exit_code, last.reason.as_deref()), (3, Some("Error")));
}

#[test]
fn previous_that_is_not_exited_gives_no_last_state() {
    let s = Case::new(
        pod("Always", &[], &["a"]),
        vec![rc("a", 0, Running, 0), rc("a", 1, Created, 0)],
    )
    .run();
    assert_eq!(app(&s, "a").last_state, None);
}

#[test]
fn crash_loop_back_off_overrides_exited() {
    let s = Case::new(
        pod("Always", &[], &["a"]),
        vec![rc("a", 0, Exited, 1), rc("a", 1, Exited, 2)],
    )
    .wait(
        "a",
        "CrashLoopBackOff",
        "back-off 10s restarting failed container=a",
    )
    .run();
    let a = app(&s, "a");
    let w = state(a).waiting.as_ref().unwrap();
    assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(
        w.message.as_deref(),
        Some("back-off 10s restarting failed container=a")
    );
    // lastState is the current container's termination, not the older one
    let last = terminated(a.last_state.as_ref());
    assert_eq!(
        (last.exit_code, last.container_id.as_deref()),
        (2, Some("containerd://a1"))
    );
    assert_eq!(a.container_id.as_deref(), Some("containerd://a1"));
    assert_eq!(a.restart_count, 1);
    assert!(!a.ready);
}

#[test]
fn err_image_pull_while_restarting() {
    let s = Case::new(pod("OnFailure", &[], &["a"]), vec![rc("a", 0, Exited, 1)])
        .wait("a", "ErrImagePull", "pull failed")
        .run();
    let a = app(&s, "a");
    assert_eq!(waiting_reason(a), Some("ErrImagePull"));
    assert_eq!(terminated(a.last_state.as_ref()).exit_code, 1);
}

#[test]
fn override_of_created_keeps_previous_last_state() {
    let s = Case::new(
        pod("Always", &[], &["a"]),
        vec![rc("a", 0, Exited, 4), rc("a", 1, Created, 0)],
    )
    .wait("a", "RunContainerError", "start failed")
    .run();
    let a = app(&s, "a");
    assert_eq!(waiting_reason(a), Some("RunContainerError"));
    assert_eq!(terminated(a.last_state.as_ref()).exit_code, 4);
}

#[test]
fn stale_waiting_reasons_are_ignored() {
    let cases: [(&str, &[&str], &str, ContainerStatus); 4] = [
        ("Always", &[], "a", rc("a", 0, Running, 0)),
        ("Never", &[], "a", rc("a", 0, Exited, 1)),
        ("OnFailure", &[], "a", rc("a", 0, Exited, 0)),
        ("Always", &["a"], "b", rc("a", 0, Exited, 0)), // a succeeded init container
    ];
    for (policy, inits, apps, c) in cases {
        let s = Case::new(pod(policy, inits, &[apps]), vec![c])
            .wait("a", "CrashLoopBackOff", "x")
            .run();
        let all = s
            .init_container_statuses
            .iter()
            .flatten()
            .chain(s.container_statuses.iter().flatten());
        let a = all.into_iter().find(|s| s.name == "a").unwrap();
        assert_eq!(state(a).waiting, None, "{policy} {inits:?}");
        assert_eq!(a.last_state, None);
    }
}

// ---- restartCount

#[test]
fn restart_count_sources() {
    let mut c = rc("a", 4, Running, 0);
    c.annotations
        .insert(CONTAINER_RESTART_COUNT_ANNOTATION.into(), "7".into());
    let s = Case::new(pod("Always", &[], &["a"]), vec![c.clone()]).run();
    assert_eq!(app(&s, "a").restart_count, 7, "annotation wins");

    c.labels.clear(); // labels unreadable, annotation still there
    let s = Case::new(pod("Always", &[], &["a"]), vec![c.clone()]).run();
    assert_eq!(app(&s, "a").restart_count, 7);

    c.annotations
        .insert(CONTAINER_RESTART_COUNT_ANNOTATION.into(), "lots".into());
    let s = Case::new(pod("Always", &[], &["a"]), vec![c]).run();
    assert_eq!(app(&s, "a").restart_count, 4, "falls back to the attempt");
}

// ---- phase: one test per row of the table on `pod_phase`

fn st(name: &str, state: K8sContainerState, last: Option<i32>) -> K8sContainerStatus {
    K8sContainerStatus {
        name: name.into(),
        state: Some(state),
        last_state: last.map(term),
        ..K8sContainerStatus::default()
    }
}
fn run_() -> K8sContainerState {
    K8sContainerState {
        running: Some(ContainerStateRunning::default()),
        ..Default::default()
    }
}
fn term(code: i32) -> K8sContainerState {
    K8sContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            ..Default::default()
        }),
        ..Default::default()
    }
}
fn wait_() -> K8sContainerState {
    waiting("x", None)
}

#[test]
fn phase_table() {
    let (r, w) = (run_(), wait_());
    // (row, policy, init i, app a, app b, phase); `None` = no status.
    let none = || None;
    let some = |s: &K8sContainerState, last: Option<i32>| Some((s.clone(), last));
    type S = Option<(K8sContainerState, Option<i32>)>;
    #[rustfmt::skip]
        let rows: Vec<(&str, &str, S, S, S, &str)> = vec![
            ("1 init failed", "Never", some(&term(1), None), some(&w, None), some(&w, None), FAILED),
            ("1 init restarting after failure", "Never", some(&w, Some(1)), some(&w, None), some(&w, None), FAILED),
            ("2 init has no status", "Always", none(), none(), none(), PENDING),
            ("2 init running", "Always", some(&r, None), some(&w, None), some(&w, None), PENDING),
            ("2 init waiting", "Never", some(&w, None), some(&w, None), some(&w, None), PENDING),
            ("2 init failed, will restart", "Always", some(&term(1), None), some(&w, None), some(&w, None), PENDING),
            ("2 init crash-looping", "OnFailure", some(&w, Some(1)), some(&w, None), some(&w, None), PENDING),
            ("2 skipped: init reruns after apps ran", "Always", some(&r, None), some(&term(0), None), some(&term(1), None), RUNNING),
            ("3 waiting beside running", "Always", some(&term(0), None), some(&r, None), some(&w, None), PENDING),
            ("3 waiting beside terminated", "OnFailure", some(&term(0), None), some(&term(1), None), some(&w, None), PENDING),
            ("4 running beside failed", "Never", some(&term(0), None), some(&r, None), some(&term(1), None), RUNNING),
            ("4 running beside crash-loop", "Always", some(&term(0), None), some(&r, None), some(&w, Some(1)), RUNNING),
            ("5 Always, all terminated", "Always", some(&term(0), None), some(&term(0), None), some(&term(1), None), RUNNING),
            ("5 Always, all crash-looping", "Always", some(&term(0), None), some(&w, Some(1)), some(&w, Some(0)), RUNNING),
            ("6 OnFailure, all succeeded", "OnFailure", some(&term(0), None), some(&term(0), None), some(&term(0), None), SUCCEEDED),
            ("6 Never, all succeeded", "Never", some(&term(0), None), some(&term(0), None), some(&term(0), None), SUCCEEDED),
            ("7 Never, one failed", "Never", some(&term(0), None), some(&term(0), None), some(&term(2), None), FAILED),
            ("7 Never, waiting after exit counts as not succeeded", "Never", some(&term(0), None), some(&w, Some(0)), some(&term(0), None), FAILED),
            ("8 OnFailure, one failed", "OnFailure", some(&term(0), None), some(&term(0), None), some(&term(2), None), RUNNING),
            ("8 OnFailure, one crash-looping", "OnFailure", some(&term(0), None), some(&w, Some(1)), some(&term(0), None), RUNNING),
            ("9 no app statuses", "Always", some(&term(0), None), none(), none(), PENDING),
            ("9 running, one unknown", "Always", some(&term(0), None), some(&r, None), none(), PENDING),
            ("9 stopped, one unknown", "Never", some(&term(0), None), some(&term(0), None), none(), PENDING),
        ];
    let status = |name: &str, s: S| s.map(|(state, last)| st(name, state, last));
    for (what, policy, i, a, b, want) in rows {
        let init: Vec<_> = status("i", i).into_iter().collect();
        let app: Vec<_> = [status("a", a), status("b", b)]
            .into_iter()
            .flatten()
            .collect();
        let p = pod(policy, &["i"], &["a", "b"]);
        assert_eq!(pod_phase(&p, &init, &app), want, "{what}");
    }
    // A status without any state counts as unknown.
    let p = pod("Always", &[], &["a", "b"]);
    let stateless = K8sContainerStatus {
        name: "b".into(),
        ..Default::default()
    };
    assert_eq!(
        pod_phase(&p, &[], &[st("a", run_(), None), stateless]),
        PENDING
    );
    // Without init containers row 2 cannot apply.
    let p = pod("Always", &[], &["a"]);
    assert_eq!(pod_phase(&p, &[], &[st("a", run_(), None)]), RUNNING);
    assert_eq!(pod_phase(&p, &[], &[st("a", wait_(), None)]), PENDING);
}

#[test]
fn phase_end_to_end() {
    let cases = [
        ("Always", vec![], PENDING),
        ("Always", vec![rc("a", 0, Running, 0)], RUNNING),
        ("Never", vec![rc("a", 0, Exited, 0)], SUCCEEDED),
        ("Never", vec![rc("a", 0, Exited, 1)], FAILED),
        ("OnFailure", vec![rc("a", 0, Exited, 1)], RUNNING),
    ];
    for (policy, ctrs, want) in cases {
        let s = Case::new(pod(policy, &[], &["a"]), ctrs).run();
        assert_eq!(s.phase.as_deref(), Some(want), "{policy}");
    }
    let s = Case::new(pod("Never", &["i"], &["a"]), vec![rc("i", 0, Exited, 1)]).run();
    assert_eq!(s.phase.as_deref(), Some(FAILED));
    let s = Case::new(pod("Always", &["i"], &["a"]), vec![rc("i", 0, Exited, 1)])
        .wait("i", "CrashLoopBackOff", "")
        .run();
    assert_eq!(s.phase.as_deref(), Some(PENDING));
    assert_eq!(waiting_reason(init(&s, "i")), Some("CrashLoopBackOff"));
}

// ---- conditions

fn summary(s: &PodStatus) -> Vec<(String, String, Option<String>, Option<String>)> {
    let conds = s.conditions.as_ref().unwrap();
    conds
        .iter()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            )
        })
        .collect()
}

fn row(
    kind: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
) -> (String, String, Option<String>, Option<String>) {
    (
        kind.into(),
        status.into(),
        reason.map(Into::into),
        message.map(Into::into),
    )
}

#[test]
fn conditions_all_true_in_order() {
    let s = Case::new(
        pod("Always", &["i"], &["a"]),
        vec![rc("i", 0, Exited, 0), rc("a", 0, Running, 0)],
    )
    .run();
    assert_eq!(
        summary(&s),
        vec![
            row(POD_READY_TO_START_CONTAINERS, "True", None, None),
            row(INITIALIZED, "True", None, None),
            row(READY, "True", None, None),
            row(CONTAINERS_READY, "True", None, None),
            row(POD_SCHEDULED, "True", None, None),
        ]
    );
    for c in s.conditions.as_ref().unwrap() {
        assert_eq!(c.last_transition_time, t(1_000));
        assert_eq!(c.last_probe_time, None);
    }
}

#[test]
fn conditions_not_ready() {
    let mut case = Case::new(
        pod("Always", &["i1", "i2"], &["a", "b"]),
        vec![rc("i1", 0, Exited, 0), rc("i2", 0, Running, 0)],
    );
    case.sandbox_ready = false;
    let s = case.run();
    let unready = Some("containers with unready status: [a b]");
    assert_eq!(
        summary(&s),
        vec![
            row(POD_READY_TO_START_CONTAINERS, "False", None, None),
            row(
                INITIALIZED,
                "False",
                Some("ContainersNotInitialized"),
                Some("containers with incomplete status: [i2]")
            ),
            row(READY, "False", Some("ContainersNotReady"), unready),
            row(
                CONTAINERS_READY,
                "False",
                Some("ContainersNotReady"),
                unready
            ),
            row(POD_SCHEDULED, "True", None, None),
        ]
    );
}

#[test]
fn initialized_without_init_containers_and_after_app_started() {
    let s = Case::new(pod("Always", &[], &["a"]), vec![]).run();
    assert_eq!(condition(&s, INITIALIZED).status, "True");
    // init reran in a new sandbox while the app container's last run remains
    let s = Case::new(
        pod("Always", &["i"], &["a"]),
        vec![rc("i", 1, Running, 0), rc("a", 0, Exited, 0)],
    )
    .run();
    assert_eq!(condition(&s, INITIALIZED).status, "True");
}

#[test]
fn conditions_of_completed_pods() {
    let s = Case::new(
        pod("Never", &["i"], &["a"]),
        vec![rc("i", 0, Exited, 0), rc("a", 0, Exited, 0)],
    )
    .run();
    assert_eq!(s.phase.as_deref(), Some(SUCCEEDED));
    assert_eq!(
        summary(&s)[1],
        row(INITIALIZED, "True", Some("PodCompleted"), None)
    );
    assert_eq!(
        summary(&s)[2],
        row(READY, "False", Some("PodCompleted"), None)
    );
    assert_eq!(
        summary(&s)[3],
        row(CONTAINERS_READY, "False", Some("PodCompleted"), None)
    );

    // A failed pod's are PodFailed, as the kubelet's (seen side by side
    // in the parity harness).
    let s = Case::new(pod("Never", &[], &["a"]), vec![rc("a", 0, Exited, 1)]).run();
    assert_eq!(s.phase.as_deref(), Some(FAILED));
    assert_eq!(summary(&s)[1], row(INITIALIZED, "True", None, None));
    assert_eq!(summary(&s)[2], row(READY, "False", Some("PodFailed"), None));
    assert_eq!(
        summary(&s)[3],
        row(CONTAINERS_READY, "False", Some("PodFailed"), None)
    );
}

#[test]
fn app_container_statuses_are_sorted_by_name_and_init_ones_keep_spec_order() {
    let s = Case::new(
        pod("Always", &["z-init", "a-init"], &["web", "api", "cache"]),
        vec![rc("z-init", 0, Exited, 0), rc("a-init", 0, Exited, 0)],
    )
    .run();
    let names = |l: &Option<Vec<K8sContainerStatus>>| -> Vec<String> {
        l.iter().flatten().map(|c| c.name.clone()).collect()
    };
    assert_eq!(names(&s.container_statuses), ["api", "cache", "web"]);
    assert_eq!(names(&s.init_container_statuses), ["z-init", "a-init"]);
}

#[test]
fn a_finished_pod_keeps_the_ip_its_sandbox_had() {
    let p = pod("Never", &[], &["a"]);
    let running = Case::new(p.clone(), vec![rc("a", 0, Running, 0)]).run();
    assert_eq!(running.pod_ip.as_deref(), Some("10.0.0.7"));
    // Its sandbox stopped (not ready, no IP reported): the IP stays.
    let mut done = Case::new(p, vec![rc("a", 0, Exited, 1)]);
    done.sandbox_ready = false;
    done.pod_ip = "";
    done.previous = Some(running.clone());
    let done = done.run();
    assert_eq!(done.pod_ip.as_deref(), Some("10.0.0.7"));
    assert_eq!(done.pod_ips.unwrap()[0].ip, "10.0.0.7");
}

#[test]
fn transition_times_are_stable_while_status_holds() {
    let p = pod("Always", &[], &["a"]);
    let first = Case::new(p.clone(), vec![]).run();
    assert_eq!(condition(&first, READY).status, "False");

    // Nothing changed: every time is kept, even with a new reason text.
    let mut case = Case::new(p.clone(), vec![rc("a", 0, Created, 0)]);
    case.previous = Some(first.clone());
    case.now = 2_000;
    let second = case.run();
    for c in second.conditions.as_ref().unwrap() {
        assert_eq!(c.last_transition_time, t(1_000), "{}", c.type_);
    }

    // The container runs: only Ready and ContainersReady move.
    let mut case = Case::new(p.clone(), vec![rc("a", 0, Running, 0)]);
    case.previous = Some(second);
    case.now = 3_000;
    let third = case.run();
    let times: Vec<_> = third
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.last_transition_time.clone())
        .collect();
    assert_eq!(
        times,
        vec![t(1_000), t(1_000), t(3_000), t(3_000), t(1_000)]
    );

    // A previous condition without a time gets `now`.
    let mut prev = third.clone();
    prev.conditions.as_mut().unwrap()[0].last_transition_time = None;
    let mut case = Case::new(p, vec![rc("a", 0, Running, 0)]);
    case.previous = Some(prev);
    case.now = 4_000;
    assert_eq!(
        condition(&case.run(), POD_READY_TO_START_CONTAINERS).last_transition_time,
        t(4_000)
    );
}

// ---- addresses and times

#[test]
fn pod_ips() {
    let s = Case::new(pod("Always", &[], &["a"]), vec![]).run();
    assert_eq!(s.pod_ip.as_deref(), Some("10.0.0.7"));
    assert_eq!(
        s.pod_ips,
        Some(vec![PodIP {
            ip: "10.0.0.7".into()
        }])
    );
    assert_eq!(s.host_ip.as_deref(), Some("192.168.1.5"));
    assert_eq!(
        s.host_ips,
        Some(vec![HostIP {
            ip: "192.168.1.5".into()
        }])
    );

    let mut case = Case::new(
        pod_with("Always", &[], &["a"], json!({"hostNetwork": true})),
        vec![],
    );
    case.pod_ip = "";
    let s = case.run();
    assert_eq!(s.pod_ip.as_deref(), Some("192.168.1.5"));
    assert_eq!(
        s.pod_ips,
        Some(vec![PodIP {
            ip: "192.168.1.5".into()
        }])
    );

    let mut case = Case::new(pod("Always", &[], &["a"]), vec![]);
    case.pod_ip = "";
    let s = case.run();
    assert_eq!((s.pod_ip, s.pod_ips), (None, None));
}

#[test]
fn start_time_and_json_shape() {
    let s = Case::new(pod("Always", &[], &["a"]), vec![]).run();
    assert_eq!(s.start_time, t(50));
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["startTime"], "1970-01-01T00:00:50Z");
    assert_eq!(v["phase"], "Pending");
    assert_eq!(v["qosClass"], "BestEffort");
    assert_eq!(
        v["containerStatuses"][0]["state"],
        json!({"waiting": {"reason": "ContainerCreating"}})
    );
    assert_eq!(v["containerStatuses"][0]["started"], false);
    assert!(v.get("initContainerStatuses").is_none());
}

// ---- QoS

fn qos(apps: serde_json::Value, inits: serde_json::Value) -> &'static str {
    let p: Pod =
        serde_json::from_value(json!({"spec": {"containers": apps, "initContainers": inits}}))
            .unwrap();
    qos_class(&p).as_str()
}

fn res(requests: serde_json::Value, limits: serde_json::Value) -> serde_json::Value {
    json!({"name": "c", "resources": {"requests": requests, "limits": limits}})
}

#[test]
fn qos_classes() {
    let none = json!({});
    let both = json!({"cpu": "500m", "memory": "1Gi"});
    let cases = [
        ("nothing", json!([{"name": "c"}]), json!([]), "BestEffort"),
        (
            "zero amounts",
            json!([res(json!({"cpu": "0"}), json!({"memory": "0Mi"}))]),
            json!([]),
            "BestEffort",
        ),
        (
            "other resources only",
            json!([res(json!({"ephemeral-storage": "1Gi"}), none.clone())]),
            json!([]),
            "BestEffort",
        ),
        (
            "limits only",
            json!([res(none.clone(), both.clone())]),
            json!([]),
            "Guaranteed",
        ),
        (
            "equal in other units",
            json!([res(json!({"cpu": "0.5", "memory": "1024Mi"}), both.clone())]),
            json!([]),
            "Guaranteed",
        ),
        (
            "two guaranteed",
            json!([
                res(none.clone(), both.clone()),
                res(both.clone(), both.clone())
            ]),
            json!([]),
            "Guaranteed",
        ),
        (
            "guaranteed with init",
            json!([res(none.clone(), both.clone())]),
            json!([res(none.clone(), both.clone())]),
            "Guaranteed",
        ),
        (
            "requests only",
            json!([res(both.clone(), none.clone())]),
            json!([]),
            "Burstable",
        ),
        (
            "request below limit",
            json!([res(json!({"cpu": "100m", "memory": "1Gi"}), both.clone())]),
            json!([]),
            "Burstable",
        ),
        (
            "cpu limit only",
            json!([res(none.clone(), json!({"cpu": "1"}))]),
            json!([]),
            "Burstable",
        ),
        (
            "one container without",
            json!([res(none.clone(), both.clone()), {"name": "d"}]),
            json!([]),
            "Burstable",
        ),
        (
            "init container without limits",
            json!([res(none.clone(), both.clone())]),
            json!([res(json!({"cpu": "1m"}), none.clone())]),
            "Burstable",
        ),
    ];
    for (what, apps, inits, want) in cases {
        assert_eq!(qos(apps, inits), want, "{what}");
    }
}

// ---- probes

use crate::prober::{ProbeReading, ProbeResult};

pub(super) fn reading(id: &str, result: ProbeResult) -> Option<ProbeReading> {
    Some(ProbeReading {
        container_id: Some(id.into()),
        result,
    })
}

pub(super) fn probes(
    readiness: Option<ProbeReading>,
    startup: Option<ProbeReading>,
) -> ContainerProbeResults {
    ContainerProbeResults { readiness, startup }
}

#[test]
fn ready_and_started_follow_probe_results() {
    use ProbeResult::{Failure, Success, Unknown};
    // Container "a", attempt 0, has the runtime ID "a0".
    // (what, state, probes of "a", started, ready)
    let rows: Vec<(
        &str,
        ContainerState,
        Option<ContainerProbeResults>,
        bool,
        bool,
    )> = vec![
        ("no probes, running", Running, None, true, true),
        ("no probes, exited", Exited, None, false, false),
        (
            "readiness Failure",
            Running,
            Some(probes(reading("a0", Failure), None)),
            true,
            false,
        ),
        (
            "readiness Success",
            Running,
            Some(probes(reading("a0", Success), None)),
            true,
            true,
        ),
        (
            "readiness Success of the previous instance",
            Running,
            Some(probes(reading("old", Success), None)),
            true,
            false,
        ),
        (
            "startup pending",
            Running,
            Some(probes(None, reading("a0", Unknown))),
            false,
            false,
        ),
        (
            "startup pending, readiness Success",
            Running,
            Some(probes(reading("a0", Success), reading("a0", Unknown))),
            false,
            false,
        ),
        (
            "startup Success, readiness Failure",
            Running,
            Some(probes(reading("a0", Failure), reading("a0", Success))),
            true,
            false,
        ),
        (
            "startup and readiness Success",
            Running,
            Some(probes(reading("a0", Success), reading("a0", Success))),
            true,
            true,
        ),
        (
            "both Success but not running",
            Exited,
            Some(probes(reading("a0", Success), reading("a0", Success))),
            false,
            false,
        ),
    ];
    for (what, state, results, started, ready) in rows {
        let mut case = Case::new(pod("Always", &[], &["a"]), vec![rc("a", 0, state, 1)]);
        if let Some(results) = results {
            case.probes.insert("a".into(), results);
        }
        let s = case.run();
        let a = app(&s, "a");
        assert_eq!((a.started, a.ready), (Some(started), ready), "{what}");
        let want = if ready { "True" } else { "False" };
        assert_eq!(condition(&s, CONTAINERS_READY).status, want, "{what}");
        assert_eq!(condition(&s, READY).status, want, "{what}");
    }
}

#[test]
fn unready_containers_are_listed_in_spec_order() {
    use ProbeResult::{Failure, Success, Unknown};
    let containers = vec![
        rc("c", 0, Running, 0),
        rc("a", 0, Running, 0),
        rc("b", 0, Running, 0),
    ];
    let mut case = Case::new(pod("Always", &[], &["c", "a", "b"]), containers);
    case.probes
        .insert("a".into(), probes(reading("a0", Failure), None));
    case.probes
        .insert("c".into(), probes(None, reading("c0", Unknown)));
    case.probes
        .insert("b".into(), probes(reading("b0", Success), None));
    let s = case.run();
    let message = Some("containers with unready status: [c a]");
    assert_eq!(
        summary(&s)[2..4],
        [
            row(READY, "False", Some("ContainersNotReady"), message),
            row(
                CONTAINERS_READY,
                "False",
                Some("ContainersNotReady"),
                message
            ),
        ]
    );
    assert_eq!(s.phase.as_deref(), Some(RUNNING));

    // Everything passes: both conditions True, no reason.
    case.probes
        .insert("a".into(), probes(reading("a0", Success), None));
    case.probes
        .insert("c".into(), probes(None, reading("c0", Success)));
    let s = case.run();
    assert_eq!(
        summary(&s)[2..4],
        [
            row(READY, "True", None, None),
            row(CONTAINERS_READY, "True", None, None),
        ]
    );
}

#[test]
fn init_containers_are_ready_once_they_exited_zero() {
    // (state, exit code, started, ready)
    let rows = [
        (Running, 0, true, false),
        (Exited, 0, false, true),
        (Exited, 1, false, false),
        (Created, 0, false, false),
    ];
    for (state, code, started, ready) in rows {
        let s = Case::new(pod("Never", &["i"], &["a"]), vec![rc("i", 0, state, code)]).run();
        let i = init(&s, "i");
        assert_eq!(
            (i.started, i.ready),
            (Some(started), ready),
            "{state:?} {code}"
        );
    }
}

// ---- properties

fn any_state() -> impl Strategy<Value = ContainerState> {
    prop_oneof![Just(Created), Just(Running), Just(Exited), Just(Unknown)]
}

proptest! {
    #[test]
    fn never_panics_and_lists_the_spec(
        n_init in 0usize..3,
        n_app in 1usize..4,
        policy in prop_oneof![Just("Always"), Just("OnFailure"), Just("Never"), Just("Weird")],
        ctrs in proptest::collection::vec(
            (0usize..7, 0u32..4, any_state(), -3i32..3, any::<i64>(), any::<i64>(), any::<bool>(), ".{0,4}"),
            0..10,
        ),
        waits in proptest::collection::vec((0usize..7, ".{0,6}"), 0..4),
        sandbox_ready in any::<bool>(),
        host_network in any::<bool>(),
        ip in prop_oneof![Just(""), Just("10.1.1.1")],
        now in -1_000_000i64..4_000_000_000,
        with_previous in any::<bool>(),
    ) {
        let names = ["i0", "i1", "i2", "a0", "a1", "a2", "other"];
        let inits: Vec<&str> = names[..n_init].to_vec();
        let apps: Vec<&str> = names[3..3 + n_app].to_vec();
        let p = pod_with(policy, &inits, &apps, json!({"hostNetwork": host_network}));
        let containers: Vec<ContainerStatus> = ctrs
            .into_iter()
            .map(|(n, attempt, state, code, created, finished, labelled, count)| {
                let mut c = rc(names[n], attempt, state, code);
                c.created_at = created;
                c.started_at = created;
                c.finished_at = finished;
                if !labelled {
                    c.labels.clear();
                    c.annotations.insert(CONTAINER_RESTART_COUNT_ANNOTATION.into(), count);
                }
                c
            })
            .collect();
        let waiting: HashMap<String, WaitingReason> = waits
            .into_iter()
            .map(|(n, r)| (names[n].to_string(), WaitingReason { reason: r.clone(), message: r }))
            .collect();
        let probes = HashMap::new();
        let mut case = Case { pod: p, containers, waiting, probes, messages: HashMap::new(), sandbox_ready, pod_ip: ip, previous: None, now };
        if with_previous {
            case.previous = Some(case.run());
        }
        let s = case.run();
        let listed = |v: &Option<Vec<K8sContainerStatus>>| -> Vec<String> {
            v.iter().flatten().map(|c| c.name.clone()).collect()
        };
        prop_assert_eq!(listed(&s.container_statuses), apps);
        prop_assert_eq!(listed(&s.init_container_statuses), inits.clone());
        prop_assert_eq!(s.init_container_statuses.is_some(), n_init > 0);
        let kinds: Vec<&str> = s.conditions.iter().flatten().map(|c| c.type_.as_str()).collect();
        prop_assert_eq!(kinds, vec![POD_READY_TO_START_CONTAINERS, INITIALIZED, READY, CONTAINERS_READY, POD_SCHEDULED]);
        prop_assert!([PENDING, RUNNING, SUCCEEDED, FAILED].contains(&s.phase.as_deref().unwrap()));
        let inits = s.init_container_statuses.iter().flatten().map(|c| (c, true));
        for (c, is_init) in inits.chain(s.container_statuses.iter().flatten().map(|c| (c, false))) {
            let st = c.state.as_ref().unwrap();
            let set = [st.running.is_some(), st.terminated.is_some(), st.waiting.is_some()];
            prop_assert_eq!(set.iter().filter(|b| **b).count(), 1);
            // Without probes: an app container is ready and started when it
            // runs; an init container is ready once it exited 0.
            let exited_0 = st.terminated.as_ref().is_some_and(|t| t.exit_code == 0);
            prop_assert_eq!(c.ready, if is_init { exited_0 } else { st.running.is_some() });
            prop_assert_eq!(c.started, Some(st.running.is_some()));
            prop_assert!(c.restart_count >= 0);
        }
        prop_assert!(serde_json::to_string(&s).is_ok());
    }
}

#[test]
fn a_rejected_pod_is_failed_with_its_containers_unknown_and_no_ip() {
    let mut case = Case::new(pod("Always", &[], &["b", "a"]), vec![]);
    case.sandbox_ready = false;
    case.pod_ip = "";
    let input = StatusInput {
        pod: &case.pod,
        sandbox_ready: false,
        pod_ip: "",
        host_ip: "192.168.1.5",
        containers: &[],
        waiting: &case.waiting,
        probes: &case.probes,
        messages: &case.messages,
        start_time: ts(50),
        runtime_name: "containerd",
        previous: None,
        now: ts(60),
    };
    let s = rejected_pod_status(&input, "UnexpectedAdmissionError", "no room");
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("UnexpectedAdmissionError"));
    assert_eq!(s.message.as_deref(), Some("Pod was rejected: no room"));
    assert_eq!(
        (s.pod_ip.as_ref(), s.host_ip.as_deref()),
        (None, Some("192.168.1.5"))
    );
    let names: Vec<&str> = (s.container_statuses.iter().flatten())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b"]);
    for c in s.container_statuses.iter().flatten() {
        let t = terminated(c.state.as_ref());
        assert_eq!(
            (t.exit_code, t.reason.as_deref()),
            (137, Some("ContainerStatusUnknown"))
        );
        assert_eq!((c.ready, c.started), (false, Some(false)));
    }
    for kind in [READY, CONTAINERS_READY] {
        let c = condition(&s, kind);
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("False", Some("PodFailed"))
        );
        assert_eq!(c.message, None);
    }
    assert_eq!(condition(&s, POD_READY_TO_START_CONTAINERS).status, "False");
    assert_eq!(condition(&s, INITIALIZED).status, "True");
}

#[test]
fn a_mount_the_runtime_made_recursively_read_only_is_enabled() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "uid": "u1"},
        "spec": {"containers": [{"name": "app", "image": "i", "volumeMounts": [
            {"name": "ro", "mountPath": "/rro", "readOnly": true, "recursiveReadOnly": "IfPossible"},
            {"name": "ro", "mountPath": "/ro", "readOnly": true}]}]}
    }))
    .unwrap();
    let mut running = rc("app", 0, Running, 0);
    let mount = |path: &str, recursive_read_only| crate::cri::types::Mount {
        container_path: path.into(),
        readonly: true,
        recursive_read_only,
        ..Default::default()
    };
    running.mounts = vec![mount("/rro", true), mount("/ro", false)];
    let s = Case::new(pod, vec![running]).run();
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(
        json["containerStatuses"][0]["volumeMounts"],
        json!([
            {"name": "ro", "mountPath": "/rro", "readOnly": true, "recursiveReadOnly": "Enabled"},
            {"name": "ro", "mountPath": "/ro", "readOnly": true, "recursiveReadOnly": "Disabled"}
        ])
    );
}
