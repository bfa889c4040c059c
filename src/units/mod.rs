//! Ground-floor helpers every folder may use: durations written as the
//! kubelet's flags take them, byte sizes as operators read them,
//! Kubernetes resource quantities (parsed exactly), `$(VAR)` expansion and
//! the FNV-1a hash.
//! Invariant: pure; imports nothing from the rest of the crate.

pub mod bytes;
pub mod duration;
pub mod expansion;
pub mod fnv;
pub mod quantity;
#[cfg(test)]
pub mod test_logs;

pub use bytes::human_bytes;
pub use duration::{go_duration, parse_duration};
