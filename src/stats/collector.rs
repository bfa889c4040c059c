//! The stats collector: every `--stats-period` one round of CRI stats calls
//! plus host readings, assembled into a [`Sample`] and published whole.
//! Requests are served from the published sample and never call the
//! runtime, so a busy client cannot load containerd.
//!
//! Invariant: this task is the only writer of the sample cache.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::assemble::{RawRound, Sample, assemble};
use super::host;
use super::types::Time;
use crate::cri::{
    Container, ContainerFilter, ContainerState, ContainerStatsFilter, PodSandboxFilter,
    PodSandboxStatsFilter, Runtime, RuntimeError,
};
use crate::images::disk::DiskStats;
use crate::kubeapi::call_count::CallCount;
use crate::kuberuntime::labels::ContainerLabels;
use crate::logs::layout::pod_log_dir_of;

/// The latest sample; `None` until the first round has finished.
pub type SampleCache = watch::Receiver<Option<Arc<Sample>>>;

/// The kubelet's default housekeeping interval for stats.
pub const DEFAULT_STATS_PERIOD: Duration = Duration::from_secs(10);

pub struct Collector {
    pub runtime: Arc<dyn Runtime>,
    /// While any sandbox stops, a round leaves out ListPodSandboxStats and
    /// sums container stats instead (see `kubeapi::call_count`).
    pub sandbox_stops: CallCount,
    pub disk: Arc<dyn DiskStats>,
    pub node_name: String,
    /// crilet's root directory: its filesystem is the node fs.
    pub root_dir: PathBuf,
    /// `--pod-logs-dir`: where the container logs are counted.
    pub pod_logs_dir: PathBuf,
    /// `/proc` in production.
    pub proc_root: PathBuf,
    pub period: Duration,
}

impl Collector {
    /// Samples every period until `cancel`, publishing into `tx`.
    pub async fn run(self, tx: watch::Sender<Option<Arc<Sample>>>, cancel: CancellationToken) {
        let mut sandbox_stats = true;
        let mut failures = 0u32;
        let mut ticker = tokio::time::interval(self.period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut previous: Option<Arc<Sample>> = None;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = ticker.tick() => {}
            }
            match self.round(previous.as_deref(), &mut sandbox_stats).await {
                Ok(sample) => {
                    if failures > 0 {
                        tracing::info!(after = failures, "stats collection works again");
                    }
                    failures = 0;
                    let sample = Arc::new(sample);
                    previous = Some(Arc::clone(&sample));
                    tx.send_replace(Some(sample));
                }
                Err(e) => {
                    failures += 1;
                    // Loud at first, then once a minute-ish: the runtime may
                    // be down for long, and the pods' own logs say so too.
                    if failures <= 3 || failures % 6 == 0 {
                        tracing::warn!(error = %e, failures, "stats collection failed; serving the previous sample");
                    }
                }
            }
        }
    }

    /// One round: reads everything, assembles against `previous`.
    pub async fn round(
        &self,
        previous: Option<&Sample>,
        sandbox_stats_supported: &mut bool,
    ) -> Result<Sample, RuntimeError> {
        let rt = &self.runtime;
        let sandboxes = rt.list_pod_sandbox(&PodSandboxFilter::default()).await?;
        let containers = rt.list_containers(&ContainerFilter::default()).await?;
        let container_stats = rt
            .list_container_stats(&ContainerStatsFilter::default())
            .await?;
        let sandbox_stopping = self.sandbox_stops.any();
        if sandbox_stopping && *sandbox_stats_supported {
            tracing::debug!("a sandbox is stopping; pod stats from container stats this round");
        }
        let sandbox_stats = if *sandbox_stats_supported && !sandbox_stopping {
            match rt
                .list_pod_sandbox_stats(&PodSandboxStatsFilter::default())
                .await
            {
                Ok(s) => Some(s),
                Err(e) if e.code() == tonic::Code::Unimplemented => {
                    tracing::info!(
                        "the runtime has no ListPodSandboxStats; pod stats are the sums of container stats"
                    );
                    *sandbox_stats_supported = false;
                    None
                }
                Err(e) => {
                    tracing::warn!(error = %e, "ListPodSandboxStats failed; pod stats from container stats this round");
                    None
                }
            }
        } else {
            None
        };
        let image_fs_usage = match rt.image_fs_info().await {
            Ok(info) => info.image_filesystems.into_iter().next(),
            Err(e) => {
                tracing::warn!(error = %e, "ImageFsInfo failed");
                None
            }
        };

        // The blocking part: /proc, statvfs and the log directories.
        let disk = Arc::clone(&self.disk);
        let (proc_root, root_dir, logs, node_name) = (
            self.proc_root.clone(),
            self.root_dir.clone(),
            self.pod_logs_dir.clone(),
            self.node_name.clone(),
        );
        let mountpoint = image_fs_usage
            .as_ref()
            .map(|u| PathBuf::from(&u.mountpoint));
        let log_dirs = log_dirs(&logs, &containers);
        let (node, image_fs, log_fs, log_usage) = tokio::task::spawn_blocking(move || {
            let mut node = host::read(&proc_root, &node_name);
            node.root_fs = disk.stat(&root_dir).ok();
            let image_fs = mountpoint.and_then(|m| disk.stat(&m).ok());
            let log_fs = disk
                .stat(if logs.exists() { &logs } else { &root_dir })
                .ok();
            let log_usage: HashMap<String, (u64, u64)> = log_dirs
                .into_iter()
                .filter_map(|(id, dir)| Some((id, dir_usage(&dir)?)))
                .collect();
            (node, image_fs, log_fs, log_usage)
        })
        .await
        .unwrap_or_default();

        let raw = RawRound {
            time: now(),
            node,
            sandboxes,
            containers,
            sandbox_stats,
            container_stats,
            log_usage,
            log_fs,
            image_fs_usage,
            image_fs,
        };
        Ok(assemble(&raw, previous))
    }
}

fn now() -> Time {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Time(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// `<pod logs dir>/<ns>_<name>_<uid>/<container>` of each running
/// container crilet labelled (the kubelet's `BuildContainerLogsDirectory`:
/// the directory the mapping gives a container, not the runtime's path).
fn log_dirs(pod_logs_dir: &Path, containers: &[Container]) -> Vec<(String, PathBuf)> {
    containers
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .filter_map(|c| {
            let l = ContainerLabels::from_labels(&c.labels, &c.annotations).ok()?;
            let pod_dir = pod_log_dir_of(pod_logs_dir, &l.pod_namespace, &l.pod_name, &l.pod_uid);
            Some((c.id.clone(), pod_dir.join(&l.container_name)))
        })
        .collect()
}

/// Disk usage (allocated bytes) and inode count of a directory tree, as
/// `du` counts them; `None` when the directory does not exist.
fn dir_usage(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir).ok()?;
    let (mut bytes, mut inodes) = (meta.blocks() * 512, 1u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(m) = entry.metadata() else { continue };
            bytes += m.blocks() * 512;
            inodes += 1;
            if m.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    Some((bytes, inodes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::{
        ContainerConfig, ContainerMetadata, FakeRuntime, PodSandboxConfig, PodSandboxMetadata,
    };
    use crate::images::disk::Statvfs;
    use crate::kuberuntime::labels::PodSandboxLabels;

    /// A fake runtime holding one kubelet-labelled pod with one running container.
    async fn runtime_with_a_pod() -> Arc<FakeRuntime> {
        let rt = Arc::new(FakeRuntime::new());
        let sl = PodSandboxLabels {
            pod_name: "web-n1".into(),
            pod_namespace: "default".into(),
            pod_uid: "u1".into(),
            pod_labels: Default::default(),
            pod_annotations: Default::default(),
        };
        let sandbox = PodSandboxConfig {
            metadata: PodSandboxMetadata {
                name: "web-n1".into(),
                uid: "u1".into(),
                namespace: "default".into(),
                attempt: 0,
            },
            labels: sl.to_labels(),
            annotations: sl.to_annotations(),
            ..Default::default()
        };
        let cl = ContainerLabels {
            pod_name: "web-n1".into(),
            pod_namespace: "default".into(),
            pod_uid: "u1".into(),
            container_name: "app".into(),
            hash: 1,
            restart_count: 0,
            termination_message_path: "/dev/termination-log".into(),
            termination_message_policy: "File".into(),
            termination_grace_period: None,
            deletion_grace_period: None,
        };
        let config = ContainerConfig {
            metadata: ContainerMetadata {
                name: "app".into(),
                attempt: 0,
            },
            image: "busybox".into(),
            labels: cl.to_labels(),
            annotations: cl.to_annotations(),
            ..Default::default()
        };
        rt.add_image("busybox", 1000);
        let sb = rt.run_pod_sandbox(&sandbox).await.unwrap();
        let c = rt.create_container(&sb, &config, &sandbox).await.unwrap();
        rt.start_container(&c).await.unwrap();
        rt
    }

    fn collector(rt: Arc<FakeRuntime>, root: &Path) -> Collector {
        Collector {
            runtime: rt,
            sandbox_stops: CallCount::default(),
            disk: Arc::new(Statvfs),
            node_name: "n1".into(),
            root_dir: root.to_path_buf(),
            pod_logs_dir: root.join("pod-logs"),
            proc_root: PathBuf::from("/proc"),
            period: DEFAULT_STATS_PERIOD,
        }
    }

    #[tokio::test]
    async fn without_sandbox_stats_the_collector_falls_back_for_good() {
        let rt = runtime_with_a_pod().await;
        let root = tempfile::tempdir().unwrap();
        let c = collector(rt.clone(), root.path());
        let mut supported = true;
        rt.fail_next(
            "ListPodSandboxStats",
            tonic::Status::unimplemented("not here"),
        );
        let s = c.round(None, &mut supported).await.unwrap();
        assert!(!supported);
        let pod = &s.pods["u1"];
        assert_eq!(pod.containers.len(), 1);
        assert!(pod.cpu.is_some(), "summed from the container");
        assert!(pod.process_stats.is_none(), "only sandbox stats have it");
        let before = sandbox_stats_asked(&rt);
        c.round(Some(&s), &mut supported).await.unwrap();
        assert_eq!(sandbox_stats_asked(&rt), before, "not asked again");
    }

    fn sandbox_stats_asked(rt: &FakeRuntime) -> usize {
        (rt.ops().iter())
            .filter(|op| **op == "ListPodSandboxStats")
            .count()
    }

    /// CRI-O holds removals behind a ListPodSandboxStats sent while a
    /// sandbox stops: none is sent then, and the next round asks again.
    #[tokio::test]
    async fn no_sandbox_stats_are_asked_while_a_sandbox_stops() {
        let rt = runtime_with_a_pod().await;
        let root = tempfile::tempdir().unwrap();
        let c = collector(rt.clone(), root.path());
        let mut supported = true;
        let stopping = c.sandbox_stops.begin();
        let s = c.round(None, &mut supported).await.unwrap();
        assert_eq!(sandbox_stats_asked(&rt), 0);
        assert!(supported);
        assert!(s.pods["u1"].cpu.is_some(), "summed from the container");
        assert!(s.pods["u1"].process_stats.is_none());
        drop(stopping);
        let s = c.round(Some(&s), &mut supported).await.unwrap();
        assert_eq!(sandbox_stats_asked(&rt), 1);
        assert!(s.pods["u1"].process_stats.is_some());
    }

    #[tokio::test]
    async fn a_transient_sandbox_stats_error_falls_back_for_one_round() {
        let rt = runtime_with_a_pod().await;
        let root = tempfile::tempdir().unwrap();
        let c = collector(rt.clone(), root.path());
        let mut supported = true;
        rt.fail_next("ListPodSandboxStats", tonic::Status::unavailable("busy"));
        let s = c.round(None, &mut supported).await.unwrap();
        assert!(supported);
        assert!(s.pods["u1"].process_stats.is_none());
        let s = c.round(Some(&s), &mut supported).await.unwrap();
        assert_eq!(
            s.pods["u1"].process_stats.as_ref().unwrap().process_count,
            Some(1)
        );
        assert_eq!(s.node.node_name, "n1");
        assert!(
            s.node.runtime.as_ref().unwrap().image_fs.is_none(),
            "the fake's mountpoint does not exist"
        );
    }

    #[tokio::test]
    async fn a_failing_runtime_fails_the_round() {
        let rt = runtime_with_a_pod().await;
        let root = tempfile::tempdir().unwrap();
        let c = collector(rt.clone(), root.path());
        rt.fail_next("ListPodSandbox", tonic::Status::unavailable("down"));
        let err = c.round(None, &mut true).await.unwrap_err();
        assert!(err.to_string().contains("ListPodSandbox"), "{err}");
    }

    #[test]
    fn dir_usage_counts_allocated_bytes_and_inodes() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(dir_usage(&dir.path().join("missing")), None);
        std::fs::create_dir(dir.path().join("c")).unwrap();
        std::fs::write(dir.path().join("c/0.log"), vec![b'x'; 10_000]).unwrap();
        let (bytes, inodes) = dir_usage(dir.path()).unwrap();
        assert_eq!(inodes, 3);
        assert!(bytes >= 10_000, "{bytes}");
    }
}
