//! The host side of a pod's volumes and files (the kubelet's `pkg/volume`,
//! and the hosts file of `pkg/kubelet/kubelet_pods.go`), made by the pod
//! worker before the sandbox or before each container:
//! - `hostpath`: the hostPath `type` checks;
//! - `empty_dir`: emptyDir directories (mode 0777), given to the pod's
//!   fsGroup through `ownership` (what each path gets, pure) and
//!   `ownership_driver` (the walk);
//! - `etc_hosts` (the content, pure) and `etc_hosts_file` (the write): the
//!   managed `/etc/hosts`;
//! - `subpath`: subPath bind mounts, and the removal of a pod directory
//!   that unmounts them first.
//!
//! Invariant: only what the pod asks for is created or changed (the
//! `*OrCreate` hostPath types, the pod's own emptyDirs and hosts file, a
//! missing subPath directory inside its volume);
//! nothing that exists outside the pod's directory is modified or removed.
//! Paths are given by the caller (the mapping names them).

pub mod empty_dir;
pub mod etc_hosts;
pub mod etc_hosts_file;
pub mod hostpath;
pub mod ownership;
pub mod ownership_driver;
pub mod subpath;
