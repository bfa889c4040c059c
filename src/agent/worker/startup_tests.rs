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
