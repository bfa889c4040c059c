//! Table tests for `plan` with sidecars (init containers with
//! `restartPolicy: Always`), after the kubelet's computeInitContainerActions.

use super::tests::{
    NOW, S, app, backing_off, ctr, exited, init, kinds, observed, running, sandbox, start,
};
use super::*;

/// A pod whose init containers are `inits` as (name, sidecar?).
fn pod(policy: RestartPolicy, inits: &[(&str, bool)], apps: &[&str]) -> DesiredPod {
    DesiredPod {
        restart_policy: policy,
        init_containers: inits
            .iter()
            .map(|(n, side)| DesiredContainer::new(*n, 1, *side))
            .collect(),
        containers: apps
            .iter()
            .map(|n| DesiredContainer::new(*n, 1, false))
            .collect(),
    }
}

fn sidecar(name: &str, attempt: u32) -> Action {
    start(ContainerKind::Sidecar, name, attempt, attempt > 0)
}

/// [side (sidecar), setup, main]: the usual shape.
fn usual(policy: RestartPolicy) -> DesiredPod {
    pod(policy, &[("side", true), ("setup", false)], &["main"])
}

fn ready() -> ObservedSandbox {
    sandbox("s0", 0, true)
}

#[test]
fn a_new_pod_starts_with_its_first_sidecar() {
    let p = plan(
        &usual(RestartPolicy::Always),
        &ObservedPod::default(),
        &BackOff::default(),
        NOW,
    );
    assert_eq!(
        p.actions,
        [Action::CreateSandbox { attempt: 0 }, sidecar("side", 0)]
    );
}

#[test]
fn the_next_init_container_starts_once_the_sidecar_runs_not_once_it_exits() {
    let d = usual(RestartPolicy::Always);
    let b = BackOff::default();
    // Created, not yet started: replaced, nothing after it.
    let o = observed(
        vec![ready()],
        vec![ctr("s0", "side", 0, ContainerState::Created, 0)],
    );
    assert_eq!(kinds(&plan(&d, &o, &b, NOW)), ["Kill(side)", "Start(side)"]);
    // Running: the next init container starts; the sidecar is left alone.
    let o = observed(vec![ready()], vec![running("s0", "side", 0)]);
    assert_eq!(plan(&d, &o, &b, NOW).actions, [init("setup", 0)]);
    // The regular one running: wait for it to finish.
    let o = observed(
        vec![ready()],
        vec![running("s0", "side", 0), running("s0", "setup", 0)],
    );
    assert!(plan(&d, &o, &b, NOW).actions.is_empty());
    // Done: the app containers start, the sidecar keeps running.
    let o = observed(
        vec![ready()],
        vec![running("s0", "side", 0), exited("s0", "setup", 0, 0)],
    );
    assert_eq!(plan(&d, &o, &b, NOW).actions, [app("main", 0)]);
    // Steady state: nothing to do.
    let o = observed(
        vec![ready()],
        vec![
            running("s0", "side", 0),
            exited("s0", "setup", 0, 0),
            running("s0", "main", 0),
        ],
    );
    assert!(plan(&d, &o, &b, NOW).actions.is_empty());
}

#[test]
fn a_sidecar_as_last_init_container_lets_the_app_containers_start() {
    let d = pod(RestartPolicy::Always, &[("side", true)], &["a", "b"]);
    let o = observed(vec![ready()], vec![running("s0", "side", 0)]);
    let p = plan(&d, &o, &BackOff::default(), NOW);
    assert_eq!(p.actions, [app("a", 0), app("b", 0)]);
}

#[test]
fn a_startup_probe_holds_the_next_init_container_until_it_succeeds() {
    let mut d = usual(RestartPolicy::Always);
    d.init_containers[0].startup_probe = true;
    let mut o = observed(vec![ready()], vec![running("s0", "side", 0)]);
    let b = BackOff::default();
    assert!(plan(&d, &o, &b, NOW).actions.is_empty(), "not started yet");
    // A success about another instance does not count.
    o.startup_succeeded.insert("side-9".into());
    assert!(plan(&d, &o, &b, NOW).actions.is_empty());
    o.startup_succeeded.insert("side-0".into());
    assert_eq!(plan(&d, &o, &b, NOW).actions, [init("setup", 0)]);
}

#[test]
fn a_sidecar_that_exits_is_restarted_with_back_off_while_the_rest_runs() {
    let d = usual(RestartPolicy::Always);
    let o = observed(
        vec![ready()],
        vec![
            exited("s0", "side", 0, 137),
            exited("s0", "setup", 0, 0),
            running("s0", "main", 0),
        ],
    );
    // First restart at once; setup is not rerun, main not touched.
    let p = plan(&d, &o, &BackOff::default(), NOW);
    assert_eq!(p.actions, [sidecar("side", 1)]);
    // Then held by the back-off: it waits, and the pod stays up.
    let p = plan(&d, &o, &backing_off("side"), NOW);
    assert!(p.actions.is_empty(), "{p:?}");
    assert_eq!(
        p.waiting,
        [Waiting {
            name: "side".into(),
            until: NOW + 5 * S
        }]
    );
}

#[test]
fn sidecars_restart_whatever_the_pod_restart_policy_and_exit_code() {
    for policy in [
        RestartPolicy::Always,
        RestartPolicy::OnFailure,
        RestartPolicy::Never,
    ] {
        for code in [0, 1] {
            let o = observed(
                vec![ready()],
                vec![
                    exited("s0", "side", 0, code),
                    exited("s0", "setup", 0, 0),
                    running("s0", "main", 0),
                ],
            );
            let p = plan(&usual(policy), &o, &BackOff::default(), NOW);
            assert_eq!(p.actions, [sidecar("side", 1)], "{policy:?} exit {code}");
        }
    }
}

#[test]
fn a_failed_init_container_after_a_sidecar_is_retried_per_policy() {
    let o = observed(
        vec![ready()],
        vec![running("s0", "side", 0), exited("s0", "setup", 0, 1)],
    );
    // Always and OnFailure: retried (with back-off), the sidecar untouched.
    for policy in [RestartPolicy::Always, RestartPolicy::OnFailure] {
        let p = plan(&usual(policy), &o, &BackOff::default(), NOW);
        assert_eq!(p.actions, [init("setup", 1)], "{policy:?}");
        let p = plan(&usual(policy), &o, &backing_off("setup"), NOW);
        assert!(p.actions.is_empty(), "{policy:?}: {p:?}");
        assert_eq!(p.waiting.len(), 1);
    }
    // Never: the pod has failed; killing it stops the sidecar.
    let p = plan(&usual(RestartPolicy::Never), &o, &BackOff::default(), NOW);
    assert_eq!(kinds(&p), ["KillPod"]);
}

#[test]
fn sidecars_do_not_keep_a_finished_pod_alive() {
    // Never (and OnFailure) with the app container done: the pod is killed,
    // the running sidecar with it, and it is not restarted.
    for policy in [RestartPolicy::Never, RestartPolicy::OnFailure] {
        let o = observed(
            vec![ready()],
            vec![
                running("s0", "side", 0),
                exited("s0", "setup", 0, 0),
                exited("s0", "main", 0, 0),
            ],
        );
        let p = plan(&usual(policy), &o, &BackOff::default(), NOW);
        assert_eq!(kinds(&p), ["KillPod"], "{policy:?}");
        // A sidecar that exited at the end is not restarted first either.
        let o = observed(
            vec![ready()],
            vec![
                exited("s0", "side", 0, 1),
                exited("s0", "setup", 0, 0),
                exited("s0", "main", 0, 0),
            ],
        );
        let p = plan(&usual(policy), &o, &backing_off("side"), NOW);
        assert_eq!(kinds(&p), ["KillPod"], "{policy:?}");
        assert!(p.waiting.is_empty(), "nothing waits in a finished pod");
    }
    // Once the sandbox is stopped, nothing more happens.
    let o = observed(
        vec![sandbox("s0", 0, false)],
        vec![exited("s0", "side", 0, 137), exited("s0", "main", 0, 0)],
    );
    let p = plan(&usual(RestartPolicy::Never), &o, &BackOff::default(), NOW);
    assert!(p.actions.is_empty(), "{p:?}");
}

#[test]
fn app_containers_restart_without_waiting_for_a_crashed_sidecar() {
    let d = pod(RestartPolicy::Always, &[("side", true)], &["main"]);
    let o = observed(
        vec![ready()],
        vec![exited("s0", "side", 0, 1), exited("s0", "main", 0, 1)],
    );
    let p = plan(&d, &o, &BackOff::default(), NOW);
    assert_eq!(p.actions, [sidecar("side", 1), app("main", 1)]);
}

#[test]
fn a_changed_sidecar_is_replaced_and_the_rest_left_running() {
    let mut d = usual(RestartPolicy::Always);
    d.init_containers[0].hash = 2;
    d.init_containers[0].legacy_hash = 2;
    let o = observed(
        vec![ready()],
        vec![
            running("s0", "side", 0),
            exited("s0", "setup", 0, 0),
            running("s0", "main", 0),
        ],
    );
    let p = plan(&d, &o, &BackOff::default(), NOW);
    assert_eq!(
        p.actions,
        [
            Action::KillContainer {
                id: "side-0".into(),
                name: "side".into(),
                reason: SIDECAR_SPEC_CHANGED.into()
            },
            sidecar("side", 1)
        ]
    );
}

#[test]
fn a_sidecar_gone_from_the_runtime_after_initialization_is_started_again() {
    // The pod ran (main runs) but the sidecar's containers were removed;
    // the regular init container that is gone too is not rerun.
    let o = observed(vec![ready()], vec![running("s0", "main", 0)]);
    let p = plan(&usual(RestartPolicy::Always), &o, &BackOff::default(), NOW);
    assert_eq!(p.actions, [sidecar("side", 0)]);
}

#[test]
fn sidecars_before_the_furthest_init_container_are_kept_running_in_order() {
    let d = pod(
        RestartPolicy::Always,
        &[
            ("s1", true),
            ("setup", false),
            ("s2", true),
            ("late", false),
        ],
        &["main"],
    );
    // s1 and s2 crashed while `late` runs: both restart, in spec order;
    // setup is not rerun and `late` is waited for.
    let o = observed(
        vec![ready()],
        vec![
            exited("s0", "s1", 0, 1),
            exited("s0", "setup", 0, 0),
            exited("s0", "s2", 0, 1),
            running("s0", "late", 0),
        ],
    );
    let p = plan(&d, &o, &BackOff::default(), NOW);
    assert_eq!(p.actions, [sidecar("s1", 1), sidecar("s2", 1)]);
}
