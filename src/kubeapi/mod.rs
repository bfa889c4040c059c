//! The API server adapter, on the ground floor beside `cri`: the
//! `MirrorClient` trait crilet's subsystems speak (the Node, its Lease, mirror
//! pods, API pods bound to the node, Services, Events), its kube-rs client, a
//! recording fake for unit tests, the strategic merge patches the status
//! writes are sent as (`strategic_merge`, pure), the Services the node
//! knows of (the kubelet's service informer: `service_store`, pure, and its
//! driver `service_watch`), the RuntimeClass lookup (`runtime_class`), and the
//! connection over a client certificate read from files that rotate
//! (`transport`), and the count of runtime calls in flight the API writers
//! yield to (`call_count`: it lives here, for the writers may not use
//! `cri`).
//!
//! Invariant: imports no subsystem; kube-rs types stay behind the trait's
//! k8s-openapi objects and `MirrorError`.

pub mod call_count;
pub mod client;
pub mod fake;
pub mod retry;
pub mod runtime_class;
pub mod service_store;
pub mod service_watch;
pub mod strategic_merge;
pub mod transport;
