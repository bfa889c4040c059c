use tokio::sync::{Notify, mpsc::UnboundedSender};

use super::*;
use crate::events::kubelet_events;
use crate::units::test_logs::Logs;

/// A sink that answers each event with the next scripted result (Ok once
/// they run out), reports what it was given, and can be held.
struct ScriptedSink {
    results: Mutex<Vec<Result<(), SinkError>>>,
    seen: UnboundedSender<(EventObject, Event)>,
    hold: Option<Arc<Notify>>,
}

#[async_trait::async_trait]
impl EventSink for ScriptedSink {
    async fn publish(&self, object: &EventObject, event: &Event) -> Result<(), SinkError> {
        let _ = self.seen.send((object.clone(), event.clone()));
        if let Some(hold) = &self.hold {
            hold.notified().await;
        }
        let mut results = self.results.lock().unwrap();
        if results.is_empty() {
            Ok(())
        } else {
            results.remove(0)
        }
    }
}

fn sink(
    results: Vec<Result<(), SinkError>>,
    hold: Option<Arc<Notify>>,
) -> (ScriptedSink, mpsc::UnboundedReceiver<(EventObject, Event)>) {
    let (seen, rx) = mpsc::unbounded_channel();
    let sink = ScriptedSink {
        results: Mutex::new(results),
        seen,
        hold,
    };
    (sink, rx)
}

fn pod(name: &str) -> EventObject {
    EventObject::test_pod(name, "spec.containers{c}")
}

fn refused(code: u16) -> Result<(), SinkError> {
    Err(SinkError {
        kind: FailureKind::Refused(code),
        message: format!("{code} Forbidden: events is forbidden"),
    })
}

/// Lets the recorder's task run until it has nothing left to do.
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn recording_never_waits_for_a_hanging_server() {
    let hold = Arc::new(Notify::new());
    let (sink, mut seen) = sink(vec![], Some(hold.clone()));
    let recorder =
        KubeEventRecorder::with_sink(sink, 2, CallCount::default(), CancellationToken::new());
    recorder.event(&pod("a"), kubelet_events::started("c"));
    // The first is being sent (and hangs); two fit in the queue, the rest
    // are dropped and counted, and not one call waited.
    seen.recv().await.unwrap();
    let started = std::time::Instant::now();
    for _ in 0..5 {
        recorder.event(&pod("a"), kubelet_events::started("c"));
    }
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(recorder.stats().dropped.load(Ordering::Relaxed), 3);
    // The server answers again: what was queued goes out.
    for _ in 0..3 {
        hold.notify_one();
        settle().await;
    }
    assert_eq!(recorder.stats().sent.load(Ordering::Relaxed), 3);
}

#[tokio::test]
async fn a_crash_loop_sends_its_burst_and_the_rest_is_throttled() {
    let (sink, _seen) = sink(vec![], None);
    let recorder =
        KubeEventRecorder::with_sink(sink, 100, CallCount::default(), CancellationToken::new());
    for _ in 0..30 {
        recorder.event(&pod("crash"), kubelet_events::started("c"));
    }
    recorder.event(&pod("other"), kubelet_events::started("c"));
    settle().await;
    let stats = recorder.stats();
    assert_eq!(stats.sent.load(Ordering::Relaxed), 26);
    assert_eq!(stats.throttled.load(Ordering::Relaxed), 5);
}

#[tokio::test]
async fn each_kind_of_failure_is_logged_once_at_warn() {
    let (logs, _guard) = Logs::capture("warn");
    let transport = Err(SinkError {
        kind: FailureKind::Transport,
        message: "connection refused".into(),
    });
    let script = vec![
        refused(403),
        refused(403),
        transport,
        refused(403),
        refused(500),
    ];
    let (sink, _seen) = sink(script, None);
    let recorder =
        KubeEventRecorder::with_sink(sink, 100, CallCount::default(), CancellationToken::new());
    for i in 0..6 {
        recorder.event(&pod(&format!("p{i}")), kubelet_events::started("c"));
    }
    settle().await;
    let stats = recorder.stats();
    assert_eq!(stats.failed.load(Ordering::Relaxed), 5);
    assert_eq!(stats.sent.load(Ordering::Relaxed), 1);
    let line = "the API server did not take an event";
    assert_eq!(logs.count(line), 3, "403, transport and 500, once each");
    assert_eq!(logs.count("Refused(403)"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_429_is_sent_again_each_second_and_only_a_429() {
    let mut script: Vec<_> = (0..3).map(|_| refused(429)).collect();
    script.push(Ok(()));
    script.extend((0..TOO_MANY_REQUESTS_TRIES).map(|_| refused(429)));
    script.push(refused(403));
    let (sink, mut seen) = sink(script, None);
    let recorder =
        KubeEventRecorder::with_sink(sink, 10, CallCount::default(), CancellationToken::new());
    let began = tokio::time::Instant::now();
    recorder.event(&pod("a"), kubelet_events::started("c"));
    for _ in 0..4 {
        assert_eq!(seen.recv().await.unwrap().0.name, "a");
    }
    assert_eq!(began.elapsed(), TOO_MANY_REQUESTS_WAIT * 3);
    settle().await;
    assert_eq!(recorder.stats().sent.load(Ordering::Relaxed), 1);
    // Refused every time: given up after the last try, and counted.
    recorder.event(&pod("b"), kubelet_events::started("c"));
    for _ in 0..TOO_MANY_REQUESTS_TRIES {
        assert_eq!(seen.recv().await.unwrap().0.name, "b");
    }
    // A 403 is not tried again: the next event is the next one sent.
    recorder.event(&pod("c"), kubelet_events::started("c"));
    recorder.event(&pod("d"), kubelet_events::started("c"));
    assert_eq!(seen.recv().await.unwrap().0.name, "c");
    assert_eq!(seen.recv().await.unwrap().0.name, "d");
    settle().await;
    assert_eq!(recorder.stats().failed.load(Ordering::Relaxed), 2);
    assert_eq!(recorder.stats().sent.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn a_send_with_no_answer_times_out_and_the_next_goes_on() {
    let (logs, _guard) = Logs::capture("warn");
    let hold = Arc::new(Notify::new());
    let (sink, mut seen) = sink(vec![], Some(hold));
    let recorder =
        KubeEventRecorder::with_sink(sink, 10, CallCount::default(), CancellationToken::new());
    recorder.event(&pod("a"), kubelet_events::started("c"));
    recorder.event(&pod("b"), kubelet_events::started("c"));
    seen.recv().await.unwrap();
    tokio::time::advance(PUBLISH_TIMEOUT + Duration::from_secs(1)).await;
    let (next, _) = seen.recv().await.unwrap();
    assert_eq!(next.name, "b");
    assert_eq!(recorder.stats().failed.load(Ordering::Relaxed), 1);
    assert_eq!(logs.count("Timeout"), 1);
}

#[tokio::test]
async fn a_full_queue_is_logged_once() {
    let (logs, _guard) = Logs::capture("warn");
    let hold = Arc::new(Notify::new());
    let (sink, mut seen) = sink(vec![], Some(hold));
    let recorder =
        KubeEventRecorder::with_sink(sink, 1, CallCount::default(), CancellationToken::new());
    recorder.event(&pod("a"), kubelet_events::started("c"));
    seen.recv().await.unwrap();
    for _ in 0..10 {
        recorder.event(&pod("a"), kubelet_events::started("c"));
    }
    assert_eq!(recorder.stats().dropped.load(Ordering::Relaxed), 9);
    assert_eq!(logs.count("the event queue is full"), 1);
}

#[test]
fn notes_are_cut_to_1_kb_at_a_character_boundary() {
    let long = "x".repeat(2000);
    let wide = format!("{}é", "x".repeat(NOTE_LIMIT - 1)); // é is 2 bytes
    let cases = [
        ("short", "short".to_string()),
        (long.as_str(), "x".repeat(NOTE_LIMIT)),
        (wide.as_str(), "x".repeat(NOTE_LIMIT - 1)),
    ];
    for (message, want) in cases {
        assert_eq!(note(message), want);
    }
}

#[test]
fn the_reference_leaves_out_what_is_empty() {
    let node = reference(&EventObject::node("node-1"));
    assert_eq!(node.kind.as_deref(), Some("Node"));
    assert_eq!(node.uid.as_deref(), Some("node-1"));
    assert_eq!(node.namespace, None, "cluster-scoped: events go to default");
    assert_eq!(node.field_path, None);
    let c = reference(&pod("web"));
    assert_eq!(c.field_path.as_deref(), Some("spec.containers{c}"));
    assert_eq!(c.namespace.as_deref(), Some("default"));
    assert_eq!(c.api_version.as_deref(), Some("v1"));
}

#[test]
fn only_a_404_about_the_event_starts_the_series_afresh() {
    let api = |code: u16, kind: Option<&str>| {
        let mut status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "not found", "reason": "NotFound", "code": code,
        });
        if let Some(kind) = kind {
            status["details"] = serde_json::json!({"name": "x", "kind": kind});
        }
        kube::Error::Api(Box::new(serde_json::from_value(status).unwrap()))
    };
    let cases = [
        (api(404, Some("events")), true),
        (api(404, Some("namespaces")), false),
        (api(404, None), false),
        (api(403, Some("events")), false),
    ];
    for (error, want) in cases {
        assert_eq!(series_gone(&error), want, "{error}");
    }
    assert_eq!(failure(&api(403, None)).kind, FailureKind::Refused(403));
}

/// Events wait while a pod starts (`kubeapi::call_count`), at most
/// [`START_YIELD`], and then everything queued goes at once.
#[tokio::test(start_paused = true)]
async fn events_wait_for_the_pod_starts_in_flight_then_go_together() {
    let (sink, mut seen) = sink(vec![], None);
    let starts = CallCount::default();
    let recorder = KubeEventRecorder::with_sink(sink, 10, starts.clone(), CancellationToken::new());
    let start = starts.begin();
    recorder.event(&pod("a"), kubelet_events::created("c"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    recorder.event(&pod("a"), kubelet_events::started("c"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(seen.try_recv().is_err(), "nothing sent during the start");
    drop(start);
    settle().await;
    let sent: Vec<_> = std::iter::from_fn(|| seen.try_recv().ok()).collect();
    let reasons: Vec<_> = sent.iter().map(|(_, e)| e.reason).collect();
    assert_eq!(reasons, ["Created", "Started"]);

    // Starts that go on: the event goes after a second all the same.
    let _starts_go_on = starts.begin();
    let t0 = tokio::time::Instant::now();
    recorder.event(&pod("b"), kubelet_events::started("c"));
    seen.recv().await.unwrap();
    assert_eq!(t0.elapsed(), START_YIELD);
}
