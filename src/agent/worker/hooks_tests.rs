//! Hooks and probe kills through the worker, on the fake runtime with
//! [`FakeHandlers`] and tokio's paused clock: preStop inside the grace
//! period, StopContainer's timeout, liveness kills and restarts, a failed
//! postStart.

use super::hooks::kill_container;
use super::tests::{app_state, fake, only_container, pod, worker_with};
use super::*;
use crate::cri::{ContainerFilter, FakeRuntime};
use crate::prober::handlers::fake::{FakeHandlers, HandlerCall};
use crate::prober::handlers::{HookAction, ProbeOutcome};
use serde_json::json;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn exec(cmd: &str) -> HookAction {
    HookAction::Exec {
        command: vec![cmd.into()],
    }
}

/// The hooks run so far: (container ID, action, exec timeout).
fn hooks(h: &FakeHandlers) -> Vec<(String, HookAction, Option<Duration>)> {
    let calls = h.calls().into_iter();
    calls
        .filter_map(|c| match c {
            HandlerCall::Hook {
                container_id,
                action,
                exec_timeout,
            } => Some((container_id, action, exec_timeout)),
            HandlerCall::Probe { .. } => None,
        })
        .collect()
}

/// Container "app" of `pod`, synced once: (worker, runtime, its ID).
async fn running(
    root: &std::path::Path,
    handlers: &Arc<FakeHandlers>,
    pod: &Pod,
) -> (Worker, Arc<FakeRuntime>, String) {
    let rt = fake();
    let mut w = worker_with(rt.clone(), root, handlers.clone());
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    let id = only_container(&rt).await;
    (w, rt, id)
}

fn with_pre_stop() -> Pod {
    let lifecycle = json!({"lifecycle": {"preStop": {"exec": {"command": ["pre"]}}}});
    pod(lifecycle, json!([]))
}

#[tokio::test(start_paused = true)]
async fn pre_stop_time_comes_out_of_the_grace_period_and_stop_gets_at_least_2s() {
    // (grace s, preStop takes ms, its result, StopContainer's timeout s)
    let cases: [(i64, u64, Result<(), String>, u64); 4] = [
        (10, 3_500, Ok(()), 7), // whole seconds taken, as the kubelet does
        (10, 3_000, Err("exit 1".into()), 7), // a failing preStop still stops
        (4, 3_000, Ok(()), 2),  // 1 s left: the minimum
        (5, 60_000, Ok(()), 2), // cut off at the grace period
    ];
    for (grace, took, result, stop) in cases {
        let root = tempfile::tempdir().unwrap();
        let handlers = Arc::new(FakeHandlers::new());
        let pod = with_pre_stop();
        let (w, rt, id) = running(root.path(), &handlers, &pod).await;
        handlers.push_hook_taking(Duration::from_millis(took), result);

        let t0 = tokio::time::Instant::now();
        kill_container(&w.ctx, Some(&pod), "", &id, "app", None, grace)
            .await
            .unwrap();
        let waited = Duration::from_millis(took).min(secs(grace as u64));
        assert_eq!(t0.elapsed(), waited, "grace {grace}, preStop {took} ms");
        let limit = Some(secs(grace as u64));
        assert_eq!(hooks(&handlers), [(id.clone(), exec("pre"), limit)]);
        assert_eq!(
            rt.stop_timeouts(),
            [(id, secs(stop))],
            "grace {grace}, preStop {took} ms"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn no_pre_stop_without_grace_or_spec_and_stop_still_gets_its_time() {
    let root = tempfile::tempdir().unwrap();
    let handlers = Arc::new(FakeHandlers::new());
    let pod = with_pre_stop();
    let (w, rt, id) = running(root.path(), &handlers, &pod).await;

    kill_container(&w.ctx, Some(&pod), "", &id, "app", None, 0)
        .await
        .unwrap();
    // An orphan found on the runtime has no spec, so no hook.
    kill_container(&w.ctx, None, "", &id, "app", None, 12)
        .await
        .unwrap();
    assert_eq!(hooks(&handlers), []);
    assert_eq!(rt.stop_timeouts(), [(id.clone(), secs(2)), (id, secs(12))]);
}

/// restartPolicy Always and a liveness probe failing at its first run,
/// whose kill takes 5 s of grace.
fn failing_liveness() -> (Pod, Arc<FakeHandlers>) {
    let probe = json!({"exec": {"command": ["live"]}, "failureThreshold": 1, "terminationGracePeriodSeconds": 5});
    let mut pod = pod(json!({"livenessProbe": probe}), json!([]));
    pod.spec.as_mut().unwrap().restart_policy = Some("Always".into());
    let handlers = Arc::new(FakeHandlers::new());
    handlers.push_probe(ProbeOutcome::Failure("no pulse".into()));
    (pod, handlers)
}

/// Lets the probe tasks run until they wake the worker.
async fn probe_wakes(w: &Worker) {
    let woken = tokio::time::timeout(secs(15), w.wake.notified()).await;
    woken.expect("the liveness failure wakes the worker");
}

/// (ID, attempt, state) of every container, oldest attempt first.
async fn containers(rt: &FakeRuntime) -> Vec<(String, u32, ContainerState)> {
    let filter = ContainerFilter::default();
    let mut all = rt.list_containers(&filter).await.unwrap();
    all.sort_by_key(|c| c.metadata.attempt);
    all.into_iter()
        .map(|c| (c.id, c.metadata.attempt, c.state))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_liveness_failure_stops_the_container_with_the_probe_s_grace_and_restarts_it() {
    let root = tempfile::tempdir().unwrap();
    let (pod, handlers) = failing_liveness();
    let (mut w, rt, first) = running(root.path(), &handlers, &pod).await;
    probe_wakes(&w).await;

    w.sync(&Arc::new(pod.clone())).await.unwrap();
    assert_eq!(rt.stop_timeouts(), [(first.clone(), secs(5))]);
    // The kubelet kills and starts in one SyncPod; so does the worker.
    let now = containers(&rt).await;
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(now[0], (first.clone(), 0, ContainerState::Exited));
    let (second, attempt, state) = now[1].clone();
    assert_eq!((attempt, state), (1, ContainerState::Running));
    let status = w.previous.as_ref().unwrap();
    let app = &status.container_statuses.as_ref().unwrap()[0];
    assert_eq!(app.restart_count, 1);

    // The new instance is probed (and passes); nothing more is killed.
    tokio::time::sleep(secs(15)).await;
    let probed = |id: &str| {
        let calls = handlers.calls().into_iter();
        calls
            .filter(|c| matches!(c, HandlerCall::Probe { container_id, .. } if container_id == id))
            .count()
    };
    assert_eq!(probed(&first), 1);
    assert!(probed(&second) >= 1);
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    assert_eq!(rt.stop_timeouts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_liveness_kill_that_fails_is_tried_again_on_the_next_sync() {
    let root = tempfile::tempdir().unwrap();
    let (pod, handlers) = failing_liveness();
    let (mut w, rt, first) = running(root.path(), &handlers, &pod).await;
    probe_wakes(&w).await;

    rt.fail_next("StopContainer", tonic::Status::unavailable("runtime busy"));
    assert!(w.sync(&Arc::new(pod.clone())).await.is_err());
    assert_eq!(containers(&rt).await[0].2, ContainerState::Running);
    // The probe holds (it failed this instance); the worker's retry must
    // remember the failure.
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    assert_eq!(rt.stop_timeouts(), [(first, secs(5))]);
}

#[tokio::test(start_paused = true)]
async fn a_liveness_failure_with_restart_policy_never_stops_for_good() {
    let root = tempfile::tempdir().unwrap();
    let (mut pod, handlers) = failing_liveness();
    pod.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let (mut w, rt, first) = running(root.path(), &handlers, &pod).await;
    probe_wakes(&w).await;

    w.sync(&Arc::new(pod.clone())).await.unwrap();
    w.sync(&Arc::new(pod.clone())).await.unwrap();
    assert_eq!(rt.stop_timeouts(), [(first.clone(), secs(5))]);
    assert_eq!(only_container(&rt).await, first);
    assert!(app_state(&w).terminated.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_failed_post_start_kills_the_container_after_its_pre_stop() {
    let root = tempfile::tempdir().unwrap();
    let handlers = Arc::new(FakeHandlers::new());
    handlers.push_hook(Err("post: exit 1".into()));
    let lifecycle = json!({"lifecycle": {
        "postStart": {"exec": {"command": ["post"]}},
        "preStop": {"exec": {"command": ["pre"]}},
    }});
    let pod = pod(lifecycle, json!([]));
    let (w, rt, id) = running(root.path(), &handlers, &pod).await;

    let hooks = hooks(&handlers);
    let pre_stop = (id.clone(), exec("pre"), Some(secs(30)));
    assert_eq!(hooks, [(id.clone(), exec("post"), None), pre_stop]);
    let ops = rt.ops();
    let started = ops.iter().position(|op| *op == "StartContainer").unwrap();
    let stopped = ops.iter().position(|op| *op == "StopContainer").unwrap();
    assert!(started < stopped, "{ops:?}");
    assert_eq!(rt.stop_timeouts(), [(id, secs(30))]);
    // restartPolicy Never: it stays down.
    assert!(app_state(&w).terminated.is_some());
}
