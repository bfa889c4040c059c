//! Images: disk usage of the image filesystem and image garbage collection
//! (policy, records, selection: pure; the collector drives the runtime),
//! and the pulls pod workers share (one per image at a time).
//! May import `cri`, `pod` and `units` only.

pub mod disk;
pub mod gc;
pub mod policy;
pub mod pulls;
pub mod records;
pub mod render;
pub mod report;
pub mod select;
