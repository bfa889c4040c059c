//! Mirror pods: the API server's copies of static pods. `decide` says what
//! to create and delete (pure); the driver does it through `MirrorClient`.
//! May import `pod`, `cri` and `units`; never `agent`, `stats` or `cli`.

pub mod allocatable;
pub mod client;
pub mod decide;
pub mod eviction;
pub mod fake;
pub mod manager;
pub mod node;
pub mod pressure;
