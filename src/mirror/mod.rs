//! Mirror pods: the API server's copies of static pods. `decide` says what
//! to create and delete (pure); the driver does it through `MirrorClient`.

pub mod client;
pub mod decide;
pub mod fake;
pub mod manager;
pub mod node;
