//! The kubelet's pod semantics over CRI (`pkg/kubelet/kuberuntime`): the
//! `io.kubernetes.*` labels, the Pod -> CRI mapping, the plan, crash
//! back-off, pod status, termination messages, the termination order of a
//! pod's containers, observation, dead-container GC, the start-up trace and
//! taking a node over from the kubelet.
//!
//! Invariant: the pure files (`labels`, `mapping`, `plan`, `backoff`,
//! `status`, `phase`, `termination`, `termination_order`, `observe`,
//! `container_gc`, `startup_trace`, `takeover`) do no I/O, read no clock and
//! are not async. Their drivers: the pod worker (`agent/worker`: `plan`,
//! `status` and `phase`, `termination_order`, `startup_trace`),
//! `observe_driver` (the runtime reads), `termination_files` (the
//! termination-message files on the host), `container_gc_driver` (the
//! dead-container GC loop) and `takeover_driver` (the runtime's pods against
//! the manifests).

pub mod backoff;
pub mod container_gc;
pub mod container_gc_driver;
pub mod labels;
pub mod mapping;
pub mod observe;
pub mod observe_driver;
pub mod phase;
pub mod plan;
pub mod startup_trace;
pub mod status;
pub mod takeover;
pub mod takeover_driver;
pub mod termination;
pub mod termination_files;
pub mod termination_order;
