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
pub mod labels;
pub mod log_rotation;
pub mod logs;
pub mod mapping;
pub mod observe;
pub mod plan;
pub mod pleg;
pub mod prober;
pub mod status;
pub mod termination;
