//! The pod-level cgroup directory named by `cgroup_parent`.
//!
//! runc creates it (in every cgroup v1 hierarchy, or once under cgroup v2)
//! and containerd never removes it: the agent does, once the sandbox is gone.

use std::path::{Path, PathBuf};

/// Where cgroupfs is mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Whether cgroupfs at `root` is cgroup v2 (the unified hierarchy, whose
/// root lists its controllers); otherwise it is v1's one hierarchy per
/// controller.
pub fn is_unified(root: &Path) -> bool {
    root.join("cgroup.controllers").exists()
}

/// Every directory that `cgroup_parent` occupies under `root`: one per v1
/// hierarchy, or the single v2 directory. Only existing directories count.
pub fn pod_cgroup_dirs(root: &Path, cgroup_parent: &str) -> Vec<PathBuf> {
    let rel = cgroup_parent.trim_start_matches('/');
    if rel.is_empty() {
        return Vec::new();
    }
    let mut dirs = Vec::new();
    let unified = root.join(rel);
    if is_unified(root) {
        if unified.is_dir() {
            dirs.push(unified);
        }
        return dirs;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return dirs;
    };
    let mut hierarchies: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        // Symlinks such as cpu,cpuacct -> cpu would name the same directory twice.
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .map(|e| e.path())
        .collect();
    hierarchies.sort();
    for h in hierarchies {
        let dir = h.join(rel);
        if dir.is_dir() {
            dirs.push(dir);
        }
    }
    dirs
}

/// Removes the pod's cgroup directories (children first). A directory that
/// still holds processes cannot be removed; its error is returned after the
/// others were tried.
pub fn remove_pod_cgroup(root: &Path, cgroup_parent: &str) -> std::io::Result<()> {
    let mut first_err = None;
    for dir in pod_cgroup_dirs(root, cgroup_parent) {
        if let Err(e) = remove_tree(&dir) {
            first_err.get_or_insert(std::io::Error::new(
                e.kind(),
                format!("removing cgroup {}: {e}", dir.display()),
            ));
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// cgroupfs directories hold only pseudo-files, so rmdir (children first)
/// is the way to remove them; `remove_dir_all` would try to unlink files.
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            remove_tree(&entry.path())?;
        }
    }
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_pod_directory_in_every_v1_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        for h in ["cpu", "memory", "pids"] {
            std::fs::create_dir_all(root.path().join(h).join("kubepods/podabc")).unwrap();
        }
        std::fs::create_dir_all(root.path().join("freezer")).unwrap();
        let dirs = pod_cgroup_dirs(root.path(), "/kubepods/podabc");
        let names: Vec<_> = dirs
            .iter()
            .map(|d| d.strip_prefix(root.path()).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            names,
            [
                "cpu/kubepods/podabc",
                "memory/kubepods/podabc",
                "pids/kubepods/podabc"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn v2_has_a_single_directory() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpu memory").unwrap();
        std::fs::create_dir_all(root.path().join("kubepods/podabc")).unwrap();
        let dirs = pod_cgroup_dirs(root.path(), "kubepods/podabc");
        assert_eq!(dirs, vec![root.path().join("kubepods/podabc")]);
    }

    #[test]
    fn empty_parent_names_nothing() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("cpu")).unwrap();
        assert!(pod_cgroup_dirs(root.path(), "/").is_empty());
        assert!(pod_cgroup_dirs(root.path(), "").is_empty());
    }

    #[test]
    fn remove_takes_children_first_and_keeps_siblings() {
        let root = tempfile::tempdir().unwrap();
        let pod = root.path().join("cpu/kubepods/podabc");
        std::fs::create_dir_all(pod.join("ctr1")).unwrap();
        std::fs::create_dir_all(root.path().join("cpu/kubepods/podother")).unwrap();
        remove_pod_cgroup(root.path(), "/kubepods/podabc").unwrap();
        assert!(!pod.exists());
        assert!(root.path().join("cpu/kubepods/podother").exists());
        // Removing again is not an error.
        remove_pod_cgroup(root.path(), "/kubepods/podabc").unwrap();
    }

    #[test]
    fn systemd_slices_are_plain_nested_directories() {
        // cgroup v2 with the systemd driver: the path names the slices'
        // directories literally, so the same join and rmdir apply.
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpu memory").unwrap();
        let qos = root.path().join("kubepods.slice/kubepods-burstable.slice");
        let pod = qos.join("kubepods-burstable-poda_b.slice");
        std::fs::create_dir_all(pod.join("cri-containerd-c1.scope")).unwrap();
        std::fs::create_dir_all(qos.join("kubepods-burstable-podother.slice")).unwrap();
        let parent = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda_b.slice";
        assert_eq!(pod_cgroup_dirs(root.path(), parent), vec![pod.clone()]);
        remove_pod_cgroup(root.path(), parent).unwrap();
        assert!(!pod.exists());
        assert!(qos.join("kubepods-burstable-podother.slice").exists());
    }
}
