//! Mirror pods: the API server's copies of static pods. `decide` says what
//! to create and delete (pure); the driver does it through `MirrorClient`.
//! `admit` says which other pods bound to the node to reject (pure);
//! `admission` writes those rejections.
//! The Node's status parts are pure too: `allocatable` (reservations,
//! capacity, allocatable), `eviction` (hard thresholds) and `pressure` (the
//! pressure conditions); `node_sync` drives the Node and its Lease.
//! Events: `events` (the recorder trait and what an event regards),
//! `kubelet_events` (the kubelet's reasons and messages) and `event_spam`
//! (the burst cap) are pure; `kube_events` sends them, as core/v1
//! (`kube_events_core`).
//! May import `kuberuntime`, `pod`, `cri` and `units`; never `agent`, `stats`
//! or `cli`.

mod admission;
pub mod admit;
pub mod allocatable;
pub mod client;
pub mod decide;
pub mod event_spam;
pub mod events;
pub mod eviction;
pub mod fake;
pub mod kube_events;
pub mod kube_events_core;
pub mod kubelet_events;
pub mod manager;
pub mod node;
pub mod node_sync;
pub mod pressure;
