//! Mirror pods: the API server's copies of static pods. `decide` says what
//! to create and delete (pure); the driver does it through `MirrorClient`.
//! `admit` says which other pods bound to the node to reject (pure);
//! `admission` writes those rejections.
//! The Node's status parts are pure too: `allocatable` (reservations,
//! capacity, allocatable), `eviction` (hard thresholds) and `pressure` (the
//! pressure conditions); `node_sync` drives the Node and its Lease.
//! May import `pod`, `cri` and `units`; never `agent`, `stats` or `cli`.

mod admission;
pub mod admit;
pub mod allocatable;
pub mod client;
pub mod decide;
pub mod eviction;
pub mod fake;
pub mod manager;
pub mod node;
pub mod node_sync;
pub mod pressure;
