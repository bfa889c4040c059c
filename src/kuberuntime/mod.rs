//! The kubelet's pod semantics over CRI (`pkg/kubelet/kuberuntime`): the
//! `io.kubernetes.*` labels, the Pod -> CRI mapping, the plan, crash
//! back-off, pod status, termination messages, observation and
//! dead-container GC.
//!
//! Invariant: the pure files (`labels`, `mapping`, `plan`, `backoff`,
//! `status`, `termination`, `observe`, `container_gc`) do no I/O, read no
//! clock and are not async; each has its driver beside it:
//! `observe_driver` (the runtime reads), `termination_files` (the
//! termination-message files on the host) and `container_gc_driver` (the
//! dead-container GC loop).

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
