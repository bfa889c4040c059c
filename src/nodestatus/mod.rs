//! The Node's status, as the kubelet's `pkg/kubelet/nodestatus` and its
//! eviction signals report it. Pure: `allocatable` (reservations, capacity,
//! allocatable), `eviction` (hard thresholds), `pressure` (the pressure
//! conditions, transition period), `runtime_state` (the runtime's health as
//! Ready reports it) and `node` (the Node and Lease builders).
//! Drivers: `machine` reads the node's facts (name, IP, capacity, OS),
//! `node_signals` turns the stats collector's samples into eviction
//! signals, and `node_sync` registers the Node, writes its status on change
//! or every 5 m, and renews its Lease.
//!
//! Invariant: only `node_sync` writes the Node and its Lease.

pub mod allocatable;
pub mod eviction;
pub mod machine;
pub mod node;
pub mod node_signals;
pub mod node_sync;
pub mod pressure;
pub mod runtime_state;
