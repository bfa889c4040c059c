//! The fake's GetContainerEvents: off (Unimplemented, as containerd 1.6)
//! until a test turns it on, then one stream per subscriber, fed by every
//! change the fake makes, with the sandbox events containerd 2 sends. Like
//! the Go runtimes, the call answers only with the first event.
//!
//! Invariant: an event is sent after the state it reports is in place, so
//! a subscriber that reacts by reading the fake sees the change.

use tokio::sync::mpsc;

use super::*;

/// The event side of the fake's state.
#[derive(Debug, Default)]
pub(super) struct FakeEvents {
    /// False: GetContainerEvents answers Unimplemented.
    served: bool,
    /// True: changes send nothing (a runtime that loses events).
    muted: bool,
    subscribers: Vec<mpsc::UnboundedSender<Result<ContainerEvent>>>,
}

impl FakeEvents {
    /// A new stream, or Unimplemented when events are not served.
    pub(super) fn subscribe(&mut self) -> Result<ContainerEventStream> {
        if !self.served {
            let status = tonic::Status::unimplemented("unknown method GetContainerEvents");
            return Err(rpc_error("GetContainerEvents", status));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers.push(tx);
        Ok(Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })))
    }

    fn send(&mut self, event: ContainerEvent) {
        if self.muted {
            return;
        }
        self.subscribers
            .retain(|tx| tx.send(Ok(event.clone())).is_ok());
    }
}

impl State {
    /// Reports a change of container `id` (which must still be known).
    pub(super) fn container_event(&mut self, id: &str, event_type: ContainerEventType) {
        let Some(c) = self.containers.get(id) else {
            return;
        };
        let sandbox_id = c.sandbox_id.clone();
        let pod_uid = self
            .sandboxes
            .get(&sandbox_id)
            .map(|(config, _, _)| config.metadata.uid.clone());
        let event = ContainerEvent {
            container_id: id.to_string(),
            event_type,
            created_at: self.now,
            pod_sandbox_id: Some(sandbox_id),
            pod_uid,
        };
        self.events.send(event);
    }

    /// Reports a change of sandbox `id` (which must still be known).
    pub(super) fn sandbox_event(&mut self, id: &str, event_type: ContainerEventType) {
        let Some((config, _, _)) = self.sandboxes.get(id) else {
            return;
        };
        let event = ContainerEvent {
            container_id: id.to_string(),
            event_type,
            created_at: self.now,
            pod_sandbox_id: Some(id.to_string()),
            pod_uid: Some(config.metadata.uid.clone()),
        };
        self.events.send(event);
    }
}

impl FakeRuntime {
    /// Serves GetContainerEvents from now on (default: Unimplemented).
    pub fn serve_container_events(&self) {
        self.state.lock().unwrap().events.served = true;
    }

    /// While muted, changes send no events: the next relist must find them.
    pub fn mute_container_events(&self, muted: bool) {
        self.state.lock().unwrap().events.muted = muted;
    }

    /// Ends every open event stream with `status`, as a runtime that
    /// restarts (the streams' subscribers see an error, then the end).
    pub fn break_container_events(&self, status: tonic::Status) {
        let mut s = self.state.lock().unwrap();
        for tx in s.events.subscribers.drain(..) {
            let _ = tx.send(Err(rpc_error("GetContainerEvents", status.clone())));
        }
    }

    /// How many event streams are open (their receivers not dropped).
    pub fn container_event_subscribers(&self) -> usize {
        let mut s = self.state.lock().unwrap();
        s.events.subscribers.retain(|tx| !tx.is_closed());
        s.events.subscribers.len()
    }
}
