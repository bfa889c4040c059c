//! Probes (liveness, readiness, startup) and lifecycle hooks of running
//! containers. `handlers` holds the I/O that runs one probe or hook; the
//! driver that schedules them per container lives here beside it.
//!
//! Invariant: like all of `agent`, this may import every lower layer and
//! never `cli`.

pub mod handlers;
