//! Where container logs live on the host: `<root>/logs/<namespace>_<name>_<uid>/<container>/<restart>.log`,
//! the layout the runtime writes (the mapping names each container's
//! `log_path` from here) and every reader, rotator and collector finds.
//!
//! Invariant: pure; the one place these paths are spelled.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use crate::pod::{name, namespace, uid};

/// `<root>/logs/<namespace>_<name>_<uid>`: where a pod's container logs go.
pub fn pod_log_dir_under(root_dir: &Path, pod: &Pod) -> PathBuf {
    pod_log_dir_of(root_dir, namespace(pod), name(pod), uid(pod))
}

/// [`pod_log_dir_under`] from the pod's identity alone, as a container's
/// labels record it (for a container whose pod spec is gone).
pub fn pod_log_dir_of(root_dir: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    root_dir
        .join("logs")
        .join(format!("{namespace}_{name}_{uid}"))
}

/// `<container>/<restart>.log`, relative to [`pod_log_dir_under`].
pub fn container_log_path(container_name: &str, restart_count: u32) -> String {
    format!("{container_name}/{restart_count}.log")
}
