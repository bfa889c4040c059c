//! The start-up trace against the fake runtime: a new pod's start is
//! logged once with every phase in order, and a pod the worker finds
//! already running (crilet restarted) is not traced.

use super::tests::{fake, pod, worker_with};
use super::*;
use crate::kuberuntime::startup_trace::parse_steps;
use crate::prober::handlers::fake::FakeHandlers;
use crate::units::test_logs::Logs;

/// The trace lines written so far.
fn traces(logs: &Logs) -> Vec<String> {
    (logs.text().lines())
        .filter(|l| l.contains("pod startup trace"))
        .map(String::from)
        .collect()
}

#[tokio::test]
async fn a_new_pods_start_is_traced_once_and_an_adopted_pod_not() {
    let (logs, _guard) = Logs::capture("crilet::pod_startup=debug");
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let handlers = Arc::new(FakeHandlers::new());
    let pod = Arc::new(pod(serde_json::json!({}), serde_json::json!([])));

    let wait = Arc::new(RuntimeWait::default());
    let mut w = worker_with(rt.clone(), root.path(), handlers.clone());
    w.runtime_wait = wait.clone();
    crate::cri::wait::scope(wait, w.sync(&pod)).await.unwrap();
    let traces = traces(&logs);
    assert_eq!(traces.len(), 1, "{traces:?}");
    let line = &traces[0];
    assert!(
        line.contains("pod=web_default") && line.contains("uid=u1"),
        "{line}"
    );
    let steps = parse_steps(&line[line.find(" steps=").unwrap() + 7..]);
    let phases: Vec<&str> = steps.iter().map(|s| s.phase.as_str()).collect();
    assert_eq!(
        phases,
        [
            "admitted",
            "sandbox_requested",
            "sandbox_ready",
            "image_resolved",
            "create_requested",
            "created",
            "start_requested",
            "started",
            "status_seen",
            "reported"
        ]
    );
    assert!(steps.windows(2).all(|s| s[0].at_ms <= s[1].at_ms), "{line}");
    // The fake is not a CRI client: nothing was waited on a runtime.
    assert!(
        steps
            .iter()
            .all(|s| s.runtime_ms == 0.0 && s.queued_ms == 0.0)
    );

    w.sync(&pod).await.unwrap();
    assert_eq!(
        logs.count("pod startup trace"),
        1,
        "a second sync traces nothing"
    );
    assert!(w.trace.is_none());

    // crilet restarted: a new worker finds the pod running.
    let mut adopted = worker_with(rt, root.path(), handlers);
    adopted.sync(&pod).await.unwrap();
    assert_eq!(
        logs.count("pod startup trace"),
        1,
        "an adopted pod is not traced"
    );
    assert!(adopted.trace.is_none());
}

/// The API writers hold back while a pod starts (`kubeapi::call_count`): a pass
/// that starts a sandbox and containers is counted until it has acted,
/// and a pass with nothing to start is not counted at all.
#[tokio::test]
async fn a_pass_that_starts_is_counted_until_it_has_acted() {
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let pod = Arc::new(pod(serde_json::json!({}), serde_json::json!([])));
    let w = worker_with(rt.clone(), root.path(), Arc::new(FakeHandlers::new()));
    let starts = w.ctx.pod_starts.clone();
    let called = |op: &'static str| {
        let rt = rt.clone();
        move || rt.calls().iter().filter(|c| c.op == op).count()
    };

    let release = rt.hold("StartContainer");
    let sync = tokio::spawn({
        let pod = pod.clone();
        async move {
            let mut w = w;
            w.sync(&pod).await.map(|_| w)
        }
    });
    let started = called("StartContainer");
    while started() == 0 {
        tokio::task::yield_now().await;
    }
    assert!(starts.any(), "counted while the runtime holds the start");
    release.cancel();
    let mut w = sync.await.unwrap().unwrap();
    assert!(!starts.any(), "the count ends with the pass");

    // Running: the next pass observes and starts nothing.
    let release = rt.hold("ListContainers");
    let listed = called("ListContainers");
    let before = listed();
    let sync = tokio::spawn(async move { w.sync(&pod).await.map(drop) });
    while listed() == before {
        tokio::task::yield_now().await;
    }
    assert!(!starts.any(), "a pass that starts nothing is not counted");
    release.cancel();
    sync.await.unwrap().unwrap();
}
