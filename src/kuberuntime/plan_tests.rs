//! Table tests for `plan`: one row per branch (sidecars: `plan_sidecar_tests`).

use super::*;

pub(super) const S: i64 = 1_000_000_000;
pub(super) const NOW: i64 = 1_000 * S;

fn want(name: &str, hash: u64) -> DesiredContainer {
    DesiredContainer::new(name, hash, false)
}

pub(super) fn pod(policy: RestartPolicy, inits: &[&str], apps: &[&str]) -> DesiredPod {
    DesiredPod {
        restart_policy: policy,
        init_containers: inits.iter().map(|n| want(n, 1)).collect(),
        containers: apps.iter().map(|n| want(n, 1)).collect(),
    }
}

pub(super) fn sandbox(id: &str, attempt: u32, ready: bool) -> ObservedSandbox {
    ObservedSandbox {
        id: id.into(),
        attempt,
        state: if ready {
            PodSandboxState::Ready
        } else {
            PodSandboxState::NotReady
        },
        created_at: attempt as i64,
    }
}

pub(super) fn ctr(
    sb: &str,
    name: &str,
    attempt: u32,
    state: ContainerState,
    exit: i32,
) -> ObservedContainer {
    ObservedContainer {
        id: format!("{name}-{attempt}"),
        sandbox_id: sb.into(),
        name: name.into(),
        attempt,
        state,
        hash: 1,
        restart_count: attempt,
        exit_code: exit,
        created_at: attempt as i64,
        finished_at: NOW - 5 * S,
    }
}

pub(super) fn running(sb: &str, name: &str, attempt: u32) -> ObservedContainer {
    ctr(sb, name, attempt, ContainerState::Running, 0)
}

pub(super) fn exited(sb: &str, name: &str, attempt: u32, code: i32) -> ObservedContainer {
    ctr(sb, name, attempt, ContainerState::Exited, code)
}

pub(super) fn observed(
    sandboxes: Vec<ObservedSandbox>,
    containers: Vec<ObservedContainer>,
) -> ObservedPod {
    ObservedPod {
        sandboxes,
        containers,
        ..ObservedPod::default()
    }
}

pub(super) fn start(kind: ContainerKind, name: &str, attempt: u32, restart: bool) -> Action {
    Action::StartContainer {
        kind,
        name: name.into(),
        attempt,
        restart_count: attempt,
        restart,
    }
}

pub(super) fn app(name: &str, attempt: u32) -> Action {
    start(ContainerKind::App, name, attempt, attempt > 0)
}

pub(super) fn init(name: &str, attempt: u32) -> Action {
    start(ContainerKind::Init, name, attempt, attempt > 0)
}

pub(super) fn kinds(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .map(|a| match a {
            Action::KillPod { .. } => "KillPod".to_string(),
            Action::CreateSandbox { attempt } => format!("CreateSandbox({attempt})"),
            Action::StartContainer { name, .. } => format!("Start({name})"),
            Action::KillContainer { name, .. } => format!("Kill({name})"),
            Action::RemoveSandbox { id } => format!("RemoveSandbox({id})"),
        })
        .collect()
}

/// A back-off that blocks `name` (it restarted recently).
pub(super) fn backing_off(name: &str) -> BackOff {
    let mut b = BackOff::default();
    b.next(name, NOW - 6 * S);
    b
}

#[test]
fn new_pod_gets_a_sandbox_and_all_app_containers() {
    let p = plan(
        &pod(RestartPolicy::Always, &[], &["a", "b"]),
        &ObservedPod::default(),
        &BackOff::default(),
        NOW,
    );
    assert_eq!(
        p.actions,
        [
            Action::CreateSandbox { attempt: 0 },
            app("a", 0),
            app("b", 0)
        ]
    );
    assert!(p.waiting.is_empty());
}

#[test]
fn new_pod_with_init_containers_starts_only_the_first_init() {
    let p = plan(
        &pod(RestartPolicy::Always, &["i1", "i2"], &["a"]),
        &ObservedPod::default(),
        &BackOff::default(),
        NOW,
    );
    assert_eq!(
        p.actions,
        [Action::CreateSandbox { attempt: 0 }, init("i1", 0)]
    );
}

#[test]
fn steady_state_does_nothing() {
    let o = observed(vec![sandbox("s0", 0, true)], vec![running("s0", "a", 0)]);
    let p = plan(
        &pod(RestartPolicy::Always, &[], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert!(p.actions.is_empty(), "{p:?}");
}

#[test]
fn sandbox_not_ready_is_recreated_with_the_next_attempt_after_killing() {
    let o = observed(vec![sandbox("s0", 0, false)], vec![running("s0", "a", 0)]);
    let p = plan(
        &pod(RestartPolicy::Always, &[], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert_eq!(kinds(&p), ["KillPod", "CreateSandbox(1)", "Start(a)"]);
    // The container name is reserved per attempt across sandboxes; the
    // restart count carries on.
    assert_eq!(p.actions[2], app("a", 1));
}

#[test]
fn stale_sandboxes_are_removed() {
    let o = observed(
        vec![sandbox("s0", 0, false), sandbox("s1", 1, true)],
        vec![running("s1", "a", 1)],
    );
    let p = plan(
        &pod(RestartPolicy::Always, &[], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert_eq!(kinds(&p), ["RemoveSandbox(s0)"]);
}

#[test]
fn missing_app_container_is_started() {
    let o = observed(vec![sandbox("s0", 0, true)], vec![running("s0", "a", 0)]);
    let p = plan(
        &pod(RestartPolicy::Always, &[], &["a", "b"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert_eq!(p.actions, [app("b", 0)]);
}

#[test]
fn changed_spec_hash_kills_and_recreates() {
    let o = observed(vec![sandbox("s0", 0, true)], vec![running("s0", "a", 0)]);
    let mut d = pod(RestartPolicy::Always, &[], &["a"]);
    d.containers[0] = want("a", 2);
    let p = plan(&d, &o, &BackOff::default(), NOW);
    assert_eq!(kinds(&p), ["Kill(a)", "Start(a)"]);
    assert_eq!(p.actions[1], app("a", 1));
}

#[test]
fn a_container_with_the_legacy_hash_of_its_spec_is_kept() {
    // Started by a crilet before the kubelet's hash (its hash is 1 here).
    let o = observed(vec![sandbox("s0", 0, true)], vec![running("s0", "a", 0)]);
    let mut d = pod(RestartPolicy::Always, &[], &["a"]);
    d.containers[0].hash = 2;
    assert!(plan(&d, &o, &BackOff::default(), NOW).actions.is_empty());
    d.containers[0].legacy_hash = 3;
    let p = plan(&d, &o, &BackOff::default(), NOW);
    assert_eq!(kinds(&p), ["Kill(a)", "Start(a)"]);
}

#[test]
fn created_but_never_started_is_replaced() {
    let o = observed(
        vec![sandbox("s0", 0, true)],
        vec![ctr("s0", "a", 0, ContainerState::Created, 0)],
    );
    let p = plan(
        &pod(RestartPolicy::Always, &[], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert_eq!(kinds(&p), ["Kill(a)", "Start(a)"]);
}

#[test]
fn restart_policy_table() {
    // (policy, exit code, restarted?)
    let rows = [
        (RestartPolicy::Always, 0, true),
        (RestartPolicy::Always, 1, true),
        (RestartPolicy::OnFailure, 0, false),
        (RestartPolicy::OnFailure, 2, true),
        (RestartPolicy::Never, 0, false),
        (RestartPolicy::Never, 1, false),
    ];
    for (policy, code, restarted) in rows {
        let o = observed(
            vec![sandbox("s0", 0, true)],
            vec![exited("s0", "a", 0, code)],
        );
        let p = plan(&pod(policy, &[], &["a"]), &o, &BackOff::default(), NOW);
        if restarted {
            assert_eq!(p.actions, [app("a", 1)], "{policy:?} exit {code}");
        } else {
            // Nothing left to run: the sandbox is stopped.
            assert_eq!(kinds(&p), ["KillPod"], "{policy:?} exit {code}");
        }
    }
}

#[test]
fn crash_back_off_holds_the_restart_and_says_until_when() {
    let o = observed(vec![sandbox("s0", 0, true)], vec![exited("s0", "a", 0, 1)]);
    let b = backing_off("a");
    let p = plan(&pod(RestartPolicy::Always, &[], &["a"]), &o, &b, NOW);
    assert!(p.actions.is_empty(), "{p:?}");
    // Finished 5 s ago with a 10 s wait: 5 s to go.
    assert_eq!(
        p.waiting,
        [Waiting {
            name: "a".into(),
            until: NOW + 5 * S
        }]
    );
    assert_eq!(p.next_wake(), Some(NOW + 5 * S));
    // Once the wait is over it restarts.
    let p = plan(
        &pod(RestartPolicy::Always, &[], &["a"]),
        &o,
        &b,
        NOW + 5 * S,
    );
    assert_eq!(p.actions, [app("a", 1)]);
}

#[test]
fn one_container_in_back_off_keeps_the_pod_up() {
    let o = observed(
        vec![sandbox("s0", 0, true)],
        vec![exited("s0", "a", 0, 1), exited("s0", "b", 0, 0)],
    );
    let p = plan(
        &pod(RestartPolicy::OnFailure, &[], &["a", "b"]),
        &o,
        &backing_off("a"),
        NOW,
    );
    assert!(p.actions.is_empty(), "{p:?}");
    assert_eq!(p.waiting.len(), 1);
}

#[test]
fn init_containers_run_in_order_each_to_completion() {
    let d = pod(RestartPolicy::Always, &["i1", "i2"], &["a"]);
    let b = BackOff::default();
    // i1 still running: wait.
    let o = observed(vec![sandbox("s0", 0, true)], vec![running("s0", "i1", 0)]);
    assert!(plan(&d, &o, &b, NOW).actions.is_empty());
    // i1 done: start i2.
    let o = observed(vec![sandbox("s0", 0, true)], vec![exited("s0", "i1", 0, 0)]);
    assert_eq!(plan(&d, &o, &b, NOW).actions, [init("i2", 0)]);
    // Both done: start the app containers.
    let o = observed(
        vec![sandbox("s0", 0, true)],
        vec![exited("s0", "i1", 0, 0), exited("s0", "i2", 0, 0)],
    );
    assert_eq!(plan(&d, &o, &b, NOW).actions, [app("a", 0)]);
}

#[test]
fn failed_init_container_restarts_with_back_off_or_fails_the_pod() {
    let o = observed(vec![sandbox("s0", 0, true)], vec![exited("s0", "i1", 0, 1)]);
    let p = plan(
        &pod(RestartPolicy::Always, &["i1"], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert_eq!(p.actions, [init("i1", 1)]);
    let p = plan(
        &pod(RestartPolicy::OnFailure, &["i1"], &["a"]),
        &o,
        &backing_off("i1"),
        NOW,
    );
    assert!(p.actions.is_empty());
    assert_eq!(p.waiting.len(), 1);
    let p = plan(
        &pod(RestartPolicy::Never, &["i1"], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert_eq!(kinds(&p), ["KillPod"]);
}

#[test]
fn never_pod_whose_sandbox_died_is_not_recreated() {
    let o = observed(vec![sandbox("s0", 0, false)], vec![exited("s0", "a", 0, 0)]);
    let p = plan(
        &pod(RestartPolicy::Never, &[], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert!(p.actions.is_empty(), "{p:?}");
    // Something still running is stopped.
    let o = observed(vec![sandbox("s0", 0, false)], vec![running("s0", "a", 0)]);
    let p = plan(
        &pod(RestartPolicy::Never, &[], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert_eq!(kinds(&p), ["KillPod"]);
}

#[test]
fn on_failure_pod_that_succeeded_is_not_recreated() {
    let o = observed(vec![sandbox("s0", 0, false)], vec![exited("s0", "a", 0, 0)]);
    let p = plan(
        &pod(RestartPolicy::OnFailure, &[], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert!(p.actions.is_empty(), "{p:?}");
    // ...but one that failed gets a new sandbox and only the failed container.
    let o = observed(
        vec![sandbox("s0", 0, false)],
        vec![exited("s0", "a", 0, 0), exited("s0", "b", 0, 3)],
    );
    let p = plan(
        &pod(RestartPolicy::OnFailure, &[], &["a", "b"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert_eq!(kinds(&p), ["CreateSandbox(1)", "Start(b)"]);
}

#[test]
fn containers_no_longer_in_the_spec_are_stopped() {
    let o = observed(
        vec![sandbox("s0", 0, true)],
        vec![running("s0", "a", 0), running("s0", "old", 0)],
    );
    let p = plan(
        &pod(RestartPolicy::Always, &[], &["a"]),
        &o,
        &BackOff::default(),
        NOW,
    );
    assert_eq!(kinds(&p), ["Kill(old)"]);
}

#[test]
fn restart_policy_parse_defaults_to_always() {
    assert_eq!(RestartPolicy::parse(None), RestartPolicy::Always);
    assert_eq!(RestartPolicy::parse(Some("Never")), RestartPolicy::Never);
    assert_eq!(
        RestartPolicy::parse(Some("OnFailure")),
        RestartPolicy::OnFailure
    );
    assert_eq!(RestartPolicy::parse(Some("Always")), RestartPolicy::Always);
}

#[test]
fn a_plan_starts_something_when_it_runs_a_sandbox_or_a_container() {
    let start = Action::StartContainer {
        kind: ContainerKind::App,
        name: "a".into(),
        attempt: 0,
        restart_count: 0,
        restart: false,
    };
    let kill = Action::KillContainer {
        id: "c".into(),
        name: "a".into(),
        reason: SPEC_CHANGED.into(),
    };
    let cases = [
        (vec![], false),
        (vec![Action::CreateSandbox { attempt: 0 }], true),
        (vec![kill.clone(), start], true),
        (vec![kill], false),
        (
            vec![
                Action::KillPod {
                    reason: "gone".into(),
                },
                Action::RemoveSandbox { id: "s".into() },
            ],
            false,
        ),
    ];
    for (actions, want) in cases {
        let plan = Plan {
            actions: actions.clone(),
            waiting: Vec::new(),
        };
        assert_eq!(plan.starts(), want, "{actions:?}");
    }
}
