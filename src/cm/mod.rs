//! The container manager's cgroup parts (the kubelet's `pkg/kubelet/cm`):
//! `cgroup`, each pod's cgroup parent and its removal; `cgroup_driver`,
//! the start-up check of the cgroup driver against the runtime's;
//! `node_cgroups`, the cgroup version and the swap and hugetlb controllers
//! the container limits depend on.
//!
//! Invariant: a pod's cgroup directory is removed only once its sandbox is
//! gone; the driver check itself is pure.

pub mod cgroup;
pub mod cgroup_driver;
pub mod node_cgroups;
