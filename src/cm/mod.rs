//! The container manager's cgroup parts (the kubelet's `pkg/kubelet/cm`):
//! `cgroup`, each pod's cgroup parent and its removal; `cgroup_driver`,
//! the start-up check of the cgroup driver against the runtime's; `swap`,
//! the cgroup version and swap controller the container limits depend on.
//!
//! Invariant: a pod's cgroup directory is removed only once its sandbox is
//! gone; the driver check itself is pure.

pub mod cgroup;
pub mod cgroup_driver;
pub mod swap;
