//! The task that holds the runtime's GetContainerEvents stream: it
//! subscribes, forwards every event, and when the stream fails or ends it
//! says so and subscribes again after the back-off of `pleg::decisions`.
//! It talks to the sync loop over a broadcast channel, so it never waits
//! for the loop: a loop that falls behind learns it lost events (a lag).
//!
//! Invariant: it decides nothing about pods or relists; the sync loop does,
//! with `pleg::decisions`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::cri::{ContainerEvent, Runtime};
use crate::pleg::decisions::Resubscribe;

/// How long a call may stay unanswered before it counts as subscribed.
/// containerd and CRI-O send nothing, headers included, until their first
/// event, so a pending call is the only sign of a working subscription; a
/// runtime without the call refuses it within milliseconds.
pub const SUBSCRIBE_SETTLE: Duration = Duration::from_millis(100);
/// Events the sync loop may be behind before it lags.
pub const EVENT_BUFFER: usize = 1024;

/// What the task tells the sync loop.
#[derive(Debug, Clone)]
pub enum StreamMessage {
    /// The stream is open (answered, or pending past `SUBSCRIBE_SETTLE`).
    Subscribed,
    Event(ContainerEvent),
    /// The call failed or the stream ended; the next attempt comes after
    /// `retry_in`.
    Ended {
        error: String,
        unimplemented: bool,
        retry_in: Duration,
    },
}

/// Starts the task; its messages come on the returned receiver (which
/// holds `capacity` of them) until `cancel`.
pub fn spawn(
    runtime: Arc<dyn Runtime>,
    capacity: usize,
    cancel: CancellationToken,
) -> broadcast::Receiver<StreamMessage> {
    let (tx, rx) = broadcast::channel(capacity);
    tokio::spawn(run(runtime, tx, cancel));
    rx
}

async fn run(
    runtime: Arc<dyn Runtime>,
    tx: broadcast::Sender<StreamMessage>,
    cancel: CancellationToken,
) {
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
        if tx.send(ended).is_err() {
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
    tx: &broadcast::Sender<StreamMessage>,
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
            tx.send(StreamMessage::Subscribed).ok()?;
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
        tx.send(StreamMessage::Subscribed).ok()?;
    }
    loop {
        let item = tokio::select! {
            _ = cancel.cancelled() => return None,
            item = stream.next() => item,
        };
        match item {
            Some(Ok(event)) => {
                tx.send(StreamMessage::Event(event)).ok()?;
            }
            Some(Err(e)) => return ended(e),
            None => return Some(("the runtime closed the event stream".into(), false)),
        }
    }
}
