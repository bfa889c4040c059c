//! The [`EventRecorder`] that sends events to the API server: kube-runtime's
//! `events::Recorder` (a repeat of the same object, type, reason and action
//! within 6 minutes is counted in the Event's `series` with a PATCH, not
//! created again), wrapped where it falls short of client-go's recorder,
//! which the kubelet uses:
//!
//! - **The API group.** kube-runtime writes events.k8s.io/v1, which a node's
//!   credentials may not write; the kubelet writes core/v1. Its requests go
//!   through [`super::kube_events_core`], which sends them as core/v1.
//! - **Burst cap.** kube-runtime sends every event it is given. Here each
//!   event first passes client-go's `EventSourceObjectSpamFilter`
//!   ([`super::event_spam`]: 25 per object at once, then one per 5 minutes),
//!   so a crash loop cannot flood the API server; a refused event is
//!   dropped before it is counted.
//! - **Best-effort.** kube-runtime's `publish` is an awaited API call. Here
//!   [`EventRecorder::event`] only puts the event on a bounded queue
//!   ([`QUEUE`] events, client-go's `maxQueuedEvents`); when it is full the
//!   event is dropped and counted. One background task drains the queue, one
//!   event at a time, each bounded by [`PUBLISH_TIMEOUT`]. So an API server
//!   that errors, refuses (403) or hangs never blocks or slows a pod worker,
//!   and changes nothing but the events. The first failure of each kind (an
//!   HTTP status code, a transport error, a timeout, a full queue) is logged
//!   once at warn; the rest at debug. Only a 429 (Too Many Requests: the
//!   server's priority and fairness asks the client to come back) is sent
//!   again, every [`TOO_MANY_REQUESTS_WAIT`] up to [`TOO_MANY_REQUESTS_TRIES`]
//!   times, as client-go's REST client does for every request. Other
//!   failures are not retried: client-go's recorder retries a failed write
//!   up to 12 times, but an event is worth less than the calls the node's
//!   own work needs. (Found with 500 hollow nodes: their start burst had
//!   one event in ten refused with 429.)
//! - **A series whose Event is gone.** When the PATCH of a repeat answers
//!   404 (the Event was deleted, or the server's event TTL expired it),
//!   client-go creates the event anew; kube-runtime would keep patching the
//!   gone object until its cache entry expires. Here the recorder starts
//!   afresh and the event is created (the other series then start new
//!   Events at their next repeat too).
//! - **Note length.** events.k8s.io/v1 refuses a note over 1 kB (a core/v1
//!   message, which the kubelet writes, has no limit): a longer message is
//!   cut at a character boundary.
//!
//! The reporter is what the kubelet sets: reportingController `kubelet`,
//! reportingInstance the node name (the kubelet's event source is component
//! `kubelet`, host the node name, which client-go copies into those
//! fields), so tools that select a node's kubelet events find crilet's.
//!
//! Invariant: this file, `kube_events_core.rs` and `client.rs` are the only
//! places kube-rs types live; the rest of crilet records through
//! [`EventRecorder`].

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{self as kr, Recorder, Reporter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::event_spam::SpamFilter;
use super::kube_events_core::CoreV1Events;
use super::recorder::{Event, EventObject, EventRecorder, EventType};
use crate::kubeapi::call_count::{CallCount, START_YIELD};
use crate::kubeapi::client::KubeMirrorClient;

/// Events waiting to be sent, at most (client-go's `maxQueuedEvents`).
pub const QUEUE: usize = 1000;
/// A 429-refused event is sent again after this, at most this many times
/// in all (client-go: the server's Retry-After, 1 s from priority and
/// fairness, up to 10 tries).
pub const TOO_MANY_REQUESTS_WAIT: Duration = Duration::from_secs(1);
pub const TOO_MANY_REQUESTS_TRIES: u32 = 10;
/// One event's send, at most; then it counts as failed.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest note events.k8s.io/v1 accepts, in bytes.
pub const NOTE_LIMIT: usize = 1024;
/// The reporting controller, as the kubelet's event source component.
pub const REPORTING_CONTROLLER: &str = "kubelet";

/// Why an event did not reach the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The server answered with this HTTP status.
    Refused(u16),
    /// No answer: connection or protocol error.
    Transport,
    /// No answer within [`PUBLISH_TIMEOUT`].
    Timeout,
    /// The queue was full: dropped before any send.
    QueueFull,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkError {
    pub kind: FailureKind,
    pub message: String,
}

/// Where the background task sends each event that passed the spam filter.
#[async_trait::async_trait]
pub trait EventSink: Send + Sync + 'static {
    async fn publish(&self, object: &EventObject, event: &Event) -> Result<(), SinkError>;
}

/// What became of the events recorded so far.
#[derive(Debug, Default)]
pub struct EventStats {
    pub sent: AtomicU64,
    /// Dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Dropped by the spam filter.
    pub throttled: AtomicU64,
    /// Refused, failed or timed out.
    pub failed: AtomicU64,
}

/// Events to the API server, best-effort (see the module doc).
pub struct KubeEventRecorder {
    queue: mpsc::Sender<(EventObject, Event)>,
    stats: Arc<EventStats>,
    /// The first full queue is logged at warn, later ones at debug.
    warned_full: AtomicBool,
}

impl KubeEventRecorder {
    /// Records as the kubelet of `node_name`, over `client`'s connection,
    /// until `cancel`.
    pub fn start(
        client: &KubeMirrorClient,
        node_name: &str,
        pod_starts: CallCount,
        cancel: CancellationToken,
    ) -> KubeEventRecorder {
        let sink = KubeSink::new(client.kube_client(), node_name);
        KubeEventRecorder::with_sink(sink, QUEUE, pod_starts, cancel)
    }

    /// The recorder `crilet run` uses: over `client` when there is one,
    /// else one that drops every event (standalone).
    pub fn for_client(
        client: Option<&KubeMirrorClient>,
        node_name: &str,
        pod_starts: CallCount,
        cancel: CancellationToken,
    ) -> Arc<dyn EventRecorder> {
        match client {
            Some(c) => Arc::new(KubeEventRecorder::start(c, node_name, pod_starts, cancel)),
            None => Arc::new(super::recorder::NoopRecorder),
        }
    }

    /// The recorder over any sink, with a queue of `capacity` events, sent
    /// when none of `pod_starts` is in flight (or a second later).
    pub fn with_sink(
        sink: impl EventSink,
        capacity: usize,
        pod_starts: CallCount,
        cancel: CancellationToken,
    ) -> KubeEventRecorder {
        let (queue, rx) = mpsc::channel(capacity.max(1));
        let stats = Arc::new(EventStats::default());
        tokio::spawn(drain(rx, sink, stats.clone(), pod_starts, cancel));
        KubeEventRecorder {
            queue,
            stats,
            warned_full: Default::default(),
        }
    }

    pub fn stats(&self) -> &EventStats {
        &self.stats
    }
}

impl EventRecorder for KubeEventRecorder {
    fn event(&self, object: &EventObject, event: Event) {
        if self.queue.try_send((object.clone(), event)).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            if !self.warned_full.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    queue = QUEUE,
                    "the event queue is full: events are dropped (and counted) until the API server takes them again; further drops are logged at debug"
                );
            } else {
                tracing::debug!(object = %object.name, "event queue full; event dropped");
            }
        }
    }
}

/// Sends what the queue holds, one at a time, until `cancel` or every
/// sender is gone. When the queue has been empty, the first event waits
/// until no pod start is in flight (at most [`START_YIELD`]), and then
/// everything queued by then goes.
async fn drain(
    mut rx: mpsc::Receiver<(EventObject, Event)>,
    sink: impl EventSink,
    stats: Arc<EventStats>,
    pod_starts: CallCount,
    cancel: CancellationToken,
) {
    let mut publisher = Publisher {
        sink,
        stats,
        origin: tokio::time::Instant::now(),
        spam: SpamFilter::default(),
        warned: HashSet::new(),
    };
    loop {
        let first = tokio::select! {
            _ = cancel.cancelled() => return,
            next = rx.recv() => match next {
                Some(e) => e,
                None => return,
            },
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = pod_starts.settled(START_YIELD) => {}
        }
        let mut next = Some(first);
        while let Some((object, event)) = next.take().or_else(|| rx.try_recv().ok()) {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = publisher.send(&object, &event) => {}
            }
        }
    }
}

/// The drain's sending half: the spam filter, the retries of a 429 and
/// the counts.
struct Publisher<S> {
    sink: S,
    stats: Arc<EventStats>,
    origin: tokio::time::Instant,
    spam: SpamFilter,
    /// The failure kinds already logged at warn.
    warned: HashSet<FailureKind>,
}

impl<S: EventSink> Publisher<S> {
    async fn send(&mut self, object: &EventObject, event: &Event) {
        if !self.spam.allow(object, self.origin.elapsed()) {
            self.stats.throttled.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(object = %object.name, reason = event.reason, "event dropped by the spam filter");
            return;
        }
        let mut tries = 0;
        let sent = loop {
            tries += 1;
            let sent =
                tokio::time::timeout(PUBLISH_TIMEOUT, self.sink.publish(object, event)).await;
            let throttled = matches!(&sent, Ok(Err(e)) if e.kind == FailureKind::Refused(429));
            if !throttled || tries >= TOO_MANY_REQUESTS_TRIES {
                break sent;
            }
            tokio::time::sleep(TOO_MANY_REQUESTS_WAIT).await;
        };
        let error = match sent {
            Ok(Ok(())) => {
                self.stats.sent.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(Err(e)) => e,
            Err(_) => SinkError {
                kind: FailureKind::Timeout,
                message: format!("no answer within {PUBLISH_TIMEOUT:?}"),
            },
        };
        self.stats.failed.fetch_add(1, Ordering::Relaxed);
        if self.warned.insert(error.kind) {
            tracing::warn!(kind = ?error.kind, error = %error.message, object = %object.name, reason = event.reason, "the API server did not take an event; crilet goes on without it, and further failures of this kind are logged at debug");
        } else {
            tracing::debug!(kind = ?error.kind, error = %error.message, object = %object.name, reason = event.reason, "event not sent");
        }
    }
}

/// `message`, cut to at most [`NOTE_LIMIT`] bytes at a character boundary.
pub fn note(message: &str) -> String {
    if message.len() <= NOTE_LIMIT {
        return message.to_string();
    }
    let mut end = NOTE_LIMIT;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}

/// The reference kube-runtime puts in `regarding`.
fn reference(o: &EventObject) -> ObjectReference {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    ObjectReference {
        api_version: some(&o.api_version),
        kind: some(&o.kind),
        namespace: some(&o.namespace),
        name: some(&o.name),
        uid: some(&o.uid),
        field_path: some(&o.field_path),
        resource_version: None,
    }
}

/// kube-runtime's Recorder over core/v1, restarted when a series' Event is
/// gone.
struct KubeSink {
    client: kube::Client,
    reporter: Reporter,
    recorder: Mutex<Recorder>,
}

impl KubeSink {
    fn new(client: kube::Client, node_name: &str) -> KubeSink {
        let client = CoreV1Events::client(client);
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.into(),
            instance: Some(node_name.into()),
        };
        let recorder = Recorder::new(client.clone(), reporter.clone());
        KubeSink {
            client,
            reporter,
            recorder: Mutex::new(recorder),
        }
    }

    fn recorder(&self) -> Recorder {
        self.recorder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A 404 about the Event itself: the PATCH of a repeat whose Event is gone
/// (a create in a namespace that does not exist is a 404 about the
/// namespace, and starting afresh would not help it).
fn series_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404
        && s.details.as_ref().is_some_and(|d| d.kind == "events"))
}

fn failure(e: &kube::Error) -> SinkError {
    match e {
        kube::Error::Api(s) => SinkError {
            kind: FailureKind::Refused(s.code),
            message: format!("{} {}: {}", s.code, s.reason, s.message),
        },
        other => {
            let mut message = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(cause) = source {
                message = format!("{message}: {cause}");
                source = cause.source();
            }
            SinkError {
                kind: FailureKind::Transport,
                message,
            }
        }
    }
}

#[async_trait::async_trait]
impl EventSink for KubeSink {
    async fn publish(&self, object: &EventObject, event: &Event) -> Result<(), SinkError> {
        let regarding = reference(object);
        let ev = kr::Event {
            type_: match event.type_ {
                EventType::Normal => kr::EventType::Normal,
                EventType::Warning => kr::EventType::Warning,
            },
            reason: event.reason.to_string(),
            note: Some(note(&event.message)),
            action: event.action.to_string(),
            secondary: None,
        };
        match self.recorder().publish(&ev, &regarding).await {
            Err(e) if series_gone(&e) => {
                // A repeat's PATCH of an Event that is gone: start afresh.
                let fresh = Recorder::new(self.client.clone(), self.reporter.clone());
                *self.recorder.lock().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
                fresh
                    .publish(&ev, &regarding)
                    .await
                    .map_err(|e| failure(&e))
            }
            other => other.map_err(|e| failure(&e)),
        }
    }
}

#[cfg(test)]
#[path = "kube_events_tests.rs"]
mod tests;
