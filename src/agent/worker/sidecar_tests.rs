//! Sidecars through the worker, on the fake runtime: started in their place
//! without blocking what follows, restarted when they exit, killed with a
//! finished pod, and stopped after the app containers, last to first.

use super::tests::{fake, worker_with};
use super::*;
use crate::cri::{ContainerFilter, FakeRuntime};
use crate::pod::defaults::apply_api_defaults;
use crate::prober::handlers::fake::FakeHandlers;
use serde_json::json;

/// Pod "web": init containers s1 (sidecar), setup, s2 (sidecar), app
/// container main; `main_extra` is merged into main's spec.
fn sidecar_pod(policy: &str, main_extra: serde_json::Value) -> Pod {
    let c = |n: &str| json!({"name": n, "image": "busybox", "imagePullPolicy": "Never"});
    let side = |n: &str| {
        let mut s = c(n);
        s["restartPolicy"] = json!("Always");
        s
    };
    let mut main = c("main");
    for (k, v) in main_extra.as_object().unwrap() {
        main[k] = v.clone();
    }
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {
            "restartPolicy": policy,
            "terminationGracePeriodSeconds": 10,
            "initContainers": [side("s1"), c("setup"), side("s2")],
            "containers": [main],
        }
    }))
    .unwrap();
    apply_api_defaults(&mut pod);
    pod
}

/// Every container on the runtime: (name, attempt, state, id), oldest first.
async fn containers(rt: &FakeRuntime) -> Vec<(String, u32, ContainerState, String)> {
    let mut list = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap();
    list.sort_by_key(|c| c.created_at);
    list.into_iter()
        .map(|c| (c.metadata.name, c.metadata.attempt, c.state, c.id))
        .collect()
}

async fn id_of(rt: &FakeRuntime, name: &str) -> String {
    let list = containers(rt).await.into_iter().rev();
    list.into_iter()
        .find(|c| c.0 == name)
        .map(|c| c.3)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// The names of the containers StopContainer was called for, in order;
/// `all` is [`containers`] from before they were removed.
fn stopped(rt: &FakeRuntime, all: &[(String, u32, ContainerState, String)]) -> Vec<String> {
    let name = |id: &str| all.iter().find(|c| c.3 == id).map(|c| c.0.clone());
    let calls = rt.calls().into_iter().filter(|c| c.op == "StopContainer");
    calls.filter_map(|c| name(&c.arg)).collect()
}

/// (started, ready, running) of container `name` in the worker's status.
fn started_ready_running(w: &Worker, name: &str) -> (Option<bool>, bool, bool) {
    let all = w.previous.as_ref().unwrap();
    let inits = all.init_container_statuses.iter().flatten();
    let mut list = inits.chain(all.container_statuses.iter().flatten());
    let s = list.find(|s| s.name == name).unwrap().clone();
    (s.started, s.ready, s.state.unwrap().running.is_some())
}

fn phase(w: &Worker) -> String {
    w.previous.as_ref().unwrap().phase.clone().unwrap()
}

/// Syncs `pod` until main runs: one container more per sync, as the
/// kubelet starts them (the next init container once the one before it is
/// started or done); `setup` is made to exit 0 when it runs.
async fn run_to_main(w: &mut Worker, rt: &FakeRuntime, pod: &Pod) {
    let mut seen = Vec::new();
    for _ in 0..6 {
        w.sync(&Arc::new(pod.clone())).await.unwrap();
        let now = containers(rt).await;
        if let Some(setup) = now
            .iter()
            .find(|c| c.0 == "setup" && c.2 == ContainerState::Running)
        {
            rt.exit_container(&setup.3, 0);
        }
        seen = now.iter().map(|c| c.0.clone()).collect();
        if seen.contains(&"main".to_string()) {
            return;
        }
    }
    panic!("main never started: {seen:?}");
}

#[tokio::test(start_paused = true)]
async fn sidecars_start_in_order_and_keep_running_beside_main() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker_with(rt.clone(), root.path(), Arc::new(FakeHandlers::new()));
    let pod = sidecar_pod("Always", json!({}));

    w.sync(&Arc::new(pod.clone())).await.unwrap();
    let names = |c: Vec<(String, u32, ContainerState, String)>| -> Vec<String> {
        c.into_iter().map(|c| c.0).collect()
    };
    assert_eq!(
        names(containers(&rt).await),
        ["s1"],
        "only the first sidecar"
    );
    run_to_main(&mut w, &rt, &pod).await;
    assert_eq!(
        names(containers(&rt).await),
        ["s1", "setup", "s2", "main"],
        "created in spec order, one after the other"
    );
    w.sync(&Arc::new(pod.clone())).await.unwrap(); // status after main started
    assert_eq!(phase(&w), "Running");
    for name in ["s1", "s2", "main"] {
        assert_eq!(
            started_ready_running(&w, name),
            (Some(true), true, true),
            "{name}"
        );
    }

    // s1 dies: restarted at once (attempt 1), main left alone.
    let main = id_of(&rt, "main").await;
    rt.exit_container(&id_of(&rt, "s1").await, 137);
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    let now = containers(&rt).await;
    let s1: Vec<_> = now.iter().filter(|c| c.0 == "s1").collect();
    assert_eq!(s1.len(), 2);
    assert_eq!((s1[1].1, s1[1].2), (1, ContainerState::Running));
    assert!(
        now.iter()
            .any(|c| c.3 == main && c.2 == ContainerState::Running)
    );
    assert_eq!(
        now.iter().filter(|c| c.0 == "setup").count(),
        1,
        "setup not rerun"
    );
}

#[tokio::test(start_paused = true)]
async fn a_finished_never_pod_kills_its_sidecars_after_main_and_succeeds() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let mut w = worker_with(rt.clone(), root.path(), Arc::new(FakeHandlers::new()));
    let pod = sidecar_pod("Never", json!({}));
    run_to_main(&mut w, &rt, &pod).await;

    rt.exit_container(&id_of(&rt, "main").await, 0);
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    // The sidecars were stopped (s2 before s1), not restarted, and the
    // sandbox with them.
    assert_eq!(stopped(&rt, &containers(&rt).await), ["s2", "s1"]);
    let now = containers(&rt).await;
    assert!(now.iter().all(|c| c.2 == ContainerState::Exited), "{now:?}");
    assert_eq!(now.iter().filter(|c| c.0 == "s1").count(), 1);
    assert!(rt.ops().contains(&"StopPodSandbox"));
    assert_eq!(phase(&w), "Succeeded");
    // And nothing more happens.
    let calls = rt.calls().len();
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    let more: Vec<_> = rt.calls()[calls..].iter().map(|c| c.op).collect();
    assert!(
        !more
            .iter()
            .any(|op| op.starts_with("Create") || op.starts_with("Start") || op.starts_with("Run")),
        "{more:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn on_termination_sidecars_wait_for_main_then_stop_last_first() {
    let root = tempfile::tempdir().unwrap();
    let handlers = Arc::new(FakeHandlers::new());
    let rt = fake();
    let mut w = worker_with(rt.clone(), root.path(), handlers.clone());
    let pre_stop = json!({"lifecycle": {"preStop": {"exec": {"command": ["pre"]}}}});
    let pod = sidecar_pod("Always", pre_stop);
    run_to_main(&mut w, &rt, &pod).await;
    // main's preStop takes 3 s of its 10 s.
    handlers.push_hook_taking(Duration::from_millis(3_500), Ok(()));

    let before = containers(&rt).await;
    let t0 = tokio::time::Instant::now();
    w.terminate("u1", "web_default", Some(&pod)).await.unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(3_500));
    assert_eq!(stopped(&rt, &before), ["main", "s2", "s1"]);
    let timeouts: Vec<u64> = rt
        .stop_timeouts()
        .iter()
        .map(|(_, t)| t.as_secs())
        .collect();
    // main: 10 - 3 (its preStop); each sidecar: 10 - 3 (waiting for main).
    assert_eq!(timeouts, [7, 7, 7]);
}

#[tokio::test(start_paused = true)]
async fn a_sidecar_failing_liveness_is_killed_and_restarted_even_in_a_never_pod() {
    let root = tempfile::tempdir().unwrap();
    let handlers = Arc::new(FakeHandlers::new());
    handlers.push_probe(crate::prober::handlers::ProbeOutcome::Failure(
        "no pulse".into(),
    ));
    let rt = fake();
    let mut w = worker_with(rt.clone(), root.path(), handlers.clone());
    let mut pod = sidecar_pod("Never", json!({}));
    let probe = json!({"exec": {"command": ["live"]}, "failureThreshold": 1, "terminationGracePeriodSeconds": 5});
    let s1 = &mut pod.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0];
    s1.liveness_probe = Some(serde_json::from_value(probe).unwrap());
    apply_api_defaults(&mut pod);
    run_to_main(&mut w, &rt, &pod).await;
    let main = id_of(&rt, "main").await;
    let first = containers(&rt)
        .await
        .into_iter()
        .find(|c| c.0 == "s1")
        .unwrap()
        .3;

    // The probe runs (and fails) as soon as it sees s1; the next sync acts.
    tokio::time::sleep(Duration::from_secs(1)).await;
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    let stops: Vec<_> = rt.stop_timeouts();
    assert_eq!(
        stops,
        [(first, Duration::from_secs(5))],
        "the probe's grace"
    );
    let now = containers(&rt).await;
    let s1: Vec<_> = now.iter().filter(|c| c.0 == "s1").collect();
    assert_eq!(s1.len(), 2, "{now:?}");
    assert_eq!((s1[1].1, s1[1].2), (1, ContainerState::Running));
    assert!(
        now.iter()
            .any(|c| c.3 == main && c.2 == ContainerState::Running)
    );
    assert_eq!(phase(&w), "Running");
}
