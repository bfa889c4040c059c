//! Ground-floor helpers every layer may use: durations written as the
//! kubelet's flags take them, and byte sizes as operators read them.
//! Invariant: pure; imports nothing from the rest of the crate.

pub mod bytes;
pub mod duration;

pub use bytes::human_bytes;
pub use duration::parse_duration;
