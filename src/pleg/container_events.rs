//! The task that holds the runtime's GetContainerEvents stream: it
//! subscribes, forwards every event, and when the stream fails or ends it
//! says so and subscribes again after the back-off of `pleg::decisions`.
//! It hands its messages to the sync loop through an [`EventQueue`], so it
//! never waits for the loop, and a loop that is busy through a burst finds
//! the newest event of every container waiting for it: nothing is lost.
//! Reading the stream at once also keeps the runtime from dropping events
//! (containerd and CRI-O drop what a slow subscriber leaves in their own
//! buffers).
//!
//! Invariant: it decides nothing about pods or relists; the sync loop does,
//! with `pleg::decisions`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::cri::Runtime;
use crate::pleg::decisions::Resubscribe;
use crate::pleg::event_queue::EventQueue;
pub use crate::pleg::event_queue::StreamMessage;

/// How long a call may stay unanswered before it counts as subscribed.
/// containerd and CRI-O send nothing, headers included, until their first
/// event, so a pending call is the only sign of a working subscription; a
/// runtime without the call refuses it within milliseconds.
pub const SUBSCRIBE_SETTLE: Duration = Duration::from_millis(100);

/// What the stream brought, for `/metrics`: events received, how many of
/// them replaced one still waiting (coalesced), and the changes a relist
/// found that no event announced (missed: the runtime did not send them).
#[derive(Debug, Default)]
pub struct EventCounters {
    pub received: AtomicU64,
    pub coalesced: AtomicU64,
    pub missed: AtomicU64,
}

/// What the task and the sync loop share.
#[derive(Default)]
struct Shared {
    counters: Arc<EventCounters>,
    queue: Mutex<EventQueue>,
    notify: Notify,
    /// The task has ended (cancelled).
    closed: AtomicBool,
    /// The receiver is gone: the task ends.
    dropped: AtomicBool,
}

/// The sync loop's end of the stream.
pub struct EventReceiver {
    shared: Arc<Shared>,
}

impl EventReceiver {
    /// The next message; `None` once the task has ended and nothing waits.
    pub async fn recv(&mut self) -> Option<StreamMessage> {
        loop {
            if let Some(message) = self.try_recv() {
                return Some(message);
            }
            if self.shared.closed.load(Ordering::Acquire) {
                // Whatever the task pushed before it closed is taken first.
                return self.try_recv();
            }
            self.shared.notify.notified().await;
        }
    }

    /// The next message waiting, if any.
    pub fn try_recv(&mut self) -> Option<StreamMessage> {
        self.shared.queue.lock().unwrap().pop()
    }

    /// Counts changes a relist found that no event announced.
    pub fn count_missed(&self, missed: usize) {
        (self.shared.counters.missed).fetch_add(missed as u64, Ordering::Relaxed);
    }
}

impl Drop for EventReceiver {
    fn drop(&mut self) {
        self.shared.dropped.store(true, Ordering::Release);
    }
}

/// The task's end: false once nobody listens.
struct Sender {
    shared: Arc<Shared>,
}

impl Sender {
    fn send(&self, message: StreamMessage) -> bool {
        if self.shared.dropped.load(Ordering::Acquire) {
            return false;
        }
        let event = matches!(message, StreamMessage::Event(_));
        let coalesced = self.shared.queue.lock().unwrap().push(message);
        let counters = &self.shared.counters;
        if event {
            counters.received.fetch_add(1, Ordering::Relaxed);
        }
        if coalesced {
            counters.coalesced.fetch_add(1, Ordering::Relaxed);
        }
        self.shared.notify.notify_one();
        true
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.notify.notify_one();
    }
}

/// Starts the task; its messages come on the returned receiver until
/// `cancel`, and what it brought is counted in `counters`.
pub fn spawn(
    runtime: Arc<dyn Runtime>,
    counters: Arc<EventCounters>,
    cancel: CancellationToken,
) -> EventReceiver {
    let shared = Arc::new(Shared {
        counters,
        ..Default::default()
    });
    let tx = Sender {
        shared: shared.clone(),
    };
    tokio::spawn(run(runtime, tx, cancel));
    EventReceiver { shared }
}

async fn run(runtime: Arc<dyn Runtime>, tx: Sender, cancel: CancellationToken) {
    let mut backoff = Resubscribe::default();
    loop {
        let started = tokio::time::Instant::now();
        let Some((error, unimplemented)) = subscribe_once(runtime.as_ref(), &tx, &cancel).await
        else {
            return;
        };
        let retry_in = backoff.after(started.elapsed(), unimplemented);
        let ended = StreamMessage::Ended {
            error,
            unimplemented,
            retry_in,
        };
        if !tx.send(ended) {
            return; // the sync loop is gone
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(retry_in) => {}
        }
    }
}

/// One subscription, until it ends: why (and whether the runtime lacks the
/// call), or `None` when cancelled or nobody listens any more.
async fn subscribe_once(
    runtime: &dyn Runtime,
    tx: &Sender,
    cancel: &CancellationToken,
) -> Option<(String, bool)> {
    let ended =
        |e: crate::cri::RuntimeError| Some((e.to_string(), e.code() == tonic::Code::Unimplemented));
    let call = runtime.get_container_events();
    tokio::pin!(call);
    let answer = tokio::select! {
        _ = cancel.cancelled() => return None,
        answer = &mut call => Some(answer),
        _ = tokio::time::sleep(SUBSCRIBE_SETTLE) => None,
    };
    let said = answer.is_none();
    let answer = match answer {
        Some(answer) => answer,
        None => {
            tx.send(StreamMessage::Subscribed).then_some(())?;
            tokio::select! {
                _ = cancel.cancelled() => return None,
                answer = &mut call => answer,
            }
        }
    };
    let mut stream = match answer {
        Ok(stream) => stream,
        Err(e) => return ended(e),
    };
    if !said {
        tx.send(StreamMessage::Subscribed).then_some(())?;
    }
    loop {
        let item = tokio::select! {
            _ = cancel.cancelled() => return None,
            item = stream.next() => item,
        };
        match item {
            Some(Ok(event)) => {
                tx.send(StreamMessage::Event(event)).then_some(())?;
            }
            Some(Err(e)) => return ended(e),
            None => return Some(("the runtime closed the event stream".into(), false)),
        }
    }
}

/// Whether to follow the runtime's container events, from the gate as set
/// (`None`: not set) and the runtime's `Version`; says why once, unless it
/// follows them as asked.
pub fn choose(gate: Option<bool>, runtime_name: &str, runtime_version: &str) -> bool {
    use crate::pleg::event_choice::{EventsChoice, events_choice};
    let choice = events_choice(gate, runtime_name, runtime_version);
    match &choice {
        EventsChoice::RelistAvoidingBug { bug } => tracing::warn!(
            runtime = runtime_name,
            version = runtime_version,
            bug,
            "not subscribing to this runtime's container events: relisting every second, as the kubelet does by default (--feature-gates EventedPLEG=true subscribes anyway)"
        ),
        EventsChoice::FollowDespiteBug { bug } => tracing::warn!(
            runtime = runtime_name,
            version = runtime_version,
            bug,
            "subscribing to this runtime's container events as EventedPLEG=true asks, despite its known bug"
        ),
        // The sync loop's words for a runtime that refuses the call.
        EventsChoice::RelistUnserved => tracing::info!(
            runtime = runtime_name,
            version = runtime_version,
            "the runtime does not serve GetContainerEvents; crilet falls back to relist every second (the call came with containerd 1.7)"
        ),
        EventsChoice::Relist => {
            tracing::info!("container events are off (--feature-gates EventedPLEG=false)")
        }
        EventsChoice::Follow => {}
    }
    choice.follows()
}
