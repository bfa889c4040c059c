//! Orphaned pod leftovers on the host: `<root>/pods/<uid>`, the log
//! directories `<pod-logs-dir>/<namespace>_<name>_<uid>` and the pod
//! cgroups (`<cgroup-root>/kubepods[/<qos>]/pod<uid>`, or the systemd
//! slices) of pods crilet no longer knows.
//!
//! `<root>/logs`, where crilet kept pod logs before `--pod-logs-dir`, is
//! swept as the pod logs directory is: a pod that ran across an upgrade
//! keeps writing there (its runtime objects name that place), and its
//! directory goes once the pod is gone; the directory itself goes once
//! empty. Nothing is ever written there.
//!
//! A pod's worker removes all three when it terminates the pod. But a
//! crilet killed between removing a pod's runtime objects and its
//! directories leaves them behind; a pod whose spec is gone (removed while
//! crilet was down, terminated as an orphan) has no name to find its log
//! directory by; and a RunPodSandbox cut short by a crilet killed in the
//! middle leaves the pod cgroup runc made, with no sandbox to find it by.
//! The kubelet sweeps all three (housekeeping's orphaned pod directories
//! and pod cgroups, the container GC's pod log directories); so does the
//! sync loop, after a relist: at most every [`SWEEP_PERIOD`], and only when
//! something can have become an orphan since the last sweep (the set of pods
//! it knows changed, or the last sweep left something behind), or else every
//! [`SWEEP_SAFETY_PERIOD`]. The kubelet reads the directories every 2 s
//! whatever happened; on an idle node that was most of crilet's file system
//! calls.
//!
//! Invariant: something is removed only when its UID has no pod in the
//! manager, no worker, no runtime object and every source has reported.
//! The sync loop is the only dispatcher of workers, and the sweep runs in
//! it, so no worker can start for that UID while it is removed. Processes
//! left in such a pod cgroup are killed (no runtime object owns them), and
//! the cgroup goes once they are gone.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use crate::cm::cgroup::{pod_cgroup_dirs, remove_pod_cgroup};
use crate::kuberuntime::mapping::{self, NodeContext};
use crate::logs::layout::pod_uid_of_log_dir;
use crate::units::fnv::fnv1a_64;

/// How often the sync loop sweeps at most (the kubelet's housekeeping
/// period).
pub const SWEEP_PERIOD: Duration = Duration::from_secs(2);
/// How often it sweeps when nothing it knows changed.
pub const SWEEP_SAFETY_PERIOD: Duration = Duration::from_secs(60);

/// Whether a sweep is due: never before `SWEEP_PERIOD` since the last one;
/// then when the pods it knows changed or the last sweep left something,
/// or `SWEEP_SAFETY_PERIOD` has passed.
pub fn sweep_due(since_last: Option<Duration>, known_changed: bool, unfinished: bool) -> bool {
    match since_last {
        None => true,
        Some(since) if since < SWEEP_PERIOD => false,
        Some(since) => known_changed || unfinished || since >= SWEEP_SAFETY_PERIOD,
    }
}

/// An order-free fingerprint of a set of UIDs: changes when one comes or
/// goes (FNV-1a of each, summed, and the count).
pub fn known_fingerprint(known: &HashSet<&str>) -> (usize, u64) {
    let sum = (known.iter()).fold(0u64, |acc, uid| acc.wrapping_add(fnv1a_64(uid.as_bytes())));
    (known.len(), sum)
}

/// The pod UID a directory is named after: `<uid>` under `<root>/pods`,
/// `<namespace>_<name>_<uid>` under a pod logs directory (`logs`; names
/// and UIDs never hold `_`). `None` for a name of another shape.
pub fn dir_uid<'a>(kind: &str, name: &'a str) -> Option<&'a str> {
    match kind {
        "pods" => (!name.is_empty() && !name.starts_with('.')).then_some(name),
        "logs" => pod_uid_of_log_dir(name),
        _ => None,
    }
}

/// `<root>/logs`, the pod logs directory of crilets before
/// `--pod-logs-dir`, unless it is the pod logs directory now.
pub fn legacy_pod_logs_dir(node: &NodeContext) -> Option<PathBuf> {
    let dir = node.root_dir.join("logs");
    (dir != node.log_dirs.pod_logs_dir).then_some(dir)
}

/// Where pod cgroups live for this node, one entry per QoS class: the
/// parent cgroup and the pod's name in it around the UID (`pod` and `` for
/// cgroupfs, `kubepods-besteffort-pod` and `.slice` for systemd).
pub fn pod_cgroup_slots(node: &NodeContext) -> Vec<(String, String, String)> {
    const MARK: &str = "SWEEPMARK";
    mapping::cgroup_parent_candidates(node, MARK)
        .into_iter()
        .filter_map(|path| {
            let (parent, leaf) = path.rsplit_once('/')?;
            let (prefix, suffix) = leaf.split_once(MARK)?;
            Some((parent.to_owned(), prefix.to_owned(), suffix.to_owned()))
        })
        .collect()
}

/// What a sweep would remove: the pod directories under `node.root_dir`,
/// the pod log directories (and those of [`legacy_pod_logs_dir`]) and the
/// pod cgroups (as cgroup paths) whose UID is not in `known`.
pub fn orphaned(
    node: &NodeContext,
    cgroup_fs: &Path,
    known: &HashSet<&str>,
) -> (Vec<PathBuf>, Vec<String>) {
    let mut dirs = Vec::new();
    let parents = [
        ("pods", Some(node.root_dir.join("pods"))),
        ("logs", Some(node.log_dirs.pod_logs_dir.clone())),
        ("logs", legacy_pod_logs_dir(node)),
    ];
    for (kind, parent) in parents {
        let Some(Ok(entries)) = parent.map(std::fs::read_dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            if !e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            let name = e.file_name();
            match name.to_str().and_then(|n| dir_uid(kind, n)) {
                Some(uid) if !known.contains(uid) => dirs.push(e.path()),
                _ => {}
            }
        }
    }
    dirs.sort();
    let kept: HashSet<String> = (known.iter())
        .flat_map(|uid| mapping::cgroup_parent_candidates(node, uid))
        .collect();
    let mut cgroups = Vec::new();
    for (parent, prefix, suffix) in pod_cgroup_slots(node) {
        for dir in pod_cgroup_dirs(cgroup_fs, &parent) {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.filter_map(Result::ok) {
                let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let is_pod = name.len() > prefix.len() + suffix.len()
                    && name.starts_with(&prefix)
                    && name.ends_with(&suffix)
                    && e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                let path = format!("{parent}/{name}");
                if is_pod && !kept.contains(&path) && !cgroups.contains(&path) {
                    cgroups.push(path);
                }
            }
        }
    }
    cgroups.sort();
    (dirs, cgroups)
}

/// Sends SIGKILL to every process in the pod cgroup's tree (every
/// hierarchy); returns how many it signalled.
pub fn kill_pod_cgroup_processes(cgroup_fs: &Path, cgroup: &str) -> usize {
    let mut pids = HashSet::new();
    for dir in pod_cgroup_dirs(cgroup_fs, cgroup) {
        collect_pids(&dir, &mut pids);
    }
    let signalled = pids
        .iter()
        .filter_map(|pid| rustix::process::Pid::from_raw(*pid));
    signalled
        .filter(|pid| rustix::process::kill_process(*pid, rustix::process::Signal::KILL).is_ok())
        .count()
}

fn collect_pids(dir: &Path, pids: &mut HashSet<i32>) {
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            collect_pids(&e.path(), pids);
        }
    }
}

/// The sync loop's sweeps: when the next is due, and which failures were
/// already said (a busy cgroup would otherwise be warned about every time).
#[derive(Default)]
pub struct Sweeper {
    last_at: Option<Instant>,
    /// The known pods at the last sweep ([`known_fingerprint`]).
    last_known: (usize, u64),
    /// The last sweep removed, failed or killed something: sweep again.
    unfinished: bool,
    warned: HashSet<String>,
}

impl Sweeper {
    /// Sweeps if one is due ([`sweep_due`]); returns what it removed
    /// (directories, then cgroup paths).
    pub fn maybe_sweep(
        &mut self,
        node: &NodeContext,
        cgroup_fs: &Path,
        known: &HashSet<&str>,
    ) -> Vec<String> {
        let now = Instant::now();
        let fingerprint = known_fingerprint(known);
        let since = self.last_at.map(|at| now.saturating_duration_since(at));
        if !sweep_due(since, fingerprint != self.last_known, self.unfinished) {
            return Vec::new();
        }
        self.last_at = Some(now);
        self.last_known = fingerprint;
        let (dirs, cgroups) = orphaned(node, cgroup_fs, known);
        // Anything found at all is looked at again next time: a removal
        // can fail, and a busy cgroup waits for its processes to die.
        self.unfinished = !dirs.is_empty() || !cgroups.is_empty();
        let mut removed = Vec::new();
        for dir in dirs {
            let shown = dir.display().to_string();
            // A pod directory's subPath binds are unmounted first (or it is kept).
            match crate::volume::subpath::remove_pod_dir(&dir) {
                Ok(()) => removed.push(shown),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => self.warn(shown, e),
            }
        }
        // The old pod logs directory, once its last pod's directory went
        // (an error says it is still in use, or already gone).
        if let Some(legacy) = legacy_pod_logs_dir(node) {
            if std::fs::remove_dir(&legacy).is_ok() {
                removed.push(legacy.display().to_string());
            }
        }
        for cgroup in cgroups {
            // Processes no runtime knows, such as a `runc init` left behind by
            // a containerd killed during RunPodSandbox: killed first, as the
            // kubelet's pod cgroup cleanup does; the rmdir may have to wait
            // for the next sweep while they die.
            let killed = kill_pod_cgroup_processes(cgroup_fs, &cgroup);
            if killed > 0 {
                tracing::warn!(
                    cgroup,
                    killed,
                    "killed processes in the cgroup of a pod that no source wants and the runtime no longer has"
                );
            }
            match remove_pod_cgroup(cgroup_fs, &cgroup) {
                Ok(()) => removed.push(cgroup),
                Err(e) if killed > 0 => {
                    tracing::debug!(cgroup, error = %e, "pod cgroup still busy")
                }
                Err(e) => self.warn(cgroup, e),
            }
        }
        removed
    }

    fn warn(&mut self, what: String, e: std::io::Error) {
        if self.warned.insert(what.clone()) {
            tracing::warn!(path = %what, error = %e, "could not remove an orphaned pod directory or cgroup");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::CgroupDriver;

    #[test]
    fn a_sweep_is_due_when_something_can_have_become_an_orphan() {
        let s = Duration::from_secs;
        for (since, changed, unfinished, want) in [
            (None, false, false, true),
            (Some(s(1)), true, true, false),
            (Some(s(2)), false, false, false),
            (Some(s(2)), true, false, true),
            (Some(s(2)), false, true, true),
            (Some(s(59)), false, false, false),
            (Some(s(60)), false, false, true),
        ] {
            assert_eq!(
                sweep_due(since, changed, unfinished),
                want,
                "{since:?} {changed} {unfinished}"
            );
        }
    }

    #[test]
    fn the_fingerprint_follows_the_set_not_its_order() {
        let set = |uids: &[&'static str]| uids.iter().copied().collect::<HashSet<&str>>();
        let a = known_fingerprint(&set(&["u1", "u2", "u3"]));
        assert_eq!(a, known_fingerprint(&set(&["u3", "u1", "u2"])));
        assert_ne!(a, known_fingerprint(&set(&["u1", "u2"])));
        assert_ne!(a, known_fingerprint(&set(&["u1", "u2", "u4"])));
        assert_ne!(known_fingerprint(&set(&[])), known_fingerprint(&set(&[""])));
    }

    #[test]
    fn uids_by_directory_kind() {
        let rows = [
            ("pods", "0a1b", Some("0a1b")),
            ("pods", "5e5e-00", Some("5e5e-00")),
            ("pods", "", None),
            ("pods", ".tmp", None),
            ("logs", "default_web-node1_0a1b", Some("0a1b")),
            ("logs", "kube-system_etcd-n_5e5e-00", Some("5e5e-00")),
            ("logs", "default_web_", None),
            ("logs", "_web_0a1b", None),
            ("logs", "default_web", None),
            ("logs", "a_b_c_d", None),
            ("volumes", "0a1b", None),
        ];
        for (kind, name, want) in rows {
            assert_eq!(dir_uid(kind, name), want, "{kind}/{name}");
        }
    }

    fn node(root: &Path, driver: CgroupDriver, cgroup_root: &str) -> NodeContext {
        NodeContext {
            node_name: "n".into(),
            root_dir: root.to_path_buf(),
            log_dirs: crate::logs::layout::LogDirs {
                pod_logs_dir: root.join("pod-logs"),
                container_logs_dir: root.join("containers"),
            },
            cgroup_root: cgroup_root.into(),
            cgroup_driver: driver,
            host_dns: Default::default(),
            host_ip: "10.0.0.1".into(),
            memory_capacity: 1 << 30,
            oom_score_adj_floor: None,
            ..Default::default()
        }
    }

    fn made(root: &Path, rel: &str) -> PathBuf {
        let p = root.join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn pod_cgroup_slots_by_driver() {
        let root = Path::new("/r");
        let slot = |p: &str, a: &str, b: &str| (p.to_owned(), a.to_owned(), b.to_owned());
        assert_eq!(
            pod_cgroup_slots(&node(root, CgroupDriver::Cgroupfs, "/soak")),
            [
                slot("/soak/kubepods", "pod", ""),
                slot("/soak/kubepods/burstable", "pod", ""),
                slot("/soak/kubepods/besteffort", "pod", ""),
            ]
        );
        assert_eq!(
            pod_cgroup_slots(&node(root, CgroupDriver::Systemd, "/")),
            [
                slot("/kubepods.slice", "kubepods-pod", ".slice"),
                slot(
                    "/kubepods.slice/kubepods-burstable.slice",
                    "kubepods-burstable-pod",
                    ".slice"
                ),
                slot(
                    "/kubepods.slice/kubepods-besteffort.slice",
                    "kubepods-besteffort-pod",
                    ".slice"
                ),
            ]
        );
    }

    #[test]
    fn sweep_removes_only_what_no_known_pod_owns() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let cg = root.join("cgroup");
        made(root, "pods/live/containers/app");
        made(root, "pods/gone/containers/app");
        std::fs::write(
            made(root, "pod-logs/default_web-n_gone/app").join("0.log"),
            "x",
        )
        .unwrap();
        made(root, "pod-logs/default_web-n_live/app");
        made(root, "pod-logs/not-a-pod-dir");
        // Before --pod-logs-dir: the same rule.
        made(root, "logs/default_old-n_gone/app");
        made(root, "logs/default_old-n_live/app");
        std::fs::write(root.join("pods/stray-file"), "x").unwrap();
        // Two v1 hierarchies; the QoS parents are not pods.
        for h in ["cpu", "memory"] {
            made(
                &cg,
                &format!("{h}/soak/kubepods/besteffort/podgone/sandbox"),
            );
            made(&cg, &format!("{h}/soak/kubepods/burstable/podlive"));
            made(&cg, &format!("{h}/soak/kubepods/podgone2"));
        }
        let node = node(root, CgroupDriver::Cgroupfs, "/soak");
        let known = HashSet::from(["live"]);
        let mut sweeper = Sweeper::default();
        let removed = sweeper.maybe_sweep(&node, &cg, &known);
        let shown = |rel: &str| root.join(rel).display().to_string();
        assert_eq!(
            removed,
            [
                shown("logs/default_old-n_gone"),
                shown("pod-logs/default_web-n_gone"),
                shown("pods/gone"),
                "/soak/kubepods/besteffort/podgone".into(),
                "/soak/kubepods/podgone2".into(),
            ]
        );
        for kept in [
            "pods/live/containers/app",
            "pod-logs/default_web-n_live/app",
            "pod-logs/not-a-pod-dir",
            "logs/default_old-n_live/app",
            "pods/stray-file",
            "cgroup/cpu/soak/kubepods/burstable/podlive",
            "cgroup/memory/soak/kubepods/besteffort",
        ] {
            assert!(root.join(kept).exists(), "{kept} was removed");
        }
        assert!(!cg.join("memory/soak/kubepods/podgone2").exists());
        // Not again before the period; then nothing is left to remove.
        made(root, "pods/gone-later");
        assert!(sweeper.maybe_sweep(&node, &cg, &known).is_empty());
        assert!(root.join("pods/gone-later").exists());
        // Once the last pod of before goes, so does the old directory.
        let removed = Sweeper::default().maybe_sweep(&node, &cg, &HashSet::new());
        assert!(removed.contains(&shown("logs")), "{removed:?}");
        assert!(!root.join("logs").exists());
        assert!(
            root.join("pod-logs").exists(),
            "the pod logs directory stays"
        );
    }

    #[test]
    fn a_pod_logs_dir_under_the_old_name_is_swept_once() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mut node = node(root, CgroupDriver::Cgroupfs, "/");
        node.log_dirs.pod_logs_dir = root.join("logs");
        made(root, "logs/default_web-n_gone");
        let (dirs, _) = orphaned(&node, &root.join("cgroup"), &HashSet::new());
        assert_eq!(dirs, [root.join("logs/default_web-n_gone")]);
        let removed = Sweeper::default().maybe_sweep(&node, &root.join("cgroup"), &HashSet::new());
        assert_eq!(
            removed,
            [root.join("logs/default_web-n_gone").display().to_string()]
        );
        assert!(root.join("logs").exists(), "the pod logs directory stays");
    }

    #[test]
    fn processes_left_in_an_orphaned_pod_cgroup_are_killed() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        // A fake cgroupfs: the process sits in the pod's container cgroup.
        let container = made(&cg, "pids/kubepods/besteffort/podgone/c1");
        std::fs::write(container.join("cgroup.procs"), format!("{}\n", child.id())).unwrap();
        std::fs::write(cg.join("pids/kubepods/besteffort/podgone/cgroup.procs"), "").unwrap();
        assert_eq!(
            kill_pod_cgroup_processes(&cg, "/kubepods/besteffort/podgone"),
            1
        );
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9));
        assert_eq!(
            kill_pod_cgroup_processes(&cg, "/kubepods/besteffort/podnone"),
            0
        );
    }

    #[tokio::test(start_paused = true)]
    async fn sweeps_at_most_once_per_period_and_only_when_something_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let node = node(tmp.path(), CgroupDriver::Cgroupfs, "/");
        let cg = tmp.path().join("cgroup");
        let mut sweeper = Sweeper::default();
        let none = HashSet::new();
        assert!(sweeper.maybe_sweep(&node, &cg, &none).is_empty());
        made(tmp.path(), "pods/gone");
        // Within the period, not even a change sweeps.
        tokio::time::advance(SWEEP_PERIOD - Duration::from_millis(1)).await;
        let one = HashSet::from(["u1"]);
        assert!(sweeper.maybe_sweep(&node, &cg, &one).is_empty());
        // After it, a change in the known pods does.
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(sweeper.maybe_sweep(&node, &cg, &one).len(), 1);
        // It found something: the next period looks again (a removal can
        // fail), and finds nothing more.
        tokio::time::advance(SWEEP_PERIOD).await;
        assert!(sweeper.maybe_sweep(&node, &cg, &one).is_empty());
        assert!(!sweeper.unfinished);
        // Nothing changed: only the safety period sweeps again.
        made(tmp.path(), "pods/gone-too");
        tokio::time::advance(SWEEP_PERIOD).await;
        assert!(sweeper.maybe_sweep(&node, &cg, &one).is_empty());
        tokio::time::advance(SWEEP_SAFETY_PERIOD - SWEEP_PERIOD).await;
        assert_eq!(sweeper.maybe_sweep(&node, &cg, &one).len(), 1);
    }

    #[test]
    fn systemd_slices_of_dashed_uids_are_matched_escaped() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        let slices = "cpu/kubepods.slice/kubepods-besteffort.slice";
        made(&cg, &format!("{slices}/kubepods-besteffort-poda_b.slice"));
        made(&cg, &format!("{slices}/kubepods-besteffort-podc_d.slice"));
        let node = node(tmp.path(), CgroupDriver::Systemd, "/");
        let (_, cgroups) = orphaned(&node, &cg, &HashSet::from(["a-b"]));
        assert_eq!(
            cgroups,
            ["/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podc_d.slice"]
        );
    }

    #[test]
    fn a_missing_root_dir_is_nothing_to_sweep() {
        let tmp = tempfile::tempdir().unwrap();
        let node = node(&tmp.path().join("absent"), CgroupDriver::Cgroupfs, "/");
        let (dirs, cgroups) = orphaned(&node, &tmp.path().join("absent"), &HashSet::new());
        assert!(dirs.is_empty() && cgroups.is_empty());
    }
}
