//! The kubelet's pod semantics over CRI (the kubelet's own name for this
//! layer): labels, the Pod -> CRI mapping, the plan, crash back-off, pod
//! status, termination messages, reading observations, dead-container
//! selection, the container log rotation plan, the PLEG's decisions (events
//! or relist), and the pure half of probes and lifecycle hooks (`prober`).
//!
//! Invariant: pure functions over domain types. No tokio tasks, no
//! filesystem, no network; imports only `cri` (types), `pod` and `units`.
//! The drivers that act on these decisions live in `agent`.

pub mod backoff;
pub mod container_gc;
pub mod container_gc_driver;
pub mod labels;
pub mod mapping;
pub mod observe;
pub mod observe_driver;
pub mod plan;
pub mod status;
pub mod termination;
pub mod termination_files;
