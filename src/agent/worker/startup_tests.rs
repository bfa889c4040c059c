//! The start-up trace against the fake runtime: a new pod's start is
//! logged once with every phase in order, and a pod the worker finds
//! already running (crilet restarted) is not traced.

use std::io::Write;
use std::sync::Mutex;

use super::tests::{fake, pod, worker_with};
use super::*;
use crate::kuberuntime::startup_trace::parse_steps;
use crate::prober::handlers::fake::FakeHandlers;

/// What the subscriber writes, kept for the test to read.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn traces(&self) -> Vec<String> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        (text.lines())
            .filter(|l| l.contains("pod startup trace"))
            .map(String::from)
            .collect()
    }
}

#[tokio::test]
async fn a_new_pods_start_is_traced_once_and_an_adopted_pod_not() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("crilet::pod_startup=debug")
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let root = tempfile::tempdir().unwrap();
    let rt = fake();
    let handlers = Arc::new(FakeHandlers::new());
    let pod = Arc::new(pod(serde_json::json!({}), serde_json::json!([])));

    let wait = Arc::new(RuntimeWait::default());
    let mut w = worker_with(rt.clone(), root.path(), handlers.clone());
    w.runtime_wait = wait.clone();
    crate::cri::wait::scope(wait, w.sync(&pod)).await.unwrap();
    let traces = logs.traces();
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
    assert_eq!(logs.traces().len(), 1, "a second sync traces nothing");
    assert!(w.trace.is_none());

    // crilet restarted: a new worker finds the pod running.
    let mut adopted = worker_with(rt, root.path(), handlers);
    adopted.sync(&pod).await.unwrap();
    assert_eq!(logs.traces().len(), 1, "an adopted pod is not traced");
    assert!(adopted.trace.is_none());
}
