//! The pod lifecycle event generator (the kubelet's `pkg/kubelet/pleg`):
//! `decisions` says whether to follow container events or relist, how
//! often, when to resubscribe, which pod an event names and which events
//! were missed (pure); `container_events` holds the runtime's
//! GetContainerEvents stream and hands it over through `event_queue`
//! (pure), which coalesces a burst per container and loses nothing;
//! `event_choice` (pure) says whether to subscribe at all on this runtime. The sync loop's own half, waking workers and
//! relisting, is `agent::sync_pleg`.
//!
//! Invariant: events only wake workers, which read the runtime themselves.

pub mod container_events;
pub mod decisions;
pub mod event_choice;
pub mod event_queue;
