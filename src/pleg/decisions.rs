//! The pod lifecycle event generator's decisions (the kubelet's PLEG, generic
//! and evented): whether crilet follows the runtime's container events or
//! relists every second, when to relist and to subscribe again, which pod an
//! event wakes, and which changes a relist found that no event announced.
//!
//! Invariant: pure. The driver (`agent::sync_pleg`) reports what happened (a
//! subscription, an event, the end of a stream, a lag, a relist) and acts on
//! the answers; nothing here reads a clock or does I/O. Events are hints: an
//! event only says which pod to look at again, never what its state is.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::cri::{
    ContainerBrief, ContainerEvent, ContainerEventType, ContainerState, SandboxBrief,
};

/// The relist period without events (the kubelet's generic PLEG).
pub const GENERIC_RELIST_PERIOD: Duration = Duration::from_secs(1);
/// The relist period while events flow: a safety net (the kubelet's evented
/// PLEG relists every 300 s too).
pub const EVENTED_RELIST_PERIOD: Duration = Duration::from_secs(300);
/// The first wait before subscribing again after a stream failed; it
/// doubles with each failure in a row, up to `RESUBSCRIBE_MAX`.
pub const RESUBSCRIBE_INITIAL: Duration = Duration::from_secs(1);
pub const RESUBSCRIBE_MAX: Duration = Duration::from_secs(30);
/// A subscription that lasted this long resets the back-off.
pub const STABLE_SUBSCRIPTION: Duration = Duration::from_secs(30);
/// How often a runtime without GetContainerEvents is asked again (it may
/// have been upgraded meanwhile; the call costs nothing to refuse).
pub const UNIMPLEMENTED_RECHECK: Duration = Duration::from_secs(300);
/// How long a change the relist found may wait for its event before it
/// counts as missed (the runtime may publish just after the list).
pub const MISSED_EVENT_GRACE: Duration = Duration::from_secs(2);

/// Where the event stream stands, hence how often crilet relists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Container events are turned off (`--feature-gates EventedPLEG=false`).
    Disabled,
    /// Subscribing for the first time.
    Connecting,
    /// Events flow; the relist is a safety net.
    Evented,
    /// The runtime does not serve GetContainerEvents (containerd 1.6).
    Unimplemented,
    /// The stream failed or ended; crilet subscribes again with back-off.
    Broken,
}

/// Something the operator should read, once per occasion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Events flow (again, when `after_outage`).
    Subscribed { after_outage: bool },
    /// The runtime has no GetContainerEvents: said once per process.
    Unimplemented,
    /// The stream could not be opened or broke: said once per outage.
    Broken { error: String, was_subscribed: bool },
}

/// What the driver does after a change of the stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reaction {
    /// Relist now instead of waiting for the period.
    pub relist_now: bool,
    pub notice: Option<Notice>,
}

/// A change the relist found that no event announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissedEvent {
    pub container_id: String,
    pub pod_uid: String,
    /// The state at the previous relist; `None` for a new container.
    pub was: Option<ContainerState>,
    pub now: ContainerState,
}

/// The objects one relist saw: the pod of each kubelet-labelled one, each
/// such container's state, and the ids of the others (not crilet's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelistSnapshot {
    containers: HashMap<String, (String, ContainerState)>,
    sandboxes: HashMap<String, String>,
    foreign: HashSet<String>,
}

impl RelistSnapshot {
    /// The snapshot of one relist: objects in brief, labelled with their
    /// pod UID (or foreign).
    pub fn new(sandboxes: &[SandboxBrief], containers: &[ContainerBrief]) -> Self {
        let mut snapshot = RelistSnapshot::default();
        for s in sandboxes {
            if let Some(uid) = &s.label {
                snapshot.sandboxes.insert(s.id.clone(), uid.clone());
            } else {
                snapshot.foreign.insert(s.id.clone());
            }
        }
        for c in containers {
            if let Some(uid) = &c.label {
                snapshot
                    .containers
                    .insert(c.id.clone(), (uid.clone(), c.state));
            } else {
                snapshot.foreign.insert(c.id.clone());
            }
        }
        snapshot
    }

    /// The pod UID of a sandbox or container id.
    pub fn uid_of(&self, id: &str) -> Option<&str> {
        (self.sandboxes.get(id))
            .or_else(|| self.containers.get(id).map(|(uid, _)| uid))
            .map(String::as_str)
    }
}

/// What an event is about, for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventTarget {
    /// Wake this pod's worker (or, without one, relist: an orphan or a pod
    /// just removed).
    Pod(String),
    /// An object the last relist saw without kubelet labels: not crilet's.
    NotOurs,
    /// An object crilet has not listed yet: relist.
    Unknown,
}

/// The pod an event is about: the UID in the event's sandbox status, else
/// the owner of its sandbox or container as the last relist saw them.
pub fn event_target(event: &ContainerEvent, known: &RelistSnapshot) -> EventTarget {
    let ids = [event.pod_sandbox_id.as_deref(), Some(&event.container_id)];
    if ids.iter().flatten().any(|id| known.foreign.contains(*id)) {
        return EventTarget::NotOurs;
    }
    if let Some(uid) = &event.pod_uid {
        return EventTarget::Pod(uid.clone());
    }
    match ids.iter().flatten().find_map(|id| known.uid_of(id)) {
        Some(uid) => EventTarget::Pod(uid.to_string()),
        None => EventTarget::Unknown,
    }
}

/// Whether an event of `kind` accounts for a container found in `state`:
/// it announced that state or a later one (an event may overtake a list).
/// Unknown states and event types account for anything.
fn accounts_for(kind: ContainerEventType, state: ContainerState) -> bool {
    let reached = match kind {
        ContainerEventType::Created => 0,
        ContainerEventType::Started => 1,
        ContainerEventType::Stopped => 2,
        ContainerEventType::Deleted => 3,
        ContainerEventType::Unknown(_) => return true,
    };
    let needed = match state {
        ContainerState::Created => 0,
        ContainerState::Running => 1,
        ContainerState::Exited => 2,
        ContainerState::Unknown => return true,
    };
    reached >= needed
}

/// The subscriber's back-off between attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resubscribe {
    failures: u32,
}

impl Resubscribe {
    /// The wait before the next attempt, after one that lasted `lasted`:
    /// 1 s doubling to 30 s while attempts fail in a row, 1 s again after a
    /// stable subscription, and `UNIMPLEMENTED_RECHECK` for a runtime
    /// without the call.
    pub fn after(&mut self, lasted: Duration, unimplemented: bool) -> Duration {
        if unimplemented {
            self.failures = 0;
            return UNIMPLEMENTED_RECHECK;
        }
        if lasted >= STABLE_SUBSCRIPTION {
            self.failures = 0;
        }
        let wait = RESUBSCRIBE_INITIAL.saturating_mul(1 << self.failures.min(16));
        self.failures = self.failures.saturating_add(1);
        wait.min(RESUBSCRIBE_MAX)
    }
}

/// The PLEG's state between the driver's reports.
#[derive(Debug, Clone)]
pub struct Pleg {
    mode: Mode,
    unimplemented_said: bool,
    /// The current outage (from a failure to the next subscription) has
    /// been reported.
    outage_said: bool,
    /// The last event type of each id named since the last relist started.
    seen: HashMap<String, ContainerEventType>,
    /// The same for the window the relist in progress checks.
    window: HashMap<String, ContainerEventType>,
    /// The stream has been up, without a lag, since the last relist started.
    watched: bool,
    /// ... and so during the window the relist in progress checks.
    window_watched: bool,
    /// Changes without an event, waiting out `MISSED_EVENT_GRACE`.
    suspects: Vec<MissedEvent>,
}

impl Pleg {
    /// `events`: subscribe at all (`EventedPLEG`), or relist only.
    pub fn new(events: bool) -> Pleg {
        Pleg {
            mode: if events {
                Mode::Connecting
            } else {
                Mode::Disabled
            },
            unimplemented_said: false,
            outage_said: false,
            seen: HashMap::new(),
            window: HashMap::new(),
            watched: false,
            window_watched: false,
            suspects: Vec::new(),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn relist_period(&self) -> Duration {
        match self.mode {
            Mode::Evented => EVENTED_RELIST_PERIOD,
            _ => GENERIC_RELIST_PERIOD,
        }
    }

    /// The stream is open. Relist at once: whatever changed while crilet
    /// was not subscribed has sent no event to it.
    pub fn subscribed(&mut self) -> Reaction {
        let after_outage = self.mode == Mode::Broken;
        self.mode = Mode::Evented;
        self.outage_said = false;
        // The window before this subscription was not watched.
        self.watched = false;
        Reaction {
            relist_now: true,
            notice: Some(Notice::Subscribed { after_outage }),
        }
    }

    /// The stream failed to open or ended. Back to relisting every second;
    /// at once when the safety net was far away.
    pub fn stream_ended(&mut self, unimplemented: bool, error: &str) -> Reaction {
        if self.mode == Mode::Disabled {
            return Reaction::default();
        }
        let was_subscribed = self.mode == Mode::Evented;
        self.unwatch();
        let notice = if unimplemented {
            self.mode = Mode::Unimplemented;
            let first = !std::mem::replace(&mut self.unimplemented_said, true);
            first.then_some(Notice::Unimplemented)
        } else {
            self.mode = Mode::Broken;
            let first = !std::mem::replace(&mut self.outage_said, true);
            first.then(|| Notice::Broken {
                error: error.to_string(),
                was_subscribed,
            })
        };
        Reaction {
            relist_now: was_subscribed,
            notice,
        }
    }

    fn unwatch(&mut self) {
        self.watched = false;
        self.window_watched = false;
        self.suspects.clear();
    }

    /// Notes an event (it explains changes of its object) and answers what
    /// it is about.
    pub fn event(&mut self, event: &ContainerEvent, known: &RelistSnapshot) -> EventTarget {
        let (id, kind) = (&event.container_id, event.event_type);
        self.seen.insert(id.clone(), kind);
        self.suspects
            .retain(|s| !(&s.container_id == id && accounts_for(kind, s.now)));
        event_target(event, known)
    }

    /// A relist begins: events from now on belong to the next window.
    pub fn relist_started(&mut self) {
        self.window = std::mem::take(&mut self.seen);
        self.window_watched = self.watched;
        self.watched = self.mode == Mode::Evented;
    }

    /// A relist ended with `next`; `previous` is the relist before. Keeps
    /// as suspects the containers that changed during a window the stream
    /// watched while their last event (if any) does not account for their
    /// state, e.g. STARTED for one found exited: the STOPPED went missing.
    /// True when there are suspects (the driver calls `confirm_missed`
    /// after `MISSED_EVENT_GRACE`). Containers that vanished are not
    /// suspects: CRI-O sends no DELETED for containers removed with their
    /// sandbox. Sandboxes are not checked: CRI-O sends no CREATED or
    /// DELETED for them.
    pub fn relist_done(
        &mut self,
        previous: Option<&RelistSnapshot>,
        next: &RelistSnapshot,
    ) -> bool {
        let window = std::mem::take(&mut self.window);
        let (Some(previous), true) = (previous, self.window_watched) else {
            return !self.suspects.is_empty();
        };
        for (id, (uid, now)) in &next.containers {
            let was = previous.containers.get(id).map(|(_, s)| *s);
            let last = self.seen.get(id).or(window.get(id));
            if was == Some(*now) || last.is_some_and(|kind| accounts_for(*kind, *now)) {
                continue;
            }
            if self.suspects.iter().any(|s| &s.container_id == id) {
                continue;
            }
            self.suspects.push(MissedEvent {
                container_id: id.clone(),
                pod_uid: uid.clone(),
                was,
                now: *now,
            });
        }
        !self.suspects.is_empty()
    }

    /// The suspects no event explained within the grace: missed events.
    pub fn confirm_missed(&mut self) -> Vec<MissedEvent> {
        let mut missed = std::mem::take(&mut self.suspects);
        missed.sort_by(|a, b| a.container_id.cmp(&b.container_id));
        missed
    }
}

#[cfg(test)]
#[path = "decisions_tests.rs"]
mod tests;
