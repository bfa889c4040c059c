//! The node's cgroup facts behind the container limits the kubelet sends:
//! whether the cgroup hierarchy is v2 (unified), whether a swap limit can
//! be set (the kubelet's `swapControllerAvailable`,
//! `pkg/kubelet/kuberuntime/kuberuntime_container_linux.go`), and whether
//! hugepages can be limited (the hugetlb controller is mounted, or enabled
//! on v2).
//!
//! Invariant: read once at start, as the kubelet reads them; the parse of
//! `/proc/self/cgroup` is pure.

use std::path::Path;

/// What crilet found: cgroup v2, a swap controller, a hugetlb controller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupFacts {
    pub unified: bool,
    pub swap_controller: bool,
    /// runc sets a hugepage limit only through it: without it every
    /// container with one fails ("cannot set hugetlb limit").
    pub hugetlb: bool,
}

/// Reads the facts under `root` (`/sys/fs/cgroup`) with crilet's own
/// cgroup as `proc_self_cgroup` (the text of `/proc/self/cgroup`) gives it.
pub fn read_cgroup_facts(root: &Path, proc_self_cgroup: &str) -> CgroupFacts {
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers"));
    let unified = controllers.is_ok();
    let hugetlb = match &controllers {
        Ok(list) => list.split_whitespace().any(|c| c == "hugetlb"),
        Err(_) => root.join("hugetlb").is_dir(),
    };
    CgroupFacts {
        hugetlb,
        ..swap_facts(root, unified, proc_self_cgroup)
    }
}

fn swap_facts(root: &Path, unified: bool, proc_self_cgroup: &str) -> CgroupFacts {
    // cgroup v1 keeps memory+swap in the memory hierarchy's root; v2 has no
    // swap file in its root, so the kubelet looks in its own cgroup.
    let swap_file = if unified {
        match unified_path(proc_self_cgroup) {
            Some(own) => root
                .join(own.trim_start_matches('/'))
                .join("memory.swap.max"),
            None => {
                return CgroupFacts {
                    unified,
                    ..CgroupFacts::default()
                };
            }
        }
    } else {
        root.join("memory").join("memory.memsw.limit_in_bytes")
    };
    CgroupFacts {
        unified,
        swap_controller: swap_file.exists(),
        hugetlb: false,
    }
}

/// The cgroup v2 path of a `/proc/<pid>/cgroup` text: its `0::<path>`
/// line.
pub fn unified_path(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::trim_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_reads_memsw_in_the_memory_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("memory")).unwrap();
        let self_cgroup = "9:memory:/\n1:name=systemd:/\n";
        assert_eq!(
            read_cgroup_facts(root.path(), self_cgroup),
            CgroupFacts::default()
        );
        std::fs::write(root.path().join("memory/memory.memsw.limit_in_bytes"), "").unwrap();
        assert_eq!(
            read_cgroup_facts(root.path(), self_cgroup),
            CgroupFacts {
                unified: false,
                swap_controller: true,
                hugetlb: false,
            }
        );
        // hugetlb counts only when its hierarchy is mounted.
        std::fs::create_dir_all(root.path().join("hugetlb")).unwrap();
        assert!(read_cgroup_facts(root.path(), self_cgroup).hugetlb);
    }

    #[test]
    fn v2_reads_swap_max_in_the_own_cgroup() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpu memory").unwrap();
        let own = root.path().join("system.slice/crilet.service");
        std::fs::create_dir_all(&own).unwrap();
        let self_cgroup = "0::/system.slice/crilet.service\n";
        let without = read_cgroup_facts(root.path(), self_cgroup);
        assert_eq!((without.unified, without.swap_controller), (true, false));
        std::fs::write(own.join("memory.swap.max"), "max").unwrap();
        let with = read_cgroup_facts(root.path(), self_cgroup);
        assert_eq!((with.unified, with.swap_controller), (true, true));
        // No v2 line to find the own cgroup by: no swap controller.
        let odd = read_cgroup_facts(root.path(), "garbage");
        assert_eq!((odd.unified, odd.swap_controller), (true, false));
        assert!(!with.hugetlb, "not among the controllers");
        std::fs::write(root.path().join("cgroup.controllers"), "cpu hugetlb memory").unwrap();
        assert!(read_cgroup_facts(root.path(), self_cgroup).hugetlb);
    }

    #[test]
    fn the_unified_line_is_found_among_v1_lines() {
        assert_eq!(unified_path("1:name=systemd:/x\n0::/a/b\n"), Some("/a/b"));
        assert_eq!(unified_path("0::/\n"), Some("/"));
        assert_eq!(unified_path("9:memory:/\n"), None);
        assert_eq!(unified_path(""), None);
    }
}
