//! Where container logs live on the host, as the kubelet lays them out:
//! each container instance writes `<pod logs dir>/<namespace>_<name>_<uid>/<container>/<restart>.log`
//! (`--pod-logs-dir`, default `/var/log/pods`), and a symlink
//! `<container logs dir>/<pod>_<namespace>_<container>-<container id>.log`
//! (default `/var/log/containers`) points at it, for the log shippers that
//! tail that directory. The mapping names each container's `log_path` from
//! here, and every reader, rotator and collector finds the files by it, or
//! by the path the runtime reports ([`container_log_file`]).
//!
//! Invariant: pure; the one place these paths and names are spelled.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use crate::cri::ContainerStatus;
use crate::pod::{POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL, name, namespace, uid};

/// The kubelet's default `podLogsDir`.
pub const DEFAULT_POD_LOGS_DIR: &str = "/var/log/pods";
/// Where the kubelet keeps its container log symlinks (a constant there).
pub const DEFAULT_CONTAINER_LOGS_DIR: &str = "/var/log/containers";

/// The longest file name ext4 (and most Linux filesystems) takes, in
/// bytes: the kubelet cuts a symlink's name to it.
const MAX_FILE_NAME_BYTES: usize = 255;
/// The symlinks' suffix, kept whole when a name is cut.
const SYMLINK_SUFFIX: &str = ".log";
/// The shortest container ID prefix a runtime resolves.
const MIN_CONTAINER_ID_LEN: usize = 6;

/// The two host directories of container logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirs {
    /// `--pod-logs-dir`: one directory per pod, written by the runtime.
    pub pod_logs_dir: PathBuf,
    /// `--container-logs-dir`: one symlink per container instance.
    pub container_logs_dir: PathBuf,
}

impl Default for LogDirs {
    fn default() -> Self {
        LogDirs {
            pod_logs_dir: PathBuf::from(DEFAULT_POD_LOGS_DIR),
            container_logs_dir: PathBuf::from(DEFAULT_CONTAINER_LOGS_DIR),
        }
    }
}

/// `<pod logs dir>/<namespace>_<name>_<uid>`: where a pod's container logs
/// go (the kubelet's `BuildPodLogsDirectory`).
pub fn pod_log_dir_under(pod_logs_dir: &Path, pod: &Pod) -> PathBuf {
    pod_log_dir_of(pod_logs_dir, namespace(pod), name(pod), uid(pod))
}

/// [`pod_log_dir_under`] from the pod's identity alone, as a container's
/// labels record it (for a container whose pod spec is gone).
pub fn pod_log_dir_of(pod_logs_dir: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    pod_logs_dir.join(pod_log_dir_name(namespace, name, uid))
}

/// `<namespace>_<name>_<uid>`, the name of a pod's log directory.
pub fn pod_log_dir_name(namespace: &str, name: &str, uid: &str) -> String {
    format!("{namespace}_{name}_{uid}")
}

/// The pod UID a pod log directory is named after: the last of exactly
/// three non-empty `_`-separated parts (names, namespaces and UIDs never
/// hold `_`). `None` for a name of another shape, which is never removed.
pub fn pod_uid_of_log_dir(dir_name: &str) -> Option<&str> {
    let parts: Vec<&str> = dir_name.split('_').collect();
    match parts[..] {
        [ns, pod, uid] if !ns.is_empty() && !pod.is_empty() && !uid.is_empty() => Some(uid),
        _ => None,
    }
}

/// `<container>/<restart>.log`, relative to [`pod_log_dir_under`].
pub fn container_log_path(container_name: &str, restart_count: u32) -> String {
    format!("{container_name}/{restart_count}.log")
}

/// The symlink of one container instance:
/// `<container logs dir>/<pod>_<namespace>_<container>-<container id>.log`,
/// with the name before `.log` cut to 251 bytes so that the whole name fits
/// the 255 bytes of a file name (the kubelet's `logSymlink`; a long pod
/// name loses the container ID's end, or more).
pub fn legacy_log_symlink(
    container_logs_dir: &Path,
    pod_name: &str,
    pod_namespace: &str,
    container_name: &str,
    container_id: &str,
) -> PathBuf {
    let mut stem = format!("{pod_name}_{pod_namespace}_{container_name}-{container_id}");
    let max = MAX_FILE_NAME_BYTES - SYMLINK_SUFFIX.len();
    if stem.len() > max {
        // Names are ASCII (DNS labels, hex IDs); a cut inside a wider
        // character moves back to its start rather than split it.
        let mut at = max;
        while !stem.is_char_boundary(at) {
            at -= 1;
        }
        stem.truncate(at);
    }
    container_logs_dir.join(stem + SYMLINK_SUFFIX)
}

/// The container ID (or the prefix of it a cut name kept) a symlink's file
/// name ends with: after its last `-`, before `.log`, at least 6
/// characters (the kubelet's `getContainerIDFromLegacyLogSymlink`). `None`
/// when the name is not one the kubelet or crilet made.
pub fn container_id_of_symlink(file_name: &str) -> Option<&str> {
    let last = file_name.rsplit('-').next()?;
    let id = last.strip_suffix(SYMLINK_SUFFIX)?;
    (id.len() >= MIN_CONTAINER_ID_LEN).then_some(id)
}

/// The log file of a container: the runtime's path when absolute (containerd
/// and CRI-O answer so, and it is authoritative: a container started by a
/// crilet with another `--pod-logs-dir` writes where that one said),
/// otherwise relative to the pod's log directory under `pod_logs_dir`, as
/// CreateContainer was given it. `None` without a log path.
pub fn container_log_file(status: &ContainerStatus, pod_logs_dir: &Path) -> Option<PathBuf> {
    if status.log_path.is_empty() {
        return None;
    }
    let path = Path::new(&status.log_path);
    if path.is_absolute() {
        return Some(path.to_path_buf());
    }
    let label = |k: &str| status.labels.get(k).map(String::as_str);
    let dir = pod_log_dir_of(
        pod_logs_dir,
        label(POD_NAMESPACE_LABEL)?,
        label(POD_NAME_LABEL)?,
        label(POD_UID_LABEL)?,
    );
    Some(dir.join(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "1cd3242a1bed6edbf8a1638c32dc64281d3acf75bd65a542395a81227e80dc22";

    #[test]
    fn the_kubelets_paths() {
        let pods = Path::new(DEFAULT_POD_LOGS_DIR);
        assert_eq!(
            pod_log_dir_of(pods, "default", "web-node-1", "f6da"),
            Path::new("/var/log/pods/default_web-node-1_f6da")
        );
        assert_eq!(container_log_path("main", 3), "main/3.log");
        assert_eq!(
            legacy_log_symlink(
                Path::new(DEFAULT_CONTAINER_LOGS_DIR),
                "web-node-1",
                "default",
                "main",
                ID
            ),
            Path::new(&format!(
                "/var/log/containers/web-node-1_default_main-{ID}.log"
            ))
        );
    }

    /// Measured: the kubelet v1.32 named a 200-character pod's symlink so.
    #[test]
    fn a_long_name_is_cut_to_255_bytes_with_the_suffix_kept() {
        let pod = format!("{}-node-1", "l".repeat(200));
        let container = "container-with-a-rather-long-name-for-testing-truncation";
        let link = legacy_log_symlink(Path::new("/c"), &pod, "kube-system", container, ID);
        let name = link.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            name,
            format!("{pod}_kube-system_container-with-a-rather-long-na.log")
        );
        assert_eq!(name.len(), 255);
        // Exactly at the limit: nothing is cut; one byte over: one byte is.
        let fits = 251 - "_ns_c-".len() - ID.len();
        let at = legacy_log_symlink(Path::new("/c"), &"p".repeat(fits), "ns", "c", ID);
        assert!(at.to_str().unwrap().ends_with(&format!("-{ID}.log")));
        assert_eq!(at.file_name().unwrap().len(), 255);
        let over = legacy_log_symlink(Path::new("/c"), &"p".repeat(fits + 1), "ns", "c", ID);
        let over = over.file_name().unwrap().to_str().unwrap();
        assert_eq!(over.len(), 255);
        assert!(over.ends_with(&format!("-{}.log", &ID[..ID.len() - 1])));
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let link = legacy_log_symlink(Path::new("/c"), &"é".repeat(200), "ns", "c", ID);
        let name = link.file_name().unwrap().to_str().unwrap();
        assert!(name.len() <= 255 && name.ends_with(".log"), "{name}");
    }

    #[test]
    fn container_ids_from_symlink_names() {
        let full = format!("web-node-1_default_main-{ID}.log");
        let rows: [(&str, Option<&str>); 7] = [
            (&full, Some(ID)),
            // A cut name keeps a prefix of the ID, which the runtime resolves.
            ("pod_ns_c-1cd324.log", Some("1cd324")),
            ("pod_ns_c-1cd32.log", None),
            ("pod_ns_c-1cd3242a1bed", None),
            ("pod_ns_c-1cd3242a1bed.log.gz", None),
            // A long pod name can cut the ID away: what is left after the
            // last `-` is taken, as the kubelet takes it.
            ("llll-node-1_kube-system_container-na.log", None),
            ("nodashes.log", Some("nodashes")),
        ];
        for (name, want) in rows {
            assert_eq!(container_id_of_symlink(name), want, "{name}");
        }
    }

    #[test]
    fn the_runtimes_log_path_absolute_or_under_the_pods_directory() {
        let labels = [
            (POD_NAMESPACE_LABEL, "default"),
            (POD_NAME_LABEL, "web"),
            (POD_UID_LABEL, "u1"),
        ];
        let status = |log_path: &str, labelled: bool| ContainerStatus {
            log_path: log_path.into(),
            labels: labels
                .iter()
                .filter(|_| labelled)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        let pods = Path::new("/var/log/pods");
        let old = "/var/lib/crilet/logs/default_web_u1/app/0.log";
        assert_eq!(
            container_log_file(&status(old, true), pods),
            Some(old.into())
        );
        assert_eq!(
            container_log_file(&status("app/1.log", true), pods),
            Some("/var/log/pods/default_web_u1/app/1.log".into())
        );
        assert_eq!(container_log_file(&status("app/1.log", false), pods), None);
        assert_eq!(container_log_file(&status("", true), pods), None);
    }

    #[test]
    fn pod_uids_from_log_directory_names() {
        let rows = [
            ("default_web-node1_0a1b", Some("0a1b")),
            ("kube-system_etcd-n_5e5e-00", Some("5e5e-00")),
            ("default_web_", None),
            ("_web_0a1b", None),
            ("default_web", None),
            ("a_b_c_d", None),
            ("0a1b", None),
        ];
        for (name, want) in rows {
            assert_eq!(pod_uid_of_log_dir(name), want, "{name}");
        }
    }
}
