//! The messages of the container event stream waiting for the sync loop,
//! coalesced per container: a newer event of a container replaces its
//! older one where that one waits, so a burst (100 pods starting at once)
//! costs one entry per container, however long the sync loop is busy.
//!
//! Invariant: pure, and it loses nothing the sync loop needs. The loop
//! acts on an event's container only (which pod to wake) and remembers its
//! latest kind (`decisions::Pleg::event`), so the newest event of each
//! container is all it needs; the stream's own messages (subscribed,
//! ended) are never merged. At most one event per container id waits.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::cri::ContainerEvent;

/// What the stream task tells the sync loop.
#[derive(Debug, Clone)]
pub enum StreamMessage {
    /// The stream is open (answered, or pending past the settle time).
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

/// The waiting messages, oldest first.
#[derive(Debug, Default)]
pub struct EventQueue {
    messages: VecDeque<StreamMessage>,
    /// Container id → the sequence number of its waiting event.
    waiting: HashMap<String, u64>,
    /// The sequence number of `messages[0]`.
    head: u64,
}

impl EventQueue {
    /// Queues `message`; true when it is an event that replaced its
    /// container's waiting one (coalesced).
    pub fn push(&mut self, message: StreamMessage) -> bool {
        let StreamMessage::Event(event) = message else {
            self.messages.push_back(message);
            return false;
        };
        if let Some(&seq) = self.waiting.get(&event.container_id) {
            let at = (seq - self.head) as usize;
            self.messages[at] = StreamMessage::Event(event);
            return true;
        }
        let seq = self.head + self.messages.len() as u64;
        self.waiting.insert(event.container_id.clone(), seq);
        self.messages.push_back(StreamMessage::Event(event));
        false
    }

    pub fn pop(&mut self) -> Option<StreamMessage> {
        let message = self.messages.pop_front()?;
        self.head += 1;
        if let StreamMessage::Event(event) = &message {
            self.waiting.remove(&event.container_id);
        }
        Some(message)
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::ContainerEventType;

    fn event(id: &str, kind: ContainerEventType) -> StreamMessage {
        StreamMessage::Event(ContainerEvent {
            container_id: id.into(),
            event_type: kind,
            created_at: 0,
            pod_sandbox_id: None,
            pod_uid: None,
        })
    }

    /// What pops, as short strings: `id:kind`, `sub`, `end`.
    fn drain(q: &mut EventQueue) -> Vec<String> {
        std::iter::from_fn(|| q.pop())
            .map(|m| match m {
                StreamMessage::Event(e) => format!("{}:{:?}", e.container_id, e.event_type),
                StreamMessage::Subscribed => "sub".into(),
                StreamMessage::Ended { .. } => "end".into(),
            })
            .collect()
    }

    #[test]
    fn a_newer_event_replaces_the_waiting_one_in_its_place() {
        use ContainerEventType::*;
        let mut q = EventQueue::default();
        let coalesced: Vec<bool> = [
            StreamMessage::Subscribed,
            event("a", Created),
            event("b", Created),
            event("a", Started),
            event("a", Stopped),
        ]
        .into_iter()
        .map(|m| q.push(m))
        .collect();
        assert_eq!(coalesced, [false, false, false, true, true]);
        assert_eq!(q.len(), 3);
        assert_eq!(drain(&mut q), ["sub", "a:Stopped", "b:Created"]);
        assert!(q.is_empty());
    }

    #[test]
    fn an_event_after_its_container_popped_queues_anew() {
        use ContainerEventType::*;
        let mut q = EventQueue::default();
        q.push(event("a", Created));
        q.push(event("b", Created));
        assert_eq!(drain(&mut q)[..1], ["a:Created"]);
        // (b is gone too: drained.) a comes again after the loop took it.
        assert!(!q.push(event("a", Started)));
        assert!(!q.push(event("b", Started)));
        assert!(q.push(event("a", Stopped)));
        assert_eq!(drain(&mut q), ["a:Stopped", "b:Started"]);
    }

    #[test]
    fn stream_messages_are_never_merged() {
        let mut q = EventQueue::default();
        let ended = || StreamMessage::Ended {
            error: "gone".into(),
            unimplemented: false,
            retry_in: Duration::from_secs(1),
        };
        for m in [
            StreamMessage::Subscribed,
            ended(),
            StreamMessage::Subscribed,
            ended(),
        ] {
            assert!(!q.push(m), "never coalesced");
        }
        assert_eq!(drain(&mut q), ["sub", "end", "sub", "end"]);
    }

    /// Any sequence of events and pops: what pops is, per container, in
    /// order, and the last event of every container pushed since it last
    /// popped always comes out; at most one event per container waits.
    #[test]
    fn property_the_newest_event_of_every_container_comes_out() {
        use ContainerEventType::*;
        let kinds = [Created, Started, Stopped, Deleted];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..200 {
            let mut q = EventQueue::default();
            // The newest kind pushed per container that has not popped since.
            let mut owed: HashMap<String, ContainerEventType> = HashMap::new();
            for _ in 0..300 {
                let r = next();
                if r % 3 == 0 {
                    if let Some(StreamMessage::Event(e)) = q.pop() {
                        assert_eq!(owed.remove(&e.container_id), Some(e.event_type));
                    }
                } else {
                    let id = format!("c{}", r % 7);
                    let kind = kinds[(r / 7 % 4) as usize];
                    let waiting = owed.insert(id.clone(), kind).is_some();
                    assert_eq!(q.push(event(&id, kind)), waiting);
                }
                assert_eq!(q.len(), owed.len());
            }
            while let Some(StreamMessage::Event(e)) = q.pop() {
                assert_eq!(owed.remove(&e.container_id), Some(e.event_type));
            }
            assert!(owed.is_empty());
        }
    }
}
