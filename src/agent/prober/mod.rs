//! Probes (liveness, readiness, startup) and lifecycle hooks of running
//! containers. `handlers` holds the I/O that runs one probe or hook,
//! `resolve` turns the spec's probe into what a handler runs, `manager`
//! schedules them per pod, container and probe type, on `clock`'s time.
//!
//! Invariant: like all of `agent`, this may import every lower layer and
//! never `cli`.

pub mod clock;
pub mod handlers;
pub mod manager;
pub mod resolve;
