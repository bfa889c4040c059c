//! Kubernetes Events, as the kubelet records them: `recorder` (the
//! `EventRecorder` trait and the object an event regards), `kubelet_events`
//! (the kubelet's reasons and messages) and `event_spam` (the burst cap)
//! are pure; `kube_events` sends them to the API server, as core/v1
//! (`kube_events_core`).
//!
//! Invariant: recording is best-effort and never blocks the caller.

pub mod event_spam;
pub mod kube_events;
pub mod kube_events_core;
pub mod kubelet_events;
pub mod recorder;
