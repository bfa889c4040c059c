//! The sync loop's PLEG: it relists the runtime (every second, or every
//! 300 s as a safety net while container events flow) and wakes the worker
//! of each pod an event names, as `pleg::decisions` decides; the stream
//! itself is held by `container_events`.
//!
//! Invariant: only the sync loop runs this (it owns the relist state and the
//! worker map); events only wake workers, which read the runtime themselves.

use std::collections::{BTreeMap, HashSet};

use tokio::time::Instant;

use super::SyncLoop;
use super::orphan_dirs;
use super::worker::PodWork;
use crate::cri::ContainerEvent;
use crate::kuberuntime::observe::RuntimePodSummary;
use crate::kuberuntime::observe_driver::observe_all;
use crate::pleg::container_events::{EventReceiver, StreamMessage};
use crate::pleg::decisions::{
    EventTarget, GENERIC_RELIST_PERIOD, MISSED_EVENT_GRACE, Mode, Notice, Pleg, Reaction,
    RelistSnapshot,
};
use crate::pod;

/// The relist and event state of the sync loop.
pub(super) struct PlegState {
    pub pleg: Pleg,
    /// The container events, unless turned off or the task has ended.
    pub events: Option<EventReceiver>,
    pub next_relist: Instant,
    /// When the last relist began (requests for a relist wait a period).
    last_relist_at: Option<Instant>,
    /// When to confirm the changes the last relist found without an event.
    pub confirm_at: Option<Instant>,
    last_relist: BTreeMap<String, RuntimePodSummary>,
    known: Option<RelistSnapshot>,
    relist_failing: bool,
    /// Orphaned pod directories and cgroups, swept after a relist.
    sweeper: orphan_dirs::Sweeper,
}

impl PlegState {
    pub fn new(events: Option<EventReceiver>) -> Self {
        let pleg = Pleg::new(events.is_some());
        if pleg.mode() == Mode::Disabled {
            // Why (the gate, a runtime without the call or with a known
            // bug) was said once at start, with the choice.
            tracing::info!(every = ?GENERIC_RELIST_PERIOD, "not following the runtime's container events: relisting the runtime");
        }
        PlegState {
            pleg,
            events,
            next_relist: Instant::now(),
            last_relist_at: None,
            confirm_at: None,
            last_relist: BTreeMap::new(),
            known: None,
            relist_failing: false,
            sweeper: orphan_dirs::Sweeper::default(),
        }
    }
}

/// The next message of the stream (`None`: the stream task has ended);
/// pending forever without a stream.
pub(super) async fn next_message(events: &mut Option<EventReceiver>) -> Option<StreamMessage> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

impl SyncLoop {
    /// A message of the event stream (`None`: the stream task has ended).
    pub(super) fn on_stream(&mut self, msg: Option<StreamMessage>) {
        let reaction = match msg {
            Some(StreamMessage::Event(event)) => return self.on_event(&event),
            Some(StreamMessage::Subscribed) => self.pleg.pleg.subscribed(),
            Some(StreamMessage::Ended {
                error,
                unimplemented,
                retry_in,
            }) => {
                tracing::debug!(error, ?retry_in, "container event stream ended");
                self.pleg.pleg.stream_ended(unimplemented, &error)
            }
            None => {
                self.pleg.events = None;
                return;
            }
        };
        self.react(reaction);
    }

    fn react(&mut self, reaction: Reaction) {
        if let Some(notice) = reaction.notice {
            self.say(notice);
        }
        if reaction.relist_now {
            self.pleg.next_relist = Instant::now();
        }
    }

    fn say(&mut self, notice: Notice) {
        let every = self.pleg.pleg.relist_period();
        match notice {
            Notice::Subscribed {
                after_outage: false,
            } => {
                tracing::info!(
                    ?every,
                    "subscribed to the runtime's container events; relisting now, then as a safety net"
                )
            }
            Notice::Subscribed { after_outage: true } => {
                tracing::info!(
                    ?every,
                    "subscribed to container events again; relisting now for what changed meanwhile, then as a safety net"
                )
            }
            Notice::Unimplemented => {
                tracing::info!(
                    ?every,
                    "the runtime does not serve GetContainerEvents; crilet falls back to relist"
                )
            }
            Notice::Broken {
                error,
                was_subscribed: true,
            } => {
                tracing::warn!(%error, ?every, "the container event stream broke; crilet falls back to relist and subscribes again with back-off")
            }
            Notice::Broken {
                error,
                was_subscribed: false,
            } => {
                tracing::warn!(%error, ?every, "cannot subscribe to container events; crilet falls back to relist and retries with back-off")
            }
        }
    }

    fn on_event(&mut self, event: &ContainerEvent) {
        let empty = RelistSnapshot::default();
        let known = self.pleg.known.as_ref().unwrap_or(&empty);
        let target = self.pleg.pleg.event(event, known);
        tracing::debug!(container = %event.container_id, kind = ?event.event_type, ?target, "container event");
        match target {
            EventTarget::Pod(uid) => match self.workers.get(&uid) {
                Some(h) => h.wake(),
                // A pod no worker has: an orphan to remove, or the last
                // events of one just removed. The relist tells.
                None => self.request_relist(),
            },
            EventTarget::NotOurs => {}
            EventTarget::Unknown => self.request_relist(),
        }
    }

    /// A relist soon, but not more often than without events.
    fn request_relist(&mut self) {
        let earliest = self
            .pleg
            .last_relist_at
            .map_or_else(Instant::now, |at| at + GENERIC_RELIST_PERIOD);
        self.pleg.next_relist = self.pleg.next_relist.min(earliest);
    }

    /// Handles the messages that queued while the loop was busy, so the
    /// relist counts every event sent before it listed.
    fn drain_events(&mut self) {
        loop {
            let Some(rx) = self.pleg.events.as_mut() else {
                return;
            };
            let Some(msg) = rx.try_recv() else {
                return;
            };
            self.on_stream(Some(msg));
        }
    }

    /// The changes the last relist found that no event explained within the
    /// grace: missed events. The relist already woke their pods.
    pub(super) fn confirm_missed(&mut self) {
        self.pleg.confirm_at = None;
        let missed = self.pleg.pleg.confirm_missed();
        if let Some(rx) = &self.pleg.events {
            rx.count_missed(missed.len());
        }
        for m in missed {
            tracing::warn!(container = %m.container_id, pod_uid = %m.pod_uid, was = ?m.was, now = ?m.now, "missed container event: the runtime sent no event for this change; the relist caught it");
        }
    }

    /// Runtime pods of this full name under another UID that nothing runs
    /// or wants (left running by a crilet killed while it replaced an
    /// edited manifest's pod): terminated now, so the pod of that name
    /// waits for them, as for an edited manifest's old version. Without
    /// this the new pod would start at once and the old one would stop
    /// only when a relist found it an orphan: two pods of one name.
    pub(super) fn terminate_stale_of_name(&mut self, full_name: &str, uid: &str) {
        let unseen = self.config.unseen_sources();
        let stale: Vec<String> = (self.pleg.last_relist.iter())
            .filter(|(u, s)| {
                s.full_name == full_name
                    && s.active
                    && u.as_str() != uid
                    && !self.workers.contains_key(*u)
                    && !self.terminating.contains_key(*u)
                    && self.manager.get_pod_by_uid(u).is_none()
                    && unseen.allows_deletion(s.source.as_deref())
            })
            .map(|(u, _)| u.clone())
            .collect();
        for u in stale {
            tracing::info!(uid = %u, pod = full_name, "a previous pod of this name still runs; removing it first");
            self.terminating.insert(u.clone(), full_name.to_owned());
            let work = PodWork::Terminate {
                uid: u.clone(),
                full_name: full_name.to_owned(),
                pod: None,
            };
            self.dispatch(u, work);
        }
    }

    /// Wakes the workers of pods whose runtime objects changed, and
    /// terminates kubelet-labelled pods that no source wants once every
    /// source has reported.
    pub(super) async fn relist(&mut self) {
        let started = Instant::now();
        self.pleg.last_relist_at = Some(started);
        self.pleg.pleg.relist_started();
        let listed = observe_all(self.ctx.runtime.as_ref()).await;
        self.pleg.next_relist = started + self.pleg.pleg.relist_period();
        let (all, snapshot) = match listed {
            Ok(listed) => {
                if self.pleg.relist_failing {
                    tracing::info!("runtime answers again");
                    self.pleg.relist_failing = false;
                }
                listed
            }
            Err(e) => {
                if !self.pleg.relist_failing {
                    let every = self.pleg.pleg.relist_period();
                    tracing::error!(error = %e, ?every, "cannot list the runtime's pods; retrying");
                    self.pleg.relist_failing = true;
                }
                return;
            }
        };
        // Events that queued while listing count for this relist. Those
        // that ask for another (a subscription, a lag, an object this list
        // may predate) keep their request.
        self.drain_events();
        let mut orphans_found = false;
        let unseen = self.config.unseen_sources();
        for (uid, summary) in &all {
            if let Some(h) = self.workers.get(uid) {
                if self.pleg.last_relist.get(uid) != Some(summary) {
                    h.wake();
                }
                continue;
            }
            let wanted = self.manager.get_pod_by_uid(uid).is_some();
            // A source that has not reported yet may still want its pods.
            let may_delete = unseen.allows_deletion(summary.source.as_deref());
            if !wanted && may_delete && !self.terminating.contains_key(uid) {
                tracing::info!(uid, pod = %summary.full_name, "runtime pod that no source wants; removing it");
                self.terminating
                    .insert(uid.clone(), summary.full_name.clone());
                orphans_found = true;
                self.dispatch(
                    uid.clone(),
                    PodWork::Terminate {
                        uid: uid.clone(),
                        full_name: summary.full_name.clone(),
                        pod: None,
                    },
                );
            }
        }
        // Directories and cgroups of pods nothing knows any more (crilet
        // was killed before it removed them, or the pod's spec was gone).
        if unseen.allows_deletion(None) {
            let mut known: HashSet<&str> = all.keys().map(String::as_str).collect();
            known.extend(self.workers.keys().map(String::as_str));
            known.extend(self.terminating.keys().map(String::as_str));
            let pods = self.manager.get_pods();
            known.extend(pods.iter().map(|p| pod::uid(p)));
            let ctx = &self.ctx;
            for what in self
                .pleg
                .sweeper
                .maybe_sweep(&ctx.node, &ctx.cgroup_fs, &known)
            {
                tracing::info!(path = %what, "removed the directory or cgroup of a pod that no source wants and the runtime no longer has");
            }
        }
        self.pleg.last_relist = all;
        if self
            .pleg
            .pleg
            .relist_done(self.pleg.known.as_ref(), &snapshot)
        {
            self.pleg.confirm_at = Some(Instant::now() + MISSED_EVENT_GRACE);
        }
        self.pleg.known = Some(snapshot);
        // Only orphans change the view here; publishing every relist would
        // clone the pod manager and wake the mirror reconcile for nothing.
        if orphans_found {
            self.publish();
        }
    }
}

#[cfg(test)]
#[path = "sync_pleg_tests.rs"]
mod tests;
